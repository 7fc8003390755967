"""TSV-Merge, Iso-C, Iso-CTS and LiNeS (talos_core.methods.spectral and their dict-level merges in
talos_core.methods.merging) against independent NumPy formulas on random tensors. Pure CPU, < 5 s."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
import torch

from talos_core.errors import TalosError
from talos_core.methods import merging as mg
from talos_core.methods import spectral as sp


def _random(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _close(a: torch.Tensor, b: np.ndarray, tol: float = 1e-9) -> None:
    np.testing.assert_allclose(a.numpy(), b, rtol=tol, atol=tol)


def test_docstring_examples() -> None:
    result = doctest.testmod(sp, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 8 and result.failed == 0


# ------------------------------------------------------------------------------------------ NumPy references


def tsv_reference(deltas: list[np.ndarray]) -> np.ndarray:
    """The authors' ``compute_and_sum_svd_mem_reduction``: zero-padded ``[m, r]`` / ``[r, n]`` slots per task."""
    num_tasks, (m, n) = len(deltas), deltas[0].shape
    r = min(m, n)
    k = r // num_tasks
    sum_u, sum_s, sum_v = np.zeros((m, r)), np.zeros(r), np.zeros((r, n))
    for i, d in enumerate(deltas):
        u, s, vt = np.linalg.svd(d, full_matrices=False)
        sum_u[:, i * k:(i + 1) * k] = u[:, :k]
        sum_s[i * k:(i + 1) * k] = s[:k]
        sum_v[i * k:(i + 1) * k, :] = vt[:k]
    uu, _, vu = np.linalg.svd(sum_u, full_matrices=False)
    uv, _, vv = np.linalg.svd(sum_v, full_matrices=False)
    return np.linalg.multi_dot((uu, vu, np.diag(sum_s), uv, vv))


def _inverse_sqrt(gram: np.ndarray) -> np.ndarray:
    w, q = np.linalg.eigh(gram)
    return (q / np.sqrt(w)) @ q.T


def iso_c_reference(deltas: list[np.ndarray]) -> np.ndarray:
    """Without an SVD: ``σ̄ · polar(M)`` with ``polar(M) = M (MᵀM)^{-1/2}`` and ``σ̄ = tr((MᵀM)^{1/2}) / r``."""
    m = sum(deltas)
    if m.shape[0] < m.shape[1]:
        return iso_c_reference([d.T for d in deltas]).T
    w = np.linalg.eigvalsh(m.T @ m)
    return np.sqrt(np.clip(w, 0, None)).mean() * (m @ _inverse_sqrt(m.T @ m))


def iso_cts_reference(deltas: list[np.ndarray], fraction: float = 0.8) -> np.ndarray:
    """The authors' ``iso_cts``, slot by slot."""
    num_tasks, shape = len(deltas), deltas[0].shape
    r = min(shape)
    common = int(r * fraction)
    common = r - round((r - common) / num_tasks) * num_tasks
    u, s, vt = np.linalg.svd(sum(deltas), full_matrices=False)
    cu, cs, cv = u[:, :common], s[:common], vt[:common]
    per_task = int((r - common) / num_tasks)
    comb_u, comb_s, comb_v = np.zeros((shape[0], r)), np.zeros(r), np.zeros((r, shape[1]))
    for i, w in enumerate(deltas):
        ut, st, vtt = np.linalg.svd(w - cu @ cu.T @ w, full_matrices=False)
        comb_u[:, i * per_task:(i + 1) * per_task] = ut[:, :per_task]
        comb_s[i * per_task:(i + 1) * per_task] = st[:per_task]
        comb_v[i * per_task:(i + 1) * per_task] = vtt[:per_task]
    start = num_tasks * per_task
    comb_u[:, start:start + common], comb_s[start:start + common], comb_v[start:start + common] = cu, cs, cv
    a, _, b = np.linalg.svd(comb_u, full_matrices=False)
    c, _, d = np.linalg.svd(comb_v, full_matrices=False)
    return (a @ b) @ np.diag(np.full(r, comb_s.mean())) @ (c @ d)


# ------------------------------------------------------------------------------------------ TSV-Merge


@pytest.mark.parametrize("shape,num_tasks", [((7, 5), 2), ((5, 9), 3), ((6, 6), 4)])
def test_tsv_matches_the_authors_procedure(shape, num_tasks) -> None:
    stacked = _random((num_tasks, *shape), seed=num_tasks)
    ref = tsv_reference([d.numpy() for d in stacked])
    _close(sp.tsv_matrix(stacked), ref)


def test_tsv_with_one_task_reproduces_the_update_and_sums_orthogonal_tasks() -> None:
    delta = _random((8, 5), seed=1)
    _close(sp.tsv_matrix(delta[None]), delta.numpy())
    _close(torch.from_numpy(tsv_reference([delta.numpy()])), delta.numpy())  # the shortcut is the procedure's value
    # tasks living in mutually orthogonal subspaces of rank ≤ ⌊r/T⌋ do not interfere: TSV is their sum
    q_left = torch.linalg.qr(_random((9, 9), seed=2))[0]
    q_right = torch.linalg.qr(_random((6, 6), seed=3))[0]
    parts = [q_left[:, 2 * t:2 * t + 2] @ torch.diag(torch.tensor([3.0 - t, 1.0 + t], dtype=torch.float64))
             @ q_right[:, 2 * t:2 * t + 2].T for t in range(3)]
    _close(sp.tsv_matrix(torch.stack(parts)), sum(parts).numpy())
    # fewer singular values than tasks: nothing survives (the authors' int(r / T) = 0)
    assert torch.count_nonzero(sp.tsv_matrix(_random((3, 2, 5), seed=4))) == 0


# ------------------------------------------------------------------------------------------ Iso-C / Iso-CTS


@pytest.mark.parametrize("shape", [(9, 4), (4, 9), (5, 5)])
def test_iso_c_is_the_flattened_sum(shape) -> None:
    stacked = _random((3, *shape), seed=sum(shape))
    merged = sp.iso_c_matrix(stacked)
    _close(merged, iso_c_reference([d.numpy() for d in stacked]))
    sigma = np.linalg.svd(stacked.sum(0).numpy(), compute_uv=False)
    # the merged spectrum is flat, at the sum's mean singular value (its nuclear norm / r)
    np.testing.assert_allclose(np.linalg.svd(merged.numpy(), compute_uv=False), np.full(min(shape), sigma.mean()))


@pytest.mark.parametrize("shape,num_tasks,fraction", [((12, 10), 3, 0.8), ((10, 14), 2, 0.5), ((8, 8), 4, 0.8)])
def test_iso_cts_matches_the_authors_procedure(shape, num_tasks, fraction) -> None:
    stacked = _random((num_tasks, *shape), seed=7)
    ref = iso_cts_reference([d.numpy() for d in stacked], fraction)
    _close(sp.iso_cts_matrix(stacked, fraction), ref, tol=1e-8)


def test_iso_cts_properties() -> None:
    stacked = _random((3, 12, 6), seed=8)
    total = stacked.sum(0).numpy()
    u, sigma, _ = np.linalg.svd(total, full_matrices=False)
    k, per_task = sp.iso_cts_sizes(6, 3, 0.8)
    assert (k, per_task) == (3, 1)
    merged = sp.iso_cts_matrix(stacked).numpy()
    spectrum = np.linalg.svd(merged, compute_uv=False)
    np.testing.assert_allclose(spectrum, np.full(6, spectrum.mean()))  # isotropic
    # the merged column space holds the common subspace (top-k left singular vectors of the sum)
    basis = np.linalg.svd(merged, full_matrices=False)[0]
    np.testing.assert_allclose(basis @ (basis.T @ u[:, :k]), u[:, :k], atol=1e-9)
    # spectrum="sum": the flat value is the sum's mean singular value, as Iso-C
    flat = np.linalg.svd(sp.iso_cts_matrix(stacked, spectrum="sum").numpy(), compute_uv=False)
    np.testing.assert_allclose(flat, np.full(6, sigma.mean()))
    # no room for task-specific directions: Iso-CTS is Iso-C
    small = _random((3, 4, 4), seed=9)
    assert sp.iso_cts_sizes(4, 3, 0.8) == (4, 0)
    _close(sp.iso_cts_matrix(small), sp.iso_c_matrix(small).numpy())


def test_iso_cts_sizes_always_split_the_rank() -> None:
    for r in range(1, 41):
        for num_tasks in range(1, 9):
            for fraction in (0.0, 0.1, 0.5, 0.8, 1.0):
                k, per_task = sp.iso_cts_sizes(r, num_tasks, fraction)
                assert k >= 0 and per_task >= 0 and k + num_tasks * per_task == r, (r, num_tasks, fraction)
    with pytest.raises(TalosError, match="common_fraction"):
        sp.iso_cts_sizes(8, 2, 1.5)


# ------------------------------------------------------------------------------------------ dict level


def _vectors(num_tasks: int = 3, dtype: torch.dtype = torch.float32) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(11)
    return [{"w": torch.randn(6, 4, generator=g).to(dtype), "b": torch.randn(4, generator=g).to(dtype),
             "conv": torch.randn(2, 3, 3, 3, generator=g).to(dtype)} for _ in range(num_tasks)]


def test_spectral_merges_per_parameter_kind() -> None:
    vs = _vectors()
    before = [{k: x.clone() for k, x in v.items()} for v in vs]
    stacked = {k: torch.stack([v[k] for v in vs]) for k in vs[0]}
    tsv = mg.tsv_merge(vs)
    torch.testing.assert_close(tsv["w"], sp.tsv_matrix(stacked["w"]))
    for k in ("b", "conv"):  # not 2-D: the mean (TSV's code) or the sum (Iso's task arithmetic)
        torch.testing.assert_close(tsv[k], stacked[k].mean(0))
        torch.testing.assert_close(mg.iso_c_merge(vs)[k], stacked[k].sum(0))
        torch.testing.assert_close(mg.iso_cts_merge(vs, nonmatrix="mean")[k], stacked[k].mean(0))
    torch.testing.assert_close(mg.iso_c_merge(vs)["w"], sp.iso_c_matrix(stacked["w"]))
    torch.testing.assert_close(mg.iso_cts_merge(vs, 0.5)["w"], sp.iso_cts_matrix(stacked["w"], 0.5))
    for v, b in zip(vs, before):
        assert all(torch.equal(v[k], b[k]) for k in v)
    half = mg.iso_cts_merge(_vectors(dtype=torch.float16))
    assert all(x.dtype == torch.float16 for x in half.values())
    with pytest.raises(TalosError, match="nonmatrix must be"):
        mg.tsv_merge(vs, nonmatrix="median")  # type: ignore[arg-type]
    with pytest.raises(TalosError, match="spectrum must be"):
        mg.iso_cts_merge(vs, spectrum="max")  # type: ignore[arg-type]
    with pytest.raises(TalosError, match="common_fraction"):
        mg.iso_cts_merge(vs, 1.5)


# ------------------------------------------------------------------------------------------ LiNeS

BERT = ["embeddings.word_embeddings.weight", "embeddings.LayerNorm.weight",
        *(f"encoder.layer.{i}.attention.self.query.weight" for i in range(4)), "pooler.dense.weight"]
T5 = ["shared.weight", "encoder.block.0.layer.0.SelfAttention.q.weight",
      "encoder.block.1.layer.0.SelfAttention.q.weight", "encoder.final_layer_norm.weight",
      "decoder.block.0.layer.0.SelfAttention.q.weight", "decoder.block.1.layer.0.SelfAttention.q.weight",
      "decoder.final_layer_norm.weight"]
EFFICIENTNET = ["conv_stem.weight", "bn1.weight", "blocks.0.0.conv_dw.weight", "blocks.1.0.conv_pw.weight",
                "blocks.1.1.conv_pw.weight", "blocks.2.0.conv_pw.weight", "conv_head.weight", "bn2.weight"]


def test_lines_layers_of_real_parameter_names() -> None:
    assert sp.lines_layers(BERT) == ({**dict.fromkeys(BERT[:2], 0), **{BERT[2 + i]: i for i in range(4)},
                                      "pooler.dense.weight": 3}, 4)
    assert sp.lines_layers(T5) == (dict(zip(T5, [0, 0, 1, 1, 2, 3, 3])), 4)
    assert sp.lines_layers(EFFICIENTNET) == (dict(zip(EFFICIENTNET, [0, 0, 0, 1, 1, 2, 2, 2])), 3)
    assert sp.lines_layers(["w", "b"]) == ({"w": 0, "b": 0}, 1)


def test_lines_factors_follow_the_paper_formula() -> None:
    alpha, beta, num_layers = 0.2, 0.9, 4
    factors = sp.lines_factors(BERT, alpha, beta)
    for i in range(num_layers):  # λ(ℓ) = α + β (ℓ − 1)/(L − 1) for the 1-based layer ℓ = i + 1
        ell = i + 1
        assert factors[BERT[2 + i]] == pytest.approx(alpha + beta * (ell - 1) / (num_layers - 1))
    assert factors["embeddings.word_embeddings.weight"] == pytest.approx(alpha)
    assert factors["pooler.dense.weight"] == pytest.approx(alpha + beta)
    assert sp.lines_factors(["w"], 0.3, 5.0) == {"w": 0.3}  # one layer: λ = α
    with pytest.raises(TalosError, match="beta must be a finite number"):
        sp.lines_factors(BERT, 0.5, float("nan"))


def test_lines_scale_and_merge() -> None:
    g = torch.Generator().manual_seed(5)
    vs = [{n: torch.randn(3, generator=g) for n in BERT} for _ in range(4)]
    mg_plain = mg.lines_scale(vs[0], 0.7, 0.0)  # β = 0: plain scaling
    for n in BERT:
        torch.testing.assert_close(mg_plain[n], 0.7 * vs[0][n])
    mean = mg.lines_merge(vs, 0.0)  # α = 1/T by default: β = 0 is the task vectors' mean
    total = mg.add(vs)
    for n in BERT:
        torch.testing.assert_close(mean[n], total[n] / 4)
    deep = mg.lines_merge(vs, 0.6)
    torch.testing.assert_close(deep["encoder.layer.3.attention.self.query.weight"],
                               (0.25 + 0.6) * total["encoder.layer.3.attention.self.query.weight"])
    torch.testing.assert_close(deep["encoder.layer.1.attention.self.query.weight"],
                               (0.25 + 0.6 / 3) * total["encoder.layer.1.attention.self.query.weight"])
    torch.testing.assert_close(mg.lines_merge(vs, 0.0, alpha=1.0)[BERT[0]], total[BERT[0]])
