"""Evaluation protocols as data, and :func:`evaluate`, which runs one into a store.

>>> # from talos_core.store import Store
>>> # out = evaluate(Store("runs"), "addition", "minilm-l6", ["tweets", "wordnet-verbs"], "talos",
>>> #                settings={"alpha_step": 0.1}, overrides={"steps": 60, "max_train": 512, "max_test": 256})
>>> # out.table, out.results  -> tidy table, [(kind, name)] written per SCHEMA.md

A :class:`Protocol` is a name, a description, a frozen dataclass of typed settings (validated when
built: one-sentence :class:`~talos_core.errors.TalosError`) and a ``run(request, settings)`` function;
:data:`PROTOCOLS` lists them. Runs are found in the store (or fine-tuned first, see
:mod:`talos_core.evaluation.runs`); all evaluation happens on one shared model instance at ``θ0``
through an :class:`~talos_core.evaluation.context.EvalContext` (in-place edits, bitwise restore, no
copies). Post-hoc methods (:mod:`talos_core.evaluation.posthoc`), the sparsity ablation
(:mod:`talos_core.evaluation.ablation`) and the per-task hyperparameter selection
(:mod:`talos_core.evaluation.selection`) and the learning-rate check at the step budget
(:mod:`talos_core.evaluation.lr_check`) are protocols too.

Per-task runs: ``evaluate(..., task_overrides={task: {...}})`` merges fine-tuning overrides per task over
``overrides`` (e.g. :func:`~talos_core.evaluation.selection.selected_overrides`, the per-task choices of a
stored ``selection``); ``result_method`` writes the results under another id than the method (a variant
id such as ``talos-k0.9``, :func:`talos_core.schema.variant_id`), so a fixed-hyperparameter row can sit
next to the selected one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

import numpy as np
import pandas as pd

from talos_core.errors import TalosError, check_int, check_range, unknown
from talos_core.evaluation import arithmetic as arith
from talos_core.evaluation.ablation import AblationSettings, sparsity_ablation
from talos_core.evaluation.alpha_rule import AlphaRuleSettings, alpha_rule
from talos_core.evaluation.context import EvalContext
from talos_core.evaluation.learning_curve import LearningCurveSettings, learning_curve
from talos_core.evaluation.lr_check import LrCheckSettings, run_lr_check
from talos_core.evaluation.posthoc import PosthocSettings, evaluate_posthoc
from talos_core.evaluation.request import (
    MAX_ALPHA,
    MAX_GRID,
    EvalOutcome,
    EvalRequest,
    check_alpha_step,
    check_control_task,
    check_seed,
    common_mode,
    eval_data,
    fmt,
    merged_rows,
    same_data,
    upsert,
)
from talos_core.evaluation.runs import (
    check_alpha_rule,
    run_alpha_grid,
    run_eval_mode,
    run_sparsities,
    task_alpha_grids,
)
from talos_core.evaluation.selection import SelectionSettings, run_selection
from talos_core.methods.declaration import ALPHA_STEP
from talos_core.schema import base_method_of, check_suite, slug
from talos_core.store import Run, Store
from talos_core.vectors import TaskVector


# --------------------------------------------------------------------------------------------
# settings
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NoSettings:
    """Protocols without settings (efficiency, comparison)."""


@dataclass(frozen=True)
class EvalSettings:
    """Protocols that evaluate each run once (single, localization, linearization)."""

    batch_size: int | None = None  # evaluation batch size; None: the device's default (32 on CPUs, 128 else)

    def __post_init__(self) -> None:
        check_int("batch_size", self.batch_size, low=1, optional=True)


@dataclass(frozen=True)
class AdditionSettings:
    alpha_step: float = ALPHA_STEP  # α grid 0, step, …, 1 (× 1/(1 − sparsity) for sparse methods); paper 0.05
    batch_size: int | None = None
    # "unit": 0…1 for every method (official code at HEAD; an ablation); "union": sparse methods search both grids
    alpha_rule: str = "paper"
    # a choice at the grid's last point extends the grid up to this multiple of its largest value (0: never;
    # arithmetic.extend_search)
    alpha_extend: float = 0.0

    def __post_init__(self) -> None:
        check_alpha_step(self.alpha_step)
        check_alpha_rule(self.alpha_rule)
        arith.check_extend(self.alpha_extend)
        check_int("batch_size", self.batch_size, low=1, optional=True)


@dataclass(frozen=True)
class NegationSettings:
    control_task: str | None = None  # None: the registered control task of the tasks' modality
    alpha_step: float = ALPHA_STEP
    batch_size: int | None = None
    alpha_rule: str = "paper"  # as AdditionSettings.alpha_rule
    alpha_extend: float = 0.0  # as AdditionSettings.alpha_extend (each target's own grid)

    def __post_init__(self) -> None:
        if self.control_task is not None and not isinstance(self.control_task, str):
            raise TalosError(f"control task must be a task name, got {self.control_task!r}")
        check_alpha_step(self.alpha_step)
        check_alpha_rule(self.alpha_rule)
        arith.check_extend(self.alpha_extend)
        check_int("batch_size", self.batch_size, low=1, optional=True)


@dataclass(frozen=True)
class DisentanglementSettings:
    grid: int = 20  # α values per axis (paper 20)
    alpha_range: float = 3.0  # α1, α2 ∈ [-range, range] (paper 3)
    points: int = 2048  # test points per task
    seed: int = 0  # seed of the test-point subsets
    alpha_step: float = ALPHA_STEP  # of the addition grid, whose span is recorded as the search region
    batch_size: int | None = None

    def __post_init__(self) -> None:
        check_int("grid", self.grid, low=1)
        check_range("grid", self.grid, 1, MAX_GRID, high_open=False)
        check_range("range", self.alpha_range, 0.0, MAX_ALPHA, low_open=True, high_open=False)
        check_int("points", self.points, low=1)
        check_seed(self.seed)
        check_alpha_step(self.alpha_step)
        check_int("batch_size", self.batch_size, low=1, optional=True)


@dataclass(frozen=True)
class MaskSettings:
    compare_method: str | None = None  # also the per-task mask IoU against this method's runs
    compare_overrides: Mapping[str, Any] | None = None  # identify those runs (default: the request's)
    compare_label: str | None = None  # the compared row's result id (e.g. ``lota-k0.9``; default: compare_method)

    def __post_init__(self) -> None:
        if self.compare_method is not None and not isinstance(self.compare_method, str):
            raise TalosError(f"compare method must be a method name, got {self.compare_method!r}")


@dataclass(frozen=True)
class SharingSettings:
    fraction: float = 0.1  # bottom-k fraction of Fisher entries (paper 0.1)
    mode: str = "prune"  # prune, perturb or both
    samples: int = 128  # Fisher examples per task
    seed: int = 0
    batch_size: int | None = None

    def __post_init__(self) -> None:
        check_range("fraction", self.fraction, 0.0, 1.0, high_open=False)
        if self.mode not in ("prune", "perturb", "both"):
            raise TalosError(f"sharing mode must be prune, perturb or both, got {self.mode!r}")
        check_int("samples", self.samples, low=1)
        check_seed(self.seed)
        check_int("batch_size", self.batch_size, low=1, optional=True)


@dataclass(frozen=True)
class PreviewSettings:
    points: int = 512  # test points per task
    seed: int = 0
    batch_size: int | None = None

    def __post_init__(self) -> None:
        check_int("preview_points", self.points, low=1)
        check_seed(self.seed)
        check_int("batch_size", self.batch_size, low=1, optional=True)


@dataclass(frozen=True)
class ExamplesSettings:
    points: int = 24  # fixed test examples per task (at most 24)
    seed: int = 0
    control_task: str | None = None  # None: the registered control task of the tasks' modality
    alpha_step: float = ALPHA_STEP  # of the addition and negation grids (as those protocols)
    batch_size: int | None = None
    # exact predictions also every 0.05 from 0 to this α inside each grid (the dashboard's teaching range; 0 = none)
    teaching_max: float = 2.0
    alpha_rule: str = "paper"  # as AdditionSettings.alpha_rule (the stored results' grids come first)

    def __post_init__(self) -> None:
        from talos_core.result_arrays import MAX_EXAMPLES

        check_alpha_rule(self.alpha_rule)

        check_int("examples per task", self.points, low=1, high=MAX_EXAMPLES,
                  what=f"an integer from 1 to {MAX_EXAMPLES}")
        check_seed(self.seed)
        if self.control_task is not None and not isinstance(self.control_task, str):
            raise TalosError(f"control task must be a task name, got {self.control_task!r}")
        check_alpha_step(self.alpha_step)
        check_int("batch_size", self.batch_size, low=1, optional=True)
        check_range("teaching_max", self.teaching_max, 0.0, 100.0, high_open=False)


# --------------------------------------------------------------------------------------------
# protocols
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Evaluated:
    """The request's runs, an evaluation context over their tasks, their vectors and evaluation modes."""

    runs: dict[str, Run]
    ctx: EvalContext
    vectors: dict[str, TaskVector]
    modes: dict[str, str]


def _evaluated(req: EvalRequest, batch_size: int | None, extra_tasks: Sequence[str] = ()) -> _Evaluated:
    runs = req.runs()
    ctx = req.context(runs, batch_size, extra_tasks)
    return _Evaluated(runs, ctx, {t: r.task_vector() for t, r in runs.items()},
                      {t: run_eval_mode(r) for t, r in runs.items()})


def _run_ids(runs: Mapping[str, Run]) -> dict[str, str]:
    return {t: r.id for t, r in runs.items()}


def _single(req: EvalRequest, s: EvalSettings) -> EvalOutcome:
    ev = _evaluated(req, s.batch_size)
    name = req.name()
    data = eval_data(ev.ctx)
    known = _known_zero_shot(req.store, name, data)
    res = arith.single_task_result(ev.ctx, ev.vectors, req.result_id, ev.modes, zero_shot=known)
    table = res.table
    upsert(req.store, "single", name, table, req.result_id, data=data, run_ids=_run_ids(ev.runs), model=req.model,
           suite=req.suite, examples=res.examples, order=req.row_order)
    lines = [f"{r.task}: zero-shot {fmt(r.zero_shot_acc)} -> fine-tuned {fmt(r.finetuned_acc)} ({r.split})"
             for r in table.itertuples()]
    return EvalOutcome("single", table, [("single", name)], lines)


def _known_zero_shot(store: Store, name: str, data: dict) -> dict[tuple[str, str], float]:
    """Zero-shot accuracies already stored for this model and evaluation data (they depend on the model only)."""
    if name not in store.results("single"):
        return {}
    try:
        payload = store.read_result("single", name)
    except TalosError:
        return {}
    stored = payload.get("data")
    if stored is None or not same_data(stored, data):
        return {}
    out = {}
    for rec in payload.get("records", []):
        if rec.get("zero_shot_acc") is not None:
            out[(rec["task"], rec["split"])] = float(rec["zero_shot_acc"])
    return out


def _mixed_sparsities(runs: Mapping[str, Run]) -> dict:
    """``{"sparsities": {task: k}}`` when the runs' sparsities differ (per-task selection), else ``{}``."""
    ks = run_sparsities(runs)
    return {"sparsities": ks} if len(set(ks.values())) > 1 else {}


def _rule(s: AdditionSettings | NegationSettings) -> dict:
    """``{"alpha_rule": …}`` when the α grid is not the paper's (results under the default stay as they were)."""
    return {} if s.alpha_rule == "paper" else {"alpha_rule": s.alpha_rule}


def _addition(req: EvalRequest, s: AdditionSettings) -> EvalOutcome:
    ev = _evaluated(req, s.batch_size)
    alphas, sparsity = run_alpha_grid(ev.runs, s.alpha_step, s.alpha_rule)  # one α for all; mixed: the grids' union
    mode = common_mode(ev.runs)
    ref = arith.finetuned_accuracies(ev.ctx, ev.vectors, mode)
    res = arith.task_addition(ev.ctx, ev.vectors, ref, alphas, mode=mode, sparsity=sparsity, progress=req.progress,
                              extend=s.alpha_extend)
    name = req.name(req.result_id)
    req.store.write_table("addition", name, res.table, **res.extra(), **_mixed_sparsities(ev.runs), **_rule(s),
                          method=req.result_id, model=req.model, suite=req.suite, runs=_run_ids(ev.runs),
                          **req.result_meta())
    grid = res.alphas
    lines = [f"selected alpha {res.selected_alpha:g} (on val, grid {grid[0]:g}..{grid[-1]:g}"
             + (f", extended from {alphas[-1]:g}" if res.extended else "") + ")",
             f"test: absolute acc {fmt(res.summary['abs_acc'])} | normalized acc {fmt(res.summary['norm_acc'])}"]
    return EvalOutcome("addition", res.table, [("addition", name)], lines)


def _negation(req: EvalRequest, s: NegationSettings) -> EvalOutcome:
    control = check_control_task(s.control_task or arith.default_control_task(req.tasks), req.tasks)
    ev = _evaluated(req, s.batch_size, [control])
    grids = task_alpha_grids(ev.runs, s.alpha_step, s.alpha_rule)  # α is chosen per target, on its own grid
    mixed = len({tuple(g) for g in grids.values()}) > 1
    alphas = grids if mixed else next(iter(grids.values()))
    mode = common_mode(ev.runs)
    res = arith.task_negation(ev.ctx, ev.vectors, control, alphas, mode=mode, progress=req.progress,
                              extend=s.alpha_extend)
    name = req.name(req.result_id)
    req.store.write_table("negation", name, res.table, **res.extra(), **({"alpha_grids": res.grids} if res.mixed
                                                                          else {}), **_rule(s),
                          **_mixed_sparsities(ev.runs), method=req.result_id, model=req.model, suite=req.suite,
                          runs=_run_ids(ev.runs), **req.result_meta())
    lines = [f"control {control}: zero-shot test acc {fmt(res.control_zero_shot_acc['test'])}"]
    lines += [f"{r.target}: alpha {r.alpha:g} | target acc {fmt(r.target_acc)} | control acc {fmt(r.control_acc)}"
              for r in res.per_task.itertuples()]
    lines.append(f"mean: target {fmt(res.summary['target_acc'])} | control {fmt(res.summary['control_acc'])}")
    return EvalOutcome("negation", res.table, [("negation", name)], lines)


def _disentanglement(req: EvalRequest, s: DisentanglementSettings) -> EvalOutcome:
    from talos_core.evaluation.disentanglement import disentanglement_alphas, disentanglement_error
    from talos_core.evaluation.progress import Progress, evaluation_key

    ev = _evaluated(req, s.batch_size)
    if len(ev.vectors) < 2:
        raise TalosError("disentanglement needs at least two tasks")
    alphas = disentanglement_alphas(s.grid, s.alpha_range)
    add_alphas, _ = run_alpha_grid(ev.runs, s.alpha_step)
    mode = common_mode(ev.runs)
    written, rows, lines = [], [], []
    for t1, t2 in itertools.combinations(list(ev.vectors), 2):
        name = req.name(req.result_id, t1, t2)
        # the finished rows of an interrupted grid, valid for exactly these numbers' inputs
        resume = Progress(req.store.progress_path("disentanglement", name),
                          {"runs": [ev.runs[t1].id, ev.runs[t2].id], "alphas": alphas, "points": s.points,
                           "seed": s.seed, "mode": mode, **evaluation_key(ev.ctx)})
        res = disentanglement_error(ev.ctx, t1, t2, ev.vectors[t1], ev.vectors[t2], alphas1=alphas, points=s.points,
                                    seed=s.seed, mode=mode, progress=req.progress, resume=resume)
        req.store.write_result("disentanglement", name, {
            **res.payload(model=req.model, method=req.result_id, search_region=arith.search_region(add_alphas)),
            "suite": req.suite, **req.result_meta()})
        resume.clear()
        written.append(("disentanglement", name))
        for i, a1 in enumerate(res.alphas1):
            for j, a2 in enumerate(res.alphas2):
                rows.append({"task1": t1, "task2": t2, "alpha1": a1, "alpha2": a2, "xi": res.xi[i, j]})
        lines.append(f"{t1} x {t2}: mean xi {res.xi.mean():.4f}, max {res.xi.max():.4f} over a "
                     f"{len(alphas)}x{len(alphas)} grid on [-{s.alpha_range:g}, {s.alpha_range:g}]^2, "
                     f"{min(res.points_per_task.values())} points/task")
    return EvalOutcome("disentanglement", pd.DataFrame(rows), written, lines)


def _localization(req: EvalRequest, s: EvalSettings) -> EvalOutcome:
    from talos_core.evaluation.localization import function_localization

    ev = _evaluated(req, s.batch_size)
    res = function_localization(ev.ctx, ev.vectors, ev.modes)
    name = req.name(req.result_id)
    req.store.write_result("localization", name, {**res.payload(), "method": req.result_id, "model": req.model,
                                                   "suite": req.suite, "runs": _run_ids(ev.runs),
                                                   **req.result_meta()})
    table = pd.DataFrame(res.matrix, index=res.rows, columns=res.tasks)
    lines = ["rows = fine-tuned on, cols = evaluated on (acc / zero-shot acc):",
             table.round(4).to_string()]
    tidy = table.reset_index(names="finetuned_on").melt(id_vars="finetuned_on", var_name="evaluated_on",
                                                         value_name="relative_acc")
    return EvalOutcome("localization", tidy, [("localization", name)], lines)


def _linearization(req: EvalRequest, s: EvalSettings) -> EvalOutcome:
    from talos_core.evaluation.linearization import linearization_table

    ev = _evaluated(req, s.batch_size)
    table = linearization_table(ev.ctx, ev.vectors, req.result_id, ev.modes)
    name = req.name()
    upsert(req.store, "linearization", name, table, req.result_id, model=req.model, suite=req.suite,
           data=eval_data(ev.ctx), order=req.row_order)
    lines = [f"{r.task}: fine-tuned {fmt(r.finetuned_acc)} | post-hoc linearized {fmt(r.linearized_acc)}"
             for r in table.itertuples()]
    return EvalOutcome("linearization", table, [("linearization", name)], lines)


def _preview(req: EvalRequest, s: PreviewSettings) -> EvalOutcome:
    from talos_core.evaluation.preview import build_preview, save_preview
    from talos_core.result_arrays import preview_accuracy

    ev = _evaluated(req, s.batch_size)
    cache = build_preview(ev.ctx, ev.vectors, points=s.points, seed=s.seed)
    name = req.name(req.result_id)
    save_preview(req.store, name, cache, method=req.result_id, model=req.model, suite=req.suite, **req.result_meta())
    rows = []
    for a in (0.0, 0.5, 1.0):
        accs = preview_accuracy(cache, {t: a for t in cache.tasks})
        rows += [{"alpha": a, "task": t, "linearized_accuracy": v} for t, v in accs.items()]
    table = pd.DataFrame(rows)
    lines = [f"cached {len(cache.tasks)} vectors x {len(cache.eval_tasks)} tasks, "
             f"{min(len(v) for v in cache.labels.values())} points/task",
             *(f"alpha {r.alpha:g} on all vectors: {r.task} {fmt(r.linearized_accuracy)}" for r in table.itertuples())]
    return EvalOutcome("preview", table, [("preview", name)], lines)


def _row_runs(req: EvalRequest) -> dict[str, str]:
    """``{task: run id}`` the row's stored results were computed from (:meth:`SuiteReader.row_runs
    <talos_core.evaluation.audit.SuiteReader.row_runs>`: its addition, else negation, else ``single`` result), those the
    store holds. A store can hold two trainings of one request — a run kept as a manifest alone and the run that
    trained it again elsewhere (another device or precision: another id) — and only the results say which one the
    row's numbers came from; ``{}`` outside a suite of this model."""
    from talos_core.evaluation.audit import SuiteReader

    if req.suite not in req.store.results("suite"):
        return {}
    reader = SuiteReader(req.store.root, req.suite)
    if reader.model != req.model:
        return {}
    return {t: r for t, r in reader.row_runs(req.result_id).items() if req.store.has_run(r)}


def _efficiency(req: EvalRequest, s: NoSettings) -> EvalOutcome:
    from talos_core.evaluation.reports import EFFICIENCY_COLUMNS, efficiency_summary, efficiency_table

    runs = req.runs(weights=False)  # timings only: a manifest kept without weights serves
    for task, rid in _row_runs(req).items():  # the runs the row's arithmetic read, where the store holds another too
        if task in runs and runs[task].id != rid:
            runs[task] = req.store.get_run(rid)
    full = efficiency_table(runs.values())
    full["method"] = req.result_id
    name = req.name()
    with req.store.locked("efficiency", name):
        merged, _ = merged_rows(req.store, "efficiency", name, full, req.result_id, order=req.row_order)
        summary = efficiency_summary(merged)
        req.store.write_table("efficiency", name, merged, summary=summary, model=req.model, suite=req.suite)
    m = summary.get(req.result_id, {})
    lines = [f"{req.result_id}: {fmt(m.get('time_per_step_s'))} s/step (fwd+bwd {fmt(m.get('fwd_bwd_s_mean'))} "
             f"+ opt {fmt(m.get('opt_s_mean'))}), peak memory {fmt(m.get('peak_memory_mb'))} MB"]
    return EvalOutcome("efficiency", full[EFFICIENCY_COLUMNS], [("efficiency", name)], lines)


def _masks(req: EvalRequest, s: MaskSettings) -> EvalOutcome:
    from talos_core.evaluation.maskstats import (
        cross_method_iou,
        density_by_layer,
        mask_iou_matrix,
        mask_table,
        mask_warnings,
        run_mask,
        run_mask_diagnostics,
    )

    runs = req.runs()
    masks = {t: run_mask(r) for t, r in runs.items()}
    table = mask_table(masks)
    name = req.name(req.result_id)
    source = "mask" if all(r.mask() is not None for r in runs.values()) else "task_vector_support"
    common = dict(model=req.model, suite=req.suite, source=source, **req.result_meta())
    diagnostics = [{"task": t, "run_id": r.id, **run_mask_diagnostics(r)} for t, r in runs.items()
                   if r.mask() is not None]
    req.store.write_table("masks", name, table, method=req.result_id, diagnostics=diagnostics, **common)
    names_iou, matrix = mask_iou_matrix(masks)
    req.store.write_result("mask_iou", name, {"tasks": names_iou, "matrix": matrix.tolist(),
                                              "method": req.result_id, **common})
    written = [("masks", name), ("mask_iou", name)]
    agg = density_by_layer(table).groupby("layer_type")[["numel", "trainable"]].sum()
    lines = [f"{t}: density {table[table.task == t].trainable.sum() / max(table[table.task == t].numel.sum(), 1):.4f}"
             for t in req.tasks]
    lines += [f"{d['task']}: {w}" for d in diagnostics for w in mask_warnings(d)]
    lines += [f"  {lt}: {row.trainable / row.numel:.4f}" for lt, row in agg.iterrows()]
    lines.append("IoU between tasks: " + "; ".join(
        f"{a}~{b} {matrix[i, j]:.3f}" for (i, a), (j, b) in itertools.combinations(enumerate(names_iou), 2)))
    if s.compare_method:
        # the compared method's runs: its own overrides (the request's task overrides are for req.method)
        other = req.runs(s.compare_method, dict(req.overrides) if s.compare_overrides is None else s.compare_overrides,
                         force=False)
        cmp = cross_method_iou(masks, {t: run_mask(r) for t, r in other.items()})
        label = s.compare_label or s.compare_method
        cname = f"{name}__vs__{slug(label)}"
        req.store.write_table("mask_iou", cname, cmp, methods=[req.result_id, label], model=req.model,
                              suite=req.suite)
        written.append(("mask_iou", cname))
        lines += [f"IoU {req.result_id} vs {label} on {r.task}: {r.iou:.4f}" for r in cmp.itertuples()]
    return EvalOutcome("masks", table, written, lines)


def _sharing(req: EvalRequest, s: SharingSettings) -> EvalOutcome:
    from talos_core.evaluation.sharing import SHARING_MODES, low_sensitivity_mask, sharing_matrix

    modes = list(SHARING_MODES) if s.mode == "both" else [s.mode]
    tasks = list(req.tasks)
    ctx = req.context(None, s.batch_size)
    masks = {t: low_sensitivity_mask(ctx, t, s.fraction, samples=s.samples, seed=s.seed) for t in tasks}
    written, frames, lines = [], [], []
    for m in modes:
        res = sharing_matrix(ctx, tasks, m, fraction=s.fraction, seed=s.seed, masks=masks)
        name = req.name(m)
        req.store.write_result("sharing", name, {**res.payload(), "model": req.model, "suite": req.suite,
                                                 "samples": s.samples, "seed": s.seed})
        written.append(("sharing", name))
        df = pd.DataFrame(res.matrix, index=tasks, columns=tasks)
        lines += [f"{m} bottom {s.fraction:g} (rows = task used for Fisher, cols = evaluated):",
                  df.round(4).to_string()]
        frames.append(df.reset_index(names="bottomk_of").melt(id_vars="bottomk_of", var_name="evaluated_on",
                                                               value_name="relative_acc").assign(mode=m))
    return EvalOutcome("sharing", pd.concat(frames, ignore_index=True), written, lines)


def _examples(req: EvalRequest, s: ExamplesSettings) -> EvalOutcome:
    from talos_core.evaluation.examples import compute_examples, save_examples, teaching_alphas

    control = check_control_task(s.control_task or arith.default_control_task(req.tasks), req.tasks)
    ev = _evaluated(req, s.batch_size, [control])
    add_alphas, grids = _searched_grids(req, ev.runs, s.alpha_step, s.alpha_rule, control)
    add_alphas = teaching_alphas(add_alphas, s.teaching_max)
    grids = {t: teaching_alphas(g, s.teaching_max) for t, g in grids.items()}
    res = compute_examples(ev.ctx, ev.vectors, ev.modes, add_alphas, grids, control, points=s.points, seed=s.seed)
    name = req.name(req.result_id)
    save_examples(req.store, name, res, method=req.result_id, model=req.model, suite=req.suite,
                  runs=_run_ids(ev.runs), **req.result_meta())
    rows = []
    for t in res.meta["tasks"]:
        zs, labels = res.arrays[f"pred::zero_shot::{t}"], np.asarray(res.meta["labels"][t])
        for a, pred in zip(res.meta["addition_alphas"], res.arrays[f"pred::addition::{t}"]):
            rows.append({"task": t, "alpha": a, "correct": int((pred == labels).sum()),
                         "changed": int((pred != zs).sum()), "n": len(labels)})
    table = pd.DataFrame(rows, columns=["task", "alpha", "correct", "changed", "n"])
    lines = [f"{t}: {res.meta['n'][t]} examples" for t in res.meta["eval_tasks"]]
    lines.append(f"addition: {len(add_alphas)} alphas; negation control {control}")
    return EvalOutcome("examples", table, [("examples", name)], lines)


def _searched_grids(req: EvalRequest, runs: Mapping[str, Run], step: float, rule: str,
                    control: str) -> tuple[list[float], dict[str, list[float]]]:
    """The α grids the row's addition and negation searched — from their stored results when those evaluated these
    runs (an extended search's grid holds its added points), else the grids the rule gives."""
    add_alphas, _ = run_alpha_grid(runs, step, rule)
    grids = task_alpha_grids(runs, step, rule)
    name, ids = req.name(req.result_id), _run_ids(runs)
    stored = {k: req.store.read_result(k, name) for k in ("addition", "negation") if name in req.store.results(k)}
    add, neg = stored.get("addition") or {}, stored.get("negation") or {}
    if add.get("runs") == ids and add.get("alpha_grid"):
        add_alphas = [float(a) for a in add["alpha_grid"]]
    if neg.get("runs") == ids and neg.get("control_task") == control and neg.get("alpha_grid"):
        per = neg.get("alpha_grids") or {t: neg["alpha_grid"] for t in ids}
        grids = {t: [float(a) for a in per[t]] for t in ids}
    return add_alphas, grids


def _comparison(req: EvalRequest, s: NoSettings) -> EvalOutcome:
    from talos_core.evaluation.reports import comparison_table

    table = comparison_table(req.store, req.suite, req.model)
    if table.empty:
        raise TalosError(f"store {req.store.root} has no results for suite {req.suite!r} and model {req.model!r} "
                         f"to compare")
    name = req.name()
    req.store.write_table("comparison", name, table, model=req.model, suite=req.suite)
    with pd.option_context("display.width", 200, "display.max_columns", None):
        lines = [table.round(4).to_string(index=False)]
    return EvalOutcome("comparison", table, [("comparison", name)], lines)


# --------------------------------------------------------------------------------------------
# the registry
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Protocol:
    """An evaluation protocol: ``run(request, settings)`` computes it and writes its results (SCHEMA.md).

    ``settings`` is the frozen dataclass of its typed settings (validated when built); ``method_kind``
    says what the request's ``method`` names (a fine-tuning method, a post-hoc method, or nothing);
    ``needs_tasks=False`` for protocols that only read stored results; ``min_tasks`` the fewest tasks it
    is defined on (task addition and the merges combine at least two task vectors, Eq. 1 of the paper;
    disentanglement compares pairs); ``upserts`` the per-model results it merges its rows into
    (:func:`~talos_core.evaluation.request.upsert`, under the store's lock and in the suite's row order, so
    parallel writers need no ordering).
    """

    name: str
    description: str
    settings: type
    run: Callable[[EvalRequest, Any], EvalOutcome] = field(repr=False, compare=False)
    method_kind: Literal["finetune", "posthoc"] | None = "finetune"
    needs_tasks: bool = True
    min_tasks: int = 1
    upserts: tuple[str, ...] = ()

    def make_settings(self, given: Any = None) -> Any:
        """The protocol's settings from ``None`` (defaults), an instance, or a mapping of field values."""
        if given is None:
            return self.settings()
        if isinstance(given, self.settings):
            return given
        if not isinstance(given, Mapping):
            raise TalosError(f"settings of protocol {self.name!r} must be a {self.settings.__name__} or a dict, "
                             f"got {type(given).__name__}")
        allowed = [f.name for f in fields(self.settings)]
        bad = sorted(k for k in given if k not in allowed)
        if bad:
            raise TalosError(f"protocol {self.name!r} has no setting {bad[0]!r}; its settings: "
                             f"{', '.join(allowed) or 'none'}")
        return self.settings(**given)

    def check_method(self, method: str) -> None:
        """``method`` must name a registered method of the kind this protocol evaluates."""
        if self.method_kind == "finetune":
            from talos_core.runners import get_method

            get_method(method)
        elif self.method_kind == "posthoc":
            from talos_core.methods.merging import get_posthoc

            get_posthoc(method)


PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (
    Protocol("single", "zero-shot and single-task fine-tuned accuracy per task (val and test)", EvalSettings,
             _single, upserts=("single",)),
    Protocol("addition", "task addition θ0 + α Σ τ_t, α chosen on val by normalized accuracy", AdditionSettings,
             _addition, min_tasks=2),
    Protocol("negation", "task negation θ0 − α τ_t, α chosen on val under the 95% control constraint",
             NegationSettings, _negation),
    Protocol("disentanglement", "disentanglement error ξ(α1, α2) on a grid, for every pair of tasks",
             DisentanglementSettings, _disentanglement, min_tasks=2),
    Protocol("localization", "function localization matrix: acc of θ0 + τ_t on t' / zero-shot acc on t'",
             EvalSettings, _localization),
    Protocol("masks", "mask density per tensor / layer type / block, and mask IoU between tasks (and methods)",
             MaskSettings, _masks),
    Protocol("sharing", "prune / perturb each task's bottom-k Fisher entries, relative accuracy on every task",
             SharingSettings, _sharing),
    Protocol("linearization", "single-task accuracy vs its post-hoc linearization f(x,θ0) + τᵀ∇f(x,θ0)",
             EvalSettings, _linearization, upserts=("linearization",)),
    Protocol("preview", "cache f(x,θ0) and τ_tᵀ∇f(x,θ0) so any α mix is previewed in milliseconds",
             PreviewSettings, _preview),
    Protocol("examples", "per-example predictions on <= 24 fixed test examples per task: zero-shot, at every "
             "addition and negation alpha, and of each single-task model (the dashboard's galleries)",
             ExamplesSettings, _examples),
    Protocol("efficiency", "timings and peak memory from the runs' manifests", NoSettings, _efficiency,
             upserts=("efficiency",)),
    Protocol("comparison", "one row per method from the stored addition/negation/single/efficiency results",
             NoSettings, _comparison, method_kind=None, needs_tasks=False),
    Protocol("posthoc", "a post-hoc method (--method ties, dare, ...) merging the nonlinear runs (or another "
             "method's, e.g. imported): addition, negation and single, hyperparameters chosen on val",
             PosthocSettings, evaluate_posthoc,
             method_kind="posthoc", min_tasks=2, upserts=("single",)),
    Protocol("sparsity-ablation", "addition, negation and single-task summaries of a sparse method at several "
             "sparsities", AblationSettings, sparsity_ablation, min_tasks=2),
    Protocol("alpha-rule", "addition and negation of one row's runs under each alpha-grid rule side by side: the "
             "paper's (x 1/(1 - k) for sparse methods) and 0..1 for every method (the official code's)",
             AlphaRuleSettings, alpha_rule, min_tasks=2),
    Protocol("selection", "per task, choose a hyperparameter (sparsity, rank or lr) by validation task negation: "
             "lowest target acc with the control at >= 95% of zero-shot", SelectionSettings, run_selection),
    Protocol("learning-curve", "validation accuracy every eval_every steps while fine-tuning each task, and the "
             "step budget where every curve has plateaued (within tolerance)", LearningCurveSettings, learning_curve),
    Protocol("lr-check", "the learning rate re-checked at the step budget: one run per task and lr (--values, the "
             "method's own among them), mean validation accuracy per lr; reports, changes nothing", LrCheckSettings,
             run_lr_check),
)}
"""Every evaluation protocol, by name."""


def get_protocol(name: str) -> Protocol:
    if name not in PROTOCOLS:
        raise unknown("protocol", name, PROTOCOLS)
    return PROTOCOLS[name]


def _check_tasks(tasks: Sequence[str]) -> tuple[str, ...]:
    from talos_core.tasks import get_task

    tasks = [t.strip() for t in tasks if t and t.strip()]
    if not tasks:
        raise TalosError("no tasks given; pass a comma-separated list such as tweets,wordnet-verbs")
    dup = [t for t in tasks if tasks.count(t) > 1]
    if dup:
        raise TalosError(f"task {dup[0]!r} is listed twice")
    for t in tasks:
        get_task(t)
    return tuple(tasks)


# --------------------------------------------------------------------------------------------
# the orchestrator
# --------------------------------------------------------------------------------------------
def evaluate(store: Store | str, protocol: str, model: str, tasks: Sequence[str] = (), method: str = "talos", *,
             suite: str = "default", settings: Any = None, overrides: Mapping[str, Any] | None = None,
             train: bool = True, progress: bool = False, force: bool = False,
             task_overrides: Mapping[str, Mapping[str, Any]] | None = None,
             result_method: str | None = None, row_order: Sequence[str] = ()) -> EvalOutcome:
    """Run ``protocol`` (see :data:`PROTOCOLS`) and write its results into ``store`` per SCHEMA.md.

    ``settings`` are the protocol's (its settings dataclass, or a dict of its fields; default: the
    defaults), validated before any (slow) fine-tuning starts. ``overrides``, ``train``, ``progress``
    and ``force`` identify and create the runs (see :class:`~talos_core.evaluation.request.EvalRequest`);
    ``task_overrides[task]`` is merged over ``overrides`` for that task (a different run per task, e.g.
    :func:`~talos_core.evaluation.selection.selected_overrides`); ``result_method`` is the id results are
    written under (default: ``method``; a variant id of it such as ``talos-k0.9``); ``row_order`` the suite's row
    ids in table order, which per-model tables keep their rows in (a suite's steps pass it).
    """
    store = Store(store) if not isinstance(store, Store) else store
    proto = get_protocol(protocol)
    check_suite(suite)
    chosen = proto.make_settings(settings)
    if proto.needs_tasks:
        tasks = _check_tasks(tasks)
        if len(tasks) < proto.min_tasks:
            raise TalosError(f"protocol {proto.name!r} needs at least {proto.min_tasks} tasks, got {len(tasks)} "
                             f"({', '.join(tasks)}); pass a comma-separated list such as --tasks tweets,wordnet-verbs")
    proto.check_method(method)
    _check_result_method(result_method, method)
    per_task = _check_task_overrides(task_overrides, model, tuple(tasks), method, proto, overrides)
    req = EvalRequest(store, suite, model, tuple(tasks), method, dict(overrides or {}), train=train,
                      progress=progress, force=force, task_overrides=per_task, result_method=result_method,
                      row_order=tuple(row_order))
    return proto.run(req, chosen)


def _check_result_method(result_method: str | None, method: str) -> None:
    """``result_method`` must be ``method`` or a variant id of it (:func:`talos_core.schema.variant_id`)."""
    if result_method is None or result_method == method:
        return
    if not isinstance(result_method, str) or base_method_of(result_method) != method:
        raise TalosError(f"result method {result_method!r} must be {method!r} or a variant id of it such as "
                         f"'{method}-k0.9', '{method}-r16' or '{method}-lr0.0001'")


#: fine-tuning settings that would change the evaluation data or device, which all tasks share
_SHARED_SETTINGS = ("max_val", "max_test", "device", "eval_batch_size")


def _check_task_overrides(task_overrides: Mapping[str, Mapping[str, Any]] | None, model: str,
                          tasks: tuple[str, ...], method: str, proto: Protocol,
                          overrides: Mapping[str, Any] | None) -> dict[str, dict]:
    """Per-task overrides as plain dicts, every one checked (a valid request) before anything runs."""
    from talos_core.evaluation.runs import build_request, merge_overrides
    from talos_core.schema import METHODS

    if not task_overrides:
        return {}
    if not isinstance(task_overrides, Mapping):
        raise TalosError(f"task overrides must map task names to overrides, got {type(task_overrides).__name__}")
    if proto.method_kind == "posthoc":
        method = METHODS[method].base_method  # post-hoc methods merge this method's runs
    out = {}
    for task, extra in task_overrides.items():
        if not isinstance(extra, Mapping):
            raise TalosError(f"the overrides of task {task!r} must be a mapping, got {type(extra).__name__}")
        shared = [k for k in _SHARED_SETTINGS if k in extra]
        if shared:
            raise TalosError(f"task overrides may not set {shared[0]!r} (task {task!r}): all tasks share the "
                             f"evaluation data and device; set it in the overrides")
        if task in tasks and proto.method_kind is not None:
            build_request(model, task, method, merge_overrides(overrides, extra))
        out[str(task)] = dict(extra)
    return out


__all__ = ["PROTOCOLS", "Protocol", "EvalOutcome", "EvalRequest", "evaluate", "get_protocol", "NoSettings",
           "EvalSettings", "AdditionSettings", "NegationSettings", "DisentanglementSettings", "MaskSettings",
           "SharingSettings", "PreviewSettings", "ExamplesSettings", "PosthocSettings", "AblationSettings",
           "SelectionSettings", "LearningCurveSettings", "LrCheckSettings"]
