"""Hyperparameter selection as the paper: per task, by task negation on the validation split.

Paper App. "Hyperparameter selection": "for each method, we cross-validate its hyperparameters on each
individual task by leveraging Task Negation performance on a small held-out portion of the training set
[...] hyperparameter selection shall not be performed separately for addition and negation, as each
choice of hyperparameters yields a unique task vector"; App. "Tuning of α": negation keeps "at least 95%
of the original accuracy of the pre-trained model on the control task" and minimizes the target accuracy,
on the α grid ``{0, 0.05, …, 1} × 1/(1 − k)`` for sparse methods.

So, for ONE task and each candidate value (a sparsity ``k``, an L-LoRA rank, a learning rate) with its
own run ``τ``, the candidate's validation negation curve ``θ0 − α τ`` over its α grid gives its

    score = min { target_val_acc(α) : control_val_acc(α) ≥ keep × control_zero_shot_val }   (α = 0 always counts)

and the candidate with the lowest score is chosen (:func:`select_by_negation`, pure). Ties go to the
higher single-task validation accuracy ``Acc[f(D_t^val, θ0 + τ)]``, then to the first candidate of the
grid.

The ``selection`` protocol (:func:`run_selection`, registered in :mod:`talos_core.evaluation.protocols`)
fine-tunes (or finds) one run per value for each task, computes these curves and writes
``results/selection/<suite>__<model>__<method>.json`` (SCHEMA.md): every candidate of every task, the
choices, and per task the fine-tuning ``overrides`` that reproduce the chosen run.
:func:`selected_overrides` reads them back, so every other protocol can evaluate the method with the
chosen run per task (``evaluate(..., task_overrides=...)``, ``talos evaluate --use-selection``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from talos_core.errors import TalosError, check_int, check_number, check_range
from talos_core.evaluation.request import (
    EvalOutcome,
    EvalRequest,
    check_alpha_step,
    check_control_task,
    fmt,
)
from talos_core.methods.declaration import ALPHA_STEP
from talos_core.methods.finetuning import RANK, SPARSITY
from talos_core.schema import result_name

KEEP = 0.95
"""Fraction of the control task's zero-shot validation accuracy a candidate's α must keep (paper: 95%)."""

PARAMS = ("sparsity", "rank", "lr")
"""Hyperparameters the ``selection`` protocol can choose."""

DEFAULT_VALUES: dict[str, tuple] = {p.name: tuple(p.grid) for p in (SPARSITY, RANK)}
"""Candidate grids when none is given: the declared grids of TaLoS's sparsity and L-LoRA's rank (0.5, 0.8, 0.9,
0.95, 0.99 and 8, 16, 64; the paper searches k ∈ {0.1, …, 0.9, 0.95, 0.99}, r ∈ {8, …, 512}); learning rates have
none: give them."""

TABLE_COLUMNS = ["value", "best_alpha", "target_val_acc", "control_val_acc", "score", "single_val_acc", "chosen"]

RULE = ("per task, each candidate's validation task-negation curve theta0 - alpha * tau over its alpha grid "
        "(0, step, ..., 1, x 1/(1 - k) for sparse methods); score = the lowest target accuracy among the alphas "
        "keeping the control task's accuracy >= {keep:g} x its zero-shot accuracy (alpha = 0 always counts); "
        "the candidate with the lowest score is chosen; ties: higher single-task validation accuracy, then "
        "the first candidate of the grid")


# --------------------------------------------------------------------------------------------
# the pure rule
# --------------------------------------------------------------------------------------------
@dataclass
class SelectionResult:
    """The chosen candidate of one task and a tidy table of every candidate (:data:`TABLE_COLUMNS`)."""

    choice: Any
    table: pd.DataFrame

    @property
    def best_alpha(self) -> float:
        """The α at which the chosen candidate reached its score."""
        return float(self.table.loc[self.table["chosen"], "best_alpha"].iloc[0])


def negation_curve(curve: pd.DataFrame | Iterable[Sequence[float]]) -> pd.DataFrame:
    """A validation negation curve as a frame ``alpha, target_val_acc, control_val_acc`` (from a frame with
    these columns, or rows ``(alpha, target_val_acc, control_val_acc)``), sorted by α.

    >>> negation_curve([(0.5, 0.4, 0.7), (0.0, 0.9, 0.8)])["alpha"].tolist()
    [0.0, 0.5]
    """
    cols = ["alpha", "target_val_acc", "control_val_acc"]
    if isinstance(curve, pd.DataFrame):
        missing = [c for c in cols if c not in curve.columns]
        if missing:
            raise TalosError(f"a negation curve needs columns {', '.join(cols)}; it lacks {', '.join(missing)}")
        df = curve[cols].astype(float)
    else:
        rows = [tuple(r) for r in curve]
        if any(len(r) != 3 for r in rows):
            raise TalosError("a negation curve's rows must be (alpha, target_val_acc, control_val_acc)")
        df = pd.DataFrame(rows, columns=cols, dtype=float)
    return df.sort_values("alpha", kind="mergesort").reset_index(drop=True)


def _best_point(curve: pd.DataFrame, floor: float) -> pd.Series:
    """The curve's row with the lowest target accuracy among α = 0 and the α keeping the control ≥ ``floor``;
    ties: higher control accuracy, then smaller α (as in
    :func:`~talos_core.evaluation.arithmetic.select_negation_alpha`)."""
    ok = curve[((curve["control_val_acc"] >= floor - 1e-12) | (curve["alpha"] == 0.0))
               & curve["target_val_acc"].notna()]
    ok = ok.sort_values(["target_val_acc", "control_val_acc", "alpha"], ascending=[True, False, True],
                        kind="mergesort")
    return ok.iloc[0]


def select_by_negation(candidates: Mapping[Any, pd.DataFrame | Iterable[Sequence[float]]],
                       control_zero_shot_val: float, *, keep: float = KEEP,
                       single_val_acc: Mapping[Any, float] | None = None) -> SelectionResult:
    """Choose one task's hyperparameter value by validation task negation (paper App. "Hyperparameter
    selection", "Tuning of α").

    ``candidates`` maps each value, in grid order, to its run's validation negation curve (rows
    ``alpha, target_val_acc, control_val_acc`` over its α grid, α = 0 included). A candidate's score is
    its lowest target accuracy among α with ``control_val_acc ≥ keep × control_zero_shot_val`` (α = 0
    always qualifies); the lowest score wins; ties go to the higher ``single_val_acc`` (when given), then
    to the first candidate. Returns the choice and a table of every candidate (:data:`TABLE_COLUMNS`).

    >>> res = select_by_negation({0.5: [(0.0, 0.9, 0.80), (1.0, 0.6, 0.79)],
    ...                           0.9: [(0.0, 0.9, 0.80), (5.0, 0.3, 0.70), (10.0, 0.1, 0.5)]}, 0.80)
    >>> res.choice, res.table["score"].tolist(), res.best_alpha
    (0.5, [0.6, 0.9], 1.0)
    """
    if not candidates:
        raise TalosError("hyperparameter selection needs at least one candidate")
    check_range("keep", keep, 0.0, 1.0, high_open=False)
    check_number("the control task's zero-shot accuracy", control_zero_shot_val, what="a number")
    floor = keep * float(control_zero_shot_val)
    single = dict(single_val_acc or {})
    rows = []
    for value, raw in candidates.items():
        curve = negation_curve(raw)
        if not (curve["alpha"] == 0.0).any():
            raise TalosError(f"the negation curve of candidate {value!r} has no alpha = 0; its alpha grid must "
                             f"start at 0 (the pre-trained model)")
        best = _best_point(curve, floor)
        acc = single.get(value)
        rows.append({"value": value, "best_alpha": float(best["alpha"]),
                     "target_val_acc": float(best["target_val_acc"]),
                     "control_val_acc": float(best["control_val_acc"]), "score": float(best["target_val_acc"]),
                     "single_val_acc": float("nan") if acc is None else float(acc), "chosen": False})
    scores = np.array([r["score"] for r in rows])
    tied = [i for i, r in enumerate(rows) if r["score"] <= scores.min() + 1e-12]
    key = [(-rows[i]["single_val_acc"] if not math.isnan(rows[i]["single_val_acc"]) else math.inf, i) for i in tied]
    pick = min(key)[1]
    rows[pick]["chosen"] = True
    return SelectionResult(rows[pick]["value"], pd.DataFrame(rows, columns=TABLE_COLUMNS))


# --------------------------------------------------------------------------------------------
# the protocol
# --------------------------------------------------------------------------------------------
def _check_values(param: str, values: tuple) -> None:
    for v in values:
        if param == "rank":
            check_int("rank", v, low=1)
        elif param == "sparsity":
            check_range("sparsity", v, 0.0, 1.0)
        else:
            check_range("lr", v, 0.0, 1.0, low_open=True, high_open=False)
    dup = [v for v in values if values.count(v) > 1]
    if dup:
        raise TalosError(f"candidate value {dup[0]!r} is listed twice")


@dataclass(frozen=True)
class SelectionSettings:
    param: str = "sparsity"  # sparsity (sparse methods), rank (llora) or lr (any fine-tuning method)
    values: tuple | None = None  # candidate grid; None: DEFAULT_VALUES[param]
    control_task: str | None = None  # None: the registered control task of the tasks' modality
    alpha_step: float = ALPHA_STEP  # α grid 0, step, …, 1 (× 1/(1 − k) for sparse methods); paper 0.05
    batch_size: int | None = None  # evaluation batch size; None: the device's default
    alpha_rule: str = "paper"  # the grid rule (evaluation.runs.GRID_RULES), as AdditionSettings.alpha_rule
    alpha_extend: float = 0.0  # a candidate whose best α is its grid's last point extends it (arithmetic.extend_search)

    def __post_init__(self) -> None:
        from talos_core.evaluation.arithmetic import check_extend
        from talos_core.evaluation.runs import check_alpha_rule

        check_alpha_rule(self.alpha_rule)
        check_extend(self.alpha_extend)
        if self.param not in PARAMS:
            raise TalosError(f"selection param must be one of {', '.join(PARAMS)}, got {self.param!r}")
        values = self.values
        if values is None:
            if self.param not in DEFAULT_VALUES:
                raise TalosError(f"selecting {self.param} needs candidate values, e.g. --values 1e-4,3e-4,1e-3")
            values = DEFAULT_VALUES[self.param]
        if not isinstance(values, (tuple, list)) or not values:
            raise TalosError(f"values must be a non-empty tuple of {self.param} candidates, got {values!r}")
        values = tuple(values)
        _check_values(self.param, values)
        object.__setattr__(self, "values", values)
        if self.control_task is not None and not isinstance(self.control_task, str):
            raise TalosError(f"control task must be a task name, got {self.control_task!r}")
        check_alpha_step(self.alpha_step)
        check_int("batch_size", self.batch_size, low=1, optional=True)


def check_param_for_method(param: str, method: str) -> None:
    """``sparsity`` only for sparse methods, ``rank`` only for L-LoRA (catalogue); ``lr`` for any."""
    from talos_core.schema import METHODS, method_info

    info = method_info(method, "finetune")
    if param == "sparsity" and not info.sparse:
        sparse = ", ".join(m for m, i in METHODS.items() if i.sparse)
        raise TalosError(f"method {method!r} trains no sparse subset, so it has no sparsity to select; "
                         f"sparse methods: {sparse}")
    if param == "rank" and method != "llora":
        raise TalosError(f"only llora has a rank to select, not {method!r}")


def candidate_delta(param: str, value: Any, base: Mapping[str, Any]) -> dict:
    """The fine-tuning overrides that set ``param`` to ``value`` over the per-task ``base`` overrides.

    The L-LoRA rank is a method option; the default rank adds nothing (so that run is the method's
    default run, not a copy of it under another id).

    >>> candidate_delta("sparsity", 0.5, {}), candidate_delta("rank", 8, {}), candidate_delta("rank", 16, {})
    ({'sparsity': 0.5}, {'options': {'rank': 8}}, {})
    """
    if param != "rank":
        return {param: value}
    from talos_core.evaluation.runs import _options_dict
    from talos_core.runners.lora import DEFAULT_RANK

    if value == DEFAULT_RANK and "rank" not in _options_dict(base.get("options")):
        return {}
    return {"options": {"rank": value}}


def run_selection(req: EvalRequest, s: SelectionSettings) -> EvalOutcome:
    """The ``selection`` protocol: per task, one run per candidate value, its validation negation curve
    and single-task validation accuracy, :func:`select_by_negation`; writes ``selection/<name>``."""
    from talos_core.atomic import json_ready
    from talos_core.evaluation import arithmetic as arith
    from talos_core.evaluation.runs import merge_overrides, resolve_runs, run_alpha_grid, run_eval_mode

    check_param_for_method(s.param, req.method)
    tasks = list(req.tasks)
    control = check_control_task(s.control_task or arith.default_control_task(tasks), tasks)
    base = {t: merge_overrides(req.overrides, req.task_overrides.get(t)) for t in tasks}
    deltas = {(t, v): candidate_delta(s.param, v, base[t]) for t in tasks for v in s.values}
    runs = {}
    for v in s.values:  # fine-tune (or find) everything first: evaluation shares one context
        for t in tasks:
            runs[(t, v)] = resolve_runs(req.store, req.model, [t], req.method,
                                        overrides=merge_overrides(base[t], deltas[(t, v)]), train=req.train,
                                        progress=req.progress, force=req.force)[t]
    ctx = req.context({f"{t}|{v}": r for (t, v), r in runs.items()}, s.batch_size, [control])
    zs_val = ctx.zero_shot(control, "val")
    rows, curves, grids, lines = [], [], {}, []
    choices, overrides, chosen_runs, extended = {}, {}, {}, False
    floor = arith.CONTROL_THRESHOLD * float(zs_val)
    for t in tasks:
        cands, single = {}, {}
        grids[t] = {}
        for v in s.values:
            run = runs[(t, v)]
            mode = run_eval_mode(run)
            tv = run.task_vector()
            curve = arith.AlphaCurve(ctx, [(t, "val"), (control, "val")], tv, sign=-1.0, mode=mode,
                                     progress=req.progress)
            points: list[tuple[float, float, float]] = []

            def evaluate(alphas: list[float]) -> None:
                accs, _ = curve.evaluate(alphas)  # noqa: B023 - used within this candidate's search only
                points.extend((a, accs[i, 0], accs[i, 1]) for i, a in enumerate(alphas))  # noqa: B023

            alphas, _, more = arith.extend_search(
                run_alpha_grid({t: run}, s.alpha_step, s.alpha_rule)[0], evaluate,
                lambda: float(_best_point(negation_curve(points), floor)["alpha"]), s.alpha_extend)  # noqa: B023
            extended = extended or more
            cands[v] = pd.DataFrame(points, columns=["alpha", "target_val_acc", "control_val_acc"])
            single[v] = arith.finetuned_accuracies(ctx, {t: tv}, mode, splits=("val",))[(t, "val")]
            grids[t][str(v)] = [float(a) for a in alphas]
            curves += [{"task": t, "value": v, **r} for r in cands[v].to_dict(orient="records")]
            del tv
        res = select_by_negation(cands, zs_val, keep=arith.CONTROL_THRESHOLD, single_val_acc=single)
        table = res.table.assign(task=t, run_id=[runs[(t, v)].id for v in res.table["value"]])
        rows.append(table)
        choices[t] = {s.param: res.choice}
        overrides[t] = json_ready(merge_overrides(req.task_overrides.get(t), deltas[(t, res.choice)]))
        chosen_runs[t] = runs[(t, res.choice)].id
        lines.append(f"{t}: {s.param} {res.choice:g} (val negation target {fmt(res.table['score'].min())} at "
                     f"alpha {res.best_alpha:g}; candidates: "
                     + ", ".join(f"{r.value:g} -> {fmt(r.score)}" for r in res.table.itertuples()) + ")")
    from talos_core.schema import KINDS

    table = pd.concat(rows, ignore_index=True)[list(KINDS["selection"].columns)]
    name = req.name(req.result_id)
    req.store.write_table("selection", name, table, param=s.param, values=list(s.values), choices=choices,
                          overrides=overrides, runs=chosen_runs, rule=RULE.format(keep=arith.CONTROL_THRESHOLD),
                          keep=arith.CONTROL_THRESHOLD, control_task=control, control_zero_shot_val=zs_val,
                          alpha_step=s.alpha_step, alpha_grids=grids, curves=curves, method=req.result_id,
                          model=req.model, suite=req.suite, **req.result_meta(),
                          **({"alpha_rule": s.alpha_rule} if s.alpha_rule != "paper" else {}),
                          **({"alpha_extend": s.alpha_extend, "extended": extended} if s.alpha_extend else {}))
    lines.insert(0, f"control {control}: zero-shot val acc {fmt(zs_val)}; keep >= {arith.CONTROL_THRESHOLD:g} x")
    return EvalOutcome("selection", table, [("selection", name)], lines)


def selected_overrides(store, suite: str, model: str, method: str,
                       tasks: Sequence[str] | None = None) -> dict[str, dict]:
    """``{task: overrides}`` reproducing the runs a stored ``selection`` result chose for ``method`` (pass
    them as ``evaluate(..., task_overrides=...)``); every one of ``tasks`` (when given) must have a choice."""
    from talos_core.store import Store

    store = store if isinstance(store, Store) else Store(store)
    name = result_name(suite, model, method)
    if name not in store.results("selection"):
        raise TalosError(f"store {store.root} has no selection result {name!r}; run `talos evaluate selection "
                         f"--method {method} --suite {suite} ...` first")
    payload = store.read_result("selection", name)
    chosen = payload.get("overrides")
    if not isinstance(chosen, Mapping):
        raise TalosError(f"the selection result {name!r} in {store.root} has no per-task overrides; recompute it")
    missing = [t for t in (tasks or ()) if t not in chosen]
    if missing:
        raise TalosError(f"the selection result {name!r} has no choice for task {missing[0]!r} (it covers "
                         f"{', '.join(chosen) or 'none'}); run the selection on that task too")
    return {str(t): dict(o) for t, o in chosen.items()}
