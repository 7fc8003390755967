"""The ``alpha-rule`` protocol: task addition and negation of one row's runs under each α-grid rule
(:data:`~talos_core.evaluation.runs.ALPHA_RULES`), side by side (``alpha_rule``).

The paper searches ``{0, 0.05, …, 1}`` and stretches it by ``1/(1 − k)`` for sparse methods (App. "Tuning of α");
the official code at HEAD searches ``0…1`` for every method. Dense methods get the same grid either way; for a
sparse row the two rules search different α, and the choice can change which method leads, so the paper's rule
stays the default and this protocol measures the other on a suite and reports where it changes a verdict. The rows
compare the same runs, the same data and the same selection rules (addition: best normalized accuracy on
validation; negation: lowest target with the control ≥ 95 % of zero-shot, per target); only the grid differs.

Where the store already holds the row's ``addition`` / ``negation`` results for exactly these runs and grid (the
suite's, under the paper's rule), their numbers are taken instead of evaluating again (evaluation is
deterministic). :func:`talos_core.evaluation.claims.alpha_rule_markdown` re-judges claim (a) with these rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from talos_core.errors import TalosError, check_int
from talos_core.evaluation import arithmetic as arith
from talos_core.evaluation.request import (
    EvalOutcome,
    EvalRequest,
    check_alpha_step,
    check_control_task,
    common_mode,
    fmt,
)
from talos_core.evaluation.runs import ALPHA_RULES, run_alpha_grid, task_alpha_grids
from talos_core.methods.declaration import ALPHA_STEP
from talos_core.store import Store

COLUMNS = ("rule", "alpha_max", "addition_alpha", "addition_abs", "addition_norm", "negation_target",
           "negation_control")
"""The ``alpha_rule`` table: one row per rule; ``alpha_max`` is the largest α the rule searched."""


@dataclass(frozen=True)
class AlphaRuleSettings:
    control_task: str | None = None  # None: the registered control task of the tasks' modality
    alpha_step: float = ALPHA_STEP  # of both grids (the paper's 0.05)
    batch_size: int | None = None  # evaluation batch size; None: the device's default

    def __post_init__(self) -> None:
        if self.control_task is not None and not isinstance(self.control_task, str):
            raise TalosError(f"control task must be a task name, got {self.control_task!r}")
        check_alpha_step(self.alpha_step)
        check_int("batch_size", self.batch_size, low=1, optional=True)


def alpha_rule(req: EvalRequest, s: AlphaRuleSettings) -> EvalOutcome:
    """Addition and negation of ``req``'s runs under every α rule (see the module docstring)."""
    tasks = list(req.tasks)
    control = check_control_task(s.control_task or arith.default_control_task(tasks), tasks)
    runs = req.runs()
    ids = {t: r.id for t, r in runs.items()}
    mode = common_mode(runs)
    name = req.name(req.result_id)
    ctx = vectors = ref = None
    rows, negation_alphas, reused = [], {}, []
    for rule in ALPHA_RULES:
        alphas, sparsity = run_alpha_grid(runs, s.alpha_step, rule)
        grids = task_alpha_grids(runs, s.alpha_step, rule)
        stored = _stored(req.store, name, ids, alphas, grids, control)
        if stored is not None:
            add_alpha, add_summary, neg_summary, per_target = stored
            reused.append(rule)
        else:
            if ctx is None:  # the first rule the store lacks: load the vectors once
                ctx = req.context(runs, s.batch_size, [control])
                vectors = {t: r.task_vector() for t, r in runs.items()}
                ref = arith.finetuned_accuracies(ctx, vectors, mode)
            add = arith.task_addition(ctx, vectors, ref, alphas, mode=mode, sparsity=sparsity, progress=req.progress)
            mixed = len({tuple(g) for g in grids.values()}) > 1
            neg = arith.task_negation(ctx, vectors, control, grids if mixed else alphas, mode=mode,
                                      progress=req.progress)
            add_alpha, add_summary, neg_summary = add.selected_alpha, add.summary, neg.summary
            per_target = {str(r.target): float(r.alpha) for r in neg.per_task.itertuples()}
        negation_alphas[rule] = per_target
        rows.append({"rule": rule, "alpha_max": float(max(max(g) for g in grids.values())),
                     "addition_alpha": float(add_alpha), "addition_abs": float(add_summary["abs_acc"]),
                     "addition_norm": float(add_summary["norm_acc"]),
                     "negation_target": float(neg_summary["target_acc"]),
                     "negation_control": float(neg_summary["control_acc"])})
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    req.store.write_table("alpha_rule", name, table, negation_alphas=negation_alphas, control_task=control,
                          eval_mode=mode, method=req.result_id, model=req.model, suite=req.suite, runs=ids,
                          reused=reused, **req.result_meta())
    lines = [f"{r.rule} (α up to {r.alpha_max:g}): addition α {r.addition_alpha:g} abs {fmt(r.addition_abs)} | "
             f"norm {fmt(r.addition_norm)} | negation target {fmt(r.negation_target)} | control "
             f"{fmt(r.negation_control)}" for r in table.itertuples()]
    if reused:
        lines.append(f"taken from the stored addition/negation results (same runs and grid): {', '.join(reused)}")
    return EvalOutcome("alpha-rule", table, [("alpha_rule", name)], lines)


def _stored(store: Store, name: str, run_ids: Mapping[str, str], alphas: list[float],
            grids: Mapping[str, list[float]], control: str) -> tuple | None:
    """``(addition α, addition summary, negation summary, {target: α})`` of the stored ``addition`` and
    ``negation`` results ``name`` when they evaluated exactly these runs on exactly this grid (negation: each
    target's own grid) with this control task, else ``None``."""
    try:
        add = store.read_result("addition", name) if name in store.results("addition") else None
        neg = store.read_result("negation", name) if name in store.results("negation") else None
    except TalosError:
        return None
    if add is None or neg is None or add.get("runs") != dict(run_ids) or neg.get("runs") != dict(run_ids):
        return None
    floats = lambda values: [float(a) for a in values or []]  # noqa: E731
    neg_grids = neg.get("alpha_grids") or {t: neg.get("alpha_grid") for t in run_ids}
    if (floats(add.get("alpha_grid")) != floats(alphas) or neg.get("control_task") != control
            or any(floats(neg_grids.get(t)) != floats(g) for t, g in grids.items())):
        return None
    per_target = {str(p["target"]): float(p["alpha"]) for p in neg.get("per_task") or []}
    if set(per_target) != set(run_ids):
        return None
    return float(add["selected_alpha"]), dict(add["summary"]), dict(neg["summary"]), per_target


__all__ = ["COLUMNS", "AlphaRuleSettings", "alpha_rule"]
