"""Per-matrix math of the spectral merges (TSV-Merge, Iso-C, Iso-CTS) and the per-layer factors of LiNeS.

Pure tensor functions in the style of PEFT's ``merge_utils``: each takes the tasks' updates of ONE weight matrix
stacked as ``[T, m, n]`` (see :func:`talos_core.methods.merging.stack_param`) and returns the merged ``[m, n]``
update, in the input's dtype and device (the SVDs run in float32, or float64 for float64 input). Inputs are never
modified. The dict-level merges below (:func:`tsv_merge`, :func:`iso_c_merge`, :func:`iso_cts_merge`,
:func:`lines_merge`) also decide what a "matrix" is and merge the other parameters; their declarations are
:mod:`talos_core.methods.tsv`, :mod:`~talos_core.methods.iso` and :mod:`~talos_core.methods.lines`.

Notation: ``Δ_t`` the update of task ``t`` (``T`` tasks), ``r = min(m, n)``, ``polar(X) = P Qᵀ`` for the thin
SVD ``X = P Σ Qᵀ`` (the orthogonal Procrustes solution: the matrix with orthonormal columns, or rows, nearest
to ``X``).

* :func:`tsv_matrix` — Task Singular Vectors merge (Gargiulo et al., "Task Singular Vectors: Reducing Task
  Interference in Model Merging", CVPR 2025);
* :func:`iso_c_matrix` and :func:`iso_cts_matrix` — Iso-C and Iso-CTS (Marczak et al., "No Task Left Behind:
  Isotropic Model Merging with Common and Task-Specific Subspaces", ICML 2025);
* :func:`lines_factors` — LiNeS' per-layer scaling ``λ(ℓ) = α + β (ℓ − 1)/(L − 1)`` (Wang et al., "LiNeS:
  Post-training Layer Scaling Prevents Forgetting and Enhances Model Merging", ICLR 2025).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import torch

from talos_core.errors import TalosError, check_number, check_range
from talos_core.methods.taskvec import Vector, VectorLike, _check_vector, _check_vectors, _no_grad, add

IsoSpectrum = Literal["combined", "sum"]
NonBlock = Literal["first", "nearest"]
NonMatrix = Literal["mean", "sum"]
Conv1x1 = Literal["other", "matrix"]


def _stacked(stacked: object) -> torch.Tensor:
    if not isinstance(stacked, torch.Tensor) or stacked.dim() != 3 or not torch.is_floating_point(stacked):
        raise TalosError("expected the tasks' updates of one matrix stacked as a floating-point [T, m, n] tensor, "
                         f"got {getattr(stacked, 'shape', type(stacked).__name__)}")
    if stacked.shape[0] == 0:
        raise TalosError("expected at least one task's update, got T = 0")
    return stacked


def _work(x: torch.Tensor) -> torch.Tensor:
    """``x`` in the dtype the SVDs run in (float64 stays float64, everything else float32)."""
    return x.detach().to(torch.float64 if x.dtype == torch.float64 else torch.float32)


def _svd(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Thin SVD of ``x``; where LAPACK's divide-and-conquer driver (torch's on CPUs) fails to converge on a float32
    input whose singular values cluster — the near-orthogonal bases :func:`polar` orthogonalizes, all of whose
    singular values are ≈ 1 (Iso-CTS of one MiniLM task vector, 2026-11-28) — it is computed again in float64 and
    returned in ``x``'s dtype."""
    try:
        return torch.linalg.svd(x, full_matrices=False)
    except torch.linalg.LinAlgError:
        if x.dtype == torch.float64:
            raise
        return tuple(t.to(x.dtype) for t in torch.linalg.svd(x.to(torch.float64), full_matrices=False))


def polar(x: torch.Tensor) -> torch.Tensor:
    """``P Qᵀ`` for the thin SVD ``x = P Σ Qᵀ``: the nearest matrix to ``x`` with orthonormal columns (or rows,
    for a wide ``x``), i.e. the orthogonal Procrustes solution TSV and Iso-CTS use to decorrelate a basis.

    >>> q = polar(torch.tensor([[2.0, 0.0], [0.0, 0.5]]))
    >>> q.tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    p, _, qh = _svd(x)
    return p @ qh


def tsv_matrix(stacked: torch.Tensor) -> torch.Tensor:
    """TSV-Merge of one weight matrix (Gargiulo et al., CVPR 2025, Alg. 1 / the authors' ``compute_and_sum_svd``).

    Per task the thin SVD ``Δ_t = U_t Σ_t V_tᵀ`` is truncated to its top ``k = ⌊r / T⌋`` singular triplets;
    the truncated bases are concatenated, ``U = [U_1,k … U_T,k]`` (``m × Tk``) and ``V = [V_1,k … V_T,k]``,
    decorrelated by orthogonal Procrustes, ``U⊥ = polar(U)``, ``V⊥ = polar(V)``, and the merged update is
    ``U⊥ diag(Σ_1,k … Σ_T,k) V⊥ᵀ``. With ``k = 0`` (fewer singular values than tasks) the result is 0, as in
    the authors' code. With ``T = 1`` it is ``Δ_1`` itself (full rank, an orthonormal basis is its own polar).

    >>> d = torch.tensor([[3.0, 0.0], [0.0, 1.0]])
    >>> tsv_matrix(d[None]).tolist()
    [[3.0, 0.0], [0.0, 1.0]]
    >>> tsv_matrix(torch.stack([d, torch.tensor([[0.0, 0.0], [0.0, 2.0]])])).tolist()  # each keeps its top direction
    [[3.0, 0.0], [0.0, 2.0]]
    """
    stacked = _stacked(stacked)
    num_tasks, m, n = stacked.shape
    if num_tasks == 1:  # every direction kept, Procrustes of an orthonormal basis is itself: Δ, without 3 SVDs
        return stacked[0].detach().clone()
    k = min(m, n) // num_tasks
    if k == 0:
        return torch.zeros((m, n), dtype=stacked.dtype, device=stacked.device)
    us, ss, vhs = [], [], []
    for delta in _work(stacked):
        u, s, vh = _svd(delta)
        us.append(u[:, :k])
        ss.append(s[:k])
        vhs.append(vh[:k])
    merged = polar(torch.cat(us, dim=1)) @ torch.diag(torch.cat(ss)) @ polar(torch.cat(vhs, dim=0))
    return merged.to(stacked.dtype)


def iso_c_matrix(stacked: torch.Tensor) -> torch.Tensor:
    """Iso-C of one weight matrix (Marczak et al., ICML 2025, Sec. 4.1): the task-arithmetic sum
    ``M = Σ_t Δ_t = U S Vᵀ`` with its spectrum flattened to its mean, ``σ̄ U Vᵀ``, ``σ̄ = (1/r) Σ_i σ_i = ‖M‖_* / r``
    (all ``r`` singular values, as the authors' code).

    >>> iso_c_matrix(torch.tensor([[[3.0, 0.0], [0.0, 1.0]]])).tolist()
    [[2.0, 0.0], [0.0, 2.0]]
    """
    stacked = _stacked(stacked)
    u, s, vh = _svd(_work(stacked).sum(dim=0))
    return (s.mean() * (u @ vh)).to(stacked.dtype)


def iso_cts_sizes(r: int, num_tasks: int, common_fraction: float) -> tuple[int, int]:
    """``(k, per_task)``: the common subspace's size and each task's share of the rest, as the authors' code
    (``iso_cts``): ``k₀ = ⌊f r⌋``; ``per_task = round((r − k₀) / T)`` (Python's round, halves to even) so that the
    task-specific part ``T · per_task`` divides evenly; ``k = r − T · per_task``. ``per_task`` is capped at
    ``⌊r / T⌋`` so ``k ≥ 0``.

    >>> iso_cts_sizes(384, 5, 0.8), iso_cts_sizes(10, 3, 0.8), iso_cts_sizes(4, 3, 0.8)
    ((309, 15), (7, 1), (4, 0))
    """
    check_range("common_fraction", common_fraction, 0.0, 1.0, high_open=False)
    per_task = min(round((r - int(r * common_fraction)) / num_tasks), r // num_tasks)
    return r - num_tasks * per_task, per_task


def iso_cts_matrix(stacked: torch.Tensor, common_fraction: float = 0.8, *,
                   spectrum: IsoSpectrum = "combined") -> torch.Tensor:
    """Iso-CTS of one weight matrix (Marczak et al., ICML 2025, Sec. 4.2, Alg. 1; the authors' ``iso_cts``).

    1. Common subspace: the top ``k`` singular triplets ``(U_c, S_c, V_c)`` of ``M = Σ_t Δ_t``
       (``k`` and ``per_task`` from :func:`iso_cts_sizes`; paper default ``common_fraction = 0.8``).
    2. Task-specific subspaces: each task's update projected off the common left subspace,
       ``Δ̃_t = Δ_t − U_c U_cᵀ Δ_t``, and its top ``per_task`` singular triplets.
    3. The concatenated bases ``U = [U_1 … U_T U_c]``, ``V = [V_1 … V_T V_c]`` are orthogonalized by orthogonal
       Procrustes, ``polar(U)``, ``polar(V)``.
    4. Isotropic spectrum: ``σ̄ polar(U) polar(V)ᵀ``. ``spectrum="combined"`` (default, the authors' code):
       ``σ̄`` is the mean of the ``r`` kept singular values (``S_c`` and the task-specific ones);
       ``spectrum="sum"``: the mean singular value of ``M``, as Iso-C.

    ``per_task = 0`` (fewer than ``T`` directions left) leaves the common subspace of all ``r`` directions: Iso-C.

    >>> d = torch.tensor([[[3.0, 0.0], [0.0, 1.0]]])
    >>> iso_cts_matrix(d).tolist()
    [[2.0, 0.0], [0.0, 2.0]]
    """
    stacked = _stacked(stacked)
    if spectrum not in ("combined", "sum"):
        raise TalosError(f"spectrum must be 'combined' or 'sum', got {spectrum!r}")
    num_tasks, m, n = stacked.shape
    k, per_task = iso_cts_sizes(min(m, n), num_tasks, common_fraction)
    work = _work(stacked)
    u, s, vh = _svd(work.sum(dim=0))
    us, ss, vhs = [], [], []
    if per_task > 0:
        common = u[:, :k]
        for delta in work:
            ut, st, vht = _svd(delta - common @ (common.T @ delta))
            us.append(ut[:, :per_task])
            ss.append(st[:per_task])
            vhs.append(vht[:per_task])
    us.append(u[:, :k])
    ss.append(s[:k])
    vhs.append(vh[:k])
    sigma = (torch.cat(ss) if spectrum == "combined" else s).mean()
    return (sigma * (polar(torch.cat(us, dim=1)) @ polar(torch.cat(vhs, dim=0)))).to(stacked.dtype)


def _check_nonblock(nonblock: object) -> None:
    if nonblock not in ("first", "nearest"):
        raise TalosError(f"nonblock must be 'first' or 'nearest', got {nonblock!r}")


def lines_layers(names: Sequence[str], nonblock: NonBlock = "first") -> tuple[dict[str, int], int]:
    """``({name: ℓ}, L)``: LiNeS' depth index ``ℓ ∈ {0, …, L − 1}`` of each parameter and the number of blocks ``L``.

    Blocks are :func:`talos_core.evaluation.maskstats.block_indices` (the transformer blocks, EfficientNet's
    stages; T5's decoder blocks after its encoder's). A parameter outside the blocks (embeddings, stem, final
    norms, pooler, projection) sits at depth 0 with ``nonblock="first"`` (the authors' ``LiNeS_scaling``: it
    takes the factor ``α`` of the first block), or, with ``nonblock="nearest"``, at the depth of the nearest block
    parameter before it in ``names`` (a task vector's order is the model's parameter order; 0 when none precedes),
    so final norms, pooler and heads take the last block's factor. Without any block, ``L = 1``.

    >>> names = ["embed.weight", "layer.0.w", "layer.1.w", "layer.2.w", "head.weight"]
    >>> lines_layers(names)
    ({'embed.weight': 0, 'layer.0.w': 0, 'layer.1.w': 1, 'layer.2.w': 2, 'head.weight': 0}, 3)
    >>> lines_layers(names, "nearest")[0]["head.weight"]
    2
    """
    from talos_core.models.param_names import block_indices

    _check_nonblock(nonblock)
    blocks = block_indices(list(names))
    depth, out = 0, {}
    for name in names:
        if blocks[name] >= 0:
            depth = blocks[name]
        out[name] = depth if blocks[name] >= 0 or nonblock == "nearest" else 0
    return out, max([b + 1 for b in blocks.values()] + [1])


def lines_factors(names: Sequence[str], alpha: float, beta: float,
                  nonblock: NonBlock = "first") -> dict[str, float]:
    """LiNeS' scaling factor of each parameter, ``λ(ℓ) = α + β (ℓ − 1)/(L − 1)`` for the 1-based layer ``ℓ`` of
    ``L`` (here ``α + β ℓ/(L − 1)`` with the 0-based :func:`lines_layers`; ``λ = α`` when ``L = 1``): shallow
    layers keep little of the update, deep layers more (Wang et al., ICLR 2025, Eq. 1). Parameters outside the
    blocks get ``α`` (``nonblock="first"``, the authors' code) or their nearest block's factor (``"nearest"``).

    >>> lines_factors(["layer.0.w", "layer.1.w", "layer.2.w", "norm.w"], 0.5, 1.0)
    {'layer.0.w': 0.5, 'layer.1.w': 1.0, 'layer.2.w': 1.5, 'norm.w': 0.5}
    """
    for what, value in (("alpha", alpha), ("beta", beta)):
        check_number(f"LiNeS {what}", value)
    layers, num_layers = lines_layers(names, nonblock)
    return {name: alpha + (beta * ell / (num_layers - 1) if num_layers > 1 else 0.0) for name, ell in layers.items()}


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
    α on ``0.1, 0.2, …, 3`` on validation; so does the evaluator here
    (:data:`talos_core.methods.tsv.SPECTRAL_ALPHA_STOP`).

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
