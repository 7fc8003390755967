"""Tables built from run manifests and stored results: efficiency (paper Table "efficiency") and the
cross-method comparison (paper Tables "task_addition"/"task_negation" in one row per method), with the
95% bootstrap interval over test examples of every accuracy mean (:mod:`talos_core.evaluation.stats`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from talos_core import schema
from talos_core.errors import TalosError
from talos_core.evaluation import stats
from talos_core.schema import result_name, slug
from talos_core.store import Run, Store

EFFICIENCY_COLUMNS = list(schema.KINDS["efficiency"].columns)
COMPARISON_COLUMNS = list(schema.KINDS["comparison"].columns)
INTERVAL_COLUMNS = list(schema.KINDS["comparison"].optional_columns)


# --------------------------------------------------------------------------------------------
# efficiency
# --------------------------------------------------------------------------------------------
def efficiency_table(runs: Iterable[Run]) -> pd.DataFrame:
    """One row per run from its manifest ``timings`` (perf_counter per iteration, mean ± std).

    ``calibration_s`` is 0 for methods without a calibration stage; ``machine`` says where the run was timed
    (:class:`~talos_core.hardware.Machine`); ``steps`` (the training iterations the run timed: the steps it ran,
    an early-stopped run's fewer than its schedule's; an extra column) lets :func:`efficiency_summary` pool the
    per-run statistics over every iteration, as the paper's appendix does.
    """
    from talos_core.hardware import Machine

    rows = []
    for run in runs:
        m = run.manifest
        t = m.timings
        where = Machine.of({"device": m.device, "timings": t}).label()
        rows.append({"method": m.method, "task": m.task,
                     "fwd_bwd_s_mean": t.get("fwd_bwd_s_mean"), "fwd_bwd_s_std": t.get("fwd_bwd_s_std"),
                     "opt_s_mean": t.get("opt_s_mean"), "opt_s_std": t.get("opt_s_std"),
                     "calibration_s": float(t.get("calibration_s", 0.0)), "train_s": t.get("train_s"),
                     "peak_memory_mb": t.get("peak_memory_mb"), "peak_memory_kind": t.get("peak_memory_kind"),
                     "trainable_entries": t.get("trainable_entries"), "machine": where,
                     "steps": t.get("steps_run") or (m.config.get("train") or {}).get("steps") or 1})
    return pd.DataFrame(rows, columns=[*EFFICIENCY_COLUMNS, "machine", "steps"])


def _pooled(means: np.ndarray, stds: np.ndarray, counts: np.ndarray) -> tuple[float, float]:
    """Mean and std over all iterations of all runs from per-run (mean, std, count)."""
    n = counts.sum()
    mu = float((counts * means).sum() / n)
    var = float((counts * (stds ** 2 + means ** 2)).sum() / n - mu ** 2)
    return mu, math.sqrt(max(var, 0.0))


def efficiency_summary(table: pd.DataFrame) -> dict[str, dict]:
    """Per method, timings pooled over all iterations of all tasks and the peak memory over tasks
    (paper App. "Measuring computational costs": mean ± std over all iterations of all tasks, peak = max)."""
    out = {}
    for method, g in table.groupby("method", sort=False):
        g = g.dropna(subset=["fwd_bwd_s_mean", "opt_s_mean"])
        if g.empty:
            continue
        steps = g["steps"].fillna(1).to_numpy(dtype=float) if "steps" in g else np.ones(len(g))
        fb = _pooled(g["fwd_bwd_s_mean"].to_numpy(float), g["fwd_bwd_s_std"].fillna(0).to_numpy(float), steps)
        op = _pooled(g["opt_s_mean"].to_numpy(float), g["opt_s_std"].fillna(0).to_numpy(float), steps)
        out[str(method)] = {"fwd_bwd_s_mean": fb[0], "fwd_bwd_s_std": fb[1], "opt_s_mean": op[0],
                            "opt_s_std": op[1], "time_per_step_s": fb[0] + op[0],
                            "peak_memory_mb": float(g["peak_memory_mb"].max()),
                            "calibration_s_mean": float(g["calibration_s"].mean()),
                            "tasks": [str(t) for t in g["task"]],
                            **({"machines": sorted({str(x) for x in g["machine"].dropna()})}
                               if "machine" in g else {})}
    return out


# --------------------------------------------------------------------------------------------
# comparison
# --------------------------------------------------------------------------------------------
def _methods_with(store: Store, kind: str, prefix: str) -> dict[str, str]:
    """``{method slug: result name}`` of ``kind`` results named exactly ``<prefix><method>``."""
    out = {}
    for name in store.results(kind):
        if name.startswith(prefix) and "__" not in name[len(prefix):]:
            out[name[len(prefix):]] = name
    return out


def _read_table(store: Store, kind: str, name: str) -> pd.DataFrame | None:
    if name not in store.results(kind):
        return None
    try:
        return store.read_table(kind, name)
    except TalosError:
        return None


def comparison_table(store: Store, suite: str, model: str) -> pd.DataFrame:
    """One row per method with everything the paper's main tables report, from stored results.

    Columns ``method, addition_abs, addition_norm, negation_target, negation_control, single_task_acc,
    zero_shot_acc, time_per_step_s, peak_memory_mb`` (test-split means; NaN where a result is missing,
    e.g. post-hoc methods have no fine-tuning timings), then ``<mean>_lo, <mean>_hi`` for each accuracy
    mean: its 95% bootstrap interval over test examples, read from the addition/negation summaries'
    ``ci95`` and bootstrapped from the single-task rows' per-example correctness (NaN where the results
    carry no examples, e.g. stores written before they existed).
    """
    prefix = result_name(suite, model) + "__"
    addition = _methods_with(store, "addition", prefix)
    negation = _methods_with(store, "negation", prefix)
    single = _read_table(store, "single", result_name(suite, model))
    single_examples = _read_examples(store, result_name(suite, model)) if single is not None else {}
    eff = _read_table(store, "efficiency", result_name(suite, model))
    eff_summary = efficiency_summary(eff) if eff is not None and not eff.empty else {}
    methods: list[str] = []
    for source in (list(addition), list(negation),
                   [] if single is None else [slug(m) for m in single["method"].unique()],
                   [slug(m) for m in eff_summary]):
        methods.extend(m for m in source if m not in methods)
    rows = []
    for m in methods:
        row = {c: float("nan") for c in [*COMPARISON_COLUMNS, *INTERVAL_COLUMNS]}
        row["method"] = m
        if m in addition:
            p = store.read_result("addition", addition[m])
            s, ci = p.get("summary") or {}, p.get("ci95") or {}
            row["addition_abs"], row["addition_norm"] = s.get("abs_acc"), s.get("norm_acc")
            _set(row, "addition_abs", ci.get("abs_acc"))
            _set(row, "addition_norm", ci.get("norm_acc"))
        if m in negation:
            p = store.read_result("negation", negation[m])
            s, ci = p.get("summary") or {}, p.get("ci95") or {}
            row["negation_target"], row["negation_control"] = s.get("target_acc"), s.get("control_acc")
            _set(row, "negation_target", ci.get("target_acc"))
            _set(row, "negation_control", ci.get("control_acc"))
        if single is not None:
            part = single[(single["method"].map(slug) == m) & (single["split"] == "test")]
            if not part.empty:
                row["single_task_acc"] = float(part["finetuned_acc"].mean())
                row["zero_shot_acc"] = float(part["zero_shot_acc"].mean())
                found = _single_examples(single_examples, part)
                _set(row, "single_task_acc", _examples_interval(part, found, "finetuned"))
                _set(row, "zero_shot_acc", _examples_interval(part, found, "zero_shot"))
        for method, s in eff_summary.items():
            if slug(method) == m:
                row["time_per_step_s"], row["peak_memory_mb"] = s["time_per_step_s"], s["peak_memory_mb"]
        rows.append(row)
    if single is not None and not single.empty:  # zero-shot depends on the model only
        first = single[single["split"] == "test"].drop_duplicates("task")
        zs = first["zero_shot_acc"].mean()
        zs_ci = None
        for row in rows:
            value = row["zero_shot_acc"]
            if value is None or (isinstance(value, float) and math.isnan(value)):
                row["zero_shot_acc"] = float(zs)
                if zs_ci is None:
                    zs_ci = _examples_interval(first, _single_examples(single_examples, first), "zero_shot")
                _set(row, "zero_shot_acc", zs_ci)
    return pd.DataFrame(rows, columns=[*COMPARISON_COLUMNS, *INTERVAL_COLUMNS])


def _set(row: dict, metric: str, interval: list | tuple | None) -> None:
    """``row[<metric>_lo], row[<metric>_hi]`` from ``[lo, hi]`` (NaN for missing or null bounds)."""
    lo, hi = interval if isinstance(interval, (list, tuple)) and len(interval) == 2 else (None, None)
    row[f"{metric}_lo"] = float("nan") if lo is None else float(lo)
    row[f"{metric}_hi"] = float("nan") if hi is None else float(hi)


def _read_examples(store: Store, name: str) -> dict:
    """The ``single`` result's ``examples: {method: {task: {"zero_shot", "finetuned"}}}`` (``{}`` if none)."""
    try:
        found = store.read_result("single", name).get("examples")
    except TalosError:
        return {}
    return found if isinstance(found, dict) else {}


def _single_examples(examples: dict, part: pd.DataFrame) -> list[dict]:
    """Per row of ``part`` (test rows of ``single``), its method's examples of its task (``{}`` if none)."""
    out = []
    for method, task in zip(part["method"], part["task"]):
        entry = (examples.get(str(method)) or {}).get(str(task))
        out.append(entry if isinstance(entry, dict) else {})
    return out


def _examples_interval(part: pd.DataFrame, found: list[dict], which: str) -> list | None:
    """95% interval of the mean over ``part``'s tasks of their accuracy, from each row's per-example
    correctness ``found[i][which]`` (``None`` unless every row has it)."""
    values = [f.get(which) for f in found]
    if not values or not all(isinstance(v, str) and v for v in values):
        return None
    try:
        return stats.mean_interval({str(t): stats.decode_examples(v) for t, v in zip(part["task"], values)})
    except TalosError:
        return None
