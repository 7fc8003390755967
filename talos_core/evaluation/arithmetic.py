"""Task arithmetic protocols: single-task / zero-shot accuracy, task addition, task negation.

Definitions (paper Sec. 4.1 and App. "Implementation details"; official-code notes):

* **Task addition** — ``f(·, θ0 + α Σ_t τ_t)`` with ONE coefficient α for all vectors. α is searched on
  the validation split over ``{0, 0.05, …, 1}`` (× ``1/(1 − sparsity)`` for sparse methods) and
  chosen to maximize the average *normalized accuracy* (App. Eq. "Normalized Accuracy")::

      norm_t(α) = Acc[f(D_t, θ0 + α Σ_t' τ_t')] / Acc[f(D_t, θ0 + τ_t)]

  i.e. the merged model's accuracy divided by the method's own single-task fine-tuned accuracy.
  Absolute and normalized accuracies are reported on test at the chosen α.
* **Task negation** — per target t, ``f(·, θ0 − α τ_t)``; α is chosen on validation to minimize the
  target accuracy subject to ``control_acc ≥ 0.95 × zero-shot control_acc``; reported on test.

Uncertainty: at the selected α(s) the results keep the per-example test correctness behind every
reported mean (``examples``, a ``"0101…"`` string per task) and the 95% percentile-bootstrap interval over
test examples of each summary mean (``ci95``, same keys as ``summary``; :mod:`talos_core.evaluation.stats`).

Grid extension (``extend``, the ``full`` scales): a search whose choice is the LAST point of its grid says nothing
about where the optimum lies, so it goes on upward with the grid's top step, one point at a time, until the choice is
inside the grid or the next point would pass ``extend`` × the grid's largest value (:func:`extend_search`, the one
place every α search — addition, negation, the selection's negation curves, the post-hoc merges, the ablation — does
it). The result's ``alpha_grid`` then holds the added points and ``extended`` says so.

Speed: a non-linear α curve costs one in-place edit per α (``apply_vectors``, bitwise restore) and
one pass per evaluated (task, split) with the head swapped in; a linearized one costs ONE JVP per
(task, split): ``logits(α) = f(x, θ0) + α · (Στ)ᵀ∇f(x, θ0)`` for every α at once (extension points included).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from talos_core.errors import TalosError, check_range
from talos_core.evaluation import stats
from talos_core.evaluation.context import SPLITS, EvalContext, correct_of, mean_correct
from talos_core.inference.forward import Mode
from talos_core.methods.declaration import ALPHA, SPARSE_ALPHA
from talos_core.methods.declaration import ALPHA_STEP as ALPHA_STEP  # the α grid step, re-exported here
from talos_core.vectors import TaskVector, sum_vectors

ALPHA_STOP = 1.0
CONTROL_THRESHOLD = 0.95


# --------------------------------------------------------------------------------------------
# α grid
# --------------------------------------------------------------------------------------------
def alpha_grid(sparsity: float | None = None, *, sparse: bool = False, step: float = ALPHA_STEP,
               stop: float = ALPHA_STOP) -> list[float]:
    """The paper's α grid ``0, step, …, stop``, × ``1/(1 − sparsity)`` for sparse methods.

    >>> alpha_grid()[:3], len(alpha_grid())
    ([0.0, 0.05, 0.1], 21)
    >>> alpha_grid(0.9, sparse=True)[-1]
    10.0
    """
    if not (step > 0 and stop >= 0 and math.isfinite(step) and math.isfinite(stop)):
        raise TalosError(f"alpha grid needs step > 0 and stop >= 0, got step={step!r}, stop={stop!r}")
    n = int(round(stop / step))
    scale = (SPARSE_ALPHA if sparse else ALPHA).stretch(sparsity)  # the methods' α rule
    return [round(i * step * scale, 10) for i in range(n + 1)]


def search_region(alphas: Sequence[float]) -> list[float]:
    """``[min, max]`` of an α grid (the region searched for task addition)."""
    return [float(min(alphas)), float(max(alphas))]


def check_extend(extend: object) -> float:
    """An extension cap: 0 (grids end where they end) or a multiple ≥ 1 of a grid's largest value."""
    value = check_range("alpha_extend", extend, 0.0, 100.0, high_open=False)
    if 0 < value < 1:
        raise TalosError(f"alpha_extend must be 0 (no extension) or at least 1 (a multiple of the grid's largest "
                         f"value, e.g. 4), got {extend!r}")
    return float(value)


def next_alpha(grid: Sequence[float], cap: float) -> float | None:
    """The point after an ascending grid: its last value plus its top step (the gap between its two largest
    values), or ``None`` when there is no step or the point would pass ``cap``.

    >>> next_alpha([0.0, 0.05, 0.1], 4.0), next_alpha([0.0, 1.0], 1.5), next_alpha([0.0], 4.0)
    (0.15, None, None)
    """
    if len(grid) < 2:
        return None
    step = float(grid[-1]) - float(grid[-2])
    nxt = round(float(grid[-1]) + step, 10)
    return nxt if step > 0 and nxt <= cap * (1 + 1e-9) else None


def extend_search(alphas: Sequence[float], evaluate: Callable[[list[float]], None], choose: Callable[[], float],
                  extend: float = 0.0) -> tuple[list[float], float, bool]:
    """Every α search's grid rule: ``evaluate(alphas)``, ``choose()``; while the choice is the grid's last point,
    evaluate the next point (:func:`next_alpha`, up to ``extend`` × the grid's largest value; 0: never) and choose
    again. ``evaluate`` adds the given α to what ``choose`` reads. Returns ``(grid, choice, extended)``, the grid
    with the points added.

    >>> seen = []
    >>> extend_search([0.0, 0.5, 1.0], seen.extend, lambda: min(max(seen), 1.75), extend=4.0)
    ([0.0, 0.5, 1.0, 1.5, 2.0], 1.75, True)
    """
    grid = [float(a) for a in alphas]
    evaluate(list(grid))
    best = float(choose())
    cap = float(extend) * max(grid) if extend and grid else 0.0
    extended = False
    while cap > 0 and math.isclose(best, grid[-1], rel_tol=1e-9, abs_tol=1e-12):
        nxt = next_alpha(grid, cap)
        if nxt is None:
            break
        grid.append(nxt)
        evaluate([nxt])
        best, extended = float(choose()), True
    return grid, best, extended


# --------------------------------------------------------------------------------------------
# α curves (shared engine)
# --------------------------------------------------------------------------------------------
def alpha_curve(ctx: EvalContext, items: Sequence[tuple[str, str]], vector: TaskVector,
                alphas: Sequence[float], *, sign: float = 1.0, mode: Mode = "nonlinear",
                progress: bool = False) -> np.ndarray:
    """Accuracies ``[len(alphas), len(items)]`` of ``θ0 + sign · α · vector`` on each ``(task, split)``.

    Non-linear: one in-place edit per α, every item evaluated under that edit; α = 0 is the
    pre-trained model, whose accuracies come from :meth:`EvalContext.zero_shot` (computed once per
    process and data). Linearized: one ``base, jvp`` per item, then ``argmax(base + sign · α · jvp)``
    for every α (no more forwards).
    """
    return alpha_curve_examples(ctx, items, vector, alphas, sign=sign, mode=mode, progress=progress)[0]


def alpha_curve_examples(ctx: EvalContext, items: Sequence[tuple[str, str]], vector: TaskVector,
                         alphas: Sequence[float], *, sign: float = 1.0, mode: Mode = "nonlinear",
                         progress: bool = False) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
    """:func:`alpha_curve` and the per-example correctness behind it: ``correct[i][j]`` (bool ``[N]``) of
    ``alphas[i]`` on ``items[j]``, whose mean is the accuracy; ``None`` where the accuracy came from the
    memoized zero-shot pass (non-linear α = 0: :meth:`EvalContext.zero_shot_correct` gives it).
    """
    return AlphaCurve(ctx, items, vector, sign=sign, mode=mode, progress=progress).evaluate(alphas)


class AlphaCurve:
    """The accuracies of ``θ0 + sign · α · vector`` on ``items``, α by α as a search asks for them
    (:func:`extend_search`): a non-linear curve edits the model once per α (α = 0 is the memoized zero-shot pass);
    a linearized one computes ``f(x, θ0)`` and the JVP of each item once, at the first call, and every α after
    that is algebra."""

    def __init__(self, ctx: EvalContext, items: Sequence[tuple[str, str]], vector: TaskVector, *,
                 sign: float = 1.0, mode: Mode = "nonlinear", progress: bool = False) -> None:
        if mode not in ("nonlinear", "linearized"):
            raise TalosError(f"evaluation mode must be 'nonlinear' or 'linearized', got {mode!r}")
        self.ctx, self.items, self.vector, self.sign, self.mode, self.progress = ctx, list(items), vector, sign, \
            mode, progress
        self._linear: list | None = None  # [(base, jvp, labels)] per item, linearized mode

    def evaluate(self, alphas: Sequence[float]) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
        """``(accuracies [len(alphas), len(items)], correctness)`` as :func:`alpha_curve_examples`."""
        ctx, items, sign = self.ctx, self.items, self.sign
        out = np.zeros((len(alphas), len(items)))
        correct: list[list[np.ndarray | None]] = [[None] * len(items) for _ in alphas]
        if self.mode == "linearized":
            if self._linear is None:
                self._linear = []
                for task, split in items:
                    base, (jv,) = ctx.base_and_jvps(task, split, [self.vector])
                    self._linear.append((base, jv, ctx.labels(task, split)))
            for j, (base, jv, labels) in enumerate(self._linear):
                for i, a in enumerate(alphas):
                    correct[i][j] = correct_of(base + (sign * a) * jv, labels)
                    out[i, j] = mean_correct(correct[i][j])
            return out, correct
        rows = enumerate(alphas)
        if self.progress:
            from tqdm.auto import tqdm

            rows = tqdm(list(rows), desc="alpha grid", leave=False)
        named_splits = all(isinstance(s, str) for _, s in items)  # zero-shot is cached for "val"/"test" only
        for i, a in rows:
            if a == 0.0 and named_splits:
                out[i] = [ctx.zero_shot(t, s) for t, s in items]  # θ0 itself: the (memoized) zero-shot pass
            else:
                correct[i] = ctx.correct_many(items, [(self.vector, sign * a)], self.mode)
                out[i] = [mean_correct(c) for c in correct[i]]
        return out, correct


def _at(ctx: EvalContext, correct: list[list[np.ndarray | None]], i: int, j: int, task: str, split: str) -> np.ndarray:
    """The correctness of α_i on item j, from the curve or (α = 0) from the memoized zero-shot pass."""
    c = correct[i][j]
    return c if c is not None else ctx.zero_shot_correct(task, split)


def encode_all(examples: Mapping[str, np.ndarray]) -> dict[str, str]:
    """``{task: "0101…"}`` (:func:`talos_core.evaluation.stats.encode_examples`)."""
    return {t: stats.encode_examples(c) for t, c in examples.items()}


# --------------------------------------------------------------------------------------------
# single-task and zero-shot accuracy
# --------------------------------------------------------------------------------------------
class Accuracies(dict):
    """``{(task, split): accuracy}`` plus ``correct``: ``{(task, split): bool [N]}``, the per-example
    correctness each accuracy is the mean of (used for bootstrap intervals)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.correct: dict[tuple[str, str], np.ndarray] = {}


def finetuned_accuracies(ctx: EvalContext, vectors: Mapping[str, TaskVector], modes: Mapping[str, Mode] | Mode,
                         splits: Sequence[str] = SPLITS) -> Accuracies:
    """``Acc[f(D_t, θ0 + τ_t)]`` per task and split (one edit per task, in the method's eval mode); the
    per-example correctness is in ``.correct``."""
    out = Accuracies()
    for task, tv in vectors.items():
        mode = modes if isinstance(modes, str) else modes[task]
        for s, c in zip(splits, ctx.correct_many([(task, s) for s in splits], [(tv, 1.0)], mode)):
            out[(task, s)] = mean_correct(c)
            out.correct[(task, s)] = c
    return out


@dataclass
class SingleTaskResult:
    """The ``single`` table of one method and the per-example test correctness behind its test rows."""

    table: pd.DataFrame  # method, task, zero_shot_acc, finetuned_acc, split
    examples: dict[str, dict[str, str]]  # {task: {"zero_shot": "0101…", "finetuned": "0101…"}} (test split)


def single_task_result(ctx: EvalContext, vectors: Mapping[str, TaskVector], method: str,
                       modes: Mapping[str, Mode] | Mode = "nonlinear", splits: Sequence[str] = SPLITS,
                       zero_shot: Mapping[tuple[str, str], float] | None = None,
                       finetuned: Mapping[tuple[str, str], float] | None = None) -> SingleTaskResult:
    """:func:`single_task_table` and, for the test split, the per-example correctness of θ0 and θ0 + τ_t
    (``examples[task]["finetuned"]`` is left out for ``finetuned`` accuracies given without ``.correct``)."""
    if finetuned is not None and all((t, s) in finetuned for t in vectors for s in splits):
        fine = finetuned
    else:
        fine = finetuned_accuracies(ctx, vectors, modes, splits)
    fine_correct = getattr(fine, "correct", {})
    rows, examples = [], {}
    for task in vectors:
        for s in splits:
            zs = zero_shot[(task, s)] if zero_shot and (task, s) in zero_shot else ctx.zero_shot(task, s)
            rows.append({"method": method, "task": task, "zero_shot_acc": zs, "finetuned_acc": fine[(task, s)],
                         "split": s})
        if "test" in splits:
            examples[task] = {"zero_shot": stats.encode_examples(ctx.zero_shot_correct(task, "test"))}
            if (task, "test") in fine_correct:
                examples[task]["finetuned"] = stats.encode_examples(fine_correct[(task, "test")])
    table = pd.DataFrame(rows, columns=["method", "task", "zero_shot_acc", "finetuned_acc", "split"])
    return SingleTaskResult(table, examples)


def single_task_table(ctx: EvalContext, vectors: Mapping[str, TaskVector], method: str,
                      modes: Mapping[str, Mode] | Mode = "nonlinear", splits: Sequence[str] = SPLITS,
                      zero_shot: Mapping[tuple[str, str], float] | None = None,
                      finetuned: Mapping[tuple[str, str], float] | None = None) -> pd.DataFrame:
    """Tidy table ``method, task, zero_shot_acc, finetuned_acc, split`` (``single`` in SCHEMA.md).

    ``zero_shot_acc`` = Acc[f(D_t, θ0)], ``finetuned_acc`` = Acc[f(D_t, θ0 + τ_t)]; ``zero_shot``
    may supply already known zero-shot accuracies (they depend on the model only), ``finetuned``
    the already measured :func:`finetuned_accuracies` of these vectors. :func:`single_task_result`
    also gives the per-example test correctness.
    """
    return single_task_result(ctx, vectors, method, modes, splits, zero_shot, finetuned).table


# --------------------------------------------------------------------------------------------
# task addition
# --------------------------------------------------------------------------------------------
@dataclass
class AdditionResult:
    """α curve of task addition plus the α chosen on validation and the test summary."""

    table: pd.DataFrame  # alpha, split, task, accuracy, normalized_accuracy
    selected_alpha: float
    alphas: list[float]
    tasks: list[str]
    summary: dict  # {"abs_acc", "norm_acc"} on test at the selected α
    eval_mode: str = "nonlinear"
    sparsity: float | None = None
    examples: dict[str, np.ndarray] = field(default_factory=dict)  # test correctness at the selected α, per task
    reference_examples: dict[str, np.ndarray] = field(default_factory=dict)  # of θ0 + τ_t (the normalizer)
    ci95: dict = field(default_factory=dict)  # {"abs_acc": [lo, hi], "norm_acc": [lo, hi]} (95% bootstrap)
    extend: float = 0.0  # the search's extension cap (extend_search); 0: the grid as given
    extended: bool = False  # the search added points above the grid it was given (they are in ``alphas``)

    def extra(self) -> dict:
        """The SCHEMA.md extras of ``addition/<suite>__<model>__<method>``."""
        out = {"selected_alpha": self.selected_alpha, "alpha_grid": self.alphas, "summary": self.summary,
               "tasks": self.tasks, "sparsity": self.sparsity, "eval_mode": self.eval_mode,
               "search_region": search_region(self.alphas)}
        if self.extend:  # written by extending searches only, so results of the others stay as they were
            out.update(alpha_extend=self.extend, extended=self.extended)
        if self.examples:
            out["ci95"] = self.ci95
            out["examples"] = encode_all(self.examples)
            if self.reference_examples:
                out["reference_examples"] = encode_all(self.reference_examples)
            out["bootstrap"] = stats.bootstrap_settings()
        return out


def select_addition_alpha(table: pd.DataFrame) -> float:
    """α maximizing the mean normalized accuracy on ``val`` (ties: the smallest α)."""
    val = table[table["split"] == "val"]
    if val.empty:
        raise TalosError("the addition curve has no validation rows to choose alpha from")
    means = val.groupby("alpha", sort=True)["normalized_accuracy"].mean()
    if means.isna().all():  # no usable reference accuracy: fall back to absolute accuracy
        means = val.groupby("alpha", sort=True)["accuracy"].mean()
    best = means.max()
    return float(means[means >= best - 1e-12].index.min())


def task_addition(ctx: EvalContext, vectors: Mapping[str, TaskVector],
                  reference: Mapping[tuple[str, str], float], alphas: Sequence[float], *,
                  mode: Mode = "nonlinear", sparsity: float | None = None, merged: TaskVector | None = None,
                  splits: Sequence[str] = SPLITS, progress: bool = False, extend: float = 0.0) -> AdditionResult:
    """Task addition ``θ0 + α Σ_t τ_t`` over ``alphas`` on val and test (paper Sec. 4.1, App. Eq. norm. acc).

    ``reference[(t, split)]`` is the single-task fine-tuned accuracy ``Acc[f(D_t, θ0 + τ_t)]`` used
    to normalize (with its per-example ``.correct`` when it comes from :func:`finetuned_accuracies`,
    for the normalized accuracy's interval). ``merged`` replaces ``Σ_t τ_t`` by another multi-task
    vector (e.g. a post-hoc TIES/DARE merge of the same tasks' vectors); the α curve is then ``θ0 + α · merged``.
    ``splits=("val",)`` evaluates validation only (a hyperparameter search that needs just the α
    choice); the summary is then NaN, since it is a test-split summary. With the test split, the result
    keeps the test correctness at the selected α (``examples``) and ``ci95``, the 95% bootstrap
    intervals over test examples of both summary means (:func:`talos_core.evaluation.stats.addition_intervals`).
    ``extend``: a choice at the grid's last point extends the grid (:func:`extend_search`). Example::

        ref = finetuned_accuracies(ctx, vectors, "nonlinear")
        res = task_addition(ctx, vectors, ref, alpha_grid(0.9, sparse=True))
        res.selected_alpha, res.summary["norm_acc"]
    """
    tasks = list(vectors)
    if not tasks:
        raise TalosError("task addition needs at least one task vector")
    if not alphas:
        raise TalosError("the alpha grid is empty")
    if "val" not in splits or any(s not in SPLITS for s in splits):
        raise TalosError(f"task addition evaluates 'val' (to choose alpha) and optionally 'test', got {list(splits)}")
    if merged is None:
        merged = sum_vectors([vectors[t] for t in tasks])
    items = [(t, s) for s in SPLITS if s in splits for t in tasks]
    curve = AlphaCurve(ctx, items, merged, mode=mode, progress=progress)
    rows: list[dict] = []
    correct: list[list[np.ndarray | None]] = []

    def evaluate(points: list[float]) -> None:
        accs, corr = curve.evaluate(points)
        correct.extend(corr)
        for i, a in enumerate(points):
            for j, (t, s) in enumerate(items):
                ref = reference[(t, s)]
                rows.append({"alpha": float(a), "split": s, "task": t, "accuracy": accs[i, j],
                             "normalized_accuracy": accs[i, j] / ref if ref > 0 else float("nan")})

    def table_now() -> pd.DataFrame:
        return pd.DataFrame(rows, columns=["alpha", "split", "task", "accuracy", "normalized_accuracy"])

    alphas, best, extended = extend_search(alphas, evaluate, lambda: select_addition_alpha(table_now()), extend)
    table = table_now()
    at = table[(table["split"] == "test") & np.isclose(table["alpha"], best)]
    summary = {"abs_acc": float(at["accuracy"].mean()), "norm_acc": float(at["normalized_accuracy"].mean())}
    examples, ref_examples, ci95 = {}, {}, {}
    if "test" in splits:
        i = int(np.argmin(np.abs(np.asarray(alphas, dtype=float) - best)))
        examples = {t: _at(ctx, correct, i, j, t, s) for j, (t, s) in enumerate(items) if s == "test"}
        known = getattr(reference, "correct", {})
        if all((t, "test") in known for t in tasks):
            ref_examples = {t: known[(t, "test")] for t in tasks}
        ci95 = stats.addition_intervals(examples, ref_examples or None)
    return AdditionResult(table, best, [float(a) for a in alphas], tasks, summary, mode, sparsity, examples,
                          ref_examples, ci95, extend, extended)


# --------------------------------------------------------------------------------------------
# task negation
# --------------------------------------------------------------------------------------------
@dataclass
class NegationResult:
    """Per-target α curves of task negation and the α chosen under the control constraint."""

    table: pd.DataFrame  # target, alpha, split, target_acc, control_acc
    control_task: str
    selected: dict[str, float]
    control_zero_shot_acc: dict[str, float]  # {"val": ..., "test": ...}
    per_task: pd.DataFrame  # target, alpha, target_acc, control_acc (test, selected α)
    summary: dict  # {"target_acc", "control_acc"} test means at the selected α
    threshold: float = CONTROL_THRESHOLD
    alphas: list[float] = field(default_factory=list)
    eval_mode: str = "nonlinear"
    # test correctness at each target's selected α: {target: {"target": [N_t], "control": [N_control]}}
    examples: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    ci95: dict = field(default_factory=dict)  # {"target_acc": [lo, hi], "control_acc": [lo, hi]} (95% bootstrap)
    grids: dict[str, list[float]] = field(default_factory=dict)  # each target's grid as searched (extensions in)
    extend: float = 0.0  # the search's extension cap (extend_search); 0: the grids as given
    extended: dict[str, bool] = field(default_factory=dict)  # per target: points were added above its grid
    control_val_n: int | None = None  # the control task's validation examples (the 95 % constraint's resolution)

    @property
    def mixed(self) -> bool:
        """Whether the targets' grids differ (then the result records each: ``alpha_grids``)."""
        return len({tuple(g) for g in self.grids.values()}) > 1

    def extra(self) -> dict:
        """The SCHEMA.md extras of ``negation/<suite>__<model>__<method>``."""
        out = {"control_task": self.control_task, "selected": self.selected,
               "control_zero_shot_acc": self.control_zero_shot_acc, "summary": self.summary,
               "per_task": self.per_task.to_dict(orient="records"), "threshold": self.threshold,
               "alpha_grid": self.alphas, "eval_mode": self.eval_mode}
        if self.extend:  # written by extending searches only, so results of the others stay as they were
            out.update(alpha_extend=self.extend, extended=any(self.extended.values()),
                       control_val_n=self.control_val_n)
        if self.examples:
            out["ci95"] = self.ci95
            out["examples"] = {t: encode_all(e) for t, e in self.examples.items()}
            out["bootstrap"] = stats.bootstrap_settings()
        return out


def select_negation_alpha(curve: pd.DataFrame, control_zero_shot: float,
                          threshold: float = CONTROL_THRESHOLD) -> float:
    """α minimizing ``target_acc`` subject to ``control_acc ≥ threshold × control_zero_shot``.

    ``curve`` holds one target's validation rows (``alpha, target_acc, control_acc``). Ties on the
    target accuracy go to the higher control accuracy, then to the smaller α. α = 0 (the pre-trained
    model) always satisfies the constraint, so a choice always exists when α = 0 is on the grid;
    if no α satisfies it, this is an error.

    >>> c = pd.DataFrame({"alpha": [0.0, 0.5, 1.0], "target_acc": [0.9, 0.5, 0.1], "control_acc": [0.8, 0.78, 0.5]})
    >>> select_negation_alpha(c, 0.8)
    0.5
    """
    check_range("threshold", threshold, 0.0, 1.0, high_open=False)
    ok = curve[curve["control_acc"] >= threshold * control_zero_shot - 1e-12]
    if ok.empty:
        raise TalosError(f"no alpha keeps the control accuracy at {threshold:g} x its zero-shot value "
                         f"({control_zero_shot:.4f}); include alpha = 0 in the grid")
    ok = ok.sort_values(["target_acc", "control_acc", "alpha"], ascending=[True, False, True], kind="mergesort")
    return float(ok.iloc[0]["alpha"])


def task_negation(ctx: EvalContext, vectors: Mapping[str, TaskVector], control_task: str,
                  alphas: Sequence[float] | Mapping[str, Sequence[float]], *, mode: Mode = "nonlinear",
                  threshold: float = CONTROL_THRESHOLD, progress: bool = False, extend: float = 0.0) -> NegationResult:
    """Task negation ``θ0 − α τ_t`` per target t (paper Sec. 4.1 "Task Negation", App. α tuning).

    For each target and α, target and control accuracies are measured on val and test under ONE
    edit. α is chosen on val: minimal target accuracy with control ≥ ``threshold`` × the
    pre-trained control accuracy; test values at that α are reported, with the test correctness
    behind them (``examples``) and their 95% bootstrap intervals (``ci95``,
    :func:`talos_core.evaluation.stats.negation_intervals`). ``alphas`` is one grid, or
    ``{target: grid}`` (each target's own grid, e.g. per-task sparsities); ``alphas`` of the result is
    then their union. ``extend``: a target whose choice is its grid's last point extends its grid
    (:func:`extend_search`); the result's ``grids`` hold each target's grid as searched (``alphas``: their union
    when they differ).
    """
    if control_task in vectors:
        raise TalosError(f"control task {control_task!r} is also a negation target; pick another control task")
    ctx.spec(control_task)
    grids = {t: list(alphas[t] if isinstance(alphas, Mapping) else alphas) for t in vectors}
    if not all(grids.values()):
        raise TalosError("the alpha grid is empty")
    zs = {s: ctx.zero_shot(control_task, s) for s in SPLITS}
    rows, selected, per_task, examples, extended = [], {}, [], {}, {}
    for target, tv in vectors.items():
        items = [(target, "val"), (target, "test"), (control_task, "val"), (control_task, "test")]
        curve = AlphaCurve(ctx, items, tv, sign=-1.0, mode=mode, progress=progress)
        mine: list[dict] = []
        correct: list[list[np.ndarray | None]] = []
        accs_rows: list[np.ndarray] = []

        def evaluate(points: list[float]) -> None:
            accs, corr = curve.evaluate(points)  # noqa: B023 - used within this target's search only
            correct.extend(corr)  # noqa: B023
            accs_rows.extend(accs)  # noqa: B023
            for i, a in enumerate(points):
                for k, s in enumerate(SPLITS):
                    mine.append({"target": target, "alpha": float(a), "split": s,  # noqa: B023
                                 "target_acc": accs[i, k], "control_acc": accs[i, 2 + k]})

        def choose() -> float:
            val = pd.DataFrame([r for r in mine if r["split"] == "val"])  # noqa: B023
            return select_negation_alpha(val, zs["val"], threshold)

        alphas_t, best, extended[target] = extend_search(grids[target], evaluate, choose, extend)
        grids[target] = alphas_t
        rows += mine
        accs = np.asarray(accs_rows)
        selected[target] = best
        i = int(np.argmin(np.abs(np.asarray(alphas_t, dtype=float) - best)))
        per_task.append({"target": target, "alpha": best, "target_acc": accs[i, 1], "control_acc": accs[i, 3]})
        examples[target] = {"target": _at(ctx, correct, i, 1, target, "test"),
                            "control": _at(ctx, correct, i, 3, control_task, "test")}
    table = pd.DataFrame(rows, columns=["target", "alpha", "split", "target_acc", "control_acc"])
    per = pd.DataFrame(per_task, columns=["target", "alpha", "target_acc", "control_acc"])
    summary = {"target_acc": float(per["target_acc"].mean()), "control_acc": float(per["control_acc"].mean())}
    ci95 = stats.negation_intervals({t: e["target"] for t, e in examples.items()},
                                    {t: e["control"] for t, e in examples.items()})
    union = sorted({float(a) for g in grids.values() for a in g})
    same = len({tuple(g) for g in grids.values()}) == 1 and not isinstance(alphas, Mapping)
    return NegationResult(table, control_task, selected, zs, per, summary, threshold,
                          next(iter(grids.values())) if same else union, mode, examples, ci95,
                          {t: [float(a) for a in g] for t, g in grids.items()}, extend, extended,
                          len(ctx.labels(control_task, "val")))


def default_control_task(tasks: Sequence[str]) -> str:
    """The registered control task (``TaskSpec.control``) of the tasks' modality, offline ones first."""
    from talos_core.tasks import get_task, list_tasks

    modality = get_task(tasks[0]).modality
    taken = [s.name for s in list_tasks() if s.control and s.modality == modality and s.source == "offline"
             and s.name in tasks]
    if taken:  # the registered offline control is a target: falling back to an online one would fail late
        raise TalosError(f"the control task of {modality} tasks, {taken[0]!r}, is among the negation targets "
                         f"({', '.join(tasks)}); remove it from --tasks or pass another one with --control-task")
    cands = [s for s in list_tasks() if s.control and s.modality == modality and s.name not in tasks]
    cands.sort(key=lambda s: s.source != "offline")
    if not cands:
        raise TalosError(f"no control task is registered for {modality} tasks outside {', '.join(tasks)}; "
                         f"pass one with --control-task")
    return cands[0].name
