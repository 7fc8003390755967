"""Benchmark worker: one measurement in a fresh process (``python -m bench._worker JOB 'JSON'``).

Jobs: ``mask`` (calibrate and save a real TaLoS mask), ``train`` (time fine-tuning steps of one
plan), ``calib`` (per-sample Fisher vmap vs loop, calibration vs fine-tuning time), ``grid`` (one
evaluation-grid point vs one plain evaluation pass), ``train_precision`` (a method trained in two variants
side by side — fp32 and bf16, or a CNN's contiguous and channels-last input: time per step and validation
accuracy). Each prints ``RESULT {json}`` (see
:func:`bench.common.emit`). Workers call only the public engine API, so the same benchmark code
measures the engine before and after an optimization.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from bench.common import current_memory_mb, emit, peak_memory_mb, reset_peak_memory, rss_mb, sync, timed, trim_heap

SPARSITY = 0.9


def setup(model_name: str, task_name: str, device: str, *, max_train: int = 64, max_val: int = 64,
          max_test: int = 64):
    """Model ``model_name`` on ``device`` with ``task_name``'s head, and the task's (subsampled) data.

    CLIP's text tower only builds heads; it is dropped afterwards so that CPU memory numbers, like
    ``torch.cuda.max_memory_allocated`` on GPU, count only what training touches.
    """
    from talos_core.models import load_model
    from talos_core.tasks import get_task, load_task

    task = get_task(task_name)
    data = load_task(task_name, max_train=max_train, max_val=max_val, max_test=max_test)
    trim_heap()
    base = rss_mb()
    model = load_model(model_name)
    model.set_head(model.build_head(task), task.name)
    if hasattr(model, "_text"):
        model._text = None
    model = model.to(torch.device(device))
    trim_heap()
    return model, task, data, base


def mask_structure(mask: dict[str, torch.Tensor]) -> dict:
    """How structured a mask is: fully trainable / partly trainable / frozen tensors, and for the
    partly trainable matrices the fraction of rows and of columns that hold any trainable entry."""
    names = list(mask)
    trainable = [i for i, n in enumerate(names) if bool(mask[n].any())]
    first = trainable[0] / max(len(names), 1) if trainable else None
    full = partial = frozen = 0
    entries = entries_in_full = 0
    rows_touched = rows_total = cols_touched = cols_total = 0
    for m in mask.values():
        c, n = int(m.sum()), m.numel()
        entries += c
        if c == n:
            full += 1
            entries_in_full += c
        elif c == 0:
            frozen += 1
        else:
            partial += 1
            if m.dim() >= 2:
                flat = m.reshape(m.shape[0], -1)
                rows_touched += int(flat.any(1).sum())
                rows_total += flat.shape[0]
                cols_touched += int(flat.any(0).sum())
                cols_total += flat.shape[1]
    total = sum(m.numel() for m in mask.values())
    return {"density": entries / max(total, 1), "tensors": len(mask), "first_trainable_depth": first,
            "full": full, "partial": partial,
            "frozen": frozen, "share_in_full": entries_in_full / max(entries, 1),
            "partial_rows_touched": rows_touched / max(rows_total, 1) if rows_total else None,
            "partial_cols_touched": cols_touched / max(cols_total, 1) if cols_total else None}


# --------------------------------------------------------------------------------------------
def job_mask(a: dict) -> dict:
    model, task, data, _ = setup(a["model"], a["task"], a["device"], max_val=a["samples"], max_train=8, max_test=8)
    return calibrate_and_save(model, task, data, a)


def calibrate_and_save(model, task, data, a: dict) -> dict:
    """A real TaLoS mask (sparsity 0.9, ``a["samples"]`` validation examples, ``a["chunk_size"]``) of ``model``
    on ``task``, saved to ``a["out"]``: its calibration time, sample count and structure."""
    from talos_core.masks import CalibrationConfig, calibrate_talos, calibration_split
    from talos_core.store import save_mask

    calib = calibration_split(data.val, a["samples"], 0)
    cfg = CalibrationConfig(sparsity=SPARSITY, samples=a["samples"], chunk_size=a["chunk_size"],
                            batch_size=min(32, a["samples"]))
    t0 = time.perf_counter()
    mask = calibrate_talos(model, calib, task, cfg)
    sync(model.device)
    elapsed = time.perf_counter() - t0
    Path(a["out"]).parent.mkdir(parents=True, exist_ok=True)
    save_mask(mask, Path(a["out"]))
    return {"calibration_s": elapsed, "samples": len(calib), **mask_structure(mask)}


def _train_config(model_name: str, steps: int, batch: int):
    from talos_core.models import get_model_spec
    from talos_core.training import TrainConfig

    d = get_model_spec(model_name).defaults
    return TrainConfig(steps=steps, batch_size=batch, lr=d.get("lr", 1e-5), weight_decay=0.1,
                       warmup_steps=0, grad_clip=1.0, seed=0)


def _plan(model, kind: str, mask_path: str | None):
    from talos_core.store import load_mask
    from talos_core.training import plan_from_mask

    if kind == "nonlinear":
        return {n: None for n, _ in model.named_parameters()}
    if kind == "talos":
        mask = load_mask(Path(mask_path))
        return plan_from_mask({n: m.to(model.device) for n, m in mask.items()})
    raise ValueError(kind)


def _one_step(model, data, task, plan, config, checkpointing: bool = False) -> tuple[float, float, dict]:
    from talos_core.training import finetune

    kw = {"checkpoint_activations": True} if checkpointing else {}
    with _fwd_bwd_cpu_time() as cpu:
        res = finetune(model, data.train, task, plan, config, progress=False, **kw)
    timings = {**res.timings, "fwd_bwd_cpu_s_mean": statistics.fmean(cpu) if cpu else float("nan")}
    return res.timings["fwd_bwd_s_mean"], res.timings["opt_s_mean"], timings


@contextmanager
def _fwd_bwd_cpu_time():
    """Process CPU time of each of ``finetune``'s forward+backward calls (a list filled while active).

    With one thread, CPU time counts only the cycles this process got: unlike wall time it does not
    grow when other jobs share the cores, so ratios of it stay meaningful on a loaded machine. The
    engine's ``_forward_backward`` is wrapped, not changed (same arguments, same result).
    """
    from talos_core import training

    times: list[float] = []
    inner = training._forward_backward

    def timed_fb(*args, **kwargs):
        t0 = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            times.append(time.process_time() - t0)

    training._forward_backward = timed_fb
    try:
        yield times
    finally:
        training._forward_backward = inner


def job_train_time(a: dict) -> dict:
    """Per-step times of non-linear FT and TaLoS on the same model, batch and data, interleaved.

    ``finetune`` is called with one step per call (same batch each time, fresh optimizer state, so
    every step costs the same), alternating the two plans so that a shared CPU's load hits both
    alike; after one warm-up step each, ``iters`` steps each are timed and their medians reported.
    """
    batch, iters = a["batch"], a["iters"]
    model, task, data, _ = setup(a["model"], a["task"], a["device"], max_train=batch, max_val=8, max_test=8)
    plans = {"nonlinear": _plan(model, "nonlinear", None), "talos": _plan(model, "talos", a["mask"])}
    ckpt = {k: False for k in plans}
    if a.get("checkpointing"):
        plans["talos_ckpt"], ckpt["talos_ckpt"] = plans["talos"], True
    one = _train_config(a["model"], 1, batch)
    times: dict[str, dict[str, list]] = {k: {"fb": [], "opt": [], "cpu": []} for k in plans}
    info = {}
    for i in range(iters + 1):
        order = list(plans) if i % 2 == 0 else list(plans)[::-1]
        for k in order:
            fb, opt, info[k] = _one_step(model, data, task, plans[k], one, ckpt[k])
            if i > 0:  # step 0 is the warm-up
                times[k]["fb"].append(fb)
                times[k]["opt"].append(opt)
                times[k]["cpu"].append(info[k]["fwd_bwd_cpu_s_mean"])
    out = {}
    for k, t in times.items():
        fb, opt = statistics.median(t["fb"]), statistics.median(t["opt"])
        out[k] = {"fwd_bwd_s": fb, "fwd_bwd_min": min(t["fb"]), "fwd_bwd_max": max(t["fb"]), "opt_s": opt,
                  "opt_min": min(t["opt"]), "opt_max": max(t["opt"]), "iter_s": fb + opt,
                  "fwd_bwd_cpu_s": statistics.median(t["cpu"]),
                  "trainable_entries": info[k]["trainable_entries"], "trainable_tensors": info[k]["trainable_tensors"]}
    part = data.train.take(list(range(min(batch, len(data.train)))))
    inputs = {k: v.to(model.device) for k, v in model.prepare(part.inputs, task).items()}
    for p in model.parameters():
        p.requires_grad_(False)
    with torch.no_grad():
        fwd = timed(lambda: model(**inputs), model.device, iters + 1)[1:]
    out["forward_s"] = statistics.median(fwd)
    out["params"] = model.num_parameters()
    return out


def job_train_mem(a: dict) -> dict:
    """Peak memory of fine-tuning steps of one plan (fresh process): warm-up step, reset, 2 steps."""
    batch = a["batch"]
    model, task, data, base = setup(a["model"], a["task"], a["device"], max_train=batch, max_val=8, max_test=8)
    device = model.device
    ckpt = a["plan"].endswith("_ckpt")
    plan = _plan(model, a["plan"].removesuffix("_ckpt"), a.get("mask"))
    _one_step(model, data, task, plan, _train_config(a["model"], 1, batch), ckpt)
    kind = reset_peak_memory(device)
    start = current_memory_mb(device)  # live memory before the measured steps: the model, data, libraries
    _one_step(model, data, task, plan, _train_config(a["model"], 2, batch), ckpt)
    peak = peak_memory_mb(device)
    tensors = [*model.parameters(), *model.buffers()]
    return {"peak_mb": peak, "peak_kind": kind, "model_mb": start, "base_mb": base if device.type == "cpu" else 0.0,
            "param_mb": sum(t.numel() * t.element_size() for t in tensors) / 2**20}


def _compare(vmap_scores: dict, loop_scores: dict) -> dict:
    """Agreement of two score dicts: max |Δ| relative to the largest score, relative L2 error."""
    num = den = 0.0
    max_abs = max(float(s.abs().max()) for s in loop_scores.values())
    worst = 0.0
    for n, ref in loop_scores.items():
        d = (vmap_scores[n].float() - ref.float())
        num += float((d.double() ** 2).sum())
        den += float((ref.double() ** 2).sum())
        worst = max(worst, float(d.abs().max()))
    return {"max_abs_rel": worst / max(max_abs, 1e-30), "rel_l2": math.sqrt(num / max(den, 1e-300))}


def job_calib(a: dict) -> dict:
    from talos_core.fisher import fisher_scores, fisher_scores_loop
    from talos_core.masks import CalibrationConfig, calibrate_talos, calibration_split, keep_lowest
    from talos_core.models import get_model_spec
    from talos_core.store import save_mask
    from talos_core.training import finetune, plan_from_mask

    n_scores, n_cal = a["score_samples"], a["mask_samples"]
    batch, iters = a["batch"], a["iters"]
    model, task, data, _ = setup(a["model"], a["task"], a["device"], max_val=max(n_scores, n_cal),
                                 max_train=batch * (iters + 1), max_test=8)
    device = model.device
    names = model.maskable_names()
    out: dict = {}

    # 1. per-sample Fisher scores: vmap vs one backward per sample, same data and draws
    calib = calibration_split(data.val, n_scores, 0)
    warm = calibration_split(data.val, 2, 1)
    fisher_scores(model, warm, task, names, generator=torch.Generator().manual_seed(0), chunk_size=a["chunk_size"])
    fisher_scores_loop(model, warm, task, names, generator=torch.Generator().manual_seed(0))
    box: dict = {}
    t_vmap, t_loop = [], []
    for _ in range(a.get("reps", 2)):  # interleaved; the minimum of each is reported
        t_vmap += timed(lambda: box.__setitem__("v", fisher_scores(
            model, calib, task, names, generator=torch.Generator().manual_seed(0), batch_size=32,
            chunk_size=a["chunk_size"])), device)
        t_loop += timed(lambda: box.__setitem__("l", fisher_scores_loop(
            model, calib, task, names, generator=torch.Generator().manual_seed(0), batch_size=32)), device)
    out.update(scores_samples=len(calib), vmap_s=min(t_vmap), loop_s=min(t_loop), **_compare(box["v"], box["l"]))
    elig = {n: torch.ones_like(s, dtype=torch.bool) for n, s in box["l"].items()}
    total = sum(m.numel() for m in elig.values())
    k = int(0.1 * total)
    m_v, m_l = keep_lowest(box["v"], elig, k), keep_lowest(box["l"], elig, k)
    out["mask_agreement"] = sum(int((m_v[n] == m_l[n]).sum()) for n in names) / total
    box.clear()

    # 2. a full TaLoS calibration (4 rounds) on n_cal samples
    cal_split = calibration_split(data.val, n_cal, 0)
    cfg = CalibrationConfig(sparsity=SPARSITY, samples=n_cal, chunk_size=a["chunk_size"], batch_size=32)
    sync(device)
    t0 = time.perf_counter()
    log: list[dict] = []
    mask = calibrate_talos(model, cal_split, task, cfg, log=log)
    sync(device)
    t_cal = time.perf_counter() - t0
    scoring = sum(r.get("scores_s", 0.0) for r in log)  # the part that grows with the sample count
    fixed = t_cal - scoring if scoring else 0.0
    if a.get("mask_out"):
        save_mask(mask, Path(a["mask_out"]))
    out.update(calibration_s=t_cal, calibration_samples=len(cal_split), rounds=cfg.rounds, scoring_s=scoring,
               select_s=fixed, scored_tensors=[r.get("scored_tensors") for r in log])

    # 3. the TaLoS fine-tuning this calibration serves (its per-step cost with this mask)
    plan = plan_from_mask(mask)
    finetune(model, data.train, task, plan, _train_config(a["model"], 1, batch), progress=False)
    res = finetune(model, data.train, task, plan, _train_config(a["model"], iters, batch), progress=False)
    step_s = res.timings["fwd_bwd_s_mean"] + res.timings["opt_s_mean"]
    d = get_model_spec(a["model"]).defaults
    # scoring scales with the number of samples; per-round selection (a k-th value over all
    # maskable entries) does not — older engines that log no timings are scaled as a whole
    calib_proj = (scoring or t_cal) * d["calib_samples"] / len(cal_split) + fixed
    ft_proj = step_s * (d["batch_size"] / batch) * d["steps"]
    out.update(step_s=step_s, ft_batch=batch, default_steps=d["steps"], default_batch=d["batch_size"],
               default_calib_samples=d["calib_samples"], calib_projected_s=calib_proj, ft_projected_s=ft_proj)
    return out


def _in_precision(precision: str, fn):
    from talos_core.inference.precision import eval_precision

    with eval_precision(precision):
        return fn()


def job_grid(a: dict) -> dict:
    """One evaluation pass of θ0 + Σ α τ (in-place apply + predict + restore) vs a plain pass."""
    from talos_core.inference.forward import base_and_jvps, predict
    from talos_core.inference.precision import eval_precision, native_bf16
    from talos_core.masks import random_mask
    from talos_core.vectors import TaskVector, apply_vectors

    n = a["examples"]
    model, task, data, _ = setup(a["model"], a["task"], a["device"], max_test=n, max_train=8, max_val=8)
    device = model.device
    params = dict(model.named_parameters())
    g = torch.Generator().manual_seed(0)

    def sparse_vector(seed: int) -> TaskVector:
        mask = random_mask(model, 1.0 - SPARSITY, seed)
        vals, idx, shapes = {}, {}, {}
        for name, m in mask.items():
            flat = torch.nonzero(m.reshape(-1).cpu()).view(-1)
            if flat.numel() == 0:
                continue
            idx[name], shapes[name] = flat, tuple(m.shape)
            vals[name] = torch.randn(flat.numel(), generator=g) * 1e-3
        return TaskVector.from_entries(vals, idx, shapes)

    def dense_vector() -> TaskVector:
        return TaskVector.from_entries({n: torch.randn(p.shape, generator=g) * 1e-3 for n, p in params.items()},
                                       {n: None for n in params}, {n: tuple(p.shape) for n, p in params.items()})

    reps = a["reps"]
    split = data.test
    bs = a.get("eval_batch", 128)
    vectors = {"sparse": (sparse_vector(1), sparse_vector(2)), "dense": (dense_vector(), dense_vector())}
    grid = [(-3.0, 3.0), (-1.42, 0.47), (0.79, -2.05), (2.37, 1.11), (0.16, -0.16)]
    runs = {"plain": lambda i: predict(model, task, split, batch_size=bs)}
    for kind, (t1, t2) in vectors.items():
        runs[f"{kind}_alpha"] = lambda i, t1=t1: predict(model, task, split, [(t1, 0.2 * (i + 1))], batch_size=bs)
        runs[f"{kind}_xi"] = lambda i, t1=t1, t2=t2: predict(
            model, task, split, [(t1, grid[i % len(grid)][0]), (t2, grid[i % len(grid)][1])], batch_size=bs)
    # evaluation precision: the grid timings above are fp32; the same plain pass and one JVP pass of the
    # linearized model (base + tangent, as the preview cache and linearized methods use) in fp32 and bf16
    dense_tv = vectors["dense"][0]
    runs["plain_bf16"] = lambda i: _in_precision("bf16", lambda: predict(model, task, split, batch_size=bs))
    runs["jvp_fp32"] = lambda i: _in_precision("fp32", lambda: base_and_jvps(model, task, split, [dense_tv],
                                                                              batch_size=bs))
    runs["jvp_bf16"] = lambda i: _in_precision("bf16", lambda: base_and_jvps(model, task, split, [dense_tv],
                                                                              batch_size=bs))
    with eval_precision("fp32"):
        for k in ("plain", "plain_bf16", "jvp_fp32", "jvp_bf16"):
            runs[k](0)  # warm-up
        times: dict[str, list[float]] = {k: [] for k in runs}
        keys = list(runs)
        for i in range(reps):  # rotate the order so that load changes hit every kind alike
            for k in keys[i % len(keys):] + keys[: i % len(keys)]:
                times[k] += timed(lambda k=k, i=i: runs[k](i), device)
        fp32_pred = predict(model, task, split, batch_size=bs)
        bf16_pred = _in_precision("bf16", lambda: predict(model, task, split, batch_size=bs))
    out = {"examples": len(split), "plain_s": statistics.median(times["plain"]), "reps": reps,
           "precision": {"plain_fp32_s": statistics.median(times["plain"]),
                         "plain_bf16_s": statistics.median(times["plain_bf16"]),
                         "jvp_fp32_s": statistics.median(times["jvp_fp32"]),
                         "jvp_bf16_s": statistics.median(times["jvp_bf16"]),
                         "agreement": float((fp32_pred == bf16_pred).mean()),
                         "native_bf16": native_bf16(device)}}
    for kind, (t1, t2) in vectors.items():
        def apply_only(t1=t1, t2=t2) -> None:
            with apply_vectors(model, [(t1, 0.3), (t2, -0.7)]):
                pass

        apply = timed(apply_only, device, 3)
        out[kind] = {"alpha_point_s": statistics.median(times[f"{kind}_alpha"]),
                     "xi_point_s": statistics.median(times[f"{kind}_xi"]),
                     "apply_restore_s": statistics.median(apply), "nnz": t1.nnz() + t2.nnz()}
    return out


#: the variants ``job_train_precision`` compares: name → (training precision, CNN input channels-last on a CPU;
#: None keeps the model's default)
TRAIN_VARIANTS = {"fp32": ("fp32", None), "bf16": ("bf16", None),
                  "contiguous": ("fp32", False), "channels-last": ("fp32", True)}


def job_train_precision(a: dict) -> dict:
    """One method trained in two variants side by side (``a["order"]``, names of :data:`TRAIN_VARIANTS`: fp32 and
    bf16 autocast, or contiguous and channels-last CNN input): per-step wall times and validation accuracy.

    Two model instances (one per variant) train in two threads that take turns step by step (lock-step:
    exactly one trains at any moment, the order of ``a["order"]`` first), so a shared CPU's load changes hit
    both alike. Each thread runs the method as ``talos finetune`` does (``MethodContext`` from a
    ``FinetuneRequest``: calibration, schedule, the method's own forward), with ``train_config.precision`` set
    to its precision. A step's time runs from when the thread gets its turn to the end of its step
    (``on_step``); the first step, which also holds the method's set-up (TaLoS calibration), is left out of the
    median. Afterwards each task vector is evaluated on the validation split in fp32, as the run would be, by
    its own variant's model (``eval_s``: that evaluation's wall time).
    """
    import threading
    from dataclasses import replace

    from talos_core.inference.forward import accuracy
    from talos_core.inference.precision import eval_precision, native_bf16
    from talos_core.pipeline import CalibrationSettings, FinetuneRequest, load_request_data
    from talos_core.runners import get_method
    from talos_core.runners.base import MethodContext

    order = list(a["order"])
    req = FinetuneRequest(model=a["model"], task=a["task"], method=a["method"], steps=a["steps"],
                          batch_size=a["batch"], lr=a["lr"], max_train=a["max_train"], max_val=a["max_val"],
                          max_test=8, calibration=CalibrationSettings(calib_samples=a["calib_samples"]),
                          device=a["device"])
    req.validate()
    method = get_method(req.method)
    data = load_request_data(req)
    models = {}
    for p in order:
        models[p], task, _, _ = setup(a["model"], a["task"], a["device"], max_train=8, max_val=8, max_test=8)
        if TRAIN_VARIANTS[p][1] is not None:  # the memory-format variants (CNN models)
            models[p].channels_last_on_cpu = TRAIN_VARIANTS[p][1]
    cond = threading.Condition()
    state = {"turn": 0, "done": set()}
    times: dict[str, list[float]] = {p: [] for p in order}
    outs, errors = {}, []

    def hand_over(i: int, finished: bool = False) -> None:
        with cond:
            if finished:
                state["done"].add(i)
            others = [j for j in range(len(order)) if j not in state["done"] and j != i]
            state["turn"] = others[0] if others else (i if i not in state["done"] else -1)
            cond.notify_all()

    def wait_turn(i: int) -> None:
        with cond:
            cond.wait_for(lambda: state["turn"] == i)

    def train(i: int, p: str) -> None:
        clock = {"start": 0.0}

        def on_step(step: int, record: dict) -> None:
            times[p].append(time.perf_counter() - clock["start"])
            if step < req.train_config().steps:
                hand_over(i)
                wait_turn(i)
                clock["start"] = time.perf_counter()

        ctx = MethodContext(models[p], task, data, replace(req.train_config(), precision=TRAIN_VARIANTS[p][0]),
                            sparsity=req.sparsity,
                            seed=req.seed, calib_config=req.calib_config() if method.calibrates else None,
                            progress=False, on_step=on_step)
        wait_turn(i)
        clock["start"] = time.perf_counter()
        try:
            outs[p] = method.run(ctx)
        except BaseException as exc:  # reported by the parent; the other thread goes on alone
            errors.append(f"{p}: {type(exc).__name__}: {exc}")
        finally:
            hand_over(i, finished=True)

    threads = [threading.Thread(target=train, args=(i, p)) for i, p in enumerate(order)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("; ".join(errors))
    out = {"native_bf16": native_bf16(a["device"]), "val_examples": len(data.val), "train_examples": len(data.train),
           "order": order}
    with eval_precision("fp32"):
        zero_shot = accuracy(models[order[0]], task, data.val, batch_size=32)
        for p in order:
            res = outs[p]
            losses = [h["loss"] for h in res.history]
            start = time.perf_counter()
            val_acc = accuracy(models[p], task, data.val, [(res.vector, 1.0)], mode=method.eval_mode, batch_size=32)
            out[p] = {"step_s_median": statistics.median(times[p][1:] or times[p]), "step_s": times[p],
                      "val_acc": val_acc, "eval_s": time.perf_counter() - start,
                      "final_loss_mean5": sum(losses[-5:]) / len(losses[-5:]), "vector_norm": res.vector.norm()}
    ref, other = outs[order[0]].vector.to_dense(), outs[order[1]].vector.to_dense()
    diff = math.sqrt(sum(float((ref[n] - other[n]).pow(2).sum()) for n in ref))
    out["zero_shot_val_acc"] = zero_shot
    out["vector_rel_diff"] = diff / max(outs[order[0]].vector.norm(), 1e-12)
    return out


def job_bound(a: dict) -> dict:
    """The exact-gradient bound (:func:`bench.bound.exact_bound`) of the case's model, batch and cached mask."""
    from bench.bound import exact_bound
    from talos_core.store import load_mask

    batch = a["batch"]
    model, task, data, _ = setup(a["model"], a["task"], a["device"], max_train=batch, max_val=8, max_test=8)
    part = data.train.take(list(range(min(batch, len(data.train)))))
    inputs = {k: v.to(model.device) for k, v in model.prepare(part.inputs, task).items()}
    mask = {n: m.to(model.device) for n, m in load_mask(a["mask"]).items()}
    model.eval()
    return exact_bound(model, lambda: model(**inputs), mask)


JOBS = {"mask": job_mask, "train_time": job_train_time, "train_mem": job_train_mem, "calib": job_calib,
        "grid": job_grid, "train_precision": job_train_precision, "bound": job_bound}


def main() -> None:
    job, args = sys.argv[1], json.loads(sys.argv[2])
    if args.get("threads"):
        torch.set_num_threads(int(args["threads"]))
    torch.manual_seed(0)
    if job not in JOBS:
        raise SystemExit(f"unknown job {job!r}; choose one of {sorted(JOBS)}")
    emit(JOBS[job](args))


if __name__ == "__main__":
    main()
