"""The protocol behind a store's results, as text (pure: dicts in, markdown lines out; no Streamlit).

The Learn page names the protocol that produced what the dashboard shows, so no number is read without it: the budget,
batch size, α grid, hyperparameter selection, ξ grid and test-set size. Everything is read from what the
store records: the suite record (``results/suite/<suite>.json``, its ``scale_settings``), the learning-curve
results (budgets per method), the selection results (what was chosen per task, by which rule) and, where
present, the α grids, ξ grids and per-example test correctness of the stored results. A store written
before these fields existed gets what is known, and "not recorded" for the rest.

The paper's protocol (App. "Implementation Details"): α ∈ {0, 0.05, …, 1} × 1/(1 − k) for sparse methods
("Tuning of α"); hyperparameters cross-validated per task by validation task negation ("Hyperparameter
selection"); ξ on a 20 × 20 grid over [−3, 3]² with 2,048 points per task.

>>> s = protocol_summary({"scale": "mini", "scale_settings": {"steps": 40, "batch_size": 16, "alpha_step": 0.25}})
>>> s.headline
'fixed-budget protocol (scale mini)'
>>> s.lines[0]
'**Training budget**: 40 steps per task for every method, fixed by the suite scale (no learning curves in this store).'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dashboard.plain import md, notation, plain_data
from talos_core.errors import is_number
from talos_core.schema import METHODS, base_method_of, method_label, parse_variant, variant_id

NOT_RECORDED = "not recorded in this store"


@dataclass
class ProtocolSummary:
    """``headline``: the protocol in a few words; ``lines``: one markdown sentence per setting."""

    headline: str
    lines: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        return "\n".join(f"- {line}" for line in self.lines)


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------
def _num(value: Any) -> float | None:
    """A setting as a float; ``None`` for anything but a finite number (a boolean, a missing value, text)."""
    return float(value) if is_number(value, numpy=True) else None


def _g(value: Any) -> str:
    v = _num(value)
    return "?" if v is None else (str(int(v)) if v.is_integer() and abs(v) >= 1 else f"{v:g}")


def _order(methods: Iterable[str]) -> list[str]:
    from dashboard.data import order_methods

    return order_methods(methods)


def _labels(methods: Iterable[str]) -> str:
    return ", ".join(method_label(m) for m in _order(methods))


def _grid_points(step: float) -> int:
    return int(round(1.0 / step)) + 1


def _values(values: Any, param: str) -> str:
    vals = list(values) if isinstance(values, (list, tuple)) else []
    return "{" + ", ".join(str(int(v)) if param == "rank" and _num(v) is not None and float(v).is_integer()
                           else _g(v) for v in vals) + "}"


def _sparse_methods(methods: Iterable[str]) -> list[str]:
    return [m for m in methods if (METHODS.get(base_method_of(m) or "") or None) is not None
            and METHODS[base_method_of(m)].sparse]


# --------------------------------------------------------------------------------------------
# one line per setting
# --------------------------------------------------------------------------------------------
def _budget_line(ss: Mapping, curves: Mapping[str, Mapping], methods: Sequence[str]) -> str:
    every, patience = _num(ss.get("eval_every")), _num(ss.get("early_stopping_patience"))
    if ss and every and patience and _num(ss.get("steps")) and not _num(ss.get("curve_steps")):
        # the converged protocol: every run is its own learning curve
        return (f"**Training budget**: every run trains up to {_g(ss['steps'])} steps with validation accuracy every "
                f"{_g(every)} steps, stops after {_g(patience)} evaluations without improvement and keeps the best "
                f"evaluation's weights: each run's validation curve is in its manifest (the audit flags one still "
                f"rising at its end).")
    budgets = {m: _num(p.get("budget")) for m, p in curves.items()}
    budgets = {m: int(b) for m, b in budgets.items() if b is not None}
    if budgets and ss and not _num(ss.get("curve_steps")) and _num(ss.get("steps")):
        # curves measured for another scale (e.g. the paper's, ahead of its results): the shown results do not use them
        measured = "; ".join(f"{method_label(m)} {budgets[m]}" for m in _order(budgets))
        return (f"**Training budget**: {_g(ss['steps'])} steps per task for every method, fixed by the suite scale. "
                f"The store also holds learning curves measured for the paper's protocol (Efficiency page), whose "
                f"budgets ({measured} steps) these results do not use yet.")
    if budgets:
        by = {}
        for m in _order(budgets):
            by.setdefault(budgets[m], []).append(m)
        if len(by) == 1:
            b, ms = next(iter(by.items()))
            text = f"{b} steps per task for {_labels(ms)}"
        else:
            text = "; ".join(f"{method_label(m)} {budgets[m]} steps" for m in _order(budgets)) + " per task"
        first = curves[_order(budgets)[0]]
        steps = _num(first.get("steps")) or _num(ss.get("curve_steps"))
        every = _num(first.get("eval_every")) or _num(ss.get("curve_every"))
        tol = _num(first.get("tolerance"))
        tol = tol if tol is not None else _num(ss.get("curve_tolerance"))
        detail = ", ".join(x for x in (
            f"learning curves up to {_g(steps)} steps" if steps else "learning curves",
            f"validation accuracy every {_g(every)} steps" if every else "",
            f"tolerance {_g(tol)} = {100 * tol:g} point{'' if 100 * tol == 1 else 's'} of accuracy"
            if tol is not None else "") if x)
        rest = [m for m in methods if m not in budgets and (METHODS.get(m) is None or not METHODS[m].posthoc)
                and base_method_of(m) not in budgets]
        other = f" Others ({_labels(rest)}): {_g(ss['steps'])} steps." if rest and _num(ss.get("steps")) else ""
        return (f"**Training budget**: {text}, set by convergence ({detail}): the smallest step after which no "
                f"task's validation accuracy rises by more than the tolerance (Efficiency page).{other}")
    if _num(ss.get("curve_steps")):
        return (f"**Training budget**: to be chosen from learning curves up to {_g(ss['curve_steps'])} steps, but "
                f"the store has no learning-curve results yet; {_g(ss.get('steps'))} steps otherwise.")
    if _num(ss.get("steps")):
        return (f"**Training budget**: {_g(ss['steps'])} steps per task for every method, fixed by the suite scale "
                f"(no learning curves in this store).")
    return f"**Training budget**: {NOT_RECORDED} (no suite record or learning curves)."


def _batch_line(ss: Mapping) -> str:
    parts = []
    if _num(ss.get("batch_size")):
        parts.append(f"batch size {_g(ss['batch_size'])}")
    if _num(ss.get("max_train")):
        parts.append(f"at most {_g(ss['max_train'])} training examples per task")
    lr = _num(ss.get("lr"))
    by = {str(m): v for m, v in (ss.get("lr_by_method") or []) if _num(v) is not None} \
        if isinstance(ss.get("lr_by_method"), (list, tuple)) else {}
    if by:
        groups: dict[str, list[str]] = {}
        for m, v in by.items():
            groups.setdefault(_g(v), []).append(m)
        parts.append("learning rate " + "; ".join(f"{v} ({_labels(ms)})" for v, ms in groups.items())
                     + (f", {_g(lr)} otherwise" if lr is not None else ", the model's default otherwise"))
    elif lr is not None:
        parts.append(f"learning rate {_g(lr)}")
    checked = ss.get("lr_check") if isinstance(ss.get("lr_check"), (list, tuple)) else []
    if ss.get("lr_choose") and checked:
        parts.append("each method's learning rate chosen by its lr check on validation among "
                     + ", ".join(_g(v) for v in checked) + " (Efficiency page)")
    if not parts:
        return f"**Batch size**: {NOT_RECORDED}."
    return "**Training**: " + ", ".join(parts) + "."


def _alpha_line(ss: Mapping, selections: Mapping[str, Mapping], grids: Mapping[str, Sequence[float]]) -> str:
    step = _num(ss.get("alpha_step"))
    if step is None:
        steps = {_num(p.get("alpha_step")) for p in selections.values()} - {None}
        step = next(iter(steps)) if len(steps) == 1 else None
    sizes = sorted({len(g) for g in grids.values() if g})
    stored = ""
    if sizes:
        stored = (f" Stored addition grids: {sizes[0]} points" if len(sizes) == 1
                  else f" Stored addition grids: {sizes[0]}–{sizes[-1]} points") + "."
    if step is None or step <= 0:
        return f"**α grid** (addition and negation): step {NOT_RECORDED}.{stored}"
    n = _grid_points(step)
    paper = " — the paper's grid" if abs(step - 0.05) < 1e-9 else " (the paper: step 0.05, 21 points)"
    union = ss.get("alpha_rule") == "union"
    extend = _num(ss.get("alpha_extend"))
    how = ("together with its stretch × 1/(1 − k) for sparse methods (sparsity k)" if union
           else "× 1/(1 − k) for sparse methods (sparsity k)")
    more = (f" A search whose choice is a grid's last point extends the grid by its top step until the choice is "
            f"inside it (at most {_g(extend)}× its largest value)." if extend else "")
    return f"**α grid** (addition and negation): 0, {_g(step)}, …, 1 ({n} points), {how}{paper}.{more}{stored}"


def _selection_line(ss: Mapping, selections: Mapping[str, Mapping], methods: Sequence[str]) -> str:
    variants = [m for m in methods if parse_variant(m) is not None]
    for entry in ss.get("variants") or []:
        try:
            variants.append(variant_id(str(entry[0]), **{str(entry[1]): entry[2]}))
        except Exception:  # a malformed entry: skip it, the rest of the summary still stands
            continue
    variants = list(dict.fromkeys(variants))
    fixed = (" Fixed-hyperparameter rows kept beside them: "
             + ", ".join(f"{method_label(v)} (`{v}`)" for v in _order(variants)) + ".") if variants else ""
    if selections:
        parts = []
        rule = ""
        for m in _order(selections):
            p = selections[m]
            param = str(p.get("param", "?"))
            parts.append(f"{method_label(m)} {param} from {_values(p.get('values'), param)}")
            if not rule and (_num(p.get("keep")) is not None or p.get("control_task")):
                keep = _num(p.get("keep"))
                control = p.get("control_task")
                rule = ("by validation task negation: the lowest target accuracy with the control task"
                        + (f" ({control})" if control else "")
                        + (f" at ≥ {100 * keep:g}% of its zero-shot accuracy" if keep is not None else " kept"))
        planned = [str(e[0]) for e in ss.get("selection") or [] if isinstance(e, (list, tuple)) and e
                   and str(e[0]) not in selections]
        missing = f" Planned but not in the store: {_labels(planned)}." if planned else ""
        rule = rule or "by validation task negation (lowest target accuracy with the control task kept)"
        return (f"**Hyperparameter selection**, one choice per task, {rule}: " + "; ".join(parts)
                + " (chosen values on the Arithmetic page)." + missing + fixed)
    planned = [e for e in ss.get("selection") or [] if isinstance(e, (list, tuple)) and len(e) >= 3]
    if planned:
        return ("**Hyperparameter selection**: planned by the suite ("
                + "; ".join(f"{method_label(str(e[0]))} {e[1]} from {_values(e[2], str(e[1]))}" for e in planned)
                + ") but no selection results are in the store yet." + fixed)
    sparse = _sparse_methods(methods)
    k = " (sparsity k as set for each run)" if sparse else ""
    return ("**Hyperparameter selection**: none in this store — every method's hyperparameters are fixed" + k
            + "; the paper selects them per task by validation task negation." + fixed)


def _xi_line(ss: Mapping, xi: Sequence[Mapping]) -> str:
    shapes: dict[tuple, int] = {}
    for p in xi:
        a1, a2 = p.get("alphas1") or [], p.get("alphas2") or []
        if not a1 or not a2:
            continue
        pts = _num(p.get("points_per_task"))
        key = (len(a1), len(a2), _g(min(a1 + a2)), _g(max(a1 + a2)), None if pts is None else int(pts))
        shapes[key] = shapes.get(key, 0) + 1
    if shapes:
        parts = [f"{n1}×{n2} on [{lo}, {hi}]²" + (f", {pts} points per task" if pts else "")
                 + f" ({count} result{'s' if count > 1 else ''})"
                 for (n1, n2, lo, hi, pts), count in sorted(shapes.items(), key=lambda kv: (-kv[0][0], kv[0]))]
        return "**ξ heatmaps**: " + "; ".join(parts) + " (the paper: 20×20 on [−3, 3]², 2,048 points per task)."
    if _num(ss.get("xi_grid")):
        pts = f", {_g(ss['xi_points'])} points per task" if _num(ss.get("xi_points")) else ""
        return f"**ξ heatmaps**: {_g(ss['xi_grid'])}×{_g(ss['xi_grid'])} grid{pts} (suite scale)."
    return f"**ξ heatmaps**: grid {NOT_RECORDED}."


def _test_line(ss: Mapping, test_examples: Mapping[str, int]) -> str:
    counts = {t: int(n) for t, n in test_examples.items() if _num(n)}
    if counts:
        lo, hi = min(counts.values()), max(counts.values())
        if lo == hi:
            text = f"{lo} per task"
        else:
            text = f"{lo}–{hi} per task (" + ", ".join(f"{t} {n}" for t, n in counts.items()) + ")"
        cap = f"; cap {_g(ss['max_test'])}" if _num(ss.get("max_test")) and _num(ss["max_test"]) > hi else ""
        return f"**Test examples**: {text}{cap}."
    if _num(ss.get("max_test")):
        return f"**Test examples**: at most {_g(ss['max_test'])} per task (the exact count is {NOT_RECORDED})."
    return f"**Test examples**: {NOT_RECORDED}."


def protocol_summary(suite: Mapping[str, Any] | None, *, learning_curves: Mapping[str, Mapping] | None = None,
                     selections: Mapping[str, Mapping] | None = None,
                     alpha_grids: Mapping[str, Sequence[float]] | None = None, xi: Sequence[Mapping] = (),
                     test_examples: Mapping[str, int] | None = None,
                     methods: Sequence[str] = ()) -> ProtocolSummary:
    """The protocol that produced a store's results, from its suite record and stored results.

    ``suite``: the suite record (``results/suite/<suite>.json``; ``None`` when the store has none);
    ``learning_curves`` / ``selections``: ``{method: payload}`` of the stored ``learning_curve`` and
    ``selection`` results (their fields, tables not needed); ``alpha_grids``: ``{method: addition α grid}``;
    ``xi``: disentanglement payloads (``alphas1``, ``alphas2``, ``points_per_task``); ``test_examples``:
    ``{task: number of test examples}`` (e.g. from the single-task result's per-example correctness);
    ``methods``: result ids in the store (variant ids among them are named as fixed rows).

    The suite record's ``scale_settings`` may hold the paper-protocol fields ``protocol``, ``curve_steps``,
    ``curve_every``, ``curve_tolerance``, ``selection`` (``[method, param, values]`` entries) and
    ``variants`` (``[method, param, value]``); older records lack them and the summary says what is known.
    """
    # store-supplied strings (scale, rules, method and task names...) become plain text in the markdown lines
    suite = plain_data(dict(suite or {}))
    learning_curves, selections = plain_data(dict(learning_curves or {})), plain_data(dict(selections or {}))
    test_examples, methods = plain_data(dict(test_examples or {})), plain_data(list(methods))
    xi = plain_data(list(xi))
    ss = suite.get("scale_settings") if isinstance(suite.get("scale_settings"), Mapping) else {}
    curves = dict(learning_curves or {})
    sels = dict(selections or {})
    all_methods = list(dict.fromkeys([*(suite.get("methods") or []), *methods]))
    if ss:  # the record says which protocol produced the results (curves of another scale may sit beside them)
        paper = (str(ss.get("protocol", "")).lower() == "paper" or _num(ss.get("curve_steps")) is not None
                 or bool(ss.get("selection")))
    else:
        paper = bool(curves) or bool(sels)
    scale = suite.get("scale")
    converged = bool(ss) and bool(ss.get("lr_choose")) and _num(ss.get("early_stopping_patience")) is not None
    if paper and converged:
        headline = "the paper's protocol, every run converged" + (f" (scale {scale})" if scale else "")
    elif paper:
        headline = "the paper's protocol" + (f" (scale {scale})" if scale else "")
    elif ss:
        headline = "fixed-budget protocol" + (f" (scale {scale})" if scale else "")
    else:
        headline = "protocol not recorded (no suite record in this store)"
    lines = [
        _budget_line(ss, curves, all_methods),
        _batch_line(ss),
        _alpha_line(ss, sels, dict(alpha_grids or {})),
        _selection_line(ss, sels, all_methods),
        _xi_line(ss, list(xi)),
        _test_line(ss, dict(test_examples or {})),
    ]
    return ProtocolSummary(headline, lines)


def budget_sentence(curves: Sequence[Any]) -> str:
    """The Efficiency page's sentence under the learning curves: each method's chosen budget and the rule,
    quoted from the stored ``rule`` (:class:`dashboard.data.LearningCurve` objects, or anything with
    ``method``, ``budget``, ``tolerance`` and ``rule``).

    >>> from types import SimpleNamespace as N
    >>> budget_sentence([N(method="talos", budget=300, tolerance=0.01, rule="the plateau step")])
    '**Budget**: TaLoS 300 steps (tolerance 0.01). **Rule**: the plateau step.'
    """
    parts = [f"{md(method_label(c.method), at_start=False)} {md(c.budget, at_start=False)} steps"
             if c.budget is not None else f"{md(method_label(c.method), at_start=False)}: no budget recorded"
             for c in curves]
    tols = sorted({c.tolerance for c in curves if c.tolerance is not None})
    tol = f" (tolerance {', '.join(f'{t:g}' for t in tols)})" if tols else ""
    rules = list(dict.fromkeys(md(notation(str(c.rule)).strip().rstrip("."), at_start=False) for c in curves
                               if getattr(c, "rule", "")))
    rule = f" **Rule**: {'; '.join(rules)}." if rules else " The rule is not recorded in these results."
    return f"**Budget**: {', '.join(parts)}{tol}.{rule}"


def curves_note(suite: Mapping[str, Any] | None, curves: Sequence[Any]) -> str | None:
    """A warning when the store's learning curves are not what its results used: the suite record trained a
    fixed budget (no ``curve_steps``) while curves measured for the paper's protocol sit beside it; ``None``
    when the curves set the results' budgets, or when nothing is recorded.

    >>> curves_note({"scale": "mini", "scale_settings": {"steps": 40}}, [])
    >>> class C: steps, meta = 1000, {"train_precision": ["bf16"]}
    >>> curves_note({"scale": "mini", "scale_settings": {"steps": 40}}, [C()]).split(":")[0]
    'These curves come from the paper-protocol learning-curve step (up to 1000 steps, bf16 training)'
    """
    ss = (suite or {}).get("scale_settings")
    if not curves or not isinstance(ss, Mapping) or _num(ss.get("curve_steps")) is not None:
        return None
    steps = _num(ss.get("steps"))
    if steps is None:
        return None
    ends = sorted({int(c.steps) for c in curves if _num(getattr(c, "steps", None)) is not None})
    precisions = sorted({str(p) for c in curves for p in ((getattr(c, "meta", {}) or {}).get("train_precision") or [])})
    what = ", ".join(x for x in (f"up to {'/'.join(map(str, ends))} steps" if ends else "",
                                 f"{'/'.join(precisions)} training" if precisions else "") if x)
    scale = (suite or {}).get("scale")
    where = f" (scale {scale})" if scale else ""
    return (f"These curves come from the paper-protocol learning-curve step ({what}): the other results of this "
            f"store{where} trained a fixed {_g(steps)} steps per task, not these budgets.")


def no_curves_sentence(suite: Mapping[str, Any] | None) -> str:
    """What the Efficiency page says where the store has no learning-curve results: under the converged protocol (a
    scale with early stopping) every run is its own curve; otherwise the runs trained a fixed budget.

    >>> no_curves_sentence({"scale_settings": {"steps": 2000, "eval_every": 50, "early_stopping_patience": 5}})[:72]
    'No learning curves in this store as a step of their own: under the conve'
    >>> no_curves_sentence({"scale_settings": {"steps": 40}})[:60]
    'No learning curves in this store for this suite/model: its r'
    """
    steps = fixed_steps(suite)
    ss = (suite or {}).get("scale_settings")
    patience = _num(ss.get("early_stopping_patience")) if isinstance(ss, Mapping) else None
    if patience:  # the converged protocol: the curve is the run
        return ("No learning curves in this store as a step of their own: under the converged protocol each run "
                f"trained up to {md(steps)} steps, validated every {md(ss.get('eval_every'))} steps and stopped after "
                f"{_g(patience)} validations without gain, its best evaluation kept, so every run is its own learning "
                "curve (recorded in its run manifest); the audit flags a run whose curve was still rising at its end.")
    return ("No learning curves in this store for this suite/model: its runs trained a fixed budget"
            + (f" of {md(steps)} steps per task (suite record)" if steps else "")
            + ", not one measured by convergence. Stores produced with the paper's protocol (learning-curve "
              "step) show validation accuracy vs step here.")


def fixed_steps(suite: Mapping[str, Any] | None) -> int | None:
    """The fixed step budget of a suite record (``scale_settings.steps``), ``None`` when not recorded.

    >>> fixed_steps({"scale_settings": {"steps": 40}}), fixed_steps(None)
    (40, None)
    """
    ss = (suite or {}).get("scale_settings")
    v = _num(ss.get("steps")) if isinstance(ss, Mapping) else None
    return int(v) if v is not None else None


# --------------------------------------------------------------------------------------------
# the learning rate re-checked at the step budget (lr_check results): a rate chosen at another budget may not hold
# --------------------------------------------------------------------------------------------
LR_CHECK_COLUMNS = ["method", "budget (steps)", "tasks", "suite lr", "mean val acc at the suite lr",
                    "other lrs: mean val acc", "best lr", "verdict"]


def _lr(value: Any) -> str:
    from talos_core.evaluation.lr_check import lr_text

    v = _num(value)
    return "?" if v is None else lr_text(v)


def _acc(value: Any) -> str:
    v = _num(value)
    return "?" if v is None else f"{v:.3f}"


def lr_check_table(checks: Sequence[Any]) -> Any:
    """One row per method of its lr check (:class:`dashboard.data.LrCheck` objects, or anything with ``row`` or
    ``method``, ``suite_lr``, ``best_lr``, ``agrees``, ``means`` ``{lr: mean}``, ``budget`` and ``tasks``), in the
    catalogue's method order (a ``pandas.DataFrame`` of :data:`LR_CHECK_COLUMNS`): the row whose runs were
    checked (``TaLoS (k = 0.9)``), the budget, the tasks, the suite's lr and its mean validation accuracy, the
    others', the best lr and whether it agrees. Plain text cells (``st.dataframe`` renders no Markdown).

    >>> from types import SimpleNamespace as N
    >>> c = N(method="talos", row="talos-k0.9", suite_lr=1e-3, best_lr=1e-3, agrees=True, budget=300,
    ...       tasks=["tweets", "wordnet-verbs"], means={1e-3: 0.71, 1e-4: 0.65})
    >>> lr_check_table([c]).iloc[0].tolist()
    ['TaLoS (k = 0.9)', '300', 'tweets, wordnet-verbs', '1e-3', '0.710', '1e-4: 0.650', '1e-3', 'agrees']
    """
    import pandas as pd

    from talos_core.evaluation.lr_check import same_lr

    rank = {m: i for i, m in enumerate(_order([c.method for c in checks]))}
    rows = []
    for c in sorted(checks, key=lambda c: rank.get(c.method, len(rank))):
        means = {float(k): v for k, v in dict(c.means).items() if _num(k) is not None}
        own = [m for lr, m in means.items() if _num(c.suite_lr) is not None and same_lr(lr, float(c.suite_lr))]
        others = [f"{_lr(lr)}: {_acc(m)}" for lr, m in means.items()
                  if _num(c.suite_lr) is None or not same_lr(lr, float(c.suite_lr))]
        rows.append({"method": method_label(str(getattr(c, "row", None) or c.method)),
                     "budget (steps)": "?" if c.budget is None else str(c.budget),
                     "tasks": ", ".join(map(str, c.tasks)), "suite lr": _lr(c.suite_lr),
                     "mean val acc at the suite lr": _acc(own[0]) if own else "?",
                     "other lrs: mean val acc": "; ".join(others) or "–", "best lr": _lr(c.best_lr),
                     "verdict": "agrees" if c.agrees else "disagrees"})
    return pd.DataFrame(rows, columns=LR_CHECK_COLUMNS)


def lr_check_sentence(checks: Sequence[Any]) -> str:
    """The caption under the lr-check table: how many agree and the rule, quoted from the stored ``rule``
    (escaped: store text).

    >>> from types import SimpleNamespace as N
    >>> s = lr_check_sentence([N(agrees=True, rule="highest mean"), N(agrees=False, rule="highest mean")])
    >>> s.split(":")[1].split(";")[0]
    " the suite's lr has the highest mean validation accuracy for 1 of 2 methods"
    >>> s.endswith("**Rule**: highest mean.")
    True
    >>> lr_check_sentence([N(agrees=True, rule="", meta={"chooses": True})]).split(":")[0]
    '**Learning rate chosen by the check**'
    """
    agree = sum(bool(c.agrees) for c in checks)
    rules = list(dict.fromkeys(md(notation(str(c.rule)).strip().rstrip("."), at_start=False) for c in checks
                               if getattr(c, "rule", "")))
    rule = f" **Rule**: {'; '.join(rules)}." if rules else ""
    if checks and all((getattr(c, "meta", None) or {}).get("chooses") for c in checks):
        return ("**Learning rate chosen by the check**: each method trains every later run at the lr with the "
                "highest mean validation accuracy of its check (the suite lr column), so every check agrees by "
                f"construction.{rule}")
    return (f"**Learning rate re-checked at the budget**: the suite's lr has the highest mean validation accuracy "
            f"for {agree} of {len(checks)} method{'s' if len(checks) != 1 else ''}; the suite keeps its lr either "
            f"way (the check reports, it changes no result).{rule}")
