"""Tests for talos_core.methods.merging (post-hoc task-vector methods). Pure CPU, < 5 s."""

from __future__ import annotations

import doctest
import math

import pytest
import torch

from talos_core.errors import TalosError
from talos_core.methods import merging as mg
from talos_core.schema import METHODS


def T(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def clone(v: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: x.clone() for k, x in v.items()}


def assert_vec_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], **kw: float) -> None:
    assert list(a) == list(b)
    for k in a:
        torch.testing.assert_close(a[k], b[k], **kw)


# ------------------------------------------------------------------------------------------ doctests


def test_docstring_examples() -> None:
    from talos_core.methods import sparsify, taskvec

    results = [doctest.testmod(m, optionflags=doctest.NORMALIZE_WHITESPACE) for m in (mg, taskvec, sparsify)]
    assert sum(r.attempted for r in results) > 20
    assert sum(r.failed for r in results) == 0


# ------------------------------------------------------------------------------------------ helpers


def test_add_scale_stack_apply_mask() -> None:
    v1 = {"a": T(1, 2), "b": T(3)}
    v2 = {"a": T(-1, 0.5), "b": T(1)}
    assert_vec_equal(mg.add([v1, v2]), {"a": T(0, 2.5), "b": T(4)})
    assert_vec_equal(mg.scale(v1, -2.0), {"a": T(-2, -4), "b": T(-6)})
    torch.testing.assert_close(mg.stack_param([v1, v2], "a"), torch.tensor([[1.0, 2.0], [-1.0, 0.5]]))
    masked = mg.apply_mask(v1, {"a": torch.tensor([True, False]), "b": torch.tensor([False])})
    assert_vec_equal(masked, {"a": T(1, 0), "b": T(0)})
    assert mg.density_of(masked) == pytest.approx(1 / 3)
    assert v1 == v1 and torch.equal(v1["a"], T(1, 2))  # inputs untouched


# ------------------------------------------------------------------------------------------ top-k / trim


def test_topk_exact_count_and_tie_break() -> None:
    # four equal magnitudes: the earliest positions win, exactly k kept
    assert mg.topk_mask_tensor(T(1, -1, 1, 1), 0.5).tolist() == [True, True, False, False]
    # global: ties broken by parameter order then flat index
    masks = mg.magnitude_topk_mask({"a": T(1), "b": T(-1, 1)}, 2 / 3)
    assert masks["a"].tolist() == [True] and masks["b"].tolist() == [True, False]
    # exact count on a tie-heavy random tensor
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-3, 4, (7, 13), generator=g).float()
    for density in (0.1, 0.33, 0.5, 0.9, 1.0):
        m = mg.topk_mask_tensor(x, density)
        assert int(m.sum()) == math.floor(density * x.numel() + 0.5)
        # every kept magnitude >= every dropped magnitude
        if 0 < int(m.sum()) < x.numel():
            assert x.abs()[m].min() >= x.abs()[~m].max()


def test_trim_global_vs_tensor_scope() -> None:
    v = {"a": T(10, 9, 8, 7), "b": T(1, 2, 3, 4)}
    glob = mg.trim(v, 0.5)
    assert_vec_equal(glob, {"a": T(10, 9, 8, 7), "b": T(0, 0, 0, 0)})
    per = mg.trim(v, 0.5, scope="tensor")
    assert_vec_equal(per, {"a": T(10, 9, 0, 0), "b": T(0, 0, 3, 4)})


def test_trim_half_precision() -> None:
    v = {"w": T(0.5, -4, 2, 1).to(torch.bfloat16)}
    out = mg.trim(v, 0.5)
    assert out["w"].dtype == torch.bfloat16
    assert out["w"].float().tolist() == [0.0, -4.0, 2.0, 0.0]


# ------------------------------------------------------------------------------------------ TIES


def _ties_vectors() -> list[dict[str, torch.Tensor]]:
    # density 0.5 -> 3 of 6 entries kept per vector (global over a and b):
    #   v1 -> a=[4, 0, 2, 0]   b=[3, 0]
    #   v2 -> a=[0, 3, -2, 0]  b=[0, -5]
    #   v3 -> a=[1, -2, 0, 0]  b=[0, -1.2]
    return [
        {"a": T(4, -1, 2, 0.5), "b": T(3, 0.1)},
        {"a": T(-1.5, 3, -2, 0.2), "b": T(1, -5)},
        {"a": T(1, -2, 0.3, 0.4), "b": T(0, -1.2)},
    ]


def test_ties_hand_computed() -> None:
    vectors = _ties_vectors()
    before = [clone(v) for v in vectors]
    # mass: a=[5, 1, 0(tie), 0], b=[3, -6.2]; elected signs [+, +, 0, 0], [+, -] -> majority +
    # disjoint mean: a0 mean(4, 1); a1 only +3 (v3's -2 disagrees); a2 tie -> + -> 2; a3 nothing; b0 3;
    # b1 mean(-5, -1.2)
    out = mg.ties_merge(vectors, 0.5)
    assert_vec_equal(out, {"a": T(2.5, 3, 2, 0), "b": T(3, -3.1)})
    out_zero = mg.ties_merge(vectors, 0.5, tie_break="zero")
    assert_vec_equal(out_zero, {"a": T(2.5, 3, 0, 0), "b": T(3, -3.1)})
    assert_vec_equal(mg.ties_merge(vectors, 0.5, lam=2.0), {"a": T(5, 6, 4, 0), "b": T(6, -6.2)})
    for v, b in zip(vectors, before):  # pure
        assert_vec_equal(v, b)


def test_ties_pieces() -> None:
    stacked = torch.tensor([[2.0, -1.0, 3.0, 0.0], [-1.0, -1.0, -3.0, 0.0]])
    assert mg.elect_sign(stacked).tolist() == [1.0, -1.0, 0.0, 0.0]
    assert mg.elect_sign(stacked, tie_sign=-1).tolist() == [1.0, -1.0, -1.0, -1.0]
    sign = torch.tensor([1.0, -1.0, -1.0, 1.0])
    assert mg.disjoint_mean(stacked, sign).tolist() == [2.0, -1.0, -3.0, 0.0]
    # zero elected sign selects nothing
    assert mg.disjoint_mean(stacked, torch.zeros(4)).tolist() == [0.0, 0.0, 0.0, 0.0]


def test_ties_single_vector_is_trim_and_density_one_skips_trim() -> None:
    v = _ties_vectors()[0]
    assert_vec_equal(mg.ties_merge([v], 0.5), mg.trim(v, 0.5))
    vs = [{"w": T(1, -2)}, {"w": T(3, 1)}]
    # no trimming: signs [+, -] ; w0 mean(1, 3); w1 sum -1 -> '-': only -2
    assert_vec_equal(mg.ties_merge(vs, 1.0), {"w": T(2, -2)})


# ------------------------------------------------------------------------------------------ DARE


def test_dare_drop_rate_and_rescale() -> None:
    g = torch.Generator().manual_seed(0)
    x = {"w": torch.ones(200_000)}
    out = mg.dare(x, 0.3, generator=g)["w"]
    dropped = float((out == 0).float().mean())
    assert abs(dropped - 0.3) < 0.01
    kept = out[out != 0]
    torch.testing.assert_close(kept, torch.full_like(kept, 1 / 0.7))


def test_dare_expectation_preserved() -> None:
    g = torch.Generator().manual_seed(1)
    x = {"w": torch.linspace(-2.0, 2.0, 20) + 0.05}
    draws = torch.stack([mg.dare(x, 0.7, generator=g)["w"] for _ in range(2000)])
    mean = draws.mean(0)
    # std of the estimate: |x| * sqrt(p / (1 - p) / N) ~= 0.034 |x|
    assert torch.all((mean - x["w"]).abs() <= 0.2 * x["w"].abs() + 1e-6)


def test_dare_determinism_and_identity() -> None:
    x = {"a": torch.randn(50, generator=torch.Generator().manual_seed(2)), "b": torch.randn(3, 4)}
    before = clone(x)
    o1 = mg.dare(x, 0.5, generator=torch.Generator().manual_seed(7))
    o2 = mg.dare(x, 0.5, generator=torch.Generator().manual_seed(7))
    o3 = mg.dare(x, 0.5, generator=torch.Generator().manual_seed(8))
    assert_vec_equal(o1, o2)
    assert not torch.equal(o1["a"], o3["a"])
    assert_vec_equal(mg.dare(x, 0.0), x)
    assert_vec_equal(x, before)
    merged = mg.dare_merge([x, x], 0.0, torch.Generator().manual_seed(0))
    assert_vec_equal(merged, mg.scale(x, 2.0))


@pytest.mark.parametrize("p", [1.0, -0.1, 1.5, float("nan")])
def test_dare_rejects_bad_drop_p(p: float) -> None:
    with pytest.raises(TalosError, match="drop_p must be in \\[0, 1\\)"):
        mg.dare({"w": torch.ones(3)}, p)
    with pytest.raises(TalosError, match="drop_p"):
        mg.dare_merge([{"w": torch.ones(3)}], p)


# ------------------------------------------------------------------------------------------ Breadcrumbs


def test_breadcrumbs_keeps_exact_band() -> None:
    mags = torch.randperm(20, generator=torch.Generator().manual_seed(3)).float() + 1  # 1..20 shuffled
    signs = torch.where(torch.arange(20) % 3 == 0, -1.0, 1.0)
    v = {"w": (mags * signs).reshape(4, 5), "b": T(1, 2, 3, 4)}
    out = mg.breadcrumbs(v, 0.25, 0.9)
    # per tensor: n=20 -> drop the 5 smallest and the 2 largest, keep magnitudes 6..18
    kept = out["w"].abs()[out["w"] != 0]
    assert sorted(kept.tolist()) == [float(i) for i in range(6, 19)]
    torch.testing.assert_close(out["w"], torch.where((v["w"].abs() >= 6) & (v["w"].abs() <= 18), v["w"], 0.0))
    # n=4 -> round(1)=1 smallest dropped, round(3.6)=4 -> no outlier dropped
    assert out["b"].tolist() == [0.0, 2.0, 3.0, 4.0]


def test_breadcrumbs_row_scope_and_top_k_equivalence() -> None:
    x = torch.tensor([[5.0, -1.0, 3.0, 2.0, 4.0], [0.1, 0.5, -0.3, 0.4, 0.2]])
    out = mg.breadcrumbs({"w": x}, 0.4, 0.8, scope="row")["w"]
    # each row: drop 2 smallest and the largest
    torch.testing.assert_close(out, torch.tensor([[0.0, 0.0, 3.0, 0.0, 4.0], [0.0, 0.0, -0.3, 0.4, 0.0]]))
    # band [1 - d, 1) per tensor == per-tensor top-k, ties included
    y = torch.randint(-3, 4, (6, 7), generator=torch.Generator().manual_seed(4)).float()
    band = mg.band_mask_tensor(y, 0.4, 1.0)
    assert torch.equal(band, mg.topk_mask_tensor(y, 0.6))
    # the per-tensor (selection-based) and per-row (sort-based) paths agree on a single row, ties included
    flat = y.flatten()
    for low, high in ((0.1, 0.9), (0.3, 0.35), (0.0, 0.5), (0.5, 1.0)):
        tensor_band = mg.band_mask_tensor(flat, low, high)
        assert torch.equal(tensor_band, mg.band_mask_tensor(flat, low, high, scope="row"))
        assert int(tensor_band.sum()) == math.floor(high * 42 + 0.5) - math.floor(low * 42 + 0.5)


def test_breadcrumbs_merge_and_validation() -> None:
    vs = [{"w": T(1, 2, 3, 4)}, {"w": T(4, 3, 2, 1)}]
    # n=4: drop the smallest and the largest of each vector
    assert_vec_equal(mg.breadcrumbs_merge(vs, 0.25, 0.75), {"w": T(0, 5, 5, 0)})
    with pytest.raises(TalosError, match="low_quantile must be below high_quantile"):
        mg.breadcrumbs(vs[0], 0.9, 0.8)
    with pytest.raises(TalosError, match="high_quantile"):
        mg.breadcrumbs(vs[0], 0.1, 1.2)


# ------------------------------------------------------------------------------------------ TALL / Consensus


def test_tall_mask_uses_abs() -> None:
    # τ_MTL − τ_1 = -5: |0.1| > 0.2·5 is False; without abs() 0.1 > 0.2·(-5) would be True
    vs = [{"w": T(0.1)}, {"w": T(-5.0)}]
    masks = mg.tall_masks(vs, 0.2)
    assert masks[0]["w"].tolist() == [False]
    assert masks[1]["w"].tolist() == [True]  # 5 > 0.2·0.1


def test_tall_masks_are_per_task() -> None:
    vs = [{"w": T(3, 0.1, 1)}, {"w": T(0.1, 3, 1)}, {"w": T(0, 0, 1)}]
    masks = mg.tall_masks(vs, 0.5)
    # τ_MTL = [3.1, 3.1, 3]
    assert masks[0]["w"].tolist() == [True, False, False]  # 1 > 0.5·2 is False
    assert masks[1]["w"].tolist() == [False, True, False]
    assert masks[2]["w"].tolist() == [False, False, False]
    mtl = mg.tall_mask_vectors(vs, 0.5)
    assert [v["w"].tolist() for v in mtl] == [
        pytest.approx([3.1, 0, 0]),
        pytest.approx([0, 3.1, 0]),
        [0.0, 0.0, 0.0],
    ]
    own = mg.tall_mask_vectors(vs, 0.5, source="task")
    assert [v["w"].tolist() for v in own] == [[3.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 0.0]]


def test_consensus_k() -> None:
    masks = [
        {"w": torch.tensor([True, True, True, False])},
        {"w": torch.tensor([True, True, False, False])},
        {"w": torch.tensor([True, False, False, False])},
    ]
    assert mg.consensus_mask(masks, k=0)["w"].tolist() == [True, True, True, True]
    assert mg.consensus_mask(masks, k=1)["w"].tolist() == [True, True, True, False]
    assert mg.consensus_mask(masks)["w"].tolist() == [True, True, False, False]
    assert mg.consensus_mask(masks, k=3)["w"].tolist() == [True, False, False, False]
    with pytest.raises(TalosError, match=r"k must be an integer in \[0, 3\].*got 4"):
        mg.consensus_mask(masks, k=4)
    with pytest.raises(TalosError, match="got -1"):
        mg.consensus_mask(masks, k=-1)
    with pytest.raises(TalosError, match=r"got 1.5"):
        mg.consensus_mask(masks, k=1.5)  # type: ignore[arg-type]


def test_consensus_merge_matches_definition() -> None:
    g = torch.Generator().manual_seed(5)
    vs = [{"a": torch.randn(4, 3, generator=g), "b": torch.randn(5, generator=g)} for _ in range(4)]
    for k in (0, 1, 2, 4):
        out = mg.consensus_merge(vs, k, lam=0.4)
        cons = mg.consensus_mask(mg.tall_masks(vs, 0.4), k)
        expected = mg.apply_mask(mg.add(vs), cons)
        assert_vec_equal(out, expected)
    assert_vec_equal(mg.consensus_merge(vs, 0, lam=0.4), mg.add(vs))


# ------------------------------------------------------------------------------------------ validation


def test_vector_validation_messages() -> None:
    v = {"a": T(1, 2), "b": T(3)}
    with pytest.raises(TalosError, match="empty list"):
        mg.add([])
    with pytest.raises(TalosError, match=r"wrap a single vector as \[vector\]"):
        mg.ties_merge(v, 0.5)  # type: ignore[arg-type]
    with pytest.raises(TalosError, match=r"task vector 1 .*missing \['b'\]"):
        mg.add([v, {"a": T(1, 2)}])
    with pytest.raises(TalosError, match=r"'a' has shape \(3,\) in task vector 1 but \(2,\)"):
        mg.add([v, {"a": T(1, 2, 3), "b": T(3)}])
    with pytest.raises(TalosError, match="floating-point"):
        mg.trim({"a": torch.tensor([1, 2])}, 0.5)
    with pytest.raises(TalosError, match="empty"):
        mg.trim({}, 0.5)


@pytest.mark.parametrize("density", [0.0, -0.1, 1.5, float("inf")])
def test_density_validation(density: float) -> None:
    with pytest.raises(TalosError, match=r"density must be in \(0, 1\]"):
        mg.trim({"a": T(1, 2)}, density)
    with pytest.raises(TalosError, match="density"):
        mg.ties_merge([{"a": T(1, 2)}], density)


def test_lam_and_other_validation() -> None:
    vs = [{"a": T(1, 2)}, {"a": T(2, 1)}]
    with pytest.raises(TalosError, match=r"lam must be in \[0, inf\), got -1"):
        mg.tall_masks(vs, -1.0)
    with pytest.raises(TalosError, match="lam"):
        mg.ties_merge(vs, 0.5, lam=-0.5)
    with pytest.raises(TalosError, match="lam"):
        mg.consensus_merge(vs, 2, lam=float("nan"))
    with pytest.raises(TalosError, match="alpha"):
        mg.scale(vs[0], float("nan"))
    with pytest.raises(TalosError, match="scope"):
        mg.trim(vs[0], 0.5, scope="layer")  # type: ignore[arg-type]
    with pytest.raises(TalosError, match="tie_break"):
        mg.ties_merge(vs, 0.5, tie_break="first")  # type: ignore[arg-type]
    with pytest.raises(TalosError, match="unknown parameter 'z'"):
        mg.stack_param(vs, "z")


# ------------------------------------------------------------------------------------------ registry


def test_registry_grids() -> None:
    # the paper's baselines and the later merges (a new merge adds itself through its declaration)
    assert set(mg.POSTHOC_METHODS) >= {"ties", "dare", "breadcrumbs", "tall_consensus", "tsv", "iso_c", "iso_cts",
                                       "lines"}
    spectral = {"nonmatrix": "mean", "conv1x1": "other"}  # the authors' conventions, recorded with every point
    assert mg.POSTHOC_METHODS["tsv"].grid_points(8) == mg.POSTHOC_METHODS["iso_c"].grid_points(8) == [spectral]
    assert mg.POSTHOC_METHODS["iso_cts"].grid_points(8) == [{"common_fraction": 0.8, **spectral,
                                                             "spectrum": "combined"}]
    assert mg.POSTHOC_METHODS["iso_c"].grid_points(8, {"conv1x1": "matrix"}) == [{**spectral, "conv1x1": "matrix"}]
    assert [p["beta"] for p in mg.POSTHOC_METHODS["lines"].grid_points(8)] == list(mg.LINES_BETA_GRID)
    assert all(p["nonblock"] == "first" for p in mg.POSTHOC_METHODS["lines"].grid_points(8))
    assert {n: s.alpha_stop for n, s in mg.POSTHOC_METHODS.items() if s.alpha_stop != 1.0} == {
        "tsv": 3.0, "iso_c": 3.0, "iso_cts": 3.0}
    assert {n: s.addition_alpha for n, s in mg.POSTHOC_METHODS.items() if s.addition_alpha is not None} == {
        "lines": 1.0}
    with pytest.raises(TalosError, match="alpha_stop"):
        mg.PosthocSpec("tsv", "", merge=mg.tsv_merge, single_task=mg.tsv_merge, grid={}, alpha_stop=0.0)
    with pytest.raises(TalosError, match="addition_alpha"):
        mg.PosthocSpec("tsv", "", merge=mg.tsv_merge, single_task=mg.tsv_merge, grid={}, addition_alpha=-1.0)
    assert mg.SPARSITY_GRID == (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
    assert len(mg.POSTHOC_METHODS["dare"].grid_points(8)) == 11
    bc = mg.POSTHOC_METHODS["breadcrumbs"].grid_points(8)
    assert all(p["sparsity"] < p["outlier_quantile"] for p in bc)
    assert len(bc) < 11 * 9 and {"sparsity": 0.99, "outlier_quantile": 0.999} in bc
    tall = mg.POSTHOC_METHODS["tall_consensus"].grid_points(3)
    assert len(tall) == 5 * 4 and {p["k"] for p in tall} == {0, 1, 2, 3}
    with pytest.raises(TalosError, match="num_tasks"):
        mg.POSTHOC_METHODS["ties"].grid_points(0)
    with pytest.raises(TalosError, match="unknown post-hoc method 'foo'"):
        mg.get_posthoc("foo")


def test_registry_callables_agree_with_functions() -> None:
    g = torch.Generator().manual_seed(6)
    vs = [{"a": torch.randn(6, 5, generator=g), "b": torch.randn(7, generator=g)} for _ in range(3)]
    before = [clone(v) for v in vs]
    for name, spec in mg.POSTHOC_METHODS.items():
        hp = spec.grid_points(len(vs))[len(spec.grid_points(len(vs))) // 2]
        merged = spec.merge(vs, **hp)
        assert list(merged) == ["a", "b"], name
        for t in range(len(vs)):
            single = spec.single_task(vs, t, **hp)
            assert list(single) == ["a", "b"], name
        with pytest.raises(TalosError, match="task index"):
            spec.single_task(vs, 3, **hp)
    ties = mg.POSTHOC_METHODS["ties"]
    assert_vec_equal(ties.merge(vs, sparsity=0.8), mg.ties_merge(vs, 1 - 0.8))
    assert_vec_equal(ties.single_task(vs, 1, sparsity=0.8), mg.trim(vs[1], 1 - 0.8))
    # DARE: the merged vector is exactly the sum of the per-task DARE vectors (same seeds)
    dare = mg.POSTHOC_METHODS["dare"]
    parts = [dare.single_task(vs, t, sparsity=0.5, seed=3) for t in range(3)]
    assert_vec_equal(dare.merge(vs, sparsity=0.5, seed=3), mg.add(parts))
    bc = mg.POSTHOC_METHODS["breadcrumbs"]
    assert_vec_equal(bc.merge(vs, sparsity=0.5, outlier_quantile=0.9), mg.breadcrumbs_merge(vs, 0.5, 0.9))
    tall = mg.POSTHOC_METHODS["tall_consensus"]
    assert_vec_equal(tall.merge(vs, lam=0.3, k=2), mg.consensus_merge(vs, 2, lam=0.3))
    assert_vec_equal(tall.single_task(vs, 2, lam=0.3, k=2), mg.tall_mask_vectors(vs, 0.3)[2])
    for name, merge in (("tsv", mg.tsv_merge), ("iso_c", mg.iso_c_merge), ("iso_cts", mg.iso_cts_merge)):
        spec = mg.POSTHOC_METHODS[name]
        assert_vec_equal(spec.merge(vs), merge(vs))
        assert_vec_equal(spec.single_task(vs, 1), merge([vs[1]]))  # the merge of the task's vector alone
    assert_vec_equal(mg.POSTHOC_METHODS["tsv"].single_task(vs, 0), vs[0], atol=1e-5, rtol=1e-5)  # T = 1: itself
    for name in ("ties", "tsv", "iso_c", "iso_cts"):  # no single-task runner declared: the merge of one vector
        assert METHODS[name].single_task is None, name
    lines = mg.POSTHOC_METHODS["lines"]
    assert_vec_equal(lines.merge(vs, beta=0.4), mg.lines_merge(vs, 0.4))
    assert_vec_equal(lines.single_task(vs, 2, beta=0.4), vs[2])  # LiNeS leaves a single task's vector as is
    with pytest.raises(TalosError, match="sparsity must be in"):
        ties.merge(vs, sparsity=1.0)
    for v, b in zip(vs, before):
        assert_vec_equal(v, b)
