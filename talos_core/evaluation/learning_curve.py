"""Learning curves and the step budget they imply: a budget set by measured convergence, not fixed in advance.

The ``learning-curve`` protocol fine-tunes each task of the request's method with a learning curve —
validation accuracy of the model *being trained*, through the logits training uses (linearized FT and
L-LoRA as their linearized models), every ``eval_every`` steps and at the last step
(:func:`talos_core.training.validation_accuracy`) — up to ``steps``, the largest budget considered. It
writes ``results/learning_curve/<suite>__<model>__<method>.json``: a table ``method, task, step, val_acc``
plus the budget :func:`choose_budget` picks from the curves and the rule's text. It writes nothing else
(the runs themselves go to the store as usual; ``eval_every`` is not part of a run's identity, so a run
already in the store without a curve is fine-tuned again, to the same task vector, to measure one).

The paper's budgets (Appendix "Implementation Details", "Fine-tuning details"): 2,000 iterations at batch
128 for CLIP on the vision tasks (as Ilharco et al.); for T5, at most 75,000 steps with early stopping
(patience 5) in bfloat16. This project's smaller models and datasets get their budget from measured curves
instead, with the rule of :func:`choose_budget` — a plateau criterion in the spirit of that early stopping.

>>> choose_budget({"a": [(10, 0.50), (20, 0.70), (30, 0.71), (40, 0.70)]}, 0.02)
20
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from talos_core.errors import TalosError, check_int, check_number
from talos_core.evaluation.request import EvalOutcome, EvalRequest, fmt
from talos_core.store import Run, Store

#: learning-curve interval when neither the settings nor the request's overrides give one
DEFAULT_EVAL_EVERY = 10

RULE = ("budget = the smallest evaluated step s such that, on every task's curve, no later validation accuracy "
        "exceeds the curve's value at s by more than the tolerance (the plateau is reached at s); a curve that "
        "never plateaus gives its last step")


# --------------------------------------------------------------------------------------------
# the budget rule
# --------------------------------------------------------------------------------------------
def _check_tolerance(tolerance: object) -> float:
    return check_number("tolerance", tolerance, low=0, high=1, what="an accuracy fraction in [0, 1] (e.g. 0.01)")


def _clean_curve(name: str, points: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """``points`` sorted by step; an empty curve, a repeated step or a non-finite value is an error."""
    try:
        pts = sorted((int(s), float(v)) for s, v in points)
    except (TypeError, ValueError):
        raise TalosError(f"curve {name!r} must be (step, value) pairs, got {list(points)[:3]!r}") from None
    if not pts:
        raise TalosError(f"curve {name!r} has no points")
    steps = [s for s, _ in pts]
    if len(set(steps)) != len(steps):
        raise TalosError(f"curve {name!r} has step {next(s for s in steps if steps.count(s) > 1)} twice")
    if not all(math.isfinite(v) for _, v in pts):
        raise TalosError(f"curve {name!r} has a non-finite value")
    return pts


def _plateaued(points: list[tuple[int, float]], step: int, tolerance: float) -> bool:
    """Whether no point after ``step`` exceeds the curve's value at ``step`` (its latest point at or before
    ``step``) by more than ``tolerance``; ``False`` when the curve starts after ``step``."""
    before = [v for s, v in points if s <= step]
    if not before:
        return False
    ref = before[-1]
    return all(v - ref <= tolerance + 1e-12 for s, v in points if s > step)


def choose_budget(curves: Mapping[str, Sequence[tuple[int, float]]], tolerance: float) -> int:
    """The step budget at which every curve has plateaued.

    ``curves`` maps a name (a task) to its ``(step, validation accuracy)`` points. The budget is the
    smallest evaluated step ``s`` (of any curve) such that on every curve no later point exceeds the
    curve's value at ``s`` by more than ``tolerance`` — training longer than ``s`` gains at most
    ``tolerance`` anywhere. A curve's value at ``s`` is its latest point at or before ``s`` (curves
    evaluated at different steps can be combined). A curve that is still rising at its end plateaus only
    at its last point, so it makes the budget the last step. Noise is tolerated up to ``tolerance``: a
    later point higher by more than that counts as progress.

    >>> choose_budget({"rising": [(10, 0.2), (20, 0.4), (30, 0.6)]}, 0.01)
    30
    >>> choose_budget({"flat": [(10, 0.5), (20, 0.5)], "late": [(10, 0.1), (20, 0.6)]}, 0.0)
    20
    """
    tol = _check_tolerance(tolerance)
    if not curves:
        raise TalosError("choose_budget needs at least one curve")
    clean = {name: _clean_curve(name, pts) for name, pts in curves.items()}
    candidates = sorted({s for pts in clean.values() for s, _ in pts})
    for s in candidates:
        if all(_plateaued(pts, s, tol) for pts in clean.values()):
            return s
    return candidates[-1]  # not reached: at the last step no curve has a later point


# --------------------------------------------------------------------------------------------
# the protocol
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LearningCurveSettings:
    """``eval_every``: steps between validation evaluations (default: the request's ``eval_every`` override,
    else 10); ``steps``: the largest budget considered, i.e. how long every run trains (default: the
    request's ``steps``, else the model's); ``tolerance``: of :func:`choose_budget` (accuracy fraction)."""

    eval_every: int | None = None
    steps: int | None = None
    tolerance: float = 0.01

    def __post_init__(self) -> None:
        check_int("eval_every", self.eval_every, low=1, optional=True)
        check_int("steps", self.steps, low=1, optional=True)
        _check_tolerance(self.tolerance)


def has_curve(run: Run, eval_every: int) -> bool:
    """Whether ``run`` measured its learning curve at ``eval_every`` up to its last step."""
    curve = run.manifest.curve or []
    steps = (run.manifest.config.get("train") or {}).get("steps")
    return (run.manifest.request.get("eval_every") == eval_every and bool(curve)
            and curve[-1].get("step") == steps)


def curve_overrides(overrides: Mapping[str, Any], s: LearningCurveSettings) -> dict[str, Any]:
    """The fine-tuning overrides of a curve's runs: ``overrides`` with the curve's ``eval_every`` (the settings',
    else the overrides', else :data:`DEFAULT_EVAL_EVERY`) and its length (the settings' ``steps`` when given).

    >>> curve_overrides({"lr": 1e-4, "steps": 40}, LearningCurveSettings(eval_every=50, steps=1000))
    {'lr': 0.0001, 'steps': 1000, 'eval_every': 50}
    """
    eval_every = s.eval_every or overrides.get("eval_every") or DEFAULT_EVAL_EVERY
    check_int("eval_every", eval_every, low=1)
    return {**overrides, "eval_every": eval_every, **({"steps": s.steps} if s.steps is not None else {})}


def curve_run(store: Store, model: str, task: str, method: str, overrides: Mapping[str, Any], *,
              train: bool = True, force: bool = False, progress: bool = False) -> Run:
    """The run of ``method`` on ``task`` trained with a learning curve (``overrides`` from :func:`curve_overrides`):
    found in the store (:func:`~talos_core.evaluation.runs.find_run`), or fine-tuned now — again, when the
    stored run has no such curve (``eval_every`` does not change the run, so it is the same run id). The suites'
    executors train each task's curve run on its own (in parallel); the step then finds them all."""
    from talos_core.evaluation.runs import build_request, find_run
    from talos_core.pipeline import run_finetune

    eval_every = overrides["eval_every"]  # the curve is in the manifest: one kept without its weights will do
    run = None if force else find_run(store, model, task, method, overrides, weights=False)
    if run is None or not has_curve(run, eval_every):
        if not train:
            raise TalosError(f"store {store.root} has no {method!r} run of {model!r} on {task!r} with "
                             f"a learning curve every {eval_every} steps; allow training to measure it")
        run = run_finetune(build_request(model, task, method, overrides), store,
                           force=force or run is not None, progress=progress)
    return run


def curve_runs(req: EvalRequest, s: LearningCurveSettings) -> dict[str, Run]:
    """``{task: run}`` of the request's method trained with the learning curve of ``s`` (:func:`curve_run`)."""
    overrides = curve_overrides(req.overrides, s)
    return {task: curve_run(req.store, req.model, task, req.method, overrides, train=req.train, force=req.force,
                            progress=req.progress) for task in req.tasks}


def learning_curve(req: EvalRequest, s: LearningCurveSettings) -> EvalOutcome:
    """The ``learning-curve`` protocol (see the module docstring)."""
    eval_every = curve_overrides(req.overrides, s)["eval_every"]
    runs = curve_runs(req, s)
    rows = [{"method": req.method, "task": task, "step": int(p["step"]), "val_acc": float(p["val_acc"])}
            for task, run in runs.items() for p in run.manifest.curve or []]
    table = pd.DataFrame(rows, columns=["method", "task", "step", "val_acc"])
    curves = {task: [(int(p["step"]), float(p["val_acc"])) for p in run.manifest.curve or []]
              for task, run in runs.items()}
    budget = choose_budget(curves, s.tolerance)
    plateau = {task: choose_budget({task: pts}, s.tolerance) for task, pts in curves.items()}
    steps = {task: (run.manifest.config.get("train") or {}).get("steps") for task, run in runs.items()}
    name = req.name(req.method)
    req.store.write_table(
        "learning_curve", name, table, budget=budget, rule=RULE, tolerance=s.tolerance, eval_every=eval_every,
        steps=max(steps.values()), plateau=plateau,
        zero_shot={t: r.manifest.metrics.get("zero_shot_val_acc") for t, r in runs.items()},
        eval_precision=sorted({str(r.manifest.metrics.get("eval_precision", "fp32")) for r in runs.values()}),
        train_precision=sorted({str(r.manifest.train_precision) for r in runs.values()}),
        method=req.method, model=req.model, suite=req.suite, runs={t: r.id for t, r in runs.items()})
    lines = [f"{task}: val acc " + " ".join(f"{p}:{fmt(v)}" for p, v in pts) + f" | plateau at {plateau[task]}"
             for task, pts in curves.items()]
    lines.append(f"budget {budget} steps (tolerance {s.tolerance:g}): {RULE}")
    return EvalOutcome("learning_curve", table, [("learning_curve", name)], lines)


__all__ = ["RULE", "DEFAULT_EVAL_EVERY", "LearningCurveSettings", "choose_budget", "curve_overrides", "curve_run",
           "curve_runs", "has_curve", "learning_curve"]
