"""Mask figures (pure): the trainable fraction per block and layer type, and how masks overlap between tasks and
methods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from dashboard.figures_core import (
    _FALLBACK,
    LAYER_TYPES,
    MATRIX_COLORBAR,
    MATRIX_MARGIN,
    SEQUENTIAL,
    _cell_text,
    _finite_max,
    _fmt,
    _list,
    _matrix,
    _title,
    layer_label,
    make_figure,
    matrix_height,
    method_color,
)
from dashboard.plain import plain_figure
from talos_core.errors import TalosError
from talos_core.schema import method_label


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
    m1, m2 = [*methods, "?", "?"][:2]
    trace = {"type": "bar", "x": table["task"].tolist(), "y": _list(table["iou"].to_numpy(dtype=float)),
             "marker": {"color": method_color(m1)}, "text": [_fmt(v) for v in table["iou"]],
             "textposition": "outside", "name": "IoU"}
    return make_figure([trace], title or f"Mask IoU per task: {method_label(m1)} vs {method_label(m2)}",
                       height=320, yaxis={"range": [0, 1.05], "title": _title("IoU")}, xaxis={"type": "category"})
