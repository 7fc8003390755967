"""TIES-Merging (Yadav et al., "TIES-Merging: Resolving Interference When Merging Models", NeurIPS 2023): trim each
task vector to its largest magnitudes, elect a sign per entry by mass, average the entries that agree with it.

The tensor math is :func:`talos_core.methods.sparsify.ties_merge`; the post-hoc sparsity is TaLoS's parameter
(:data:`talos_core.methods.finetuning.SPARSITY`: same default and range) searched on the paper's post-hoc grid.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from talos_core.methods.declaration import MethodDeclaration
from talos_core.methods.finetuning import SPARSITY

if TYPE_CHECKING:
    from talos_core.methods.taskvec import Vector, VectorLike

SPARSITY_GRID: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
"""Paper appendix: post-hoc sparsity ratio k ∈ {0.1, 0.2, …, 0.9, 0.95, 0.99}."""

POSTHOC_SPARSITY = SPARSITY.with_(grid=SPARSITY_GRID, tag=None,
                                  doc="fraction of each task vector's entries dropped (paper's k)")
"""The sparsity of the post-hoc sparsifying merges (TIES, DARE), on the paper's post-hoc grid."""


def merge(vectors: Sequence[VectorLike], *, sparsity: float, lam: float = 1.0) -> Vector:
    """TIES-Merging of ``vectors`` at ``sparsity`` (the evaluator's α search plays λ's role, so ``lam=1``)."""
    from talos_core.methods.sparsify import ties_merge

    return ties_merge(vectors, 1.0 - POSTHOC_SPARSITY.check(sparsity), lam=lam)


DECLARATION = MethodDeclaration(
    "ties", "TIES-Merging", "post-hoc", kind="posthoc", base_method="nonlinear",
    description="Trim each vector to its top (1 - sparsity) magnitudes (global), elect signs by mass, "
    "average the agreeing entries (Yadav et al., 2023). λ is fixed to 1: the evaluator's α search "
    "plays its role.",
    reference="Yadav et al., TIES-Merging, NeurIPS 2023 (github.com/prateeky2806/ties-merging)",
    params=(POSTHOC_SPARSITY,), merge=f"{__name__}:merge")
