"""The learning rate re-checked at the step budget: a learning rate per method chosen on validation at one budget
may not be the best at another, so it is kept and checked again at the budget the runs train for.

The shipped suites' learning rate per method (``Scale.lr_by_method``) was chosen on the validation split at
short fixed budgets. Under the paper's protocol the runs train for the budget a learning-curve step chose, so
the ``lr-check`` protocol fine-tunes (or finds) one run per task and candidate learning rate — with exactly the
request's other overrides — and compares their validation accuracy (``metrics.finetuned_val_acc`` of each
run's manifest, the accuracy of ``θ0 + τ`` on the validation split; evaluated again only where a manifest
lacks it):

    best = argmax over lr of  mean over the check's tasks of  val_acc(task, lr)     (ties: the method's own lr)

(:func:`compare_lrs`, pure). The method's own learning rate — the request's ``lr``, else the model's default —
must be among the candidates; its runs are the request's own runs (same run ids: nothing new is trained for
it). The check reports: whatever comes out, the suite keeps its learning rate.

With ``choose=True`` (the ``full`` scales: one lr rule, the same tuning effort for every method) the check CHOOSES
the method's learning rate instead: the candidate with the highest mean (ties: the first listed), and every later
step of the suite trains the method at it (``talos_core.suites.steps.checked_lr`` reads it back). The result then
records ``chooses: true`` and ``suite_lr = best_lr`` (it agrees by construction). Either way it writes
``results/lr_check/<suite>__<model>__<method>.json`` (SCHEMA.md): a table ``task, lr, val_acc, run_id,
steps`` and ``suite_lr``, ``best_lr``, ``agrees``, ``means`` (per lr), the rule's text and the ``budget``.

>>> compare_lrs({1e-3: {"a": 0.7, "b": 0.72}, 1e-4: {"a": 0.6, "b": 0.7}}, suite_lr=1e-3).agrees
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from talos_core.errors import TalosError, check_int, check_number, is_number, is_strict_instance
from talos_core.evaluation.request import EvalOutcome, EvalRequest, fmt

RULE = ("per learning rate, the mean over the check's tasks of the validation accuracy of theta0 + tau, each run "
        "trained at the step budget with the method's other settings; best = the highest mean (ties: the method's "
        "own lr); the suite keeps its lr either way (the check reports)")

CHOOSE_RULE = ("per learning rate, the mean over the check's tasks of the validation accuracy of theta0 + tau, each "
               "run trained with the method's other settings (up to the maximum step count with early stopping, the "
               "best evaluation's weights kept); the method's learning rate = the highest mean (ties: the first "
               "candidate listed), used by every later step of the suite")

TABLE_COLUMNS = ["task", "lr", "val_acc", "run_id", "steps"]

DEFAULT_VALUES = (1e-4, 1e-3)
"""The learning rates compared when none are given: those of the shipped suites' original choice (mini budgets,
validation split; ``talos_core.suites.specs._SUITE_LR``)."""


# --------------------------------------------------------------------------------------------
# the pure rule
# --------------------------------------------------------------------------------------------
def check_lr_values(values: Any) -> tuple[float, ...]:
    """The candidate learning rates as floats: at least one, each a finite number in (0, 1], none twice."""
    if is_strict_instance(values, (int, float)):  # one number (even nan: refused below)
        values = (values,)
    try:
        vals = tuple(values if values is not None else ())
    except TypeError:
        raise TalosError(f"learning rates to check must be a list of numbers such as 1e-4,1e-3, got {values!r}") \
            from None
    if not vals:
        raise TalosError("the lr check needs learning rates to compare; pass at least one, e.g. --values 1e-4,1e-3")
    out: list[float] = []
    for v in vals:
        if not (is_number(v) and 0 < v <= 1):
            raise TalosError(f"learning rate {v!r} to check is not allowed; each must be a number in (0, 1], "
                             f"e.g. 1e-4")
        if any(same_lr(v, o) for o in out):
            raise TalosError(f"learning rate {v:g} is listed twice in the lr check; give each once")
        out.append(float(v))
    return tuple(out)


def same_lr(a: float, b: float) -> bool:
    """Whether two learning rates are the same value (up to float round-off)."""
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)


def lr_text(lr: float) -> str:
    """A learning rate as people write it: ``1e-3``, ``5e-4``, ``2.5e-5``.

    >>> lr_text(0.001), lr_text(5e-4), lr_text(2.5e-05), lr_text(0.1)
    ('1e-3', '5e-4', '2.5e-5', '1e-1')
    """
    mantissa, exp = f"{float(lr):.6e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exp)}"


@dataclass(frozen=True)
class LrCheckResult:
    """The outcome of :func:`compare_lrs`: the mean validation accuracy per learning rate (in the candidates'
    order), the best one, the method's own and whether they agree."""

    means: dict[float, float]
    best_lr: float
    suite_lr: float

    @property
    def agrees(self) -> bool:
        return same_lr(self.best_lr, self.suite_lr)


def compare_lrs(val_acc: Mapping[float, Mapping[str, float]], suite_lr: float | None) -> LrCheckResult:
    """The rule of the module docstring on ``{lr: {task: validation accuracy}}``.

    Every learning rate must cover the same tasks (a mean over different tasks compares nothing), every
    accuracy must be a finite number in [0, 1], and ``suite_lr`` must be one of the candidates. Ties go to
    ``suite_lr``, then to the first candidate listed. ``suite_lr=None`` chooses: the best candidate (ties: the
    first listed) becomes the result's ``suite_lr``, so it agrees.

    >>> r = compare_lrs({1e-4: {"a": 0.8, "b": 0.6}, 1e-3: {"a": 0.6, "b": 0.7}}, suite_lr=1e-3)
    >>> r.best_lr, r.agrees, round(r.means[1e-3], 3)
    (0.0001, False, 0.65)
    >>> compare_lrs({1e-4: {"a": 0.5}, 1e-3: {"a": 0.5}}, suite_lr=1e-3).best_lr  # a tie: the suite's
    0.001
    >>> r = compare_lrs({1e-4: {"a": 0.5}, 1e-3: {"a": 0.7}}, suite_lr=None)  # the check chooses
    >>> r.best_lr, r.suite_lr, r.agrees
    (0.001, 0.001, True)
    """
    if not val_acc:
        raise TalosError("the lr check needs learning rates to compare; pass at least one, e.g. --values 1e-4,1e-3")
    lrs = check_lr_values(list(val_acc))
    own = [v for v in lrs if suite_lr is not None and same_lr(v, suite_lr)]
    if suite_lr is not None and not own:
        raise TalosError(f"the lr check compares {', '.join(lr_text(v) for v in lrs)} but not the method's own "
                         f"learning rate {lr_text(suite_lr)}; add it to the values")
    per_lr = {lr: val_acc[key] for lr, key in zip(lrs, val_acc)}
    tasks = None
    means: dict[float, float] = {}
    for lr, accs in per_lr.items():
        if not isinstance(accs, Mapping) or not accs:
            raise TalosError(f"learning rate {lr_text(lr)} has no validation accuracies to compare")
        if tasks is None:
            tasks = set(accs)
        elif set(accs) != tasks:
            raise TalosError(f"learning rate {lr_text(lr)} covers tasks {', '.join(sorted(map(str, accs)))}, not "
                             f"{', '.join(sorted(map(str, tasks)))}; every lr must be checked on the same tasks")
        for task, acc in accs.items():
            check_number(f"validation accuracy of task {task!r} at lr {lr_text(lr)}", acc, low=0, high=1)
        means[lr] = float(sum(float(a) for a in accs.values()) / len(accs))
    top = max(means.values())
    tied = [lr for lr, m in means.items() if m >= top - 1e-12]
    if suite_lr is None:
        return LrCheckResult(means, tied[0], tied[0])
    best = own[0] if own[0] in tied else tied[0]
    return LrCheckResult(means, best, own[0])


def summary_line(payload: Mapping[str, Any]) -> str:
    """One line of a stored ``lr_check`` result: ``lr check at 300 steps (tweets, wordnet-verbs): 1e-3 (suite)
    0.710 vs 1e-4 0.650 mean val acc → agrees``.

    >>> summary_line({"suite_lr": 1e-3, "best_lr": 1e-3, "agrees": True, "budget": 300, "tasks": ["a", "b"],
    ...               "means": [{"lr": 1e-3, "val_acc": 0.71}, {"lr": 1e-4, "val_acc": 0.65}]})
    'lr check at 300 steps (a, b): 1e-3 (suite) 0.710 vs 1e-4 0.650 mean val acc → agrees'
    >>> summary_line({"suite_lr": 1e-3, "best_lr": 1e-3, "agrees": True, "budget": 2000, "chooses": True,
    ...               "means": [{"lr": 1e-4, "val_acc": 0.65}, {"lr": 1e-3, "val_acc": 0.71}]})
    'lr check up to 2000 steps: 1e-3 0.710 vs 1e-4 0.650 mean val acc → chooses 1e-3'
    """
    suite_lr = float(payload["suite_lr"])
    means = [(float(r["lr"]), r.get("val_acc")) for r in payload.get("means") or []]
    own = [(lr, m) for lr, m in means if same_lr(lr, suite_lr)]
    others = [(lr, m) for lr, m in means if not same_lr(lr, suite_lr)]
    acc = lambda m: "?" if m is None else f"{float(m):.3f}"  # noqa: E731
    chooses = bool(payload.get("chooses"))  # the check chose the rate the method trained with
    parts = [f"{lr_text(lr)}{'' if chooses else ' (suite)'} {acc(m)}" for lr, m in own]
    text = " vs ".join(parts + [f"{lr_text(lr)} {acc(m)}" for lr, m in others])
    budget = payload.get("budget")
    tasks = payload.get("tasks") or []
    if chooses:
        where = f"up to {budget} steps" if budget is not None else "at the maximum step count"
        return (f"lr check {where}" + (f" ({', '.join(map(str, tasks))})" if tasks else "") + f": {text} mean val "
                f"acc → chooses {lr_text(suite_lr)}")
    where = f"at {budget} steps" if budget is not None else "at the budget"
    verdict = "agrees" if payload.get("agrees") else f"disagrees: {lr_text(float(payload['best_lr']))} is higher"
    return (f"lr check {where}" + (f" ({', '.join(map(str, tasks))})" if tasks else "") + f": {text} mean val acc "
            f"→ {verdict}")


def report_lines(store, suite: str, model: str) -> list[str]:
    """``<method>: <summary_line>`` of every stored ``lr_check`` result of ``suite`` and ``model`` (none: ``[]``)."""
    from talos_core.schema import parse_result_name

    out = []
    for name in store.results("lr_check"):
        fields = parse_result_name("lr_check", name) or {}
        if fields.get("suite") != suite or fields.get("model") != model:
            continue
        payload = store.read_result("lr_check", name)
        try:
            line = summary_line(payload)
        except (KeyError, TypeError, ValueError):
            raise TalosError(f"the lr_check result {name!r} in {store.root} is malformed; recompute it") from None
        out.append(f"{payload.get('row') or fields['method']}: {line}")
    return out


# --------------------------------------------------------------------------------------------
# the protocol
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LrCheckSettings:
    """``values``: the learning rates compared (the method's own must be among them unless ``choose``; default: the
    two the shipped suites' choice compared, :data:`DEFAULT_VALUES`); ``choose``: the check chooses the method's
    learning rate (the module docstring) instead of reporting on its own; ``row``: the result id of
    the row whose runs the method's own lr is (a variant id such as ``talos-k0.9`` when the check uses that
    row's fixed hyperparameter; default: the method), recorded for the report; ``batch_size``: of the validation
    evaluation of a run whose manifest lacks its validation accuracy."""

    values: tuple = DEFAULT_VALUES
    row: str | None = None
    batch_size: int | None = None  # None: the device's default
    choose: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", check_lr_values(self.values))
        if not isinstance(self.choose, bool):
            raise TalosError(f"the lr check's choose must be true or false, got {self.choose!r}")
        if self.row is not None and not isinstance(self.row, str):
            raise TalosError(f"the lr check's row must be a result id such as 'talos-k0.9', got {self.row!r}")
        check_int("batch_size", self.batch_size, low=1, optional=True)


def own_lr(model: str, task: str, method: str, overrides: Mapping[str, Any]) -> float:
    """The learning rate the request trains with: its ``lr``, else the model's default (as the run resolves it)."""
    from talos_core.evaluation.runs import build_request

    return float(build_request(model, task, method, overrides).train_config().lr)


def lr_overrides(base: Mapping[str, Any], lr: float, suite_lr: float | None) -> dict:
    """The fine-tuning overrides of the candidate ``lr``: ``base`` with ``lr`` set, always. For the method's own
    learning rate that is the very request of the suite's rows (run ids come from the resolved settings: same
    run id, nothing new). It is set even where ``base`` leaves the lr to the model's default, because a run is
    found by the settings its request names (``evaluation.runs.find_run``'s compatible match): without it, the
    other candidate's run (same settings but the lr) would be taken for the own-lr one. ``suite_lr=None`` (a
    check that chooses): the candidate itself, which the later steps' request names once chosen."""
    own = suite_lr is not None and same_lr(lr, suite_lr)
    return {**base, "lr": float(suite_lr if own else lr)}


def run_lr_check(req: EvalRequest, s: LrCheckSettings) -> EvalOutcome:
    """The ``lr-check`` protocol (see the module docstring)."""
    from talos_core.atomic import json_ready
    from talos_core.evaluation.runs import build_request, merge_overrides, resolve_runs, run_eval_mode
    from talos_core.schema import KINDS

    tasks = list(req.tasks)
    base = {t: merge_overrides(req.overrides, req.task_overrides.get(t)) for t in tasks}
    suite_lr = None  # a check that chooses has no own rate to compare with
    if not s.choose:
        owns = {t: own_lr(req.model, t, req.method, base[t]) for t in tasks}
        suite_lr = owns[tasks[0]]
        if any(not same_lr(v, suite_lr) for v in owns.values()):
            raise TalosError("the lr check needs one learning rate for the method on every task; its per-task "
                             "overrides give " + ", ".join(f"{t}: {lr_text(v)}" for t, v in owns.items()))
        if not any(same_lr(v, suite_lr) for v in s.values):
            raise TalosError(f"the lr check compares {', '.join(lr_text(v) for v in s.values)} but not the method's "
                             f"own learning rate {lr_text(suite_lr)}; add it to the values")
    for t in tasks:  # every request is valid before anything trains (one sentence, nothing written)
        for v in s.values:
            build_request(req.model, t, req.method, lr_overrides(base[t], v, suite_lr))
    runs = {}
    for v in s.values:  # the method's own lr first when listed first: its runs are the suite's rows' runs
        for t in tasks:
            runs[(t, v)] = resolve_runs(req.store, req.model, [t], req.method,
                                        overrides=lr_overrides(base[t], v, suite_lr), train=req.train,
                                        progress=req.progress, force=req.force)[t]
    val = {k: r.manifest.metrics.get("finetuned_val_acc") for k, r in runs.items()}
    missing = [k for k, a in val.items() if a is None]
    if missing:  # runs written without it: evaluate θ0 + τ on the validation split now
        from talos_core.evaluation.arithmetic import finetuned_accuracies

        ctx = req.context({f"{t}|{v:g}": runs[(t, v)] for t, v in missing}, s.batch_size)
        for t, v in missing:
            run = runs[(t, v)]
            val[(t, v)] = finetuned_accuracies(ctx, {t: run.task_vector()}, run_eval_mode(run),
                                               splits=("val",))[(t, "val")]
    steps = {k: (r.manifest.config.get("train") or {}).get("steps") for k, r in runs.items()}
    res = compare_lrs({v: {t: float(val[(t, v)]) for t in tasks} for v in s.values}, suite_lr)
    rows = [{"task": t, "lr": v, "val_acc": float(val[(t, v)]), "run_id": runs[(t, v)].id, "steps": steps[(t, v)]}
            for v in s.values for t in tasks]
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS)[list(KINDS["lr_check"].columns)]
    budgets = sorted({int(b) for b in steps.values() if b is not None})
    first = runs[(tasks[0], next(v for v in s.values if same_lr(v, res.suite_lr)))]
    fixed = {}
    if first.manifest.sparse_method:
        fixed["sparsity"] = first.manifest.sparsity
    if first.manifest.config.get("options"):
        fixed["options"] = dict(first.manifest.config["options"])
    name = req.name(req.method)
    req.store.write_table(
        "lr_check", name, table, suite_lr=res.suite_lr, best_lr=res.best_lr, agrees=res.agrees,
        means=[{"lr": lr, "val_acc": m} for lr, m in res.means.items()], rule=CHOOSE_RULE if s.choose else RULE,
        **({"chooses": True} if s.choose else {}),
        budget=budgets[0] if len(budgets) == 1 else budgets, values=list(s.values), tasks=tasks,
        fixed=json_ready(fixed), row=s.row or req.method,
        runs={t: {lr_text(v): runs[(t, v)].id for v in s.values} for t in tasks},
        eval_precision=sorted({str(r.manifest.metrics.get("eval_precision", "fp32")) for r in runs.values()}),
        method=req.method, model=req.model, suite=req.suite, **req.result_meta())
    lines = [f"{t}: " + ", ".join(f"lr {lr_text(v)} -> val acc {fmt(val[(t, v)])}" for v in s.values)
             for t in tasks]
    lines.append(summary_line(req.store.read_result("lr_check", name)))
    return EvalOutcome("lr_check", table, [("lr_check", name)], lines)


__all__ = ["CHOOSE_RULE", "DEFAULT_VALUES", "RULE", "LrCheckResult", "LrCheckSettings", "check_lr_values",
           "compare_lrs", "lr_overrides", "lr_text", "own_lr", "report_lines", "run_lr_check", "same_lr",
           "summary_line"]
