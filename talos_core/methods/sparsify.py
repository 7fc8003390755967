"""The sparsifying merges the paper compares against, as pure tensor functions on task vectors
(:mod:`talos_core.methods.taskvec`): TIES-Merging's sign election and disjoint mean, DARE, Breadcrumbs, and the
TALL masks / Consensus. Their declarations are :mod:`talos_core.methods.ties`, :mod:`~talos_core.methods.dare`,
:mod:`~talos_core.methods.breadcrumbs` and :mod:`~talos_core.methods.tall`.

Per-tensor helpers work on a stacked tensor ``[T, ...]`` (see :func:`~talos_core.methods.taskvec.stack_param`)
and are what the dict-level functions call key by key: :func:`elect_sign`, :func:`disjoint_mean`,
:func:`tall_mask_tensor`.

Differences from the official TaLoS code (github.com/iurada/talos-task-arithmetic; the full list of paper /
official-code choices: ``docs/protocol.md``):

* TALL mask: the official code compares ``|τ_t|`` with ``λ (τ_MTL − τ_t)`` without ``abs()`` and
  applies the last task's mask to every vector; here the mask is ``|τ_t| > λ |τ_MTL − τ_t|`` and each
  task gets its own mask.
* TIES sign tie-break: entries whose trimmed values sum to exactly 0 take the vector-wide majority
  sign, as in the original TIES-Merging code (sign of the sum of elected signs); the official TaLoS
  code takes the sign of ``Σ|τ|``, which is always +1.
* DARE: Bernoulli drop (original DARE); the official TaLoS code drops exactly ``int(p·n)`` entries per
  tensor and skips a few embedding tensors.
* Breadcrumbs: per-tensor quantile band (original Breadcrumbs, paper grid); the official TaLoS code
  works per row of the last dimension (available as ``scope="row"``) with fixed fractions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

import torch

from talos_core.errors import TalosError, check_int, check_range
from talos_core.methods.taskvec import (
    BandScope,
    Scope,
    TieBreak,
    Vector,
    VectorLike,
    _check_density,
    _check_index,
    _check_lam,
    _check_vector,
    _check_vectors,
    _count,
    _masked,
    _no_grad,
    _scores,
    _topk_select,
    add,
    magnitude_topk_mask,
    stack_param,
)

TallSource = Literal["mtl", "task"]


# ----------------------------------------------------------------------------------------------------
# TIES-Merging (Yadav et al., 2023)
# ----------------------------------------------------------------------------------------------------


def elect_sign(stacked: torch.Tensor, *, tie_sign: float = 0.0) -> torch.Tensor:
    """TIES sign election on a stacked ``[T, ...]`` tensor: ``γ = sgn(Σ_t τ̂_t)`` (sign of the total mass).

    Entries whose sum is exactly 0 get ``tie_sign`` (-1, 0 or +1). Returns a tensor of shape ``[...]``
    with values in {-1, 0, +1} and the input's dtype.

    >>> elect_sign(torch.tensor([[2.0, -1.0, 3.0], [-1.0, -1.0, -3.0]]))
    tensor([ 1., -1.,  0.])
    >>> elect_sign(torch.tensor([[2.0, -1.0, 3.0], [-1.0, -1.0, -3.0]]), tie_sign=1.0)
    tensor([ 1., -1.,  1.])
    """
    if not isinstance(stacked, torch.Tensor) or stacked.dim() < 1:
        raise TalosError("stacked must be a tensor of shape [T, ...] with at least one dimension")
    if tie_sign not in (-1, 0, 1):
        raise TalosError(f"tie_sign must be -1, 0 or 1, got {tie_sign!r}")
    sign = torch.sign(stacked.sum(dim=0))
    if tie_sign != 0:
        sign = torch.where(sign == 0, torch.full_like(sign, float(tie_sign)), sign)
    return sign


def disjoint_mean(stacked: torch.Tensor, sign: torch.Tensor) -> torch.Tensor:
    """TIES disjoint merge: mean over the tasks whose entry is non-zero and agrees with ``sign``.

    ``τ_m[j] = Σ_{t ∈ A_j} τ̂_t[j] / |A_j|`` with ``A_j = {t : τ̂_t[j] ≠ 0, sgn(τ̂_t[j]) = γ[j]}``;
    0 where ``A_j`` is empty (including where ``γ[j] = 0``).

    >>> disjoint_mean(torch.tensor([[2.0, -1.0, 0.0], [4.0, 3.0, 0.0]]), torch.tensor([1.0, -1.0, 1.0]))
    tensor([ 3., -1.,  0.])
    """
    if not isinstance(stacked, torch.Tensor) or stacked.dim() < 1 or stacked.shape[1:] != sign.shape:
        raise TalosError(
            f"disjoint_mean needs stacked [T, ...] and sign [...] shapes that match, got "
            f"{tuple(getattr(stacked, 'shape', ()))} and {tuple(sign.shape)}"
        )
    agree = (stacked != 0) & (torch.sign(stacked) == sign.unsqueeze(0))
    total = _masked(stacked, agree).sum(dim=0)
    count = agree.sum(dim=0).clamp(min=1)
    return total / count.to(total.dtype)


@_no_grad
def ties_merge(
    vectors: Sequence[VectorLike],
    density: float,
    *,
    lam: float = 1.0,
    scope: Scope = "global",
    tie_break: TieBreak = "majority",
) -> Vector:
    """TIES-Merging: trim, elect sign, disjoint mean, scale (Yadav et al., 2023, Alg. 1).

    1. Trim: ``τ̂_t`` = top ``density`` fraction of ``τ_t`` by magnitude (:func:`trim`; global by default).
       ``density = 1`` skips trimming (the paper's appendix "TaLoS + TIES" variant).
    2. Elect: ``γ = sgn(Σ_t τ̂_t)`` (:func:`elect_sign`). Entries with zero total mass get the vector-wide
       majority sign ``sgn(Σ_j γ_j)`` (``tie_break="majority"``, original TIES code) or stay 0
       (``tie_break="zero"``, dropping them).
    3. Disjoint mean over agreeing, non-zero entries (:func:`disjoint_mean`).
    4. Output ``lam · τ_m``. In this package α is searched by the evaluator on top, so ``lam=1``.

    On a single vector this equals :func:`trim` scaled by ``lam`` (use that for task negation).

    >>> v1 = {"w": torch.tensor([3.0, -2.0, 1.0, 0.1])}
    >>> v2 = {"w": torch.tensor([1.0, 4.0, -1.0, 0.2])}
    >>> ties_merge([v1, v2], density=0.75)
    {'w': tensor([2., 4., 1., 0.])}
    """
    keys = _check_vectors(vectors)
    _check_density(density)
    _check_lam(lam)
    if tie_break not in ("majority", "zero"):
        raise TalosError(f"tie_break must be 'majority' or 'zero', got {tie_break!r}")
    if density < 1.0:
        masks = [magnitude_topk_mask(vec, density, scope=scope) for vec in vectors]
    else:
        masks = None

    def trimmed(name: str) -> torch.Tensor:
        if masks is None:
            return torch.stack([vec[name].detach() for vec in vectors])
        return torch.stack([_masked(vec[name].detach(), m[name]) for vec, m in zip(vectors, masks)])

    signs = {name: elect_sign(trimmed(name)) for name in keys}
    tie_sign = 0.0
    if tie_break == "majority":
        balance = sum(float(s.sum(dtype=torch.float64)) for s in signs.values())  # (#positive − #negative)
        tie_sign = 0.0 if balance == 0 else math.copysign(1.0, balance)
    out: Vector = {}
    for name in keys:
        stacked = trimmed(name)
        sign = signs.pop(name)
        if tie_sign != 0.0:
            sign = torch.where(sign == 0, torch.full_like(sign, tie_sign), sign)
        merged = disjoint_mean(stacked, sign)
        out[name] = merged * lam if lam != 1.0 else merged
    return out


# ----------------------------------------------------------------------------------------------------
# DARE (Yu et al., 2024)
# ----------------------------------------------------------------------------------------------------


@_no_grad
def dare(vector: VectorLike, drop_p: float, *, generator: torch.Generator | None = None) -> Vector:
    """Drop And REscale: ``τ̃ = (m ⊙ τ) / (1 − p)`` with ``m_j ~ Bernoulli(1 − p)`` i.i.d.

    Each entry is dropped with probability ``drop_p ∈ [0, 1)`` (the paper's sparsity k) and survivors are
    rescaled by ``1 / (1 − p)``, so ``E[τ̃] = τ``. Random numbers come from ``generator`` (CPU or the
    tensors' device; ``None`` uses torch's global RNG); the same generator state gives the same result.

    >>> g = torch.Generator().manual_seed(0)
    >>> out = dare({"w": torch.ones(8)}, 0.5, generator=g)
    >>> sorted(set(out["w"].tolist())) in ([0.0, 2.0], [0.0], [2.0])
    True
    """
    keys = _check_vector(vector)
    check_range("drop_p", drop_p, 0.0, 1.0)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TalosError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    out: Vector = {}
    for name in keys:
        x = vector[name].detach()
        if drop_p == 0.0:
            out[name] = x.clone()
            continue
        device = generator.device if generator is not None else x.device
        u = torch.rand(x.shape, generator=generator, device=device).to(x.device)
        keep = u >= drop_p
        out[name] = _masked(x / (1.0 - drop_p), keep)
    return out


def dare_merge(
    vectors: Sequence[VectorLike], drop_p: float, generator: torch.Generator | None = None
) -> Vector:
    """Sum of independently DAREd task vectors: ``Σ_t DARE(τ_t, p)`` (vectors processed in order).

    >>> g = torch.Generator().manual_seed(0)
    >>> dare_merge([{"w": torch.ones(3)}, {"w": torch.ones(3)}], 0.0, g)
    {'w': tensor([2., 2., 2.])}
    """
    _check_vectors(vectors)
    check_range("drop_p", drop_p, 0.0, 1.0)
    return add([dare(vec, drop_p, generator=generator) for vec in vectors])


# ----------------------------------------------------------------------------------------------------
# Model Breadcrumbs (Davari & Belilovsky, 2023)
# ----------------------------------------------------------------------------------------------------


def _band_rows(a: torch.Tensor, low_quantile: float, high_quantile: float) -> torch.Tensor:
    """Band mask for a 2-D score tensor ``[rows, n]``, row by row (descending rank, ties by index)."""
    n = a.shape[-1]
    lo = _count(low_quantile, n)
    hi = _count(high_quantile, n)
    order = torch.sort(a, dim=-1, descending=True, stable=True).indices
    rank = torch.empty_like(order)
    rank.scatter_(-1, order, torch.arange(n, device=a.device).expand_as(order).contiguous())
    # ascending rank r = n - 1 - rank; keep r in [lo, hi)  <=>  rank in [n - hi, n - lo)
    return (rank >= n - hi) & (rank < n - lo)


def band_mask_tensor(
    x: torch.Tensor, low_quantile: float, high_quantile: float, *, scope: BandScope = "tensor"
) -> torch.Tensor:
    """Mask of the entries whose ``|x|`` lies in the quantile band ``[low_quantile, high_quantile)``.

    Ranking ascending by ``|x|`` (``n`` entries, exact ranks with deterministic ties), an entry of rank
    ``r`` is kept iff ``round(low·n) ≤ r < round(high·n)``: the ``round(low·n)`` smallest and the
    ``n − round(high·n)`` largest (outliers) are dropped. ``scope="row"`` ranks each row of the last
    dimension separately (official TaLoS code); ``"tensor"`` ranks the whole tensor (original method).

    >>> band_mask_tensor(torch.tensor([1.0, -9.0, 3.0, 0.2, 5.0]), 0.4, 0.8)
    tensor([False, False,  True, False,  True])
    """
    check_range("low_quantile", low_quantile, 0.0, 1.0)
    check_range("high_quantile", high_quantile, 0.0, 1.0, low_open=True, high_open=False)
    if low_quantile >= high_quantile:
        raise TalosError(
            f"low_quantile must be below high_quantile, got {low_quantile!r} >= {high_quantile!r}"
        )
    if scope not in ("tensor", "row"):
        raise TalosError(f"scope must be 'tensor' or 'row', got {scope!r}")
    a = _scores(x)
    if scope == "tensor" or x.dim() == 0:
        n = a.numel()
        # ascending ranks [lo, hi) = the (n - lo) largest minus the (n - hi) largest (nested, same tie order)
        (upper,) = _topk_select([a], n - _count(low_quantile, n))
        (outliers,) = _topk_select([a], n - _count(high_quantile, n))
        return (upper & ~outliers).reshape(x.shape)
    if x.numel() == 0:
        return torch.zeros(x.shape, dtype=torch.bool, device=x.device)
    return _band_rows(a.reshape(-1, x.shape[-1]), low_quantile, high_quantile).reshape(x.shape)


@_no_grad
def breadcrumbs(
    vector: VectorLike, low_quantile: float, high_quantile: float, *, scope: BandScope = "tensor"
) -> Vector:
    """Model Breadcrumbs mask applied per tensor (per layer): keep the ``|τ|`` band ``[β, γ)``.

    ``low_quantile`` = β: the fraction of smallest-magnitude entries removed (the paper's sparsity k,
    grid {0.1, …, 0.9, 0.95, 0.99}). ``high_quantile`` = γ: entries at or above this magnitude quantile
    are outliers and removed (the paper's "percentage of top-k parameters considered outliers", grid
    {0.8, 0.9, 0.95, 0.99, 0.992, …, 0.999}). Per tensor, ``round(γ n) − round(β n)`` entries are kept.
    Requires ``0 ≤ β < γ ≤ 1``. See :func:`band_mask_tensor`.

    >>> breadcrumbs({"w": torch.tensor([1.0, -9.0, 3.0, 0.2, 5.0])}, 0.4, 0.8)
    {'w': tensor([0., 0., 3., 0., 5.])}
    """
    keys = _check_vector(vector)
    return {
        k: _masked(vector[k].detach(), band_mask_tensor(vector[k], low_quantile, high_quantile, scope=scope))
        for k in keys
    }


def breadcrumbs_merge(
    vectors: Sequence[VectorLike], low_quantile: float, high_quantile: float, *, scope: BandScope = "tensor"
) -> Vector:
    """Sum of the Breadcrumbs-masked task vectors: ``Σ_t m_t ⊙ τ_t``.

    >>> breadcrumbs_merge([{"w": torch.tensor([1.0, 2.0])}, {"w": torch.tensor([2.0, 1.0])}], 0.5, 1.0)
    {'w': tensor([2., 2.])}
    """
    _check_vectors(vectors)
    return add([breadcrumbs(vec, low_quantile, high_quantile, scope=scope) for vec in vectors])


# ----------------------------------------------------------------------------------------------------
# TALL masks / Consensus (Wang et al., 2024)
# ----------------------------------------------------------------------------------------------------


def tall_mask_tensor(stacked: torch.Tensor, lam: float) -> torch.Tensor:
    """TALL masks for a stacked ``[T, ...]`` tensor: ``m_t = |τ_t| > λ |τ_MTL − τ_t|``, ``τ_MTL = Σ_t τ_t``.

    Returns a boolean ``[T, ...]`` tensor, one mask per task.

    >>> tall_mask_tensor(torch.tensor([[1.0, 0.1], [-3.0, 2.0]]), 0.5)
    tensor([[False, False],
            [ True,  True]])
    """
    _check_lam(lam)
    if not isinstance(stacked, torch.Tensor) or stacked.dim() < 1:
        raise TalosError("stacked must be a tensor of shape [T, ...] with at least one dimension")
    mtl = stacked.sum(dim=0, keepdim=True)
    return stacked.abs() > lam * (mtl - stacked).abs()


@_no_grad
def tall_masks(vectors: Sequence[VectorLike], lam: float) -> list[dict[str, torch.Tensor]]:
    """Per-task TALL masks (one boolean dict per task, same order): ``m_t = |τ_t| > λ |τ_MTL − τ_t|``.

    >>> ms = tall_masks([{"w": torch.tensor([1.0, 0.1])}, {"w": torch.tensor([-3.0, 2.0])}], 0.5)
    >>> [m["w"].tolist() for m in ms]
    [[False, False], [True, True]]
    """
    keys = _check_vectors(vectors)
    _check_lam(lam)
    masks: list[dict[str, torch.Tensor]] = [{} for _ in vectors]
    for name in keys:
        per_task = tall_mask_tensor(stack_param(vectors, name), lam)
        for t in range(len(vectors)):
            masks[t][name] = per_task[t]
    return masks


def _check_k(k: object, num_tasks: int) -> int:
    return check_int("consensus threshold k", k, low=0, high=num_tasks,
                     what=f"an integer in [0, {num_tasks}] (number of tasks)")


@_no_grad
def consensus_mask(masks: Sequence[Mapping[str, torch.Tensor]], k: int = 2) -> dict[str, torch.Tensor]:
    """Consensus mask: entries selected by at least ``k`` task masks, ``m_cons = 1[Σ_t m_t ≥ k]``.

    ``k`` ranges over ``{0, …, T}`` (paper grid); ``k = 0`` keeps everything (plain task arithmetic),
    ``k = 1`` is the union, ``k = T`` the intersection. Default ``k = 2`` (Wang et al.).

    >>> ms = [{"w": torch.tensor([True, True, False])}, {"w": torch.tensor([True, False, False])}]
    >>> consensus_mask(ms, k=2)
    {'w': tensor([ True, False, False])}
    """
    if isinstance(masks, Mapping) or not isinstance(masks, Sequence) or len(masks) == 0:
        raise TalosError("masks must be a non-empty list of per-task mask dicts")
    keys = list(masks[0].keys())
    for t, m in enumerate(masks):
        if not isinstance(m, Mapping) or set(m.keys()) != set(keys):
            raise TalosError(f"mask {t} has different parameter names than mask 0; all masks must share names")
        for name in keys:
            if m[name].shape != masks[0][name].shape:
                raise TalosError(
                    f"mask {t} entry {name!r} has shape {tuple(m[name].shape)}, expected {tuple(masks[0][name].shape)}"
                )
    _check_k(k, len(masks))
    out = {}
    for name in keys:
        count = torch.stack([m[name].to(torch.int32) for m in masks]).sum(dim=0)
        out[name] = count >= k
    return out


@_no_grad
def consensus_merge(vectors: Sequence[VectorLike], k: int = 2, *, lam: float) -> Vector:
    """Consensus merging: ``τ_cons = m_cons ⊙ τ_MTL`` with ``m_cons`` = entries in ≥ ``k`` TALL masks of
    parameter ``λ = lam`` (:func:`tall_masks`, :func:`consensus_mask`). Computed parameter by parameter.

    >>> v1 = {"w": torch.tensor([1.0, 2.0, 0.0])}
    >>> v2 = {"w": torch.tensor([1.0, 0.0, 3.0])}
    >>> consensus_merge([v1, v2], k=2, lam=0.5)
    {'w': tensor([2., 0., 0.])}
    """
    keys = _check_vectors(vectors)
    _check_lam(lam)
    _check_k(k, len(vectors))
    out: Vector = {}
    for name in keys:
        stacked = stack_param(vectors, name)
        keep = tall_mask_tensor(stacked, lam).sum(dim=0) >= k
        out[name] = _masked(stacked.sum(dim=0), keep)
    return out


def _tall_vector(vectors: Sequence[VectorLike], keys: list[str], index: int, lam: float, source: TallSource) -> Vector:
    out: Vector = {}
    for name in keys:
        stacked = stack_param(vectors, name)
        mtl = stacked.sum(dim=0)
        mask = stacked[index].abs() > lam * (mtl - stacked[index]).abs()
        out[name] = _masked(mtl if source == "mtl" else stacked[index], mask)
    return out


@_no_grad
def tall_mask_vectors(vectors: Sequence[VectorLike], lam: float, *, source: TallSource = "mtl") -> list[Vector]:
    """Task-specific TALL vectors, one per task: ``m_t ⊙ τ_MTL`` (``source="mtl"``, TALL paper: the
    multi-task vector localized to task t) or ``m_t ⊙ τ_t`` (``source="task"``, what the official TaLoS
    code evaluates for single-task accuracy and negation).

    >>> v1 = {"w": torch.tensor([1.0, 0.1])}
    >>> v2 = {"w": torch.tensor([-3.0, 2.0])}
    >>> [v["w"].tolist() for v in tall_mask_vectors([v1, v2], 0.5)]
    [[0.0, 0.0], [-2.0, 2.0999999046325684]]
    >>> [v["w"].tolist() for v in tall_mask_vectors([v1, v2], 0.5, source="task")]
    [[0.0, 0.0], [-3.0, 2.0]]
    """
    keys = _check_vectors(vectors)
    _check_lam(lam)
    if source not in ("mtl", "task"):
        raise TalosError(f"source must be 'mtl' or 'task', got {source!r}")
    return [_tall_vector(vectors, keys, t, lam, source) for t in range(len(vectors))]


@_no_grad
def tall_single_task(vectors: Sequence[VectorLike], index: int, *, lam: float, k: int = 2,
                     source: TallSource = "mtl") -> Vector:
    """Task ``index``'s TALL-masked vector ``m_t ⊙ τ_MTL`` (``source="task"``: ``m_t ⊙ τ_t``); ``k`` is checked
    for a uniform interface with :func:`consensus_merge` but a single task's vector does not use it."""
    keys = _check_vectors(vectors)
    _check_index(index, len(vectors))
    _check_lam(lam)
    _check_k(k, len(vectors))
    if source not in ("mtl", "task"):
        raise TalosError(f"source must be 'mtl' or 'task', got {source!r}")
    return _tall_vector(vectors, keys, index, lam, source)
