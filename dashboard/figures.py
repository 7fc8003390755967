"""Every dashboard figure, as a pure function: numpy / pandas data in, ``plotly.graph_objects.Figure`` out.

No Streamlit here, so figures are unit-testable and reusable in notebooks and the benchmark::

    >>> fig = localization_heatmap(["a", "b"], [[1.2, 0.9], [1.0, 1.3]])
    >>> [list(row) for row in fig.data[0].z]
    [[1.2, 0.9], [1.0, 1.3]]

Conventions shared by all figures:

* one colour per method everywhere (:func:`method_color`);
* red (:data:`MARK_COLOR`) is reserved for *annotations that carry meaning*: the α search region on
  ξ heatmaps, the diagonal of localization matrices, the selected α on α curves;
* heatmaps that are compared side by side share ``zmin``/``zmax`` (one colour axis);
* matrices are drawn with row 0 at the top (row = first index, column = second index);
* numbers copied from the paper are labelled "published" in titles and legends;
* figures are assembled as plain dicts and wrapped ONCE in ``go.Figure`` without plotly's per-property
  validation (set :data:`VALIDATE` or ``TALOS_DASHBOARD_VALIDATE=1`` to validate; the tests do): building a
  figure then costs ~1–3 ms instead of ~100 ms, which keeps slider moves interactive.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.plain import plain_figure
from talos_core.errors import TalosError
from talos_core.schema import method_label

#: validate every figure against plotly's schema (slow; on in tests)
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


# --------------------------------------------------------------------------------------------
# masks
# --------------------------------------------------------------------------------------------
def mask_density_grid(masks: pd.DataFrame) -> pd.DataFrame:
    """Trainable fraction per (layer type, block): ``Σ trainable / Σ numel`` over the tensors in a cell.

    ``masks`` has the SCHEMA ``masks`` columns (``block``, ``layer_type``, ``numel``, ``trainable``).
    Returns a layer-type × block frame (rows in :data:`LAYER_TYPES` order, block ``-1`` shown as
    ``"outside"`` first); cells with no tensors are NaN.

    >>> df = pd.DataFrame({"block": [0, 0, 1], "layer_type": ["q", "q", "q"],
    ...                    "numel": [10, 30, 20], "trainable": [1, 3, 10]})
    >>> mask_density_grid(df).loc["q"].tolist()
    [0.1, 0.5]
    """
    need = {"block", "layer_type", "numel", "trainable"}
    missing = need - set(masks.columns)
    if missing:
        raise TalosError(f"masks table is missing columns {sorted(missing)}; expected {sorted(need)}")
    if masks.empty:
        return pd.DataFrame()
    agg = masks.groupby(["layer_type", "block"], sort=False)[["trainable", "numel"]].sum()
    dens = (agg["trainable"] / agg["numel"].where(agg["numel"] > 0)).unstack("block")
    blocks = sorted(dens.columns, key=lambda b: (int(b) >= 0, int(b)))
    order = [t for t in LAYER_TYPES if t in dens.index] + sorted(t for t in dens.index if t not in LAYER_TYPES)
    dens = dens.reindex(index=order, columns=blocks)
    dens.columns = ["outside" if int(b) < 0 else str(int(b)) for b in blocks]
    return dens.astype(float)


@plain_figure
def mask_density_heatmap(masks: pd.DataFrame, *, title: str = "Trainable fraction per block and layer type",
                         zmax: float | None = None, zmin: float = 0.0) -> go.Figure:
    """Heatmap of mask density: x = block (a transformer block, or a stage of a CNN), y = layer type, colour = density.

    >>> df = pd.DataFrame({"block": [0, 1], "layer_type": ["q", "v"], "numel": [10, 10],
    ...                    "trainable": [1, 5]})
    >>> list(mask_density_heatmap(df).data[0].x)
    ['0', '1']
    """
    grid = mask_density_grid(masks)
    if grid.empty:
        raise TalosError("masks table is empty; nothing to draw")
    z = grid.to_numpy()
    zmax = _finite_max(z) if zmax is None else zmax
    trace = {"type": "heatmap", "z": _list(z), "x": [layer_label(c) for c in grid.columns],
             "y": [layer_label(r) for r in grid.index], "zmin": zmin,
             "zmax": zmax, "colorscale": SEQUENTIAL, "colorbar": MATRIX_COLORBAR | {"title": {"text": "density"}},
             "hovertemplate": "block %{x}<br>%{y}<br>density %{z:.4f}<extra></extra>"}
    return make_figure([trace], title, height=max(300, 30 * len(grid.index) + 150), margin=MATRIX_MARGIN,
                       xaxis={"title": _title("block"), "type": "category"},
                       yaxis={"title": _title("layer type"), "autorange": "reversed", "type": "category"})


@plain_figure
def mask_density_bars(masks: pd.DataFrame, *, group: str = "method", by: str = "block",
                      title: str = "Trainable fraction per layer",
                      colors: Mapping[str, str] | None = None) -> go.Figure:
    """Grouped bars of mask density along ``by`` (``"block"`` or ``"layer_type"``), one series per ``group``.

    ``group`` is a column of ``masks`` (``"method"`` or ``"task"``) that tells the series apart;
    series for methods use :func:`method_color`; ``colors`` maps series names to colours explicitly.
    """
    if by not in ("block", "layer_type"):
        raise TalosError(f"by must be 'block' or 'layer_type', got {by!r}")
    if group not in masks.columns:
        raise TalosError(f"masks table has no column {group!r} to group by; columns: {list(masks.columns)}")
    traces = []
    for i, (key, sub) in enumerate(masks.groupby(group, sort=False)):
        agg = sub.groupby(by, sort=False)[["trainable", "numel"]].sum()
        if by == "block":
            agg = agg.sort_index()
            x = [layer_label("outside") if int(b) < 0 else str(int(b)) for b in agg.index]
        else:
            order = [t for t in LAYER_TYPES if t in agg.index] + [t for t in agg.index if t not in LAYER_TYPES]
            agg = agg.reindex(order)
            x = [layer_label(t) for t in agg.index]
        y = (agg["trainable"] / agg["numel"].where(agg["numel"] > 0)).to_numpy(dtype=float)
        if colors and str(key) in colors:
            color = colors[str(key)]
        else:
            color = method_color(str(key)) if group == "method" else _FALLBACK[i % len(_FALLBACK)]
        name = method_label(str(key)) if group == "method" else str(key)
        traces.append({"type": "bar", "x": x, "y": _list(y), "name": name, "marker": {"color": color},
                       "hovertemplate": f"{name}<br>{by} %{{x}}<br>density %{{y:.4f}}<extra></extra>"})
    return make_figure(traces, title, height=340, barmode="group",
                       xaxis={"title": _title("block" if by == "block" else "layer type"), "type": "category"},
                       yaxis={"title": _title("trainable fraction"), "rangemode": "tozero"})


@plain_figure
def mask_iou_heatmap(tasks: Sequence[str], matrix: Any, *, title: str = "Mask overlap (IoU) between tasks",
                     zmin: float = 0.0, zmax: float = 1.0) -> go.Figure:
    """IoU of the trainable sets of two tasks' masks, ``|M_a ∩ M_b| / |M_a ∪ M_b|`` (diagonal = 1)."""
    z = _matrix(matrix, "IoU matrix")
    if z.shape != (len(tasks), len(tasks)):
        raise TalosError(f"IoU matrix shape {z.shape} does not match {len(tasks)} tasks")
    trace = {"type": "heatmap", "z": _list(z), "x": list(tasks), "y": list(tasks), "zmin": zmin, "zmax": zmax,
             "colorscale": "Blues", "text": _cell_text(z), "texttemplate": "%{text}",
             "hovertemplate": "%{y} vs %{x}<br>IoU %{z:.3f}<extra></extra>",
             "colorbar": MATRIX_COLORBAR | {"title": {"text": "IoU"}}}
    return make_figure([trace], title, height=matrix_height(len(tasks)), margin=MATRIX_MARGIN,
                       xaxis={"type": "category"}, yaxis={"type": "category", "autorange": "reversed"})


@plain_figure
def cross_method_iou_bars(table: pd.DataFrame, methods: Sequence[str], *, title: str | None = None) -> go.Figure:
    """Per-task IoU between two methods' masks (SCHEMA ``mask_iou`` ``<m1>__vs__<m2>`` table)."""
    m1, m2 = (list(methods) + ["?", "?"])[:2]
    trace = {"type": "bar", "x": table["task"].tolist(), "y": _list(table["iou"].to_numpy(dtype=float)),
             "marker": {"color": method_color(m1)}, "text": [_fmt(v) for v in table["iou"]],
             "textposition": "outside", "name": "IoU"}
    return make_figure([trace], title or f"Mask IoU per task: {method_label(m1)} vs {method_label(m2)}",
                       height=320, yaxis={"range": [0, 1.05], "title": _title("IoU")}, xaxis={"type": "category"})


# --------------------------------------------------------------------------------------------
# disentanglement
# --------------------------------------------------------------------------------------------
def _region_box(region: Sequence[float] | None, a1: np.ndarray, a2: np.ndarray, xref: str, yref: str) -> list[dict]:
    """Red square [lo, hi]² (the α range searched for addition), clipped to the plotted grid."""
    if region is None:
        return []
    lo, hi = float(region[0]), float(region[1])
    x0, x1 = max(lo, float(a2.min())), min(hi, float(a2.max()))
    y0, y1 = max(lo, float(a1.min())), min(hi, float(a1.max()))
    if x0 >= x1 or y0 >= y1:
        return []
    return [{"type": "rect", "xref": xref, "yref": yref, "x0": x0, "x1": x1, "y0": y0, "y1": y1,
             "name": "search region", "line": {"color": MARK_COLOR, "width": 3}, "fillcolor": "rgba(0,0,0,0)"}]


@plain_figure
def xi_heatmap(alphas1: Sequence[float], alphas2: Sequence[float], xi: Any, *, task1: str = "task 1",
               task2: str = "task 2", search_region: Sequence[float] | None = None, zmin: float = 0.0,
               zmax: float | None = None, title: str | None = None,
               mark: tuple[float, float, str] | None = None, clickable: bool = False) -> go.Figure:
    """Disentanglement error ξ(α₁, α₂) as a heatmap (x = α₂, y = α₁), search region as a red box.

    ξ(α₁, α₂) = Σ_t E_x[ pred(θ0 + α_t τ_t; x) ≠ pred(θ0 + α₁τ₁ + α₂τ₂; x) ]: low (dark) = the two task
    vectors do not interfere. ``xi[i][j]`` is at ``(alphas1[i], alphas2[j])``. Pass the same ``zmax``
    to figures you compare. ``mark = (α₁, α₂, label)``: a point drawn on the map (the Arithmetic page's α's),
    named in the legend. ``clickable``: an invisible marker on every cell, so a click selects the cell
    (``st.plotly_chart(on_select=…)`` reports its ``x`` = α₂ and ``y`` = α₁; Plotly selects no heatmap cells).

    >>> f = xi_heatmap([0, 1], [0, 1], [[0, .1], [.2, .3]], search_region=[0, 1])
    >>> f.layout.shapes[0].line.color
    '#d62728'
    """
    a1, a2 = np.asarray(alphas1, dtype=float), np.asarray(alphas2, dtype=float)
    z = _matrix(xi, "xi")
    if z.shape != (a1.size, a2.size):
        raise TalosError(f"xi has shape {z.shape} but the grid is {a1.size} × {a2.size}")
    zmax = _finite_max(z) if zmax is None else zmax
    traces = [{"type": "heatmap", "z": _list(z), "x": _list(a2), "y": _list(a1), "zmin": zmin, "zmax": zmax,
               "colorscale": SEQUENTIAL, "colorbar": {"title": {"text": "ξ"}},
               "hovertemplate": f"α({task1}) %{{y:.2f}}<br>α({task2}) %{{x:.2f}}<br>ξ %{{z:.3f}}<extra></extra>"}]
    if clickable:
        xs, ys = np.meshgrid(a2, a1)
        traces.append({"type": "scatter", "x": _list(xs.ravel()), "y": _list(ys.ravel()), "mode": "markers",
                       "showlegend": False, "name": "cells", "customdata": _list(z.ravel()),
                       "marker": {"size": 14, "symbol": "square", "opacity": 0.0},
                       "hovertemplate": f"α({task1}) %{{y:.2f}}<br>α({task2}) %{{x:.2f}}<br>ξ %{{customdata:.3f}}"
                                        "<br>click: open Arithmetic at these α's<extra></extra>"})
    if mark is not None:
        m1, m2, label = mark
        traces.append({"type": "scatter", "x": [float(m2)], "y": [float(m1)], "mode": "markers", "name": label,
                       "marker": {"symbol": "x", "size": 15, "color": "#ffffff",
                                  "line": {"width": 1.5, "color": "#000000"}},
                       "hovertemplate": f"{label}<extra></extra>"})
    return make_figure(traces, title if title is not None else f"Disentanglement error ξ: {task1} + {task2}",
                       height=460, shapes=_region_box(search_region, a1, a2, "x", "y"),
                       xaxis={"title": _title(f"α {task2}"), "constrain": "domain"},
                       yaxis={"title": _title(f"α {task1}"), "scaleanchor": "x", "scaleratio": 1})


@plain_figure
def xi_side_by_side(panels: Sequence[Mapping[str, Any]], *, zmax: float | None = None,
                    title: str = "Disentanglement error ξ (shared colour scale)", columns: int = 2) -> go.Figure:
    """Several ξ heatmaps, ``columns`` to a row (two keep each wide enough to read at 1280 px), on ONE colour axis
    (``zmin = 0``, shared ``zmax``).

    Each panel is a SCHEMA ``disentanglement`` payload (``alphas1``, ``alphas2``, ``xi``,
    ``search_region``, ``method``, ``task1``, ``task2``). ``zmax`` defaults to the largest ξ of all
    panels so identical colours mean identical error.
    """
    if not panels:
        raise TalosError("xi_side_by_side needs at least one panel")
    zmax = _finite_max(*[p["xi"] for p in panels]) if zmax is None else zmax
    n = len(panels)
    cols = min(n, columns)
    rows = math.ceil(n / cols)
    titles = [method_label(str(p.get("method", f"panel {i + 1}"))) for i, p in enumerate(panels)]
    axes, anns = _grid_axes(n, cols, titles, hspacing=0.1, vspacing=0.18)
    traces, shapes = [], []
    for i, p in enumerate(panels, start=1):
        a1, a2 = np.asarray(p["alphas1"], dtype=float), np.asarray(p["alphas2"], dtype=float)
        z = _matrix(p["xi"], "xi")
        sfx = "" if i == 1 else str(i)
        traces.append({"type": "heatmap", "z": _list(z), "x": _list(a2), "y": _list(a1), "coloraxis": "coloraxis",
                       "name": titles[i - 1], "xaxis": f"x{sfx}", "yaxis": f"y{sfx}",
                       "hovertemplate": "α₁ %{y:.2f}<br>α₂ %{x:.2f}<br>ξ %{z:.3f}<extra></extra>"})
        shapes += _region_box(p.get("search_region"), a1, a2, f"x{sfx}", f"y{sfx}")
        axes[f"xaxis{sfx}"]["title"] = _title(f"α {p.get('task2', 'task 2')}")
        axes[f"yaxis{sfx}"]["title"] = _title(f"α {p.get('task1', 'task 1')}" if (i - 1) % cols == 0 else "")
    return make_figure(traces, title, height=110 + 330 * rows, shapes=shapes, annotations=anns,
                       margin={"l": 60, "r": 20, "t": 80, "b": 50},
                       coloraxis={"colorscale": SEQUENTIAL, "cmin": 0.0, "cmax": zmax,
                                  "colorbar": {"title": {"text": "ξ"}}}, **axes)


# --------------------------------------------------------------------------------------------
# localization / sharing
# --------------------------------------------------------------------------------------------
def _mix(c1: str, c2: str, f: float) -> str:
    """Hex colour ``f`` of the way from ``c1`` to ``c2``."""
    a = [int(c1[i:i + 2], 16) for i in (1, 3, 5)]
    b = [int(c2[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(x + (y - x) * f):02x}" for x, y in zip(a, b))


def centered_colorscale(zmin: float, zmax: float, center: float = 1.0, *, full_drop: float = 0.25) -> list[list]:
    """Diverging scale for [zmin, zmax] with white exactly at ``center``: blue above, red below.

    The red end is fully saturated only when ``zmin`` is at least ``full_drop`` below ``center`` (a 25 %
    accuracy loss by default), so a small dip like 0.97 stays pale even when the blue side spans 1 → 4.

    >>> centered_colorscale(0.5, 1.5)
    [[0.0, '#b2182b'], [0.5, '#f7f7f7'], [1.0, '#2166ac']]
    >>> centered_colorscale(0.9, 2.0)[0][1] != '#b2182b'
    True
    """
    lo, mid, hi = "#b2182b", "#f7f7f7", "#2166ac"
    if not (zmax > zmin):
        return [[0.0, mid], [1.0, hi]]
    p = (center - zmin) / (zmax - zmin)
    if p <= 0:
        return [[0.0, mid], [1.0, hi]]
    if p >= 1:
        return [[0.0, lo], [1.0, mid]]
    return [[0.0, _mix(mid, lo, min(1.0, (center - zmin) / full_drop))], [round(p, 6), mid], [1.0, hi]]


@plain_figure
def localization_heatmap(tasks: Sequence[str], matrix: Any, *, zmin: float | None = None,
                         zmax: float | None = None, title: str = "Function localization") -> go.Figure:
    """Row = task the vector was fine-tuned on, column = task evaluated; value = acc ÷ zero-shot acc.

    A localized method is blue on the red-marked diagonal (its own task improves) and white (≈ 1)
    elsewhere (other tasks untouched); red off the diagonal = the vector hurts another task. The colour
    scale is diverging around 1 (:func:`centered_colorscale`); pass shared ``zmin``/``zmax`` when
    comparing methods.
    """
    z = _matrix(matrix, "localization matrix")
    if z.shape != (len(tasks), len(tasks)):
        raise TalosError(f"localization matrix shape {z.shape} does not match {len(tasks)} tasks")
    zmin = _finite_min(z) if zmin is None else zmin
    zmax = _finite_max(z) if zmax is None else zmax
    trace = {"type": "heatmap", "z": _list(z), "x": list(tasks), "y": list(tasks), "zmin": zmin, "zmax": zmax,
             "colorscale": centered_colorscale(zmin, zmax, 1.0), "text": _cell_text(z), "texttemplate": "%{text}",
             "colorbar": MATRIX_COLORBAR | {"title": {"text": "acc / zero-shot", "side": "right"}},
             "hovertemplate": "fine-tuned on %{y}<br>evaluated on %{x}<br>%{z:.3f}<extra></extra>"}
    return make_figure([trace], title, height=matrix_height(len(tasks)), shapes=diagonal_shapes(len(tasks)),
                       margin=MATRIX_MARGIN, xaxis={"title": _title("evaluated on"), "type": "category"},
                       yaxis={"title": _title("fine-tuned on"), "type": "category", "autorange": "reversed"})


def matrices_per_row(n_tasks: int) -> int:
    """How many ``n_tasks × n_tasks`` matrix heatmaps to put side by side in the page's main column (about 1,000
    px at a 1,500 px window) so that every cell keeps room for its two-decimal value and the task names: three
    small ones, two up to six tasks, one beyond.

    >>> [matrices_per_row(n) for n in (2, 3, 4, 5, 6, 8)]
    [3, 3, 2, 2, 2, 1]
    """
    return 3 if n_tasks <= 3 else 2 if n_tasks <= 6 else 1


def shared_range(*matrices: Any) -> tuple[float, float]:
    """``(min, max)`` over all finite entries of several matrices: one colour scale for all of them."""
    return _finite_min(*matrices), _finite_max(*matrices)


@plain_figure
def sharing_heatmap(tasks: Sequence[str], matrix: Any, *, mode: str = "prune", zmin: float | None = None,
                    zmax: float | None = None, title: str | None = None) -> go.Figure:
    """Parameter sharing: row = task whose bottom-k entries were pruned/perturbed, column = evaluated task,
    value = accuracy ÷ unpruned accuracy (diagonal marked in red)."""
    z = _matrix(matrix, "sharing matrix")
    if z.shape != (len(tasks), len(tasks)):
        raise TalosError(f"sharing matrix shape {z.shape} does not match {len(tasks)} tasks")
    trace = {"type": "heatmap", "z": _list(z), "x": list(tasks), "y": list(tasks),
             "zmin": _finite_min(z) if zmin is None else zmin, "zmax": _finite_max(z) if zmax is None else zmax,
             "colorscale": "Cividis", "text": _cell_text(z), "texttemplate": "%{text}",
             "colorbar": MATRIX_COLORBAR | {"title": {"text": "acc ratio", "side": "right"}},
             "hovertemplate": f"{mode} of %{{y}}'s entries<br>evaluated on %{{x}}<br>%{{z:.3f}}<extra></extra>"}
    return make_figure([trace], title or f"Parameter sharing ({mode})", height=matrix_height(len(tasks)),
                       shapes=diagonal_shapes(len(tasks)), margin=MATRIX_MARGIN,
                       xaxis={"title": _title("evaluated on"), "type": "category"},
                       yaxis={"title": _title(f"{SHARING_DONE.get(mode, mode)} entries of"), "type": "category",
                              "autorange": "reversed"})


#: a sharing mode as its axis names what was done to the entries
SHARING_DONE = {"prune": "pruned", "perturb": "perturbed"}


# --------------------------------------------------------------------------------------------
# arithmetic
# --------------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------------
# efficiency / comparison
# --------------------------------------------------------------------------------------------
def efficiency_summary(eff: pd.DataFrame) -> pd.DataFrame:
    """One row per method of the SCHEMA ``efficiency`` columns, aggregated as the comparison table does
    (:func:`talos_core.evaluation.reports.efficiency_summary`, paper App. "Measuring computational
    costs"): step timings pooled over all iterations of all tasks (mean ± std), peak memory the
    largest over tasks; calibration and training time and trainable entries are means over tasks."""
    from talos_core.evaluation.reports import efficiency_summary as pooled_summary

    cols = ["fwd_bwd_s_mean", "fwd_bwd_s_std", "opt_s_mean", "opt_s_std", "calibration_s", "train_s",
            "peak_memory_mb", "trainable_entries"]
    present = [c for c in cols if c in eff.columns]
    num = eff[["method", *present]].copy()
    for c in present:
        num[c] = pd.to_numeric(num[c], errors="coerce")
    out = num.groupby("method", sort=False)[present].mean().reset_index()
    if "peak_memory_mb" in present:
        out["peak_memory_mb"] = num.groupby("method", sort=False)["peak_memory_mb"].max().to_numpy()
    needed = {"method", "task", "fwd_bwd_s_mean", "fwd_bwd_s_std", "opt_s_mean", "opt_s_std", "peak_memory_mb",
              "calibration_s"}
    if needed <= set(eff.columns):  # step timings: pooled over all iterations (methods without timings keep NaN)
        numeric = (needed - {"method", "task"}) | ({"steps"} & set(eff.columns))
        pooled = pooled_summary(eff.assign(**{c: pd.to_numeric(eff[c], errors="coerce") for c in numeric}))
        for c in ("fwd_bwd_s_mean", "fwd_bwd_s_std", "opt_s_mean", "opt_s_std"):
            out[c] = [pooled[str(m)][c] if str(m) in pooled else v for m, v in zip(out["method"], out[c])]
    if "peak_memory_kind" in eff.columns:
        out["peak_memory_kind"] = eff.groupby("method", sort=False)["peak_memory_kind"].first().to_numpy()
    if "steps" in eff.columns:  # the steps the timings pool (the error bars' n)
        out["steps"] = pd.to_numeric(eff["steps"], errors="coerce").groupby(eff["method"], sort=False).sum(
            min_count=1).reindex(out["method"]).to_numpy()
    return out


def mean_interval(mean: Any, std: Any, n: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(below, above)``: the half-widths of a 95 % interval of a mean of ``n`` values with standard deviation
    ``std`` (normal approximation, 1.96 · std / √n), clipped so the interval never goes below zero (a time or a size
    cannot be negative); NaN where ``n`` or ``std`` is unknown.

    A standard deviation of step times is no error bar for their mean: one 18-second step among a thousand
    half-second ones makes it 10 s, drawn from −10 to +11 s around a 0.7 s bar.

    >>> [np.round(a, 3).tolist() for a in mean_interval([0.5, 0.01], [0.2, 0.5], [100, 4])]
    [[0.039, 0.01], [0.039, 0.49]]
    """
    m, s, k = (np.asarray(v, dtype=float) for v in (mean, std, n))
    half = 1.96 * s / np.sqrt(np.where(k > 0, k, np.nan))
    return np.minimum(half, m), half


MEMORY_KINDS = {"peak_rss_since_reset": "peak RSS", "peak_rss_since_start": "peak RSS since the process started",
                "cuda_max_memory_allocated": "GPU, max. allocated"}
"""How each ``peak_memory_kind`` of an ``efficiency`` table (``talos_core.memory``) is named in words."""


def memory_kind_label(kind: Any) -> str:
    """``peak_memory_kind`` in words (:data:`MEMORY_KINDS`; an unknown kind as it is, none as ``""``).

    >>> memory_kind_label("peak_rss_since_reset"), memory_kind_label(None)
    ('peak RSS', '')
    """
    if kind is None or (isinstance(kind, float) and math.isnan(kind)) or str(kind) in ("", "nan", "None"):
        return ""
    return MEMORY_KINDS.get(str(kind), str(kind))


@plain_figure
def efficiency_bars(eff: pd.DataFrame, *, title: str = "Cost per method (over all tasks)") -> go.Figure:
    """Three panels: time per step split into forward+backward and optimizer (stacked; whiskers: the 95 % interval
    of each mean over all steps, :func:`mean_interval`), peak memory, calibration time. One colour per method; the
    optimizer part is hatched. The legend (grey: it names the two parts, whatever the method's colour) sits in its own
    row under the title, above the panels' titles."""
    summ = efficiency_summary(eff)
    if summ.empty:
        raise TalosError("efficiency table is empty; nothing to draw")
    methods = [str(m) for m in summ["method"]]
    labels = [method_label(m) for m in methods]
    colors = [method_color(m) for m in methods]
    kind = memory_kind_label(summ["peak_memory_kind"].iloc[0]) if "peak_memory_kind" in summ else ""
    titles = ["time per step (ms)", f"peak memory (MB{', ' + kind if kind else ''})", "mask calibration (s)"]
    axes, anns = _panel_axes(3, spacing=0.09, titles=titles, rangemode="tozero")
    col = lambda c: summ[c].to_numpy(dtype=float) if c in summ else np.zeros(len(summ))  # noqa: E731
    ms = 1000.0
    calib = np.nan_to_num(col("calibration_s"), nan=0.0)
    legend = [{"type": "bar", "x": labels[:1], "y": [0], "name": name, "hoverinfo": "skip", "xaxis": "x",
               "yaxis": "y", "marker": {"color": "#9a9a9a", **({"pattern": {"shape": "/"}} if hatched else {})}}
              for name, hatched in (("forward + backward", False), ("optimizer step (hatched)", True))]
    steps = col("steps") if "steps" in summ else np.full(len(summ), np.nan)

    def whiskers(part: str) -> dict:  # the 95 % interval of the mean step time (mean_interval), none without n
        below, above = mean_interval(col(f"{part}_s_mean") * ms, col(f"{part}_s_std") * ms, steps)
        return {"type": "data", "symmetric": False, "array": _list(np.nan_to_num(above)),
                "arrayminus": _list(np.nan_to_num(below)), "visible": bool(np.isfinite(above).any())}

    traces = [
        {"type": "bar", "x": labels, "y": _list(col("fwd_bwd_s_mean") * ms), "name": "forward + backward",
         "marker": {"color": colors}, "xaxis": "x", "yaxis": "y", "showlegend": False,
         "error_y": whiskers("fwd_bwd")},
        {"type": "bar", "x": labels, "y": _list(col("opt_s_mean") * ms), "name": "optimizer step",
         "marker": {"color": colors, "pattern": {"shape": "/"}, "line": {"color": "white"}}, "xaxis": "x",
         "yaxis": "y", "showlegend": False, "error_y": whiskers("opt")},
        {"type": "bar", "x": labels, "y": _list(col("peak_memory_mb")), "name": "peak memory",
         "marker": {"color": colors}, "showlegend": False, "xaxis": "x2", "yaxis": "y2"},
        {"type": "bar", "x": labels, "y": _list(calib), "name": "calibration", "marker": {"color": colors},
         "showlegend": False, "xaxis": "x3", "yaxis": "y3", "textposition": "outside",
         "text": ["—" if not v > 0 else f"{v:.1f}" for v in calib]},
        *legend,  # zero-height bars: legend entries in grey (the real bars carry one colour per method)
    ]
    # title, then the legend in its own row (container coordinates), then the panels' titles over the plots
    return make_figure(traces, title, height=400, annotations=anns, barmode="stack",
                       margin={"l": 60, "r": 20, "t": 105, "b": 50},
                       legend={"orientation": "h", "yref": "container", "y": 1 - 36 / 400, "yanchor": "top",
                               "xanchor": "left", "x": 0.0, "traceorder": "normal"}, **axes)


@plain_figure
def sparsity_curve(table: pd.DataFrame, *, method: str | None = None,
                   metrics: Sequence[str] = ("addition_norm", "single_task_acc", "negation_target"),
                   title: str = "Sparsity ablation") -> go.Figure:
    """Metrics of a ``sparsity_ablation`` table against sparsity (one line per metric)."""
    dashes = ["solid", "dash", "dot", "dashdot"]
    t = table.sort_values("sparsity")
    traces = [{"type": "scatter", "x": _list(t["sparsity"].to_numpy(dtype=float)),
               "y": _list(pd.to_numeric(t[m], errors="coerce").to_numpy(dtype=float)), "name": m.replace("_", " "),
               "mode": "lines+markers", "line": {"color": method_color(method or "talos"), "dash": dashes[i % 4]}}
              for i, m in enumerate(c for c in metrics if c in t.columns)]
    return make_figure(traces, title, height=320, xaxis={"title": _title("sparsity (fraction frozen)")},
                       yaxis={"title": _title("value")})


@plain_figure
def linearization_scatter(table: pd.DataFrame, *, title: str = "Is fine-tuning in the linear regime?") -> go.Figure:
    """Fine-tuned accuracy (x) vs its linearized prediction's accuracy (y); on the diagonal = linear regime. One
    colour per method; the task is in each point's hover text (labels written beside 25 points pile up)."""
    traces = [{"type": "scatter", "x": _list(sub["finetuned_acc"].to_numpy(dtype=float)),
               "y": _list(sub["linearized_acc"].to_numpy(dtype=float)), "mode": "markers",
               "text": sub["task"].tolist(), "name": method_label(str(method)),
               "hovertemplate": f"{method_label(str(method))} · %{{text}}<br>fine-tuned %{{x:.3f}}<br>linearized "
                                "%{y:.3f}<extra></extra>",
               "marker": {"size": 11, "color": method_color(str(method)), "line": {"width": 1, "color": "white"}}}
              for method, sub in table.groupby("method", sort=False)]
    return make_figure(traces, title, height=380,
                       shapes=[{"type": "line", "x0": 0, "y0": 0, "x1": 1, "y1": 1,
                                "line": {"color": "#999", "dash": "dot"}}],
                       xaxis={"title": _title("fine-tuned (non-linear) accuracy"), "range": [0, 1.02]},
                       yaxis={"title": _title("linearized accuracy"), "range": [0, 1.02]})


# --------------------------------------------------------------------------------------------
# training budget (learning curves) and hyperparameter selection
# --------------------------------------------------------------------------------------------
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


@plain_figure
def learning_curves(table: pd.DataFrame, *, budgets: Mapping[str, int | None] | None = None,
                    plateaus: Mapping[str, Mapping[str, int]] | None = None,
                    zero_shot: Mapping[str, float] | None = None, tasks: Sequence[str] | None = None,
                    columns: int = 3, title: str = "Validation accuracy vs training step") -> go.Figure:
    """Learning curves (issue 13: "budget set by convergence, measured"): validation accuracy against the
    training step, one panel per task, one line per method (its colour everywhere).

    ``table`` has columns ``method, task, step, val_acc`` (SCHEMA ``learning_curve``, several methods
    concatenated). ``budgets[method]`` is the step budget chosen from that method's curves: a vertical line
    on every panel, red and solid when all drawn methods share one budget, else dashed in each method's
    colour. ``plateaus[method][task]`` (the step where that curve plateaus) is an open diamond on the
    curve. ``zero_shot[task]`` (zero-shot validation accuracy) is a grey dotted line. ``tasks`` picks and
    orders the panels (default: every task of the table).

    >>> t = pd.DataFrame({"method": "talos", "task": ["a", "a", "b", "b"], "step": [5, 10, 5, 10],
    ...                   "val_acc": [0.5, 0.7, 0.4, 0.6]})
    >>> fig = learning_curves(t, budgets={"talos": 10}, plateaus={"talos": {"a": 10, "b": 5}})
    >>> [s["x0"] for s in fig.layout.shapes if s["name"] == "budget"], fig.layout.xaxis2.anchor
    ([10, 10], 'y2')
    """
    for col in ("method", "task", "step", "val_acc"):
        if col not in table.columns:
            raise TalosError(f"learning-curve table is missing column {col!r}")
    if table.empty:
        raise TalosError("learning-curve table is empty; nothing to draw")
    all_tasks = list(dict.fromkeys(table["task"].astype(str)))
    tasks = [t for t in (tasks if tasks is not None else all_tasks) if t in all_tasks]
    if not tasks:
        raise TalosError(f"no learning curves for the chosen task(s); the table has: {', '.join(all_tasks)}")
    methods = list(dict.fromkeys(table["method"].astype(str)))
    budgets = {m: b for m, b in (budgets or {}).items() if m in methods and b is not None}
    plateaus = plateaus or {}
    zero_shot = zero_shot or {}
    cols = max(1, min(columns, len(tasks)))
    axes, anns = _grid_axes(len(tasks), cols, tasks, yaxis={"range": [0, 1.05], "title": _title("val accuracy")},
                            xaxis={"title": _title("step"), "rangemode": "tozero"})
    shared = len(set(budgets.values())) == 1
    traces, shapes = [], []
    for i, task in enumerate(tasks):
        sfx = "" if i == 0 else str(i + 1)
        xa, ya = f"x{sfx}", f"y{sfx}"
        sub = table[table["task"].astype(str) == task]
        for m in methods:
            s = sub[sub["method"].astype(str) == m].sort_values("step")
            if s.empty:
                continue
            steps = s["step"].to_numpy(dtype=float)
            acc = s["val_acc"].to_numpy(dtype=float)
            traces.append({"type": "scatter", "x": _list(steps), "y": _list(acc), "mode": "lines+markers",
                           "name": method_label(m), "legendgroup": m, "showlegend": i == 0, "xaxis": xa, "yaxis": ya,
                           "line": {"color": method_color(m)}, "marker": {"size": 4},
                           "hovertemplate": f"{method_label(m)} · {task}<br>step %{{x}}<br>val acc %{{y:.3f}}"
                                            "<extra></extra>"})
            p = (plateaus.get(m) or {}).get(task)
            if p is not None:
                before = steps <= p
                yv = float(acc[before][-1]) if before.any() else float("nan")
                traces.append({"type": "scatter", "x": [p], "y": [yv], "mode": "markers", "name": "plateau",
                               "legendgroup": "plateau", "showlegend": not any(t.get("name") == "plateau"
                                                                                  for t in traces),
                               "xaxis": xa, "yaxis": ya, "hovertemplate": f"{method_label(m)} · {task}: plateau at "
                                                                          "step %{x}<extra></extra>",
                               "marker": {"symbol": "diamond-open", "size": 12, "color": method_color(m),
                                          "line": {"width": 2}}})
        for m, b in budgets.items():
            color, dash = (MARK_COLOR, "solid") if shared else (method_color(m), "dash")
            shapes.append({"type": "line", "xref": xa, "x0": b, "x1": b, "yref": f"{ya} domain", "y0": 0, "y1": 1,
                           "name": "budget", "line": {"color": color, "dash": dash, "width": 2}})
            if shared:
                break
        z = zero_shot.get(task)
        if z is not None and math.isfinite(z):
            shapes.append({"type": "line", "xref": f"{xa} domain", "x0": 0, "x1": 1, "yref": ya, "y0": z, "y1": z,
                           "name": "zero-shot", "line": {"color": ZERO_SHOT_COLOR, "dash": "dot", "width": 1}})
    if budgets:  # legend entries for the lines drawn as shapes
        if shared:
            b = next(iter(budgets.values()))
            traces.append({"type": "scatter", "x": [None], "y": [None], "mode": "lines", "name": f"budget = {b} steps",
                           "line": {"color": MARK_COLOR, "width": 2}})
        else:
            for m, b in budgets.items():
                traces.append({"type": "scatter", "x": [None], "y": [None], "mode": "lines",
                               "name": f"budget {method_label(m)} = {b}",
                               "line": {"color": method_color(m), "dash": "dash", "width": 2}})
    if any(zero_shot.get(t) is not None for t in tasks):
        traces.append({"type": "scatter", "x": [None], "y": [None], "mode": "lines", "name": "zero-shot",
                       "line": {"color": ZERO_SHOT_COLOR, "dash": "dot", "width": 1}})
    rows = math.ceil(len(tasks) / cols)
    return make_figure(traces, title, height=170 + 260 * rows, shapes=shapes, annotations=anns,
                       margin={"l": 60, "r": 20, "t": 125 if title else 75, "b": 50},
                       legend={"orientation": "h", "yanchor": "bottom", "y": 1.0 + 0.09 / rows, "xanchor": "left",
                               "x": 0.0}, **axes)


@plain_figure
def selection_scores(table: pd.DataFrame, *, param: str, method: str | None = None,
                     title: str | None = None) -> go.Figure:
    """Hyperparameter selection by validation task negation (paper App. "Hyperparameter selection"): for
    each task (a line), each candidate value (x, categorical, in grid order) and its score = the lowest
    validation target accuracy of θ0 − α τ with the control task kept (lower is better); the chosen
    candidate of each task is a red star.

    ``table``: SCHEMA ``selection`` columns (``task, value, score, best_alpha, chosen``, ...).

    >>> t = pd.DataFrame({"task": ["a", "a"], "value": [0.5, 0.9], "score": [0.4, 0.2], "best_alpha": [1.0, 5.0],
    ...                   "control_val_acc": [0.6, 0.6], "chosen": [False, True]})
    >>> fig = selection_scores(t, param="sparsity")
    >>> [tr.name for tr in fig.data], list(fig.data[1].x)
    (['a', 'chosen'], ['0.9'])
    """
    for col in ("task", "value", "score", "chosen"):
        if col not in table.columns:
            raise TalosError(f"selection table is missing column {col!r}")
    if table.empty:
        raise TalosError("selection table is empty; nothing to draw")

    def fmt(v: Any) -> str:
        return str(int(v)) if param == "rank" and float(v).is_integer() else f"{float(v):g}"

    order = [fmt(v) for v in dict.fromkeys(table["value"])]
    palette = [method_color(method or "talos"), *_FALLBACK]
    dashes = ["solid", "dash", "dot", "dashdot", "longdash"]
    traces = []
    for i, (task, sub) in enumerate(table.groupby("task", sort=False)):
        alpha = sub["best_alpha"] if "best_alpha" in sub else pd.Series(np.nan, index=sub.index)
        traces.append({"type": "scatter", "x": [fmt(v) for v in sub["value"]],
                       "y": _list(pd.to_numeric(sub["score"], errors="coerce").to_numpy(dtype=float)),
                       "customdata": _list(pd.to_numeric(alpha, errors="coerce").to_numpy(dtype=float)),
                       "mode": "lines+markers", "name": str(task),
                       "line": {"color": palette[i % len(palette)], "dash": dashes[i // len(palette) % len(dashes)]},
                       "hovertemplate": f"{task}<br>{param} %{{x}}<br>val target acc %{{y:.3f}} at α %{{customdata:g}}"
                                        "<extra></extra>"})
    ch = table[table["chosen"].astype(bool)]
    traces.append({"type": "scatter", "x": [fmt(v) for v in ch["value"]],
                   "y": _list(pd.to_numeric(ch["score"], errors="coerce").to_numpy(dtype=float)), "mode": "markers",
                   "name": "chosen", "text": ch["task"].astype(str).tolist(),
                   "hovertemplate": "%{text}: chosen " + param + " %{x}<extra></extra>",
                   "marker": {"symbol": "star", "size": 15, "color": MARK_COLOR}})
    title = title or (f"{method_label(method) + ': ' if method else ''}{param} per task — validation negation score "
                      "(lower = forgets more)")
    return make_figure(traces, title, height=360,
                       xaxis={"type": "category", "categoryorder": "array", "categoryarray": order,
                              "title": _title(f"candidate {param}")},
                       yaxis={"title": _title("val target accuracy, control kept"), "rangemode": "tozero"})


COMPARISON_HIGHER_BETTER = {"addition_abs", "addition_norm", "negation_control", "single_task_acc",
                            "zero_shot_acc"}
COMPARISON_LOWER_BETTER = {"negation_target", "time_per_step_s", "peak_memory_mb"}


#: the comparison table's columns as a person reads them (units in the header, numbers alone in the cells)
COMPARISON_HEADERS = {
    "store": "Store", "name": "Method", "addition_abs": "Addition: absolute accuracy (%)",
    "addition_norm": "Addition: normalized accuracy (%)", "negation_target": "Negation: target accuracy (%, ↓)",
    "negation_control": "Negation: control accuracy (%)", "single_task_acc": "Single-task accuracy (%)",
    "zero_shot_acc": "Zero-shot accuracy (%)", "time_per_step_s": "Time per step (ms)",
    "peak_memory_mb": "Peak memory (MB)", "sparsity": "Sparsity (fraction frozen)"}


def header(col: str) -> str:
    """A table column as a person reads it: :data:`COMPARISON_HEADERS`, else the id with spaces (``snake_case``
    never reaches the page).

    >>> header("addition_abs"), header("time_per_step_s"), header("some_new_column")
    ('Addition: absolute accuracy (%)', 'Time per step (ms)', 'Some new column')
    """
    return COMPARISON_HEADERS.get(col) or col.replace("_", " ").strip().capitalize()


def best_per_column(df: pd.DataFrame, exclude: Iterable[tuple[str, str]] = (),
                    veto: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
    """Index label of the best row per comparison column (max for accuracies, min for costs and the
    negation target accuracy). Columns with no finite value are skipped; normalized accuracy above 100 % and the
    ``(method, column)`` cells of ``exclude`` are never best; a column whose best is a cell of ``veto`` (a number the
    audit flags) has no best.

    >>> best_per_column(pd.DataFrame({"addition_abs": [0.5, 0.7], "peak_memory_mb": [10, 5]}))
    {'addition_abs': 1, 'peak_memory_mb': 1}
    """
    out: dict[str, Any] = {}
    excluded, vetoed = set(exclude), set(veto)
    for col in df.columns:
        if col not in COMPARISON_HIGHER_BETTER | COMPARISON_LOWER_BETTER:
            continue
        s = pd.to_numeric(df[col], errors="coerce")
        if col == "addition_norm":  # above 100 % it says the method's own single-task models are weak
            s = s.where(s <= 1.0)
        if excluded and "method" in df.columns:
            s = s.where([(str(m), col) not in excluded for m in df["method"]])
        if s.notna().any():
            best = s.idxmax() if col in COMPARISON_HIGHER_BETTER else s.idxmin()
            if "method" in df.columns and (str(df.at[best, "method"]), col) in vetoed:
                continue
            out[col] = best
    return out


def separated_best(df: pd.DataFrame, exclude: Iterable[tuple[str, str]] = (),
                   veto: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
    """The best row per column (:func:`best_per_column`, with its ``exclude`` and ``veto`` cells: numbers the audit
    flags) only where the 95 % intervals separate it from every other competing row: its interval lies wholly above
    (below, for lower-is-better columns) every other row's. A column without intervals (time, memory, a store
    written before them) or a row without one cannot be told apart: no best.

    >>> df = pd.DataFrame({"addition_abs": [0.8209, 0.8208, 0.5], "addition_abs_lo": [0.80, 0.79, 0.45],
    ...                    "addition_abs_hi": [0.84, 0.85, 0.55], "addition_norm": [0.9, 0.6, 0.5],
    ...                    "addition_norm_lo": [0.88, 0.55, 0.45], "addition_norm_hi": [0.92, 0.65, 0.55]})
    >>> separated_best(df)
    {'addition_norm': 0}
    """
    out: dict[str, Any] = {}
    excluded = set(exclude)
    methods = [str(m) for m in df["method"]] if "method" in df.columns else [None] * len(df)
    for col, best in best_per_column(df, excluded, veto).items():
        iv = interval_of(df, col)
        if iv is None:
            continue
        lo, hi = iv
        values = pd.to_numeric(df[col], errors="coerce")
        out_of_race = {i for i, m in zip(df.index, methods) if (m, col) in excluded
                       or (col == "addition_norm" and values[i] > 1.0)}
        others = [i for i in df.index if i != best and pd.notna(values[i]) and i not in out_of_race]
        if not others or pd.isna(lo[best]) or pd.isna(hi[best]):
            continue
        if col in COMPARISON_HIGHER_BETTER:
            apart = all(pd.notna(hi[i]) and hi[i] < lo[best] for i in others)
        else:
            apart = all(pd.notna(lo[i]) and lo[i] > hi[best] for i in others)
        if apart:
            out[col] = best
    return out


INTERVAL_SUFFIXES = ("_lo", "_hi")


def interval_of(df: pd.DataFrame, col: str) -> tuple[pd.Series, pd.Series] | None:
    """The ``<col>_lo``, ``<col>_hi`` columns (numeric) of a mean column, or ``None`` when the table has
    none (stores written before intervals existed)."""
    lo, hi = (f"{col}{sfx}" for sfx in INTERVAL_SUFFIXES)
    if lo not in df.columns or hi not in df.columns:
        return None
    return pd.to_numeric(df[lo], errors="coerce"), pd.to_numeric(df[hi], errors="coerce")


def has_intervals(df: pd.DataFrame) -> bool:
    """Whether any mean of the table has a (finite) 95% interval beside it."""
    return any(iv is not None and (iv[0].notna() & iv[1].notna()).any()
               for iv in (interval_of(df, c) for c in df.columns))


def _is_accuracy(col: str) -> bool:
    return col in COMPARISON_HIGHER_BETTER or col == "negation_target" or col.endswith(("_acc", "_norm", "_abs"))


def comparison_cells(df: pd.DataFrame, *, labels: bool = False, units: bool = True) -> pd.DataFrame:
    """The comparison table as display strings (pure), column ids kept: accuracies as percentages with their 95%
    bootstrap interval over test examples beside them where the table has one (``45.00% [41.2, 48.9]``), seconds in
    ms, memory in MB; the ``_lo``/``_hi`` columns folded into their means. ``labels``: a first column ``name`` with
    each method's readable label (:func:`~talos_core.schema.method_label`, variant rows such as ``talos-k0.9`` as
    ``TaLoS (k = 0.9)``). ``units=False``: the numbers without their unit (the header names it:
    :func:`comparison_table`).

    >>> comparison_cells(pd.DataFrame({"method": ["talos"], "addition_abs": [0.45],
    ...                                "addition_abs_lo": [0.412], "addition_abs_hi": [0.489]})).iloc[0].tolist()
    ['talos', '45.00% [41.2, 48.9]']
    """
    pct, ms, mb = ("%", " ms", " MB") if units else ("", "", "")
    folded = {f"{c}{sfx}" for c in df.columns if interval_of(df, c) is not None for sfx in INTERVAL_SUFFIXES}
    out = pd.DataFrame(index=df.index)
    if labels and "method" in df.columns:
        out["name"] = [method_label(str(m)) for m in df["method"]]
    for col in df.columns:
        if col in folded:
            continue
        values = df[col]
        if _is_accuracy(col):
            num = pd.to_numeric(values, errors="coerce")
            iv = interval_of(df, col)
            cells = []
            for i, v in zip(df.index, num):
                text = "—" if pd.isna(v) else f"{100 * v:.2f}{pct}"
                if iv is not None and not pd.isna(v) and not (pd.isna(iv[0][i]) or pd.isna(iv[1][i])):
                    text += f" [{100 * iv[0][i]:.1f}, {100 * iv[1][i]:.1f}]"
                cells.append(text)
            out[col] = cells
        elif col == "time_per_step_s":
            out[col] = ["—" if pd.isna(v) else f"{1000 * v:.1f}{ms}" for v in pd.to_numeric(values, errors="coerce")]
        elif col == "peak_memory_mb":
            out[col] = ["—" if pd.isna(v) else f"{v:.0f}{mb}" for v in pd.to_numeric(values, errors="coerce")]
        else:
            out[col] = values
    return out


BEST_STYLE = "font-weight: bold; background-color: #d9f0d3"
@dataclass(frozen=True)
class ComparisonTable:
    """The method comparison table as the Efficiency page shows it: ``cells`` (display strings under the headers a
    person reads, :func:`header`; one row per method, named by its catalogue label), ``best`` (header → row
    position of a best the 95 % intervals separate, :func:`separated_best`) and the table it was built from."""

    cells: pd.DataFrame
    best: dict[str, int]
    raw: pd.DataFrame

    def styler(self):
        """The cells as a pandas ``Styler`` (the separated bests bold on green; no index column)."""
        def _highlight(col: pd.Series) -> list[str]:
            return [BEST_STYLE if self.best.get(col.name) == pos else "" for pos in range(len(col))]

        return self.cells.style.apply(_highlight, axis=0).hide(axis="index")


def comparison_table(df: pd.DataFrame, *, badges: Mapping[tuple[str, str], str] | None = None,
                     not_best: tuple[Iterable[tuple[str, str]], Iterable[tuple[str, str]]] = ((), ())
                     ) -> ComparisonTable:
    """The one builder of the displayed comparison table (:class:`ComparisonTable`): method labels instead of
    ids, headers with units, numbers with their 95 % interval, and the bests the intervals separate. ``badges``:
    ``{(method, column): text}`` appended to those cells (the audit's ⚑ footnote numbers,
    :func:`dashboard.audit_view.cell_badges`); ``not_best``: the ``(exclude, veto)`` cells of
    :func:`best_per_column` (:func:`dashboard.audit_view.not_best`)."""
    cells = comparison_cells(df, labels=True, units=False)
    if badges and "method" in df.columns:
        from dashboard.audit_view import badge_table

        cells = badge_table(cells, [str(m) for m in df["method"]], badges)
    if "name" in cells.columns:
        cells = cells.drop(columns=["method"])
    first = [c for c in ("store", "name") if c in cells.columns]
    cells = cells[first + [c for c in cells.columns if c not in first]]
    positions = {idx: pos for pos, idx in enumerate(df.index)}
    best = {header(col): positions[idx] for col, idx in separated_best(df, *not_best).items()}
    return ComparisonTable(cells.rename(columns=header).reset_index(drop=True), best, df)


# --------------------------------------------------------------------------------------------
# published numbers (paper, not measured here)
# --------------------------------------------------------------------------------------------
#: Task addition, ViT-B/32, 8 vision tasks — absolute / normalized accuracy (%), paper Table 1.
PUBLISHED_ADDITION_VITB32: dict[str, tuple[float | None, float | None]] = {
    "zero-shot": (47.72, None),
    "nonlinear": (71.25, 76.94),
    "linearized": (76.70, 85.86),
    "ties": (74.79, 82.84),
    "tall_consensus": (74.55, 80.27),
    "dare": (70.88, 76.59),
    "breadcrumbs": (69.39, 79.51),
    "llora": (78.00, 86.08),
    "lota": (64.94, 74.37),
    "talos": (79.67, 90.73),
}
PUBLISHED_SOURCE = "published: TaLoS paper (ICLR 2025), Table 1, ViT-B/32, 8 tasks"


def published_addition_table() -> pd.DataFrame:
    """Paper Table 1 (ViT-B/32 task addition) as fractions, with a ``source`` column saying "published".

    >>> float(published_addition_table().set_index("method").loc["talos", "addition_abs"])
    0.7967
    """
    rows = [{"method": m, "addition_abs": a / 100.0, "addition_norm": None if n is None else n / 100.0,
             "source": PUBLISHED_SOURCE} for m, (a, n) in PUBLISHED_ADDITION_VITB32.items()]
    return pd.DataFrame(rows)


@plain_figure
def published_addition_bars(*, title: str = "PUBLISHED (paper Table 1, ViT-B/32) — not measured here") -> go.Figure:
    """Bars of the paper's published ViT-B/32 task-addition accuracies, clearly titled "published"."""
    t = published_addition_table()
    x = [method_label(m) for m in t["method"]]
    norm = [float("nan") if v is None or pd.isna(v) else float(v) for v in t["addition_norm"]]
    traces = [
        {"type": "bar", "x": x, "y": t["addition_abs"].tolist(), "name": "published absolute",
         "marker": {"color": [method_color(m) for m in t["method"]]}, "opacity": 0.55,
         "text": [_fmt(v) for v in t["addition_abs"]], "textposition": "outside"},
        {"type": "scatter", "x": x, "y": norm, "mode": "markers", "name": "published normalized",
         "marker": {"symbol": "diamond", "size": 10, "color": SINGLE_TASK_COLOR}},
    ]
    return make_figure(traces, title, height=360,
                       annotations=[{"text": "published numbers, copied from the paper", "xref": "paper",
                                     "yref": "paper", "x": 1, "y": 1.0, "showarrow": False,
                                     "font": {"color": "#666", "size": 11}, "xanchor": "right",
                                     "yanchor": "bottom"}],
                       yaxis={"range": [0, 1.05], "title": _title("accuracy (published)")},
                       xaxis={"type": "category"})
