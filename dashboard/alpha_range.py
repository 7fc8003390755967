"""The span and step of the Arithmetic page's α sliders (pure: no Streamlit).

The stored α grids span what the protocol searched (0–100 for TaLoS on ``vision``: its grid is stretched by
1/(1 − sparsity)), but what a class looks at happens near the selected α, often in 0–2. A slider over the whole grid
puts that in the first few percent of its track, where a mouse cannot place a thumb. So a slider opens on the
**teaching range** (:func:`teaching_range`): from the grid's start to the first grid point at or beyond
``max(2, 1.25 × the selected α)``; the page's "Full searched α range" toggle gives the whole grid. The step
(:func:`slider_step`) keeps at least :data:`MIN_POSITIONS` positions on the track and divides the examples'
dense exact points (:data:`talos_core.evaluation.examples.TEACHING_ALPHA_STEP`).

>>> teaching_range([0, 1, 2, 5, 10, 50, 100], [1.0])
(0.0, 2.0)
>>> teaching_range([0, 5, 10, 15, 20, 100], [10.0])
(0.0, 15.0)
>>> slider_step(1.0, 0.0, 2.0), slider_step(0.5, 0.0, 10.0), slider_step(1.0, 0.0, 100.0)
(0.01, 0.1, 0.2)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from talos_core.evaluation.examples import TEACHING_ALPHA_MAX

#: a slider keeps at least this many positions on its track (a mouse can place the thumb between grid points)
MIN_POSITIONS = 100
#: how far beyond the largest selected α the teaching range reaches
HEADROOM = 1.25


def teaching_range(grid: Sequence[float], selected: Iterable[float] = ()) -> tuple[float, float]:
    """``(lo, hi)`` of the teaching range on ``grid``: its start to the first grid point ≥ ``max(2, 1.25 × max
    selected)`` (the whole grid when none is that far)."""
    g = np.unique(np.asarray(grid, dtype=float))
    if g.size == 0:
        return 0.0, 0.0
    chosen = [float(a) for a in selected if a is not None and math.isfinite(float(a))]
    want = max([TEACHING_ALPHA_MAX, *(HEADROOM * a for a in chosen)])
    beyond = g[g >= want - 1e-9]
    return float(g.min()), float(beyond.min() if beyond.size else g.max())


def slider_range(grid: Sequence[float], selected: Iterable[float] = (), *, full: bool = False) -> tuple[float, float]:
    """The slider's ``(lo, hi)``: the whole grid when ``full``, else :func:`teaching_range`."""
    g = np.asarray(grid, dtype=float)
    return (float(g.min()), float(g.max())) if full and g.size else teaching_range(grid, selected)


def has_wider_grid(grid: Sequence[float], selected: Iterable[float] = ()) -> bool:
    """Whether the grid reaches beyond the teaching range (the page offers the full range then)."""
    g = np.asarray(grid, dtype=float)
    return bool(g.size) and teaching_range(grid, selected)[1] < float(g.max()) - 1e-9


def slider_step(grid_step: float, lo: float, hi: float) -> float:
    """A fifth of the grid step when that leaves :data:`MIN_POSITIONS` positions on ``[lo, hi]``, else the largest
    1·10ᵏ or 5·10ᵏ that does (both divide the examples' 0.05 spacing of dense exact points)."""
    step = grid_step / 5
    if hi <= lo or (hi - lo) / step >= MIN_POSITIONS - 1e-9:
        return float(f"{step:.12g}")
    target = (hi - lo) / MIN_POSITIONS
    k = math.floor(math.log10(target))
    for mant in (5, 1):
        if mant * 10.0 ** k <= target + 1e-15:
            return float(f"{mant * 10.0 ** k:.12g}")
    return float(f"{10.0 ** (k - 1) * 5:.12g}")


def outside(values: Iterable[float], lo: float, hi: float) -> bool:
    """Whether any of ``values`` lies outside ``[lo, hi]`` (a link's α beyond the teaching range opens the full one)."""
    return any(v < lo - 1e-9 or v > hi + 1e-9 for v in values)
