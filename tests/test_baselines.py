"""Tests of the baseline fine-tuning methods (linearized, llora, lota), the simple controls (random,
magnitude, talos-top), the post-hoc glue and the method families. Tiny models, ≤ 5 steps, ≤ 64 examples.
"""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
import torch

from talos_core import schema
from talos_core.cli import main
from talos_core.errors import TalosError
from talos_core.fisher import fisher_scores
from talos_core.inference.forward import linearized_logits
from talos_core.masks import CalibrationConfig, calibration_split
from talos_core.methods import merging, posthoc
from talos_core.models import load_model
from talos_core.runners import FINETUNE_METHODS, baselines, get_method, lora
from talos_core.runners.base import MethodContext
from talos_core.runners.baselines import linearized_training_logits, lota_mask
from talos_core.runners.lora import LoraAdapter, lora_targets
from talos_core.store import Store
from talos_core.tasks import get_task, load_task
from talos_core.training import TrainConfig, finetune
from talos_core.vectors import TaskVector

TRAIN = TrainConfig(steps=3, batch_size=8, lr=1e-3, warmup_steps=0)


def _setup(model_name: str, task_name: str, n: int = 32):
    model = load_model(model_name)
    task = get_task(task_name)
    model.set_head(model.build_head(task), task.name)
    data = load_task(task_name, max_train=n, max_val=n, max_test=n)
    return model, task, data


@pytest.fixture(scope="module")
def clip():
    return _setup("tiny-clip", "digits")


@pytest.fixture(scope="module")
def text():
    return _setup("tiny-text", "tweets")


def _ctx(setup, *, options=None, train=TRAIN, **calib) -> MethodContext:
    model, task, data = setup
    cfg = CalibrationConfig(**{"sparsity": 0.9, "rounds": 2, "samples": 16, "batch_size": 8, **calib})
    return MethodContext(model, task, data, train, sparsity=cfg.sparsity, seed=cfg.seed, calib_config=cfg,
                         options=dict(options or {}), progress=False)


def _snapshot(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _assert_at(model, snapshot) -> None:
    for n, p in model.named_parameters():
        assert torch.equal(p, snapshot[n]), f"{n} was not restored to θ0"


def _batch(model, task, split, n: int = 8):
    part = split.take(np.arange(min(n, len(split))))
    return model.prepare(part.inputs, task)


# ------------------------------------------------------------------------------------------ registry

def test_docstring_examples() -> None:
    for module in (baselines, lora, posthoc):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_methods_registered_with_their_evaluation_mode() -> None:
    lin, llora, lota_m = (get_method(m) for m in ("linearized", "llora", "lota"))
    assert (lin.eval_mode, lin.sparse, lin.calibrates) == ("linearized", False, False)
    assert (llora.eval_mode, llora.sparse, llora.calibrates) == ("linearized", False, False)
    assert (lota_m.eval_mode, lota_m.sparse, lota_m.calibrates) == ("nonlinear", True, True)


def test_every_method_has_a_family_and_a_label() -> None:
    METHOD_FAMILIES = {name: info.family for name, info in schema.METHODS.items()}
    METHOD_LABELS = {name: info.label for name, info in schema.METHODS.items()}
    FAMILIES = schema.FAMILIES
    every = set(FINETUNE_METHODS) | set(merging.POSTHOC_METHODS)
    assert every <= set(METHOD_FAMILIES)
    assert set(METHOD_FAMILIES) == set(METHOD_LABELS)
    assert set(METHOD_FAMILIES.values()) == set(FAMILIES)
    assert all(METHOD_FAMILIES[m] == "post-hoc" for m in merging.POSTHOC_METHODS)
    with pytest.raises(TalosError, match="unknown method 'nope'"):
        schema.method_family("nope")


# ------------------------------------------------------------------------------------------ linearized

def test_taylor_model_is_exactly_linear_in_the_displacement(clip) -> None:
    model, task, data = clip
    batch = _batch(model, task, data.test)
    theta0 = _snapshot(model)
    g = torch.Generator().manual_seed(0)
    delta = {n: 1e-2 * torch.randn(p.shape, generator=g) for n, p in theta0.items()}
    logits_fn = linearized_training_logits(theta0)
    with torch.no_grad():
        f0 = model(**batch)

    def f_lin(a: float) -> torch.Tensor:  # the training forward with the live θ set to θ0 + a·δ
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(theta0[n] + a * delta[n])
        try:
            with torch.no_grad():
                return logits_fn(model, batch)
        finally:
            with torch.no_grad():
                for n, p in model.named_parameters():
                    p.copy_(theta0[n])

    unit = f_lin(1.0) - f0
    assert unit.abs().max() > 1e-3  # the direction does move the output
    torch.testing.assert_close(f_lin(0.0), f0, atol=1e-5, rtol=0)
    for a in (-1.0, 0.5, 2.0, 3.0):
        torch.testing.assert_close(f_lin(a) - f0, a * unit, atol=1e-5, rtol=1e-4)
    # the displacement is what is differentiated: gradients reach the live parameters
    params = dict(model.named_parameters())
    probe = params["visual.transformer.resblocks.0.attn.in_proj_weight"]
    probe.requires_grad_(True)
    try:
        logits_fn(model, batch).sum().backward()
        assert probe.grad is not None and probe.grad.abs().sum() > 0
    finally:
        probe.requires_grad_(False)
        probe.grad = None
    _assert_at(model, theta0)


def test_linearized_training_changes_the_vector_and_matches_evaluation(clip) -> None:
    from talos_core.inference.forward import predict_logits

    model, task, data = clip
    theta0 = _snapshot(model)
    out = get_method("linearized").run(_ctx(clip))
    _assert_at(model, theta0)
    assert set(out.vector.names()) == set(theta0)  # every parameter, as non-linear FT
    assert out.vector.norm() > 0 and out.mask is None
    batch = _batch(model, task, data.test)
    with torch.no_grad():
        lin = linearized_logits(model, batch, out.vector.to_dense(), theta0=theta0)
        f0 = model(**batch)
    assert (lin - f0).abs().max() > 1e-4
    # the evaluation primitive computes the same model
    evaluated = predict_logits(model, task, data.test.take(np.arange(8)), [(out.vector, 1.0)],
                               mode="linearized")
    torch.testing.assert_close(evaluated, lin.float(), atol=1e-4, rtol=1e-4)


def test_one_jvp_helper_for_training_and_evaluation(clip) -> None:
    """Training's explicit expansion point and evaluation's default (the model's weights) agree bitwise."""
    from talos_core.inference.attention import differentiable_attention

    model, task, data = clip
    batch = _batch(model, task, data.test)
    theta0 = _snapshot(model)
    g = torch.Generator().manual_seed(1)
    delta = {n: 1e-2 * torch.randn(p.shape, generator=g) for n, p in theta0.items()}
    with torch.no_grad():
        default = linearized_logits(model, batch, delta)
        assert torch.equal(default, linearized_logits(model, batch, delta, theta0=theta0))
        # evaluation ignores tensors the model lacks; training needs an expansion point for each
        extra = {**delta, "not.a.param": torch.ones(1)}
        assert torch.equal(linearized_logits(model, batch, extra), default)
        with pytest.raises(TalosError, match="expansion point"):
            linearized_logits(model, batch, extra, theta0=theta0)
    before = torch.backends.mha.get_fastpath_enabled()
    with differentiable_attention():
        assert not torch.backends.mha.get_fastpath_enabled()
    assert torch.backends.mha.get_fastpath_enabled() == before


def test_linearized_rejects_options(clip) -> None:
    with pytest.raises(TalosError, match="takes no options"):
        get_method("linearized").run(_ctx(clip, options={"rank": 4}))


# ------------------------------------------------------------------------------------------ L-LoRA

def _check_llora(setup, rank: int) -> TaskVector:
    model, _, _ = setup
    theta0 = _snapshot(model)
    out = get_method("llora").run(_ctx(setup, options={"rank": rank},
                                       train=TrainConfig(steps=2, batch_size=4, lr=1e-2, warmup_steps=0)))
    _assert_at(model, theta0)
    targets = lora_targets(model)
    assert set(out.vector.names()) == {t.param for t in targets}
    n_blocks = sum(len(t.blocks) for t in targets)
    assert out.timings["trainable_entries"] == sum(
        rank * (t.in_features + (b - a)) for t in targets for _, a, b in t.blocks)
    assert out.info["rank"] == rank and len(out.info["targets"]) == n_blocks
    for t in targets:
        dense = out.vector.dense(t.param)
        covered = torch.zeros(t.shape[0], dtype=torch.bool)
        for _, a, b in t.blocks:
            block = dense[a:b]
            assert block.abs().sum() > 0, f"{t.param} rows {a}:{b} were not trained"
            sv = torch.linalg.svdvals(block.double())  # float32 product: rank up to float32 rounding
            assert torch.all(sv[rank:] <= 1e-5 * sv[0]), f"{t.param} rows {a}:{b} has rank > {rank}"
            covered[a:b] = True
        assert torch.all(dense[~covered] == 0), f"{t.param} changed outside its Q/V rows"
    return out.vector


def test_llora_on_fused_attention_leaves_key_rows_at_zero(clip) -> None:
    vector = _check_llora(clip, rank=2)
    names = vector.names()
    assert names and all(n.endswith("attn.in_proj_weight") for n in names)
    d = vector.dense(names[0]).shape[1]
    for n in names:
        dense = vector.dense(n)
        assert torch.all(dense[d:2 * d] == 0)  # K block
        assert dense[:d].abs().sum() > 0 and dense[2 * d:].abs().sum() > 0  # Q and V blocks


def test_llora_on_bert_touches_only_query_and_value(text) -> None:
    names = _check_llora(text, rank=3).names()
    assert names and all(n.endswith(("attention.self.query.weight", "attention.self.value.weight")) for n in names)
    assert not any("key" in n for n in names)


def test_llora_on_t5_touches_only_q_and_v() -> None:
    names = _check_llora(_setup("tiny-t5", "tweets", n=8), rank=2).names()
    assert any("SelfAttention.q." in n for n in names) and any("EncDecAttention.v." in n for n in names)
    assert all(n.endswith((".q.weight", ".v.weight")) for n in names)


def test_lora_adapter_update_is_scaled_low_rank(clip) -> None:
    model = clip[0]
    targets = lora_targets(model)
    adapter = LoraAdapter(model, targets, rank=2, alpha=6.0, seed=0)
    assert adapter.scale == 3.0
    assert all(torch.all(d == 0) for d in adapter.delta().values())  # B = 0 at initialization
    Bs = [torch.ones_like(b) for b in adapter.B]
    delta = adapter.delta((list(adapter.A), Bs))
    t = targets[0]
    d = t.shape[1]
    torch.testing.assert_close(delta[t.param][:d], 3.0 * Bs[0] @ adapter.A[0])
    torch.testing.assert_close(delta[t.param][2 * d:], 3.0 * Bs[1] @ adapter.A[1])
    assert adapter.A[0].abs().max() <= 1.0 / math.sqrt(d)


@pytest.mark.parametrize("options, message", [
    ({"rank": 0}, "rank must be a positive integer"),
    ({"rank": 1000}, "exceeds 64"),
    ({"rank": 2, "lora_alpha": -1}, "lora_alpha must be a positive number"),
    ({"rank": 2, "dropout": 0.1}, "unknown llora option"),
])
def test_llora_rejects_bad_options(clip, options, message) -> None:
    with pytest.raises(TalosError, match=message):
        get_method("llora").run(_ctx(clip, options=options))


# ------------------------------------------------------------------------------------------ LoTA

def test_lota_mask_vector_and_restart_from_theta0(clip) -> None:
    model, task, data = clip
    theta0 = _snapshot(model)
    ctx = _ctx(clip, options={"calib_steps": 2}, sparsity=0.9)
    out = get_method("lota").run(ctx)
    _assert_at(model, theta0)
    maskable = model.maskable_names()
    total = sum(theta0[n].numel() for n in maskable)
    kept = sum(int(m.sum()) for m in out.mask.values())
    assert set(out.mask) == set(maskable)
    assert abs(kept - math.floor(0.1 * total)) <= 1
    assert set(out.vector.names()) <= set(maskable)
    for n in out.vector.names():  # exactly zero off the mask: frozen, not a reduced learning rate
        assert torch.all(out.vector.dense(n)[~out.mask[n]] == 0), n
    assert out.vector.nnz() > 0 and out.vector.nnz() <= kept
    assert out.timings["calibration_s"] > 0 and out.info["calibration_steps"] == 2
    # the mask is the top-k |Δθ| of a dense calibration run that starts from θ0 (rerun by hand)
    calib = calibration_split(data.val, ctx.calib_config.samples, ctx.calib_config.seed)
    ref = finetune(model, calib, task, {n: None for n in maskable},
                   TrainConfig(steps=2, batch_size=8, lr=1e-3, warmup_steps=0), progress=False)
    expected = lota_mask({n: ref.vector.dense(n) for n in maskable}, 0.1)
    assert all(torch.equal(out.mask[n], expected[n]) for n in maskable)


def test_lota_default_calibration_steps_match_talos_iterations(clip) -> None:
    out = get_method("lota").run(_ctx(clip, rounds=3, samples=20, batch_size=8,
                                      train=TrainConfig(steps=1, batch_size=8, lr=1e-3, warmup_steps=0)))
    assert out.info["calibration_steps"] == 3 * math.ceil(20 / 8)
    assert out.info["calibration_data"] == "val" and out.info["calibration_samples"] == 20


def test_lota_mask_keeps_exactly_the_largest_changes() -> None:
    deltas = {"a": torch.tensor([0.5, -4.0, 0.0]), "b": torch.tensor([[3.0, -0.1], [0.0, 0.0]])}
    mask = lota_mask(deltas, 0.3)  # ⌊0.3 · 7⌋ = 2 entries
    assert mask["a"].tolist() == [False, True, False]
    assert mask["b"].tolist() == [[True, False], [False, False]]
    with pytest.raises(TalosError, match="density must be in"):
        lota_mask(deltas, 1.5)


@pytest.mark.parametrize("options, message", [
    ({"calib_steps": 0}, "calib_steps must be a positive integer"),
    ({"calib_data": "test"}, "calib_data must be 'val' or 'train'"),
    ({"rank": 4}, "unknown lota option"),
])
def test_lota_rejects_bad_options(clip, options, message) -> None:
    with pytest.raises(TalosError, match=message):
        get_method("lota").run(_ctx(clip, options=options))


def test_lota_explains_an_empty_validation_split(clip) -> None:
    from talos_core.tasks.base import TaskData

    model, task, data = clip
    empty = TaskData(data.train, data.val.take(np.arange(0)), data.test)
    ctx = MethodContext(model, task, empty, TRAIN, sparsity=0.9, seed=0, calib_config=CalibrationConfig(),
                        progress=False)
    with pytest.raises(TalosError, match="calib_data=train"):
        get_method("lota").run(ctx)


# ------------------------------------------------------------------------------------------ controls

def _count(mask) -> tuple[int, int]:
    return sum(int(m.sum()) for m in mask.values()), sum(m.numel() for m in mask.values())


@pytest.mark.parametrize("method", ["random", "magnitude", "talos-top"])
def test_control_masks_have_the_requested_density(clip, method) -> None:
    out = get_method(method).run(_ctx(clip, sparsity=0.8, rounds=1))
    kept, total = _count(out.mask)
    assert kept == math.floor(0.2 * total)
    for n in out.vector.names():
        assert torch.all(out.vector.dense(n)[~out.mask[n]] == 0)


def test_magnitude_keeps_the_smallest_pretrained_weights(clip) -> None:
    model = clip[0]
    out = get_method("magnitude").run(_ctx(clip, sparsity=0.8, train=TrainConfig(steps=1, batch_size=8)))
    params = dict(model.named_parameters())
    kept = torch.cat([params[n].detach().abs()[m] for n, m in out.mask.items()])
    dropped = torch.cat([params[n].detach().abs()[~m] for n, m in out.mask.items()])
    assert kept.max() <= dropped.min()


def test_talos_top_keeps_the_most_sensitive_entries_disjoint_from_talos(clip) -> None:
    model, task, data = clip
    kw = dict(sparsity=0.99, rounds=1, train=TrainConfig(steps=1, batch_size=8))
    top = get_method("talos-top").run(_ctx(clip, **kw)).mask
    bottom = get_method("talos").run(_ctx(clip, **kw)).mask
    assert all(not torch.any(top[n] & bottom[n]) for n in top)
    cfg = _ctx(clip, **kw).calib_config
    calib = calibration_split(data.val, cfg.samples, cfg.seed)
    scores = fisher_scores(model, calib, task, model.maskable_names(),
                           generator=torch.Generator().manual_seed(cfg.seed), batch_size=cfg.batch_size,
                           chunk_size=cfg.chunk_size)
    kept = torch.cat([scores[n][top[n]] for n in top])
    rest = torch.cat([scores[n][~top[n]] for n in top])
    assert kept.min() >= rest.max()
    assert kept.numel() == math.floor(0.01 * sum(m.numel() for m in top.values()))


# ------------------------------------------------------------------------------------------ post-hoc glue

def _hand_vectors() -> dict[str, TaskVector]:
    a = {"w": torch.tensor([[4.0, -1.0], [0.5, 2.0]]), "b": torch.tensor([0.0, 0.0, 0.3])}
    b = {"w": torch.tensor([[-3.0, 1.0], [0.5, 2.0]]), "b": torch.tensor([1.0, 0.0, -0.2])}
    c = {"w": torch.tensor([[0.0, 0.0], [0.0, -5.0]])}  # no "b": aligned with zeros
    return {"t1": TaskVector.from_dense(a), "t2": TaskVector.from_dense(b), "t3": TaskVector.from_dense(c)}


def test_posthoc_ties_matches_merging_module() -> None:
    vecs = _hand_vectors()
    before = {t: tv.to_dense() for t, tv in vecs.items()}
    merged, singles = posthoc.posthoc_vectors("ties", vecs, sparsity=0.5)
    dense = [{n: tv.dense(n) if n in tv.values else torch.zeros(3) for n in ("w", "b")} for tv in vecs.values()]
    expected = merging.ties_merge(dense, 0.5)
    assert set(merged.names()) == {"w", "b"}
    for n in expected:
        torch.testing.assert_close(merged.dense(n), expected[n])
    assert list(singles) == ["t1", "t2", "t3"]
    for i, t in enumerate(singles):
        single = merging.POSTHOC_METHODS["ties"].single_task(dense, i, sparsity=0.5)
        for n in single:
            torch.testing.assert_close(singles[t].dense(n), single[n])
    for t, tv in vecs.items():  # inputs untouched
        assert all(torch.equal(tv.dense(n), before[t][n]) for n in before[t])


@pytest.mark.parametrize("method", ["dare", "breadcrumbs", "tall_consensus", "tsv", "iso_c", "iso_cts", "lines"])
def test_posthoc_methods_are_pure_and_use_defaults(method) -> None:
    vecs = _hand_vectors()
    m1, s1 = posthoc.posthoc_vectors(method, vecs)
    m2, s2 = posthoc.posthoc_vectors(method, vecs)
    for n in m1.names():
        assert torch.equal(m1.dense(n), m2.dense(n))
    assert all(torch.equal(s1[t].dense(n), s2[t].dense(n)) for t in s1 for n in s1[t].names())
    assert posthoc.posthoc_grid(method, 3) == merging.POSTHOC_METHODS[method].grid_points(3)


def test_posthoc_errors_are_clear() -> None:
    vecs = _hand_vectors()
    with pytest.raises(TalosError, match=r"unknown hyperparameter.*'density'.*allowed: sparsity"):
        posthoc.posthoc_vectors("ties", vecs, density=0.5)
    with pytest.raises(TalosError, match="unknown post-hoc method 'magic'"):
        posthoc.posthoc_vectors("magic", vecs)
    with pytest.raises(TalosError, match="non-empty dict"):
        posthoc.posthoc_vectors("ties", {})
    bad = {"t1": vecs["t1"], "t2": TaskVector.from_dense({"w": torch.zeros(3)})}
    with pytest.raises(TalosError, match="disagree on the shape of 'w'"):
        posthoc.posthoc_vectors("ties", bad)


# ------------------------------------------------------------------------------------------ CLI

CLI_METHODS = {
    "linearized": [], "llora": ["--option", "rank=4"], "lota": ["--option", "calib_steps=2"],
    "random": [], "magnitude": [], "talos-top": [],
}


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("baselines-store")


@pytest.mark.parametrize("method", list(CLI_METHODS))
def test_every_method_runs_through_the_cli(store_dir, method, capsys) -> None:
    argv = ["finetune", "--model", "tiny-text", "--task", "tweets", "--method", method, "--steps", "3",
            "--batch-size", "8", "--max-train", "32", "--max-val", "16", "--max-test", "32",
            "--calib-samples", "8", "--rounds", "1", "--quiet", "--store", str(store_dir), *CLI_METHODS[method]]
    assert main(argv) == 0, capsys.readouterr().err
    runs = Store(store_dir).find_runs(method=method)
    assert len(runs) == 1
    manifest = runs[0].manifest
    assert manifest.eval_mode == get_method(method).eval_mode
    assert manifest.sparse_method == get_method(method).sparse
    assert 0.0 <= manifest.metrics["finetuned_test_acc"] <= 1.0
    assert manifest.timings["fwd_bwd_s_mean"] > 0
    if get_method(method).sparse:
        assert abs(manifest.metrics["mask_density"] - 0.1) < 1e-3


def test_cli_reports_a_bad_method_option(store_dir, capsys) -> None:
    argv = ["finetune", "--model", "tiny-text", "--task", "tweets", "--method", "llora", "--option", "rank=0",
            "--steps", "1", "--max-train", "8", "--max-val", "8", "--max-test", "8", "--quiet",
            "--store", str(store_dir)]
    assert main(argv) == 2
    assert "LoRA rank must be a positive integer, got 0" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(m for m in FINETUNE_METHODS if get_method(m).trains))
def test_every_fine_tuning_method_trains_with_length_grouped_batches(text, name) -> None:
    """`text` `full` batches by length; every method's trained module must report its inputs' lengths (L-LoRA's
    adapter once did not, and the whole L-LoRA branch of a GPU run failed)."""
    model, _, _ = text
    theta0 = _snapshot(model)
    train = TrainConfig(steps=2, batch_size=4, lr=1e-3, warmup_steps=0, batching="length")
    out = get_method(name).run(_ctx(text, train=train))
    _assert_at(model, theta0)
    assert out.vector.nnz() > 0
