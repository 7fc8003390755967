"""Task arithmetic figures (pure): accuracy per task after addition or negation, and accuracy along the α grid.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.figures_core import (
    MARK_COLOR,
    SINGLE_TASK_COLOR,
    ZERO_SHOT_COLOR,
    _list,
    _title,
    _value_labels,
    hline,
    legend_line,
    make_figure,
    method_color,
    vline,
)
from dashboard.plain import plain_figure
from talos_core.errors import TalosError

#: the plot width :func:`turn_labels` assumes: a chart in half of the page's main column at 1280 px
HALF_COLUMN_PX = 400
#: the average width of a task-name character at the figures' 12 px tick font
CHAR_PX = 6.6


def turn_labels(names: Sequence[str], width: float = HALF_COLUMN_PX) -> bool:
    """Whether category labels under ``len(names)`` bars of a ``width``-px chart would run into each other, so both
    twins of a chart pair (the server-drawn exact bars and the browser-drawn first-order ones) turn them by 30° or
    neither does (Plotly's own choice depends on the width it is drawn at; the browser chart measures its text).

    >>> turn_labels(["mnist", "digits", "animal-shapes"]), turn_labels(["tweets", "wordnet-nouns", "wordnet-verbs",
    ...                                                                  "drug-reviews", "fortune-topics"])
    (False, True)
    """
    if not names:
        return False
    band = (width - 80) / len(names)
    return max(len(str(n)) for n in names) * CHAR_PX > band - 6


def _category_axis(turn: bool | None, **extra: Any) -> dict:
    return {"type": "category", **({} if turn is None else {"tickangle": 30 if turn else 0}), **extra}


@plain_figure
def arithmetic_bars(tasks: Sequence[str], accuracy: Sequence[float], *, name: str = "accuracy",
                    color: str | None = None, method: str | None = None, opacity: float = 1.0,
                    zero_shot: Sequence[float] | None = None, single_task: Sequence[float] | None = None,
                    title: str = "Per-task accuracy", y_title: str = "accuracy", turn: bool | None = None) -> go.Figure:
    """Bars of per-task accuracy with reference markers.

    Markers: ``zero_shot`` (grey dash: the pre-trained model θ0) and ``single_task`` (black diamond:
    the method's own single-task fine-tuned model). The dashed line is the mean over tasks, named in the legend.
    Each bar's value is written at its foot, away from the markers, which sit near the bars' tops.

    >>> f = arithmetic_bars(["a", "b"], [0.5, 0.7], zero_shot=[0.1, 0.2])
    >>> [t.name for t in f.data]
    ['accuracy', 'zero-shot', 'mean 0.600']
    """
    acc = np.asarray(accuracy, dtype=float)
    if acc.shape != (len(tasks),):
        raise TalosError(f"got {acc.size} accuracies for {len(tasks)} tasks")
    color = color or (method_color(method) if method else method_color("talos"))
    x = list(tasks)
    traces = [{"type": "bar", "x": x, "y": _list(acc), "name": name, "marker": {"color": color},
               "opacity": opacity, **_value_labels(acc),
               "hovertemplate": "%{x}<br>%{y:.4f}<extra>" + name + "</extra>"}]
    if zero_shot is not None:
        traces.append({"type": "scatter", "x": x, "y": _list(np.asarray(zero_shot, dtype=float)), "mode": "markers",
                       "name": "zero-shot", "marker": {"symbol": "line-ew-open", "size": 34, "color": ZERO_SHOT_COLOR,
                                                       "line": {"width": 3, "color": ZERO_SHOT_COLOR}}})
    if single_task is not None:
        traces.append({"type": "scatter", "x": x, "y": _list(np.asarray(single_task, dtype=float)),
                       "mode": "markers", "name": "single-task fine-tuned",
                       "marker": {"symbol": "diamond", "size": 11, "color": SINGLE_TASK_COLOR}})
    shapes = []
    if np.isfinite(acc).any():
        mean = float(np.nanmean(acc))
        shapes.append(hline(mean, color=color, dash="dash"))
        traces.append(legend_line(f"mean {mean:.3f}", color=color, dash="dash"))
    return make_figure(traces, title, height=380, shapes=shapes,
                       yaxis={"range": [0, 1.05], "title": _title(y_title)}, xaxis=_category_axis(turn))


@plain_figure
def negation_bars(targets: Sequence[str], target_acc: Sequence[float], control_acc: Sequence[float] | None, *,
                  control_task: str = "control", zero_shot_target: Sequence[float] | None = None,
                  control_zero_shot: float | None = None, method: str | None = None,
                  title: str = "Task negation: θ0 − α τ", turn: bool | None = None) -> go.Figure:
    """Per target: accuracy on the target (should DROP) and on the control task (should STAY; ``None``: not
    measured, so neither bars nor a legend entry for it).

    The dotted red line is 95 % of the zero-shot control accuracy (the paper's constraint), named in the legend;
    values are written at the bars' feet (:func:`arithmetic_bars`).
    """
    t = np.asarray(target_acc, dtype=float)
    c = np.full(len(targets), np.nan) if control_acc is None else np.asarray(control_acc, dtype=float)
    if t.shape != (len(targets),) or c.shape != (len(targets),):
        raise TalosError(f"negation bars need one target and one control accuracy per target ({len(targets)})")
    color = method_color(method) if method else method_color("talos")
    x = list(targets)
    traces = [{"type": "bar", "x": x, "y": _list(t), "name": "target accuracy (lower = forgotten)",
               "marker": {"color": color}, **_value_labels(t)}]
    if control_acc is not None:
        traces.append({"type": "bar", "x": x, "y": _list(c), "name": f"control accuracy ({control_task})",
                       "marker": {"color": "#bbbbbb"}, **_value_labels(c)})
    if zero_shot_target is not None:
        traces.append({"type": "scatter", "x": x, "y": _list(np.asarray(zero_shot_target, dtype=float)),
                       "mode": "markers", "name": "zero-shot target",
                       "marker": {"symbol": "line-ew-open", "size": 30, "color": ZERO_SHOT_COLOR,
                                  "line": {"width": 3, "color": ZERO_SHOT_COLOR}}})
    shapes = []
    if control_zero_shot is not None and math.isfinite(control_zero_shot):
        shapes.append(hline(0.95 * control_zero_shot, color=MARK_COLOR, dash="dot", width=1.5))
        traces.append(legend_line("95% of zero-shot control", color=MARK_COLOR, dash="dot", width=1.5))
    # four legend entries: in a half-width column they stack four rows high, so the legend hangs from just under the
    # title (container coordinates) and the plot starts below room for them (anchored on the plot, they grew up
    # into the title)
    return make_figure(traces, title, height=440, shapes=shapes, barmode="group",
                       margin={"l": 60, "r": 20, "t": 140, "b": 50},
                       legend={"orientation": "h", "yref": "container", "y": 1 - 34 / 440, "yanchor": "top",
                               "xanchor": "left", "x": 0.0},
                       yaxis={"range": [0, 1.05], "title": _title("accuracy")},
                       xaxis=_category_axis(turn, title=_title("negated task")))


def _x_range(x_range: tuple[float, float] | None) -> dict:
    """An α axis over ``x_range`` (a little margin each side so the end points show), or Plotly's own range."""
    if x_range is None:
        return {}
    lo, hi = (float(v) for v in x_range)
    pad = 0.02 * (hi - lo) if hi > lo else 0.5
    return {"range": [lo - pad, hi + pad]}


@plain_figure
def alpha_curve(curve: pd.DataFrame, *, selected_alpha: float | None = None, current_alpha: float | None = None,
                y: str = "normalized_accuracy", method: str | None = None,
                title: str = "Average accuracy vs α", x_range: tuple[float, float] | None = None) -> go.Figure:
    """Mean-over-tasks ``y`` against α, one line per split, selected α (chosen on val) marked in red.

    ``curve`` has columns ``alpha, split, <y>`` (already averaged over tasks, see
    ``dashboard.data.average_curve``). ``current_alpha`` (the slider) is drawn as a grey dotted line.
    The selected α is a red line and a red star on the val line, named in the legend (``"selected α = …"``: a
    label in the plot ran into the legend). ``x_range``: the α span shown (the sliders'), else the whole curve.
    """
    for col in ("alpha", "split", y):
        if col not in curve.columns:
            raise TalosError(f"alpha curve table is missing column {col!r}")
    color = method_color(method) if method else method_color("talos")
    dash = {"val": "dash", "test": "solid"}
    traces = []
    for split, sub in curve.groupby("split", sort=False):
        sub = sub.sort_values("alpha")
        traces.append({"type": "scatter", "x": _list(sub["alpha"].to_numpy(dtype=float)),
                       "y": _list(sub[y].to_numpy(dtype=float)), "mode": "lines+markers", "name": str(split),
                       "line": {"color": color, "dash": dash.get(str(split), "dot")}, "marker": {"size": 5}})
    shapes, anns = [], []
    if selected_alpha is not None:
        ref = curve[curve["split"] == "val"] if (curve["split"] == "val").any() else curve
        ref = ref.iloc[(ref["alpha"] - selected_alpha).abs().argsort()[:1]]
        yv = float(ref[y].iloc[0]) if len(ref) else None
        shapes.append(vline(selected_alpha, color=MARK_COLOR, name="selected α")[0])
        traces.append({"type": "scatter", "x": [selected_alpha], "y": [yv], "mode": "markers",
                       "name": f"selected α = {selected_alpha:g} (on val)",
                       "marker": {"symbol": "star", "size": 15, "color": MARK_COLOR}})
    if current_alpha is not None:
        shapes.append(vline(current_alpha, color="#888888", dash="dot", name="current α")[0])
        traces.append(legend_line(f"shown α = {current_alpha:g}", color="#888888", dash="dot", width=2))
    return make_figure(traces, title, height=340, shapes=shapes, annotations=anns,
                       xaxis={"title": _title("α"), **_x_range(x_range)},
                       yaxis={"title": _title(y.replace("_", " "))})


@plain_figure
def negation_curve(table: pd.DataFrame, target: str, *, selected_alpha: float | None = None,
                   current_alpha: float | None = None, control_zero_shot: float | None = None,
                   method: str | None = None, x_range: tuple[float, float] | None = None) -> go.Figure:
    """Target and control accuracy vs α for negating ``target`` (SCHEMA ``negation`` table, split val/test); the
    selected α, the shown α and 95 % of the zero-shot control accuracy are lines named in the legend; ``x_range``
    as in :func:`alpha_curve`."""
    sub = table[table["target"] == target]
    if sub.empty:
        raise TalosError(f"no negation results for target {target!r}")
    color = method_color(method) if method else method_color("talos")
    traces = []
    for split, s in sub.groupby("split", sort=False):
        s = s.sort_values("alpha")
        dash = "dash" if split == "val" else "solid"
        xs = _list(s["alpha"].to_numpy(dtype=float))
        traces.append({"type": "scatter", "x": xs, "y": _list(s["target_acc"].to_numpy(dtype=float)),
                       "name": f"target ({split})", "mode": "lines", "line": {"color": color, "dash": dash}})
        traces.append({"type": "scatter", "x": xs, "y": _list(s["control_acc"].to_numpy(dtype=float)),
                       "name": f"control ({split})", "mode": "lines", "line": {"color": "#999999", "dash": dash}})
    shapes = []
    if selected_alpha is not None:
        shapes.append(vline(selected_alpha, color=MARK_COLOR, name="selected α")[0])
        traces.append(legend_line(f"selected α = {selected_alpha:g} (on val)", color=MARK_COLOR, width=2))
    if current_alpha is not None:
        shapes.append(vline(current_alpha, color="#888888", dash="dot", name="current α")[0])
        traces.append(legend_line(f"shown α = {current_alpha:g}", color="#888888", dash="dot", width=2))
    if control_zero_shot is not None:
        shapes.append(hline(0.95 * control_zero_shot, color=MARK_COLOR, dash="dot"))
        traces.append(legend_line("95% of zero-shot control", color=MARK_COLOR, dash="dot"))
    return make_figure(traces, f"Negating {target} (exact model)", height=360, shapes=shapes,
                       xaxis={"title": _title("α (θ0 − α τ)"), **_x_range(x_range)},
                       yaxis={"title": _title("accuracy"), "range": [0, 1.05]})
