"""DARE (Yu et al., "Language Models are Super Mario: Absorbing Abilities from Homologous Models as a Free Lunch",
ICML 2024): drop each entry with probability p = sparsity, rescale the survivors by 1/(1 − p), sum the tasks.

The tensor math is :func:`talos_core.methods.sparsify.dare`; each task's drop is seeded by (seed, task index), so
results are reproducible.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from talos_core.methods.declaration import MethodDeclaration, Param
from talos_core.methods.ties import POSTHOC_SPARSITY

if TYPE_CHECKING:
    import torch

    from talos_core.methods.taskvec import Vector, VectorLike

SEED = Param("seed", int, 0, doc="seeds each task's drop together with the task's index")


def _generator(seed: int, index: int) -> torch.Generator:
    import torch

    SEED.check(seed)
    return torch.Generator().manual_seed((seed * 10_007 + index) % (2**63))


def merge(vectors: Sequence[VectorLike], *, sparsity: float, seed: int = 0) -> Vector:
    """The sum of the tasks' DARE vectors at drop probability ``sparsity``."""
    from talos_core.methods.sparsify import dare
    from talos_core.methods.taskvec import _check_vectors, add

    _check_vectors(vectors)
    p = POSTHOC_SPARSITY.check(sparsity)
    return add([dare(vec, p, generator=_generator(seed, t)) for t, vec in enumerate(vectors)])


def single_task(vectors: Sequence[VectorLike], index: int, *, sparsity: float, seed: int = 0) -> Vector:
    """Task ``index``'s DARE vector (its drop seeded as in the merge)."""
    from talos_core.methods.sparsify import dare
    from talos_core.methods.taskvec import one_task

    (vector,) = one_task(vectors, index)
    return dare(vector, POSTHOC_SPARSITY.check(sparsity), generator=_generator(seed, index))


DECLARATION = MethodDeclaration(
    "dare", "DARE", "post-hoc", kind="posthoc", base_method="nonlinear",
    description="Drop each entry with probability p = sparsity and rescale survivors by 1/(1 - p) "
    "(Yu et al., 2024); seeded per task (seed, task index) so results are reproducible.",
    reference="Yu et al., Language Models are Super Mario, ICML 2024 (github.com/yule-BUAA/MergeLM)",
    params=(POSTHOC_SPARSITY, SEED), merge=f"{__name__}:merge", single_task=f"{__name__}:single_task")
