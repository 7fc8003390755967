"""The lesson's model (pure: no Streamlit): its steps and the position in them, the words for numbers, what it reads
from a store (:class:`Lesson`, :func:`load_lesson`) and what one screen holds (:class:`Screen`, its α controls,
:func:`projector` for the back of a room). :mod:`dashboard.lesson_screens` fills the screens; :mod:`dashboard.lesson`
re-exports both.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from dashboard import data
from dashboard.figures_examples import Gallery
from talos_core import result_arrays, schema
from talos_core.errors import TalosError
from talos_core.result_arrays import ExampleSet
from talos_core.schema import MissingResult

#: the lesson's screens, in order: (URL key, title)
STEPS: tuple[tuple[str, str], ...] = (
    ("task-vector", "What is a task vector?"),
    ("add", "Add task vectors: one model, many tasks"),
    ("negate", "Negate a task vector: forget a task"),
    ("interference", "Why do tasks interfere?"),
    ("masks", "Where does the sparse method train?"),
    ("sparsity", "What does sparsity buy?"),
)
N_STEPS = len(STEPS)

EXACT = "exact"
FIRST_ORDER = "first-order"
SOURCE_WORDS = {EXACT: "exact: the real edited model, evaluated on stored test examples",
                FIRST_ORDER: "first-order: a straight-line approximation of the edited model (not the model itself)"}

#: layer types of SCHEMA.md ``masks`` in words a student knows (the answer's words and the mask map's rows)
LAYER_WORDS = {"embedding": "embeddings", "conv": "convolutions", "q": "attention queries", "k": "attention keys",
               "v": "attention values", "qkv": "attention queries, keys, values", "attn_out": "attention outputs",
               "mlp_in": "feed-forward inputs", "mlp_out": "feed-forward outputs", "layernorm": "normalization layers",
               "bias": "biases", "other": "other layers"}

#: the projector's chart heights (px): a 1280×720 screen holds the title, the chart and one row of examples
CHART_HEIGHT = 320
MAP_HEIGHT = 360
CHART_FONT = 16


# --------------------------------------------------------------------------------------------
# position in the lesson
# --------------------------------------------------------------------------------------------
def parse_position(step: Any, reveal: Any, n: int = N_STEPS) -> tuple[int, bool]:
    """The step (1…n) and reveal flag a URL names (``?step=3&reveal=1``); anything else opens step 1, unrevealed.

    >>> parse_position("3", "1"), parse_position("9", "true"), parse_position("x", None), parse_position("2", "0")
    ((3, True), (6, True), (1, False), (2, False))
    """
    try:
        s = int(str(step))
    except (TypeError, ValueError):
        s = 1
    return min(max(s, 1), n), str(reveal).lower() in ("1", "true", "yes")


def move(step: int, reveal: bool, delta: int, n: int = N_STEPS) -> tuple[int, bool]:
    """One click forward (``delta=+1``: show the answer, then the next step's question) or back (``-1``: the reverse),
    stopping at the ends."""
    order = [(s, r) for s in range(1, n + 1) for r in (False, True)]
    i = order.index((min(max(step, 1), n), bool(reveal)))
    return order[min(max(i + delta, 0), len(order) - 1)]


# --------------------------------------------------------------------------------------------
# words
# --------------------------------------------------------------------------------------------
def pct(x: float, digits: int = 0) -> str:
    """An accuracy (0–1) as a percentage for the room; "—" when unknown."""
    # a no-break space: "2.3 %" never breaks across two lines of the projector
    return "—" if x is None or not math.isfinite(float(x)) else f"{100 * float(x):.{digits}f}\u00a0%"


def points(d: float) -> str:
    """A difference of accuracies in percentage points, signed."""
    return "—" if d is None or not math.isfinite(float(d)) else f"{100 * float(d):+.0f} points"


def num(x: float) -> str:
    """An α or a ξ as the room reads it (3 significant digits)."""
    return f"{float(x):.3g}"


# --------------------------------------------------------------------------------------------
# what the lesson reads
# --------------------------------------------------------------------------------------------
Getter = Callable[[str, str], Any]
"""``get(kind, name)``: the typed result (:data:`dashboard.data.LOADERS`; ``"examples"``: an
:class:`~talos_core.result_arrays.ExampleSet`), ``None`` when the store does not have it."""


def store_getter(root: str | Path) -> Getter:
    """A :data:`Getter` reading ``root`` directly (no cache): for tests, notebooks and scripts."""

    def get(kind: str, name: str) -> Any:
        try:
            if kind == "examples":
                return result_arrays.load_examples(root, name)
            return data.LOADERS[kind](root, name)
        except MissingResult:
            return None

    return get


@dataclass(frozen=True)
class Lesson:
    """The results one lesson shows (:func:`load_lesson`)."""

    suite: str
    model: str
    first: str  # the method of steps 1–4: standard fine-tuning when the store has it
    method: str  # the sparse method of steps 5–6: TaLoS when the store has it
    tasks: tuple[str, ...]
    task1: str  # the task the screens follow
    task2: str | None  # the second task of the interference screen (a pair with a ξ map)
    zero_shot: dict[str, float]
    finetuned: dict[str, dict[str, float]]  # method -> task -> test accuracy of θ0 + τ_task
    addition: dict[str, data.Addition] = field(default_factory=dict)
    negation: dict[str, data.Negation] = field(default_factory=dict)
    xi: dict[str, dict] = field(default_factory=dict)  # method -> disentanglement payload of (task1, task2)
    masks: pd.DataFrame | None = None  # the sparse method's masks (SCHEMA.md ``masks``)
    comparison: pd.DataFrame | None = None
    efficiency: pd.DataFrame | None = None
    examples: dict[str, ExampleSet] = field(default_factory=dict)
    examples_problems: dict[str, str] = field(default_factory=dict)  # method -> why its examples cannot be read
    suite_record: dict | None = None
    pairs: tuple[tuple[str, str], ...] = ()
    block_word: str = "block"
    flags: tuple = ()  # the audit's flags on this suite (talos_core.evaluation.audit): the screens say what they doubt

    @property
    def baseline(self) -> str | None:
        """The method the sparse one is compared with (``None`` when the lesson has only one)."""
        return self.first if self.first != self.method else None

    @property
    def control(self) -> str | None:
        neg = self.negation.get(self.first)
        return neg.control_task if neg is not None else None


def methods_of(idx: pd.DataFrame, suite: str, model: str) -> list[str]:
    """The methods a lesson can follow (they have addition results), in the dashboard's order."""
    return data.order_methods(data.available(idx, "method", kind="addition", suite=suite, model=model))


def pairs_of(idx: pd.DataFrame, suite: str, model: str, method: str,
             suite_record: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
    """The task pairs with a stored ξ map for ``method``, those the suite record declares (``xi_pairs``) first, in
    its order."""
    rows = idx[(idx["kind"] == "disentanglement") & (idx["suite"] == suite) & (idx["model"] == model)
               & (idx["method"] == method)]
    stored = list(dict.fromkeys((str(r.task1), str(r.task2)) for r in rows.itertuples()))
    declared = [tuple(map(str, p)) for p in (suite_record or {}).get("xi_pairs") or [] if isinstance(p, list)]
    return sorted(stored, key=lambda p: declared.index(p) if p in declared else len(declared))


def load_lesson(idx: pd.DataFrame, get: Getter, suite: str, model: str, *, method: str | None = None,
                first: str | None = None, pair: tuple[str, str] | None = None, block_word: str = "block",
                flags: Sequence = ()) -> Lesson:
    """Read what the lesson shows for ``suite`` and ``model``: ``method`` (default TaLoS, else the first sparse
    method, else the first method) and ``first`` (default standard fine-tuning, ``nonlinear``, else ``method``);
    ``pair`` the two tasks of the interference screen (default the first pair with a ξ map). Raises
    :class:`MissingResult` (one sentence) when the store has no addition or single-task results for them."""
    methods = methods_of(idx, suite, model)
    if not methods:
        raise MissingResult(f"the lesson needs addition results; this store has none for {model} in suite {suite}")
    for m in (method, first):
        if m is not None and m not in methods:
            raise MissingResult(f"no addition results for {m!r} in suite {suite}; the lesson can follow: "
                                f"{', '.join(methods)}")
    if method is None:
        sparse = [m for m in methods if schema.method_info(schema.base_method_of(m) or m).sparse]
        method = "talos" if "talos" in methods else (sparse[0] if sparse else methods[0])
    if first is None:
        first = "nonlinear" if "nonlinear" in methods else method
    single = get("single", schema.result_name(suite, model))
    if single is None:
        raise MissingResult(f"the lesson needs single-task results; this store has none for {model} in suite {suite}")
    name = lambda *parts: schema.result_name(suite, model, *parts)  # noqa: E731
    addition = {m: a for m in dict.fromkeys([first, method]) if (a := get("addition", name(m))) is not None}
    tasks = tuple(addition[first].tasks)
    zs, _ = data.single_reference(single, first, tasks)
    finetuned = {m: dict(zip(tasks, data.single_reference(single, m, tasks)[1]))
                 for m in dict.fromkeys([first, method])}
    negation = {m: n for m in dict.fromkeys([first, method])
                if data.available(idx, "name", kind="negation", suite=suite, model=model, method=m)
                and (n := get("negation", name(m))) is not None}
    suite_record = get("suite", suite)
    suite_record = suite_record if isinstance(suite_record, dict) else None
    pairs = tuple(pairs_of(idx, suite, model, first, suite_record))
    if pair is None or pair not in pairs:
        pair = pairs[0] if pairs else (tasks[0], tasks[1] if len(tasks) > 1 else None)
    task1, task2 = pair
    xi = {}
    if task2 is not None:
        for m in dict.fromkeys([first, method]):
            if data.available(idx, "name", kind="disentanglement", suite=suite, model=model, method=m,
                              task1=task1, task2=task2):
                xi[m] = get("disentanglement", name(m, task1, task2))
    has = lambda kind, *parts: bool(((idx["kind"] == kind) & (idx["name"] == name(*parts))).any())  # noqa: E731
    examples, problems = {}, {}
    for m in dict.fromkeys([first, method]):
        try:  # a broken examples file costs the galleries (the screens say why), never the lesson
            ex = get("examples", name(m))
        except TalosError as exc:
            problems[m] = str(exc)
            continue
        if ex is not None:
            examples[m] = ex
    return Lesson(suite=suite, model=model, first=first, method=method, tasks=tasks, task1=task1, task2=task2,
                  zero_shot=dict(zip(tasks, zs)), finetuned=finetuned, addition=addition, negation=negation, xi=xi,
                  masks=get("masks", name(method)) if has("masks", method) else None,
                  comparison=get("comparison", name()) if has("comparison") else None,
                  efficiency=get("efficiency", name()) if has("efficiency") else None,
                  examples=examples, examples_problems=problems, suite_record=suite_record,
                  pairs=pairs, block_word=block_word, flags=tuple(flags))


# --------------------------------------------------------------------------------------------
# one screen
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AlphaControl:
    """The screen's α picker: ``param`` (its URL query key), the exact grid points offered and the one shown."""

    param: str
    label: str
    options: tuple[float, ...]
    value: float


@dataclass
class Screen:
    """One step of the lesson, ready to draw. Texts are Markdown with store-supplied names as plain text."""

    number: int
    key: str
    title: str
    idea: list[str]
    question: str
    answer: list[str]
    figure: go.Figure | None = None
    source: str = EXACT  # what the chart shows (:data:`EXACT` for every stored result)
    control: AlphaControl | None = None
    galleries: list[tuple[str, Gallery]] = field(default_factory=list)
    examples_note: str = ""  # why there are no examples, when there are none
    table: pd.DataFrame | None = None  # the numbers behind the screen
    missing: str | None = None  # one sentence when the store lacks this screen's results


def snap_alpha(options: Sequence[float], value: Any, default: float) -> float:
    """``value`` (a URL's α, any text) as the nearest of ``options``; ``default`` when it is not a number.

    >>> snap_alpha([0.0, 0.5, 1.0], "0.6", 1.0), snap_alpha([0.0, 0.5, 1.0], "x", 1.0)
    (0.5, 1.0)
    """
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = float("nan")
    if not math.isfinite(v):
        v = default
    return float(data.snap(options, v)[0])


def addition_alpha(lesson: Lesson, value: Any = None) -> AlphaControl | None:
    """The α of the addition and interference screens: a point of the standard method's addition grid (the chart
    and the examples show exactly that model), the α chosen on validation by default."""
    add = lesson.addition.get(lesson.first)
    if add is None:
        return None
    options = tuple(float(a) for a in add.alphas)
    return AlphaControl("alpha", "α (scales the sum of the task vectors)", options,
                        snap_alpha(options, value, add.selected_alpha))


def negation_alpha(lesson: Lesson, value: Any = None) -> AlphaControl | None:
    """The α of the negation screen: a point of the target's negation grid, the one chosen on validation by
    default."""
    neg = lesson.negation.get(lesson.first)
    target = negation_target(lesson)
    if neg is None or target is None:
        return None
    options = tuple(float(a) for a in neg.grid(target))
    return AlphaControl("nalpha", f"α (how much of τ_{target} is subtracted)", options,
                        snap_alpha(options, value, neg.selected.get(target, options[-1])))


def negation_target(lesson: Lesson) -> str | None:
    neg = lesson.negation.get(lesson.first)
    if neg is None or not neg.targets:
        return None
    return lesson.task1 if lesson.task1 in neg.targets else neg.targets[0]


def projector(fig: go.Figure) -> go.Figure:
    """``fig`` for the back of a room: every text at least :data:`CHART_FONT` − 1 px (Streamlit's theme sets the
    axes' and legend's own sizes, so each is set), the lesson's chart height; a heatmap (no legend band) taller and
    starting under its title."""
    f = CHART_FONT
    heatmap = any(t.type == "heatmap" for t in fig.data)
    legend_band = (fig.layout.margin.t or 0) > 100  # a legend of several rows above the plot (negation bars)
    height = MAP_HEIGHT if heatmap else CHART_HEIGHT + (70 if legend_band else 0)
    fig.update_layout(font={"size": f}, title={"font": {"size": f + 2}}, legend={"font": {"size": f - 1}},
                      height=height)
    if legend_band:
        fig.update_layout(margin={"t": 115}, legend={"y": 1 - 34 / height})
    if heatmap:
        fig.update_layout(margin={"t": 50})
        fig.update_traces(colorbar={"tickfont": {"size": f - 2}, "title": {"font": {"size": f - 1}}},
                          selector={"type": "heatmap"})
    fig.update_xaxes(tickfont={"size": f - 1}, title={"font": {"size": f}})
    fig.update_yaxes(tickfont={"size": f - 1}, title={"font": {"size": f}})
    fig.update_traces(textfont={"size": f - 1}, selector={"type": "bar"})
    return fig
