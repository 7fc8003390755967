"""LiNeS (Wang et al., "LiNeS: Post-training Layer Scaling Prevents Forgetting and Enhances Model Merging", ICLR
2025), following the authors' code (github.com/wang-kee/LiNeS): ``λ(ℓ) = α + β (ℓ − 1)/(L − 1)`` on the
task-arithmetic sum with the rule ``α = 1/T`` (shallow layers get the task vectors' mean) and β searched on
:data:`LINES_BETA_GRID`, the result added at α = 1 (:data:`LINES_ADDITION_ALPHA`); parameters outside the blocks
are scaled by ``α`` (option ``nonblock="first"``; ``"nearest"``: by the factor of the block before them).

The tensor math is :func:`talos_core.methods.spectral.lines_merge`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from talos_core.methods.declaration import AlphaRule, MethodDeclaration, Param

if TYPE_CHECKING:
    from talos_core.methods.spectral import NonBlock
    from talos_core.methods.taskvec import Vector, VectorLike

LINES_BETA_GRID: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
"""LiNeS β (the deepest layer's extra scale) ∈ {0.1, 0.2, …, 1}, with α = 1/T: the authors' multi-task search
(``np.linspace(0, 1, 11)[1:]``; β = 0, the task-vector mean, is left out of it). The default β = 0.5 (used where no
search runs, e.g. ``talos merge`` without a stored choice) is the grid's middle, not a value from the paper."""

LINES_ADDITION_ALPHA: float = 1.0
"""LiNeS: the authors apply the layer-scaled multi-task vector as it is (coefficient 1) and search β instead."""

BETA = Param("beta", float, 0.5, low=0.0, grid=LINES_BETA_GRID, doc="the deepest layer's extra scale")


def single_task(vectors: Sequence[VectorLike], index: int, *, beta: float, alpha: float | None = None,
                nonblock: NonBlock = "first") -> Vector:
    """LiNeS rescales the multi-task vector only: task ``index``'s own vector is returned as fine-tuned (the
    LiNeS paper normalizes by the fine-tuned models), so its single-task and negation rows are task arithmetic's."""
    from talos_core.methods.spectral import lines_factors
    from talos_core.methods.taskvec import one_task

    (vector,) = one_task(vectors, index)
    lines_factors(["x"], 1.0 if alpha is None else alpha, beta, nonblock)  # validated for a uniform interface
    return {name: x.detach().clone() for name, x in vector.items()}


DECLARATION = MethodDeclaration(
    "lines", "LiNeS", "post-hoc", kind="posthoc", base_method="nonlinear",
    description="The task-arithmetic sum scaled per layer by 1/T + β·depth (0 at the first block, 1 at the "
    "last; parameters outside the blocks by 1/T): shallow layers averaged, deep ones kept (Wang et al., 2025); "
    "β searched on 0.1…1 and the result applied at α = 1, as the authors.",
    reference="Wang et al., LiNeS, ICLR 2025 (github.com/wang-kee/LiNeS)",
    params=(BETA,), options={"nonblock": ("first", "nearest")}, alpha=AlphaRule(addition_alpha=LINES_ADDITION_ALPHA),
    merge="talos_core.methods.spectral:lines_merge", single_task=f"{__name__}:single_task")
