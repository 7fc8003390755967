"""CNN family: tiny-cnn through the engine (head, vmap Fisher, CLI fine-tune) and real EfficientNet-Lite0 weights."""

from __future__ import annotations

import pytest
import torch

from talos_core.cli import main
from talos_core.errors import TalosError
from talos_core.fisher import fisher_scores, fisher_scores_loop
from talos_core.models import MODELS
from talos_core.models.cnn import (
    CnnTaskModel,
    convert_lite0_state_dict,
    fit_linear_probe,
    lite0_weights_path,
    load_lite0_timm,
)
from talos_core.store import Store
from talos_core.tasks import get_task, load_task


@pytest.fixture(scope="module")
def tiny():
    """The pipeline's cached tiny-cnn with its digits head, so the CLI test reuses both."""
    from talos_core.inference.runtime import prepared_model

    task = get_task("digits")
    model = prepared_model("tiny-cnn", task, torch.device("cpu"))
    data = load_task("digits", max_train=64, max_val=32, max_test=64)
    return model, task, data


def test_registered_offline():
    for name, weights in (("tiny-cnn", "random"), ("efficientnet-lite0", "pretrained")):
        spec = MODELS[name]
        assert spec.family == "cnn" and spec.offline and spec.weights == weights


def test_prepare_head_forward_shapes(tiny):
    model, task, data = tiny
    assert isinstance(model, CnnTaskModel) and model.modality == "image"
    batch = model.prepare(data.test.inputs[:5], task)
    assert batch["pixel_values"].shape == (5, 3, 32, 32)
    head = model.head()
    assert head["weight"].shape == (10, 64) and head["bias"].shape == (10,)
    assert not any(n.startswith("head_") for n, _ in model.named_parameters())
    assert "head_weight" not in model.state_dict()  # non-persistent buffer, never in a task vector
    with torch.no_grad():
        logits = model(**batch)
    assert logits.shape == (5, 10) and torch.isfinite(logits).all()


def test_maskable_names_cover_conv_and_batchnorm(tiny):
    model = tiny[0]
    names = model.maskable_names()
    assert "backbone.conv_stem.weight" in names
    assert "backbone.bn1.weight" in names and "backbone.bn1.bias" in names
    assert "backbone.blocks.1.0.conv_dw.weight" in names
    assert names == [n for n, _ in model.named_parameters()]  # all of θ for EfficientNet-Lite
    assert not any("running" in n for n in names)


def test_batchnorm_always_uses_running_stats(tiny):
    model, task, data = tiny
    batch = model.prepare(data.test.inputs[:4], task)
    with torch.no_grad():
        before = model(**batch)
        model.train()
        try:
            assert model.training
            assert not any(m.training for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d))
            after = model(**batch)
        finally:
            model.eval()
    assert torch.equal(before, after)


def test_head_is_deterministic_and_uses_theta0(tiny):
    model, task, _ = tiny
    p = model.backbone.conv_stem.weight
    saved, head_train = p.detach().clone(), model.head_train
    model.head_train = 32  # a small probe keeps this test fast
    try:
        head = model.build_head(task)
        with torch.no_grad():
            p.add_(1.0)  # as if a task vector were applied in place
        again = model.build_head(task)
    finally:
        model.head_train = head_train
        with torch.no_grad():
            p.copy_(saved)
    for key in head:
        assert torch.equal(head[key], again[key]), key


def test_head_beats_chance_on_digits(tiny):
    from talos_core.inference.forward import accuracy

    model, task, data = tiny
    assert accuracy(model, task, data.test) > 0.3  # 10 classes; random-init features + linear probe


def test_text_task_is_refused(tiny):
    with pytest.raises(TalosError, match="classifies images"):
        tiny[0].build_head(get_task("drug-reviews"))


def test_linear_probe_fits_and_bakes_standardization():
    g = torch.Generator().manual_seed(0)
    centers = torch.randn(3, 6, generator=g) * 4
    labels = torch.arange(3).repeat_interleave(20)
    feats = centers[labels] + torch.randn(60, 6, generator=g) + 50.0  # far from zero mean, as ReLU features
    head = fit_linear_probe(feats, labels, 3)
    logits = feats @ head["weight"].T + head["bias"]
    assert (logits.argmax(-1) == labels).all()
    assert torch.equal(fit_linear_probe(feats, labels, 3)["weight"], head["weight"])  # deterministic
    with pytest.raises(TalosError, match="l2"):
        fit_linear_probe(feats, labels, 3, l2=-1.0)
    with pytest.raises(TalosError, match="labels must be in"):
        fit_linear_probe(feats, labels, 2)


def test_vmap_fisher_equals_per_sample_loop(tiny):
    model, task, data = tiny
    names = model.maskable_names()
    split = data.val.take(range(6))
    fast = fisher_scores(model, split, task, names, generator=torch.Generator().manual_seed(1), batch_size=4,
                         chunk_size=3)
    slow = fisher_scores_loop(model, split, task, names, generator=torch.Generator().manual_seed(1), batch_size=4)
    for n in names:
        scale = slow[n].abs().max().item() + 1e-12
        assert torch.allclose(fast[n], slow[n], rtol=1e-4, atol=1e-5 * scale), n


def test_linearized_jvp_through_batchnorm(tiny):
    from talos_core.inference.forward import linearized_logits

    model, task, data = tiny
    batch = model.prepare(data.test.inputs[:4], task)
    g = torch.Generator().manual_seed(0)
    params = dict(model.named_parameters())
    names = ["backbone.bn1.weight", "backbone.blocks.1.0.conv_pw.weight"]
    delta = {n: 1e-3 * torch.randn(params[n].shape, generator=g) for n in names}
    theta0 = {n: params[n].detach().clone() for n in names}
    with torch.no_grad():
        base = model(**batch)
        for n in names:
            params[n].add_(delta[n])
        moved = model(**batch)
        for n in names:  # θ0 bit for bit (x + d - d is not x in floating point): the model is the shared cached one
            params[n].copy_(theta0[n])
        lin = linearized_logits(model, batch, delta)
    assert float((moved - base).abs().max()) > 0
    assert torch.allclose(lin - base, moved - base, atol=5e-2 * float((moved - base).abs().max()) + 1e-6)


def test_cli_finetune_talos(tmp_path, capsys):
    argv = ["finetune", "--model", "tiny-cnn", "--task", "digits", "--method", "talos", "--sparsity", "0.9",
            "--steps", "3", "--max-train", "64", "--max-test", "64", "--calib-samples", "16", "--quiet",
            "--device", "cpu", "--store", str(tmp_path)]
    assert main(argv) == 0
    assert "fine-tuned test acc" in capsys.readouterr().out
    (run,) = list(Store(tmp_path).runs())
    assert run.manifest.family == "cnn"
    assert abs(run.manifest.metrics["mask_density"] - 0.1) <= 0.005
    mask, tv = run.mask(), run.task_vector()
    assert set(tv.values) <= set(mask)
    for n in tv.values:
        assert torch.count_nonzero(tv.dense(n)[~mask[n]]) == 0


# --- real EfficientNet-Lite0 weights -------------------------------------------------------------
def test_lite0_checkpoint_keys_map_completely():
    state = torch.load(lite0_weights_path(), map_location="cpu", weights_only=True)
    mapped = convert_lite0_state_dict(state)
    assert len(mapped) == len(state) == 296
    assert "blocks.6.0.conv_pwl.weight" in mapped and "classifier.weight" in mapped
    assert mapped["blocks.0.0.conv_dw.weight"].shape == (32, 1, 3, 3)
    with pytest.raises(TalosError, match=r"unexpected key '_blocks.99"):
        convert_lite0_state_dict({"_blocks.99._bn0.weight": torch.zeros(1)})


def test_bad_weights_file_is_a_talos_error(tmp_path):
    junk = tmp_path / "junk.pth"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(TalosError, match="could not read EfficientNet-Lite0 weights"):
        load_lite0_timm(junk)
    wrong = tmp_path / "wrong.pth"
    torch.save({"_conv_stem.weight": torch.zeros(1), "note": "hi"}, wrong)
    with pytest.raises(TalosError, match="not a dict of tensors"):
        load_lite0_timm(wrong)


@pytest.mark.slow
def test_lite0_real_weights_imagenet_sanity_and_probe():
    from sklearn.datasets import load_sample_image

    from talos_core.inference.forward import accuracy
    from talos_core.models.cnn import LITE_MEAN, LITE_STD, load_efficientnet_lite0
    from talos_core.models.images import images_to_tensor

    net = load_lite0_timm(classifier=True)
    china = load_sample_image("china.jpg")[:, 106:533]  # square centre crop of a temple photo
    with torch.inference_mode():
        probs = net(images_to_tensor(china[None], 224, LITE_MEAN, LITE_STD)).softmax(-1)[0]
    top5 = set(probs.topk(5).indices.tolist())
    # ImageNet: 698 palace, 442 bell cote, 663 monastery, 483 castle, 538 dome, 832 stupa
    assert top5 & {698, 442, 663, 483, 538, 832}
    assert float(probs.max()) > 0.2  # confident (random init gives ~0.03)

    model = load_efficientnet_lite0(64, head_train=300)
    assert model.num_parameters() == 3_371_008
    task = get_task("digits")
    model.set_head(model.build_head(task), task.name)
    test = load_task("digits", max_train=1, max_val=1, max_test=200).test
    assert accuracy(model, task, test) > 0.6  # chance is 0.1


def test_cpu_batches_enter_the_backbone_channels_last_with_the_same_logits(tiny):
    """On a CPU the images reach the first convolution in channels-last order (the measured faster path); the logits
    equal the contiguous order's up to rounding, and the weights (where task vectors are applied) stay contiguous."""
    model, _, data = tiny
    x = model.prepare(data.test.inputs[:16])["pixel_values"]
    seen = []
    hook = model.backbone.conv_stem.register_forward_pre_hook(
        lambda module, args: seen.append(args[0].is_contiguous(memory_format=torch.channels_last)))
    try:
        with torch.no_grad():
            fast = model(x)
            model.channels_last_on_cpu = False
            plain = model(x)
    finally:
        model.channels_last_on_cpu = True
        hook.remove()
    assert seen == [True, False]
    torch.testing.assert_close(fast, plain, rtol=1e-5, atol=1e-5)
    assert all(p.is_contiguous() for p in model.backbone.parameters())
