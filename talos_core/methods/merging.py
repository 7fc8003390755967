"""Post-hoc task-vector methods: those the paper compares against (TIES-Merging, DARE, Breadcrumbs, TALL masks /
Consensus), later merges (TSV-Merge, Iso-C, Iso-CTS, LiNeS; their per-matrix math is in
:mod:`talos_core.methods.spectral`), plus the plain task-arithmetic helpers they are built from.

A *task vector* here is a ``dict[str, torch.Tensor]``: parameter name -> dense delta ``θ_t − θ0``.
All vectors passed together must share the same names and shapes (checked; a mismatch raises
:class:`~talos_core.errors.TalosError`). Every function is pure: inputs are never modified, outputs
are new tensors with the input's dtype and device. Work is done tensor by tensor; the only whole-vector
buffer is the concatenation of ``|τ|`` needed for a *global* top-k (one float copy of one vector).

Per-tensor helpers work on a stacked tensor ``[T, ...]`` (see :func:`stack_param`) and are what the
dict-level functions call key by key: :func:`elect_sign`, :func:`disjoint_mean`,
:func:`tall_mask_tensor`.

Ordering and ties: every top-k / quantile selection is *exact* (it keeps exactly the requested count)
and deterministic: entries are ranked by ``|x|`` descending, equal magnitudes by position (parameter
order of the vector, then flat index), earlier first. Counts are ``round(fraction * numel)`` with
halves rounded up.

Registry: :data:`POSTHOC_METHODS` maps a method name to a :class:`PosthocSpec` whose callables take the
paper's hyperparameter names (``sparsity`` etc.) and whose ``grid`` is the paper's search grid
(appendix, "Hyperparameter search"); its label and family are in the method catalogue
:data:`talos_core.schema.METHODS`. The later merges follow their authors' code (AntoAndGar/task_singular_vectors,
danielm1405/iso-merging, wang-kee/LiNeS), searched on the validation split:

* TSV-Merge, Iso-C: no hyperparameter but the final α, which the evaluator searches on ``0, step, …, 3``
  (:data:`SPECTRAL_ALPHA_STOP`; the authors' ``0.1, 0.2, …, 3``);
* Iso-CTS: the common-space fraction fixed at the paper's 0.8 (:data:`ISO_COMMON_FRACTION`), α on ``0…3``;
* LiNeS: ``λ(ℓ) = α + β (ℓ − 1)/(L − 1)`` on the task-arithmetic sum with the rule ``α = 1/T`` (shallow layers
  get the task vectors' mean) and ``β ∈ {0.1, 0.2, …, 1}`` (:data:`LINES_BETA_GRID`), the result added at α = 1
  (:data:`LINES_ADDITION_ALPHA`); parameters outside the blocks are scaled by ``α``.

Conventions of the later merges, each a labelled option (:attr:`PosthocSpec.options`, the authors' choice
first): "matrix" = a 2-D parameter; every other parameter (biases, norms, conv kernels) is averaged over tasks
(``nonmatrix="mean"``; ``"sum"`` is task arithmetic's sum); ``conv1x1="matrix"`` also merges pointwise
convolution kernels ``[out, in, 1, 1]`` as matrices (the authors' code, written for ViTs, does not). Iso-CTS
sizes its subspaces and sets its isotropic scale as its code does
(:func:`~talos_core.methods.spectral.iso_cts_sizes`, ``spectrum="combined"``). LiNeS scales the parameters
outside the blocks by ``α`` (``nonblock="first"``; ``"nearest"``: by the factor of the block before them).
Their single-task vectors are the merge of one vector (TSV: the vector itself; Iso: its isotropic version);
LiNeS, which only rescales the multi-task vector, returns each task's vector unchanged.

Task negation with these methods: the paper applies each post-hoc method to the single task's vector
and then subtracts it. Use ``spec.single_task(vectors, index, **hparams)`` (the processed vector of task
``index``; e.g. TIES on one vector is trimming only, since sign election and the disjoint mean of a
single vector return it unchanged) and scale it by a negative α (:func:`scale`).

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

import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, Union

import torch

from talos_core.errors import TalosError, check_int, check_number, check_range, unknown
from talos_core.methods.spectral import (
    IsoSpectrum,
    NonBlock,
    iso_c_matrix,
    iso_cts_matrix,
    lines_factors,
    tsv_matrix,
)
from talos_core.schema import MethodInfo, method_info

Vector = dict[str, torch.Tensor]
"""A task vector: parameter name -> dense delta tensor."""

VectorLike = Mapping[str, torch.Tensor]
Scope = Literal["global", "tensor"]
BandScope = Literal["tensor", "row"]
TieBreak = Literal["majority", "zero"]
TallSource = Literal["mtl", "task"]
NonMatrix = Literal["mean", "sum"]
Conv1x1 = Literal["other", "matrix"]

_F = TypeVar("_F", bound=Callable[..., Any])


def _no_grad(fn: _F) -> _F:
    """Run ``fn`` under ``torch.no_grad()`` (defined here so doctest still finds the wrapped function)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with torch.no_grad():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


# ----------------------------------------------------------------------------------------------------
# Validation
# ----------------------------------------------------------------------------------------------------


def _check_vector(vector: object, what: str = "task vector") -> list[str]:
    if not isinstance(vector, Mapping):
        raise TalosError(f"{what} must be a dict of parameter name -> tensor, got {type(vector).__name__}")
    if len(vector) == 0:
        raise TalosError(f"{what} is empty; it must hold at least one parameter tensor")
    for name, value in vector.items():
        if not isinstance(value, torch.Tensor):
            raise TalosError(f"{what} entry {name!r} must be a torch.Tensor, got {type(value).__name__}")
        if not (torch.is_floating_point(value)):
            raise TalosError(f"{what} entry {name!r} must be a floating-point tensor, got dtype {value.dtype}")
    return list(vector.keys())


def _check_vectors(vectors: object) -> list[str]:
    """Check a non-empty sequence of vectors with identical names and shapes; return the names."""
    if isinstance(vectors, Mapping) or not isinstance(vectors, Sequence):
        raise TalosError(
            f"expected a list of task vectors (dicts), got {type(vectors).__name__}; wrap a single vector as [vector]"
        )
    if len(vectors) == 0:
        raise TalosError("expected at least one task vector, got an empty list")
    keys = _check_vector(vectors[0], "task vector 0")
    key_set = set(keys)
    first = vectors[0]
    for t, vec in enumerate(vectors[1:], start=1):
        _check_vector(vec, f"task vector {t}")
        other = set(vec.keys())
        if other != key_set:
            missing = sorted(key_set - other)
            extra = sorted(other - key_set)
            detail = []
            if missing:
                detail.append(f"missing {missing[:3]}")
            if extra:
                detail.append(f"unexpected {extra[:3]}")
            raise TalosError(
                f"task vector {t} has different parameter names than task vector 0 ({'; '.join(detail)}); "
                "all task vectors must share the same names"
            )
        for name in keys:
            if vec[name].shape != first[name].shape:
                raise TalosError(
                    f"parameter {name!r} has shape {tuple(vec[name].shape)} in task vector {t} but "
                    f"{tuple(first[name].shape)} in task vector 0; all task vectors must share shapes"
                )
    return keys


def _check_density(density: float, name: str = "density") -> float:
    return check_range(name, density, 0.0, 1.0, low_open=True, high_open=False)


def _check_lam(lam: float, name: str = "lam") -> float:
    return check_range(name, lam, 0.0, math.inf)


def _check_index(index: object, num_tasks: int) -> int:
    return check_int("task index", index, low=0, high=num_tasks - 1)


def _count(fraction: float, n: int) -> int:
    """``round(fraction * n)`` with halves rounded up, clamped to ``[0, n]``."""
    return min(n, max(0, int(math.floor(fraction * n + 0.5))))


def _scores(x: torch.Tensor) -> torch.Tensor:
    """Flat ``|x|`` in a dtype ``kthvalue``/``sort`` handle well (half types are promoted to float32)."""
    a = x.detach().abs().flatten()
    if a.dtype in (torch.float16, torch.bfloat16):
        a = a.float()
    return a


def _masked(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``x`` where ``mask`` else +0 (``x * mask`` would leave ``-0.0`` for dropped negative entries)."""
    return torch.where(mask.to(device=x.device, dtype=torch.bool), x, torch.zeros((), dtype=x.dtype, device=x.device))


# ----------------------------------------------------------------------------------------------------
# Plain helpers
# ----------------------------------------------------------------------------------------------------


@_no_grad
def add(vectors: Sequence[VectorLike]) -> Vector:
    """Task arithmetic sum ``τ = Σ_t τ_t`` (Ilharco et al., 2023).

    >>> add([{"w": torch.tensor([1.0, 2.0])}, {"w": torch.tensor([0.5, -2.0])}])
    {'w': tensor([1.5000, 0.0000])}
    """
    keys = _check_vectors(vectors)
    out: Vector = {}
    for name in keys:
        acc = vectors[0][name].detach().clone()
        for vec in vectors[1:]:
            acc.add_(vec[name])
        out[name] = acc
    return out


@_no_grad
def scale(vector: VectorLike, alpha: float) -> Vector:
    """``α τ``. Negative α gives task negation (``θ0 − |α| τ``).

    >>> scale({"w": torch.tensor([1.0, -2.0])}, -0.5)
    {'w': tensor([-0.5000,  1.0000])}
    """
    keys = _check_vector(vector)
    check_number("alpha", alpha)
    return {name: vector[name].detach() * alpha for name in keys}


@_no_grad
def apply_mask(vector: VectorLike, mask: Mapping[str, torch.Tensor]) -> Vector:
    """``τ ⊙ m`` for a boolean (or 0/1) mask with the same names and shapes.

    >>> apply_mask({"w": torch.tensor([1.0, -2.0])}, {"w": torch.tensor([False, True])})
    {'w': tensor([ 0., -2.])}
    """
    keys = _check_vector(vector)
    if not isinstance(mask, Mapping) or set(mask.keys()) != set(keys):
        raise TalosError("mask must be a dict with exactly the task vector's parameter names")
    out: Vector = {}
    for name in keys:
        if mask[name].shape != vector[name].shape:
            raise TalosError(
                f"mask for {name!r} has shape {tuple(mask[name].shape)}, "
                f"expected {tuple(vector[name].shape)}"
            )
        out[name] = _masked(vector[name].detach(), mask[name] != 0)
    return out


def stack_param(vectors: Sequence[VectorLike], name: str) -> torch.Tensor:
    """Stack one parameter of every task vector into a ``[T, ...]`` tensor.

    >>> stack_param([{"w": torch.tensor([1.0, 2.0])}, {"w": torch.tensor([3.0, 4.0])}], "w")
    tensor([[1., 2.],
            [3., 4.]])
    """
    keys = _check_vectors(vectors)
    if name not in keys:
        raise TalosError(f"unknown parameter {name!r}; the task vectors hold {len(keys)} parameters")
    return torch.stack([vec[name].detach() for vec in vectors])


def density_of(vector: VectorLike) -> float:
    """Fraction of non-zero entries of a vector (1 − sparsity).

    >>> density_of({"a": torch.tensor([0.0, 1.0]), "b": torch.tensor([2.0, 0.0, 0.0, 3.0])})
    0.5
    """
    keys = _check_vector(vector)
    nnz = sum(int(torch.count_nonzero(vector[k])) for k in keys)
    total = sum(vector[k].numel() for k in keys)
    return nnz / total if total else 0.0


# ----------------------------------------------------------------------------------------------------
# Magnitude top-k (trim)
# ----------------------------------------------------------------------------------------------------


def _topk_select(scores: Sequence[torch.Tensor], k: int) -> list[torch.Tensor]:
    """Boolean masks selecting exactly the ``k`` largest entries of the concatenation of flat ``scores``.

    Ties at the threshold go to the earliest positions (tensor order, then flat index).
    """
    n = sum(s.numel() for s in scores)
    if k <= 0:
        return [torch.zeros_like(s, dtype=torch.bool) for s in scores]
    if k >= n:
        return [torch.ones_like(s, dtype=torch.bool) for s in scores]
    joined = torch.cat(list(scores)) if len(scores) > 1 else scores[0]
    threshold = torch.kthvalue(joined, n - k + 1).values  # k-th largest
    del joined
    remaining = k - sum(int((s > threshold).sum()) for s in scores)  # >= 1 slots for ties
    masks = []
    for s in scores:
        mask = s > threshold
        if remaining > 0:
            eq = s == threshold
            take = eq & (torch.cumsum(eq, 0) <= remaining)
            remaining -= int(take.sum())
            mask |= take
        masks.append(mask)
    return masks


def topk_mask_tensor(x: torch.Tensor, density: float) -> torch.Tensor:
    """Boolean mask of the ``round(density · numel)`` largest-magnitude entries of one tensor.

    >>> topk_mask_tensor(torch.tensor([0.1, -3.0, 2.0, 0.5]), 0.5)
    tensor([False,  True,  True, False])
    """
    _check_density(density)
    if not isinstance(x, torch.Tensor):
        raise TalosError(f"x must be a torch.Tensor, got {type(x).__name__}")
    (mask,) = _topk_select([_scores(x)], _count(density, x.numel()))
    return mask.reshape(x.shape)


@_no_grad
def magnitude_topk_mask(vector: VectorLike, density: float, *, scope: Scope = "global") -> dict[str, torch.Tensor]:
    """Boolean masks keeping the top-k entries of ``vector`` by ``|x|`` (TIES "trim" step).

    ``scope="global"`` (default; TIES paper and official code): ``k = round(density · N)`` over the whole
    flattened vector (all tensors together, ``N`` = total entries). ``scope="tensor"``: ``k`` is computed
    and applied per tensor. ``density`` is the kept fraction in ``(0, 1]`` (paper's sparsity ``1 − density``).

    >>> v = {"a": torch.tensor([4.0, -1.0]), "b": torch.tensor([0.5, -3.0])}
    >>> magnitude_topk_mask(v, 0.5)
    {'a': tensor([ True, False]), 'b': tensor([False,  True])}
    >>> magnitude_topk_mask({"a": torch.tensor([4.0, -1.0, 2.0, 0.0])}, 0.25, scope="tensor")
    {'a': tensor([ True, False, False, False])}
    """
    keys = _check_vector(vector)
    _check_density(density)
    if scope == "global":
        total = sum(vector[k].numel() for k in keys)
        masks = _topk_select([_scores(vector[k]) for k in keys], _count(density, total))
        return {k: m.reshape(vector[k].shape) for k, m in zip(keys, masks)}
    if scope == "tensor":
        return {k: topk_mask_tensor(vector[k], density) for k in keys}
    raise TalosError(f"scope must be 'global' or 'tensor', got {scope!r}")


@_no_grad
def trim(vector: VectorLike, density: float, *, scope: Scope = "global") -> Vector:
    """Keep the top-k magnitude entries of ``vector`` and zero the rest (see :func:`magnitude_topk_mask`).

    This is TIES-Merging applied to a single vector (used for task negation and single-task accuracy).

    >>> trim({"a": torch.tensor([4.0, -1.0]), "b": torch.tensor([0.5, -3.0])}, 0.5)
    {'a': tensor([4., 0.]), 'b': tensor([ 0., -3.])}
    """
    masks = magnitude_topk_mask(vector, density, scope=scope)
    return {k: _masked(vector[k].detach(), masks[k]) for k in masks}


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


# ----------------------------------------------------------------------------------------------------
# Spectral merges: TSV-Merge (Gargiulo et al., 2025), Iso-C / Iso-CTS (Marczak et al., 2025)
# ----------------------------------------------------------------------------------------------------


def _is_1x1_kernel(x: torch.Tensor) -> bool:
    """A pointwise convolution kernel ``[out, in, 1, 1]``: a linear map ``[out, in]`` applied at every pixel."""
    return x.dim() == 4 and tuple(x.shape[2:]) == (1, 1)


def _check_spectral_options(nonmatrix: object, conv1x1: object) -> None:
    if nonmatrix not in ("mean", "sum"):
        raise TalosError(f"nonmatrix must be 'mean' or 'sum', got {nonmatrix!r}")
    if conv1x1 not in ("other", "matrix"):
        raise TalosError(f"conv1x1 must be 'other' or 'matrix', got {conv1x1!r}")


def _spectral_merge(vectors: Sequence[VectorLike], per_matrix: Callable[[torch.Tensor], torch.Tensor],
                    nonmatrix: NonMatrix, conv1x1: Conv1x1) -> Vector:
    """``per_matrix`` on every 2-D parameter (stacked ``[T, m, n]``), and on every ``[out, in, 1, 1]`` kernel
    viewed as ``[out, in]`` when ``conv1x1="matrix"``; the others' mean or sum over tasks."""
    keys = _check_vectors(vectors)
    _check_spectral_options(nonmatrix, conv1x1)
    out: Vector = {}
    for name in keys:
        stacked = torch.stack([vec[name].detach() for vec in vectors])
        shape = stacked.shape[1:]
        if stacked[0].numel() > 0 and (len(shape) == 2 or (conv1x1 == "matrix" and _is_1x1_kernel(stacked[0]))):
            out[name] = per_matrix(stacked.reshape(len(vectors), shape[0], shape[1])).reshape(shape)
        else:
            out[name] = stacked.mean(dim=0) if nonmatrix == "mean" else stacked.sum(dim=0)
    return out


@_no_grad
def tsv_merge(vectors: Sequence[VectorLike], *, nonmatrix: NonMatrix = "mean", conv1x1: Conv1x1 = "other") -> Vector:
    """TSV-Merge (Gargiulo et al., "Task Singular Vectors: Reducing Task Interference in Model Merging",
    CVPR 2025): every 2-D weight matrix by :func:`~talos_core.methods.spectral.tsv_matrix` (each task's top
    ``⌊r/T⌋`` singular directions, decorrelated by orthogonal Procrustes, Σ-weighted); every other parameter
    (biases, norms, 1-D, conv kernels) by the task-vector mean (``nonmatrix="mean"``, the authors' code) or sum.
    ``conv1x1="matrix"`` also merges pointwise convolution kernels ``[out, in, 1, 1]`` as ``[out, in]`` matrices
    (the authors' code, written for ViTs, averages every tensor that is not 2-D: ``"other"``). The authors search
    α on ``0.1, 0.2, …, 3`` on validation; so does the evaluator here (:data:`SPECTRAL_ALPHA_STOP`).

    >>> v1 = {"w": torch.tensor([[2.0, 0.0], [0.0, 0.5]]), "b": torch.tensor([1.0])}
    >>> v2 = {"w": torch.tensor([[0.5, 0.0], [0.0, 3.0]]), "b": torch.tensor([3.0])}
    >>> {k: x.tolist() for k, x in tsv_merge([v1, v2]).items()}  # each task keeps its top direction
    {'w': [[2.0, 0.0], [0.0, 3.0]], 'b': [2.0]}
    """
    return _spectral_merge(vectors, tsv_matrix, nonmatrix, conv1x1)


@_no_grad
def iso_c_merge(vectors: Sequence[VectorLike], *, nonmatrix: NonMatrix = "mean",
                conv1x1: Conv1x1 = "other") -> Vector:
    """Iso-C (Marczak et al., "No Task Left Behind: Isotropic Model Merging with Common and Task-Specific
    Subspaces", ICML 2025): every 2-D weight matrix by :func:`~talos_core.methods.spectral.iso_c_matrix` (the
    task-arithmetic sum with its spectrum flattened to the mean singular value); every other parameter by the
    task-vector mean (``nonmatrix="mean"``, the authors' ``iso_c``) or the task-arithmetic sum (``"sum"``);
    ``conv1x1`` as in :func:`tsv_merge`. Scaled afterwards by α, searched on validation on ``0…3`` as the authors.

    >>> iso_c_merge([{"w": torch.diag(torch.tensor([3.0, 0.0]))}, {"w": torch.diag(torch.tensor([0.0, 1.0]))}])
    {'w': tensor([[2., 0.],
            [0., 2.]])}
    """
    return _spectral_merge(vectors, iso_c_matrix, nonmatrix, conv1x1)


@_no_grad
def iso_cts_merge(vectors: Sequence[VectorLike], common_fraction: float = 0.8, *, nonmatrix: NonMatrix = "mean",
                  spectrum: IsoSpectrum = "combined", conv1x1: Conv1x1 = "other") -> Vector:
    """Iso-CTS (Marczak et al., ICML 2025): every 2-D weight matrix by
    :func:`~talos_core.methods.spectral.iso_cts_matrix` — the common subspace (top directions of the sum,
    ``common_fraction`` of the rank, paper default 0.8) plus each task's top directions off it, orthogonalized,
    with an isotropic spectrum (``spectrum="combined"``: the mean of the kept singular values, the authors'
    code; ``"sum"``: the sum's mean singular value, as Iso-C); other parameters as :func:`iso_c_merge`.

    >>> iso_cts_merge([{"w": torch.diag(torch.tensor([3.0, 1.0]))}])
    {'w': tensor([[2., 0.],
            [0., 2.]])}
    """
    check_range("common_fraction", common_fraction, 0.0, 1.0, high_open=False)
    if spectrum not in ("combined", "sum"):
        raise TalosError(f"spectrum must be 'combined' or 'sum', got {spectrum!r}")
    return _spectral_merge(
        vectors, lambda stacked: iso_cts_matrix(stacked, common_fraction, spectrum=spectrum), nonmatrix, conv1x1)


# ----------------------------------------------------------------------------------------------------
# LiNeS (Wang et al., 2025)
# ----------------------------------------------------------------------------------------------------


@_no_grad
def lines_scale(vector: VectorLike, alpha: float, beta: float, *, nonblock: NonBlock = "first") -> Vector:
    """LiNeS (Wang et al., "LiNeS: Post-training Layer Scaling Prevents Forgetting and Enhances Model Merging",
    ICLR 2025): each parameter times ``λ(ℓ) = α + β (ℓ − 1)/(L − 1)``, ``ℓ`` its layer among ``L`` blocks
    (:func:`~talos_core.methods.spectral.lines_factors`, :func:`~talos_core.methods.spectral.lines_layers`);
    parameters outside the blocks are scaled by ``α`` (``nonblock="first"``, the authors' code) or by the factor
    of the block before them (``"nearest"``). ``β = 0`` is plain scaling by ``α``.

    >>> lines_scale({"layer.0.w": torch.ones(2), "layer.1.w": torch.ones(2)}, 0.5, 0.5)
    {'layer.0.w': tensor([0.5000, 0.5000]), 'layer.1.w': tensor([1., 1.])}
    """
    keys = _check_vector(vector)
    factors = lines_factors(keys, alpha, beta, nonblock)
    return {name: vector[name].detach() * factors[name] for name in keys}


@_no_grad
def lines_merge(vectors: Sequence[VectorLike], beta: float, *, alpha: float | None = None,
                nonblock: NonBlock = "first") -> Vector:
    """LiNeS on the task-arithmetic sum: :func:`lines_scale` of ``Σ_t τ_t`` with ``α = 1/T`` by default (the
    authors' ``‖Σ_t τ_t‖₁ / ‖τ_merged‖₁ · 1/T``, which is ``1/T`` when the merge is the sum: the shallow layers get
    the task vectors' mean) and ``β`` searched; ``alpha`` overrides the rule.

    >>> lines_merge([{"layer.0.w": torch.ones(1), "layer.1.w": torch.ones(1)}] * 2, 0.5)
    {'layer.0.w': tensor([1.]), 'layer.1.w': tensor([2.])}
    """
    _check_vectors(vectors)
    return lines_scale(add(vectors), 1.0 / len(vectors) if alpha is None else alpha, beta, nonblock=nonblock)


# ----------------------------------------------------------------------------------------------------
# Registry of post-hoc methods with the paper's hyperparameter grids
# ----------------------------------------------------------------------------------------------------

SPARSITY_GRID: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
"""Paper appendix: post-hoc sparsity ratio k ∈ {0.1, 0.2, …, 0.9, 0.95, 0.99}."""

OUTLIER_QUANTILE_GRID: tuple[float, ...] = (0.8, 0.9, 0.95, 0.99, 0.992, 0.994, 0.996, 0.998, 0.999)
"""Paper appendix: Breadcrumbs outlier quantile ∈ {0.8, 0.9, 0.95, 0.99, 0.992, 0.994, …, 0.999}."""

TALL_LAMBDA_GRID: tuple[float, ...] = (0.2, 0.3, 0.4, 0.5, 0.6)
"""TALL mask λ grid (Wang et al., 2024); the official TaLoS scripts use λ = 0.2."""


def consensus_k_grid(num_tasks: int) -> tuple[int, ...]:
    """Paper appendix: consensus threshold k ∈ {0, …, T}.

    >>> consensus_k_grid(3)
    (0, 1, 2, 3)
    """
    return tuple(range(num_tasks + 1))


GridValues = Union[Sequence[Any], Callable[[int], Sequence[Any]]]


@dataclass(frozen=True)
class PosthocSpec:
    """A post-hoc method, its callables and its hyperparameter grid.

    ``merge(vectors, **hparams)`` returns ONE merged vector for task addition (scale it by α afterwards).
    ``single_task(vectors, index, **hparams)`` returns the processed vector of task ``index`` alone: use
    it for the method's own single-task accuracy (normalized accuracy) and, scaled by a negative α, for
    task negation. ``grid`` maps each hyperparameter to its values, or to a callable ``T -> values`` when
    they depend on the number of tasks; ``constraint`` filters invalid combinations. ``defaults`` are the
    values used by the official TaLoS scripts (or the method's paper). ``options`` are the method's labelled
    conventions (keyword arguments of ``merge`` that are not searched), each with its allowed values, the first
    its default (the authors' code): every grid point carries them, so a stored result records them.
    ``alpha_stop`` ends the evaluator's α grid ``0, step, …, alpha_stop`` (1 as in the paper; the range the
    method's authors search where it is wider). ``addition_alpha``: task addition applies the merged vector at
    this α only, as the method's authors do (LiNeS, whose β is searched instead); negation keeps the grid.
    ``name`` is the method's id in the catalogue (:data:`talos_core.schema.METHODS`), which holds its label and
    family.
    """

    name: str
    description: str
    merge: Callable[..., Vector]
    single_task: Callable[..., Vector]
    grid: Mapping[str, GridValues]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    constraint: Callable[[Mapping[str, Any]], bool] | None = None
    alpha_stop: float = 1.0
    options: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    addition_alpha: float | None = None

    def __post_init__(self) -> None:
        method_info(self.name, "posthoc")  # a catalogue entry of this kind
        check_range("alpha_stop", self.alpha_stop, 0.0, math.inf, low_open=True)
        if self.addition_alpha is not None:
            check_range("addition_alpha", self.addition_alpha, 0.0, math.inf, low_open=True)

    @property
    def info(self) -> MethodInfo:
        return method_info(self.name)

    @property
    def label(self) -> str:
        """Display name, as in the paper's tables."""
        return self.info.label

    def check_options(self, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Every labelled option of the method: its default (the authors' choice) unless ``options`` sets it.

        >>> POSTHOC_METHODS["iso_c"].check_options({"conv1x1": "matrix"})
        {'nonmatrix': 'mean', 'conv1x1': 'matrix'}
        """
        given = dict(options or {})
        for key, value in given.items():
            if key not in self.options:
                allowed = ", ".join(self.options) or "none"
                raise TalosError(f"{key!r} is not an option of post-hoc method {self.name!r} (its options: {allowed})")
            if value not in self.options[key]:
                raise TalosError(f"option {key} of post-hoc method {self.name!r} must be one of "
                                 f"{', '.join(map(repr, self.options[key]))}, got {value!r}")
        return {key: given.get(key, values[0]) for key, values in self.options.items()}

    def grid_points(self, num_tasks: int, options: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """All valid hyperparameter combinations for ``num_tasks`` task vectors (cartesian product), each with the
        method's labelled options (:meth:`check_options`).

        >>> len(POSTHOC_METHODS["ties"].grid_points(8))
        11
        >>> POSTHOC_METHODS["tall_consensus"].grid_points(2)[:2]
        [{'lam': 0.2, 'k': 0}, {'lam': 0.2, 'k': 1}]
        >>> POSTHOC_METHODS["tsv"].grid_points(8)
        [{'nonmatrix': 'mean', 'conv1x1': 'other'}]
        """
        check_int("num_tasks", num_tasks, low=1)
        fixed = self.check_options(options)
        names = list(self.grid)
        values = [list(v(num_tasks) if callable(v) else v) for v in self.grid.values()]
        points = [dict(zip(names, combo)) for combo in itertools.product(*values)]
        if self.constraint is not None:
            points = [p for p in points if self.constraint(p)]
        return [{**p, **fixed} for p in points]


def _sparsity(sparsity: float) -> float:
    return check_range("sparsity", sparsity, 0.0, 1.0)


def _ties_merge_hp(vectors: Sequence[VectorLike], *, sparsity: float, lam: float = 1.0) -> Vector:
    return ties_merge(vectors, 1.0 - _sparsity(sparsity), lam=lam)


def _ties_single_hp(vectors: Sequence[VectorLike], index: int, *, sparsity: float, lam: float = 1.0) -> Vector:
    _check_vectors(vectors)
    _check_index(index, len(vectors))
    return ties_merge([vectors[index]], 1.0 - _sparsity(sparsity), lam=lam)


def _dare_generator(seed: int, index: int) -> torch.Generator:
    check_int("seed", seed)
    return torch.Generator().manual_seed((seed * 10_007 + index) % (2**63))


def _dare_merge_hp(vectors: Sequence[VectorLike], *, sparsity: float, seed: int = 0) -> Vector:
    _check_vectors(vectors)
    p = _sparsity(sparsity)
    return add([dare(vec, p, generator=_dare_generator(seed, t)) for t, vec in enumerate(vectors)])


def _dare_single_hp(vectors: Sequence[VectorLike], index: int, *, sparsity: float, seed: int = 0) -> Vector:
    _check_vectors(vectors)
    _check_index(index, len(vectors))
    return dare(vectors[index], _sparsity(sparsity), generator=_dare_generator(seed, index))


def _breadcrumbs_merge_hp(vectors: Sequence[VectorLike], *, sparsity: float, outlier_quantile: float) -> Vector:
    return breadcrumbs_merge(vectors, _sparsity(sparsity), outlier_quantile)


def _breadcrumbs_single_hp(
    vectors: Sequence[VectorLike], index: int, *, sparsity: float, outlier_quantile: float
) -> Vector:
    _check_vectors(vectors)
    _check_index(index, len(vectors))
    return breadcrumbs(vectors[index], _sparsity(sparsity), outlier_quantile)


def _consensus_merge_hp(vectors: Sequence[VectorLike], *, lam: float, k: int = 2) -> Vector:
    return consensus_merge(vectors, k, lam=lam)


@_no_grad
def _tall_single_hp(
    vectors: Sequence[VectorLike], index: int, *, lam: float, k: int = 2, source: TallSource = "mtl"
) -> Vector:
    keys = _check_vectors(vectors)
    _check_index(index, len(vectors))
    _check_lam(lam)
    _check_k(k, len(vectors))  # validated for a uniform interface; the single-task TALL vector ignores k
    if source not in ("mtl", "task"):
        raise TalosError(f"source must be 'mtl' or 'task', got {source!r}")
    return _tall_vector(vectors, keys, index, lam, source)


def _alone(merge: Callable[..., Vector]) -> Callable[..., Vector]:
    """The ``single_task`` of a merge: the merge applied to task ``index``'s vector alone."""

    def single_task(vectors: Sequence[VectorLike], index: int, **hparams: Any) -> Vector:
        _check_vectors(vectors)
        return merge([vectors[_check_index(index, len(vectors))]], **hparams)

    return single_task


def _lines_single_hp(vectors: Sequence[VectorLike], index: int, *, beta: float, alpha: float | None = None,
                     nonblock: NonBlock = "first") -> Vector:
    """LiNeS rescales the multi-task vector only: task ``index``'s own vector is returned as fine-tuned (the
    LiNeS paper normalizes by the fine-tuned models), so its single-task and negation rows are task arithmetic's."""
    _check_vectors(vectors)
    lines_factors(["x"], 1.0 if alpha is None else alpha, beta, nonblock)  # validated for a uniform interface
    return {name: x.detach().clone() for name, x in vectors[_check_index(index, len(vectors))].items()}


ISO_COMMON_FRACTION: float = 0.8
"""Iso-CTS: fraction of the rank given to the common subspace; the paper's default for every benchmark."""

LINES_BETA_GRID: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
"""LiNeS β (the deepest layer's extra scale) ∈ {0.1, 0.2, …, 1}, with α = 1/T: the authors' multi-task search
(``np.linspace(0, 1, 11)[1:]``; β = 0, the task-vector mean, is left out of it). The default β = 0.5 (used where no
search runs, e.g. ``talos merge`` without a stored choice) is the grid's middle, not a value from the paper."""

LINES_ADDITION_ALPHA: float = 1.0
"""LiNeS: the authors apply the layer-scaled multi-task vector as it is (coefficient 1) and search β instead."""

SPECTRAL_ALPHA_STOP: float = 3.0
"""TSV-Merge, Iso-C, Iso-CTS: α searched up to 3, as both authors' code (``np.linspace(0.0, 3.0, 31)[1:]``, i.e.
``0.1, 0.2, …, 3`` on the validation split); the flat or truncated spectra have smaller norms than the sum, so the
best α often lies above 1."""

SPECTRAL_OPTIONS: dict[str, tuple[str, ...]] = {"nonmatrix": ("mean", "sum"), "conv1x1": ("other", "matrix")}
"""Labelled conventions of the spectral merges, the authors' first: parameters that are not matrices averaged
(``"sum"``: task arithmetic's sum), and 1×1 convolution kernels merged as such (``"matrix"``: as ``[out, in]``
matrices; the authors' code, written for ViTs, only treats 2-D tensors as matrices)."""

POSTHOC_METHODS: dict[str, PosthocSpec] = {spec.name: spec for spec in (
    PosthocSpec(
        name="ties",
        description="Trim each vector to its top (1 - sparsity) magnitudes (global), elect signs by mass, "
        "average the agreeing entries (Yadav et al., 2023). λ is fixed to 1: the evaluator's α search "
        "plays its role.",
        merge=_ties_merge_hp,
        single_task=_ties_single_hp,
        grid={"sparsity": SPARSITY_GRID},
        defaults={"sparsity": 0.9},
    ),
    PosthocSpec(
        name="tall_consensus",
        description="Per-task TALL masks |τ_t| > λ|τ_MTL − τ_t|; task addition keeps the multi-task vector "
        "where at least k masks agree; single task uses m_t ⊙ τ_MTL (Wang et al., 2024).",
        merge=_consensus_merge_hp,
        single_task=_tall_single_hp,
        grid={"lam": TALL_LAMBDA_GRID, "k": consensus_k_grid},
        defaults={"lam": 0.2, "k": 2},
    ),
    PosthocSpec(
        name="dare",
        description="Drop each entry with probability p = sparsity and rescale survivors by 1/(1 - p) "
        "(Yu et al., 2024); seeded per task (seed, task index) so results are reproducible.",
        merge=_dare_merge_hp,
        single_task=_dare_single_hp,
        grid={"sparsity": SPARSITY_GRID},
        defaults={"sparsity": 0.9, "seed": 0},
    ),
    PosthocSpec(
        name="breadcrumbs",
        description="Per tensor, drop the smallest `sparsity` fraction and the magnitudes at or above the "
        "`outlier_quantile` quantile, keep the band in between (Davari & Belilovsky, 2023).",
        merge=_breadcrumbs_merge_hp,
        single_task=_breadcrumbs_single_hp,
        grid={"sparsity": SPARSITY_GRID, "outlier_quantile": OUTLIER_QUANTILE_GRID},
        defaults={"sparsity": 0.7, "outlier_quantile": 0.9},
        constraint=lambda p: p["sparsity"] < p["outlier_quantile"],
    ),
    PosthocSpec(
        name="tsv",
        description="Per weight matrix, each task's top 1/T singular directions, decorrelated by orthogonal "
        "Procrustes and re-weighted by their singular values; other parameters averaged (Gargiulo et al., 2025). "
        "No hyperparameter but α, searched on 0…3 as the authors.",
        merge=tsv_merge,
        single_task=_alone(tsv_merge),
        grid={},
        alpha_stop=SPECTRAL_ALPHA_STOP,
        options=SPECTRAL_OPTIONS,
    ),
    PosthocSpec(
        name="iso_c",
        description="Per weight matrix, the task-arithmetic sum with a flat spectrum (its mean singular value); "
        "other parameters averaged (Marczak et al., 2025). No hyperparameter but α, searched on 0…3 as the authors.",
        merge=iso_c_merge,
        single_task=_alone(iso_c_merge),
        grid={},
        alpha_stop=SPECTRAL_ALPHA_STOP,
        options=SPECTRAL_OPTIONS,
    ),
    PosthocSpec(
        name="iso_cts",
        description="Iso-C with a common subspace (top 80% of the sum's rank) plus each task's own top "
        "directions off it, orthogonalized, with a flat spectrum (Marczak et al., 2025); α searched on 0…3.",
        merge=iso_cts_merge,
        single_task=_alone(iso_cts_merge),
        grid={"common_fraction": (ISO_COMMON_FRACTION,)},
        defaults={"common_fraction": ISO_COMMON_FRACTION},
        alpha_stop=SPECTRAL_ALPHA_STOP,
        options={"nonmatrix": SPECTRAL_OPTIONS["nonmatrix"], "spectrum": ("combined", "sum"),
                 "conv1x1": SPECTRAL_OPTIONS["conv1x1"]},
    ),
    PosthocSpec(
        name="lines",
        description="The task-arithmetic sum scaled per layer by 1/T + β·depth (0 at the first block, 1 at the "
        "last; parameters outside the blocks by 1/T): shallow layers averaged, deep ones kept (Wang et al., 2025); "
        "β searched on 0.1…1 and the result applied at α = 1, as the authors.",
        merge=lines_merge,
        single_task=_lines_single_hp,
        grid={"beta": LINES_BETA_GRID},
        defaults={"beta": 0.5},
        options={"nonblock": ("first", "nearest")},
        addition_alpha=LINES_ADDITION_ALPHA,
    ),
)}
"""Post-hoc methods keyed by id: the baselines of the paper's Tables 1-2 (TIES, TALL / Consensus, DARE,
Breadcrumbs) and the later merges TSV-Merge, Iso-C, Iso-CTS and LiNeS."""


def get_posthoc(name: str) -> PosthocSpec:
    """Look up a post-hoc method by id.

    >>> get_posthoc("ties").label
    'TIES-Merging'
    """
    if name not in POSTHOC_METHODS:
        raise unknown("post-hoc method", name, POSTHOC_METHODS)
    return POSTHOC_METHODS[name]
