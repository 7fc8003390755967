"""Task vectors and the tensor helpers every post-hoc merge is built from: validation, task arithmetic (sum,
scale, mask), magnitude top-k and the TIES trim.

A *task vector* here is a ``dict[str, torch.Tensor]``: parameter name -> dense delta ``θ_t − θ0``.
All vectors passed together must share the same names and shapes (checked; a mismatch raises
:class:`~talos_core.errors.TalosError`). Every function is pure: inputs are never modified, outputs
are new tensors with the input's dtype and device. Work is done tensor by tensor; the only whole-vector
buffer is the concatenation of ``|τ|`` needed for a *global* top-k (one float copy of one vector).

Ordering and ties: every top-k / quantile selection is *exact* (it keeps exactly the requested count)
and deterministic: entries are ranked by ``|x|`` descending, equal magnitudes by position (parameter
order of the vector, then flat index), earlier first. Counts are ``round(fraction * numel)`` with
halves rounded up.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import torch

from talos_core.errors import TalosError, check_int, check_number, check_range

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


def one_task(vectors: Sequence[VectorLike], index: int) -> list[VectorLike]:
    """``[vectors[index]]``, after checking the vectors and the index: what a merge's single-task version merges.

    >>> one_task([{"w": torch.ones(1)}, {"w": torch.zeros(1)}], 1)
    [{'w': tensor([0.])}]
    """
    _check_vectors(vectors)
    return [vectors[_check_index(index, len(vectors))]]
