"""DELLA-Merging (Deep et al., "DELLA-Merging: Reducing Interference in Model Merging through Magnitude-Based
Sampling", 2024; github.com/declare-lab/della): drop entries at random with a probability that falls with their
magnitude (MagPrune), rescale the survivors, then elect a sign per entry and average the agreeing entries (TIES).

MagPrune, per row of each parameter (a matrix's rows; a 1-D parameter is one row; a higher-order tensor's rows are
its first dimension, the rest flattened): rank the row's ``n`` entries by ``|x|`` ascending (``r = 0`` the smallest,
equal magnitudes by position), keep entry ``i`` with probability ``k_i = (1 − sparsity − ε) + 2ε · r_i/(n − 1)``
(their mean is the density ``1 − sparsity``; ``n = 1``: the density) and scale a kept entry by ``1/k_i`` (the
paper's ``1/(1 − p_i)``, ``p_i = 1 − k_i`` its drop probability), so every entry keeps its expected value. The
draws are ``torch.rand`` of the row's shape from a generator seeded by (seed, task index), as DARE's, compared with
``k``. Then TIES' sign election (:func:`~talos_core.methods.sparsify.elect_sign`; entries whose mass is exactly 0
stay 0) and disjoint mean (:func:`~talos_core.methods.sparsify.disjoint_mean`); the evaluator's α search plays the
role of the paper's λ. A single task's vector is its MagPrune alone.

Declared here and listed once in :data:`talos_core.methods.registry.DECLARATIONS`: this file and its test are all
it takes to add a post-hoc merge. Torch is imported inside the functions, so the declaration stays torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from talos_core.errors import TalosError
from talos_core.methods.declaration import MethodDeclaration, Param
from talos_core.methods.ties import POSTHOC_SPARSITY

if TYPE_CHECKING:
    import torch

    from talos_core.methods.taskvec import Vector, VectorLike

EPSILON = Param("epsilon", float, 0.05, low=0.0, high=0.5, grid=(0.01, 0.05, 0.1),
                doc="half-width of the keep probabilities around the density (0: every entry kept at the density)")
SEED = Param("seed", int, 0, doc="seeds each task's draws together with the task's index")


def _fits(sparsity: float, epsilon: float) -> bool:
    """The keep probabilities ``1 − sparsity ± ε`` lie in [0, 1]."""
    return epsilon <= min(1.0 - sparsity, sparsity)


def keep_probabilities(rows: torch.Tensor, density: float, epsilon: float) -> torch.Tensor:
    """MagPrune's keep probability of every entry of ``rows`` (``[R, n]``): linear in its magnitude rank within its
    row, from ``density − ε`` (smallest) to ``density + ε`` (largest).

    >>> import torch
    >>> keep_probabilities(torch.tensor([[0.5, -3.0, 1.0]]), 0.5, 0.25).tolist()
    [[0.25, 0.75, 0.5]]
    """
    import torch

    n = rows.shape[1]
    order = torch.argsort(rows.detach().abs().float(), dim=1, stable=True)
    ranks = torch.argsort(order, dim=1, stable=True).to(torch.float64)
    scaled = ranks / (n - 1) if n > 1 else torch.full_like(ranks, 0.5)
    return ((density - epsilon) + 2.0 * epsilon * scaled).to(torch.float32)


def magprune(x: torch.Tensor, sparsity: float, epsilon: float, generator: torch.Generator) -> torch.Tensor:
    """MagPrune one tensor: drop entries with probability ``1 − k_i`` and rescale the kept ones by ``1/k_i``.

    >>> import torch
    >>> magprune(torch.tensor([1.0, -2.0]), 0.0, 0.0, torch.Generator().manual_seed(0))  # density 1 keeps all
    tensor([ 1., -2.])
    """
    import torch

    if not _fits(POSTHOC_SPARSITY.check(sparsity), EPSILON.check(epsilon)):
        raise TalosError(f"DELLA's epsilon {epsilon} must be at most min(sparsity, 1 − sparsity) = "
                         f"{min(sparsity, 1.0 - sparsity):g} so that every keep probability lies in [0, 1]")
    rows = x.detach().reshape(x.shape[0] if x.dim() > 1 else 1, -1)
    keep = keep_probabilities(rows, 1.0 - sparsity, epsilon)
    kept = torch.rand(rows.shape, generator=generator) < keep
    # +0 where dropped (a product with 0 would leave -0.0 for negative entries)
    pruned = torch.where(kept, rows.float() / keep.clamp(min=1e-12), torch.zeros_like(keep))
    return pruned.to(x.dtype).reshape(x.shape)


def _pruned(vector: VectorLike, sparsity: float, epsilon: float, seed: int, index: int) -> Vector:
    import torch

    generator = torch.Generator().manual_seed((SEED.check(seed) * 10_007 + index) % (2**63))
    return {name: magprune(x, sparsity, epsilon, generator) for name, x in vector.items()}


def merge(vectors: Sequence[VectorLike], *, sparsity: float, epsilon: float = 0.05, seed: int = 0) -> Vector:
    """DELLA: each task's MagPrune, then sign election and the disjoint mean, parameter by parameter."""
    import torch

    from talos_core.methods.sparsify import disjoint_mean, elect_sign
    from talos_core.methods.taskvec import _check_vectors

    keys = _check_vectors(vectors)
    pruned = [_pruned(vec, sparsity, epsilon, seed, t) for t, vec in enumerate(vectors)]
    out: Vector = {}
    with torch.no_grad():
        for name in keys:
            stacked = torch.stack([p[name] for p in pruned])
            out[name] = disjoint_mean(stacked, elect_sign(stacked))
    return out


def single_task(vectors: Sequence[VectorLike], index: int, *, sparsity: float, epsilon: float = 0.05,
                seed: int = 0) -> Vector:
    """Task ``index``'s MagPrune (drawn as in the merge); election and the mean leave one vector unchanged."""
    from talos_core.methods.taskvec import one_task

    (vector,) = one_task(vectors, index)
    return _pruned(vector, sparsity, epsilon, seed, index)


DECLARATION = MethodDeclaration(
    "della", "DELLA", "post-hoc", kind="posthoc", base_method="nonlinear",
    description="Drop entries with a probability that falls with their magnitude rank within the row (density ± ε), "
    "rescale survivors by 1/keep probability, then elect signs and average the agreeing entries as TIES "
    "(Deep et al., 2024); seeded per task.",
    reference="Deep et al., DELLA-Merging: Reducing Interference in Model Merging through Magnitude-Based Sampling, "
              "2024 (github.com/declare-lab/della)",
    params=(POSTHOC_SPARSITY, EPSILON, SEED), constraint=lambda p: _fits(p["sparsity"], p["epsilon"]),
    merge=f"{__name__}:merge", single_task=f"{__name__}:single_task")
