"""DELLA-Merging (talos_core/methods/della.py) against an independent loop-based numpy formulation, on tiny tensors:
MagPrune's keep probabilities from magnitude ranks within each row, the drop and the 1/k rescale, then TIES' sign
election and disjoint mean. The uniform draws are the one thing both share (the same seeded generator)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from talos_core.errors import TalosError
from talos_core.methods import della
from talos_core.methods.merging import POSTHOC_METHODS, get_posthoc
from talos_core.schema import METHODS


def _magprune_reference(x: np.ndarray, draws: np.ndarray, sparsity: float, epsilon: float) -> np.ndarray:
    rows = x.reshape(x.shape[0] if x.ndim > 1 else 1, -1)
    u = draws.reshape(rows.shape)
    out = np.zeros_like(rows, dtype=np.float64)
    density = 1.0 - sparsity
    for i in range(rows.shape[0]):
        n = rows.shape[1]
        for j in range(n):
            # rank: how many entries of the row are smaller in magnitude, or equal and earlier
            rank = sum(1 for m in range(n)
                       if abs(rows[i, m]) < abs(rows[i, j]) or (abs(rows[i, m]) == abs(rows[i, j]) and m < j))
            keep = density - epsilon + 2 * epsilon * (rank / (n - 1) if n > 1 else 0.5)
            if u[i, j] < keep:
                out[i, j] = rows[i, j] / keep
    return out.reshape(x.shape)


def _merge_reference(vectors: list[dict[str, np.ndarray]], sparsity: float, epsilon: float, seed: int) -> dict:
    names = list(vectors[0])
    pruned = []
    for t, vec in enumerate(vectors):
        # the task's draws: one [rows, columns] block per parameter, in order
        g = torch.Generator().manual_seed((seed * 10_007 + t) % (2**63))
        out = {}
        for name in names:
            x = vec[name]
            shape = (x.shape[0], int(np.prod(x.shape[1:]))) if x.ndim > 1 else (1, x.size)
            u = torch.rand(shape, generator=g).numpy().astype(np.float64)
            out[name] = _magprune_reference(x, u, sparsity, epsilon)
        pruned.append(out)
    merged = {}
    for name in names:
        stacked = np.stack([p[name] for p in pruned])
        flat = stacked.reshape(len(vectors), -1)
        res = np.zeros(flat.shape[1])
        for j in range(flat.shape[1]):
            total = flat[:, j].sum()
            sign = 0.0 if total == 0 else np.sign(total)
            agree = [flat[t, j] for t in range(len(vectors)) if flat[t, j] != 0 and np.sign(flat[t, j]) == sign]
            res[j] = sum(agree) / len(agree) if agree else 0.0
        merged[name] = res.reshape(stacked.shape[1:])
    return merged


def _vectors(seed: int = 0) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [{"w": torch.randn(3, 5, generator=g), "b": torch.randn(4, generator=g),
             "k": torch.randn(2, 2, 1, 1, generator=g)} for _ in range(3)]


def test_della_is_registered_as_a_posthoc_merge_of_nonlinear_vectors() -> None:
    info = METHODS["della"]
    assert (info.kind, info.label, info.base_method, info.sparse) == ("posthoc", "DELLA", "nonlinear", False)
    spec = get_posthoc("della")
    assert spec.defaults == {"sparsity": 0.9, "epsilon": 0.05, "seed": 0}
    points = spec.grid_points(2)
    assert {"sparsity": 0.99, "epsilon": 0.01, "seed": 0} not in points  # seed is not searched
    assert {"sparsity": 0.99, "epsilon": 0.01} in points and {"sparsity": 0.99, "epsilon": 0.05} not in points
    assert "della" in POSTHOC_METHODS


def test_keep_probabilities_are_linear_in_the_magnitude_rank() -> None:
    rows = torch.tensor([[0.5, -3.0, 1.0, 0.0, 1.0]])
    keep = della.keep_probabilities(rows, 0.4, 0.2)
    # ranks by |x| (equal magnitudes by position): 0.0→0, 0.5→1, 1.0 (first)→2, 1.0 (second)→3, -3.0→4
    np.testing.assert_allclose(keep.numpy(), [[0.3, 0.6, 0.4, 0.2, 0.5]], rtol=1e-6)
    assert float(keep.mean()) == pytest.approx(0.4)


@pytest.mark.parametrize("sparsity,epsilon", [(0.5, 0.2), (0.9, 0.05), (0.3, 0.0)])
def test_merge_matches_the_loop_formulation(sparsity: float, epsilon: float) -> None:
    vectors = _vectors()
    got = della.merge(vectors, sparsity=sparsity, epsilon=epsilon, seed=3)
    want = _merge_reference([{k: v.double().numpy() for k, v in vec.items()} for vec in vectors],
                            sparsity, epsilon, 3)
    for name in want:
        np.testing.assert_allclose(got[name].double().numpy(), want[name], rtol=1e-5, atol=1e-6)


def test_single_task_is_the_tasks_magprune_and_the_merge_of_one_vector() -> None:
    vectors = _vectors(1)
    one = della.single_task(vectors, 2, sparsity=0.5, epsilon=0.1, seed=7)
    g = torch.Generator().manual_seed((7 * 10_007 + 2) % (2**63))
    for name, x in vectors[2].items():
        shape = (x.shape[0], x[0].numel()) if x.dim() > 1 else (1, x.numel())
        u = torch.rand(shape, generator=g).numpy().astype(np.float64)
        np.testing.assert_allclose(one[name].double().numpy(), _magprune_reference(x.double().numpy(), u, 0.5, 0.1),
                                   rtol=1e-5, atol=1e-6)
    assert vectors[2]["w"].ne(0).all()  # inputs untouched


def test_expected_value_is_kept() -> None:
    x = torch.linspace(-1, 1, 11).repeat(4000, 1)
    out = della.magprune(x, 0.6, 0.3, torch.Generator().manual_seed(0))
    np.testing.assert_allclose(out.mean(0).numpy(), x[0].numpy(), atol=0.05)


def test_bad_hyperparameters_are_one_sentence() -> None:
    with pytest.raises(TalosError, match=r"^sparsity must be in \[0, 1\), got 1.0$"):
        della.merge(_vectors(), sparsity=1.0)
    with pytest.raises(TalosError, match=r"^DELLA's epsilon 0.2 must be at most min\(sparsity, 1 − sparsity\) = 0.1 "):
        della.merge(_vectors(), sparsity=0.9, epsilon=0.2)
    with pytest.raises(TalosError, match=r"^epsilon must be in \[0, 0.5\), got -0.1$"):
        della.merge(_vectors(), sparsity=0.5, epsilon=-0.1)
