"""The evaluation work of a suite's steps, counted before they run: how many examples each step pushes through the
model, by kind of pass (:mod:`talos_core.inference.tally`: ``forward`` of an edited model, ``base`` and ``jvp`` of
the linearized model at θ0, ``grad`` of a Fisher calibration round).

``talos suite --plan`` prices these counts with measured seconds per example (:func:`talos_core.suites.costs.
eval_cell`), beside the training iterations. The counts follow the protocols' own loops (:mod:`talos_core.
evaluation`): an α curve evaluates every grid point but α = 0 on its items, a ξ grid every pair of its α values on
its points, a run's fine-tuning its validation split every ``eval_every`` steps and its val and test splits once
trained, and so on. The suite record's ``step_work`` holds what a run actually counted, and
``tests/test_workload.py`` checks, step by step, that the two agree on a whole suite.

Not counted: the passes of θ0 itself (``forward0``): zero-shot accuracies are memoized per process, so how many a
step runs depends on which steps ran before it in the same worker; they are at most one pass over each task's val
and test splits per worker process, priced once by :func:`theta0_work`. Where a count depends on a result not in
the store yet it is a bound or an estimate: a run that stops early (``early_stopping``) evaluates at most its
maximum; a step evaluating per-task choices of a selection that has not run is counted with one α grid for all its
tasks (choices of different sparsities widen task addition's grid to the union of theirs), and its runs' evaluation
modes are their method's; an α search that extends its grid (``alpha_extend``) is counted on the grid it starts
from. Counting a finished run (``plan_views(..., stored=True)``) reads those from the store instead: each run's
recorded validation curve, each search's grid as searched (:func:`stored_grids`), and the one-rate rows a suite
did not need.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

COUNTED = ("forward", "base", "jvp", "grad")
"""The kinds a step's estimate covers (``forward0``, θ0's memoized passes, is :func:`theta0_work`'s)."""


@dataclass(frozen=True)
class Sizes:
    """Examples per task in the evaluation splits a suite uses (its scale's ``max_val`` / ``max_test`` applied)."""

    val: Mapping[str, int]
    test: Mapping[str, int]


def load_sizes(tasks: Sequence[str], max_val: int | None, max_test: int | None) -> tuple[Sizes | None, str | None]:
    """``(sizes, None)`` of ``tasks`` when all of them are on this machine (offline or local files), else
    ``(None, why)``: nothing is downloaded for a plan."""
    from talos_core.errors import TalosError
    from talos_core.tasks import get_task, load_task

    val, test = {}, {}
    for t in dict.fromkeys(tasks):
        spec = get_task(t)
        if spec.source not in ("offline", "synthetic", "file"):
            return None, f"task {t!r} is downloaded when a run needs it (its sizes are not known before)"
        try:
            data = load_task(t, max_val=max_val, max_test=max_test)
        except TalosError as exc:
            return None, f"task {t!r} could not be read here ({exc})"
        val[t], test[t] = len(data.val), len(data.test)
    return Sizes(val, test), None


def _edit(mode: str, n: int) -> Counter:
    """One evaluation of an edited model on ``n`` examples through the context (``predict_logits_many``)."""
    return Counter({"forward": n}) if mode != "linearized" else Counter({"base": n, "jvp": n})


def _zero(mode: str, n: int) -> Counter:
    """θ0 on ``n`` examples through the context with no vector (α = 0): a plain pass, or the linearized base."""
    return Counter({"forward0": n}) if mode != "linearized" else Counter({"base": n})


def finetune_work(run, sizes: Sizes) -> Counter:
    """The passes :func:`talos_core.pipeline.run_finetune` makes for ``run`` (a
    :class:`~talos_core.suites.plan.PlannedRun`) besides its training iterations: calibration gradients (TaLoS),
    validation every ``eval_every`` steps (a bound with early stopping), and the fine-tuned val and test accuracy."""
    nv, nt = sizes.val[run.task], sizes.test[run.task]
    linear = run.eval_mode == "linearized"
    out = Counter()
    steps = run.steps if run.steps is not None else run.max_steps
    if run.eval_every and steps:
        evals = steps // run.eval_every + (1 if steps % run.eval_every else 0)
        if getattr(run, "evals", None) is not None:  # a stored run: the evaluations its curve recorded
            evals = run.evals
        out["jvp" if linear else "forward"] += evals * nv
    out["jvp" if linear else "forward"] += nv + nt
    if run.calib_rounds and run.method != "lota":
        out["grad"] += run.calib_rounds * min(run.calib_samples or 0, nv)
    return out


def lota_calibration_iterations(run, sizes: Sizes) -> int:
    """LoTA's dense calibration fine-tune of ``run``: its option, else ``rounds × ⌈n_calib / batch⌉``
    (:func:`talos_core.runners.baselines.lota_calibration_steps`)."""
    if run.method != "lota" or not run.calib_rounds:
        return 0
    if run.lota_steps:
        return run.lota_steps
    n = min(run.calib_samples or 0, sizes.val[run.task])
    return run.calib_rounds * math.ceil(n / max(run.calib_batch, 1))


def theta0_work(tasks: Sequence[str], sizes: Sizes, workers: int) -> Counter:
    """The memoized θ0 passes: at most one over each task's val and test split per worker process."""
    return Counter({"forward0": workers * sum(sizes.val[t] + sizes.test[t] for t in dict.fromkeys(tasks))})


@dataclass(frozen=True)
class StepView:
    """What :func:`step_work` reads of one step: its protocol, tasks and resolved settings, its runs (one per task,
    :class:`~talos_core.suites.plan.PlannedRun`, or ``None`` when they are a selection's choices not known yet), the
    runs it trains, the method's evaluation mode and sparsity default, and the control task."""

    protocol: str
    method: str
    tasks: tuple[str, ...]
    settings: object
    runs: tuple | None
    trains: tuple
    mode: str
    control: str | None
    reused: frozenset = frozenset()  # sparsity-ablation sparsities whose results a row of the suite already has
    grids: Mapping | None = None  # the α grids its searches searched, read from its stored results (stored_grids)
    skipped: bool = False  # a one-rate row the suite did not need (it wrote nothing)


def _grid(step: float, sparsity: float | None = None, rule: str = "paper") -> list[float]:
    from talos_core.evaluation.runs import _rule_grid

    return _rule_grid(sparsity, step, rule)


def _rule(s) -> str:
    return getattr(s, "alpha_rule", "paper")


def _addition_grid(runs: Sequence | None, step: float, rule: str = "paper") -> list[float]:
    """Task addition's α grid for these runs (:func:`talos_core.evaluation.runs.run_alpha_grid`: the union of the
    tasks' grids when their sparsities differ); one grid when the runs are not known yet."""
    ks = {r.sparsity for r in runs} if runs else {None}
    return sorted({a for k in ks for a in _grid(step, sparsity=k, rule=rule)})


def stored_grids(store, name: str, protocol: str) -> dict | None:
    """The α grids the step of ``protocol`` that wrote result ``name`` searched (an extended search's added points
    included), from its stored results: ``{"addition": grid, "negation": {target: grid}}`` (addition, negation,
    post-hoc, examples), ``{"selection": {task: {value: grid}}}``, ``{"ablation": {sparsity: {...}}}``; ``None``
    where the store has none."""
    def read(kind: str) -> dict:
        return store.read_result(kind, name) if name in store.results(kind) else {}

    def negation(neg: Mapping) -> dict | None:
        if not neg.get("alpha_grid"):
            return None
        return {str(t): list(g) for t, g in (neg.get("alpha_grids") or {
            t: neg["alpha_grid"] for t in (neg.get("selected") or {})}).items()}

    out: dict = {}
    if protocol in ("addition", "posthoc") and read("addition").get("alpha_grid"):
        out["addition"] = list(read("addition")["alpha_grid"])
    if protocol in ("negation", "posthoc") and negation(read("negation")):
        out["negation"] = negation(read("negation"))
    if protocol == "selection" and read("selection").get("alpha_grids"):
        out["selection"] = read("selection")["alpha_grids"]
    if protocol == "examples" and read("examples").get("addition_alphas"):
        ex = read("examples")
        out.update(addition=list(ex["addition_alphas"]), negation=dict(ex.get("negation_alphas") or {}))
    if protocol == "sparsity-ablation" and read("sparsity_ablation").get("alpha_grids"):
        out["ablation"] = read("sparsity_ablation")["alpha_grids"]
    return out or None


def _mode(v: StepView) -> str:
    modes = {r.eval_mode for r in v.runs} if v.runs else {v.mode}
    return modes.pop() if len(modes) == 1 else v.mode


def _addition(v: StepView, sz: Sizes, alphas: Sequence[float], mode: str, splits=("val", "test")) -> Counter:
    n = sum(getattr(sz, s)[t] for t in v.tasks for s in splits)
    out = _edit(mode, n)  # the fine-tuned accuracies that normalize it
    if mode == "linearized":
        return out + _edit(mode, n)  # one base and one JVP per item, then every α is algebra
    return out + Counter({"forward": n * sum(1 for a in alphas if a != 0.0)})


def _negation(v: StepView, sz: Sizes, grids: Mapping[str, Sequence[float]], mode: str) -> Counter:
    out = Counter()
    c = v.control
    for t in v.tasks:
        n = sz.val[t] + sz.test[t] + sz.val[c] + sz.test[c]
        out += _edit(mode, n) if mode == "linearized" else Counter(
            {"forward": n * sum(1 for a in grids[t] if a != 0.0)})
    return out


def _task_grids(v: StepView, step: float, rule: str = "paper") -> dict[str, list[float]]:
    if v.grids and v.grids.get("negation"):
        return dict(v.grids["negation"])
    if v.runs:
        return {r.task: _grid(step, sparsity=r.sparsity, rule=rule) for r in v.runs}
    return {t: _grid(step, rule=rule) for t in v.tasks}


def _searched(v: StepView, key: str, grid: list[float]) -> list[float]:
    """The stored grid ``key`` of a finished step (:func:`stored_grids`), else ``grid``."""
    return list(v.grids[key]) if v.grids and v.grids.get(key) else grid


def step_work(v: StepView, sz: Sizes) -> Counter:
    """The passes step ``v`` makes (``forward``, ``base``, ``jvp``, ``grad``, and ``forward0`` where it is not
    memoized), its runs' fine-tuning included."""
    out = Counter()
    if v.skipped:
        return out
    for run in v.trains:
        out += finetune_work(run, sz)
    s, p, mode, tasks = v.settings, v.protocol, _mode(v), v.tasks
    modes = {r.task: r.eval_mode for r in v.runs} if v.runs else dict.fromkeys(tasks, v.mode)
    if p == "single":
        for t in tasks:
            out += _edit(modes[t], sz.val[t] + sz.test[t])
    elif p == "addition":
        out += _addition(v, sz, _searched(v, "addition", _addition_grid(v.runs, s.alpha_step, _rule(s))), mode)
    elif p == "negation":
        out += _negation(v, sz, _task_grids(v, s.alpha_step, _rule(s)), mode)
    elif p == "localization":
        for t in tasks:
            out += _edit(modes[t], sum(sz.test[c] for c in tasks))
    elif p == "linearization":
        for t in tasks:
            out += _edit(modes[t], sz.test[t])
            if modes[t] != "linearized":
                out += _edit("linearized", sz.test[t])
    elif p == "preview":
        for e in tasks:
            n = min(s.points, sz.test[e])
            out += Counter({"base": n, "jvp": n * len(tasks)})
    elif p == "examples":
        out += _examples(v, sz, s, mode, modes)
    elif p == "disentanglement":
        out += _disentanglement(v, sz, s, mode)
    elif p == "sharing":
        out["grad"] += sum(min(s.samples, sz.val[t]) for t in tasks)
        out["forward"] += len(tasks) * sum(sz.test[t] for t in tasks)
    elif p == "posthoc":
        out += _posthoc(v, sz, s)
    elif p == "sparsity-ablation":
        searched = (v.grids or {}).get("ablation") or {}
        for k in s.sparsities:
            if k in v.reused:
                continue
            grid = _grid(s.alpha_step, sparsity=k, rule=_rule(s))
            done = searched.get(f"{k:g}") or {}
            out += _addition(v, sz, done.get("addition") or grid, "nonlinear")
            out += _negation(v, sz, done.get("negation") or dict.fromkeys(tasks, grid), "nonlinear")
    elif p == "selection":
        c = v.control
        searched = (v.grids or {}).get("selection") or {}
        for i, run in enumerate(v.runs or ()):
            t = run.task
            n = sz.val[t] + sz.val[c]
            value = s.values[i // len(tasks)]  # the runs come candidate by candidate, each over the tasks
            grid = searched.get(t, {}).get(str(value)) or _grid(s.alpha_step, sparsity=run.sparsity, rule=_rule(s))
            out += _edit(run.eval_mode, n) if run.eval_mode == "linearized" else Counter(
                {"forward": n * sum(1 for a in grid if a != 0.0)})
            out += _edit(run.eval_mode, sz.val[t])
    # learning-curve, lr-check (validation accuracies come from the runs' manifests), efficiency, masks, comparison:
    # no evaluation of their own beyond the runs they fine-tune
    return out


def _examples(v: StepView, sz: Sizes, s, mode: str, modes: Mapping[str, str]) -> Counter:
    tasks, c = list(v.tasks), v.control
    evals = tasks + ([c] if c and c not in tasks else [])
    q = {e: min(s.points, sz.test[e]) for e in evals}
    out = Counter({"forward0": sum(q.values())})
    for t in tasks:
        out += _edit(modes[t], sum(q[e] for e in tasks))
    from talos_core.evaluation.examples import teaching_alphas

    for a in teaching_alphas(_searched(v, "addition", _addition_grid(v.runs, s.alpha_step, _rule(s))),
                             s.teaching_max):
        n = sum(q[t] for t in tasks)
        out += _edit(mode, n) if a != 0.0 else _zero(mode, n)
    for t, grid in _task_grids(v, s.alpha_step, _rule(s)).items():
        n = q[t] + (q[c] if c else 0)
        for a in teaching_alphas(grid, s.teaching_max):
            out += _edit(mode, n) if a != 0.0 else _zero(mode, n)
    for e in evals:
        out += Counter({"base": q[e], "jvp": q[e] * len(tasks)})
    return out


def _disentanglement(v: StepView, sz: Sizes, s, mode: str) -> Counter:
    from talos_core.evaluation.disentanglement import disentanglement_alphas

    t1, t2 = v.tasks
    d1, d2 = min(s.points, sz.test[t1]), min(s.points, sz.test[t2])
    if mode == "linearized":
        return Counter({"base": d1 + d2, "jvp": 2 * (d1 + d2)})
    alphas = disentanglement_alphas(s.grid, s.alpha_range)
    out = Counter()
    for a in dict.fromkeys(alphas):
        out["forward" if a != 0.0 else "forward0"] += d1 + d2
    for a1 in alphas:
        for a2 in alphas:
            out["forward" if (a1, a2) != (0.0, 0.0) else "forward0"] += d1 + d2
    return out


def _posthoc(v: StepView, sz: Sizes, s) -> Counter:
    from talos_core.evaluation.posthoc import posthoc_alphas, posthoc_points

    grid = posthoc_points(v.method, len(v.tasks), s)
    alphas, neg_alphas = posthoc_alphas(v.method, s.alpha_step)
    added = _searched(v, "addition", alphas)  # a finished step: the chosen point's grid as searched
    out = Counter()
    for _ in grid:  # the search: validation only (each point's own extension is not stored: the chosen one's)
        out += _addition(v, sz, added, "nonlinear", splits=("val",))
    out += _addition(v, sz, added, "nonlinear")
    out += _negation(v, sz, (v.grids or {}).get("negation") or dict.fromkeys(v.tasks, neg_alphas), "nonlinear")
    return out


__all__ = ["COUNTED", "Sizes", "StepView", "finetune_work", "load_sizes", "lota_calibration_iterations",
           "step_work", "stored_grids", "theta0_work"]


def plan_views(plan, steps: Sequence, control: str | None, *, stored: bool = False, store=None) -> list[StepView]:
    """One :class:`StepView` per step of ``plan`` (a :class:`~talos_core.suites.plan.Plan` of the step table
    ``steps``, :func:`~talos_core.suites.steps.suite_steps`), in order. A step trains the runs it is the first to
    need that are not in the store (``stored=True``: those too, to recount a finished run's work; with the ``store``
    the run was made in, each step's searched α grids and whether a one-rate row was needed come from it)."""
    from talos_core.runners import get_method
    from talos_core.schema import result_name, variant_id
    from talos_core.suites.steps import _resolved

    by_rows: dict[str, set[frozenset]] = {}  # result id -> run-key sets its addition steps evaluate
    for ps, st in zip(plan.steps, steps):
        if ps.protocol == "addition" and ps.runs:
            by_rows.setdefault(st.row_key, set()).add(frozenset(ps.runs))
    out = []
    for ps, st in zip(plan.steps, steps):
        settings = None if callable(st.settings) else st.settings
        runs = tuple(plan.runs[k] for k in ps.runs) if ps.runs else None
        reused = frozenset()
        if ps.protocol == "sparsity-ablation" and runs:
            n = len(ps.tasks)
            ids = (st.row_key,)
            reused = frozenset(k for i, k in enumerate(settings.sparsities)
                               if any(frozenset(ps.runs[i * n:(i + 1) * n]) in by_rows.get(rid, ())
                                      for rid in dict.fromkeys((*ids, variant_id(st.method, sparsity=k)))))
        trains = tuple(plan.runs[k] for k in ps.trains if stored or not plan.runs[k].in_store)
        info = get_method(st.method) if ps.protocol not in ("comparison", "posthoc") else None
        grids, skipped = None, False
        if stored and store is not None and ps.protocol != "comparison":
            rid = _resolved(st.result_method, store)
            skipped = callable(st.result_method) and rid is None
            if not skipped:
                grids = stored_grids(store, result_name(plan.suite, plan.model, rid or st.method), ps.protocol)
        out.append(StepView(ps.protocol, st.method, tuple(ps.tasks), settings, runs, trains,
                            info.eval_mode if info is not None else "nonlinear", control, reused, grids, skipped))
    return out
