"""Task × task and α × α heatmaps (pure): the disentanglement error ξ over an α grid, and the localization and
sharing matrices.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from dashboard.figures_core import (
    MARK_COLOR,
    MATRIX_COLORBAR,
    MATRIX_MARGIN,
    SEQUENTIAL,
    _cell_text,
    _finite_max,
    _finite_min,
    _grid_axes,
    _list,
    _matrix,
    _title,
    diagonal_shapes,
    make_figure,
    matrix_height,
)
from dashboard.plain import plain_figure
from talos_core.errors import TalosError
from talos_core.schema import method_label


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
