"""Model Breadcrumbs (Davari & Belilovsky, "Model Breadcrumbs: Scaling Multi-Task Model Merging with Sparse
Masks", ECCV 2024): per tensor, drop the smallest ``sparsity`` fraction of magnitudes and the outliers at or above
the ``outlier_quantile`` quantile, keep the band in between, sum the tasks.

The tensor math is :func:`talos_core.methods.sparsify.breadcrumbs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from talos_core.methods.declaration import MethodDeclaration, Param
from talos_core.methods.ties import POSTHOC_SPARSITY

if TYPE_CHECKING:
    from talos_core.methods.taskvec import Vector, VectorLike

OUTLIER_QUANTILE_GRID: tuple[float, ...] = (0.8, 0.9, 0.95, 0.99, 0.992, 0.994, 0.996, 0.998, 0.999)
"""Paper appendix: Breadcrumbs outlier quantile ∈ {0.8, 0.9, 0.95, 0.99, 0.992, 0.994, …, 0.999}."""

SPARSITY = POSTHOC_SPARSITY.with_(default=0.7)
OUTLIER_QUANTILE = Param("outlier_quantile", float, 0.9, low=0.0, high=1.0, high_open=False,
                         grid=OUTLIER_QUANTILE_GRID, doc="magnitudes at or above this quantile are dropped")


def merge(vectors: Sequence[VectorLike], *, sparsity: float, outlier_quantile: float) -> Vector:
    """The sum of the tasks' Breadcrumbs vectors."""
    from talos_core.methods.sparsify import breadcrumbs_merge

    return breadcrumbs_merge(vectors, SPARSITY.check(sparsity), outlier_quantile)


def single_task(vectors: Sequence[VectorLike], index: int, *, sparsity: float, outlier_quantile: float) -> Vector:
    """Task ``index``'s Breadcrumbs vector."""
    from talos_core.methods.sparsify import breadcrumbs
    from talos_core.methods.taskvec import one_task

    (vector,) = one_task(vectors, index)
    return breadcrumbs(vector, SPARSITY.check(sparsity), outlier_quantile)


DECLARATION = MethodDeclaration(
    "breadcrumbs", "Breadcrumbs", "post-hoc", kind="posthoc", base_method="nonlinear",
    description="Per tensor, drop the smallest `sparsity` fraction and the magnitudes at or above the "
    "`outlier_quantile` quantile, keep the band in between (Davari & Belilovsky, 2023).",
    reference="Davari & Belilovsky, Model Breadcrumbs, ECCV 2024 (github.com/rezazzr/breadcrumbs)",
    params=(SPARSITY, OUTLIER_QUANTILE), constraint=lambda p: p["sparsity"] < p["outlier_quantile"],
    merge=f"{__name__}:merge", single_task=f"{__name__}:single_task")
