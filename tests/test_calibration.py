"""TaLoS calibration: schedule, bottom-k, no re-admission, soft mask, determinism, per-sample scores."""

from __future__ import annotations

import math

import pytest
import torch

from talos_core import masks as M
from talos_core.errors import TalosError
from talos_core.fisher import fisher_scores, fisher_scores_loop
from talos_core.masks import CalibrationConfig, calibrate_talos


def test_round_schedule_matches_paper():
    assert [round(d, 3) for d in M.round_densities(0.9, 4)] == [0.562, 0.316, 0.178, 0.1]
    assert M.round_densities(0.0, 3) == [1.0, 1.0, 1.0]


def test_keep_lowest_exact_count_ties_and_eligibility():
    scores = {"a": torch.tensor([1.0, 1.0, 1.0, 1.0]), "b": torch.tensor([[0.0, 5.0], [1.0, 1.0]])}
    elig = {"a": torch.tensor([True, True, False, True]), "b": torch.tensor([[False, True], [True, True]])}
    keep = M.keep_lowest(scores, elig, 3)
    kept = torch.cat([keep["a"].view(-1), keep["b"].view(-1)])
    assert int(kept.sum()) == 3
    assert not keep["b"][0, 0]  # lowest score but not eligible: never kept
    assert not keep["a"][2]
    assert not keep["b"][0, 1]  # the highest eligible score is dropped
    # ties broken by position: first eligible entries of "a" win over later ones in "b"
    assert keep["a"].tolist() == [True, True, False, True]
    with pytest.raises(ValueError):
        M.keep_lowest(scores, elig, 10)


@pytest.mark.parametrize("name", ["tiny-clip", "tiny-text", "tiny-t5"])
def test_vmap_scores_equal_per_sample_loop(tiny_setup, name):
    model, task, data = tiny_setup[name]
    names = model.maskable_names()
    split = data.val.take(range(6))
    fast = fisher_scores(model, split, task, names, generator=torch.Generator().manual_seed(3), batch_size=4,
                         chunk_size=3)
    slow = fisher_scores_loop(model, split, task, names, generator=torch.Generator().manual_seed(3), batch_size=4)
    for n in names:
        scale = slow[n].abs().max().item() + 1e-12
        assert torch.allclose(fast[n], slow[n], rtol=1e-4, atol=1e-5 * scale), n


def test_logit_target_differs_from_logprob(tiny_setup):
    model, task, data = tiny_setup["tiny-clip"]
    names = model.maskable_names()[:3]
    a = fisher_scores(model, data.val.take(range(4)), task, names, generator=torch.Generator().manual_seed(0))
    b = fisher_scores(model, data.val.take(range(4)), task, names, generator=torch.Generator().manual_seed(0),
                      target="logit")
    assert any(not torch.allclose(a[n], b[n]) for n in names)


def _calibrate(setup, **kw):
    model, task, data = setup
    cfg = CalibrationConfig(**{"sparsity": 0.9, "rounds": 4, "samples": 16, "batch_size": 8, **kw})
    return calibrate_talos(model, M.calibration_split(data.val, cfg.samples, cfg.seed), task, cfg)


@pytest.mark.parametrize("name", ["tiny-clip", "tiny-text", "tiny-t5"])
def test_final_density_and_model_untouched(tiny_setup, name):
    model = tiny_setup[name][0]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    mask = _calibrate(tiny_setup[name])
    total = sum(m.numel() for m in mask.values())
    assert int(sum(m.sum() for m in mask.values())) == math.floor(0.1 * total)
    assert abs(M.mask_density(mask) - 0.1) < 0.005
    assert set(mask) == set(model.maskable_names())
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_rounds_never_readmit_and_soft_mask(tiny_setup, monkeypatch):
    model, task, data = tiny_setup["tiny-clip"]
    seen_keep, seen_override = [], []
    real_keep, real_scores = M.keep_lowest, M.fisher_scores

    def spy_keep(scores, eligible, k):
        out = real_keep(scores, eligible, k)
        seen_keep.append(({n: e.clone() for n, e in eligible.items()}, out, k))
        return out

    def spy_scores(*args, **kwargs):
        seen_override.append(kwargs.get("param_override"))
        return real_scores(*args, **kwargs)

    monkeypatch.setattr(M, "keep_lowest", spy_keep)
    monkeypatch.setattr(M, "fisher_scores", spy_scores)
    _calibrate(tiny_setup["tiny-clip"], rounds=3, soft_mask_value=0.01)
    assert len(seen_keep) == 3
    ks = [k for _, _, k in seen_keep]
    assert ks == sorted(ks, reverse=True)
    for elig, out, _ in seen_keep:
        for n in out:
            assert not (out[n] & ~elig[n]).any(), "an excluded entry came back"
    assert seen_override[0] is None
    params = dict(model.named_parameters())
    for r in (1, 2):
        elig = seen_keep[r][0]
        for n, value in seen_override[r].items():
            expect = torch.where(elig[n], params[n].detach(), params[n].detach() * 0.01)
            assert torch.equal(value, expect)


def test_determinism_and_seed(tiny_setup):
    a = _calibrate(tiny_setup["tiny-text"], seed=1)
    b = _calibrate(tiny_setup["tiny-text"], seed=1)
    c = _calibrate(tiny_setup["tiny-text"], seed=2)
    assert all(torch.equal(a[n], b[n]) for n in a)
    assert any(not torch.equal(a[n], c[n]) for n in a)


def test_top_selection_is_most_sensitive(tiny_setup):
    model, task, data = tiny_setup["tiny-clip"]
    bottom = _calibrate(tiny_setup["tiny-clip"], rounds=1, sparsity=0.99)
    top = _calibrate(tiny_setup["tiny-clip"], rounds=1, sparsity=0.99, select="top")
    overlap = sum(int((bottom[n] & top[n]).sum()) for n in bottom)
    assert overlap == 0


@pytest.mark.parametrize("kw", [{"sparsity": 1.0}, {"sparsity": -0.1}, {"rounds": 0}, {"samples": 0},
                                {"target": "x"}, {"soft_mask_value": 2.0}])
def test_config_validation(kw):
    with pytest.raises(TalosError):
        CalibrationConfig(**kw)


def test_random_and_magnitude_masks(tiny_setup):
    model = tiny_setup["tiny-clip"][0]
    total = sum(p.numel() for n, p in model.named_parameters() if n in model.maskable_names())
    for mask in (M.random_mask(model, 0.25, 0), M.magnitude_mask(model, 0.25)):
        assert int(sum(m.sum() for m in mask.values())) == math.floor(0.25 * total)
    mag = M.magnitude_mask(model, 0.25)
    params = dict(model.named_parameters())
    kept = torch.cat([params[n].detach().abs()[mag[n]] for n in mag])
    dropped = torch.cat([params[n].detach().abs()[~mag[n]] for n in mag])
    assert kept.max() <= dropped.min()
