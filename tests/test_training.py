"""Sparse fine-tuning invariants, the masked optimizer, schedule and resumable checkpoints."""

from __future__ import annotations

import itertools

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
    # where it was timed: a time per step is compared only with the same machine's (the audit's
    # timing-other-machine); on a CPU the thread count is part of the machine
    from talos_core.hardware import cpu_model
    assert result.timings["hardware"] == cpu_model()
    assert result.timings["torch_threads"] == torch.get_num_threads()


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
    assert all(a >= b for a, b in itertools.pairwise(lrs[1:]))
    a = batch_indices(7, 20, 6, seed=1)
    assert len(a) == 6 and (a == batch_indices(7, 20, 6, seed=1)).all()
    epoch = [batch_indices(s, 12, 4, seed=0) for s in range(3)]
    assert sorted(int(i) for b in epoch for i in b) == list(range(12))


def test_a_run_that_fails_midway_leaves_the_model_at_theta0(tiny_setup):
    """An error or interrupt inside the training loop puts θ0 back bit for bit (the process-wide cached model is
    the next run's θ0: a retried task or the next suite step must not start from a half-trained model)."""
    model, task, data = tiny_setup["tiny-text"]
    _, plan = _plan(model, seed=5)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}

    class Crash(RuntimeError):
        pass

    def crash(step, record):
        if step == 3:
            raise Crash

    cfg = TrainConfig(steps=6, batch_size=8, lr=1e-1, warmup_steps=1)
    with pytest.raises(Crash):
        finetune(model, data.train, task, plan, cfg, progress=False, on_step=crash)
    for n, p in model.named_parameters():
        assert torch.equal(p.detach(), before[n]), n
        assert not p.requires_grad, n


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
    # the finished state stays (the store removes it when it commits the run): a process stopped after training,
    # while the run is evaluated and written, computes the same vector again without training
    import json

    meta = json.loads((tmp_path / "checkpoint.json").read_text())
    assert meta["finished"] is True and meta["step"] == 6 and len(meta["fb_times"]) == 6
    again = finetune(fresh, data.train, task, plan, cfg, progress=False, checkpoint_dir=tmp_path,
                     on_step=lambda step, record: pytest.fail("a finished run trained again"))
    assert [h["step"] for h in again.history] == [1, 2, 3, 4, 5, 6]
    assert again.timings["train_s"] == pytest.approx(resumed.timings["train_s"])  # the measured times come along
    for n in full.vector.values:
        assert torch.equal(resumed.vector.values[n], again.vector.values[n]), n


@pytest.mark.parametrize("kw", [{"steps": 0}, {"batch_size": -1}, {"lr": 0.0}, {"precision": "fp8"},
                                {"warmup_steps": -1}])
def test_train_config_validation(kw):
    with pytest.raises(TalosError):
        TrainConfig(**kw)


# --------------------------------------------------------------------------------------------
# learning curves (TrainConfig.eval_every)
# --------------------------------------------------------------------------------------------
def _method_output(method: str, eval_every: int, **kw):
    from talos_core.inference.runtime import prepared_model, resolve_device
    from talos_core.pipeline import CalibrationSettings, FinetuneRequest, load_request_data
    from talos_core.runners import get_method
    from talos_core.runners.base import MethodContext
    from talos_core.tasks import get_task

    req = FinetuneRequest(model="tiny-text", task="drug-reviews", method=method, steps=3, batch_size=8, max_train=32,
                          max_val=16, max_test=16, calibration=CalibrationSettings(calib_samples=8), lr=1e-3,
                          eval_every=eval_every, device="cpu", **kw)
    task = get_task(req.task)
    model = prepared_model(req.model, task, resolve_device("cpu"))
    m = get_method(method)
    ctx = MethodContext(model, task, load_request_data(req), req.train_config(), sparsity=req.sparsity, seed=0,
                        calib_config=req.calib_config() if m.calibrates else None, progress=False)
    return m.run(ctx), model, task, ctx.data, m


@pytest.mark.parametrize("method", ["talos", "nonlinear", "linearized", "llora"])
def test_learning_curve_leaves_the_task_vector_unchanged(method):
    plain, model, task, data, m = _method_output(method, 0)
    curved, *_ = _method_output(method, 2)
    assert plain.curve == [] and [c["step"] for c in curved.curve] == [2, 3]  # every 2 steps and the last
    a, b = plain.vector.to_dense(), curved.vector.to_dense()
    assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)
    assert all(0.0 <= c["val_acc"] <= 1.0 for c in curved.curve)
    assert [h["loss"] for h in plain.history] == [h["loss"] for h in curved.history]
    # the last point is the trained model on the validation split, evaluated as the method's vectors are
    # (linearized FT and L-LoRA: the linearized model)
    from talos_core.inference.forward import accuracy

    final = accuracy(model, task, data.val, [(curved.vector, 1.0)], mode=m.eval_mode, batch_size=32)
    assert abs(curved.curve[-1]["val_acc"] - final) <= 1.0 / len(data.val) + 1e-9


def test_validation_accuracy_restores_training_state(tiny_setup):
    from talos_core.training import validation_accuracy

    model, task, data = tiny_setup["tiny-text"]
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    model.train()
    try:
        with torch.enable_grad():
            acc = validation_accuracy(model, data.val, task)
            assert torch.is_grad_enabled() and model.training
    finally:
        model.eval()
    assert 0.0 <= acc <= 1.0
    assert all(torch.equal(p.detach(), before[n]) and p.grad is None for n, p in model.named_parameters())


def test_resumed_run_continues_its_learning_curve(tiny_setup, tmp_path):
    model, task, data = tiny_setup["tiny-text"]
    _, plan = _plan(model, seed=5)
    cfg = TrainConfig(steps=4, batch_size=8, lr=1e-2, warmup_steps=1, checkpoint_every=2, eval_every=2)
    full = finetune(model, data.train, task, plan, cfg, progress=False, val=data.val)

    class Crash(RuntimeError):
        pass

    def crash(step, record):
        if step == 3:
            raise Crash

    with pytest.raises(Crash):
        finetune(model, data.train, task, plan, cfg, progress=False, checkpoint_dir=tmp_path, on_step=crash,
                 val=data.val)
    from talos_core.models import load_model

    fresh = load_model("tiny-text")
    fresh.set_head(model.head(), task.name)
    resumed = finetune(fresh, data.train, task, plan, cfg, progress=False, checkpoint_dir=tmp_path, val=data.val)
    assert [c["step"] for c in resumed.curve] == [2, 4]
    assert [c["val_acc"] for c in resumed.curve] == pytest.approx([c["val_acc"] for c in full.curve], abs=0.07)
    for f in tmp_path.iterdir():  # the finished state goes, as when the store commits the run
        f.unlink()
    # a checkpoint without the curve's points cannot be completed: the run starts over (same vector)
    with pytest.raises(Crash):
        finetune(model, data.train, task, plan, TrainConfig(**{**cfg.to_dict(), "eval_every": 0}), progress=False,
                 checkpoint_dir=tmp_path, on_step=crash, val=data.val)
    fresh = load_model("tiny-text")
    fresh.set_head(model.head(), task.name)
    restarted = finetune(fresh, data.train, task, plan, cfg, progress=False, checkpoint_dir=tmp_path, val=data.val)
    assert [h["step"] for h in restarted.history] == [1, 2, 3, 4] and len(restarted.curve) == 2


@pytest.mark.parametrize("value", [-1, 1.5, True])
def test_eval_every_validation(value):
    from talos_core.pipeline import FinetuneRequest

    with pytest.raises(TalosError, match="eval_every"):
        TrainConfig(eval_every=value)
    with pytest.raises(TalosError, match="eval_every must be a non-negative integer"):
        FinetuneRequest(model="tiny-text", task="drug-reviews", eval_every=value).validate()


def test_length_grouped_batches_cover_each_epoch_once_and_pad_less():
    """Length grouping draws every example once per epoch (as random batching does) with fewer padded tokens; it is
    part of a run's identity only when used; a model with fixed-size inputs refuses it in one sentence."""
    import numpy as np

    from bench.bench_batching import padded_tokens
    from talos_core.training import grouped_batch_indices

    lengths = np.random.default_rng(0).integers(4, 128, size=640)
    for epoch in range(2):
        seen = np.concatenate([grouped_batch_indices(s, lengths, 32, 7) for s in range(epoch * 20, epoch * 20 + 20)])
        assert sorted(seen.tolist()) == list(range(640))
    rand = [batch_indices(s, 640, 32, 7) for s in range(40)]
    grouped = [grouped_batch_indices(s, lengths, 32, 7) for s in range(40)]
    assert padded_tokens(lengths, grouped) < 0.7 * padded_tokens(lengths, rand)
    assert "batching" not in TrainConfig().identity_dict()
    assert TrainConfig(batching="length").identity_dict()["batching"] == "length"
    with pytest.raises(TalosError, match="batching must be one of random, length"):
        TrainConfig(batching="sorted")


def test_grouped_batches_keep_one_epoch_and_match_the_stateless_function():
    """The run's batch source computes an epoch's order once and returns exactly what a resumed run recomputes."""
    import numpy as np

    from talos_core.training import GroupedBatches, grouped_batch_indices

    lengths = np.random.default_rng(3).integers(1, 100, size=101)
    g = GroupedBatches(lengths, 16, 5)
    for step in (0, 1, 7, 6, 12, 13, 30, 0):  # across epoch boundaries, forwards and back
        assert g.indices(step).tolist() == grouped_batch_indices(step, lengths, 16, 5).tolist()
    import talos_core.batching as batching

    calls, original = [], batching._grouped_epoch
    try:
        batching._grouped_epoch = lambda *a: calls.append(a[0]) or original(*a)
        g = GroupedBatches(lengths, 16, 5)
        for step in range(6):  # 96 examples: all in epoch 0
            g.indices(step)
    finally:
        batching._grouped_epoch = original
    assert calls == [0]


def test_length_grouped_fine_tuning_runs_and_refuses_images(tiny_setup):

    model, task, data = tiny_setup["tiny-text"]
    plan = {n: None for n, _ in model.named_parameters()}
    cfg = TrainConfig(steps=2, batch_size=8, lr=1e-3, warmup_steps=0, batching="length")
    assert finetune(model, data.train, task, plan, cfg).vector.nnz() > 0
    model, task, data = tiny_setup["tiny-clip"]
    with pytest.raises(TalosError, match="length-grouped batching needs inputs of varying length"):
        finetune(model, data.train, task, {n: None for n, _ in model.named_parameters()}, cfg)


def test_evaluation_visits_texts_by_token_count_and_predicts_as_in_stored_order(tiny_setup):
    """Evaluation orders texts by the model's token counts (what a batch pads to), so a batch of the order pads no
    more than one of character order; logits are those of the stored order (padding is masked)."""
    import numpy as np

    from bench.bench_batching import padded_tokens
    from talos_core.inference import forward
    from talos_core.inference.forward import eval_order, predict_logits

    model, task, data = tiny_setup["tiny-text"]
    split = data.test
    tokens = model.input_lengths(split.inputs, task)
    order = eval_order(split, model, task)
    assert np.all(np.diff(tokens[order]) >= 0)
    by_chars = eval_order(split)
    cut = [order[i:i + 8] for i in range(0, len(order), 8)]
    cut_chars = [by_chars[i:i + 8] for i in range(0, len(by_chars), 8)]
    assert padded_tokens(tokens, cut) <= padded_tokens(tokens, cut_chars)
    sorted_logits = predict_logits(model, task, split, batch_size=8)
    original = forward.eval_order
    forward.eval_order = lambda s, m=None, t=None: np.arange(len(s))
    try:
        stored = predict_logits(model, task, split, batch_size=8)
    finally:
        forward.eval_order = original
    assert torch.allclose(sorted_logits, stored, atol=1e-5)
    assert torch.equal(sorted_logits.argmax(-1), stored.argmax(-1))
