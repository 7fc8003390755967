"""Pure computations the pages make from loaded results (no Streamlit): grid snapping, the addition and negation
results at one α, single-task references, chosen hyperparameters, ξ summaries and the long tables behind the
charts. :mod:`dashboard.data` re-exports them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dashboard.data_loaders import Addition, Matrix, Negation, Selection, _num
from talos_core import schema
from talos_core.errors import TalosError
from talos_core.schema import MissingResult


def snap(grid: Sequence[float] | np.ndarray, value: float) -> tuple[float, bool]:
    """Nearest grid point to ``value`` and whether it differs from ``value`` (beyond 1e-9).

    >>> snap([0.0, 0.5, 1.0], 0.74)
    (0.5, True)
    >>> snap([0.0, 0.5, 1.0], 1.0)
    (1.0, False)
    """
    g = np.asarray(grid, dtype=float)
    if g.size == 0:
        raise TalosError("cannot snap to an empty α grid")
    x = float(g[np.argmin(np.abs(g - value))])
    return x, abs(x - value) > 1e-9


def average_curve(add: Addition) -> pd.DataFrame:
    """Mean over tasks of accuracy and normalized accuracy per (α, split): ``alpha, split, accuracy,
    normalized_accuracy``."""
    frames = [pd.DataFrame({"alpha": add.alphas, "split": split, "accuracy": np.nanmean(add.acc[split], axis=1),
                            "normalized_accuracy": np.nanmean(add.norm[split], axis=1)})
              for split in add.acc]
    return pd.concat(frames, ignore_index=True)


def _split_key(d: Mapping[str, Any], split: str) -> str:
    return split if split in d else next(iter(d))


def addition_at(add: Addition, alpha: float, split: str = "test") -> tuple[float, pd.DataFrame]:
    """Per-task exact results at the grid α nearest ``alpha``: ``(snapped α, frame task/accuracy/normalized)``."""
    a, _ = snap(add.alphas, alpha)
    i = int(np.argmin(np.abs(add.alphas - a)))
    sk = _split_key(add.acc, split)
    return a, pd.DataFrame({"task": add.tasks, "accuracy": add.acc[sk][i], "normalized_accuracy": add.norm[sk][i]})


def negation_at(neg: Negation, target: str, alpha: float, split: str = "test") -> tuple[float, float, float]:
    """``(snapped α, target_acc, control_acc)`` for negating ``target`` at the grid α nearest ``alpha``."""
    if target not in neg.curves:
        raise MissingResult(f"no negation results for target {target!r}")
    alphas, tacc, cacc = neg.curves[target]
    a, _ = snap(alphas, alpha)
    i = int(np.argmin(np.abs(alphas - a)))
    sk = _split_key(tacc, split)
    return a, float(tacc[sk][i]), float(cacc[sk][i])


def single_reference(single: pd.DataFrame | None, method: str, tasks: Sequence[str],
                     split: str = "test") -> tuple[list[float], list[float]]:
    """``(zero-shot acc, single-task fine-tuned acc)`` per task for ``method`` (post-hoc methods use
    the single-task models of the method they merge, ``nonlinear``). Missing entries are NaN."""
    nan = float("nan")
    if single is None or single.empty:
        return [nan] * len(tasks), [nan] * len(tasks)
    cols = ("split", "method", "task", "zero_shot_acc", "finetuned_acc")  # only these: to_dict("records") of the
    rows = [dict(zip(cols, vals)) for vals in zip(*(single[c].tolist() for c in cols))]  # frame cost ~10x more
    if any(r["split"] == split for r in rows):
        rows = [r for r in rows if r["split"] == split]
    methods = {r["method"] for r in rows}
    info = schema.METHODS.get(method)
    m = method if method in methods or info is None or not info.posthoc else info.base_method
    zs: dict[str, float] = {}
    ft: dict[str, float] = {}
    for r in rows:
        zs.setdefault(r["task"], _num(r["zero_shot_acc"]))
        if r["method"] == m:
            ft.setdefault(r["task"], _num(r["finetuned_acc"]))
    return [zs.get(t, nan) for t in tasks], [ft.get(t, nan) for t in tasks]


def count_test_examples(payload: Mapping[str, Any] | None) -> dict[str, int]:
    """``{task: number of test examples}`` from a ``single`` result's ``examples`` (per method and task, a
    string of 0/1 per test example; absent in stores written before it): the largest count seen per task."""
    out: dict[str, int] = {}
    examples = (payload or {}).get("examples")
    if not isinstance(examples, Mapping):
        return out
    for per_task in examples.values():
        if not isinstance(per_task, Mapping):
            continue
        for task, bits in per_task.items():
            if isinstance(bits, Mapping):
                n = max((len(v) for v in bits.values() if isinstance(v, str)), default=0)
                if n:
                    out[str(task)] = max(out.get(str(task), 0), n)
    return out


def format_choice(param: str, value: Any) -> str:
    """A chosen hyperparameter as shown in tables: sparsity and learning rate with ``%g``, rank as an integer.

    >>> format_choice("sparsity", 0.95), format_choice("rank", 16.0), format_choice("lr", 0.0001)
    ('0.95', '16', '0.0001')
    >>> format_choice("lr", None)
    '—'
    """
    v = _num(value)
    if not math.isfinite(v):
        return "—" if value is None or isinstance(value, (int, float)) else str(value)
    if param == "rank" and float(v).is_integer():
        return str(int(v))
    return f"{v:g}"


def chosen_hyperparameters(selections: Iterable[Selection], tasks: Sequence[str] | None = None) -> pd.DataFrame:
    """The per-task choices of stored selections as one table: a row per task, a column per selection
    named ``<method label> · <param>`` (e.g. ``TaLoS · sparsity``, ``L-LoRA · rank``; variant ids get their
    readable label, :func:`talos_core.schema.method_label`), cells :func:`format_choice`. ``tasks`` fixes the
    rows (default: every task of any selection, in order of appearance); a task without a choice shows ``—``.

    >>> sel = Selection("s", "talos", "sparsity", pd.DataFrame(), {"a": 0.9, "b": 0.5}, [0.5, 0.9], "", None, None)
    >>> chosen_hyperparameters([sel]).to_dict("records")
    [{'task': 'a', 'TaLoS · sparsity': '0.9'}, {'task': 'b', 'TaLoS · sparsity': '0.5'}]
    """
    sels = list(selections)
    rows = list(tasks) if tasks is not None else list(dict.fromkeys(t for s in sels for t in s.tasks))
    out = pd.DataFrame({"task": rows})
    for s in sels:
        col = f"{schema.method_label(s.method)} · {s.param}"
        out[col] = [format_choice(s.param, s.choices.get(t)) if t in s.choices else "—" for t in rows]
    return out


def selection_candidates(sel: Selection) -> pd.DataFrame:
    """Every candidate of a selection as a readable table: ``task, <param>, score (val negation target acc),
    at α, control val acc, single-task val acc, chosen`` (✓ on the chosen row of each task)."""
    t = sel.table
    return pd.DataFrame({
        "task": t["task"].astype(str),
        sel.param: [format_choice(sel.param, v) for v in t["value"]],
        "score (val target acc)": pd.to_numeric(t["score"], errors="coerce"),
        "at α": pd.to_numeric(t["best_alpha"], errors="coerce"),
        "control val acc": pd.to_numeric(t["control_val_acc"], errors="coerce"),
        "single-task val acc": pd.to_numeric(t["single_val_acc"], errors="coerce"),
        "chosen": ["✓" if c else "" for c in t["chosen"]],
    })


def xi_region_mean(payload: Mapping[str, Any], region: Sequence[float] | None = None) -> float:
    """Mean ξ over the grid points inside the square ``[lo, hi]²`` of ``region`` (default: the payload's own
    ``search_region``); NaN if none/absent."""
    region = payload.get("search_region") if region is None else region
    if region is None:
        return float("nan")
    a1, a2 = np.asarray(payload["alphas1"], dtype=float), np.asarray(payload["alphas2"], dtype=float)
    r1 = (a1 >= region[0]) & (a1 <= region[1])
    r2 = (a2 >= region[0]) & (a2 <= region[1])
    inside = np.asarray(payload["xi"], dtype=float)[np.ix_(r1, r2)]
    return float(inside.mean()) if inside.size else float("nan")


def shared_region(panels: Sequence[Mapping[str, Any]]) -> tuple[float, float] | None:
    """The α square every panel's method searched: the intersection of their ``search_region`` s (None when a panel
    has none or they do not overlap). Comparing mean ξ over one shared square keeps a method with a wider search
    range (a sparse one, × 1/(1 − k)) from being judged on a larger, more distant region.

    >>> shared_region([{"search_region": [0, 10]}, {"search_region": [0, 1]}])
    (0.0, 1.0)
    """
    regions = [p.get("search_region") for p in panels]
    if not regions or any(r is None for r in regions):
        return None
    lo, hi = max(float(r[0]) for r in regions), min(float(r[1]) for r in regions)
    return (lo, hi) if lo <= hi else None


def xi_at(payload: Mapping[str, Any], alpha: float) -> float:
    """ξ at the grid point nearest to (α, α), NaN when α lies outside the grid (more than one grid step away)."""
    a1, a2 = np.asarray(payload["alphas1"], dtype=float), np.asarray(payload["alphas2"], dtype=float)
    if not (np.isfinite(alpha) and a1.size and a2.size):
        return float("nan")
    i, j = int(np.abs(a1 - alpha).argmin()), int(np.abs(a2 - alpha).argmin())
    step1 = float(np.diff(a1).max()) if a1.size > 1 else 0.0
    step2 = float(np.diff(a2).max()) if a2.size > 1 else 0.0
    if abs(a1[i] - alpha) > step1 or abs(a2[j] - alpha) > step2:
        return float("nan")
    return float(np.asarray(payload["xi"], dtype=float)[i, j])


def xi_long_table(panels: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """ξ grids as one tidy table ``method, task1, task2, alpha1, alpha2, xi`` (for CSV export)."""
    frames = []
    for p in panels:
        a1, a2 = np.meshgrid(np.asarray(p["alphas1"], dtype=float), np.asarray(p["alphas2"], dtype=float),
                             indexing="ij")
        frames.append(pd.DataFrame({"method": p.get("method"), "task1": p.get("task1"), "task2": p.get("task2"),
                                    "alpha1": a1.ravel(), "alpha2": a2.ravel(),
                                    "xi": np.asarray(p["xi"], dtype=float).ravel()}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def localization_table(mats: Mapping[str, Matrix]) -> pd.DataFrame:
    """Localization matrices as one tidy table ``method, finetuned_on, evaluated_on, ratio``."""
    rows = [{"method": m, "finetuned_on": r, "evaluated_on": c, "ratio": float(mat.matrix[i, j])}
            for m, mat in mats.items() for i, r in enumerate(mat.tasks) for j, c in enumerate(mat.tasks)]
    return pd.DataFrame(rows, columns=["method", "finetuned_on", "evaluated_on", "ratio"])


def masks_with(tables: Mapping[str, pd.DataFrame], column: str = "method") -> pd.DataFrame:
    """Concatenate mask tables keyed by method (or task) into one frame with that key as ``column``."""
    frames = [t.assign(**{column: k}) for k, t in tables.items() if not t.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
