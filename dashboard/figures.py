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
  validation (set :data:`dashboard.figures_core.VALIDATE` or ``TALOS_DASHBOARD_VALIDATE=1`` to validate; the tests
  do): building a figure then costs ~1–3 ms instead of ~100 ms, which keeps slider moves interactive.

The figures live in one module per family, all built on ``figures_core`` (colours, :func:`make_figure`, layout
helpers): ``figures_masks`` (masks), ``figures_heatmaps`` (ξ, localization, sharing), ``figures_arithmetic``
(addition, negation, α curves), ``figures_efficiency`` (cost, sparsity, learning curves, selection) and
``figures_compare`` (the comparison table, published numbers). This module re-exports their public names, so
``from dashboard import figures`` reaches every figure; the validation switch is read where it lives
(``figures_core.VALIDATE``), and a function is patched for a test in its own module, not here.
"""

from __future__ import annotations

from dashboard.figures_arithmetic import (
    CHAR_PX,
    HALF_COLUMN_PX,
    alpha_curve,
    arithmetic_bars,
    negation_bars,
    negation_curve,
    turn_labels,
)
from dashboard.figures_compare import (
    BEST_STYLE,
    COMPARISON_HEADERS,
    COMPARISON_HIGHER_BETTER,
    COMPARISON_LOWER_BETTER,
    INTERVAL_SUFFIXES,
    PUBLISHED_ADDITION_VITB32,
    PUBLISHED_SOURCE,
    ComparisonTable,
    best_per_column,
    comparison_cells,
    comparison_table,
    has_intervals,
    header,
    interval_of,
    published_addition_bars,
    published_addition_table,
    separated_best,
)
from dashboard.figures_core import (
    LAYER_LABELS,
    LAYER_TYPES,
    LIGHT_TEMPLATE,
    MARK_COLOR,
    MATRIX_COLORBAR,
    MATRIX_MARGIN,
    METHOD_COLORS,
    SEQUENTIAL,
    SINGLE_TASK_COLOR,
    ZERO_SHOT_COLOR,
    diagonal_shapes,
    export_ready,
    hline,
    layer_label,
    legend_line,
    make_figure,
    matrix_height,
    method_color,
    vline,
)
from dashboard.figures_efficiency import (
    MEMORY_KINDS,
    efficiency_bars,
    efficiency_summary,
    learning_curves,
    linearization_scatter,
    machines_note,
    mean_interval,
    memory_kind_label,
    memory_kinds,
    memory_title,
    selection_scores,
    sparsity_curve,
)
from dashboard.figures_heatmaps import (
    SHARING_DONE,
    centered_colorscale,
    localization_heatmap,
    matrices_per_row,
    shared_range,
    sharing_heatmap,
    xi_heatmap,
    xi_side_by_side,
)
from dashboard.figures_masks import (
    cross_method_iou_bars,
    mask_density_bars,
    mask_density_grid,
    mask_density_heatmap,
    mask_iou_heatmap,
)

__all__ = ["BEST_STYLE", "CHAR_PX", "COMPARISON_HEADERS", "COMPARISON_HIGHER_BETTER", "COMPARISON_LOWER_BETTER",
           "ComparisonTable", "HALF_COLUMN_PX", "INTERVAL_SUFFIXES", "LAYER_LABELS", "LAYER_TYPES",
           "LIGHT_TEMPLATE", "MARK_COLOR", "MATRIX_COLORBAR", "MATRIX_MARGIN", "MEMORY_KINDS", "METHOD_COLORS",
           "PUBLISHED_ADDITION_VITB32", "PUBLISHED_SOURCE", "SEQUENTIAL", "SHARING_DONE", "SINGLE_TASK_COLOR",
           "ZERO_SHOT_COLOR", "alpha_curve", "arithmetic_bars", "best_per_column", "centered_colorscale",
           "comparison_cells", "comparison_table", "cross_method_iou_bars", "diagonal_shapes", "efficiency_bars",
           "efficiency_summary", "export_ready", "has_intervals", "header", "hline", "interval_of", "layer_label",
           "learning_curves", "legend_line", "linearization_scatter", "localization_heatmap", "make_figure",
           "mask_density_bars", "mask_density_grid", "mask_density_heatmap", "mask_iou_heatmap", "matrices_per_row",
           "machines_note", "matrix_height", "mean_interval", "memory_kind_label", "memory_kinds", "memory_title",
           "method_color", "negation_bars", "negation_curve",
           "published_addition_bars", "published_addition_table", "selection_scores", "separated_best", "shared_range",
           "sharing_heatmap", "sparsity_curve", "turn_labels", "vline", "xi_heatmap", "xi_side_by_side"]
