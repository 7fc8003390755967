"""TALL masks / Consensus (Wang et al., "Localizing Task Information for Improved Model Merging and Compression",
ICML 2024): per task a mask ``|τ_t| > λ|τ_MTL − τ_t|``; task addition keeps the multi-task vector where at least
``k`` masks agree, a single task uses ``m_t ⊙ τ_MTL``.

The tensor math is :func:`talos_core.methods.sparsify.consensus_merge` and
:func:`~talos_core.methods.sparsify.tall_single_task`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from talos_core.methods.declaration import MethodDeclaration, Param

if TYPE_CHECKING:
    from talos_core.methods.taskvec import Vector, VectorLike

TALL_LAMBDA_GRID: tuple[float, ...] = (0.2, 0.3, 0.4, 0.5, 0.6)
"""TALL mask λ grid (Wang et al., 2024); the official TaLoS scripts use λ = 0.2."""


def consensus_k_grid(num_tasks: int) -> tuple[int, ...]:
    """Paper appendix: consensus threshold k ∈ {0, …, T}.

    >>> consensus_k_grid(3)
    (0, 1, 2, 3)
    """
    return tuple(range(num_tasks + 1))


LAM = Param("lam", float, 0.2, low=0.0, grid=TALL_LAMBDA_GRID, doc="the TALL mask's λ")
K = Param("k", int, 2, low=0, grid=consensus_k_grid, doc="entries kept where at least k task masks agree")


def merge(vectors: Sequence[VectorLike], *, lam: float, k: int = 2) -> Vector:
    """The multi-task vector where at least ``k`` TALL masks agree."""
    from talos_core.methods.sparsify import consensus_merge

    return consensus_merge(vectors, k, lam=lam)


def single_task(vectors: Sequence[VectorLike], index: int, *, lam: float, k: int = 2, source: str = "mtl") -> Vector:
    """Task ``index``'s TALL-masked multi-task vector."""
    from talos_core.methods.sparsify import tall_single_task

    return tall_single_task(vectors, index, lam=lam, k=k, source=source)  # type: ignore[arg-type]


DECLARATION = MethodDeclaration(
    "tall_consensus", "TALL Mask / Consensus", "post-hoc", kind="posthoc", base_method="nonlinear",
    description="Per-task TALL masks |τ_t| > λ|τ_MTL − τ_t|; task addition keeps the multi-task vector "
    "where at least k masks agree; single task uses m_t ⊙ τ_MTL (Wang et al., 2024).",
    reference="Wang et al., Localizing Task Information for Improved Model Merging and Compression, ICML 2024 "
              "(github.com/nik-dim/tall_masks)",
    params=(LAM, K), merge=f"{__name__}:merge", single_task=f"{__name__}:single_task")
