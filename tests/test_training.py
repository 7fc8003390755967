"""Sparse fine-tuning invariants, the masked optimizer, schedule and resumable checkpoints."""

from __future__ import annotations

import pytest
import torch

from talos_core.errors import TalosError
from talos_core.masks import random_mask
from talos_core.training import MaskedAdamW, TrainConfig, batch_indices, cosine_lr, finetune, plan_from_mask


def _plan(model, density=0.3, seed=0):
    mask = random_mask(model, density, seed)
    # make one tensor fully trainable and one fully frozen to exercise both paths
    names = list(mask)
    mask[names[0]] = torch.ones_like(mask[names[0]])
    mask[names[1]] = torch.zeros_like(mask[names[1]])
    return mask, plan_from_mask(mask)


@pytest.mark.parametrize("name", ["tiny-clip", "tiny-text", "tiny-t5"])
def test_off_mask_entries_never_change(tiny_setup, name):
    model, task, data = tiny_setup[name]
    mask, plan = _plan(model)
    theta0 = {n: p.detach().clone() for n, p in model.named_parameters()}
    checks = []

    def on_step(step, record):
        params = dict(model.named_parameters())
        for n, p in params.items():
            if n not in plan:
                assert not p.requires_grad, n
                assert torch.equal(p.detach(), theta0[n]), n
            elif plan[n] is not None:
                off = ~plan[n]
                assert torch.equal(p.detach()[off], theta0[n][off]), n
        checks.append(step)

    cfg = TrainConfig(steps=4, batch_size=8, lr=1e-2, weight_decay=0.5, warmup_steps=1)
    result = finetune(model, data.train, task, plan, cfg, progress=False, on_step=on_step)
    assert checks == [1, 2, 3, 4]
    tv = result.vector
    assert set(tv.values) == set(plan)
    for n in tv.values:
        dense = tv.dense(n)
        if plan[n] is not None:
            assert torch.count_nonzero(dense[~plan[n]]) == 0
    assert tv.nnz() > 0
    # the model is back at exactly θ0 and has no trainable parameter left
    for n, p in model.named_parameters():
        assert torch.equal(p.detach(), theta0[n]) and not p.requires_grad
    # optimizer state covers only trainable entries
    assert result.timings["trainable_entries"] == sum(
        int(m.sum()) for n, m in mask.items() if n in plan)


def test_masked_adamw_matches_torch_adamw_when_dense():
    torch.manual_seed(0)
    w1 = torch.nn.Parameter(torch.randn(5, 4))
    w2 = torch.nn.Parameter(w1.detach().clone())
    ours = MaskedAdamW({"w": w1}, {"w": None}, lr=1e-2, weight_decay=0.1)
    ref = torch.optim.AdamW([w2], lr=1e-2, weight_decay=0.1)
    for _ in range(5):
        g = torch.randn(5, 4)
        w1.grad, w2.grad = g.clone(), g.clone()
        ours.step()
        ref.step()
    assert torch.allclose(w1, w2, atol=1e-6)


def test_masked_adamw_sparse_entries_match_dense_update_on_mask():
    torch.manual_seed(0)
    mask = torch.rand(6, 3) < 0.5
    w1 = torch.nn.Parameter(torch.randn(6, 3))
    w2 = torch.nn.Parameter(w1.detach().clone())
    w0 = w1.detach().clone()
    sparse = MaskedAdamW({"w": w1}, {"w": mask}, lr=1e-2, weight_decay=0.1)
    dense = MaskedAdamW({"w": w2}, {"w": None}, lr=1e-2, weight_decay=0.1)
    for _ in range(3):
        g = torch.randn(6, 3)
        w1.grad, w2.grad = g.clone(), g * mask
        sparse.step()
        dense.step()
    assert torch.equal(w1.detach()[~mask], w0[~mask])
    # entries on the mask follow exactly the dense update computed from masked gradients
    assert torch.allclose(w1.detach()[mask], w2.detach()[mask], atol=1e-6)
    assert sparse.exp_avg["w"].numel() == int(mask.sum())


def test_grad_clipping_uses_trainable_entries():
    w = torch.nn.Parameter(torch.zeros(4))
    opt = MaskedAdamW({"w": w}, {"w": torch.tensor([True, True, False, False])}, lr=1.0, weight_decay=0.0)
    w.grad = torch.tensor([3.0, 4.0, 100.0, 100.0])
    assert opt.step(grad_clip=1.0) == pytest.approx(5.0)


def test_cosine_schedule_and_batches():
    cfg = TrainConfig(steps=10, warmup_steps=2, lr=1.0)
    lrs = [cosine_lr(s, cfg) for s in range(10)]
    assert lrs[0] == 0.5 and lrs[1] == 1.0 and lrs[-1] < 0.05
    assert all(a >= b for a, b in zip(lrs[1:], lrs[2:]))
    a = batch_indices(7, 20, 6, seed=1)
    assert len(a) == 6 and (a == batch_indices(7, 20, 6, seed=1)).all()
    epoch = [batch_indices(s, 12, 4, seed=0) for s in range(3)]
    assert sorted(int(i) for b in epoch for i in b) == list(range(12))


def test_resume_from_checkpoint_gives_identical_vector(tiny_setup, tmp_path):
    model, task, data = tiny_setup["tiny-text"]
    _, plan = _plan(model, seed=4)
    cfg = TrainConfig(steps=6, batch_size=8, lr=1e-2, weight_decay=0.1, warmup_steps=1, checkpoint_every=2)
    full = finetune(model, data.train, task, plan, cfg, progress=False)

    class Crash(RuntimeError):
        pass

    def crash(step, record):
        if step == 5:
            raise Crash

    with pytest.raises(Crash):
        finetune(model, data.train, task, plan, cfg, progress=False, checkpoint_dir=tmp_path, on_step=crash)
    # the crashed run left the model mid-training: put θ0 back as a fresh process would have it
    from talos_core.models import load_model

    fresh = load_model("tiny-text")
    fresh.set_head(model.head(), task.name)
    assert (tmp_path / "checkpoint.json").exists()
    resumed = finetune(fresh, data.train, task, plan, cfg, progress=False, checkpoint_dir=tmp_path)
    assert [h["step"] for h in resumed.history] == [1, 2, 3, 4, 5, 6]
    for n in full.vector.values:
        assert torch.allclose(full.vector.values[n], resumed.vector.values[n], atol=1e-7), n
    assert not (tmp_path / "checkpoint.json").exists()


@pytest.mark.parametrize("kw", [{"steps": 0}, {"batch_size": -1}, {"lr": 0.0}, {"precision": "fp8"},
                                {"warmup_steps": -1}])
def test_train_config_validation(kw):
    with pytest.raises(TalosError):
        TrainConfig(**kw)
