"""GPU tests (marker ``gpu``): the engine on CUDA, skipped where no CUDA device is available.

What runs on the device: TaLoS calibration (per-sample Fisher engines against one backward per sample), sparse
fine-tuning in bf16 autocast (the training-precision rule's ``auto`` on CUDA; fp32 master weights; entries
outside the mask never change), every fine-tuning method through the pipeline (the JVP paths of Linearized FT
and L-LoRA under autocast included), and the evaluation protocols ``single``, ``addition`` and ``preview`` into a
temporary store — on the tiny models (``tiny-clip``, ``tiny-text``) and the random-init CLIP ViT-B/32
(``clip-vit-b-32-random``, a few steps at a small batch).

Run on a GPU machine::

    python -m pytest -q -m gpu tests/test_gpu.py

``TALOS_GPU_TEST_DEVICE=cpu`` runs the same tests on the CPU, a smoke test of their logic where no GPU is
present (``TALOS_GPU_TEST_DEVICE=cpu python -m pytest -q tests/test_gpu.py``): training then asks for bf16
explicitly (the ``auto`` rule trains in bf16 on CUDA only, fp32 on CPUs), so the autocast path still runs, and
evaluation uses the ``auto`` precision as on CUDA (fp32 on CPUs without AMX). Any other value (``cuda:1``) picks
that device. A model or task whose package is not installed here is skipped with the reason.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch

from talos_core.errors import TalosError

DEVICE = os.environ.get("TALOS_GPU_TEST_DEVICE", "cuda")
ON_CUDA = DEVICE.startswith("cuda")
#: what fine-tuning asks for: the rule's default on CUDA (which must resolve to bf16), bf16 explicitly on CPU
TRAIN_PRECISION = None if ON_CUDA else "bf16"

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(ON_CUDA and not torch.cuda.is_available(),
                       reason="needs a CUDA GPU (TALOS_GPU_TEST_DEVICE=cpu runs these tests on the CPU)"),
]

VIT = "clip-vit-b-32-random"
MODELS = {"tiny-clip": "digits", "tiny-text": "drug-reviews", VIT: "digits"}
#: per model: calibration samples, rounds, fine-tuning batch and steps (ViT-B/32: a few steps, small batch)
SIZES = {"tiny-clip": dict(samples=16, rounds=4, batch=8, steps=3),
         "tiny-text": dict(samples=16, rounds=4, batch=8, steps=3),
         VIT: dict(samples=4, rounds=2, batch=4, steps=2)}
_CACHE: dict = {}


def _skip_unavailable(what: str, exc: BaseException):
    pytest.skip(f"{what} is not available here: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")


def _load(name: str, task_name: str | None = None):
    """``(model on DEVICE with the task's head, task, data)``, loaded once per model and task."""
    task_name = task_name or MODELS[name]
    key = (name, task_name)
    if key not in _CACHE:
        from talos_core.models import load_model
        from talos_core.tasks import get_task, load_task

        try:
            task = get_task(task_name)
            data = load_task(task_name, max_train=64, max_val=32, max_test=32)
            model = load_model(name)
        except (TalosError, ImportError, OSError) as exc:
            _skip_unavailable(f"{name} on {task_name}", exc)
        model.set_head(model.build_head(task), task.name)
        if hasattr(model, "_text"):
            model._text = None  # CLIP's text tower only builds heads
        _CACHE[key] = (model.to(torch.device(DEVICE)), task, data)
    return _CACHE[key]


def _need_tasks(tasks: list[str]) -> None:
    from talos_core.tasks import load_task

    for t in tasks:
        try:
            load_task(t, max_train=1, max_val=1, max_test=1)
        except (TalosError, ImportError, OSError) as exc:
            _skip_unavailable(f"task {t!r}", exc)


def _device_type() -> str:
    return torch.device(DEVICE).type


def _state(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _rel_l2(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    num = sum(float((a[n].double() - b[n].double()).pow(2).sum()) for n in b)
    den = sum(float(b[n].double().pow(2).sum()) for n in b)
    return math.sqrt(num / max(den, 1e-300))


# --------------------------------------------------------------------------------------------
# calibration
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(MODELS))
def test_calibration_on_device(name):
    """A full TaLoS calibration on the device: exact final density, every maskable tensor, masks on the
    model's device, the model unchanged."""
    from talos_core.masks import CalibrationConfig, calibrate_talos, calibration_split, mask_density

    model, task, data = _load(name)
    s = SIZES[name]
    before = _state(model)
    cfg = CalibrationConfig(sparsity=0.9, rounds=s["rounds"], samples=s["samples"], batch_size=s["samples"],
                            chunk_size=4)
    log: list[dict] = []
    mask = calibrate_talos(model, calibration_split(data.val, cfg.samples, cfg.seed), task, cfg, log=log)
    total = sum(m.numel() for m in mask.values())
    assert set(mask) == set(model.maskable_names())
    assert int(sum(int(m.sum()) for m in mask.values())) == math.floor(0.1 * total)
    assert abs(mask_density(mask) - 0.1) < 0.005 and len(log) == s["rounds"]
    assert all(m.device.type == _device_type() and m.dtype == torch.bool for m in mask.values())
    after = model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())


@pytest.mark.parametrize("engine", ["auto", "vmap"])
@pytest.mark.parametrize("name", ["tiny-clip", "tiny-text"])
def test_fisher_engines_match_the_per_sample_loop_on_device(name, engine):
    """The batched per-sample gradient engines equal one backward per sample on the device (fp32; on CUDA
    within TF32/reduction-order rounding) and give the same 10%-density selection."""
    from talos_core.fisher import SCORE_DTYPE, fisher_scores, fisher_scores_loop
    from talos_core.masks import keep_lowest

    model, task, data = _load(name)
    names = model.maskable_names()
    split = data.val.take(range(8))
    fast = fisher_scores(model, split, task, names, generator=torch.Generator().manual_seed(3), batch_size=8,
                         chunk_size=4, engine=engine)
    slow = fisher_scores_loop(model, split, task, names, generator=torch.Generator().manual_seed(3), batch_size=8)
    assert all(fast[n].device.type == _device_type() and fast[n].dtype == SCORE_DTYPE for n in names)
    assert all(bool(torch.isfinite(fast[n]).all()) for n in names)
    assert _rel_l2(fast, slow) < (1e-2 if ON_CUDA else 1e-4)
    elig = {n: torch.ones_like(s, dtype=torch.bool) for n, s in slow.items()}
    k = int(0.1 * sum(m.numel() for m in elig.values()))
    a, b = keep_lowest(fast, elig, k), keep_lowest(slow, elig, k)
    agree = sum(int((a[n] == b[n]).sum()) for n in names) / sum(m.numel() for m in elig.values())
    assert agree > (0.99 if ON_CUDA else 0.999)


# --------------------------------------------------------------------------------------------
# sparse fine-tuning in bf16
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(MODELS))
def test_sparse_finetuning_in_bf16_respects_the_mask(name):
    """TaLoS-style sparse fine-tuning under bf16 autocast: the products run in bf16, parameters stay fp32,
    entries outside the mask (and frozen tensors) never change during training, θ0 is restored bitwise, the
    task vector lives on the mask only, peak memory is measured on the device."""
    from talos_core.inference.precision import resolve_train_precision
    from talos_core.masks import random_mask
    from talos_core.training import TrainConfig, finetune, plan_from_mask

    model, task, data = _load(name)
    s = SIZES[name]
    requested = TRAIN_PRECISION or "auto"
    assert resolve_train_precision(torch.device(DEVICE), requested, family=model.family) == "bf16"
    mask = random_mask(model, 0.1, seed=0)
    plan = plan_from_mask(mask)
    theta0 = _state(model)
    params = dict(model.named_parameters())
    off = {n: ~mask[n].to(params[n].device) if n in mask else torch.ones_like(params[n], dtype=torch.bool)
           for n in params}
    seen = {"steps": 0, "dtypes": set()}
    hooks = [m.register_forward_hook(lambda mod, inp, out: seen["dtypes"].add(out.dtype))
             for m in model.modules() if isinstance(m, torch.nn.Linear)]  # the products' dtype

    def on_step(step: int, record: dict) -> None:
        seen["steps"] += 1
        assert math.isfinite(record["loss"])
        for n, p in params.items():
            assert p.dtype == torch.float32, n  # fp32 master weights
            assert torch.equal(p.detach()[off[n]], theta0[n][off[n]]), f"{n} changed outside the mask"

    config = TrainConfig(steps=s["steps"], batch_size=s["batch"], lr=1e-3, weight_decay=0.1, warmup_steps=0,
                         precision=requested)
    try:
        res = finetune(model, data.train, task, plan, config, progress=False, on_step=on_step)
    finally:
        for h in hooks:
            h.remove()
    assert res.precision == "bf16" and torch.bfloat16 in seen["dtypes"]
    assert seen["steps"] == s["steps"]
    now = model.state_dict()
    assert all(torch.equal(now[k], v) for k, v in theta0.items())  # θ0 restored
    dense = res.vector.to_dense()
    assert set(dense) <= set(mask)
    for n, d in dense.items():
        assert not bool(d[~mask[n].cpu()].any()), f"{n}: task vector outside the mask"
    assert res.vector.nnz() > 0 and 0 < res.vector.norm() < float("inf")
    opt_kind = res.timings["peak_memory_kind"]
    assert opt_kind == ("cuda_max_memory_allocated" if ON_CUDA else opt_kind)
    assert res.timings["peak_memory_mb"] > 0 and res.timings["trainable_entries"] == int(
        sum(int(mask[n].sum()) for n in plan))


# --------------------------------------------------------------------------------------------
# every method through the pipeline
# --------------------------------------------------------------------------------------------
def _small(name: str) -> dict:
    s = SIZES[name]
    return dict(steps=s["steps"], batch_size=s["batch"], max_train=32, max_val=16, max_test=16,
                calib_samples=s["samples"], rounds=1, device=DEVICE, train_precision=TRAIN_PRECISION)


@pytest.mark.parametrize("name,method", [
    *[("tiny-clip", m) for m in ("nonlinear", "linearized", "llora", "lota", "talos")],
    *[("tiny-text", m) for m in ("linearized", "llora", "talos")],
    (VIT, "talos"),
])
def test_methods_finetune_on_device(tmp_path, name, method):
    """``run_finetune`` on the device records bf16 training, the device, finite accuracies and vectors; sparse
    methods keep 10% of the maskable entries."""
    from talos_core.pipeline import FinetuneRequest, run_finetune
    from talos_core.runners import get_method
    from talos_core.store import Store

    _load(name)  # skips when the model or task is not available here
    req = FinetuneRequest.from_flat(model=name, task=MODELS[name], method=method, **_small(name))
    run = run_finetune(req, Store(tmp_path), progress=False)
    m = run.manifest
    assert m.train_precision == "bf16" and m.device.startswith(_device_type())
    for key in ("zero_shot_test_acc", "finetuned_test_acc", "finetuned_val_acc"):
        assert 0.0 <= m.metrics[key] <= 1.0, key
    assert math.isfinite(m.metrics["vector_norm"]) and m.metrics["vector_norm"] > 0
    assert all(math.isfinite(h["loss"]) for h in m.history)
    if get_method(method).sparse:
        assert abs(m.metrics["mask_density"] - 0.1) < 0.005
    if ON_CUDA:
        assert m.timings["peak_memory_kind"] == "cuda_max_memory_allocated" and m.timings["peak_memory_mb"] > 0


# --------------------------------------------------------------------------------------------
# evaluation protocols and the preview cache
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,tasks", [("tiny-text", ["drug-reviews", "tweets"]), ("tiny-clip", ["digits", "mnist"]),
                                        (VIT, ["digits", "mnist"])])
def test_evaluation_protocols_on_device(tmp_path, name, tasks):
    """``single``, ``addition`` and ``preview`` (JVP tangents) evaluated on the device in its ``auto`` evaluation
    precision (bf16 on CUDA), written into a temporary store."""
    from talos_core.evaluation.protocols import AdditionSettings, PreviewSettings, evaluate
    from talos_core.inference.precision import eval_precision
    from talos_core.result_arrays import load_preview, preview_accuracy
    from talos_core.schema import result_name
    from talos_core.store import Store

    _load(name)
    _need_tasks(tasks)
    store = Store(tmp_path)
    kw = dict(overrides={**_small(name), "max_test": 16}, train=True)
    with eval_precision("auto"):
        evaluate(store, "single", name, tasks, "talos", **kw)
        single = store.read_table("single", result_name("default", name))
        assert len(single) == 2 * len(tasks) and set(single["split"]) == {"val", "test"}
        assert single["finetuned_acc"].between(0, 1).all() and single["zero_shot_acc"].between(0, 1).all()

        out = evaluate(store, "addition", name, tasks, "talos", settings=AdditionSettings(alpha_step=0.5), **kw)
        payload = store.read_result("addition", f"default__{name}__talos")
        assert payload["selected_alpha"] in payload["alpha_grid"]
        assert np.isfinite(out.table["accuracy"].to_numpy(dtype=float)).all()
        assert 0.0 <= payload["summary"]["abs_acc"] <= 1.0

        evaluate(store, "preview", name, tasks, "talos", settings=PreviewSettings(points=8), **kw)
    cache = load_preview(store.root, f"default__{name}__talos")
    assert cache.tasks == tasks
    acc = preview_accuracy(cache, {tasks[0]: 0.5})
    assert set(acc) == set(tasks) and all(0.0 <= v <= 1.0 for v in acc.values())
    assert all(np.isfinite(np.asarray(cache.base[t], dtype=float)).all() for t in tasks)
