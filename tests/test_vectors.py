"""Task vectors: sparse storage round trips, arithmetic, in-place application with bitwise restore."""

from __future__ import annotations

import pytest
import torch

from talos_core.errors import TalosError
from talos_core.vectors import TaskVector, apply_vectors, restrict, sum_vectors


def _vec(seed: int, density: float = 0.2) -> TaskVector:
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(6, 5, generator=g) * (torch.rand(6, 5, generator=g) < density)
    b = torch.randn(6, generator=g)
    return TaskVector.from_dense({"weight": w, "bias": b})


def test_sparse_and_dense_storage(tmp_path):
    tv = _vec(0)
    assert tv.indices["weight"] is not None and tv.indices["bias"] is None
    path = tmp_path / "tv.safetensors"
    tv.save(path)
    back = TaskVector.load(path)
    for n in tv.values:
        assert torch.equal(back.dense(n), tv.dense(n))
    assert [p.name for p in tmp_path.iterdir()] == ["tv.safetensors"]  # no temp files left behind


def test_arithmetic():
    a, b = _vec(1), _vec(2)
    s = a + b
    d = a - b
    for n in a.values:
        assert torch.allclose(s.dense(n), a.dense(n) + b.dense(n))
        assert torch.allclose(d.dense(n), a.dense(n) - b.dense(n))
        assert torch.allclose((2.0 * a).dense(n), 2 * a.dense(n))
        assert torch.allclose((-a).dense(n), -a.dense(n))
    mix = sum_vectors([a, b], [0.5, -2.0])
    assert torch.allclose(mix.dense("weight"), 0.5 * a.dense("weight") - 2 * b.dense("weight"))
    kept = restrict(a, {"weight": torch.zeros(6, 5, dtype=torch.bool)})
    assert kept.nnz() == 0 and set(kept.values) == {"weight"}


def test_apply_vectors_is_bitwise_reversible():
    lin = torch.nn.Linear(5, 6)
    before = {k: v.clone() for k, v in lin.state_dict().items()}
    a, b = _vec(3), _vec(4, density=0.9)
    with apply_vectors(lin, [(a, 0.37), (b, -1.3), (a, 0.1)]):
        expect = before["weight"] + 0.37 * a.dense("weight") - 1.3 * b.dense("weight") + 0.1 * a.dense("weight")
        assert torch.allclose(lin.weight, expect, atol=1e-6)
    for k, v in lin.state_dict().items():
        assert torch.equal(v, before[k])
    with pytest.raises(RuntimeError), apply_vectors(lin, [(a, 1.0)]):
        raise RuntimeError("boom")
    for k, v in lin.state_dict().items():
        assert torch.equal(v, before[k])


def test_unknown_parameter_and_corrupt_file(tmp_path):
    lin = torch.nn.Linear(5, 6)
    bad = TaskVector.from_dense({"nope": torch.ones(2)})
    with pytest.raises(TalosError, match="nope"), apply_vectors(lin, [(bad, 1.0)]):
        pass
    path = tmp_path / "broken.safetensors"
    path.write_bytes(b"not a safetensors file")
    with pytest.raises(TalosError, match="corrupt"):
        TaskVector.load(path)
    with pytest.raises(TalosError, match="missing"):
        TaskVector.load(tmp_path / "absent.safetensors")


@pytest.mark.parametrize("densities", [(0.05, 0.05), (0.3, 0.4, 0.2), (0.05, 1.0), (0.9, 0.9)])
def test_overlapping_sparse_terms_restore_bitwise(densities):
    """Several terms touching overlapping entries (saved as separate slices or a whole copy)."""
    g = torch.Generator().manual_seed(3)
    lin = torch.nn.Linear(40, 30)
    before = {n: p.detach().clone() for n, p in lin.named_parameters()}
    terms = []
    for i, d in enumerate(densities):
        w = torch.randn(30, 40, generator=g) * (torch.rand(30, 40, generator=g) < d)
        terms.append((TaskVector.from_dense({"weight": w}), 0.7 * (i + 1)))
    expected = before["weight"] + sum(a * tv.dense("weight") for tv, a in terms)
    with apply_vectors(lin, terms):
        assert torch.allclose(lin.weight, expected, atol=1e-6)
    for n, p in lin.named_parameters():
        assert torch.equal(p, before[n])
