"""The paper's claims checked on a store's suite results: the numbers behind each claim and a verdict by a rule.

Pure: reads a suite's results (SCHEMA.md kinds ``suite``, ``comparison``, ``mask_iou``, ``sharing``, ``masks``,
``linearization``, ``sparsity_ablation``) and computes nothing new. Each claim of :data:`CLAIMS` has a check that
turns those results into one line of numbers and a verdict, ``reproduced`` or ``not reproduced`` by the claim's
stated ``rule``; a claim whose results the store lacks (or that does not apply to the suite's model) is ``n/a``
with the reason. :func:`claims_markdown` renders the table ``docs/results.md`` carries (``talos docs``).

>>> CLAIMS[0].key, VERDICTS
('a', ('reproduced', 'not reproduced', 'n/a'))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from talos_core.errors import TalosError
from talos_core.schema import METHODS, base_method_of, result_name
from talos_core.store import Store

VERDICTS = ("reproduced", "not reproduced", "n/a")

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
        return variant if result_name(self.name, self.model, variant) in self.store.results(kind) else method


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
def _best_in_addition_and_negation(s: _Suite) -> tuple[str, bool]:
    return _best_in(s.table("comparison").set_index("method"))


def _best_in(table: pd.DataFrame) -> tuple[str, bool]:
    """Claim (a) on a comparison table indexed by method."""
    if "talos" not in table.index:
        raise _Missing("no talos row in the comparison")
    own, parts, holds = table.loc["talos"], [], []
    others = table[[not _is_talos(m) for m in table.index]]
    for column, label, higher in (("addition_abs", "addition abs", True), ("addition_norm", "norm", True),
                                  ("negation_target", "negation target", False)):
        col = others[column].dropna()
        if col.empty or pd.isna(own[column]):
            raise _Missing(f"no {column} to compare")
        best = col.idxmax() if higher else col.idxmin()
        holds.append(own[column] >= col[best] if higher else own[column] <= col[best])
        parts.append(f"{label} {_pct(own[column])} vs {_pct(col[best])} ({best})")
    return "TaLoS " + "; ".join(parts), all(holds)


def _shared_entries(s: _Suite) -> tuple[str, bool]:
    talos, lota = s.fixed_row("mask_iou", "talos"), s.fixed_row("mask_iou", "lota")
    ti, li = _off_diagonal(s.result("mask_iou", talos)["matrix"]), _off_diagonal(s.result("mask_iou", lota)["matrix"])
    sharing = s.result("sharing", "prune")
    prune = np.asarray(sharing["matrix"], dtype=float)
    same, other = float(np.mean(np.diag(prune))), float(np.mean(_off_diagonal(prune)))
    bottom = f"bottom {100 * sharing['fraction']:g} %" if "fraction" in sharing else "bottom entries"
    numbers = (f"mask IoU across tasks {talos} {_span(ti)} vs {lota} {_span(li)}; pruning a task's {bottom} "
               f"keeps {same:.2f} of its accuracy on the same task, {other:.2f} on the others (means; ranges "
               f"{_span(np.diag(prune).tolist(), '.2f')} and {_span(_off_diagonal(prune), '.2f')})")
    return numbers, min(ti) > max(li) and other >= same - SHARING_TOLERANCE


_ATTENTION = {"q": "Q", "k": "K", "qkv": "packed QKV", "v": "V", "attn_out": "attention output"}


def _where_masks_sit(s: _Suite) -> tuple[str, bool]:
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
    return numbers, own["q"] + own["k"] + own["qkv"] > 0.5


def _keeps_accuracy_linearized(s: _Suite) -> tuple[str, bool]:
    table = s.table("linearization")
    means = table.groupby("method")[["finetuned_acc", "linearized_acc"]].mean()
    # methods evaluated linearized by construction lose nothing: they are not compared
    means = means[[METHODS.get(base_method_of(m) or m) is None
                   or METHODS[base_method_of(m) or m].eval_mode != "linearized" for m in means.index]]
    if "talos" not in means.index or len(means) < 2:
        raise _Missing("no talos row and another non-linear method in the linearization result")
    drop = means["finetuned_acc"] - means["linearized_acc"]
    order = ["talos", *sorted(m for m in means.index if m != "talos")]
    numbers = "mean fine-tuned → linearized: " + ", ".join(
        f"{m} {_pct(means.at[m, 'finetuned_acc'])} → {_pct(means.at[m, 'linearized_acc'])}" for m in order)
    return numbers, all(drop["talos"] < drop[m] for m in order[1:])


def _sparsity_ablation(s: _Suite) -> tuple[str, bool]:
    table = s.table("sparsity_ablation", "talos").sort_values("sparsity")
    if len(table) < 2 or not np.isclose(table["sparsity"], 0.9).any():
        raise _Missing("the ablation has no sparsity 0.9 and another to compare")
    col = lambda c: " / ".join(_pct(v) for v in table[c])  # noqa: E731
    numbers = (f"sparsity {' / '.join(f'{v:g}' for v in table['sparsity'])}: addition abs {col('addition_abs')}, "
               f"norm {col('addition_norm')}; negation target {col('negation_target')}; single-task "
               f"{col('single_task_acc')}")
    peak = float(table.loc[table["addition_abs"].idxmax(), "sparsity"])
    single = table["single_task_acc"].to_numpy()
    return numbers, bool(np.isclose(peak, 0.9) and np.all(np.diff(single) <= 0))


def _single_task_on_par(s: _Suite) -> tuple[str, bool]:
    table = s.table("comparison").set_index("method")["single_task_acc"].dropna()
    peft = [m for m in PEFT_BASELINES if m in table.index]
    if "talos" not in table.index or not peft:
        raise _Missing("no talos and PEFT baseline (L-LoRA, LoTA) rows in the comparison")
    best = max(peft, key=lambda m: table[m])
    numbers = "single-task TaLoS " + _pct(table["talos"]) + " vs " + ", ".join(
        f"{m} {_pct(table[m])}" for m in peft)
    return numbers, bool(100 * (table[best] - table["talos"]) <= ON_PAR_POINTS)


CLAIMS: tuple[Claim, ...] = (
    Claim("a", "TaLoS is best in task addition and negation (Tables 1–2)",
          "TaLoS's row is at least the best other row (every other method, post-hoc and fixed-hyperparameter "
          "rows included; not TaLoS's own variants) in absolute and normalized addition, and at most the lowest "
          "negation target accuracy"),
    Claim("b", "the least sensitive entries are shared across tasks (mask IoU, pruning experiment)",
          "every cross-task IoU of the TaLoS masks is above every one of the LoTA masks (the fixed-0.9 rows where "
          f"the store has them), and pruning a task's bottom entries costs the other tasks at most "
          f"{SHARING_TOLERANCE:g} more (mean accuracy ratio) than the task itself"),
    Claim("c", "TaLoS masks sit in the Q and K projections (mask statistics)",
          "the Q and K projections hold more than half of TaLoS's trainable entries; n/a without attention"),
    Claim("d", "TaLoS behaves linearly: its linearized model keeps the fine-tuned accuracy",
          "TaLoS's mean loss from fine-tuned to linearized is smaller than every other method's that is not "
          "linearized by construction"),
    Claim("e", "task arithmetic improves with sparsity up to ≈ 90 %, single-task accuracy falls slightly "
               "(sparsity ablation)",
          "absolute addition accuracy peaks at sparsity 0.9 among the ablation's sparsities, and single-task "
          "accuracy never rises with sparsity"),
    Claim("f", "TaLoS learns on par with the PEFT baselines (single-task)",
          f"TaLoS's single-task test accuracy is at most {ON_PAR_POINTS:g} points below the best of L-LoRA and "
          "LoTA present"),
)

_CHECKS: dict[str, Callable[[_Suite], tuple[str, bool]]] = {
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
    out = []
    for claim in CLAIMS:
        for s in found:
            try:
                numbers, holds = _CHECKS[claim.key](s)
                verdict = VERDICTS[0] if holds else VERDICTS[1]
            except _Missing as why:
                numbers, verdict = f"n/a: {why}", VERDICTS[2]
            out.append(Finding(claim, s.name, s.scale, numbers, verdict))
    return out


def claims_markdown(store: Store | str, suites: Sequence[str]) -> str:
    """The claims table (claim, suite and scale, numbers, verdict) and each claim's rule below it."""
    findings = check_claims(store, suites)
    lines = ["| claim (paper) | suite (scale) | numbers (test split; accuracies in %) | verdict |", "|---|---|---|---|"]
    previous = None
    for f in findings:
        claim = f"({f.claim.key}) {f.claim.text}" if f.claim is not previous else ""
        verdict = f"**{f.verdict}**" if f.verdict != "n/a" else f.verdict
        lines.append(f"| {claim} | {f.suite} ({f.scale}) | {f.numbers} | {verdict} |")
        previous = f.claim
    lines += ["", "Verdict rules (a claim is *reproduced* on a suite when its rule holds, *n/a* when the store "
                  "lacks the results it needs or it does not apply):", ""]
    lines += [f"- ({c.key}) {c.rule}." for c in CLAIMS]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# the α-grid rule: claim (a) again with the rows of the ``alpha-rule`` protocol (issue 29)
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
            numbers, holds = _best_in(table)
            verdict = VERDICTS[0] if holds else VERDICTS[1]
        except _Missing as why:
            numbers, verdict = f"n/a: {why}", VERDICTS[2]
        lines.append(f"- Claim (a) with the `{rule}` grid: {numbers} → **{verdict}**.")
    return "\n".join(lines)

