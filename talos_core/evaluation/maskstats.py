"""Mask statistics: where the trainable entries are (per tensor, layer type, block) and how masks overlap.

* :func:`layer_info` classifies a parameter name of any of the three families (open_clip visual
  towers, Hugging Face BERT-style encoders, T5) into a block index and a layer type among
  ``q, k, v, qkv, attn_out, mlp_in, mlp_out, layernorm, bias, conv, embedding, other``
  (:mod:`talos_core.models.param_names`, re-exported here with :func:`classify_layer` and :func:`block_indices`).
* :func:`mask_table` gives one row per (task, tensor) with the density ``|c_t ∩ tensor| / numel`` of
  the mask ``c`` (paper Sec. 3.2). open_clip's fused ``in_proj_weight`` (rows ``[q; k; v]``) is split
  into three rows ``<name>[q]``, ``<name>[k]``, ``<name>[v]`` of types q, k, v.
* :func:`mask_iou` — ``|A ∩ B| / |A ∪ B|`` over all entries (paper App. "sharing analysis", mask
  IoU between tasks); :func:`mask_iou_matrix` between tasks, :func:`cross_method_iou` between methods.

Methods without a mask (non-linear FT, ...) are described by their task vector's support (non-zero
entries), see :func:`run_mask`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import torch

from talos_core.errors import TalosError

# the parameter-name reading sits below the merge methods, which need it too; re-exported for the callers here
from talos_core.models.param_names import (  # noqa: F401
    LAYER_TYPES,
    LayerInfo,
    block_indices,
    classify_layer,
    layer_info,
)

Mask = Mapping[str, torch.Tensor]


# --------------------------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------------------------
MASK_COLUMNS = ["task", "param", "block", "layer_type", "numel", "trainable", "density"]


def _rows_for(task: str, name: str, mask: torch.Tensor, block: int, split_qkv: bool) -> list[dict]:
    layer_type = classify_layer(name)
    m = mask.to(torch.bool)
    if split_qkv and layer_type == "qkv" and m.dim() >= 1 and m.shape[0] % 3 == 0:
        parts = m.chunk(3, dim=0)
        return [_row(task, f"{name}[{t}]", p, block, t) for t, p in zip(("q", "k", "v"), parts)]
    return [_row(task, name, m, block, layer_type)]


def _row(task: str, param: str, m: torch.Tensor, block: int, layer_type: str) -> dict:
    numel = int(m.numel())
    trainable = int(m.sum())
    return {"task": task, "param": param, "block": block, "layer_type": layer_type, "numel": numel,
            "trainable": trainable, "density": trainable / numel if numel else float("nan")}


def mask_table(masks: Mapping[str, Mask], *, split_qkv: bool = True) -> pd.DataFrame:
    """One row per (task, tensor): ``task, param, block, layer_type, numel, trainable, density``.

    >>> mask_table({"t": {"encoder.layer.0.attention.self.query.weight": torch.tensor([True, False])}}).density.tolist()
    [0.5]
    """
    rows: list[dict] = []
    for task, mask in masks.items():
        blocks = block_indices(list(mask))
        for name, m in mask.items():
            rows.extend(_rows_for(task, name, m, blocks[name], split_qkv))
    return pd.DataFrame(rows, columns=MASK_COLUMNS)


def density_by_layer(table: pd.DataFrame) -> pd.DataFrame:
    """Aggregate a :func:`mask_table` to ``task, block, layer_type, numel, trainable, density``."""
    g = table.groupby(["task", "block", "layer_type"], as_index=False)[["numel", "trainable"]].sum()
    g["density"] = g["trainable"] / g["numel"]
    return g


def vector_support(vector) -> dict[str, torch.Tensor]:
    """Boolean mask of the non-zero entries of a :class:`~talos_core.vectors.TaskVector`."""
    return {n: vector.dense(n) != 0 for n in vector.names()}


def run_mask(run, *, support_if_missing: bool = True) -> dict[str, torch.Tensor] | None:
    """A run's mask, or (methods without one: non-linear FT, L-LoRA, ...) its task vector's support; ``None``
    when neither applies. A sparse method's run must have its mask: a missing or altered ``mask.safetensors``
    is one :class:`TalosError` (:meth:`talos_core.store.Run.mask`), never replaced by the task vector's support
    (which, after fine-tuning, is a subset of the mask and would report a wrong density)."""
    mask = run.mask()
    if mask is not None:
        return mask
    return vector_support(run.task_vector()) if support_if_missing else None


# --------------------------------------------------------------------------------------------
# IoU
# --------------------------------------------------------------------------------------------
def mask_iou(a: Mask, b: Mask) -> float:
    """``|A ∩ B| / |A ∪ B|`` over every entry of the tensors in either mask (absent tensor = all False).

    Two empty masks are identical: IoU 1.

    >>> mask_iou({"w": torch.tensor([True, True, False])}, {"w": torch.tensor([True, False, False])})
    0.5
    """
    inter = union = 0
    for name in dict.fromkeys([*a, *b]):
        x, y = a.get(name), b.get(name)
        if x is None and y is None:
            continue
        if x is None:
            union += int(y.sum())
            continue
        if y is None:
            union += int(x.sum())
            continue
        if x.shape != y.shape:
            raise TalosError(f"masks disagree on the shape of {name}: {tuple(x.shape)} vs {tuple(y.shape)}")
        x, y = x.to(torch.bool), y.to(torch.bool)
        inter += int((x & y).sum())
        union += int((x | y).sum())
    return 1.0 if union == 0 else inter / union


def mask_iou_matrix(masks: Mapping[str, Mask]) -> tuple[list[str], np.ndarray]:
    """Symmetric IoU matrix between the tasks' masks (diagonal 1)."""
    tasks = list(masks)
    out = np.eye(len(tasks))
    for i in range(len(tasks)):
        for j in range(i + 1, len(tasks)):
            out[i, j] = out[j, i] = mask_iou(masks[tasks[i]], masks[tasks[j]])
    return tasks, out


def cross_method_iou(masks_a: Mapping[str, Mask], masks_b: Mapping[str, Mask]) -> pd.DataFrame:
    """Per task (present in both), IoU between method A's and method B's mask: table ``task, iou``."""
    rows = [{"task": t, "iou": mask_iou(masks_a[t], masks_b[t])} for t in masks_a if t in masks_b]
    return pd.DataFrame(rows, columns=["task", "iou"])


# --------------------------------------------------------------------------------------------
# per-run mask diagnostics (a run's manifest: metrics + info)
# --------------------------------------------------------------------------------------------
#: a mask is flagged when fewer of its entries moved in training, when more of them have zero sensitivity,
#: or when more of the last calibration round's kept entries were tied at its threshold
MIN_MOVED = 0.9
MAX_ZERO_SENSITIVITY = 0.1
MAX_TIED = 0.1


def mask_diagnostics(metrics: Mapping, info: Mapping) -> dict:
    """What a run's manifest says about its mask: ``moved`` (fraction of trainable entries the training
    changed), ``zero_sensitivity`` (fraction with exactly zero calibration score at θ0; TaLoS only) and
    ``tied`` (fraction of the last calibration round's kept entries that tied at its threshold; TaLoS only).
    A value the run did not record is ``None`` (runs made before these were recorded, methods without them).

    >>> mask_diagnostics({"mask_moved": 0.5}, {"calibration_log": [{"tied": 10, "selected": 100}]})
    {'moved': 0.5, 'zero_sensitivity': None, 'tied': 0.1}
    """
    log = info.get("calibration_log") or []
    last = log[-1] if log and isinstance(log[-1], Mapping) else {}
    tied = None
    if isinstance(last.get("tied"), int) and isinstance(last.get("selected"), int) and last["selected"] > 0:
        tied = last["tied"] / last["selected"]
    return {"moved": metrics.get("mask_moved"), "zero_sensitivity": metrics.get("mask_zero_sensitivity"),
            "tied": tied}


def run_mask_diagnostics(run) -> dict:
    """:func:`mask_diagnostics` of a stored run, with ``moved`` measured from its mask and task vector when its
    manifest predates the ``mask_moved`` metric (``None`` without a mask)."""
    metrics, info = run.manifest.metrics, run.manifest.info
    diag = mask_diagnostics(metrics, info)
    mask = run.mask()
    if diag["moved"] is None and mask is not None:
        from talos_core.masks import mask_moved

        vector = run.task_vector()
        diag["moved"] = mask_moved(mask, {n: vector.dense(n) for n in mask if n in vector.values})
    return diag


def mask_warnings(diag: Mapping) -> list[str]:
    """One sentence per diagnostic of :func:`mask_diagnostics` past its limit (empty: the mask looks sound).

    >>> mask_warnings({"moved": 0.74, "zero_sensitivity": 0.35, "tied": None})[0][:44]
    'only 74.0% of the mask’s trainable entries m'
    """
    out = []
    moved, zero, tied = diag.get("moved"), diag.get("zero_sensitivity"), diag.get("tied")
    if moved is not None and moved < MIN_MOVED:
        out.append(f"only {moved:.1%} of the mask’s trainable entries moved in training (below {MIN_MOVED:.0%}): "
                   f"the rest cannot learn on this data and are not trainable capacity")
    if zero is not None and zero > MAX_ZERO_SENSITIVITY:
        out.append(f"{zero:.1%} of the mask’s entries have exactly zero sensitivity on the calibration data (above "
                   f"{MAX_ZERO_SENSITIVITY:.0%}): they do not influence the output there; calibrate with "
                   f"--zero-scores exclude to leave them out")
    if tied is not None and tied > MAX_TIED:
        out.append(f"{tied:.1%} of the last calibration round’s kept entries tied at its threshold (above "
                   f"{MAX_TIED:.0%}): ties, not sensitivity, decided much of the mask")
    return out
