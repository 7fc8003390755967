"""The lesson's six screens (pure: no Streamlit): each builder fills a :class:`~dashboard.lesson_core.Screen` from a
:class:`~dashboard.lesson_core.Lesson` (the idea, the question, the answer computed from the store, the chart, the
examples and the numbers) and :func:`screen` builds one by its number.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard import data, figures, figures_examples
from dashboard.figures_examples import Gallery
from dashboard.lesson_core import (
    CHART_FONT,
    LAYER_WORDS,
    N_STEPS,
    STEPS,
    Lesson,
    Screen,
    addition_alpha,
    negation_alpha,
    negation_target,
    num,
    pct,
    points,
    projector,
)
from dashboard.plain import md, plain_figure
from talos_core.errors import TalosError
from talos_core.evaluation.audit import check_info
from talos_core.schema import MissingResult, method_label


# --------------------------------------------------------------------------------------------
# words
# --------------------------------------------------------------------------------------------
def _name(value: Any) -> str:
    """A store-supplied name inside a Markdown line, as plain text."""
    return md(value, at_start=False)


def _compare(a: float, b: float, interval_a: tuple[float, float] | None = None,
             interval_b: tuple[float, float] | None = None, *, tolerance: float = 0.005) -> str:
    """``"higher"``, ``"lower"`` or ``"about the same"``: the same when the difference is below ``tolerance`` or the
    two 95 % intervals overlap (when known).

    >>> _compare(0.8, 0.7), _compare(0.8, 0.798), _compare(0.82, 0.80, (0.80, 0.84), (0.78, 0.81))
    ('higher', 'about the same', 'about the same')
    """
    if not (math.isfinite(a) and math.isfinite(b)):
        return "not comparable"
    if abs(a - b) < tolerance:
        return "about the same"
    if (interval_a and interval_b and all(math.isfinite(v) for v in (*interval_a, *interval_b))
            and interval_a[0] <= interval_b[1] and interval_b[0] <= interval_a[1]):
        return "about the same"
    return "higher" if a > b else "lower"


def _first_label(lesson: Lesson) -> str:
    if lesson.first == "nonlinear":
        return "standard fine-tuning"
    return method_label(lesson.first)


def _mean(values: Any) -> float:
    arr = np.asarray(list(values), dtype=float)
    return float(np.nanmean(arr)) if np.isfinite(arr).any() else float("nan")


# --- 1 · task vector ---------------------------------------------------------------------------
def _task_vector(lesson: Lesson, s: Screen, *, reveal: bool, **_: Any) -> None:
    t = _name(lesson.task1)
    m = lesson.first
    zs, ft = lesson.zero_shot.get(lesson.task1, float("nan")), lesson.finetuned[m].get(lesson.task1, float("nan"))
    s.idea = ["A pre-trained model is a long list of numbers: its **weights**, written **θ0** (theta-zero).",
              f"Fine-tuning it on a task, say **{t}**, changes those numbers into **θ_{t}**.",
              f"The **task vector** is that change: **τ_{t} = θ_{t} − θ0** (tau). It is an edit you can keep, "
              "and add back to θ0 later."]
    s.question = (f"Before fine-tuning, θ0 gets **{pct(zs)}** of the {t} test examples right. "
                  f"What will **θ0 + τ_{t}** get?")
    tasks = list(lesson.tasks)
    zs_all = [lesson.zero_shot[x] for x in tasks]
    ft_all = [lesson.finetuned[m].get(x, float("nan")) for x in tasks]
    s.table = pd.DataFrame({"task": tasks, "zero-shot θ0": zs_all, "θ0 + τ_task (fine-tuned)": ft_all})
    if not reveal:
        s.figure = figures.arithmetic_bars(tasks, zs_all, color=figures.ZERO_SHOT_COLOR, name="zero-shot θ0",
                                           title="Exact · before fine-tuning: θ0 on each task (test accuracy)")
        return
    s.answer = [f"**{pct(ft)}** ({points(ft - zs)} on {t}).",
                f"Over all {len(tasks)} tasks: from {pct(_mean(zs_all))} to {pct(_mean(ft_all))} on average, "
                f"each task with its own vector ({_name(_first_label(lesson))})."]
    s.figure = figures.arithmetic_bars(tasks, ft_all, method=m, name="θ0 + τ_task", zero_shot=zs_all,
                                       title="Exact · each task vector alone: θ0 + τ_task (test accuracy)")
    g = _vector_gallery(lesson, s, m, lesson.task1, lesson.task1, f"θ0 + τ_{lesson.task1} on {lesson.task1}")
    if g is None:
        return
    learned = int((g.table["status"] == "learned").sum())
    s.answer.append(f"Below: {len(g.table)} {t} test examples; {learned} went from wrong to right.")


def _vector_gallery(lesson: Lesson, s: Screen, method: str, row: str, col: str | None, title: str) -> Gallery | None:
    """The screen's gallery: ``col``'s examples under θ0 + τ_row of ``method`` (exact, stored with the examples);
    ``None``, and the screen's note says why, when the store does not have them."""
    ex = lesson.examples.get(method)
    if ex is None or col is None or ex.single(row, col) is None:
        s.examples_note = _no_examples(lesson, method)
        return None
    g = figures_examples.localization_gallery(ex, row, col)
    s.galleries = [(title, g)]
    return g


def _no_examples(lesson: Lesson, method: str) -> str:
    """Why a screen has no examples: the store's problem with them, or that they were never computed."""
    if method in lesson.examples_problems:
        return f"No examples: {md(lesson.examples_problems[method], at_start=False)}."
    return (f"No per-example predictions of {_name(method_label(method))} in this store: `talos examples` computes "
            "them from the runs' task vectors.")


# --- 2 · addition ------------------------------------------------------------------------------
def _add(lesson: Lesson, s: Screen, *, reveal: bool, alpha: Any = None, **_: Any) -> None:
    m = lesson.first
    add = lesson.addition.get(m)
    tasks = list(lesson.tasks)
    names = " + ".join(f"τ_{_name(x)}" for x in tasks[:3]) + (" + …" if len(tasks) > 3 else "")
    s.idea = [f"Add the task vectors of all {len(tasks)} tasks to θ0: **θ = θ0 + α·({names})**.",
              "**α** (alpha) is a volume knob: it scales the sum. α = 0 is the pre-trained model.",
              "**Normalized accuracy** = the merged model's accuracy ÷ the task's own fine-tuned model's. "
              f"{pct(1.0)} = nothing lost."]
    s.question = (f"One model for {len(tasks)} tasks, no extra training. How much of each fine-tuned model's "
                  "accuracy will it keep?")
    ft = [lesson.finetuned[m].get(x, float("nan")) for x in tasks]
    zs = [lesson.zero_shot[x] for x in tasks]
    if add is None:
        s.missing = f"No addition results for {_name(method_label(m))} in this store."
        return
    ctl = addition_alpha(lesson, alpha)
    s.control = ctl
    a, exact = data.addition_at(add, ctl.value)
    s.table = exact.rename(columns={"normalized_accuracy": "normalized accuracy"}).assign(alpha=a)
    if not reveal:
        s.control = None
        s.figure = figures.arithmetic_bars(tasks, ft, method=m, name="own fine-tuned model", opacity=0.5,
                                           title="Exact · each task's own fine-tuned model θ0 + τ_task")
        return
    norm = exact["normalized_accuracy"].to_numpy(dtype=float)
    s.figure = figures.arithmetic_bars(tasks, exact["accuracy"].to_numpy(dtype=float), method=m,
                                       name=f"θ0 + {num(a)}·Σ τ", zero_shot=zs, single_task=ft,
                                       title=f"Exact · all {len(tasks)} vectors added at α = {num(a)} (test accuracy)")
    best, worst = int(np.nanargmax(norm)), int(np.nanargmin(norm))
    s.answer = [f"At α = {num(a)} it keeps **{pct(_mean(norm))}** of the fine-tuned accuracy on average "
                "(normalized accuracy).",
                f"Best kept: {_name(tasks[best])} ({pct(norm[best])}); least: {_name(tasks[worst])} "
                f"({pct(norm[worst])})." if norm[best] - norm[worst] >= 0.005 else
                "Every task keeps about the same share."]
    lo, hi = float(add.alphas.min()), float(add.alphas.max())
    ends = {x: _mean(data.addition_at(add, x)[1]["normalized_accuracy"]) for x in (lo, hi)}
    chosen = ("this one" if abs(a - add.selected_alpha) <= 1e-9 else num(add.selected_alpha))
    s.answer.append(f"At α = {num(lo)}: {pct(ends[lo])}; at α = {num(hi)}: {pct(ends[hi])}. The α chosen on "
                    f"validation data is {chosen}.")
    ex = lesson.examples.get(m)
    if ex is None or lesson.task1 not in ex.tasks:
        s.examples_note = _no_examples(lesson, m)
        return
    g = figures_examples.addition_gallery(ex, lesson.task1, {x: a for x in ex.tasks})
    s.galleries = [(f"{lesson.task1} under θ0 + {num(a)}·Σ τ", g)]


# --- 3 · negation ------------------------------------------------------------------------------
def _negate(lesson: Lesson, s: Screen, *, reveal: bool, nalpha: Any = None, **_: Any) -> None:
    m = lesson.first
    neg = lesson.negation.get(m)
    target = negation_target(lesson)
    if neg is None or target is None:
        s.idea = ["Subtracting a task vector makes a model forget that task."]
        s.question = "What would you expect to forget, and what to keep?"
        s.missing = f"No negation results for {_name(method_label(m))} in this store."
        return
    t, c = _name(target), _name(neg.control_task)
    s.idea = [f"Subtract a task vector: **θ = θ0 − α·τ_{t}**.",
              f"The model should **forget** {t} …",
              f"… and **keep** everything else. We check that on a task nobody trained here: **{c}** "
              "(the *control* task)."]
    s.question = f"We subtract τ_{t}. What happens to {t}? And to {c}?"
    zs_t = lesson.zero_shot.get(target, float("nan"))
    czs = neg.control_zero_shot.get("test", float("nan"))
    ctl = negation_alpha(lesson, nalpha)
    a, tacc, cacc = data.negation_at(neg, target, ctl.value)
    s.table = pd.DataFrame({"model": ["θ0 (zero-shot)", f"θ0 − {num(a)}·τ_{target}"], target: [zs_t, tacc],
                            neg.control_task: [czs, cacc]})
    if not reveal:
        s.figure = figures.arithmetic_bars([target, neg.control_task], [zs_t, czs], color=figures.ZERO_SHOT_COLOR,
                                           name="zero-shot θ0", title="Exact · before: θ0 on the target and the "
                                                                      "control task (test accuracy)")
        return
    s.control = ctl
    s.figure = figures.negation_bars([target], [tacc], [cacc], control_task=neg.control_task, zero_shot_target=[zs_t],
                                     control_zero_shot=czs, method=m,
                                     title=f"Exact · θ0 − {num(a)}·τ_{target} (test accuracy)")
    kept = cacc / czs if czs else float("nan")
    rule = f"the rule asks for at least {pct(0.95)}: " + ("kept" if kept >= 0.95 else "not kept at this α")
    s.answer = [f"{t}: **{pct(zs_t)} → {pct(tacc)}** ({points(tacc - zs_t)}).",
                f"{c}: {pct(czs)} → {pct(cacc)}: it keeps **{pct(kept)}** of its zero-shot accuracy ({rule}).",
                f"The α chosen on validation data is {num(neg.selected.get(target, a))}, by the rule: the lowest {t} "
                f"accuracy whose control accuracy stays at {pct(0.95)} of zero-shot or more."]
    ex = lesson.examples.get(m)
    if ex is None or target not in ex.tasks:
        s.examples_note = _no_examples(lesson, m)
        return
    tg, cg = figures_examples.negation_gallery(ex, target, a)
    s.galleries = [(f"target {target}", tg)] + ([(f"control {cg.task}", cg)] if cg is not None else [])


# --- 4 · interference --------------------------------------------------------------------------
def xi_at(payload: Mapping[str, Any], alpha1: float, alpha2: float) -> tuple[float, float, float]:
    """ξ at the stored grid point nearest ``(alpha1, alpha2)``, and that point."""
    a1, a2 = np.asarray(payload["alphas1"], dtype=float), np.asarray(payload["alphas2"], dtype=float)
    i, j = int(np.argmin(np.abs(a1 - alpha1))), int(np.argmin(np.abs(a2 - alpha2)))
    return float(np.asarray(payload["xi"], dtype=float)[i, j]), float(a1[i]), float(a2[j])


@plain_figure
def xi_marked(payload: Mapping[str, Any], alpha: float, *, title: str, zmax: float | None = None) -> go.Figure:
    """The stored ξ map (:func:`dashboard.figures.xi_heatmap`) with the point (α, α) marked as a white diamond."""
    t1, t2 = str(payload.get("task1", "task 1")), str(payload.get("task2", "task 2"))
    fig = figures.xi_heatmap(payload["alphas1"], payload["alphas2"], payload["xi"], task1=t1, task2=t2,
                             search_region=payload.get("search_region"), zmax=zmax, title=title)
    fig.add_trace(go.Scatter(x=[alpha], y=[alpha], mode="markers", showlegend=False,
                             marker={"symbol": "diamond", "size": 16, "color": "white",
                                     "line": {"color": "black", "width": 2}},
                             hovertemplate="the α of the addition step<extra></extra>"))
    fig.add_annotation(x=alpha, y=alpha, text=f"α = {num(alpha)}", showarrow=True, arrowhead=0, ax=45, ay=-35,
                       bgcolor="rgba(255,255,255,0.9)", font={"size": CHART_FONT - 1})
    return fig


def _interference(lesson: Lesson, s: Screen, *, reveal: bool, alpha: Any = None, **_: Any) -> None:
    m = lesson.first
    t1, t2 = lesson.task1, lesson.task2
    s.idea = ["A task vector is trained on one task, but it changes the whole network. So it can also change "
              "what the model says on *other* tasks.",
              f"**ξ** (xi, the *disentanglement error*) measures that for two tasks: the share of {_name(t1)} "
              f"examples whose prediction changes when τ_{_name(t2)} is added, plus the same share for "
              f"{_name(t2)}. 0 = no interference, 2 = every prediction changes.",
              "The map: α of each task on the axes. Dark = little interference. ◆ = the α of the addition step; "
              "red box = the α's searched for addition."]
    s.question = "Is the marked point in a dark or a bright region? Where does interference grow?"
    payload = lesson.xi.get(m)
    ctl = addition_alpha(lesson, alpha)
    if payload is None or ctl is None or t2 is None:
        s.missing = f"No ξ map of {_name(method_label(m))} in this store (`talos disentangle` computes one)."
        return
    s.control = ctl
    a = ctl.value
    s.figure = xi_marked(payload, a, title=f"Exact · ξ({t1}, {t2}), {_first_label(lesson)}")
    xi, p1, p2 = xi_at(payload, a, a)
    a1, a2 = np.asarray(payload["alphas1"], dtype=float), np.asarray(payload["alphas2"], dtype=float)
    grid = np.asarray(payload["xi"], dtype=float)
    near = grid[np.ix_(np.abs(a1) <= 0.5, np.abs(a2) <= 0.5)]
    s.table = pd.DataFrame({"α1": [p1], "α2": [p2], "ξ": [xi], "mean ξ near 0 (|α| ≤ 0.5)": [_mean(near.ravel())],
                            "largest ξ on the map": [float(np.nanmax(grid))]})
    if not reveal:
        return
    inside = a1.min() <= a <= a1.max() and a2.min() <= a <= a2.max()
    s.answer = [(f"At the marked point ξ = **{xi:.2f}** (read at the nearest computed point, α = "
                 f"{num(p1) if p1 == p2 else f'({num(p1)}, {num(p2)})'}): "
                 + _shares(payload, p1, p2, xi) + ".") if inside else
                f"α = {num(a)} lies outside the stored map (α from {num(a1.min())} to {num(a1.max())})."]
    far = grid[np.ix_(np.abs(a1) >= 2, np.abs(a2) >= 2)]
    n_near, n_far = _mean(near.ravel()), _mean(far.ravel())
    if math.isfinite(n_near) and math.isfinite(n_far):
        grows = ("the farther the vectors push, the more they collide" if n_far > n_near + 0.05 else
                 "here interference does not grow with α")
        s.answer.append(f"ξ averages {n_near:.2f} near the origin (|α| ≤ 0.5) and {n_far:.2f} far from it "
                        f"(|α| ≥ 2): {grows}.")
    g = _vector_gallery(lesson, s, m, t1, t2, f"τ_{t1} (trained on {t1} only) on {t2}")
    if g is None:
        return
    s.answer.append(f"Below: τ_{_name(t1)} alone changes **{g.changed} of {len(g.table)} {_name(t2)}** examples, "
                    f"a task it never trained on. Added together, such changes collide.")


def _shares(payload: Mapping[str, Any], p1: float, p2: float, xi: float) -> str:
    """What ξ at a stored point means in examples: the share of each task's predictions that change (the two terms,
    when the result stores them), else their mean."""
    t1, t2 = _name(payload.get("task1", "task 1")), _name(payload.get("task2", "task 2"))
    try:
        a1, a2 = np.asarray(payload["alphas1"], dtype=float), np.asarray(payload["alphas2"], dtype=float)
        i, j = int(np.argmin(np.abs(a1 - p1))), int(np.argmin(np.abs(a2 - p2)))
        s1 = float(np.asarray(payload["xi_task1"], dtype=float)[i, j])
        s2 = float(np.asarray(payload["xi_task2"], dtype=float)[i, j])
    except (KeyError, TypeError, ValueError, IndexError):
        return f"on average {pct(xi / 2)} of each task's predictions change"
    return f"{pct(s1)} of the {t1} predictions and {pct(s2)} of the {t2} predictions change"


# --- 5 · masks ---------------------------------------------------------------------------------
def mask_facts(masks: pd.DataFrame, task: str) -> dict[str, Any]:
    """What the room hears about one task's mask: the trainable fraction of all weights, the block and the layer
    type holding the largest share of the trainable weights, and the blocks with none.

    >>> df = pd.DataFrame({"task": "a", "block": [0, 1, 1], "layer_type": ["q", "q", "k"], "numel": [10, 10, 20],
    ...                    "trainable": [0, 6, 4]})
    >>> f = mask_facts(df, "a")
    >>> f["fraction"], f["top_block"], f["top_block_share"], f["top_type"], f["empty_blocks"]
    (0.25, '1', 1.0, 'q', ['0'])
    """
    sub = masks[masks["task"] == task]
    if sub.empty:
        raise MissingResult(f"the masks result has no mask for task {task!r}")
    total, trainable = float(sub["numel"].sum()), float(sub["trainable"].sum())
    label = lambda b: "outside the blocks" if int(b) < 0 else str(int(b))  # noqa: E731
    by_block = sub.groupby("block")["trainable"].sum()
    by_type = sub.groupby("layer_type")["trainable"].sum()
    share_block = by_block / trainable if trainable else by_block * 0.0
    share_type = by_type / trainable if trainable else by_type * 0.0
    tb, tt = share_block.idxmax(), share_type.idxmax()
    return {"fraction": trainable / total if total else float("nan"), "trainable": int(trainable),
            "total": int(total), "top_block": label(tb), "top_block_share": float(share_block[tb]),
            "top_type": str(tt), "top_type_share": float(share_type[tt]),
            "empty_blocks": [label(b) for b in sorted(by_block.index) if by_block[b] == 0 and int(b) >= 0]}


def _masks(lesson: Lesson, s: Screen, *, reveal: bool, **_: Any) -> None:
    m = lesson.method
    label = _name(method_label(m))
    s.title = f"Where does {method_label(m)} train?"
    s.idea = [f"**{label}** (task-localized sparse fine-tuning) trains only a few weights and freezes the rest.",
              "Before training it measures each weight's **gradient** (how strongly the output reacts to it) on the "
              "task's data, and keeps trainable the weights with the **smallest** gradients: changing them barely "
              "disturbs what the model does elsewhere.",
              "The list of weights allowed to change is the **mask**."]
    if lesson.masks is None:
        s.question = f"Where in the network would you expect {label} to train?"
        s.missing = f"No masks of {label} in this store ({label} may be a dense method: it trains every weight)."
        return
    try:
        f = mask_facts(lesson.masks, lesson.task1)
    except TalosError as exc:
        s.question = f"Where in the network would you expect {label} to train?"
        s.missing = md(exc)
        return
    t = _name(lesson.task1)
    bw = lesson.block_word
    s.question = (f"{label} trains **{pct(f['fraction'], 1)}** of the weights for {t}. Where in the network are they: "
                  f"first {bw}s, last {bw}s, or everywhere?")
    sub = lesson.masks[lesson.masks["task"] == lesson.task1]
    s.table = figures.mask_density_grid(sub).reset_index()
    if not reveal:
        tasks = [t for t in lesson.tasks if t in set(lesson.masks["task"].astype(str))]
        s.figure = task_bars({m: [mask_facts(lesson.masks, t)["fraction"] for t in tasks]}, tasks,
                             title=f"Stored masks · share of the weights {method_label(m)} trains, per task",
                             y_title="trainable share", text=lambda v: pct(v, 1))
        return
    s.figure = figures.mask_density_heatmap(sub, title=f"Stored mask · {method_label(m)} for {lesson.task1}: "
                                                       f"trainable fraction per {bw} and layer type")
    rows = list(s.figure.data[0].y)
    s.figure.update_yaxes(title={"text": None}, tickvals=rows, ticktext=[LAYER_WORDS.get(r, r) for r in rows])
    s.figure.update_xaxes(title={"text": bw})
    top_type = LAYER_WORDS.get(f["top_type"], f["top_type"])
    s.answer = [f"{f['trainable']:,} of {f['total']:,} weights. {_name(bw).capitalize()} {_name(f['top_block'])} holds "
                f"**{pct(f['top_block_share'])}** of them; by layer type, {pct(f['top_type_share'])} are "
                f"{_name(top_type)}."]
    if f["empty_blocks"]:
        s.answer.append(f"{_name(bw).capitalize()}s {_name(', '.join(f['empty_blocks']))} have **none**: there {label} "
                        "changes nothing.")
    if _vector_gallery(lesson, s, m, lesson.task1, lesson.task1,
                       f"θ0 + τ_{lesson.task1} of {method_label(m)} on {lesson.task1}") is None:
        return
    zs, ft = lesson.zero_shot.get(lesson.task1, float("nan")), lesson.finetuned[m].get(lesson.task1, float("nan"))
    s.answer.append(f"With only these weights, {t} goes from {pct(zs)} to **{pct(ft)}** (test accuracy).")


# --- 6 · what sparsity buys --------------------------------------------------------------------
COMPARED = (("single_task_acc", "each task<br>alone"), ("addition_abs", "all added:<br>accuracy"),
            ("negation_target", "negated task<br>(lower = forgotten)"),
            ("negation_control", "control task<br>after negation"))
"""The comparison table's columns the sparsity screen shows, with their words."""


def _row(comp: pd.DataFrame, method: str) -> pd.Series | None:
    rows = comp[comp["method"].astype(str) == method]
    return rows.iloc[0] if len(rows) else None


def _interval(row: pd.Series, col: str) -> tuple[float, float] | None:
    lo, hi = row.get(f"{col}_lo"), row.get(f"{col}_hi")
    return None if lo is None or hi is None else (float(lo), float(hi))


@plain_figure
def comparison_bars(comp: pd.DataFrame, methods: Sequence[str], *, title: str) -> go.Figure:
    """Grouped bars of :data:`COMPARED` for ``methods`` (rows of SCHEMA.md ``comparison``), with the 95 % bootstrap
    intervals as error bars where the table has them."""
    traces = []
    for m in methods:
        row = _row(comp, m)
        if row is None:
            continue
        ys = [float(row.get(c, np.nan)) for c, _ in COMPARED]
        trace = {"type": "bar", "name": method_label(m), "x": [w for _, w in COMPARED], "y": ys,
                 "marker": {"color": figures.method_color(m)}, "text": [pct(y) for y in ys],
                 "textposition": "inside", "insidetextanchor": "start", "textangle": 0}
        if all(f"{c}_lo" in row and f"{c}_hi" in row for c, _ in COMPARED):
            trace["error_y"] = {"type": "data", "symmetric": False,
                                "array": [float(row[f"{c}_hi"]) - y for (c, _), y in zip(COMPARED, ys)],
                                "arrayminus": [y - float(row[f"{c}_lo"]) for (c, _), y in zip(COMPARED, ys)]}
        traces.append(trace)
    return figures.make_figure(traces, title, barmode="group", xaxis={"type": "category"},
                               yaxis={"range": [0, 1.05], "title": {"text": "accuracy"}})


@plain_figure
def task_bars(series: Mapping[str, Sequence[float]], tasks: Sequence[str], *, title: str, y_title: str,
              text: Callable[[float], str], log: bool = False) -> go.Figure:
    """Grouped bars of one number per task for each method of ``series`` (``{method: values}``), in the methods'
    colours, each bar labelled with ``text(value)``."""
    traces = [{"type": "bar", "name": method_label(m), "x": list(tasks), "y": [float(v) for v in vals],
               "marker": {"color": figures.method_color(m)}, "text": [text(float(v)) for v in vals],
               "textposition": "outside" if log else "auto", "cliponaxis": False}
              for m, vals in series.items()]
    return figures.make_figure(traces, title, barmode="group", xaxis={"type": "category"},
                               yaxis={"title": {"text": y_title}, "type": "log" if log else "linear",
                                      **({"dtick": 1} if log else {"rangemode": "tozero", "tickformat": ".1%"})})


def _per_task_mean(eff: pd.DataFrame | None, method: str, col: str) -> float:
    if eff is None or col not in eff.columns:
        return float("nan")
    vals = pd.to_numeric(eff[eff["method"].astype(str) == method][col], errors="coerce")
    return float(vals.mean()) if vals.notna().any() else float("nan")


def _sparsity(lesson: Lesson, s: Screen, *, reveal: bool, **_: Any) -> None:
    m, b = lesson.method, lesson.baseline
    ml = _name(method_label(m))
    s.idea = [f"Put {ml} next to {_name(_first_label(lesson))}: the same tasks, the same test examples, "
              "each at its own α chosen on validation data.",
              "**Time per step**: one batch through the model and back, plus the update. **Peak memory**: the most "
              "memory training used at once."]
    if b is None:
        s.question = f"What does {ml} gain by training few weights?"
        s.missing = "This lesson follows one method only: there is nothing to compare it with."
        return
    bl = _name(method_label(b))
    te_m, te_b = (_per_task_mean(lesson.efficiency, x, "trainable_entries") for x in (m, b))
    frac = pct(te_m / te_b, 1) if math.isfinite(te_m) and math.isfinite(te_b) and te_b else "a fraction"
    s.question = (f"{ml} trains about **{frac}** of the weights {bl} trains (mean over the tasks). What does that "
                  "buy: faster steps? Less memory? Task vectors that interfere less?")
    comp = lesson.comparison
    rm, rb = (_row(comp, x) if comp is not None else None for x in (m, b))
    if rm is None or rb is None:
        s.missing = f"No comparison table with {ml} and {bl} in this store."
        return
    cols = ["method", *[c for c, _ in COMPARED], "time_per_step_s", "peak_memory_mb"]
    s.table = comp[comp["method"].astype(str).isin([m, b])][[c for c in cols if c in comp.columns]]
    if not reveal:
        eff = lesson.efficiency
        if eff is not None and "trainable_entries" in eff.columns:
            tasks = [t for t in lesson.tasks if t in set(eff["task"].astype(str))]
            per = {x: [_per_task_mean(eff[eff["task"].astype(str) == t], x, "trainable_entries") for t in tasks]
                   for x in (b, m)}
            s.figure = task_bars(per, tasks, title="Stored · weights each method trains, per task (log scale)",
                                 y_title="trainable weights", text=lambda v: f"{v:,.0f}", log=True)
        return
    s.figure = comparison_bars(comp, [b, m], title=f"Exact · {method_label(m)} vs {method_label(b)} (test, at each "
                                                   "one's selected α)")
    s.answer = []
    t_m, t_b = float(rm.get("time_per_step_s", np.nan)), float(rb.get("time_per_step_s", np.nan))
    mem_m, mem_b = float(rm.get("peak_memory_mb", np.nan)), float(rb.get("peak_memory_mb", np.nan))
    cost = []
    if math.isfinite(t_m) and math.isfinite(t_b):
        # the audit's flags on the time itself (a disturbed machine, another machine than the other method's)
        timing = [f for f in lesson.flags if f.row in (m, b) and "time_per_step_s" in f.metrics]
        titles = dict.fromkeys(check_info(f.check).title for f in timing)
        doubted = [r for r in (m, b) if any(f.row == r for f in timing)]
        doubt = (f"; the audit's *{'* and *'.join(titles)}* doubts "
                 f"{' and '.join(_name(method_label(r)) for r in doubted)}" if doubted else "")
        cost.append(f"time per step {t_m:.2f} s vs {t_b:.2f} s ({_word(t_m, t_b, 'faster', 'slower', True)}{doubt})")
    if math.isfinite(mem_m) and math.isfinite(mem_b):
        cost.append(f"peak memory {mem_m:,.0f} MB vs {mem_b:,.0f} MB "
                    f"({_word(mem_m, mem_b, 'less', 'more', True)})")
    if cost:
        s.answer.append(f"**Cost** ({ml} vs {bl}): " + "; ".join(cost) + ".")
    # absolute accuracy: normalized accuracy divides by each method's own single-task accuracy, so a method that
    # learns little "keeps" a lot by doing nothing (the audit's norm-* checks)
    add_cmp = _compare(float(rm["addition_abs"]), float(rb["addition_abs"]), _interval(rm, "addition_abs"),
                       _interval(rb, "addition_abs"))
    s.answer.append(f"**Adding all vectors**: {pct(rm['addition_abs'])} vs {pct(rb['addition_abs'])} test accuracy "
                    f"({_verdict(add_cmp, ml + ' is higher', ml + ' is lower')}).")
    single_cmp = _compare(float(rm["single_task_acc"]), float(rb["single_task_acc"]),
                          _interval(rm, "single_task_acc"), _interval(rb, "single_task_acc"))
    s.answer.append(f"**Each task alone**: {pct(rm['single_task_acc'])} vs {pct(rb['single_task_acc'])} "
                    f"({_verdict(single_cmp, ml + ' is higher', ml + ' is lower: the price of training few weights')}"
                    ").")
    ex_m, ex_b = lesson.examples.get(m), lesson.examples.get(b)
    t1, t2 = lesson.task1, lesson.task2
    if t2 is None or ex_m is None or ex_b is None or ex_m.single(t1, t2) is None or ex_b.single(t1, t2) is None:
        s.examples_note = _no_examples(lesson, m if ex_m is None else b)
        _audit_note(lesson, s, (m, b))
        return
    gm, gb = (figures_examples.localization_gallery(ex, t1, t2) for ex in (ex_m, ex_b))
    s.galleries = [(f"{method_label(b)}: τ_{t1} on {t2}", gb), (f"{method_label(m)}: τ_{t1} on {t2}", gm)]
    s.answer.append(f"**Interference**: τ_{_name(t1)} changes {gm.changed} of {len(gm.table)} {_name(t2)} examples "
                    f"with {ml}, {gb.changed} with {bl}.")
    _audit_note(lesson, s, (m, b))


def audit_words(flags: Sequence, rows: Sequence[str], columns: Sequence[str]) -> dict[str, list[str]]:
    """Per row, the titles of the audit checks that flag the numbers of ``columns`` it shows (run-level flags
    included), in the audit's order: what a screen must say before it compares those numbers."""
    from talos_core.evaluation.audit import ALL

    out: dict[str, list[str]] = {}
    for f in flags:
        if f.row not in rows or f.check == "best-not-separated":
            continue
        if ALL in f.metrics or any(c in f.metrics for c in columns):
            titles = out.setdefault(f.row, [])
            if f.title not in titles:
                titles.append(f.title)
    return out


def _audit_note(lesson: Lesson, s: Screen, rows: Sequence[str]) -> None:
    """One short paragraph under a comparison (it must fit a projector): how many of the audit's checks doubt its
    numbers per method, and two of them by name (nothing when none)."""
    words = audit_words(lesson.flags, rows, [c for c, _ in COMPARED])
    if not words:
        return
    counts = ", ".join(f"{len(t)} on {_name(method_label(r))}" for r, t in words.items())
    named = list(dict.fromkeys(t for titles in words.values() for t in titles))
    example = " and ".join(named[:2])
    s.answer.append(f"**Careful**: the audit flags these numbers ({counts}; e.g. {example}). Read the comparison as "
                    f"provisional: `talos audit {_name(lesson.suite)}` lists why.")


def _word(a: float, b: float, good: str, bad: str, lower_is_good: bool) -> str:
    """``"24 % faster"`` / ``"10 % slower"`` / ``"about the same"`` for a cost ``a`` against ``b``."""
    if not b or abs(a - b) / abs(b) < 0.02:
        return "about the same"
    rel = abs(a - b) / abs(b)
    return f"{pct(rel)} {good if (a < b) == lower_is_good else bad}"


def _verdict(comparison: str, higher: str, lower: str) -> str:
    """The words for a :func:`_compare` result."""
    if comparison == "about the same":
        return "no clear difference"
    return {"higher": higher, "lower": lower}.get(comparison, comparison)


# --------------------------------------------------------------------------------------------
# one screen, by its number
# --------------------------------------------------------------------------------------------
def screen(lesson: Lesson, number: int, *, reveal: bool = False, alpha: Any = None, nalpha: Any = None) -> Screen:
    """Screen ``number`` (1…6) of ``lesson``; ``alpha`` / ``nalpha``: the addition and negation α's a URL or a
    slider asks for (snapped to the stored grid; default the α chosen on validation). With ``reveal`` the screen
    holds the answer, the result chart and its examples; without, the question and the chart it starts from."""
    if not 1 <= number <= N_STEPS:
        raise TalosError(f"the lesson has steps 1 to {N_STEPS}, not {number}")
    build = (_task_vector, _add, _negate, _interference, _masks, _sparsity)[number - 1]
    key, title = STEPS[number - 1]
    out = Screen(number, key, title, [], "", [])
    build(lesson, out, reveal=reveal, alpha=alpha, nalpha=nalpha)
    if out.figure is not None:
        out.figure = projector(out.figure)
    return out
