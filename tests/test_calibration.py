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
    # ties drawn by a seeded key of (name, index): the same whatever order the tensors are listed in
    swapped = M.keep_lowest({"b": scores["b"], "a": scores["a"]}, {"b": elig["b"], "a": elig["a"]}, 3)
    assert all(torch.equal(keep[n], swapped[n]) for n in keep)
    with pytest.raises(ValueError):
        M.keep_lowest(scores, elig, 10)


def test_select_lowest_keeps_every_tie_at_the_threshold():
    """Algorithm 1's rule (``c_j ← 0`` only where ``s_j`` exceeds the threshold): all ties stay; counted."""
    scores = {"a": torch.tensor([0.0, 0.0, 2.0, 0.0]), "b": torch.tensor([0.0, 3.0, 1.0])}
    elig = {"a": torch.ones(4, dtype=torch.bool), "b": torch.ones(3, dtype=torch.bool)}
    sel = M.select_lowest(scores, elig, 2, ties="keep")
    assert sel.kept == 4 and sel.tied == 4 and sel.threshold == 0.0
    assert sel.mask["a"].tolist() == [True, True, False, True] and sel.mask["b"].tolist() == [True, False, False]
    exact = M.select_lowest(scores, elig, 2, ties="random")
    assert exact.kept == 2 and exact.tied == 4


def _dead_unit_cnn():
    """tiny-cnn with its digits head and dead units — 5 of the first block's 8 channels, 40 of the last block's 48
    expansion channels: a very negative BN bias before ReLU6 makes their output exactly 0 on every input, so the
    weights feeding them (and the depthwise filters reading them) have exactly zero Fisher score."""
    from talos_core.models import load_model
    from talos_core.tasks import get_task, load_task

    model, task = load_model("tiny-cnn"), get_task("digits")
    model.set_head(model.build_head(task), task.name)
    with torch.no_grad():
        params = dict(model.named_parameters())
        params["backbone.blocks.0.0.bn1.bias"][:5] = -1e4
        params["backbone.blocks.2.0.bn1.bias"][:40] = -1e4
    return model, task, load_task("digits", max_train=16, max_val=32, max_test=16)


def test_dead_units_never_decide_the_mask_and_order_plays_no_role(monkeypatch):
    """Known answer on a model with dead units: entries with zero sensitivity at θ0 stay out of the mask (default
    ``zero_scores="exclude"``), the target density is met from entries that can learn, and the mask is the same
    when the parameters are listed in reverse order. With ``zero_scores="rank"`` (the official code) the dead
    entries are ranked lowest and all kept (ties at 0 kept), which the diagnostics report."""
    model, task, data = _dead_unit_cnn()
    calib = M.calibration_split(data.val, 16, 0)
    names = model.maskable_names()
    scores0 = fisher_scores(model, calib, task, names, generator=torch.Generator().manual_seed(0), batch_size=8)
    dead = {n: s == 0 for n, s in scores0.items()}
    n_dead = sum(int(d.sum()) for d in dead.values())
    total = sum(s.numel() for s in scores0.values())
    assert n_dead > 0.1 * total  # enough dead entries to fill the last round's bottom 10% on their own

    def calibrate(**kw):
        cfg = CalibrationConfig(sparsity=0.9, rounds=4, samples=16, batch_size=8, **kw)
        log, diag = [], {}
        return calibrate_talos(model, calib, task, cfg, log=log, diagnostics=diag), log, diag

    mask, log, diag = calibrate()
    assert not any(bool((mask[n] & dead[n]).any()) for n in names)
    assert sum(int(m.sum()) for m in mask.values()) == math.floor(0.1 * total)
    assert diag["zero_sensitivity"] == 0.0
    assert log[0]["zero_scores"] == log[0]["excluded_zero"] == n_dead
    assert all({"tied", "threshold", "selected", "zero_scores"} <= set(r) for r in log)

    monkeypatch.setattr(type(model), "maskable_names", lambda self: list(reversed(names)))
    reordered, _, _ = calibrate()
    assert all(torch.equal(mask[n], reordered[n]) for n in names)
    ranked_reordered = calibrate(zero_scores="rank")[0]
    monkeypatch.undo()
    ranked, ranked_log, ranked_diag = calibrate(zero_scores="rank")
    assert all(torch.equal(ranked[n], ranked_reordered[n]) for n in names)
    # the dead entries fill the mask, beyond the target density (all ties at 0 are kept); the diagnostics say so
    assert sum(int(m.sum()) for m in ranked.values()) > math.floor(0.1 * total)
    assert ranked_diag["zero_sensitivity"] > 0.9 and ranked_log[-1]["tied"] == ranked_log[-1]["selected"]


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
    model, _task, _data = tiny_setup["tiny-clip"]
    seen_keep, seen_override = [], []
    real_keep, real_scores = M.select_lowest, M.fisher_scores

    def spy_keep(scores, eligible, k, **kw):
        out = real_keep(scores, eligible, k, **kw)
        seen_keep.append(({n: e.clone() for n, e in eligible.items()}, out.mask, k))
        return out

    def spy_scores(*args, **kwargs):
        seen_override.append(kwargs.get("param_override"))
        return real_scores(*args, **kwargs)

    monkeypatch.setattr(M, "select_lowest", spy_keep)
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
    _model, _task, _data = tiny_setup["tiny-clip"]
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
