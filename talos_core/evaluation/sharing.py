"""Are the least-sensitive parameters shared across tasks? (paper Fig. 1 "shared_bottomk", App.
"sharing analysis": Fig. "shared_bottomk_noise" and the mask-IoU figure).

For each task t, the bottom-k entries (fraction 0.1 of the maskable entries by default) by diagonal
Fisher on t's validation data (Eq. diag_fim, one round, :func:`talos_core.fisher.fisher_scores` +
:func:`talos_core.masks.keep_lowest`) are

* ``prune``: set to 0, or
* ``perturb``: moved by noise ``N(0, (noise_scale·σ)²)``, σ = standard deviation of that tensor's
  pre-trained values (paper: "N(0, 2σI)"; we read 2σ as the noise's standard deviation — set
  ``noise_scale`` to change it), seeded;

and the edited model's accuracy on every task t′ is divided by the unedited (zero-shot) accuracy::

    S[t, t′] = Acc[f(D_t′, θ0 ⊙ edit_t)] / Acc[f(D_t′, θ0)]

The edit is a sparse :class:`~talos_core.vectors.TaskVector` applied in place with bitwise restore
(pruning adds ``−θ0`` on the selected entries, which gives exactly 0), so no model copy is made.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from talos_core.errors import TalosError, check_range
from talos_core.evaluation.context import EvalContext
from talos_core.evaluation.maskstats import mask_iou_matrix
from talos_core.fisher import fisher_scores
from talos_core.masks import calibration_split, keep_lowest
from talos_core.models.base import TaskModel
from talos_core.vectors import TaskVector

SharingMode = Literal["prune", "perturb"]
SHARING_MODES = ("prune", "perturb")
DEFAULT_FRACTION = 0.1


def low_sensitivity_mask(ctx: EvalContext, task: str, fraction: float = DEFAULT_FRACTION, *,
                         samples: int = 128, seed: int = 0, names: Sequence[str] | None = None,
                         target: str = "logprob") -> dict[str, torch.Tensor]:
    """Bottom-``fraction`` maskable entries by diagonal Fisher on ``samples`` val examples of ``task``.

    ``⌊fraction · m⌋`` entries are ``True`` (m = number of maskable entries), chosen as TaLoS calibration chooses
    by default (:mod:`talos_core.masks`): entries with exactly zero sensitivity are left out (fewer entries are
    ``True`` when fewer than that have a non-zero score), and ties are drawn by a seeded key, never by position.
    """
    check_range("fraction", float(fraction), 0.0, 1.0, high_open=False)
    model = ctx.model
    names = list(names) if names is not None else model.maskable_names()
    if not names:
        raise TalosError(f"model {ctx.model_name} has no maskable parameters")
    ctx.use_head(task)
    calib = calibration_split(ctx.split(task, "val"), samples, seed)
    scores = fisher_scores(model, calib, ctx.spec(task), names, generator=torch.Generator().manual_seed(seed),
                           target=target)
    params = dict(model.named_parameters())
    total = sum(params[n].numel() for n in names)
    eligible = {n: scores[n] != 0 for n in names}
    n_elig = sum(int(e.sum()) for e in eligible.values())
    return keep_lowest(scores, eligible, min(int(math.floor(fraction * total)), n_elig), seed=seed)


def sharing_edit(model: TaskModel, mask: Mapping[str, torch.Tensor], mode: SharingMode, *, seed: int = 0,
                 noise_scale: float = 2.0) -> tuple[TaskVector, dict]:
    """The sparse edit that prunes or perturbs the ``True`` entries of ``mask``, plus stats of those entries.

    Apply with ``apply_vectors(model, [(edit, 1.0)])``. Stats: ``mean_abs`` (μ) and ``std`` (σ) of the
    selected pre-trained values, as the paper reports them.
    """
    if mode not in SHARING_MODES:
        raise TalosError(f"sharing mode must be one of {', '.join(SHARING_MODES)}, got {mode!r}")
    params = dict(model.named_parameters())
    g = torch.Generator().manual_seed(seed)
    values, indices, shapes = {}, {}, {}
    picked: list[torch.Tensor] = []
    for name, m in mask.items():
        p = params[name].detach()
        idx = torch.nonzero(m.reshape(-1).cpu()).view(-1)
        if idx.numel() == 0:
            continue
        theta = p.reshape(-1).cpu()[idx].float()
        picked.append(theta)
        if mode == "prune":
            delta = -theta
        else:
            sigma = float(p.float().std()) if p.numel() > 1 else 0.0
            delta = torch.randn(idx.numel(), generator=g) * (noise_scale * sigma)
        values[name], indices[name], shapes[name] = delta.to(p.dtype), idx, tuple(p.shape)
    flat = torch.cat(picked) if picked else torch.zeros(0)
    stats = {"mean_abs": float(flat.abs().mean()) if flat.numel() else float("nan"),
             "std": float(flat.std()) if flat.numel() > 1 else float("nan"), "entries": int(flat.numel())}
    return TaskVector(values, indices, shapes), stats


@dataclass
class SharingResult:
    tasks: list[str]
    mode: str
    fraction: float
    accuracy: np.ndarray  # [row = task whose bottom-k was edited, col = evaluated task]
    reference: np.ndarray  # unedited accuracy per column
    mask_iou: np.ndarray
    stats: list[dict] = field(default_factory=list)
    split: str = "test"

    @property
    def matrix(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.reference[None, :] > 0, self.accuracy / self.reference[None, :], np.nan)

    def payload(self, **extra) -> dict:
        """The SCHEMA.md payload of ``sharing/<suite>__<model>__<mode>``."""
        return {"tasks": self.tasks, "matrix": self.matrix.tolist(), "fraction": self.fraction,
                "mode": self.mode, "accuracy": self.accuracy.tolist(), "reference": self.reference.tolist(),
                "mask_iou": self.mask_iou.tolist(), "perturbed_stats": self.stats, "split": self.split, **extra}


def sharing_matrix(ctx: EvalContext, tasks: Sequence[str], mode: SharingMode = "prune", *,
                   fraction: float = DEFAULT_FRACTION, samples: int = 128, seed: int = 0,
                   noise_scale: float = 2.0, split: str = "test",
                   masks: Mapping[str, Mapping[str, torch.Tensor]] | None = None) -> SharingResult:
    """Relative accuracy on every task after pruning/perturbing each task's bottom-k entries.

    ``masks`` (task → bottom-k mask) can be passed to reuse them across modes.
    """
    tasks = list(tasks)
    if mode not in SHARING_MODES:
        raise TalosError(f"sharing mode must be one of {', '.join(SHARING_MODES)}, got {mode!r}")
    if masks is None:
        masks = {t: low_sensitivity_mask(ctx, t, fraction, samples=samples, seed=seed) for t in tasks}
    ref = np.array([ctx.zero_shot(t, split) for t in tasks])
    acc = np.zeros((len(tasks), len(tasks)))
    stats = []
    for i, t in enumerate(tasks):
        edit, st = sharing_edit(ctx.model, masks[t], mode, seed=seed + i, noise_scale=noise_scale)
        stats.append({"task": t, **st})
        acc[i] = ctx.accuracies([(c, split) for c in tasks], [(edit, 1.0)])
    _, iou = mask_iou_matrix({t: masks[t] for t in tasks})
    return SharingResult(tasks, mode, float(fraction), acc, ref, iou, stats, split)
