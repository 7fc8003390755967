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


def test_an_svd_that_fails_to_converge_in_float32_is_computed_in_float64(monkeypatch) -> None:
    # LAPACK's divide-and-conquer (torch's CPU driver) failed to converge in float32 on the near-orthogonal basis
    # Iso-CTS orthogonalizes for one MiniLM task vector (all singular values within 5e-4 of 1): a float32 failure is
    # computed again in float64 and returned in float32; a float64 failure is raised
    real = torch.linalg.svd
    calls = []

    def flaky(x, *args, **kwargs):
        calls.append(x.dtype)
        if x.dtype == torch.float32:
            raise torch.linalg.LinAlgError("linalg.svd: The algorithm failed to converge")
        return real(x, *args, **kwargs)

    monkeypatch.setattr(torch.linalg, "svd", flaky)
    x = torch.linalg.qr(torch.randn(8, 8, generator=torch.Generator().manual_seed(3)))[0] * 1.0001
    u, s, vh = sp._svd(x.float())
    assert calls == [torch.float32, torch.float64] and u.dtype == s.dtype == vh.dtype == torch.float32
    _close(u @ torch.diag(s) @ vh, x.float().numpy(), 1e-5)
    _close(sp.polar(x.float()), (x / 1.0001).float().numpy(), 1e-5)
    monkeypatch.setattr(torch.linalg, "svd", lambda *a, **k: (_ for _ in ()).throw(torch.linalg.LinAlgError("x")))
    with pytest.raises(torch.linalg.LinAlgError):
        sp._svd(x.double())


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
    for k in ("b", "conv"):  # not 2-D: the mean (the authors' code of all three) or the sum (task arithmetic)
        torch.testing.assert_close(tsv[k], stacked[k].mean(0))
        torch.testing.assert_close(mg.iso_c_merge(vs)[k], stacked[k].mean(0))
        torch.testing.assert_close(mg.iso_cts_merge(vs)[k], stacked[k].mean(0))
        torch.testing.assert_close(mg.iso_c_merge(vs, nonmatrix="sum")[k], stacked[k].sum(0))
        torch.testing.assert_close(mg.tsv_merge(vs, nonmatrix="sum")[k], stacked[k].sum(0))
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
    with pytest.raises(TalosError, match=r"^conv1x1 must be 'other' or 'matrix', got 'yes'$"):
        mg.iso_c_merge(vs, conv1x1="yes")  # type: ignore[arg-type]


def test_iso_c_on_a_small_matrix_has_the_mean_spectrum_and_averages_the_rest() -> None:
    """Known answer: two rank-1 updates along orthogonal directions sum to a 3 × 2 matrix with spectrum (4, 2), mean
    3: Iso-C keeps the sum's singular vectors with every singular value 3 (α = 1); the bias, not a matrix, is the
    tasks' mean (the authors' ``iso_c``: ``sum(tvs) / len(tvs)``)."""
    a = {"w": torch.tensor([[4.0, 0.0], [0.0, 0.0], [0.0, 0.0]]), "b": torch.tensor([1.0, -1.0])}
    b = {"w": torch.tensor([[0.0, 0.0], [0.0, 2.0], [0.0, 0.0]]), "b": torch.tensor([3.0, 5.0])}
    merged = mg.iso_c_merge([a, b])
    assert merged["w"].tolist() == [[3.0, 0.0], [0.0, 3.0], [0.0, 0.0]]
    assert merged["b"].tolist() == [2.0, 2.0]
    # on a dense random matrix: all singular values equal the summed spectrum's mean (nuclear norm / rank)
    stacked = _random((4, 7, 5), seed=21)
    sigma = np.linalg.svd(stacked.sum(0).numpy(), compute_uv=False)
    flat = np.linalg.svd(mg.iso_c_merge([{"w": d} for d in stacked])["w"].numpy(), compute_uv=False)
    np.testing.assert_allclose(flat, np.full(5, sigma.sum() / 5), rtol=1e-10)


@pytest.mark.parametrize("merge", [mg.tsv_merge, mg.iso_c_merge, mg.iso_cts_merge])
def test_a_1x1_kernel_merged_as_a_matrix_equals_the_matrix_case(merge) -> None:
    """``conv1x1="matrix"``: a pointwise kernel ``[out, in, 1, 1]`` is merged exactly as its ``[out, in]`` matrix;
    by default (the authors' code: only 2-D tensors are matrices) it is averaged like a bias; 3 × 3 kernels are
    never matrices."""
    mats = _random((3, 6, 4), seed=31)
    k3 = _random((3, 6, 4, 3, 3), seed=32)
    conv = [{"pw": m[:, :, None, None], "dw": k, "bias": m[0]} for m, k in zip(mats, k3)]
    dense = [{"pw": m, "dw": k, "bias": m[0]} for m, k in zip(mats, k3)]
    as_matrix, reference = merge(conv, conv1x1="matrix"), merge(dense)
    assert as_matrix["pw"].shape == (6, 4, 1, 1)
    torch.testing.assert_close(as_matrix["pw"][:, :, 0, 0], reference["pw"], rtol=0, atol=0)
    for k in ("dw", "bias"):
        torch.testing.assert_close(as_matrix[k], reference[k], rtol=0, atol=0)
        torch.testing.assert_close(as_matrix[k], torch.stack([v[k] for v in conv]).mean(0))
    torch.testing.assert_close(merge(conv)["pw"], torch.stack([v["pw"] for v in conv]).mean(0))  # the default
    assert not torch.allclose(as_matrix["pw"], merge(conv)["pw"])


def test_registered_options_default_to_the_merges_own_defaults() -> None:
    """One home per convention: each spec's first option value is its merge function's default (the authors')."""
    import inspect

    for name, spec in mg.POSTHOC_METHODS.items():
        params = inspect.signature(spec.merge).parameters
        for key, values in spec.options.items():
            assert params[key].default == values[0], (name, key)
    assert mg.POSTHOC_METHODS["iso_c"].check_options() == {"nonmatrix": "mean", "conv1x1": "other"}
    assert mg.POSTHOC_METHODS["lines"].check_options({"nonblock": "nearest"}) == {"nonblock": "nearest"}
    with pytest.raises(TalosError, match=r"^option conv1x1 of post-hoc method 'tsv' must be one of 'other', "
                                         "'matrix', got 'yes'$"):
        mg.POSTHOC_METHODS["tsv"].grid_points(3, {"conv1x1": "yes"})
    with pytest.raises(TalosError, match="'nonblock' is not an option of post-hoc method 'iso_c'"):
        mg.POSTHOC_METHODS["iso_c"].check_options({"nonblock": "first"})
    with pytest.raises(TalosError, match=r"options: none\)$"):
        mg.POSTHOC_METHODS["ties"].check_options({"conv1x1": "matrix"})


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
    # the authors' code: a parameter outside the blocks takes the first block's factor α
    assert sp.lines_layers(BERT) == ({**dict.fromkeys(BERT[:2], 0), **{BERT[2 + i]: i for i in range(4)},
                                      "pooler.dense.weight": 0}, 4)
    assert sp.lines_layers(T5) == (dict(zip(T5, [0, 0, 1, 0, 2, 3, 0])), 4)
    assert sp.lines_layers(EFFICIENTNET) == (dict(zip(EFFICIENTNET, [0, 0, 0, 1, 1, 2, 0, 0])), 3)
    assert sp.lines_layers(["w", "b"]) == ({"w": 0, "b": 0}, 1)
    # nonblock="nearest": the depth of the block before it
    assert sp.lines_layers(BERT, "nearest")[0]["pooler.dense.weight"] == 3
    assert sp.lines_layers(T5, "nearest") == (dict(zip(T5, [0, 0, 1, 1, 2, 3, 3])), 4)
    assert sp.lines_layers(EFFICIENTNET, "nearest") == (dict(zip(EFFICIENTNET, [0, 0, 0, 1, 1, 2, 2, 2])), 3)
    with pytest.raises(TalosError, match=r"^nonblock must be 'first' or 'nearest', got 'last'$"):
        sp.lines_layers(BERT, "last")  # type: ignore[arg-type]


def test_lines_factors_follow_the_paper_formula() -> None:
    alpha, beta, num_layers = 0.2, 0.9, 4
    factors = sp.lines_factors(BERT, alpha, beta)
    for i in range(num_layers):  # λ(ℓ) = α + β (ℓ − 1)/(L − 1) for the 1-based layer ℓ = i + 1
        ell = i + 1
        assert factors[BERT[2 + i]] == pytest.approx(alpha + beta * (ell - 1) / (num_layers - 1))
    assert factors["embeddings.word_embeddings.weight"] == pytest.approx(alpha)
    assert factors["pooler.dense.weight"] == pytest.approx(alpha)  # outside the blocks: the minimum factor α
    assert sp.lines_factors(BERT, alpha, beta, "nearest")["pooler.dense.weight"] == pytest.approx(alpha + beta)
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
    # the pooler, outside the blocks, gets α = 1/T as the authors' code, or the last block's factor with "nearest"
    torch.testing.assert_close(deep["pooler.dense.weight"], 0.25 * total["pooler.dense.weight"])
    torch.testing.assert_close(mg.lines_merge(vs, 0.6, nonblock="nearest")["pooler.dense.weight"],
                               (0.25 + 0.6) * total["pooler.dense.weight"])


# ------------------------------------------------------------------------------------------ α grids as the authors


@pytest.mark.parametrize("method", ["tsv", "iso_c", "iso_cts"])
def test_spectral_alpha_grid_is_the_authors_range(method) -> None:
    """TSV's and Iso's code search ``np.linspace(0.0, 3.0, 31)[1:]`` (0.1, …, 3.0) on validation: with the step 0.1
    our grid is theirs plus α = 0 (the unedited model, on every grid here); with the paper's 0.05 it holds theirs."""
    from talos_core.evaluation.posthoc import posthoc_alphas

    authors = np.linspace(0.0, 3.0, 31)[1:]
    addition, negation = posthoc_alphas(method, 0.1)
    assert addition == negation and addition[0] == 0.0
    np.testing.assert_allclose(addition[1:], authors, atol=1e-12)
    fine, _ = posthoc_alphas(method, 0.05)
    assert len(fine) == 61 and all(np.isclose(fine, a).any() for a in authors)


def test_lines_searches_beta_and_adds_at_one_as_the_authors() -> None:
    """LiNeS' code: multi-task β over ``np.linspace(0.0, 1.0, 11)[1:]``, the scaled vector added with coefficient 1;
    its negation (task arithmetic's, on the fine-tuned vectors) keeps the paper's 0…1 grid."""
    from talos_core.evaluation.posthoc import posthoc_alphas

    np.testing.assert_allclose(mg.LINES_BETA_GRID, np.linspace(0.0, 1.0, 11)[1:], atol=1e-12)
    assert [p["beta"] for p in mg.POSTHOC_METHODS["lines"].grid_points(8)] == list(mg.LINES_BETA_GRID)
    assert posthoc_alphas("lines", 0.05) == ([1.0], [round(0.05 * i, 10) for i in range(21)])
    assert posthoc_alphas("ties", 0.05)[0] == posthoc_alphas("ties", 0.05)[1] == [round(0.05 * i, 10)
                                                                                  for i in range(21)]

