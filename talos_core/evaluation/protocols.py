"""Top-level orchestrator: run one evaluation protocol on a model, task list and method, into a store.

>>> # from talos_core.store import Store
>>> # out = evaluate(Store("runs"), "addition", "minilm-l6", ["tweets", "wordnet-verbs"], "talos",
>>> #                overrides={"steps": 60, "max_train": 512, "max_test": 256})
>>> # out.table, out.results  -> tidy table, [(kind, name)] written per SCHEMA.md

Runs are found in the store (or fine-tuned first, see :mod:`talos_core.evaluation.runs`); all
evaluation happens on one shared model instance at ``θ0`` through an
:class:`~talos_core.evaluation.context.EvalContext` (in-place edits, bitwise restore, no copies).
Per-model tables (``single``, ``linearization``, ``efficiency``) are *upserted*: rows of the evaluated
method are replaced and rows of other methods kept.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from talos_core.errors import TalosError, check_range, unknown
from talos_core.evaluation import arithmetic as arith
from talos_core.evaluation.context import SPLITS, EvalContext
from talos_core.schema import check_suite, result_name, slug
from talos_core.evaluation.runs import resolve_runs, run_alpha_grid, run_eval_mode
from talos_core.store import Run, Store

PROTOCOLS: dict[str, str] = {
    "single": "zero-shot and single-task fine-tuned accuracy per task (val and test)",
    "addition": "task addition θ0 + α Σ τ_t, α chosen on val by normalized accuracy",
    "negation": "task negation θ0 − α τ_t, α chosen on val under the 95% control constraint",
    "disentanglement": "disentanglement error ξ(α1, α2) on a grid, for every pair of tasks",
    "localization": "function localization matrix: acc of θ0 + τ_t on t' / zero-shot acc on t'",
    "masks": "mask density per tensor / layer type / block, and mask IoU between tasks (and methods)",
    "sharing": "prune / perturb each task's bottom-k Fisher entries, relative accuracy on every task",
    "linearization": "single-task accuracy vs its post-hoc linearization f(x,θ0) + τᵀ∇f(x,θ0)",
    "preview": "cache f(x,θ0) and τ_tᵀ∇f(x,θ0) so any α mix is previewed in milliseconds",
    "efficiency": "timings and peak memory from the runs' manifests",
    "comparison": "one row per method from the stored addition/negation/single/efficiency results",
}


@dataclass
class EvalOutcome:
    """What a protocol computed and wrote."""

    protocol: str
    table: pd.DataFrame
    results: list[tuple[str, str]] = field(default_factory=list)  # (kind, name) written
    lines: list[str] = field(default_factory=list)  # human summary

    def summary(self) -> str:
        return "\n".join(self.lines)


def check_protocol(name: str) -> str:
    if name not in PROTOCOLS:
        raise unknown("protocol", name, PROTOCOLS)
    return name


def _check_tasks(tasks: Sequence[str]) -> list[str]:
    from talos_core.tasks import get_task

    tasks = [t.strip() for t in tasks if t and t.strip()]
    if not tasks:
        raise TalosError("no tasks given; pass a comma-separated list such as tweets,wordnet-verbs")
    dup = [t for t in tasks if tasks.count(t) > 1]
    if dup:
        raise TalosError(f"task {dup[0]!r} is listed twice")
    for t in tasks:
        get_task(t)
    return tasks


def _check_settings(*, grid: int, points: int, samples: int, preview_points: int, alpha_range: float,
                    alpha_step: float, fraction: float, sharing_mode: str) -> None:
    """Validate protocol settings up front, before any (slow) fine-tuning starts."""
    import math

    for name, value in (("grid", grid), ("points", points), ("samples", samples), ("preview_points", preview_points)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise TalosError(f"{name} must be a positive integer, got {value!r}")
    for name, value in (("range", alpha_range), ("alpha_step", alpha_step)):
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise TalosError(f"{name} must be a positive number, got {value!r}")
    check_range("fraction", fraction, 0.0, 1.0, high_open=False)
    if sharing_mode not in ("prune", "perturb", "both"):
        raise TalosError(f"sharing mode must be prune, perturb or both, got {sharing_mode!r}")


def _limits(overrides: Mapping[str, Any], runs: Mapping[str, Run] | None) -> dict:
    """Evaluation data limits: explicit overrides, else those all runs were evaluated with."""
    out = {}
    for key in ("max_val", "max_test"):
        if overrides.get(key) is not None:
            out[key] = overrides[key]
            continue
        seen = {((r.manifest.get("request") or {}).get(key)) for r in (runs or {}).values()}
        out[key] = seen.pop() if len(seen) == 1 else None
    return out


def _context(model: str, tasks: Sequence[str], overrides: Mapping[str, Any], runs: Mapping[str, Run] | None,
             batch_size: int) -> EvalContext:
    lim = _limits(overrides, runs)
    return EvalContext.for_model(model, tasks, max_val=lim["max_val"], max_test=lim["max_test"],
                                 device=overrides.get("device", "auto") or "auto", batch_size=batch_size)


def _common_mode(runs: Mapping[str, Run]) -> str:
    modes = {run_eval_mode(r) for r in runs.values()}
    if len(modes) > 1:
        raise TalosError(f"runs mix evaluation modes {sorted(modes)}; evaluate one method at a time")
    return modes.pop()


def _upsert(store: Store, kind: str, name: str, table: pd.DataFrame, method: str, *,
            key: str = "method", data: dict | None = None, **extra: Any) -> None:
    """Replace ``method``'s rows in a per-model table, keeping other methods (unless the data differ)."""
    old_extra: dict = {}
    if name in store.results(kind):
        try:
            payload = store.read_result(kind, name)
            old = pd.DataFrame(payload.get("records", []), columns=payload.get("columns"))
            old_extra = {k: v for k, v in payload.items() if k not in ("columns", "records")}
        except TalosError:
            old = None
        if old is not None and (data is None or _same_data(old_extra.get("data"), data)) and key in old.columns:
            table = pd.concat([old[old[key] != method], table], ignore_index=True)
        else:
            old_extra = {}
    merged = {**old_extra, **extra}
    if data is not None:
        merged["data"] = data
    store.write_table(kind, name, table, **merged)


def _fmt(x: float) -> str:
    return "nan" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.4f}"


# --------------------------------------------------------------------------------------------
# the orchestrator
# --------------------------------------------------------------------------------------------
def evaluate(store: Store | str, protocol: str, model: str, tasks: Sequence[str], method: str = "talos", *,
             suite: str = "default", control_task: str | None = None, grid: int = 20, alpha_range: float = 3.0,
             points: int = 2048, fraction: float = 0.1, sharing_mode: str = "prune", samples: int = 128,
             compare_method: str | None = None, preview_points: int = 512, seed: int = 0,
             alpha_step: float = 0.05,
             overrides: Mapping[str, Any] | None = None, train: bool = True, progress: bool = False,
             force: bool = False, batch_size: int = 128,
             compare_overrides: Mapping[str, Any] | None = None) -> EvalOutcome:
    """Run ``protocol`` (see :data:`PROTOCOLS`) and write its results into ``store`` per SCHEMA.md.

    ``overrides`` are :class:`~talos_core.pipeline.FinetuneRequest` fields (``steps``, ``max_train``,
    ``max_val``, ``max_test``, ``sparsity``, ...) identifying — or used to create — the runs;
    ``max_val``/``max_test`` also set the evaluation data. ``grid``/``alpha_range``/``points``
    configure the disentanglement grid; ``fraction``/``sharing_mode``/``samples`` the sharing
    analysis; ``alpha_step`` is the step of the addition/negation α grid (paper 0.05: 0, 0.05, …, 1,
    × 1/(1 − sparsity) for sparse methods); ``compare_method`` adds a cross-method mask IoU to
    ``masks`` (its runs identified by ``compare_overrides``, default ``overrides``). ``train=False``
    refuses to fine-tune missing runs; ``force=True`` re-fine-tunes them.
    """
    store = Store(store) if not isinstance(store, Store) else store
    protocol = check_protocol(protocol)
    check_suite(suite)
    _check_settings(grid=grid, points=points, samples=samples, preview_points=preview_points,
                    alpha_range=alpha_range, alpha_step=alpha_step, fraction=fraction, sharing_mode=sharing_mode)
    overrides = dict(overrides or {})
    if protocol == "comparison":
        return _comparison(store, suite, model)
    tasks = _check_tasks(tasks)
    from talos_core.methods import get_method

    get_method(method)
    if protocol == "sharing":
        return _sharing(store, suite, model, tasks, overrides, fraction=fraction, mode=sharing_mode,
                        samples=samples, seed=seed, batch_size=batch_size)
    if protocol == "negation":
        control_task = control_task or arith.default_control_task(tasks)
        from talos_core.tasks import get_task

        get_task(control_task)
        if control_task in tasks:
            raise TalosError(f"control task {control_task!r} is also a negation target; pick another control task")
    runs = resolve_runs(store, model, tasks, method, overrides=overrides, train=train, progress=progress,
                        force=force)
    if protocol == "efficiency":
        return _efficiency(store, suite, model, method, runs)
    if protocol == "masks":
        return _masks(store, suite, model, method, tasks, runs, compare_method,
                      overrides if compare_overrides is None else dict(compare_overrides), train, progress)
    extra_tasks: list[str] = []
    if protocol == "negation":
        extra_tasks = [control_task]
    ctx = _context(model, [*tasks, *extra_tasks], overrides, runs, batch_size)
    vectors = {t: r.task_vector() for t, r in runs.items()}
    modes = {t: run_eval_mode(r) for t, r in runs.items()}
    handler = {"single": _single, "addition": _addition, "negation": _negation,
               "disentanglement": _disentanglement, "localization": _localization,
               "linearization": _linearization, "preview": _preview}[protocol]
    return handler(store=store, suite=suite, model=model, method=method, ctx=ctx, runs=runs, vectors=vectors,
                   modes=modes, control_task=control_task, grid=grid, alpha_range=alpha_range, points=points,
                   preview_points=preview_points, seed=seed, progress=progress, alpha_step=alpha_step)


# --------------------------------------------------------------------------------------------
# protocol handlers
# --------------------------------------------------------------------------------------------
def _single(*, store, suite, model, method, ctx, runs, vectors, modes, **_) -> EvalOutcome:
    name = result_name(suite, model)
    data = _eval_data(ctx)
    known = _known_zero_shot(store, name, data)
    table = arith.single_task_table(ctx, vectors, method, modes, zero_shot=known)
    runs_extra: dict = {}
    if name in store.results("single"):
        try:
            runs_extra = dict(store.read_result("single", name).get("runs") or {})
        except TalosError:
            runs_extra = {}
    runs_extra[method] = {t: r.id for t, r in runs.items()}
    _upsert(store, "single", name, table, method, data=data, runs=runs_extra, model=model, suite=suite)
    lines = [f"{r.task}: zero-shot {_fmt(r.zero_shot_acc)} -> fine-tuned {_fmt(r.finetuned_acc)} ({r.split})"
             for r in table.itertuples()]
    return EvalOutcome("single", table, [("single", name)], lines)


def _eval_data(ctx: EvalContext) -> dict:
    """What per-model tables' numbers depend on besides the runs: data limits and evaluation precision."""
    from talos_core.inference.precision import model_precision

    return {"max_val": ctx.limits.get("max_val"), "max_test": ctx.limits.get("max_test"),
            "eval_precision": model_precision(ctx.model)}


def _same_data(old: dict | None, new: dict) -> bool:
    """Whether a stored table's ``data`` matches ``new`` (``None``: unknown, accepted); stores written before
    ``eval_precision`` was recorded evaluated in fp32.

    >>> _same_data({"max_val": 8, "max_test": 8}, {"max_val": 8, "max_test": 8, "eval_precision": "fp32"})
    True
    """
    if old is None:
        return True
    return {"eval_precision": "fp32", **old} == {"eval_precision": "fp32", **new}


def _known_zero_shot(store: Store, name: str, data: dict) -> dict[tuple[str, str], float]:
    """Zero-shot accuracies already stored for this model and evaluation data (they depend on the model only)."""
    if name not in store.results("single"):
        return {}
    try:
        payload = store.read_result("single", name)
    except TalosError:
        return {}
    stored = payload.get("data")
    if stored is None or not _same_data(stored, data):
        return {}
    out = {}
    for rec in payload.get("records", []):
        if rec.get("zero_shot_acc") is not None:
            out[(rec["task"], rec["split"])] = float(rec["zero_shot_acc"])
    return out


def _addition(*, store, suite, model, method, ctx, runs, vectors, progress, alpha_step, **_) -> EvalOutcome:
    alphas, sparsity = run_alpha_grid(runs, alpha_step)
    mode = _common_mode(runs)
    ref = arith.finetuned_accuracies(ctx, vectors, mode)
    res = arith.task_addition(ctx, vectors, ref, alphas, mode=mode, sparsity=sparsity, progress=progress)
    name = result_name(suite, model, method)
    store.write_table("addition", name, res.table, **res.extra(), method=method, model=model, suite=suite,
                      runs={t: r.id for t, r in runs.items()})
    lines = [f"selected alpha {res.selected_alpha:g} (on val, grid {alphas[0]:g}..{alphas[-1]:g})",
             f"test: absolute acc {_fmt(res.summary['abs_acc'])} | normalized acc {_fmt(res.summary['norm_acc'])}"]
    return EvalOutcome("addition", res.table, [("addition", name)], lines)


def _negation(*, store, suite, model, method, ctx, runs, vectors, control_task, progress, alpha_step,
              **_) -> EvalOutcome:
    alphas, _sparsity = run_alpha_grid(runs, alpha_step)
    mode = _common_mode(runs)
    res = arith.task_negation(ctx, vectors, control_task, alphas, mode=mode, progress=progress)
    name = result_name(suite, model, method)
    store.write_table("negation", name, res.table, **res.extra(), method=method, model=model, suite=suite,
                      runs={t: r.id for t, r in runs.items()})
    lines = [f"control {control_task}: zero-shot test acc {_fmt(res.control_zero_shot_acc['test'])}"]
    lines += [f"{r.target}: alpha {r.alpha:g} | target acc {_fmt(r.target_acc)} | control acc {_fmt(r.control_acc)}"
              for r in res.per_task.itertuples()]
    lines.append(f"mean: target {_fmt(res.summary['target_acc'])} | control {_fmt(res.summary['control_acc'])}")
    return EvalOutcome("negation", res.table, [("negation", name)], lines)


def _disentanglement(*, store, suite, model, method, ctx, runs, vectors, grid, alpha_range, points, seed,
                     progress, alpha_step, **_) -> EvalOutcome:
    from talos_core.evaluation.disentanglement import disentanglement_alphas, disentanglement_error

    if len(vectors) < 2:
        raise TalosError("disentanglement needs at least two tasks")
    alphas = disentanglement_alphas(grid, alpha_range)
    add_alphas, _ = run_alpha_grid(runs, alpha_step)
    mode = _common_mode(runs)
    written, rows, lines = [], [], []
    for t1, t2 in itertools.combinations(list(vectors), 2):
        res = disentanglement_error(ctx, t1, t2, vectors[t1], vectors[t2], alphas1=alphas, points=points,
                                    seed=seed, mode=mode, progress=progress)
        name = result_name(suite, model, method, t1, t2)
        store.write_result("disentanglement", name,
                           {**res.payload(model=model, method=method, search_region=arith.search_region(add_alphas)),
                            "suite": suite})
        written.append(("disentanglement", name))
        for i, a1 in enumerate(res.alphas1):
            for j, a2 in enumerate(res.alphas2):
                rows.append({"task1": t1, "task2": t2, "alpha1": a1, "alpha2": a2, "xi": res.xi[i, j]})
        lines.append(f"{t1} x {t2}: mean xi {res.xi.mean():.4f}, max {res.xi.max():.4f} over a "
                     f"{len(alphas)}x{len(alphas)} grid on [-{alpha_range:g}, {alpha_range:g}]^2, "
                     f"{min(res.points_per_task.values())} points/task")
    return EvalOutcome("disentanglement", pd.DataFrame(rows), written, lines)


def _localization(*, store, suite, model, method, ctx, vectors, modes, runs, **_) -> EvalOutcome:
    from talos_core.evaluation.localization import function_localization

    res = function_localization(ctx, vectors, modes)
    name = result_name(suite, model, method)
    store.write_result("localization", name, {**res.payload(), "method": method, "model": model, "suite": suite,
                                               "runs": {t: r.id for t, r in runs.items()}})
    table = pd.DataFrame(res.matrix, index=res.rows, columns=res.tasks)
    lines = ["rows = fine-tuned on, cols = evaluated on (acc / zero-shot acc):",
             table.round(4).to_string()]
    tidy = table.reset_index(names="finetuned_on").melt(id_vars="finetuned_on", var_name="evaluated_on",
                                                         value_name="relative_acc")
    return EvalOutcome("localization", tidy, [("localization", name)], lines)


def _linearization(*, store, suite, model, method, ctx, vectors, modes, **_) -> EvalOutcome:
    from talos_core.evaluation.linearization import linearization_table

    table = linearization_table(ctx, vectors, method, modes)
    name = result_name(suite, model)
    _upsert(store, "linearization", name, table, method, model=model, suite=suite,
            data=_eval_data(ctx))
    lines = [f"{r.task}: fine-tuned {_fmt(r.finetuned_acc)} | post-hoc linearized {_fmt(r.linearized_acc)}"
             for r in table.itertuples()]
    return EvalOutcome("linearization", table, [("linearization", name)], lines)


def _preview(*, store, suite, model, method, ctx, vectors, preview_points, seed, **_) -> EvalOutcome:
    from talos_core.evaluation.preview import build_preview, save_preview
    from talos_core.schema import preview_accuracy

    cache = build_preview(ctx, vectors, points=preview_points, seed=seed)
    name = result_name(suite, model, method)
    save_preview(store, name, cache, method=method, model=model, suite=suite)
    rows = []
    for a in (0.0, 0.5, 1.0):
        accs = preview_accuracy(cache, {t: a for t in cache.tasks})
        rows += [{"alpha": a, "task": t, "linearized_accuracy": v} for t, v in accs.items()]
    table = pd.DataFrame(rows)
    lines = [f"cached {len(cache.tasks)} vectors x {len(cache.eval_tasks)} tasks, "
             f"{min(len(v) for v in cache.labels.values())} points/task",
             *(f"alpha {r.alpha:g} on all vectors: {r.task} {_fmt(r.linearized_accuracy)}" for r in table.itertuples())]
    return EvalOutcome("preview", table, [("preview", name)], lines)


def _efficiency(store: Store, suite: str, model: str, method: str, runs: Mapping[str, Run]) -> EvalOutcome:
    from talos_core.evaluation.reports import EFFICIENCY_COLUMNS, efficiency_summary, efficiency_table

    full = efficiency_table(runs.values())
    name = result_name(suite, model)
    merged = full
    if name in store.results("efficiency"):
        try:
            old = store.read_table("efficiency", name)
            merged = pd.concat([old[old["method"] != method], full], ignore_index=True)
        except TalosError:
            pass
    summary = efficiency_summary(merged)
    store.write_table("efficiency", name, merged, summary=summary, model=model, suite=suite)
    s = summary.get(method, {})
    lines = [f"{method}: {_fmt(s.get('time_per_step_s'))} s/step (fwd+bwd {_fmt(s.get('fwd_bwd_s_mean'))} "
             f"+ opt {_fmt(s.get('opt_s_mean'))}), peak memory {_fmt(s.get('peak_memory_mb'))} MB"]
    return EvalOutcome("efficiency", full[EFFICIENCY_COLUMNS], [("efficiency", name)], lines)


def _masks(store: Store, suite: str, model: str, method: str, tasks: list[str], runs: Mapping[str, Run],
           compare_method: str | None, overrides: Mapping[str, Any], train: bool, progress: bool) -> EvalOutcome:
    from talos_core.evaluation.maskstats import (cross_method_iou, density_by_layer, mask_iou_matrix, mask_table,
                                                 run_mask)

    masks = {t: run_mask(r) for t, r in runs.items()}
    table = mask_table(masks)
    name = result_name(suite, model, method)
    source = "mask" if all(r.mask() is not None for r in runs.values()) else "task_vector_support"
    store.write_table("masks", name, table, method=method, model=model, suite=suite, source=source)
    names_iou, matrix = mask_iou_matrix(masks)
    store.write_result("mask_iou", name, {"tasks": names_iou, "matrix": matrix.tolist(), "method": method,
                                          "model": model, "suite": suite, "source": source})
    written = [("masks", name), ("mask_iou", name)]
    agg = density_by_layer(table).groupby("layer_type")[["numel", "trainable"]].sum()
    lines = [f"{t}: density {table[table.task == t].trainable.sum() / max(table[table.task == t].numel.sum(), 1):.4f}"
             for t in tasks]
    lines += [f"  {lt}: {row.trainable / row.numel:.4f}" for lt, row in agg.iterrows()]
    lines.append("IoU between tasks: " + "; ".join(
        f"{a}~{b} {matrix[i, j]:.3f}" for (i, a), (j, b) in itertools.combinations(enumerate(names_iou), 2)))
    if compare_method:
        other = resolve_runs(store, model, tasks, compare_method, overrides=overrides, train=train, progress=progress)
        cmp = cross_method_iou(masks, {t: run_mask(r) for t, r in other.items()})
        cname = f"{name}__vs__{slug(compare_method)}"
        store.write_table("mask_iou", cname, cmp, methods=[method, compare_method], model=model, suite=suite)
        written.append(("mask_iou", cname))
        lines += [f"IoU {method} vs {compare_method} on {r.task}: {r.iou:.4f}" for r in cmp.itertuples()]
    return EvalOutcome("masks", table, written, lines)


def _sharing(store: Store, suite: str, model: str, tasks: list[str], overrides: Mapping[str, Any], *,
             fraction: float, mode: str, samples: int, seed: int, batch_size: int) -> EvalOutcome:
    from talos_core.evaluation.sharing import SHARING_MODES, low_sensitivity_mask, sharing_matrix

    modes = list(SHARING_MODES) if mode == "both" else [mode]
    for m in modes:
        if m not in SHARING_MODES:
            raise TalosError(f"sharing mode must be prune, perturb or both, got {mode!r}")
    ctx = _context(model, tasks, overrides, None, batch_size)
    masks = {t: low_sensitivity_mask(ctx, t, fraction, samples=samples, seed=seed) for t in tasks}
    written, frames, lines = [], [], []
    for m in modes:
        res = sharing_matrix(ctx, tasks, m, fraction=fraction, seed=seed, masks=masks)
        name = result_name(suite, model, m)
        store.write_result("sharing", name, {**res.payload(), "model": model, "suite": suite, "samples": samples,
                                             "seed": seed})
        written.append(("sharing", name))
        df = pd.DataFrame(res.matrix, index=tasks, columns=tasks)
        lines += [f"{m} bottom {fraction:g} (rows = task used for Fisher, cols = evaluated):", df.round(4).to_string()]
        frames.append(df.reset_index(names="bottomk_of").melt(id_vars="bottomk_of", var_name="evaluated_on",
                                                               value_name="relative_acc").assign(mode=m))
    return EvalOutcome("sharing", pd.concat(frames, ignore_index=True), written, lines)


def _comparison(store: Store, suite: str, model: str) -> EvalOutcome:
    from talos_core.evaluation.reports import comparison_table

    table = comparison_table(store, suite, model)
    if table.empty:
        raise TalosError(f"store {store.root} has no results for suite {suite!r} and model {model!r} to compare")
    name = result_name(suite, model)
    store.write_table("comparison", name, table, model=model, suite=suite)
    with pd.option_context("display.width", 200, "display.max_columns", None):
        lines = [table.round(4).to_string(index=False)]
    return EvalOutcome("comparison", table, [("comparison", name)], lines)


__all__ = ["PROTOCOLS", "EvalOutcome", "evaluate", "check_protocol", "SPLITS"]
