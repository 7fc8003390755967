"""The ``sparsity-ablation`` protocol: task addition, negation and single-task summaries of a sparse
method at several sparsities (paper App. k ablation), one row per sparsity (``sparsity_ablation``).

Each row also carries the 95% bootstrap intervals over test examples of its means (``<metric>_lo``,
``<metric>_hi``; :mod:`talos_core.evaluation.stats`), and the payload the per-example test correctness
behind them (``examples: {sparsity: {"addition", "single", "negation"}}``).

Each sparsity is an addition and a negation search (on a CPU, MiniLM's text suite takes about an hour and a half per
sparsity), so the step keeps every finished sparsity in a :class:`~talos_core.evaluation.progress.Progress` and a
step cut off mid-way evaluates only the sparsities it lacks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from talos_core.errors import TalosError, check_int, check_range
from talos_core.evaluation import arithmetic as arith
from talos_core.evaluation import stats
from talos_core.evaluation.progress import Progress, evaluation_key
from talos_core.evaluation.request import (
    EvalOutcome,
    EvalRequest,
    check_alpha_step,
    check_control_task,
    fmt,
)
from talos_core.evaluation.runs import run_alpha_grid
from talos_core.methods.declaration import ALPHA_STEP
from talos_core.schema import result_name, variant_id
from talos_core.store import Store


@dataclass(frozen=True)
class AblationSettings:
    sparsities: tuple[float, ...] = (0.5, 0.9, 0.95, 0.99)  # the paper's ablation
    control_task: str | None = None  # None: the registered control task of the tasks' modality
    alpha_step: float = ALPHA_STEP  # α grid 0, step, …, 1, × 1/(1 − sparsity)
    batch_size: int | None = None  # evaluation batch size; None: the device's default
    alpha_rule: str = "paper"  # the grid rule (evaluation.runs.GRID_RULES), as AdditionSettings.alpha_rule
    alpha_extend: float = 0.0  # as AdditionSettings.alpha_extend

    def __post_init__(self) -> None:
        from talos_core.evaluation.runs import check_alpha_rule

        check_alpha_rule(self.alpha_rule)
        arith.check_extend(self.alpha_extend)
        if not isinstance(self.sparsities, tuple) or not self.sparsities:
            raise TalosError(f"sparsities must be a non-empty tuple of numbers, got {self.sparsities!r}")
        for s in self.sparsities:
            check_range("sparsity", s, 0.0, 1.0)
        if self.control_task is not None and not isinstance(self.control_task, str):
            raise TalosError(f"control task must be a task name, got {self.control_task!r}")
        check_alpha_step(self.alpha_step)
        check_int("batch_size", self.batch_size, low=1, optional=True)


_PARTS = ("addition", "negation", "single", "examples", "ci95", "grids")
"""What one sparsity's evaluation keeps in the step's :class:`Progress` (the tuple of :func:`_stored_summaries`)."""


def sparsity_ablation(req: EvalRequest, s: AblationSettings) -> EvalOutcome:
    """Addition/negation/single-task summaries of ``req.method``'s runs at each of ``s.sparsities``."""
    from talos_core.runners import get_method

    if not get_method(req.method).sparse:
        raise TalosError(f"method {req.method!r} does not train a sparse subset; the sparsity ablation needs one "
                         f"that does (e.g. talos)")
    tasks = list(req.tasks)
    control = check_control_task(s.control_task or arith.default_control_task(tasks), tasks)
    ctx = req.context(None, s.batch_size, [control])
    name = req.name(req.result_id)
    # the sparsities an interrupted run of this step finished (each is an addition + negation search)
    progress = Progress(req.store.progress_path("sparsity_ablation", name),
                        {"tasks": tasks, "control_task": control, **evaluation_key(ctx)})
    rows, examples, searched = [], {}, {}
    for sparsity in s.sparsities:
        runs = req.runs(overrides={**req.overrides, "sparsity": sparsity})
        alphas, _ = run_alpha_grid(runs, s.alpha_step, s.alpha_rule)
        ids = {t: r.id for t, r in runs.items()}
        part = json.dumps({"sparsity": sparsity, "runs": ids, "alphas": [float(a) for a in alphas]}, sort_keys=True)
        known = None  # the suite may have evaluated these runs under the method or its fixed-sparsity variant
        for rid in dict.fromkeys((req.result_id, variant_id(req.method, sparsity=sparsity))):
            known = known or _stored_summaries(req.store, req.suite, req.model, rid, ids, alphas, control)
        saved = progress.get(part) if known is None else None
        if isinstance(saved, dict) and set(saved) == set(_PARTS):
            known = tuple(saved[k] for k in _PARTS)
        if known is not None:  # these very runs were already evaluated (by the suite, or by this step before a stop)
            add_summary, neg_summary, single, ex, ci95, grids = known
        else:
            vectors = {t: r.task_vector() for t, r in runs.items()}
            ref = arith.finetuned_accuracies(ctx, vectors, "nonlinear")
            add = arith.task_addition(ctx, vectors, ref, alphas, sparsity=sparsity, extend=s.alpha_extend)
            neg = arith.task_negation(ctx, vectors, control, alphas, extend=s.alpha_extend)
            add_summary, neg_summary = add.summary, neg.summary
            single = sum(ref[(t, "test")] for t in tasks) / len(tasks)
            ex = {"addition": arith.encode_all(add.examples),
                  "single": arith.encode_all({t: ref.correct[(t, "test")] for t in tasks}),
                  "negation": {t: arith.encode_all(e) for t, e in neg.examples.items()}}
            ci95 = {"addition": add.ci95, "negation": neg.ci95}
            grids = {"addition": add.alphas, "negation": neg.grids}
            progress.put(part, dict(zip(_PARTS, (add_summary, neg_summary, single, ex, ci95, grids))))
        searched[f"{sparsity:g}"] = grids
        row = {"sparsity": sparsity, "addition_abs": add_summary["abs_acc"],
               "addition_norm": add_summary["norm_acc"], "negation_target": neg_summary["target_acc"],
               "negation_control": neg_summary["control_acc"], "single_task_acc": single}
        if ex is not None:
            single_ci = stats.mean_interval({t: stats.decode_examples(c) for t, c in ex["single"].items()})
            row.update(interval_columns(ci95["addition"], ci95["negation"], single_ci))
            examples[f"{sparsity:g}"] = ex
        rows.append(row)
    table = pd.DataFrame(rows)
    extra = {"examples": examples, "bootstrap": stats.bootstrap_settings()} if examples else {}
    if s.alpha_extend:  # each sparsity's grids as searched (extending searches only: other results stay as they were)
        extra.update(alpha_extend=s.alpha_extend, alpha_grids=searched)
    req.store.write_table("sparsity_ablation", name, table, method=req.result_id, model=req.model, suite=req.suite,
                          **req.result_meta(), **extra)
    progress.clear()
    lines = [f"sparsity {r.sparsity:g}: addition abs {fmt(r.addition_abs)} | norm {fmt(r.addition_norm)} | "
             f"negation target {fmt(r.negation_target)} | control {fmt(r.negation_control)} | "
             f"single-task {fmt(r.single_task_acc)}" for r in table.itertuples()]
    return EvalOutcome("sparsity-ablation", table, [("sparsity_ablation", name)], lines)


INTERVAL_METRICS = (("addition_abs", "addition", "abs_acc"), ("addition_norm", "addition", "norm_acc"),
                    ("negation_target", "negation", "target_acc"), ("negation_control", "negation", "control_acc"))
"""``(column, result, key)`` of the interval columns read from the addition/negation results' ``ci95``."""


def interval_columns(add_ci95: Mapping | None, neg_ci95: Mapping | None, single_ci: Sequence[float | None]) -> dict:
    """``{<metric>_lo, <metric>_hi}`` of an ablation row (NaN where a result has no interval)."""
    out = {}
    intervals = {"addition": add_ci95 or {}, "negation": neg_ci95 or {}}
    for col, result, key in INTERVAL_METRICS:
        iv = intervals[result].get(key) or [None, None]
        out[f"{col}_lo"], out[f"{col}_hi"] = (float("nan") if v is None else float(v) for v in iv)
    out["single_task_acc_lo"], out["single_task_acc_hi"] = (float("nan") if v is None else float(v)
                                                            for v in single_ci)
    return out


def _stored_summaries(store: Store, suite: str, model: str, method: str, run_ids: Mapping[str, str],
                      alphas: Sequence[float], control_task: str) -> tuple | None:
    """``(addition summary, negation summary, mean single-task test acc, examples, ci95)`` already in
    ``store`` for exactly these runs, α grid and control task (non-linear evaluation), else ``None``.
    ``examples`` (``{"addition", "single", "negation"}``, as the ablation stores them) and ``ci95``
    (``{"addition", "negation"}``) are ``None`` when the stored results were written without them. A stored grid
    that an extending search continued (``alphas`` followed by the added points) counts as this grid; the sixth
    element is ``{"addition": grid, "negation": {target: grid}}`` as searched.

    Evaluation is deterministic, so re-evaluating the same runs would give the same numbers; the
    sparsity ablation uses this for the method's own sparsity, which the suite has just evaluated.
    """
    name = result_name(suite, model, method)
    try:
        add = store.read_result("addition", name) if name in store.results("addition") else None
        neg = store.read_result("negation", name) if name in store.results("negation") else None
        single_name = result_name(suite, model)
        single = store.read_result("single", single_name) if single_name in store.results("single") else None
    except TalosError:
        return None
    grid = [float(a) for a in alphas]
    ids = dict(run_ids)
    if (add is None or neg is None or single is None or add.get("runs") != ids or neg.get("runs") != ids
            or add.get("eval_mode") != "nonlinear" or neg.get("eval_mode") != "nonlinear"
            or not _continues(add.get("alpha_grid"), grid)
            or not all(_continues(g, grid) for g in (neg.get("alpha_grids") or {"": neg.get("alpha_grid")}).values())
            or neg.get("control_task") != control_task or (single.get("runs") or {}).get(method) != ids):
        return None
    records = [r for r in single.get("records", []) if r.get("method") == method and r.get("split") == "test"]
    test = {r["task"]: float(r["finetuned_acc"]) for r in records}
    if sorted(test) != sorted(ids):
        return None
    fine = {t: ((single.get("examples") or {}).get(method) or {}).get(t, {}).get("finetuned") for t in ids}
    examples, ci95 = None, None
    if (add.get("examples") and neg.get("examples") and add.get("ci95") and neg.get("ci95")
            and all(isinstance(fine[t], str) for t in ids)):
        examples = {"addition": dict(add["examples"]), "single": fine,
                    "negation": {t: dict(e) for t, e in neg["examples"].items()}}
        ci95 = {"addition": add["ci95"], "negation": neg["ci95"]}
    grids = {"addition": [float(a) for a in add["alpha_grid"]],
             "negation": {t: [float(a) for a in (neg.get("alpha_grids") or {}).get(t) or neg["alpha_grid"]]
                          for t in ids}}
    # same order of summation as a re-evaluation
    return dict(add["summary"]), dict(neg["summary"]), sum(test[t] for t in ids) / len(ids), examples, ci95, grids


def _continues(stored: object, grid: list[float]) -> bool:
    """Whether a stored α grid is ``grid``, or ``grid`` followed by points an extending search added above it."""
    if not isinstance(stored, list) or len(stored) < len(grid):
        return False
    values = [float(a) for a in stored]
    return values[:len(grid)] == grid and all(a > grid[-1] for a in values[len(grid):])
