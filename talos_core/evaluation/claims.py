"""The paper's claims checked on a store's suite results: the numbers behind each claim and a verdict by a rule.

Pure: reads a suite's results (SCHEMA.md kinds ``suite``, ``comparison``, ``mask_iou``, ``sharing``, ``masks``,
``linearization``, ``sparsity_ablation``, ``single``, ``negation``) and computes nothing new. Each claim of
:data:`CLAIMS` has a check that turns those results into one line of numbers, a verdict by the claim's stated
``rule`` (``reproduced`` or ``not reproduced``) and the evidence it rests on (rows and metrics). The audit
(:mod:`talos_core.evaluation.audit`) then judges the evidence: a claim whose evidence carries a flag is
``inconclusive``, with the flags named and the rule's own verdict kept beside them — unless a part of the rule
(:class:`Part`; claim (a) has two, addition and negation) fails on unflagged numbers whose 95 % intervals are apart:
that part alone settles ``not reproduced``, whatever the flags on the other part. A claim whose results the store
lacks (or that does not apply to the suite's model) is ``n/a`` with the reason. :func:`claims_markdown` renders
the table ``docs/results.md`` carries (``talos docs``).

>>> CLAIMS[0].key, VERDICTS
('a', ('reproduced', 'not reproduced', 'inconclusive', 'n/a'))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from talos_core.errors import TalosError
from talos_core.evaluation.audit import ALL, MIN_GAIN_POINTS, Flag, audit_suite
from talos_core.schema import METHODS, base_method_of, interval_columns, result_name
from talos_core.store import Store

VERDICTS = ("reproduced", "not reproduced", "inconclusive", "n/a")
#: evidence on how a row was trained: only the audit's run-level flags (convergence, lr, selection) concern it
TRAINING = "training"

#: (f): how far below the best PEFT baseline TaLoS's single-task accuracy may be and still be "on par", in points
ON_PAR_POINTS = 2.0
#: (b): how much lower the pruning ratio on other tasks may be than on the task itself and still count as shared
SHARING_TOLERANCE = 0.05
#: the parameter-efficient baselines of claim (f) (the paper's PEFT comparison)
PEFT_BASELINES = ("llora", "lota")


class _Missing(Exception):
    """A result a claim needs is not in the store, or the claim does not apply: the reason, for ``n/a``."""


@dataclass(frozen=True)
class Claim:
    key: str
    text: str
    rule: str


@dataclass(frozen=True)
class Finding:
    """One claim on one suite: ``numbers`` (one line), ``verdict`` (one of :data:`VERDICTS`)."""

    claim: Claim
    suite: str
    scale: str
    numbers: str
    verdict: str
    #: the rule's verdict on the numbers alone (``verdict`` is ``inconclusive`` when the evidence is flagged)
    rule_verdict: str = ""
    #: the audit flags on the claim's evidence
    flags: tuple[Flag, ...] = ()
    #: the part of the rule that fails on unflagged, separated numbers and so settles ``not reproduced`` ("" if none)
    settled_by: str = ""


@dataclass(frozen=True)
class _Suite:
    store: Store
    name: str
    model: str
    scale: str

    def _stored(self, kind: str, *parts: str) -> str:
        name = result_name(self.name, self.model, *parts)
        if name not in self.store.results(kind):
            raise _Missing(f"no {kind} result {name}")
        return name

    def table(self, kind: str, *parts: str) -> pd.DataFrame:
        return self.store.read_table(kind, self._stored(kind, *parts))

    def result(self, kind: str, *parts: str) -> dict:
        return self.store.read_result(kind, self._stored(kind, *parts))

    def fixed_row(self, kind: str, method: str) -> str:
        """The method's fixed-sparsity row (``<method>-k0.9``) where the store has it for ``kind``, else the method."""
        variant = f"{method}-k0.9"
        if kind == "comparison":
            rows = set(self.table("comparison")["method"])
            return variant if variant in rows else method
        return variant if result_name(self.name, self.model, variant) in self.store.results(kind) else method

    def has(self, kind: str, *parts: str) -> bool:
        return result_name(self.name, self.model, *parts) in self.store.results(kind)


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def _span(values: Sequence[float], fmt: str = ".3f") -> str:
    lo, hi = min(values), max(values)
    return format(lo, fmt) if format(lo, fmt) == format(hi, fmt) else f"{format(lo, fmt)}–{format(hi, fmt)}"


def _is_talos(method: str) -> bool:
    return base_method_of(method) == "talos"


def _off_diagonal(matrix: Sequence[Sequence[float]]) -> list[float]:
    m = np.asarray(matrix, dtype=float)
    return [float(m[i, j]) for i in range(len(m)) for j in range(len(m)) if i != j]


# --------------------------------------------------------------------------------------------
# the checks: (numbers, reproduced?)
# --------------------------------------------------------------------------------------------
Evidence = list[tuple[str, str]]
"""The (row, metric) pairs a claim's verdict rests on; metric :data:`TRAINING` stands for how the row was trained."""


@dataclass(frozen=True)
class Part:
    """One conjunct of a claim's rule: whether it ``holds``, the ``evidence`` it rests on, and whether the numbers it
    compares have 95 % intervals that do not overlap (``separated``; ``None`` where the rule compares no interval)."""

    name: str
    holds: bool
    evidence: Evidence
    separated: bool | None = None


def _separated(table: pd.DataFrame, a: str, b: str, col: str) -> bool | None:
    """Whether rows ``a`` and ``b`` of a comparison table have disjoint 95 % intervals of ``col`` (None: none)."""
    lo, hi = interval_columns(col)
    if lo not in table.columns or hi not in table.columns:
        return None
    values = [table.at[r, c] for r in (a, b) for c in (lo, hi)]
    if any(pd.isna(v) for v in values):
        return None
    a_lo, a_hi, b_lo, b_hi = (float(v) for v in values)
    return a_hi < b_lo or b_hi < a_lo


def _best_in_addition_and_negation(s: _Suite) -> tuple[str, list[Part]]:
    table = s.table("comparison").set_index("method")
    return _best_in(table, _control_holds(s, table))


def _control_holds(s: _Suite, table: pd.DataFrame) -> dict[str, bool]:
    """Per row: whether its negation kept the control task at ≥ the threshold × its zero-shot accuracy on test
    (the mean over targets at the selected α's, as the comparison reports it). Rows without a negation result
    count as holding (the store cannot say otherwise)."""
    out = {}
    for row in table.index:
        try:
            neg = s.result("negation", row)
        except _Missing:
            continue
        zs = (neg.get("control_zero_shot_acc") or {}).get("test")
        control = table.at[row, "negation_control"] if "negation_control" in table.columns else None
        if zs is not None and control is not None and not pd.isna(control):
            out[row] = float(control) >= float(neg.get("threshold", 0.95)) * float(zs)
    return out


def _best_in(table: pd.DataFrame, control_holds: dict[str, bool] | None = None) -> tuple[str, list[Part]]:
    """Claim (a) on a comparison table indexed by method: absolute addition, and negation among the rows whose
    control constraint holds on test (``control_holds``; a row missing there holds). Normalized accuracy is
    shown, never decisive."""
    if "talos" not in table.index:
        raise _Missing("no talos row in the comparison")
    holds_on_test = control_holds or {}
    own, text, parts = table.loc["talos"], [], []
    others = table[[not _is_talos(m) for m in table.index]]
    col = others["addition_abs"].dropna()
    if col.empty or pd.isna(own["addition_abs"]):
        raise _Missing("no addition_abs to compare")
    best = col.idxmax()
    parts.append(Part("addition", bool(own["addition_abs"] >= col[best]),
                      [("talos", "addition_abs"), (best, "addition_abs")],
                      _separated(table, "talos", best, "addition_abs")))
    text.append(f"addition abs {_pct(own['addition_abs'])} vs {_pct(col[best])} ({best})")
    col = others["negation_target"].dropna()
    if col.empty or pd.isna(own["negation_target"]):
        raise _Missing("no negation_target to compare")
    valid = col[[holds_on_test.get(m, True) for m in col.index]]
    dropped = sorted(set(col.index) - set(valid.index))
    own_ok = holds_on_test.get("talos", True)
    if valid.empty:
        raise _Missing("no other row's negation keeps its control on test")
    best = valid.idxmin()
    # TaLoS's own broken control fails the part outright: no interval can rescue it
    parts.append(Part("negation", bool(own_ok and own["negation_target"] <= valid[best]),
                      [("talos", "negation_target"), (best, "negation_target")],
                      _separated(table, "talos", best, "negation_target") if own_ok else True))
    text.append(f"negation target {_pct(own['negation_target'])}"
                + ("" if own_ok else " (control broken on test)") + f" vs {_pct(valid[best])} ({best})"
                + (f", not counted for a control broken on test: {', '.join(dropped)}" if dropped else ""))
    if "addition_norm" in table.columns and not pd.isna(own.get("addition_norm")):
        text.append(f"(normalized {_pct(own['addition_norm'])}, not decisive)")
    return "TaLoS " + "; ".join(text), parts


def _pruning_shared(prune: np.ndarray) -> tuple[float, float, bool]:
    """The pruning half of claim (b) on a task × task matrix of accuracy ratios (row: the task whose bottom entries
    are pruned, column: the task evaluated): the mean on the same task, the mean on the others, and whether the
    others lose at most :data:`SHARING_TOLERANCE` more than the task itself."""
    same, other = float(np.mean(np.diag(prune))), float(np.mean(_off_diagonal(prune)))
    return same, other, other >= same - SHARING_TOLERANCE


def _flips_without_one(prune: np.ndarray, tasks: Sequence[str]) -> list[tuple[str, float, float]]:
    """The tasks whose leaving out (its row and column) turns the pruning rule's outcome around, with the two means
    then; nothing below three tasks (one left would have no other task).

    >>> m = np.array([[0.8, 0.5, 0.9], [0.4, 0.3, 0.9], [0.2, 0.4, 0.4]])
    >>> _pruning_shared(m)[2], _flips_without_one(m, ["a", "b", "c"])
    (True, [('c', 0.55, 0.45)])
    >>> _flips_without_one(m[:2, :2], ["a", "b"])
    []
    """
    if len(tasks) < 3:
        return []
    holds = _pruning_shared(prune)[2]
    out = []
    for k, task in enumerate(tasks):
        keep = [i for i in range(len(tasks)) if i != k]
        same, other, ok = _pruning_shared(prune[np.ix_(keep, keep)])
        if ok != holds:
            out.append((task, round(same, 4), round(other, 4)))
    return out


def _shared_entries(s: _Suite) -> tuple[str, list[Part]]:
    talos, lota = s.fixed_row("mask_iou", "talos"), s.fixed_row("mask_iou", "lota")
    ti, li = _off_diagonal(s.result("mask_iou", talos)["matrix"]), _off_diagonal(s.result("mask_iou", lota)["matrix"])
    sharing = s.result("sharing", "prune")
    prune = np.asarray(sharing["matrix"], dtype=float)
    same, other, shared = _pruning_shared(prune)
    bottom = f"bottom {100 * sharing['fraction']:g} %" if "fraction" in sharing else "bottom entries"
    numbers = (f"mask IoU across tasks {talos} {_span(ti)} vs {lota} {_span(li)}; pruning a task's {bottom} "
               f"keeps {same:.2f} of its accuracy on the same task, {other:.2f} on the others (means; ranges "
               f"{_span(np.diag(prune).tolist(), '.2f')} and {_span(_off_diagonal(prune), '.2f')})")
    tasks = [str(t) for t in sharing.get("tasks") or []]
    if len(tasks) == len(prune) >= 3:
        flips = _flips_without_one(prune, tasks)
        numbers += ("; leaving one task out turns the pruning comparison around: " + ", ".join(
            f"without {t} {a:.2f} / {b:.2f}" for t, a, b in flips) if flips
            else "; leaving any one task out keeps the pruning comparison")
    return numbers, [Part("rule", bool(min(ti) > max(li) and shared), [(talos, "masks"), (lota, "masks")])]


_ATTENTION = {"q": "Q", "k": "K", "qkv": "packed QKV", "v": "V", "attn_out": "attention output"}


def _where_masks_sit(s: _Suite) -> tuple[str, list[Part]]:
    def shares(method: str) -> dict[str, float]:
        table = s.table("masks", method)
        if not table["layer_type"].isin(["q", "k", "qkv"]).any():
            raise _Missing(f"{s.model} has no attention projections")
        by_type = table.groupby("layer_type")["trainable"].sum()
        total = float(by_type.sum())
        if total <= 0:
            raise _Missing(f"the {method} masks have no trainable entry")
        mlp = float(by_type.get("mlp_in", 0) + by_type.get("mlp_out", 0)) / total
        return {**{t: float(by_type.get(t, 0)) / total for t in _ATTENTION}, "mlp": mlp}

    talos = s.fixed_row("masks", "talos")
    own = shares(talos)
    numbers = (f"{talos}: " + ", ".join(f"{_pct(own[t])} % {label}" for t, label in _ATTENTION.items()
                                        if own[t] > 0 or t in ("q", "k")) + f", {_pct(own['mlp'])} % MLP"
               + " of the trainable entries")
    lota = s.fixed_row("masks", "lota")
    try:
        theirs = shares(lota)
        numbers += f"; {lota}: {_pct(theirs['q'] + theirs['k'] + theirs['qkv'])} % Q/K, {_pct(theirs['mlp'])} % MLP"
    except _Missing:
        pass
    return numbers, [Part("rule", bool(own["q"] + own["k"] + own["qkv"] > 0.5), [(talos, "masks")])]


def _zero_shot_by_task(s: _Suite) -> dict[str, float]:
    """Test accuracy of the pre-trained model per task (the ``single`` table), where the store has it."""
    try:
        single = s.table("single")
    except _Missing:
        return {}
    if "split" in single.columns:
        single = single[single["split"] == "test"]
    return {str(t): float(v) for t, v in single.groupby("task")["zero_shot_acc"].first().items()}


def _keeps_accuracy_linearized(s: _Suite) -> tuple[str, list[Part]]:
    """Claim (d) on the fraction of each method's fine-tuning gain over zero-shot that survives linearization
    (means over tasks), among methods that gained at least :data:`MIN_GAIN_POINTS`."""
    table = s.table("linearization")
    zero = _zero_shot_by_task(s)
    if not zero or not set(table["task"]).issubset(zero):
        raise _Missing("no zero-shot test accuracy per task (single result) for the linearization tasks")
    table = table.assign(zero_shot_acc=table["task"].map(zero))
    means = table.groupby("method")[["finetuned_acc", "linearized_acc", "zero_shot_acc"]].mean()
    # methods evaluated linearized by construction lose nothing: they are not compared
    means = means[[METHODS.get(base_method_of(m) or m) is None
                   or METHODS[base_method_of(m) or m].eval_mode != "linearized" for m in means.index]]
    if "talos" not in means.index or len(means) < 2:
        raise _Missing("no talos row and another non-linear method in the linearization result")
    gain = 100 * (means["finetuned_acc"] - means["zero_shot_acc"])
    kept = (means["linearized_acc"] - means["zero_shot_acc"]) / (means["finetuned_acc"] - means["zero_shot_acc"])
    order = ["talos", *sorted(m for m in means.index if m != "talos")]
    compared = [m for m in order if gain[m] >= MIN_GAIN_POINTS]
    numbers = "share of the fine-tuning gain kept linearized (mean gain over zero-shot): " + ", ".join(
        f"{m} {100 * kept[m]:.0f} % ({gain[m]:+.1f} points)" for m in order)
    low = [m for m in order if m not in compared]
    if low:
        numbers += f"; gained under {MIN_GAIN_POINTS:g} points, not compared: {', '.join(low)}"
    evidence = [(m, TRAINING) for m in compared]
    if "talos" not in compared or len(compared) < 2:
        raise _Missing(f"TaLoS and at least one other method must gain {MIN_GAIN_POINTS:g} points over zero-shot "
                       f"to compare what linearization keeps ({numbers})")
    return numbers, [Part("rule", all(kept["talos"] >= kept[m] for m in compared[1:]), evidence)]


def _sparsity_ablation(s: _Suite) -> tuple[str, list[Part]]:
    table = s.table("sparsity_ablation", "talos").sort_values("sparsity")
    if len(table) < 2 or not np.isclose(table["sparsity"], 0.9).any():
        raise _Missing("the ablation has no sparsity 0.9 and another to compare")
    col = lambda c: " / ".join(_pct(v) for v in table[c])  # noqa: E731
    numbers = (f"sparsity {' / '.join(f'{v:g}' for v in table['sparsity'])}: addition abs {col('addition_abs')}, "
               f"norm {col('addition_norm')}; negation target {col('negation_target')}; single-task "
               f"{col('single_task_acc')}")
    peak = float(table.loc[table["addition_abs"].idxmax(), "sparsity"])
    single = table["single_task_acc"].to_numpy()
    # the ablation's runs are trained as TaLoS's fixed-sparsity row is: its training flags are theirs
    fixed = s.fixed_row("comparison", "talos") if s.has("comparison") else "talos"
    return numbers, [Part("rule", bool(np.isclose(peak, 0.9) and np.all(np.diff(single) <= 0)), [(fixed, TRAINING)])]


def _single_task_on_par(s: _Suite) -> tuple[str, list[Part]]:
    table = s.table("comparison").set_index("method")["single_task_acc"].dropna()
    peft = [m for m in PEFT_BASELINES if m in table.index]
    if "talos" not in table.index or not peft:
        raise _Missing("no talos and PEFT baseline (L-LoRA, LoTA) rows in the comparison")
    best = max(peft, key=lambda m: table[m])
    numbers = "single-task TaLoS " + _pct(table["talos"]) + " vs " + ", ".join(
        f"{m} {_pct(table[m])}" for m in peft)
    evidence = [(m, "single_task_acc") for m in ("talos", *peft)]
    return numbers, [Part("rule", bool(100 * (table[best] - table["talos"]) <= ON_PAR_POINTS), evidence)]


CLAIMS: tuple[Claim, ...] = (
    Claim("a", "TaLoS is best in task addition and negation (Tables 1–2)",
          "TaLoS's absolute addition accuracy is at least the best other row's (every other method, post-hoc and "
          "fixed-hyperparameter rows included; not TaLoS's own variants), and its negation target accuracy is at "
          "most the lowest other row's among the rows whose mean test control stays at ≥ 95 % of the zero-shot "
          "control accuracy (TaLoS's own control must hold too); normalized accuracy is shown but decides nothing, "
          "since it exceeds 100 % when a method's own single-task models are weak and rewards learning little"),
    Claim("b", "the least sensitive entries are shared across tasks (mask IoU, pruning experiment)",
          "every cross-task IoU of the TaLoS masks is above every one of the LoTA masks (the fixed-0.9 rows where "
          f"the store has them), and pruning a task's bottom entries costs the other tasks at most "
          f"{SHARING_TOLERANCE:g} more (mean accuracy ratio) than the task itself; the numbers say whether leaving "
          "any one task out (of three or more) turns the pruning comparison around, which does not change the "
          "verdict but says how much it rests on one task"),
    Claim("c", "TaLoS masks sit in the Q and K projections (mask statistics)",
          "the Q and K projections hold more than half of TaLoS's trainable entries; n/a without attention"),
    Claim("d", "TaLoS behaves linearly: its linearized model keeps the fine-tuned accuracy",
          "the share of TaLoS's fine-tuning gain over zero-shot that its linearized model keeps, (linearized − "
          "zero-shot) / (fine-tuned − zero-shot) on the means over tasks, is at least every other method's that is "
          f"not linearized by construction; only methods that gain ≥ {MIN_GAIN_POINTS:g} points over zero-shot are "
          "compared (n/a when TaLoS gains less), so a method cannot win by learning nothing"),
    Claim("e", "task arithmetic improves with sparsity up to ≈ 90 %, single-task accuracy falls slightly "
               "(sparsity ablation)",
          "absolute addition accuracy peaks at sparsity 0.9 among the ablation's sparsities, and single-task "
          "accuracy never rises with sparsity"),
    Claim("f", "TaLoS learns on par with the PEFT baselines (single-task)",
          f"TaLoS's single-task test accuracy is at most {ON_PAR_POINTS:g} points below the best of L-LoRA and "
          "LoTA present"),
)

_CHECKS: dict[str, Callable[[_Suite], tuple[str, list[Part]]]] = {
    "a": _best_in_addition_and_negation, "b": _shared_entries, "c": _where_masks_sit,
    "d": _keeps_accuracy_linearized, "e": _sparsity_ablation, "f": _single_task_on_par,
}


def check_claims(store: Store | str, suites: Sequence[str]) -> list[Finding]:
    """Every claim of :data:`CLAIMS` on every suite of ``suites`` (claim by claim, suites in the order given).

    A suite the store has no record of is an error; a claim whose results are missing is ``n/a``.
    """
    store = store if isinstance(store, Store) else Store(store)
    found = []
    for name in suites:
        if name not in store.results("suite"):
            raise TalosError(f"no results of suite {name!r} in {store.root}; pass --store with the store that "
                             f"holds them")
        meta = store.read_result("suite", name)
        found.append(_Suite(store, name, meta["model"], str(meta.get("scale", "?"))))
    audits = {s.name: audit_suite(store.root, s.name) for s in found}
    out = []
    for claim in CLAIMS:
        for s in found:
            try:
                numbers, parts = _CHECKS[claim.key](s)
            except _Missing as why:
                out.append(Finding(claim, s.name, s.scale, f"n/a: {why}", VERDICTS[3], VERDICTS[3]))
                continue
            out.append(_judge(claim, s, numbers, parts, audits[s.name]))
    return out


def _judge(claim: Claim, s: _Suite, numbers: str, parts: Sequence[Part], flags: Sequence[Flag]) -> Finding:
    """The verdict of one claim from its parts and the audit's flags (module docstring)."""
    rule_verdict = VERDICTS[0] if all(p.holds for p in parts) else VERDICTS[1]
    on_part = [evidence_flags(flags, p.evidence) for p in parts]
    found = tuple(f for f in flags if any(f in part_flags for part_flags in on_part))  # the audit's order
    settled = [p.name for p, part_flags in zip(parts, on_part)
               if not p.holds and not part_flags and p.separated is not False]
    verdict = VERDICTS[1] if settled else VERDICTS[2] if found else rule_verdict
    return Finding(claim, s.name, s.scale, numbers, verdict, rule_verdict, found, settled[0] if settled else "")


def evidence_flags(flags: Sequence[Flag], evidence: Evidence) -> tuple[Flag, ...]:
    """The audit flags that concern a claim's evidence: a flag on one of its (row, metric) pairs, a run-level flag
    (every metric) on one of its rows, or a suite-wide flag. Metric :data:`TRAINING` takes run-level flags only;
    ``masks`` only the flags on masks (a TaLoS mask is calibrated at θ0, before any training). A ``best-not-separated``
    flag concerns a claim only when a TaLoS row is the best or the runner-up it names: every claim compares TaLoS with
    the others, and which of two other rows leads does not change that comparison (claim (a) checks TaLoS against
    the best other row's interval itself, :attr:`Part.separated`)."""
    out = []
    for f in flags:
        if f.check == "best-not-separated" and not any(
                _is_talos(str(r)) for r in (f.row, f.numbers.get("runner_up")) if r):
            continue
        for row, metric in evidence:
            if f.row is not None and f.row != row:
                continue
            run_level = ALL in f.metrics and metric != "masks"
            if run_level or (metric != TRAINING and metric in f.metrics):
                out.append(f)
                break
    return tuple(out)


def _flag_summary(flags: Sequence[Flag]) -> str:
    """``check (rows), ...`` for a verdict cell, checks in the audit's order."""
    by_check: dict[str, list[str]] = {}
    for f in flags:
        rows = by_check.setdefault(f.check, [])
        if (f.row or "suite") not in rows:
            rows.append(f.row or "suite")
    return "; ".join(f"{check}: {', '.join(rows)}" for check, rows in by_check.items())


def claims_markdown(store: Store | str, suites: Sequence[str]) -> str:
    """The claims table (claim, suite and scale, numbers, verdict) and each claim's rule below it."""
    findings = check_claims(store, suites)
    lines = ["| claim (paper) | suite (scale) | numbers (test split; accuracies in %) | verdict |", "|---|---|---|---|"]
    previous = None
    for f in findings:
        claim = f"({f.claim.key}) {f.claim.text}" if f.claim is not previous else ""
        verdict = f"**{f.verdict}**" if f.verdict != "n/a" else f.verdict
        if f.settled_by and f.flags:
            verdict += (f" (settled by the {f.settled_by} part: it fails on unflagged numbers whose 95 % intervals are "
                        f"apart; flagged elsewhere: {_flag_summary(f.flags)})")
        elif f.flags:
            verdict += f" (rule alone: {f.rule_verdict}; flagged: {_flag_summary(f.flags)})"
        lines.append(f"| {claim} | {f.suite} ({f.scale}) | {f.numbers} | {verdict} |")
        previous = f.claim
    lines += ["", "Verdict rules (a claim is *reproduced* on a suite when its rule holds, *inconclusive* when the "
                  "audit (`talos audit SUITE`) flags a number the rule rests on — the rule's own verdict and the flags "
                  "are named beside it — unless one part of the rule (claim (a): addition, negation) fails on "
                  "unflagged numbers whose 95 % intervals are apart, which settles *not reproduced*; *n/a* when the "
                  "store lacks the results it needs or it does not apply):", ""]
    lines += [f"- ({c.key}) {c.rule}." for c in CLAIMS]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# the α-grid rule: claim (a) again with the rows of the ``alpha-rule`` protocol: does it hold under either α grid?
# --------------------------------------------------------------------------------------------
def alpha_rule_markdown(store: Store | str, suite: str) -> str:
    """The ``alpha_rule`` results of ``suite`` (one table row per result row and rule) and claim (a) judged under
    each rule: under ``unit`` every row with an ``alpha_rule`` result takes that rule's addition and negation
    numbers; the other rows (dense methods, post-hoc merges of dense vectors) search ``0…1`` under both rules.
    ``n/a`` when the store has no such result."""
    from talos_core.evaluation.runs import ALPHA_RULES
    from talos_core.schema import method_label

    store = store if isinstance(store, Store) else Store(store)
    if suite not in store.results("suite"):
        raise TalosError(f"no results of suite {suite!r} in {store.root}; pass --store with the store that holds them")
    meta = store.read_result("suite", suite)
    prefix = result_name(suite, meta["model"]) + "__"
    names = sorted(n for n in store.results("alpha_rule") if n.startswith(prefix))
    if not names:
        return (f"n/a: no alpha_rule results of suite {suite!r} in this store "
                f"(`talos evaluate alpha-rule --suite {suite} ...`)")
    lines = ["| row | α grid | searched up to | addition α | add. abs | add. norm | neg. target ↓ | neg. control |",
             "|---|---|---|---|---|---|---|---|"]
    by_rule: dict[str, dict[str, dict]] = {rule: {} for rule in ALPHA_RULES}
    for name in names:
        row_id = name[len(prefix):]
        for r in store.read_table("alpha_rule", name).to_dict(orient="records"):
            by_rule.setdefault(str(r["rule"]), {})[row_id] = r
            lines.append(f"| {method_label(row_id)} | {r['rule']} | {r['alpha_max']:g} | {r['addition_alpha']:g} | "
                         f"{_pct(r['addition_abs'])} | {_pct(r['addition_norm'])} | {_pct(r['negation_target'])} | "
                         f"{_pct(r['negation_control'])} |")
    lines.append("")
    s = _Suite(store, suite, meta["model"], str(meta.get("scale", "?")))
    try:
        base = s.table("comparison").set_index("method")
    except _Missing as why:
        return "\n".join([*lines, f"Claim (a): n/a ({why})."])
    for rule in ALPHA_RULES:
        table = base.copy()
        for row_id, r in by_rule.get(rule, {}).items():
            if row_id in table.index:
                for col in ("addition_abs", "addition_norm", "negation_target", "negation_control"):
                    table.loc[row_id, col] = r[col]
        try:
            numbers, parts = _best_in(table, _control_holds(s, table))
            verdict = VERDICTS[0] if all(p.holds for p in parts) else VERDICTS[1]
        except _Missing as why:
            numbers, verdict = f"n/a: {why}", VERDICTS[3]
        lines.append(f"- Claim (a) with the `{rule}` grid: {numbers} → **{verdict}**.")
    return "\n".join(lines)

