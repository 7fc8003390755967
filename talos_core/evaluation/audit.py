"""The audit: named checks that read a suite's stored results and flag the numbers a sceptical reviewer would not
trust as they stand.

Pure and torch-free: it reads result files (SCHEMA.md kinds) and run manifests of any store — the shipped one, a
user's own, a test store — and computes nothing new. Each check of :data:`CHECKS` has an id, a title and one
sentence a student can read; :func:`audit_suite` returns its :class:`Flag` s, each naming the comparison row it
concerns, the metrics (comparison columns) whose number it casts doubt on, the result or run it comes from, one
sentence with the numbers behind it and those numbers. ``talos audit`` prints them, ``talos report`` and the docs
tables carry them as footnotes, the dashboard as badges, and :mod:`talos_core.evaluation.claims` reads a claim whose
evidence carries a flag as *inconclusive*.

>>> [c.id for c in CHECKS][:3]
['alpha-at-edge', 'alpha-unresolved', 'control-margin']
>>> infer_count([0.5, 0.25, 0.75], 10)
8
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from talos_core import schema
from talos_core.errors import TalosError
from talos_core.hardware import Machine
from talos_core.schema import base_method_of, result_name

#: a selection decided by fewer validation examples than this is flagged
MIN_EXAMPLES = 3
#: one example deciding the negation α matters when the two candidate α differ by this much on test (points)
MATERIAL_POINTS = 2.0
#: a validation curve that gains more than this over its last quarter has not flattened (the learning-curve
#: rule's tolerance)
CONVERGENCE_TOLERANCE = 0.01
#: negation: an edited displacement ‖α τ‖ more than this many times the median of the other rows' is an outlier
DISPLACEMENT_RATIO = 5.0
#: a fine-tuning run whose test accuracy gains less than this over zero-shot (points) has learned little
MIN_GAIN_POINTS = 5.0
#: a mask whose training moved less than this fraction of its entries has entries that never learned
MIN_MOVED = 0.99
#: step timing: a run whose step-time standard deviation exceeds this many times its mean had steps several times
#: its typical one (a pause, a co-scheduled job)
TIMING_SPREAD = 1.0
#: step timing: a run slower than this many times the fastest identical run in the store (same model, task, method
#: and sparsity or rank: the same work per step) was measured on a shared machine
TIMING_RATIO = 1.5

#: every metric of a row (run-level flags: a number computed from an unsound run is unsound whatever it is)
ALL = "*"
GALLERY = "preview/examples"  # the dashboard's first-order panel and example galleries: no number of the tables
PROVENANCE = "provenance"  # which code computed the results: a fact about every number, deciding no claim by itself
ADDITION = ("addition_abs", "addition_norm")
NEGATION = ("negation_target", "negation_control")


@dataclass(frozen=True)
class Check:
    """One named check: ``id`` (kebab-case, stable), ``title`` (a few words) and ``explanation`` (one sentence a
    student who knows what fine-tuning is can read)."""

    id: str
    title: str
    explanation: str


CHECKS: tuple[Check, ...] = (
    Check("alpha-at-edge", "α at the edge of its grid",
          "The chosen scaling α is the first or last value that was tried, so a better α may lie outside the grid "
          "and the number may be an artifact of where the grid stops."),
    Check("alpha-unresolved", "α grid too coarse",
          "The chosen α is the first non-zero value of its grid, so nothing between 0 and it was tried and the "
          "grid cannot tell where the optimum lies."),
    Check("control-margin", "α decided by one example",
          "A single validation example of the control task decided which α negation used (the 95 % constraint "
          "held, or the next α failed, by one example), and the two choices differ by at least 2 points on test."),
    Check("selection-margin", "hyperparameter chosen by a few examples",
          "The per-task hyperparameter (sparsity or rank) won its validation comparison by fewer than three "
          "examples, so the choice is within noise."),
    Check("selection-at-edge", "hyperparameter at the edge of its candidates",
          "The selected sparsity or rank, or a post-hoc merge's hyperparameter (TIES's kept fraction, LiNeS's β), "
          "is the smallest or largest candidate, so the best value may lie outside the candidates searched."),
    Check("control-broken-on-test", "control broken on test",
          "Negation kept the control task above 95 % of its zero-shot accuracy on validation but not on test, so "
          "the low target accuracy was bought by damaging the model (or the zero-shot yardstick differs between the "
          "splits: both are shown)."),
    Check("norm-above-100", "normalized accuracy above 100 %",
          "The merged model beats the method's own single-task models, which means those single-task models are "
          "weak, not that the merge is strong."),
    Check("norm-unedited", "normalized accuracy reached without editing",
          "The unedited pre-trained model already scores a normalized accuracy at or above the median of the other "
          "methods' merges, because normalized accuracy divides by this method's own single-task accuracy: a method "
          "that learns little scores high by doing nothing."),
    Check("displacement-outlier", "edit far larger than the others'",
          "The edited weights moved ‖α τ‖ many times further from the pre-trained model than every other method's "
          "edit on the same task, so the result reflects a much larger edit, not a better task vector."),
    Check("not-converged", "training not converged",
          "The run's own validation curve was still rising at its end, so its task vector is under-trained."),
    Check("convergence-unknown", "convergence not recorded",
          "The run recorded no validation curve of its own, so nobody can tell whether it finished learning."),
    Check("budget-other-schedule", "budget read off another schedule",
          "The run's number of steps was read off a learning curve trained on a longer learning-rate schedule, "
          "and a shorter schedule does not reach the same accuracy at the same step."),
    Check("lr-disagrees", "learning-rate check disagrees",
          "The suite's own learning-rate check found another learning rate better on validation than the one "
          "the method was trained with."),
    Check("lr-margin", "learning rate chosen by a few examples",
          "The suite's learning-rate check preferred the rate the method trained at by fewer than three validation "
          "examples (of its smallest check task), so the other rate did as well within noise and the method's "
          "numbers could as well have come from it."),
    Check("little-gain", "learned little",
          "Fine-tuning gained less than 5 points of test accuracy over the pre-trained model on a task, so "
          "numbers relative to that gain (normalized accuracy, what linearization keeps) say little."),
    Check("best-not-separated", "best within noise",
          "The best row's 95 % interval overlaps the runner-up's, so the data do not say which is better."),
    Check("timing-disturbed", "step time disturbed",
          "A run behind this time per step had steps far slower than its own typical step, or ran much slower than an "
          "identical run in the store, so the machine was shared or paused while it was timed: the time per step and "
          "any speed-up read from it are not a clean measurement."),
    Check("timing-other-machine", "time per step from another machine",
          "The runs behind this time per step were timed on another machine than the reference method's (a GPU "
          "against a CPU, another CPU model, another thread count), or on several, so a speed-up read from it "
          "compares machines, not methods (across a GPU and a CPU, peak memory too)."),
    Check("result-unreadable", "result unreadable",
          "A result file the audit reads could not be read (damaged, edited, or contradicting itself, such as a number "
          "outside its own interval), so the numbers drawn from it cannot be checked; a first-order preview or an "
          "example gallery whose arrays file is missing or damaged leaves that row's panel on the dashboard empty."),
    Check("mask-unmoved", "mask entries never trained",
          "More than 1 % of the mask's trainable entries did not change during training (no useful gradient on "
          "the data the run saw), so the mask is effectively smaller than stated."),
    Check("suite-incomplete", "suite not finished",
          "The suite record says the run stopped before every step finished, so some numbers may be missing or "
          "stale."),
    Check("code-mixed", "steps ran under different code",
          "The suite's steps were computed by more than one version of the code (each session records the commit it "
          "ran), or from a checkout with uncommitted changes, so a difference between rows may come from the code, "
          "not from the methods; the sessions say which steps each version ran."),
)

_BY_ID = {c.id: c for c in CHECKS}


def check_info(check_id: str) -> Check:
    """The :class:`Check` of an id (one sentence naming the known ids otherwise)."""
    try:
        return _BY_ID[check_id]
    except KeyError:
        raise TalosError(f"unknown audit check {check_id!r}; known: {', '.join(_BY_ID)}") from None


@dataclass(frozen=True)
class Flag:
    """One raised check on one suite.

    ``row``: the comparison row (method or variant id, e.g. ``talos-k0.9``; an ablation's ``<method> ablation``)
    or ``None`` for the whole suite. ``metrics``: the comparison columns whose numbers it concerns (:data:`ALL`:
    every number of the row; ``masks``: the row's mask statistics). ``source``: the result (``kind/name``) or run
    it was read from. ``message``: one sentence with the numbers. ``numbers``: those numbers.
    """

    check: str
    suite: str
    row: str | None
    metrics: tuple[str, ...]
    source: str
    message: str
    numbers: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def title(self) -> str:
        return check_info(self.check).title

    @property
    def explanation(self) -> str:
        return check_info(self.check).explanation

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "title": self.title, "suite": self.suite, "row": self.row,
                "metrics": list(self.metrics), "source": self.source, "message": self.message,
                "numbers": dict(self.numbers), "explanation": self.explanation}


# --------------------------------------------------------------------------------------------
# small pure helpers
# --------------------------------------------------------------------------------------------
def infer_count(values: Iterable[float], n_max: int) -> int | None:
    """The example count behind accuracies stored as fractions (rounded to ~10 digits): the largest ``n ≤ n_max``
    for which every value of ``values`` is a whole number of examples out of ``n``; ``None`` if there is none.

    Every multiple of the true count fits too, so the largest one under the cap is taken: it is the true count
    whenever the split holds more than half the cap (``max_val``), as evaluation splits capped at ``max_val`` do.
    """
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not vals:
        return None
    for n in range(max(1, int(n_max)), 0, -1):
        if all(abs(v * n - round(v * n)) < 1e-4 * max(1.0, n / 1000) for v in vals):
            return n
    return None


def needed(threshold: float, n: int) -> int:
    """The fewest correct examples out of ``n`` that meet an accuracy ``threshold`` (``≥``)."""
    return math.ceil(threshold * n - 1e-9)


def still_rising(curve: Sequence[tuple[float, float]], tolerance: float = CONVERGENCE_TOLERANCE,
                 patience: int = 0) -> float | None:
    """How much a validation curve ``[(step, acc), ...]`` gained in its last quarter of steps over its best before
    it, when that exceeds ``tolerance`` (the curve has not flattened); ``None`` when it has (or is too short).

    A run trained with early stopping (``patience`` > 0 evaluations) whose last ``patience`` evaluations did not beat
    its best before them has flattened by its own stopping rule, whatever its length: the last-quarter window would
    otherwise judge the same curve differently by where the run happened to stop (its best falls inside the last
    quarter when the patience window is shorter than a quarter of the run).

    >>> still_rising([(100, .5), (200, .6), (300, .7), (400, .8)])
    0.1
    >>> still_rising([(100, .5), (200, .8), (300, .8), (400, .805)]) is None
    True
    >>> still_rising([(100, .5), (200, .5), (300, .52), (400, .6), (450, .58), (500, .59)])
    0.08
    >>> still_rising([(100, .5), (200, .5), (300, .52), (400, .6), (450, .58), (500, .59)], patience=2) is None
    True
    """
    pts = sorted((float(s), float(a)) for s, a in curve)
    if len(pts) < 3:
        return None
    if 0 < patience < len(pts) and max(a for _, a in pts[-patience:]) <= max(a for _, a in pts[:-patience]):
        return None
    end = pts[-1][0]
    start = pts[0][0]
    cut = end - (end - start) / 4
    before = [a for s, a in pts if s < cut] or [pts[0][1]]
    after = [a for s, a in pts if s >= cut]
    gain = max(after) - max(before)
    return round(gain, 6) if gain > tolerance else None


def _fmt_alpha(a: float) -> str:
    return f"{a:g}"


def _pct(v: float) -> str:
    return f"{100 * float(v):.1f}"


def _grid_position(alpha: float, grid: Sequence[float]) -> str | None:
    """``'last'``, ``'first'`` (α = the grid's smallest value) or ``'first non-zero'`` for a selected α, else
    None. Grids are sets of tried values (sorted here)."""
    g = sorted({float(x) for x in grid})
    if len(g) < 2:
        return None
    if math.isclose(alpha, g[-1], rel_tol=1e-9, abs_tol=1e-12):
        return "last"
    if math.isclose(alpha, g[0], rel_tol=1e-9, abs_tol=1e-12):
        return "first"
    positive = [x for x in g if x > 0]
    if g[0] == 0 and positive and math.isclose(alpha, positive[0], rel_tol=1e-9):
        return "first non-zero"
    return None


def _records(payload: Mapping) -> list[dict]:
    return list(payload.get("records") or [])


# --------------------------------------------------------------------------------------------
# the store, read once
# --------------------------------------------------------------------------------------------
class SuiteReader:
    """The results and run manifests of one suite of a store, read lazily and cached (torch-free); the audit's
    checks read through it, and so does the report's table of choices
    (:func:`talos_core.suites.report.choices_table`)."""

    def __init__(self, root: Path, suite: str) -> None:
        self.root, self.suite = Path(root), suite
        try:
            self.meta = schema.read_result(self.root, "suite", suite)
        except schema.MissingResult:
            raise TalosError(f"no results of suite {suite!r} in {self.root}; pass --store with the store that "
                             f"holds them") from None
        self.model = str(self.meta.get("model", ""))
        self._results: dict[tuple[str, str], dict | None] = {}
        self._manifests: dict[str, dict | None] = {}
        self.problems: dict[str, str] = {}  # "kind/name" -> the reader's sentence, for ``result-unreadable``

    def name(self, *parts: str) -> str:
        return result_name(self.suite, self.model, *parts)

    def result(self, kind: str, *parts: str) -> dict | None:
        key = (kind, self.name(*parts))
        if key not in self._results:
            try:
                self._results[key] = schema.read_result(self.root, kind, key[1])
            except schema.MissingResult:
                self._results[key] = None
            except schema.CorruptResult as exc:  # judged as far as it can be read; the flag says what could not
                self._results[key] = None
                self.problems[f"{kind}/{key[1]}"] = str(exc)
        return self._results[key]

    def run_ids(self) -> list[str]:
        """Every run folder of the store (sorted; staging ``.tmp-*`` folders are not runs, as in ``Store.runs``)."""
        runs = self.root / "runs"
        return sorted(p.name for p in runs.iterdir() if p.is_dir() and not p.name.startswith(".")) if runs.is_dir() \
            else []

    def manifest(self, run_id: str) -> dict | None:
        if run_id not in self._manifests:
            path = self.root / "runs" / str(run_id) / "manifest.json"
            try:
                from talos_core.atomic import read_json

                data = read_json(path) if path.is_file() else None
            except TalosError:
                data = None
            self._manifests[run_id] = data if isinstance(data, dict) else None
        return self._manifests[run_id]

    def val_size(self, run_id: str) -> int:
        """How many validation examples a run of the store saw (its manifest's ``data_sizes.val``); 0 when unknown."""
        return int(((self.manifest(run_id) or {}).get("data_sizes") or {}).get("val") or 0)

    def rows(self) -> list[str]:
        comp = self.result("comparison")
        if comp is not None:
            return [str(r["method"]) for r in _records(comp)]
        return [*map(str, self.meta.get("methods") or []), *map(str, self.meta.get("posthoc") or [])]

    def posthoc(self) -> set[str]:
        return {str(m) for m in self.meta.get("posthoc") or []}

    def trained_by(self, row: str) -> str | None:
        """The fine-tuning method whose runs a row's numbers come from (post-hoc rows: their base vectors')."""
        if row in self.posthoc():
            add = self.result("addition", row) or {}
            return str(add.get("base_method") or "nonlinear")
        return base_method_of(row)

    def row_runs(self, row: str) -> dict[str, str]:
        """``{task: run_id}`` of the runs behind a row (its addition result's, else its negation's)."""
        for kind in ("addition", "negation"):
            payload = self.result(kind, row)
            if payload and isinstance(payload.get("runs"), dict):
                return {str(t): str(r) for t, r in payload["runs"].items()}
        single = self.result("single")
        if single and isinstance(single.get("runs"), dict) and isinstance(single["runs"].get(row), dict):
            return {str(t): str(r) for t, r in single["runs"][row].items()}
        return {}


# --------------------------------------------------------------------------------------------
# the checks, each a generator of flags
# --------------------------------------------------------------------------------------------
def _addition_flags(r: SuiteReader, row: str) -> Iterable[Flag]:
    add = r.result("addition", row)
    if not add:
        return
    source = f"addition/{r.name(row)}"
    alpha, grid = float(add.get("selected_alpha", math.nan)), add.get("alpha_grid") or []
    where = _grid_position(alpha, grid) if math.isfinite(alpha) else None
    if where in ("first", "last"):
        yield Flag("alpha-at-edge", r.suite, row, ADDITION, source,
                   f"addition chose α = {_fmt_alpha(alpha)}, the {where} point of its grid "
                   f"{_fmt_alpha(min(grid))}…{_fmt_alpha(max(grid))}",
                   {"alpha": alpha, "grid_min": min(grid), "grid_max": max(grid), "position": where})
    elif where == "first non-zero":
        yield Flag("alpha-unresolved", r.suite, row, ADDITION, source,
                   f"addition chose α = {_fmt_alpha(alpha)}, the first non-zero point of its grid (nothing between "
                   f"0 and {_fmt_alpha(alpha)} was tried)", {"alpha": alpha})
    summary = add.get("summary") or {}
    norm = summary.get("norm_acc")
    if norm is not None and float(norm) > 1.0:
        yield Flag("norm-above-100", r.suite, row, ("addition_norm",), source,
                   f"normalized accuracy {_pct(norm)} % (above 100 %)", {"norm_acc": float(norm)})


def _unedited_norm(add: Mapping) -> float | None:
    """Mean test normalized accuracy of the unedited model (α = 0) of an addition curve, where it was evaluated."""
    vals = [float(x["normalized_accuracy"]) for x in _records(add)
            if x.get("split") == "test" and float(x.get("alpha", 1)) == 0.0
            and x.get("normalized_accuracy") is not None]
    return sum(vals) / len(vals) if vals else None


def _norm_unedited_flags(r: SuiteReader, rows: Sequence[str]) -> Iterable[Flag]:
    selected = {}
    for row in rows:
        add = r.result("addition", row)
        if add and (add.get("summary") or {}).get("norm_acc") is not None:
            selected[row] = float(add["summary"]["norm_acc"])
    for row in rows:
        add = r.result("addition", row)
        unedited = _unedited_norm(add) if add else None
        others = sorted(v for m, v in selected.items() if m != row)
        if unedited is None or len(others) < 2:
            continue
        median = others[len(others) // 2] if len(others) % 2 else (others[len(others) // 2 - 1]
                                                                    + others[len(others) // 2]) / 2
        if unedited >= median:
            yield Flag("norm-unedited", r.suite, row, ("addition_norm",), f"addition/{r.name(row)}",
                       f"the unedited model (α = 0) scores {_pct(unedited)} % normalized, at or above the median "
                       f"{_pct(median)} % of the other rows' merges", {"unedited_norm": unedited, "median": median})


def _negation_flags(r: SuiteReader, row: str) -> Iterable[Flag]:
    neg = r.result("negation", row)
    if not neg:
        return
    source = f"negation/{r.name(row)}"
    keep = float(neg.get("threshold", 0.95))
    zs = neg.get("control_zero_shot_acc") or {}
    recs = _records(neg)
    grids = neg.get("alpha_grids") or {}
    n_control = _control_val_n(r, neg)
    for target, alpha in (neg.get("selected") or {}).items():
        alpha = float(alpha)
        grid = grids.get(target) or neg.get("alpha_grid") or sorted({float(x["alpha"]) for x in recs
                                                                     if x.get("target") == target})
        where = _grid_position(alpha, grid)
        if where == "last":
            yield Flag("alpha-at-edge", r.suite, row, NEGATION, source,
                       f"negating {target} chose α = {_fmt_alpha(alpha)}, the last point of its grid",
                       {"target": target, "alpha": alpha, "grid_max": max(grid)})
        elif where == "first non-zero":
            yield Flag("alpha-unresolved", r.suite, row, NEGATION, source,
                       f"negating {target} chose α = {_fmt_alpha(alpha)}, the first non-zero point of its grid",
                       {"target": target, "alpha": alpha})
        at = {x.get("split"): x for x in recs if x.get("target") == target and float(x["alpha"]) == alpha}
        curve = sorted((float(x["alpha"]), x) for x in recs if x.get("target") == target and x.get("split") == "val")
        if "val" in at and zs.get("val") is not None and n_control and alpha > 0:
            flag = _margin_flag(r, row, source, target, alpha, at, curve, keep * float(zs["val"]), n_control)
            if flag is not None:
                yield flag
        if "test" in at and zs.get("test") is not None:
            ctrl, limit = float(at["test"]["control_acc"]), keep * float(zs["test"])
            if ctrl < limit:
                # validation beside it: whether the edit did worse on test, or the yardstick (zero-shot) moved
                val_ctrl, val_zs = (float(at["val"]["control_acc"]) if "val" in at else None,
                                    float(zs["val"]) if zs.get("val") is not None else None)
                on_val = (f"; on validation {_pct(val_ctrl)} % of zero-shot {_pct(val_zs)} % "
                          f"({_pct(val_ctrl / val_zs)} %)" if val_ctrl is not None and val_zs else "")
                yield Flag("control-broken-on-test", r.suite, row, NEGATION, source,
                           f"negating {target} at α = {_fmt_alpha(alpha)}: test control {_pct(ctrl)} % is "
                           f"{_pct(ctrl / float(zs['test']))} % of zero-shot {_pct(zs['test'])} % (needs ≥ "
                           f"{100 * keep:g} %){on_val}",
                           {"target": target, "alpha": alpha, "control_test": ctrl, "zero_shot_test": float(zs["test"]),
                            "ratio": ctrl / float(zs["test"]) if float(zs["test"]) else math.nan,
                            "control_val": val_ctrl, "zero_shot_val": val_zs})


def _control_val_n(r: SuiteReader, neg: Mapping) -> int | None:
    """The control task's validation example count behind a negation result: recorded (``control_val_n``), else
    inferred from its stored fractions (:func:`infer_count`, stores written before it was recorded)."""
    recorded = neg.get("control_val_n")
    if isinstance(recorded, int) and not isinstance(recorded, bool) and recorded > 0:
        return recorded
    n_max = int((r.meta.get("scale_settings") or {}).get("max_val") or 5000)
    val_controls = [x["control_acc"] for x in _records(neg) if x.get("split") == "val"]
    return infer_count(val_controls, n_max) if val_controls else None


def _margin_flag(r: SuiteReader, row: str, source: str, target: str, alpha: float, at: Mapping[str, Mapping],
                 curve: Sequence[tuple[float, Mapping]], threshold: float, n: int) -> Flag | None:
    """``control-margin`` when one validation example of the control task decides between the selected α and a
    neighbour whose test target accuracy differs by at least :data:`MATERIAL_POINTS`."""
    need = needed(threshold, n)
    kept = round(float(at["val"]["control_acc"]) * n)
    tests = {float(x["alpha"]): x for x in _records(r.result("negation", row) or {})
             if x.get("target") == target and x.get("split") == "test"}
    here = tests.get(alpha)
    if here is None:
        return None
    alphas = [a for a, _ in curve]
    i = alphas.index(alpha) if alpha in alphas else None
    cases = []
    if kept - need == 0 and i:  # one example fewer: this α fails, a smaller one is chosen
        cases.append(("with one example fewer it fails and negation would use", alphas[i - 1]))
    if i is not None and i + 1 < len(alphas):
        nxt = curve[i + 1][1]
        if need - round(float(nxt["control_acc"]) * n) == 1 and float(nxt["target_acc"]) < float(
                at["val"]["target_acc"]):
            cases.append(("with one example more the next α passes and negation would use", alphas[i + 1]))
    for why, other in cases:
        alt = tests.get(other)
        if alt is None:
            continue
        delta = 100 * (float(alt["target_acc"]) - float(here["target_acc"]))
        if abs(delta) >= MATERIAL_POINTS:
            return Flag("control-margin", r.suite, row, NEGATION, source,
                        f"negating {target}: α = {_fmt_alpha(alpha)} kept {kept} of {n} control examples where "
                        f"{need} were needed; {why} α = {_fmt_alpha(other)} instead, {delta:+.1f} points of test "
                        f"target accuracy", {"target": target, "alpha": alpha, "other_alpha": other,
                                                 "kept": kept, "needed": need, "n": n, "delta_points": delta})
    return None


def _displacement_flags(r: SuiteReader, rows: Sequence[str]) -> Iterable[Flag]:
    """‖α τ_target‖ of each fine-tuning row's negation (α × the run's recorded vector norm) against the other methods'
    rows' (a row's own variants, e.g. ``talos-k0.9`` beside ``talos``, are not its yardstick)."""
    disp: dict[str, dict[str, float]] = {}
    for row in rows:
        if row in r.posthoc():
            continue
        neg = r.result("negation", row)
        if not neg or not isinstance(neg.get("runs"), dict):
            continue
        for target, alpha in (neg.get("selected") or {}).items():
            man = r.manifest(str(neg["runs"].get(target, "")))
            norm = ((man or {}).get("metrics") or {}).get("vector_norm")
            if norm is not None and math.isfinite(float(norm)):
                disp.setdefault(target, {})[row] = float(alpha) * float(norm)
    for target, by_row in disp.items():
        for row, d in by_row.items():
            # other methods only: a method's own variants (TaLoS at k = 0.9, at another rate) share its scale
            own = base_method_of(row) or row
            others = sorted(v for m, v in by_row.items() if (base_method_of(m) or m) != own)
            if len(others) < 2:
                continue
            median = others[len(others) // 2] if len(others) % 2 else (others[len(others) // 2 - 1]
                                                                        + others[len(others) // 2]) / 2
            if median > 0 and d > DISPLACEMENT_RATIO * median:
                yield Flag("displacement-outlier", r.suite, row, NEGATION, f"negation/{r.name(row)}",
                           f"negating {target} moved the weights by ‖α τ‖ = {d:.3g}, {d / median:.0f}× the median "
                           f"{median:.3g} of the other methods' rows ({min(others):.3g}–{max(others):.3g})",
                           {"target": target, "displacement": d, "median_others": median})


def _curve_of(man: Mapping) -> list[tuple[float, float]]:
    return [(float(p["step"]), float(p["val_acc"])) for p in man.get("curve") or []
            if isinstance(p, Mapping) and p.get("val_acc") is not None]


def _run_flags(r: SuiteReader, row: str, runs: Mapping[str, str], metrics: tuple[str, ...] = (ALL,)) -> Iterable[Flag]:
    """Convergence of the runs behind a row, one flag per check with the tasks it concerns."""
    rising, unknown, other = {}, [], {}
    for task, rid in runs.items():
        man = r.manifest(rid)
        if man is None:
            continue
        train = (man.get("config") or {}).get("train") or {}
        steps = int(train.get("steps") or 0)
        curve = _curve_of(man)
        if curve:
            gain = still_rising(curve, patience=int(train.get("early_stopping_patience") or 0))
            if gain is not None:  # the steps it ran (an early-stopped run's curve ends where it stopped)
                rising[task] = (gain, int(max(s for s, _ in curve)))
            continue
        lc = r.result("learning_curve", str(man.get("method", "")))
        lc_steps = int(lc.get("steps") or 0) if lc else 0
        if lc and lc_steps and steps and lc_steps != steps:
            other[task] = (steps, lc_steps)
        else:
            unknown.append(task)
    src = "runs " + ", ".join(sorted(set(runs.values())))
    if rising:
        yield Flag("not-converged", r.suite, row, metrics, src,
                   "validation curve still rising at its end: " + ", ".join(
                       f"{t} +{_pct(g)} points in the last quarter of {s} steps" for t, (g, s) in rising.items()),
                   {"tasks": {t: g for t, (g, _) in rising.items()}})
    if other:
        yield Flag("budget-other-schedule", r.suite, row, metrics, src,
                   "trained " + ", ".join(f"{t} {s} steps" for t, (s, _) in other.items())
                   + " on schedules of that length, with budgets read off a "
                   + "/".join(sorted({f"{c:,}" for _, c in other.values()}))
                   + "-step learning curve, and recorded no curve of their own",
                   {"tasks": {t: {"steps": s, "curve_steps": c} for t, (s, c) in other.items()}})
    if unknown:
        yield Flag("convergence-unknown", r.suite, row, metrics, src,
                   "no validation curve recorded for " + ", ".join(unknown), {"tasks": unknown})


def _lr_flags(r: SuiteReader, rows: Sequence[str]) -> Iterable[Flag]:
    """Per method with an lr check, on every row trained at the method's rate (its rows, and for non-linear FT the
    merges of its vectors; not a labelled one-rate row): ``lr-disagrees`` when the check rejects the rate the method
    trained at, else ``lr-margin`` when the rate led the runner-up by fewer than :data:`MIN_EXAMPLES` examples."""
    for method in sorted({r.trained_by(row) for row in rows} - {None}):
        check = r.result("lr_check", method)
        if not check:
            continue
        means = {float(m["lr"]): float(m["val_acc"]) for m in check.get("means") or []}
        best = float(check.get("best_lr", math.nan))
        if check.get("agrees") is False:
            suite_lr = float(check.get("suite_lr", math.nan))
            check_id = "lr-disagrees"
            message = (f"{method} trained at lr {suite_lr:g}: the suite's check finds {best:g} better "
                       f"({means.get(best, math.nan):.3f} vs {means.get(suite_lr, math.nan):.3f} mean validation "
                       f"accuracy at {check.get('budget')} steps)")
            numbers = {"suite_lr": suite_lr, "best_lr": best, "means": {str(k): v for k, v in means.items()}}
        else:
            lead = _lr_lead(r, check, means, best)
            if lead is None or lead[0] >= MIN_EXAMPLES:
                continue
            n_lead, task, n, runner = lead
            check_id = "lr-margin"
            message = (f"{method} trained at lr {best:g}, which the suite's check preferred over {runner:g} by "
                       f"{n_lead} validation example{'' if n_lead == 1 else 's'} of {task} ({n} examples; "
                       f"{means[best]:.3f} vs {means[runner]:.3f} mean validation accuracy)")
            numbers = {"lr": best, "runner_up": runner, "lead_examples": n_lead, "task": task, "val_n": n}
        for row in rows:
            parsed = schema.parse_variant(row)
            if r.trained_by(row) == method and not (parsed and "lr" in parsed[1]):
                yield Flag(check_id, r.suite, row, (ALL,), f"lr_check/{r.name(method)}", message, numbers)


def _lr_lead(r: SuiteReader, check: Mapping, means: Mapping[float, float],
             best: float) -> tuple[int, str, int, float] | None:
    """How many validation examples the check's chosen rate ``best`` led the runner-up by (``means``: mean validation
    accuracy per rate), counted in examples of its smallest check task (the mean over tasks weighs one example of
    task t by 1/(T n_t), so the smallest task's examples are the fewest whose change reverses the choice):
    ``(lead, task, n, runner-up rate)``; None when the check's runs' validation sizes are not in the store or it
    compared fewer than two rates."""
    if best not in means or len(means) < 2:
        return None
    sizes: dict[str, int] = {}
    for rec in _records(check):
        n = r.val_size(str(rec.get("run_id", "")))
        if not n:
            return None
        sizes[str(rec["task"])] = n
    if not sizes:
        return None
    runner = max((lr for lr in means if lr != best), key=lambda lr: means[lr])
    task = min(sizes, key=lambda t: (sizes[t], t))
    lead = round((means[best] - means[runner]) * len(sizes) * sizes[task])
    return lead, task, sizes[task], runner


def _posthoc_edges(r: SuiteReader, row: str) -> Iterable[Flag]:
    """A post-hoc row whose addition result records its search (``search``: every hyperparameter point tried): each
    numeric hyperparameter with at least three values searched whose choice is the smallest or largest of them (two
    values: every choice is an end, nothing to tell)."""
    add = r.result("addition", row) or {}
    points = [p.get("hyperparameters") for p in add.get("search") or [] if isinstance(p, Mapping)]
    chosen = add.get("hyperparameters") if isinstance(add.get("hyperparameters"), Mapping) else {}
    edge = {}
    for key, value in chosen.items():
        values = sorted({float(p[key]) for p in points if isinstance(p, Mapping)
                         and isinstance(p.get(key), (int, float)) and not isinstance(p.get(key), bool)})
        if len(values) >= 3 and isinstance(value, (int, float)) and float(value) in (values[0], values[-1]):
            edge[key] = (float(value), values[0], values[-1])
    if edge:
        yield Flag("selection-at-edge", r.suite, row, (ALL,), f"addition/{r.name(row)}",
                   "; ".join(f"{k} chosen at the edge of the {len(points)} points searched ({lo:g}…{hi:g}): {v:g}"
                             for k, (v, lo, hi) in edge.items()),
                   {"choices": {k: v for k, (v, _, _) in edge.items()}, "searched": len(points)})


def _selection_flags(r: SuiteReader, rows: Sequence[str]) -> Iterable[Flag]:
    for row in rows:
        if row in r.posthoc():
            yield from _posthoc_edges(r, row)
            continue
        if schema.parse_variant(row):
            continue
        sel = r.result("selection", row)
        if not sel:
            continue
        param, values = str(sel.get("param", "value")), sorted(float(v) for v in sel.get("values") or [])
        source = f"selection/{r.name(row)}"
        edge = {t: c.get(param) for t, c in (sel.get("choices") or {}).items()
                if c.get(param) is not None and len(values) > 1 and float(c[param]) in (values[0], values[-1])}
        if edge:
            yield Flag("selection-at-edge", r.suite, row, (ALL,), source,
                       f"{param} chosen at the edge of the candidates {values[0]:g}…{values[-1]:g}: "
                       + ", ".join(f"{t} {v:g}" for t, v in edge.items()), {"choices": edge})
        by_task: dict[str, list[dict]] = {}
        for x in _records(sel):
            by_task.setdefault(str(x["task"]), []).append(x)
        close = {}
        for task, cands in by_task.items():
            chosen = [x for x in cands if x.get("chosen")]
            rest = sorted((x for x in cands if not x.get("chosen") and x.get("score") is not None),
                          key=lambda x: float(x["score"]))
            if not chosen or not rest:
                continue
            n = r.val_size(str(chosen[0].get("run_id", "")))
            if not n:
                continue
            gap = round((float(rest[0]["score"]) - float(chosen[0]["score"])) * n)
            if 0 <= gap < MIN_EXAMPLES:
                close[task] = (gap, float(rest[0]["value"]))
        if close:
            yield Flag("selection-margin", r.suite, row, (ALL,), source,
                       f"{param} won by fewer than {MIN_EXAMPLES} validation examples: " + ", ".join(
                           f"{t} by {g} over {v:g}" for t, (g, v) in close.items()),
                       {"tasks": {t: g for t, (g, _) in close.items()}})


def _single_flags(r: SuiteReader, rows: Sequence[str]) -> Iterable[Flag]:
    single = r.result("single")
    if not single:
        return
    recs = [x for x in _records(single) if x.get("split", "test") == "test"]
    for row in rows:
        if row in r.posthoc():
            continue
        small = {str(x["task"]): 100 * (float(x["finetuned_acc"]) - float(x["zero_shot_acc"]))
                 for x in recs if x.get("method") == row}
        small = {t: g for t, g in small.items() if g < MIN_GAIN_POINTS}
        if small:
            yield Flag("little-gain", r.suite, row, ("addition_norm", "linearization"), f"single/{r.name()}",
                       "fine-tuning gained " + ", ".join(f"{g:+.1f} points on {t}" for t, g in small.items())
                       + " over zero-shot (test)", {"gain_points": small})


def _has_number(record: Mapping, col: str) -> bool:
    """Whether a comparison record holds a number (not missing, not NaN) in ``col``."""
    v = record.get(col)
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def _comparison_flags(r: SuiteReader) -> Iterable[Flag]:
    comp = r.result("comparison")
    if not comp:
        return
    recs = _records(comp)
    source = f"comparison/{r.name()}"
    for col, higher in (("addition_abs", True), ("addition_norm", True), ("negation_target", False),
                        ("single_task_acc", True)):
        rows = [x for x in recs if _has_number(x, col)]
        if col == "addition_norm":
            rows = [x for x in rows if float(x[col]) <= 1.0]
        if len(rows) < 2:
            continue
        rows.sort(key=lambda x: float(x[col]), reverse=higher)
        best, second = rows[0], rows[1]
        if any(best.get(f"{col}_{e}") is None or second.get(f"{col}_{e}") is None for e in ("lo", "hi")):
            continue
        overlap = float(best[f"{col}_lo"]) <= float(second[f"{col}_hi"]) and float(second[f"{col}_lo"]) <= float(
            best[f"{col}_hi"])
        if overlap:
            yield Flag("best-not-separated", r.suite, str(best["method"]), (col,), source,
                       f"best {col} {_pct(best[col])} [{_pct(best[f'{col}_lo'])}, {_pct(best[f'{col}_hi'])}] overlaps "
                       f"the runner-up {second['method']} {_pct(second[col])} [{_pct(second[f'{col}_lo'])}, "
                       f"{_pct(second[f'{col}_hi'])}]", {"metric": col, "runner_up": str(second["method"])})


def _timing_key(man: Mapping) -> tuple:
    """What fixes a run's work per step: model, task, method, sparsity and (L-LoRA) rank; and the kind of device and
    its hardware (a GPU's time per step is no yardstick for a CPU's)."""
    info = man.get("info") if isinstance(man.get("info"), Mapping) else {}
    where = Machine.of(man)
    return (man.get("model"), man.get("task"), man.get("method"), man.get("sparsity"),
            man.get("rank", info.get("rank")), man.get("eval_mode"), where.kind, where.name)


def _step_time(man: Mapping) -> tuple[float, float] | None:
    t = man.get("timings") if isinstance(man.get("timings"), Mapping) else {}
    mean, std = t.get("fwd_bwd_s_mean"), t.get("fwd_bwd_s_std")
    if not isinstance(mean, (int, float)) or not isinstance(std, (int, float)) or not mean > 0:
        return None
    return float(mean), float(std)


def _timed_rows(r: SuiteReader, rows: Sequence[str]) -> list[str]:
    """The fine-tuning rows (not post-hoc) whose comparison record holds a time per step, in ``rows``' order."""
    comp = r.result("comparison")
    timed = {str(x["method"]) for x in _records(comp) if _has_number(x, "time_per_step_s")} if comp else set()
    return [row for row in rows if row in timed and row not in r.posthoc()]


def _timing_flags(r: SuiteReader, rows: Sequence[str]) -> Iterable[Flag]:
    """Each fine-tuning row with a time per step: the runs behind it against their own spread and against the fastest
    identical run in the store (the comparison's ``time_per_step_s`` is their mean over tasks)."""
    fastest: dict[tuple, float] = {}
    for rid in r.run_ids():
        man = r.manifest(rid)
        st = _step_time(man) if man else None
        if st:
            key = _timing_key(man)
            fastest[key] = min(fastest.get(key, math.inf), st[0])
    for row in _timed_rows(r, rows):
        found = []
        for task, rid in r.row_runs(row).items():
            man = r.manifest(rid)
            st = _step_time(man) if man else None
            if not st:
                continue
            (mean, std), best = st, fastest.get(_timing_key(man), st[0])
            slow = mean > TIMING_RATIO * best
            if std > TIMING_SPREAD * mean or slow:
                found.append((task, mean, std, best, slow))
        if found:
            yield Flag("timing-disturbed", r.suite, row, ("time_per_step_s",), f"efficiency/{r.name()}",
                       "; ".join(f"{task}: {mean:.3g} ± {std:.2g} s per step"
                                 + (f", {mean / best:.1f}× an identical run's {best:.3g} s" if slow else "")
                                 for task, mean, std, best, slow in found),
                       {"tasks": {t: {"mean_s": m, "std_s": sd, "fastest_identical_s": b}
                                  for t, m, sd, b, _ in found}})


def _machine_flags(r: SuiteReader, rows: Sequence[str]) -> Iterable[Flag]:
    """Each fine-tuning row with a time per step: where its runs were timed, against the reference row's machine
    (non-linear FT's where it is timed, else the first timed row's); a row whose own runs ran on several machines
    is flagged whatever the reference."""
    where: dict[str, list[Machine]] = {}
    for row in _timed_rows(r, rows):
        found = [Machine.of(man) for rid in r.row_runs(row).values() if (man := r.manifest(rid))]
        if found:
            where[row] = found
    if not where:
        return
    ref = "nonlinear" if "nonlinear" in where else next(iter(where))

    def spread(ms: list[Machine]) -> list[Machine]:
        out: list[Machine] = []
        for m in ms:
            if not any(m.same_as(o) for o in out):
                out.append(m)
        return out

    ref_ms = spread(where[ref])
    for row, ms in where.items():
        mine = spread(ms)
        if len(mine) > 1:
            msg = f"its runs were timed on {len(mine)} machines: {', '.join(m.label() for m in mine)}"
            kinds = {m.kind for m in mine}
        elif row != ref and len(ref_ms) == 1 and not mine[0].same_as(ref_ms[0]):
            msg = f"timed on {mine[0].label()}, {ref}'s runs on {ref_ms[0].label()}"
            kinds = {mine[0].kind, ref_ms[0].kind}
        else:
            continue
        # a GPU's allocated memory and a CPU process's resident set are not one quantity either
        metrics = ("time_per_step_s", "peak_memory_mb") if len(kinds - {None}) > 1 else ("time_per_step_s",)
        yield Flag("timing-other-machine", r.suite, row, metrics, f"efficiency/{r.name()}", msg,
                   {"machines": [m.label() for m in mine], "reference": ref,
                    "reference_machines": [m.label() for m in ref_ms]})


def _mask_flags(r: SuiteReader) -> Iterable[Flag]:
    prefix = r.name() + schema.SEP
    for name in sorted(n for n in _result_names(r.root, "masks") if n.startswith(prefix)):
        row = name[len(prefix):]
        if schema.SEP in row:
            continue
        payload = r.result("masks", row) or {}
        low = {str(d["task"]): float(d["moved"]) for d in payload.get("diagnostics") or []
               if d.get("moved") is not None and float(d["moved"]) < MIN_MOVED}
        if low:
            yield Flag("mask-unmoved", r.suite, row, ("masks",), f"masks/{name}",
                       "trainable entries never changed in training: " + ", ".join(
                           f"{t} {_pct(1 - m)} %" for t, m in low.items()),
                       {"unmoved": {t: 1 - m for t, m in low.items()}})


def _result_names(root: Path, kind: str) -> list[str]:
    folder = schema.results_dir(root) / kind
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def _ablation_flags(r: SuiteReader) -> Iterable[Flag]:
    for method in ("talos", "lota"):
        abl = r.result("sparsity_ablation", method)
        if not abl or not isinstance(abl.get("runs"), dict):
            continue
        for k, runs in abl["runs"].items():
            if isinstance(runs, dict):
                yield from _run_flags(r, f"{method} ablation", {f"{t} (k = {k})": rid for t, rid in runs.items()})


# --------------------------------------------------------------------------------------------
# entry points
def _array_flags(r: SuiteReader, rows: Sequence[str]) -> Iterable[Flag]:
    """Each row's ``preview`` and ``examples`` results read whole, arrays included (a part run elsewhere and merged
    with its JSON alone leaves the meta without its arrays: the dashboard's panel for that row stays empty). They
    feed no number of the tables, so the flag concerns :data:`GALLERY` only and no claim."""
    from talos_core.result_arrays import load_examples, load_preview

    for row in rows:
        for kind, load in (("preview", load_preview), ("examples", load_examples)):
            try:
                load(r.root, r.name(row))
            except schema.MissingResult:
                continue
            except TalosError as exc:  # CorruptResult: one sentence naming the file
                yield Flag("result-unreadable", r.suite, row, (GALLERY,), f"{kind}/{r.name(row)}", str(exc), {})


def _code_flags(r: SuiteReader) -> Iterable[Flag]:
    """The code versions the suite record's sessions ran their steps under (``code`` per session: commit, dirty; the
    comparison, which every session gathers again, does not count). Two recorded versions, or a dirty checkout, is
    one suite-wide flag; sessions that recorded no code (records before 2026-11-28) are named, never judged."""
    versions: dict[str, int] = {}
    unrecorded = 0
    dirty = False
    for session in r.meta.get("sessions") or []:
        if not isinstance(session, Mapping):
            continue
        steps = [s for s in session.get("steps_run") or [] if s != "comparison"]
        if not steps:
            continue
        code = session.get("code") if isinstance(session.get("code"), Mapping) else None
        if code is None:
            unrecorded += len(steps)
            continue
        key = str(code.get("commit") or f"talos_core {code.get('talos_core')}")[:12]
        if code.get("dirty"):
            key, dirty = key + " (uncommitted changes)", True
        versions[key] = versions.get(key, 0) + len(steps)
    if len(versions) > 1 or dirty:
        said = "; ".join(f"{k}: {n} step{'' if n == 1 else 's'}" for k, n in versions.items())
        more = f"; {unrecorded} steps by sessions that recorded no code" if unrecorded else ""
        yield Flag("code-mixed", r.suite, None, (PROVENANCE,), f"suite/{r.suite}",
                   f"steps ran under {len(versions)} code version{'' if len(versions) == 1 else 's'}: {said}{more}",
                   {"versions": versions, "unrecorded": unrecorded})


# --------------------------------------------------------------------------------------------
def audit_suite(store: str | Path | Any, suite: str) -> list[Flag]:
    """Every flag raised on ``suite`` of ``store`` (a path or a :class:`~talos_core.store.Store`), in the order of
    :data:`CHECKS`, rows in the comparison's order. A suite the store has no record of is one TalosError."""
    root = Path(store) if isinstance(store, (str, Path)) else Path(store.root)
    r = SuiteReader(root, suite)
    rows = r.rows()
    flags: list[Flag] = []
    if r.meta.get("complete") is False:
        flags.append(Flag("suite-incomplete", suite, None, (ALL,), f"suite/{suite}",
                          f"the suite record of {suite!r} is marked incomplete", {}))
    for row in rows:
        flags += _addition_flags(r, row)
        flags += _negation_flags(r, row)
        flags += _run_flags(r, row, r.row_runs(row))
    flags += _norm_unedited_flags(r, rows)
    flags += _displacement_flags(r, rows)
    flags += _lr_flags(r, rows)
    flags += _selection_flags(r, rows)
    flags += _single_flags(r, rows)
    flags += _comparison_flags(r)
    flags += _timing_flags(r, rows)
    flags += _machine_flags(r, rows)
    flags += _mask_flags(r)
    flags += _ablation_flags(r)
    flags += _array_flags(r, rows)
    flags += _code_flags(r)
    flags += [Flag("result-unreadable", suite, None, (ALL,), source, problem, {})
              for source, problem in sorted(r.problems.items())]
    order = {c.id: i for i, c in enumerate(CHECKS)}
    rank = {m: i for i, m in enumerate(rows)}
    return sorted(flags, key=lambda f: (order[f.check], rank.get(f.row or "", -1), f.row or ""))


def counts_by_check(flags: Iterable[Flag]) -> dict[str, int]:
    """How many flags each check raised (checks in :data:`CHECKS` order, raised ones only)."""
    out: dict[str, int] = {}
    for f in flags:
        out[f.check] = out.get(f.check, 0) + 1
    return {c.id: out[c.id] for c in CHECKS if c.id in out}


def audit_text(flags: Sequence[Flag], suite: str) -> str:
    """What ``talos audit`` prints: a count line, then per check its explanation and one line per flag."""
    if not flags:
        return f"{suite}: no audit flags ({len(CHECKS)} checks)"
    counts = counts_by_check(flags)
    lines = [f"{suite}: {len(flags)} audit flag(s) — " + ", ".join(f"{k} {v}" for k, v in counts.items()), ""]
    for check in CHECKS:
        raised = [f for f in flags if f.check == check.id]
        if not raised:
            continue
        lines.append(f"[{check.id}] {check.title}: {check.explanation}")
        lines += [f"  - {f.row or suite}: {f.message}" for f in raised]
        lines.append("")
    return "\n".join(lines).rstrip()


def footnote_keys(flags: Sequence[Flag], rows: Sequence[str] = ()) -> list[tuple[str, str]]:
    """The (row, check) pairs of ``flags`` in footnote order: suite-wide flags (row ``""``) first, then row by row
    in the order of ``rows`` (rows not in it after them), checks in :data:`CHECKS` order."""
    rank = {r: i for i, r in enumerate(rows)}
    order = {c.id: i for i, c in enumerate(CHECKS)}
    keys = {(f.row or "", f.check): (f.row is not None, rank.get(f.row or "", len(rank)), f.row or "",
                                     order[f.check]) for f in flags}
    return sorted(keys, key=keys.__getitem__)


def footnotes(flags: Sequence[Flag], rows: Sequence[str] = ()) -> tuple[dict[str, list[int]], list[str]]:
    """Footnotes for a results table: ``({row: [numbers]}, lines)``, one footnote per (row, check), numbered in
    :func:`footnote_keys` order; suite-wide flags are keyed ``""``."""
    by_row: dict[str, list[int]] = {}
    lines = []
    for i, (row, check) in enumerate(footnote_keys(flags, rows), start=1):
        by_row.setdefault(row, []).append(i)
        group = [f for f in flags if (f.row or "") == row and f.check == check]
        lines.append(f"[{i}] {row or 'suite'} — {check_info(check).title}: " + "; ".join(f.message for f in group))
    return by_row, lines


def number_ranges(numbers: Sequence[int]) -> str:
    """Footnote numbers in short form.

    >>> number_ranges([1, 2, 3, 5, 7, 8])
    '1–3, 5, 7–8'
    """
    out: list[str] = []
    for n in sorted(numbers):
        if out and out[-1].split("–")[-1] == str(n - 1):
            out[-1] = f"{out[-1].split('–')[0]}–{n}"
        else:
            out.append(str(n))
    return ", ".join(out)


def checks_markdown() -> str:
    """The table of checks (id, what it flags, why it matters) that docs/audit.md carries (``talos docs``)."""
    lines = ["| check | flags | why it matters |", "|---|---|---|"]
    lines += [f"| `{c.id}` | {c.title} | {c.explanation} |" for c in CHECKS]
    lines += ["", f"Thresholds: a selection won by fewer than {MIN_EXAMPLES} validation examples; one control example "
                  f"deciding between two α whose test target accuracies differ by ≥ {MATERIAL_POINTS:g} points; an "
                  f"edit ‖α τ‖ more than {DISPLACEMENT_RATIO:g}× the median of the other rows' on the same target; a "
                  f"curve gaining more than {100 * CONVERGENCE_TOLERANCE:g} point over its last quarter; a gain under "
                  f"{MIN_GAIN_POINTS:g} points over zero-shot; a mask with under {100 * MIN_MOVED:g} % of its entries "
                  "moved."]
    return "\n".join(lines)


def counts_markdown(store: str | Path | Any, suites: Sequence[str]) -> str:
    """Flags per check and suite (a table; ``–`` where a check raised nothing), for docs/audit.md."""
    counts = {s: counts_by_check(audit_suite(store, s)) for s in suites}
    lines = ["| check | " + " | ".join(suites) + " |", "|---" * (len(suites) + 1) + "|"]
    for c in CHECKS:
        lines.append(f"| `{c.id}` | " + " | ".join(str(counts[s].get(c.id, "–")) for s in suites) + " |")
    lines.append("| **all** | " + " | ".join(f"**{sum(counts[s].values())}**" for s in suites) + " |")
    return "\n".join(lines)
