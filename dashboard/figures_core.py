"""What every dashboard figure shares (pure: no Streamlit): one colour per method, the validation switch
(:data:`VALIDATE`), :func:`make_figure` (trace dicts in, ONE ``go.Figure`` out) and the small layout helpers (reference
lines, panel and grid axes, matrix sizes). The figure families (``figures_masks``, ``figures_heatmaps``,
``figures_arithmetic``, ``figures_efficiency``, ``figures_compare``) build on it; :mod:`dashboard.figures` re-exports
them all.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from dashboard.plain import plain_figure
from talos_core.errors import TalosError

#: validate every figure against plotly's schema (slow; on in tests). Set it on this module, where :func:`make_figure`
#: reads it: :mod:`dashboard.figures` does not re-export it, since a copy there would switch nothing
VALIDATE = os.environ.get("TALOS_DASHBOARD_VALIDATE", "") == "1"

# --------------------------------------------------------------------------------------------
# colours
# --------------------------------------------------------------------------------------------
MARK_COLOR = "#d62728"  # red: search region, diagonal, selected α
ZERO_SHOT_COLOR = "#555555"
SINGLE_TASK_COLOR = "#111111"

METHOD_COLORS: dict[str, str] = {
    "talos": "#1b9e77",
    "talos-top": "#66c2a5",
    "nonlinear": "#7570b3",
    "linearized": "#e7298a",
    "llora": "#e6ab02",
    "lota": "#a6761d",
    "ties": "#1f78b4",
    "dare": "#b2df8a",
    "breadcrumbs": "#fb9a99",
    "tall_consensus": "#cab2d6",
    "tsv": "#17becf",
    "iso_c": "#bcbd22",
    "iso_cts": "#8c564b",
    "lines": "#9467bd",
    "random": "#bdbdbd",
    "magnitude": "#8c8c8c",
    "zero-shot": ZERO_SHOT_COLOR,
}
_FALLBACK = ["#66a61e", "#d95f02", "#a6cee3", "#fdbf6f", "#ff7f00", "#6a3d9a", "#b15928", "#33a02c"]

LAYER_TYPES = ["embedding", "conv", "q", "k", "v", "qkv", "attn_out", "mlp_in", "mlp_out", "layernorm",
               "bias", "other"]
#: layer types and the "outside" block as the mask figures name them
LAYER_LABELS = {"embedding": "embedding", "conv": "convolution", "q": "attention Q", "k": "attention K",
                "v": "attention V", "qkv": "attention QKV", "attn_out": "attention output", "mlp_in": "MLP input",
                "mlp_out": "MLP output", "layernorm": "layer norm", "bias": "bias", "other": "other",
                "outside": "no block"}


def layer_label(name: str) -> str:
    """A layer type (or ``outside``) as a person reads it.

    >>> layer_label("attn_out"), layer_label("outside"), layer_label("3")
    ('attention output', 'no block', '3')
    """
    return LAYER_LABELS.get(str(name), str(name))


SEQUENTIAL = "Viridis"


def method_color(method: str) -> str:
    """The colour of ``method`` (stable across pages and sessions).

    Known methods have a fixed colour; an unknown name gets a deterministic one from a fallback
    palette (hash of the name), never a random one.

    >>> method_color("talos")
    '#1b9e77'
    >>> method_color("my-method") == method_color("my-method")
    True
    """
    if method in METHOD_COLORS:
        return METHOD_COLORS[method]
    digest = int(hashlib.md5(method.encode()).hexdigest(), 16)
    return _FALLBACK[digest % len(_FALLBACK)]


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------
def _matrix(values: Any, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 2 or arr.size == 0:
        raise TalosError(f"{name} must be a non-empty 2-D matrix, got shape {arr.shape}")
    return arr


def _finite_max(*arrays: Any, default: float = 1.0) -> float:
    vals = [np.asarray(a, dtype=float) for a in arrays]
    vals = [v[np.isfinite(v)] for v in vals]
    vals = [v for v in vals if v.size]
    return float(max(v.max() for v in vals)) if vals else default


def _finite_min(*arrays: Any, default: float = 0.0) -> float:
    vals = [np.asarray(a, dtype=float) for a in arrays]
    vals = [v[np.isfinite(v)] for v in vals]
    vals = [v for v in vals if v.size]
    return float(min(v.min() for v in vals)) if vals else default


def _list(values: Any) -> list:
    """Plain Python list (NaN kept) for figure dicts."""
    return np.asarray(values).tolist() if not isinstance(values, list) else values


def _title(text: str | None) -> dict:
    return {"text": text}


#: a tiny explicit template: stops plotly from deep-copying its (large) default template into every figure
LIGHT_TEMPLATE: dict = {"layout": {"xaxis": {"gridcolor": "#ebebeb", "zerolinecolor": "#cccccc"},
                                   "yaxis": {"gridcolor": "#ebebeb", "zerolinecolor": "#cccccc"}}}


@plain_figure
def make_figure(data: Sequence[dict], title: str = "", *, height: int | None = None, shapes: Sequence[dict] = (),
                annotations: Sequence[dict] = (), **layout: Any) -> go.Figure:
    """Wrap trace dicts and layout keys into ONE ``go.Figure`` (validated only if :data:`VALIDATE`).

    No template is set (a template costs ~80 ms per figure): in the dashboard Streamlit's theme applies,
    static exports use :func:`export_ready` (``plotly_white``).

    >>> make_figure([{"type": "bar", "x": ["a"], "y": [1]}], "t").layout.title.text
    't'
    """
    # title pinned to the top of the figure, legend in its own band between title and plot (no overlap)
    lay = {"title": {"text": title, "x": 0.0, "xanchor": "left", "y": 0.985, "yref": "container", "yanchor": "top"},
           "plot_bgcolor": "white", "template": LIGHT_TEMPLATE,
           "margin": {"l": 60, "r": 20, "t": 95 if title else 45, "b": 50},
           "legend": {"orientation": "h", "yanchor": "bottom", "y": 1.04, "xanchor": "left", "x": 0.0},
           "uniformtext": {"minsize": 10, "mode": "hide"}}  # a value that does not fit its bar is not shrunk to dust
    if height is not None:
        lay["height"] = height
    if shapes:
        lay["shapes"] = list(shapes)
    if annotations:
        lay["annotations"] = list(annotations)
    lay.update(layout)
    return go.Figure({"data": list(data), "layout": lay}, _validate=VALIDATE)


@plain_figure
def export_ready(fig: go.Figure) -> go.Figure:
    """A copy of ``fig`` with the ``plotly_white`` template, for static exports (PNG/SVG/HTML)."""
    out = go.Figure(fig.to_plotly_json())
    out.update_layout(template="plotly_white")
    return out


def hline(y: float, *, color: str, dash: str = "solid", width: float = 1.0, xref: str = "paper",
          yref: str = "y") -> dict:
    """A horizontal line across the plot at ``y`` (a shape dict; name it in the legend with :func:`legend_line`)."""
    return {"type": "line", "xref": xref, "x0": 0, "x1": 1, "yref": yref, "y0": y, "y1": y, "name": "hline",
            "line": {"color": color, "dash": dash, "width": width}}


def legend_line(name: str, *, color: str, dash: str = "solid", width: float = 1.0) -> dict:
    """A legend entry for a line drawn as a shape (:func:`hline`): named in the legend band above the plot, where
    no bar, marker or value label can cover it (a label inside the plot did, on bars near the line)."""
    return {"type": "scatter", "x": [None], "y": [None], "mode": "lines", "name": name, "hoverinfo": "skip",
            "line": {"color": color, "dash": dash, "width": width}}


def vline(x: float, *, color: str, dash: str = "solid", width: float = 2.0, text: str | None = None,
          name: str = "vline") -> tuple[dict, list[dict]]:
    """A vertical line over the full plot height at ``x`` (shape dict) and its optional label."""
    shape = {"type": "line", "yref": "paper", "y0": 0, "y1": 1, "xref": "x", "x0": x, "x1": x, "name": name,
             "line": {"color": color, "dash": dash, "width": width}}
    ann = [] if text is None else [{"x": x, "xref": "x", "y": 1.0, "yref": "paper", "text": text,
                                    "showarrow": False, "yanchor": "bottom", "font": {"color": color}}]
    return shape, ann


def _fmt(v: float) -> str:
    return "" if v is None or not math.isfinite(v) else f"{v:.2f}"


def _value_labels(values: np.ndarray) -> dict:
    """Bar trace keys writing each value at the foot of its bar, inside it: the reference markers drawn on bars
    (zero-shot dashes, single-task diamonds) and the mean line sit near the bars' tops, where a label collided
    with them; a bar too short for its label shows none (uniformtext in :func:`make_figure`)."""
    return {"text": [_fmt(v) for v in np.asarray(values, dtype=float)], "textposition": "inside",
            "insidetextanchor": "start", "textangle": 0}


def _cell_text(arr: np.ndarray) -> list[list[str]]:
    return [[_fmt(v) for v in row] for row in arr]


def diagonal_shapes(n: int, *, xref: str = "x", yref: str = "y", color: str = MARK_COLOR) -> list[dict]:
    """Rectangles outlining the diagonal cells of an ``n × n`` categorical heatmap.

    >>> diagonal_shapes(2)[1]["x0"], diagonal_shapes(2)[1]["y1"]
    (0.5, 1.5)
    """
    return [{"type": "rect", "xref": xref, "yref": yref, "x0": i - 0.5, "x1": i + 0.5, "y0": i - 0.5,
             "y1": i + 0.5, "line": {"color": color, "width": 3}, "fillcolor": "rgba(0,0,0,0)", "name": "diagonal"}
            for i in range(n)]


def _panels(n: int, spacing: float = 0.06) -> list[tuple[float, float]]:
    """x-domains of ``n`` side-by-side panels."""
    w = (1.0 - (n - 1) * spacing) / n
    return [(round(i * (w + spacing), 6), min(1.0, round(i * (w + spacing) + w, 6))) for i in range(n)]


def _panel_axes(n: int, spacing: float = 0.06, titles: Sequence[str] | None = None,
                **yaxis: Any) -> tuple[dict, list[dict]]:
    """Layout axes (``xaxis``, ``xaxis2``, ...) for ``n`` panels in a row, and subplot-title annotations."""
    lay: dict[str, Any] = {}
    anns = []
    for i, (lo, hi) in enumerate(_panels(n, spacing), start=1):
        sfx = "" if i == 1 else str(i)
        lay[f"xaxis{sfx}"] = {"domain": [lo, hi], "anchor": f"y{sfx}"}
        lay[f"yaxis{sfx}"] = {"anchor": f"x{sfx}", **yaxis}
        if titles:
            anns.append({"text": titles[i - 1], "x": (lo + hi) / 2, "xref": "paper", "y": 1.0, "yref": "paper",
                         "showarrow": False, "xanchor": "center", "yanchor": "bottom", "font": {"size": 14}})
    return lay, anns


def _grid_axes(n: int, cols: int, titles: Sequence[str], *, hspacing: float = 0.07, vspacing: float = 0.16,
               **axis: Any) -> tuple[dict, list[dict]]:
    """Layout axes for ``n`` panels in a grid of ``cols`` columns (row 1 at the top; every panel has its own
    x and y axis, ``xaxis``/``yaxis`` for panel 0, ``xaxis2``/``yaxis2`` for panel 1, ...) and the panels'
    title annotations."""
    rows = max(1, math.ceil(n / cols))
    xd = _panels(cols, hspacing)
    h = (1.0 - (rows - 1) * vspacing) / rows
    lay: dict[str, Any] = {}
    anns = []
    for i in range(n):
        r, c = divmod(i, cols)
        top = 1.0 - r * (h + vspacing)
        yd = [round(max(0.0, top - h), 6), round(top, 6)]
        sfx = "" if i == 0 else str(i + 1)
        lay[f"xaxis{sfx}"] = {"domain": list(xd[c]), "anchor": f"y{sfx}", **axis.get("xaxis", {})}
        lay[f"yaxis{sfx}"] = {"domain": yd, "anchor": f"x{sfx}", **axis.get("yaxis", {})}
        anns.append({"text": titles[i], "x": sum(xd[c]) / 2, "xref": "paper", "y": yd[1], "yref": "paper",
                     "showarrow": False, "xanchor": "center", "yanchor": "bottom", "font": {"size": 13}})
    return lay, anns


#: matrix heatmaps (task × task, block × layer type): no legend, so the plot starts under the title; a slim colour bar
MATRIX_MARGIN = {"l": 60, "r": 20, "t": 50, "b": 50}
MATRIX_COLORBAR = {"thickness": 14}


def matrix_height(n_tasks: int) -> int:
    """A task × task heatmap's height: about 55 px a row (a cell keeps room for its value), plus title and the
    (turned) task names under it.

    >>> matrix_height(3), matrix_height(5)
    (345, 455)
    """
    return 180 + 55 * n_tasks

