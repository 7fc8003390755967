"""Benchmark: the paper's Table 3 analogue (cost of one fine-tuning iteration) and per-sample Fisher vs a loop.

``python -m bench.bench_table3 [--device cuda] [--quick] [--models ...] [--batch N] [--warmup N] [--iters N]
[--json out.json]``

Paper, Table 3 (``tab:efficiency``) and Appendix "Measuring computational costs and memory footprint": average
forward+backward time, optimizer-step time, their sum (the iteration) and peak memory of fine-tuning at batch 128
for non-linear FT, Linearized FT, L-LoRA, LoTA and TaLoS. Here, for random-init CLIP ViT-B/32 and ViT-L/14
(``clip-vit-b-32-random``, ``clip-vit-l-14-random``; weights do not change the cost of a step) at batch 128, each
method is measured in its own fresh worker process (so one configuration's peak memory never leaks into another's,
and an out-of-memory configuration becomes a row instead of ending the run), one after another in one run:

* every method runs the project's own training step — :func:`talos_core.training.finetune` with the plan and the
  ``logits_fn`` its method entry uses (``talos_core/methods/``): non-linear FT trains every parameter; Linearized FT
  every parameter through :func:`~talos_core.runners.baselines.linearized_training_logits` (a JVP per batch);
  L-LoRA rank-16 Q/V factors of a :class:`~talos_core.runners.lora.LoraAdapter` (linearized); LoTA the top-10%
  ``|Δθ|`` mask (:func:`~talos_core.runners.baselines.lota_mask`) of a short dense calibration fine-tune on
  validation examples (``--lota-steps`` steps: fewer than the method's default, which only changes which entries
  are picked, not how a step is computed); TaLoS a real calibrated 90%-sparse mask
  (:func:`talos_core.masks.calibrate_talos`, 4 rounds on ``mask_samples`` validation examples, cached in
  ``bench/.cache``);
* precision: the training-precision rule (``auto``: bf16 autocast with fp32 master weights on CUDA, fp32 on
  CPU; ``--precision`` overrides), recorded per row;
* ``--warmup`` steps first (one ``finetune`` call), then ``--iters`` timed steps (a second call): mean ± std of
  the forward+backward and of the optimizer step (``finetune``'s own timings, CUDA synchronized around each);
  the iteration is their sum, as in the paper;
* peak memory: ``torch.cuda.max_memory_allocated`` over the timed call (reset at its start, so it counts the
  model, θ0's copy, the optimizer state and the step's activations); ``max_memory_reserved`` beside it (closer to
  what NVML, the paper's monitor, sees). On CPU: the process's peak RSS (see ``bench/common.py``).

Ratios against non-linear FT of the same run (iteration speed-up, peak-memory ratio) are printed beside the
paper's published values and the goals we hold it to (TaLoS: speed-up ≥ 2.26× ViT-B/32, ≥ 3.78× ViT-L/14; memory ratio
≤ 0.72, ≤ 0.42). Every table names the device (``torch.cuda.get_device_name``).

Per-sample Fisher (:func:`talos_core.fisher.fisher_scores`, the calibration engine) vs one backward per sample
(:func:`~talos_core.fisher.fisher_scores_loop`) on ViT-B/32, same examples and sampled labels: times, speed-up
(goal ≥ 5×) and agreement.

``--bound`` adds, per model, the exact-gradient bound of the same TaLoS mask at the same batch
(:func:`bench.bound.exact_bound`: the multiply-adds and tensor bytes one step must cost with exact gradients): the
best fwd+bwd speed-up over non-linear FT any implementation computing those gradients can reach, and the measured
fwd+bwd speed-up as a fraction of it (goal ≥ 0.9). Its memory ratio counts fp32 activations.

Sizes: CUDA — both CLIPs, batch 128, 3 warm-up + 10 timed steps, 64 Fisher samples; CPU — ViT-B/32 at batch 8,
1 + 3 steps; ``--quick`` — tiny-clip at batch 32, 1 + 2 steps (a smoke test of every code path).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from bench.common import (
    CASES,
    Case,
    common_parser,
    fmt,
    machine_line,
    markdown_table,
    mask_cache_path,
    ratio,
    resolve_device,
    run_worker,
    write_json,
)

SPARSITY = 0.9
LORA_RANK = 16
METHODS = {"nonlinear": "Non-linear FT", "linearized": "Linearized FT", "llora": f"L-LoRA (r={LORA_RANK})",
           "lota": "LoTA (90% sparse)", "talos": "TaLoS (90% sparse)"}

#: the paper's Table 3 (tab:efficiency): (fwd+bwd s, optimizer step s, iteration s, peak memory GiB) per method
PUBLISHED = {
    "clip-vit-b-32-random": {"nonlinear": (0.3608, 0.0114, 0.3722, 6.5), "linearized": (0.6858, 0.0103, 0.6961, 10.2),
                             "llora": (0.3270, 0.0036, 0.3306, 5.3), "lota": (0.3289, 0.1269, 0.4558, 6.8),
                             "talos": (0.1256, 0.0388, 0.1644, 4.7)},
    "clip-vit-l-14-random": {"nonlinear": (1.2174, 0.0156, 1.2330, 18.6), "linearized": (1.6200, 0.0262, 1.6462, 21.3),
                             "llora": (0.5153, 0.0082, 0.5235, 9.7), "lota": (0.8438, 0.4449, 1.2887, 15.4),
                             "talos": (0.1891, 0.1372, 0.3263, 7.8)},
}
PAPER_ARCH = {"clip-vit-b-32-random": "ViT-B/32", "clip-vit-l-14-random": "ViT-L/14"}
WORKER = "bench.bench_table3"


# --------------------------------------------------------------------------------------------
# worker side (``python -m bench.bench_table3 JOB 'JSON'``)
# --------------------------------------------------------------------------------------------
def _setup(model_name: str, task_name: str, device: str, *, max_train: int, max_val: int):
    """Model with ``task_name``'s head on ``device`` and the task's (subsampled) data.

    On CUDA, CLIP's text tower builds the head on the GPU (seconds instead of a minute on the CPU for ViT-L/14)
    and is dropped afterwards, like ``bench._worker.setup``, so memory counts only what training touches.
    """
    import torch

    from talos_core.models import load_model
    from talos_core.tasks import get_task, load_task

    task = get_task(task_name)
    data = load_task(task_name, max_train=max_train, max_val=max_val, max_test=8)
    dev = torch.device(device)
    model = load_model(model_name)
    text = getattr(model, "_text", None)
    if isinstance(text, dict) and dev.type == "cuda":
        text["clip"].to(dev)
    model.set_head(model.build_head(task), task.name)
    if text is not None:
        model._text = None
    del text
    model = model.to(dev)
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return model, task, data


def _train_config(model_name: str, steps: int, batch: int, precision: str):
    from talos_core.models import get_model_spec
    from talos_core.training import TrainConfig

    d = get_model_spec(model_name).defaults
    return TrainConfig(steps=steps, batch_size=batch, lr=d.get("lr", 1e-5), weight_decay=0.1, warmup_steps=0,
                       grad_clip=1.0, seed=0, precision=precision)


def _is_oom(exc: BaseException) -> bool:
    import torch

    oom = getattr(torch.cuda, "OutOfMemoryError", ())
    return (bool(oom) and isinstance(exc, oom)) or isinstance(exc, MemoryError) or "out of memory" in str(exc)


def _method_setup(method: str, model, task, data, a: dict, config) -> dict:
    """What ``finetune`` gets for ``method``, built as its entry in ``talos_core/methods`` builds it:
    ``{"model", "plan", "logits_fn", "info"}``."""
    import torch

    from talos_core.masks import calibration_split
    from talos_core.runners.baselines import linearized_training_logits, lota_mask
    from talos_core.runners.lora import LoraAdapter, lora_targets
    from talos_core.store import load_mask
    from talos_core.training import default_logits, finetune, plan_from_mask

    params = dict(model.named_parameters())
    if method == "nonlinear":
        return {"model": model, "plan": {n: None for n in params}, "logits_fn": default_logits, "info": {}}
    if method == "linearized":
        theta0 = {n: p.detach().clone() for n, p in params.items()}
        return {"model": model, "plan": {n: None for n in params}, "logits_fn": linearized_training_logits(theta0),
                "info": {}}
    if method == "llora":
        adapter = LoraAdapter(model, lora_targets(model), LORA_RANK, float(LORA_RANK), 0)
        model.eval()  # as run_llora: finetune() switches only the adapter
        return {"model": adapter, "plan": {n: None for n, _ in adapter.named_parameters()},
                "logits_fn": default_logits, "info": {"lora_targets": len(adapter.blocks)}}
    if method == "talos":
        mask = {n: m.to(model.device) for n, m in load_mask(Path(a["mask"])).items()}
        return {"model": model, "plan": plan_from_mask(mask), "logits_fn": default_logits, "info": {"mask": a["mask"]}}
    if method == "lota":
        calib = calibration_split(data.val, a["lota_samples"], 0)
        names = model.maskable_names()
        t0 = time.perf_counter()
        run = finetune(model, calib, task, {n: None for n in names}, replace(config, steps=a["lota_steps"]),
                       progress=False)
        mask = lota_mask({n: run.vector.dense(n) for n in names}, 1.0 - SPARSITY)
        elapsed = time.perf_counter() - t0
        mask = {n: m.to(model.device) for n, m in mask.items()}
        del run
        gc.collect()
        if model.device.type == "cuda":
            torch.cuda.empty_cache()
        return {"model": model, "plan": plan_from_mask(mask), "logits_fn": default_logits,
                "info": {"lota_calibration_steps": a["lota_steps"], "lota_calibration_samples": len(calib),
                         "lota_calibration_s": elapsed}}
    raise ValueError(f"unknown method {method!r}")


def job_train(a: dict) -> dict:
    """One method's fine-tuning iteration: warm-up call, then a timed call of ``iters`` steps (peak memory reset
    at its start). An out-of-memory error is returned as ``{"oom": True, ...}``."""
    import torch

    from talos_core.memory import peak_memory_mb
    from talos_core.training import finetune

    device = torch.device(a["device"])
    out: dict = {"method": a["method"], "batch": a["batch"], "iters": a["iters"], "warmup": a["warmup"]}
    try:
        model, task, data = _setup(a["model"], a["task"], a["device"], max_train=a["batch"],
                                   max_val=max(a.get("lota_samples", 8), 8))
        out["params"] = model.num_parameters()
        config = _train_config(a["model"], a["iters"], a["batch"], a["precision"])
        m = _method_setup(a["method"], model, task, data, a, config)
        kw = dict(progress=False, logits_fn=m["logits_fn"])
        finetune(m["model"], data.train, task, m["plan"], replace(config, steps=max(a["warmup"], 1)), **kw)
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
            out["model_mb"] = torch.cuda.memory_allocated(device) / 2**20
        res = finetune(m["model"], data.train, task, m["plan"], config, **kw)
        t = res.timings
        out.update(m["info"])
        out.update(fwd_bwd_s=t["fwd_bwd_s_mean"], fwd_bwd_std=t["fwd_bwd_s_std"], opt_s=t["opt_s_mean"],
                   opt_std=t["opt_s_std"], iter_s=t["fwd_bwd_s_mean"] + t["opt_s_mean"],
                   peak_mb=t["peak_memory_mb"], peak_kind=t["peak_memory_kind"], precision=res.precision,
                   trainable_entries=t["trainable_entries"], trainable_tensors=t["trainable_tensors"],
                   final_loss=res.history[-1]["loss"] if res.history else None)
        if device.type == "cuda":
            out["reserved_mb"] = torch.cuda.max_memory_reserved(device) / 2**20
    except Exception as exc:  # an OOM configuration is a result row, not a crash
        if not _is_oom(exc):
            raise
        out.update(oom=True, error=f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}",
                   peak_mb=peak_memory_mb(device) if device.type == "cuda" else None)
    return out


def job_mask(a: dict) -> dict:
    """A real TaLoS mask (4 rounds, sparsity 0.9, ``samples`` validation examples), saved to ``a["out"]``."""
    from bench._worker import calibrate_and_save

    model, task, data = _setup(a["model"], a["task"], a["device"], max_train=8, max_val=a["samples"])
    return calibrate_and_save(model, task, data, a)


def job_fisher(a: dict) -> dict:
    """Per-sample Fisher scores: the engine (``fisher_scores``, engine ``auto``) vs one backward per sample, on
    the same ``samples`` validation examples and draws; minimum of ``reps`` interleaved timings of each."""
    import torch

    from bench._worker import _compare
    from bench.common import timed
    from talos_core import fisher as fisher_mod
    from talos_core.fisher import fisher_scores, fisher_scores_loop
    from talos_core.masks import calibration_split

    model, task, data = _setup(a["model"], a["task"], a["device"], max_train=8, max_val=a["samples"])
    device = model.device
    names = model.maskable_names()
    calib = calibration_split(data.val, a["samples"], 0)
    warm = calibration_split(data.val, 2, 1)
    kw = dict(batch_size=a["batch_size"])
    fisher_scores(model, warm, task, names, generator=torch.Generator().manual_seed(0), chunk_size=a["chunk_size"],
                  **kw)
    fisher_scores_loop(model, warm, task, names, generator=torch.Generator().manual_seed(0), **kw)
    box: dict = {}
    t_fast, t_loop = [], []
    for _ in range(a["reps"]):
        t_fast += timed(lambda: box.__setitem__("f", fisher_scores(
            model, calib, task, names, generator=torch.Generator().manual_seed(0), chunk_size=a["chunk_size"],
            **kw)), device)
        t_loop += timed(lambda: box.__setitem__("l", fisher_scores_loop(
            model, calib, task, names, generator=torch.Generator().manual_seed(0), **kw)), device)
    verified = getattr(fisher_mod, "_LAYERWISE_VERIFIED", {}).get(model, {})
    engine = "layerwise" if any(v for v in verified.values()) else "vmap"
    return {"samples": len(calib), "engine_s": min(t_fast), "loop_s": min(t_loop), "engine": engine,
            "chunk_size": a["chunk_size"], "precision": "fp32", **_compare(box["f"], box["l"])}


WORKER_JOBS = {"t3_train": job_train, "t3_mask": job_mask, "t3_fisher": job_fisher}


def worker_main(argv: list[str]) -> None:
    import torch

    from bench.common import emit

    job, args = argv[0], json.loads(argv[1])
    if args.get("threads"):
        torch.set_num_threads(int(args["threads"]))
    torch.manual_seed(0)
    emit(WORKER_JOBS[job](args))


# --------------------------------------------------------------------------------------------
# orchestration
# --------------------------------------------------------------------------------------------
def sizes(device: str, quick: bool) -> dict:
    """Default models and sizes per device (see the module docstring)."""
    if quick:
        return {"models": ["tiny-clip"], "batch": 32, "warmup": 1, "iters": 2, "lota_steps": 2, "fisher_samples": 8,
                "fisher_model": "tiny-clip"}
    if device.startswith("cuda"):
        return {"models": ["clip-vit-b-32-random", "clip-vit-l-14-random"], "batch": 128, "warmup": 3, "iters": 10,
                "lota_steps": 10, "fisher_samples": 64, "fisher_model": "clip-vit-b-32-random"}
    return {"models": ["clip-vit-b-32-random"], "batch": 8, "warmup": 1, "iters": 3, "lota_steps": 2,
            "fisher_samples": 4, "fisher_model": "clip-vit-b-32-random"}


def device_name(device: str) -> str:
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        index = torch.device(device).index or 0
        return torch.cuda.get_device_name(index)
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return f"CPU {line.split(':', 1)[1].strip()}"
    except OSError:
        pass
    return f"CPU {cpu}"


def _case(model: str, device: str) -> Case:
    base = CASES.get(model) or Case(model, "digits", 8, 3, 8, 8, 4, 32)
    return base.for_device("cpu" if device == "cpu" else "cuda")


def ensure_mask(case: Case, device: str, timeout: float) -> dict:
    """The case's real TaLoS mask (calibrated in a worker unless cached); ``{"path", "calibration_s"?}``."""
    path = mask_cache_path(case, device)
    path = path.with_name("table3-" + path.name)
    out = {"path": str(path), "samples": case.mask_samples}
    if not path.exists():
        info = run_worker("t3_mask", {"model": case.model, "task": case.task, "device": device,
                                      "samples": case.mask_samples, "chunk_size": case.chunk_size, "out": str(path)},
                          timeout=timeout, module=WORKER)
        out.update(info)
        print(f"  calibrated the TaLoS mask on {info['samples']} samples in {info['calibration_s']:.1f}s "
              f"(density {info['density']:.3f}, {info['full']} full / {info['partial']} partial / "
              f"{info['frozen']} frozen tensors)", flush=True)
    else:
        print(f"  TaLoS mask from cache {path.name}", flush=True)
    return out


def _row_line(model: str, r: dict, name: str) -> str:
    if "error" in r:
        return f"  {model} {r['method']}: {'OUT OF MEMORY' if r.get('oom') else 'FAILED'} — {r['error']} [{name}]"
    peak = f"{r['peak_mb'] / 1024:.2f} GiB" if r.get("peak_mb") is not None else "–"
    return (f"  {model} {r['method']}: fwd+bwd {r['fwd_bwd_s']:.4f}±{r['fwd_bwd_std']:.4f} s, opt "
            f"{r['opt_s']:.4f} s, iteration {r['iter_s']:.4f} s, peak {peak} ({r['peak_kind']}), "
            f"{r['precision']}, {r['trainable_entries']:,} trainable entries [{name}]")


def _time_left(timeout: float, deadline: float | None) -> float | None:
    """The worker time limit: ``timeout``, capped by what is left of the budget (``None``: budget spent)."""
    if deadline is None:
        return timeout
    left = deadline - time.perf_counter()
    return None if left <= 0 else min(timeout, max(left, 30.0))


def run_bound(case: Case, device: str, batch: int, mask_path: str, timeout: float) -> dict:
    """The exact-gradient bound (``bench.bound.exact_bound``) of ``mask_path`` on the case's model at ``batch``."""
    return run_worker("bound", {"model": case.model, "task": case.task, "device": device, "batch": batch,
                                "mask": mask_path}, timeout=timeout)


def run_model(model: str, device: str, s: dict, precision: str, timeout: float, name: str,
              methods: list[str], *, deadline: float | None = None, on_row=None, bound: bool = False) -> dict:
    """Every method on ``model``, one worker each; a failing method becomes an error row, and so does one that
    the time budget (``deadline``, a ``perf_counter`` value) leaves no time for. ``on_row(result)`` is called
    with the (partial) result after each method."""
    case = _case(model, device)
    out: dict = {"model": model, "task": case.task, "batch": s["batch"], "device": device, "device_name": name,
                 "methods": {}}
    on_row = on_row or (lambda r: None)
    mask = None
    if "talos" in methods and _time_left(timeout, deadline) is not None:
        try:
            mask = ensure_mask(case, device, _time_left(timeout, deadline))
            out["mask"] = mask
        except Exception as exc:  # report and go on with the other methods
            out["mask_error"] = _short(exc)
            print(f"  TaLoS mask FAILED: {out['mask_error']}", flush=True)
    if bound and mask is not None and _time_left(timeout, deadline) is not None:
        try:
            b = run_bound(case, device, s["batch"], mask["path"], _time_left(timeout, deadline))
            out["bound"] = {k: b[k] for k in ("speedup", "speedup_rows", "memory_ratio", "forward_floor")}
            print(f"  exact-gradient bound at batch {s['batch']}: fwd+bwd speed-up ≤ {b['speedup']:.3f} "
                  f"(row-split weight gradients {b['speedup_rows']:.3f}), memory ratio {b['memory_ratio']:.3f} "
                  f"(fp32 activations), forward floor {b['forward_floor']:.2f}", flush=True)
        except Exception as exc:  # the bound is an extra row, never the end of the run
            out["bound"] = {"error": _short(exc)}
            print(f"  exact-gradient bound FAILED: {out['bound']['error']}", flush=True)
    for method in methods:
        args = {"model": model, "task": case.task, "device": device, "method": method, "batch": s["batch"],
                "warmup": s["warmup"], "iters": s["iters"], "precision": precision,
                "lota_steps": s["lota_steps"], "lota_samples": min(case.mask_samples, 128)}
        t0 = time.perf_counter()
        limit = _time_left(timeout, deadline)
        if limit is None:
            out["methods"][method] = {"method": method, "error": "skipped: the time budget (--budget) is spent"}
        elif method == "talos" and mask is None:
            out["methods"][method] = {"method": method, "error": "no TaLoS mask (calibration failed or skipped)"}
        else:
            if method == "talos":
                args["mask"] = mask["path"]
            try:
                r = run_worker("t3_train", args, timeout=limit, module=WORKER)
            except Exception as exc:  # one failing configuration must not stop the others
                r = {"method": method, "error": _short(exc), "oom": "out of memory" in str(exc).lower()}
            r["wall_s"] = time.perf_counter() - t0
            out["methods"][method] = r
        print(_row_line(model, out["methods"][method], name), flush=True)
        on_row(out)
    return out


def _short(exc: BaseException) -> str:
    import subprocess

    if isinstance(exc, subprocess.TimeoutExpired):
        return f"worker timed out after {exc.timeout:.0f} s"
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    # a worker's failure carries its traceback: the last line is the exception
    last = lines[-1] if lines else ""
    return f"{type(exc).__name__}: {(lines[0] if lines else '')[:120]}" + (f" … {last[:200]}" if len(lines) > 1 else "")


def run_fisher(model: str, device: str, s: dict, timeout: float) -> dict:
    case = _case(model, device)
    args = {"model": model, "task": case.task, "device": device, "samples": s["fisher_samples"],
            "chunk_size": case.chunk_size, "batch_size": 32, "reps": 2}
    return {"model": model, **run_worker("t3_fisher", args, timeout=timeout, module=WORKER)}


# --------------------------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------------------------
def _gib(mb: float | None) -> float | None:
    return None if mb is None else mb / 1024.0


def model_table(res: dict) -> str:
    name, model = res["device_name"], res["model"]
    pub = PUBLISHED.get(model, {})
    nl = res["methods"].get("nonlinear", {})
    rows, notes = [], []
    precisions = sorted({r["precision"] for r in res["methods"].values() if r.get("precision")})
    for method, label in METHODS.items():
        r = res["methods"].get(method)
        if r is None:
            continue
        p = pub.get(method)
        p_nl = pub.get("nonlinear")
        row = {"method": label, "device": name,
               "pub_it": p[2] if p else None,
               "pub_speed": ratio(p_nl[2], p[2]) if p and p_nl else None,
               "pub_mem": ratio(p[3], p_nl[3]) if p and p_nl else None}
        if "error" in r:
            row["fb"] = "OOM" if r.get("oom") else "failed"
            notes.append(f"- {label}: {'out of memory' if r.get('oom') else 'not measured'} ({r['error']})")
        else:
            row.update(fb=f"{r['fwd_bwd_s']:.4f} ± {r['fwd_bwd_std']:.4f}",
                       opt=f"{r['opt_s']:.4f} ± {r['opt_std']:.4f}",
                       it=r["iter_s"], peak=_gib(r.get("peak_mb")), res=_gib(r.get("reserved_mb")),
                       speed=ratio(nl.get("iter_s"), r["iter_s"]), fbs=ratio(nl.get("fwd_bwd_s"), r["fwd_bwd_s"]),
                       mem=ratio(r.get("peak_mb"), nl.get("peak_mb")), prec=r["precision"],
                       entries=f"{r['trainable_entries']:,}")
        rows.append(row)
    kind = next((r.get("peak_kind") for r in res["methods"].values() if r.get("peak_kind")), "")
    arch = PAPER_ARCH.get(model)
    title = (f"### Table 3 analogue — {model} (task {res['task']}, batch {res['batch']}, "
             f"{'/'.join(precisions) or '?'}) — device: {name}")
    table = markdown_table(rows, ["method", "device", "fb", "opt", "it", "peak", "res", "fbs", "speed", "mem", "prec",
                                  "entries", "pub_it", "pub_speed", "pub_mem"],
                           ["method", "device", "fwd+bwd s (mean ± std)", "optimizer step s", "iteration s",
                            f"peak GiB ({kind})", "peak reserved GiB", "fwd+bwd speed-up vs NL",
                            "iteration speed-up vs NL", "peak memory / NL", "precision", "trainable entries",
                            f"published iteration s{f' ({arch})' if arch else ''}", "published speed-up",
                            "published memory / NL"])
    extra = []
    if res.get("mask"):
        m = res["mask"]
        extra.append(f"TaLoS mask: real calibration (4 rounds, {m['samples']} validation samples, sparsity 0.9)"
                     + (f", {m['calibration_s']:.1f} s on {name}" if "calibration_s" in m else ", cached")
                     + ".")
    lota = res["methods"].get("lota", {})
    if "lota_calibration_steps" in lota:
        extra.append(f"LoTA mask: top-10% |Δθ| after {lota['lota_calibration_steps']} dense calibration steps on "
                     f"{lota['lota_calibration_samples']} validation examples (the method's default is 4 rounds × "
                     f"⌈n/32⌉ steps; only which entries are picked depends on it).")
    if res.get("mask_error"):
        extra.append(f"TaLoS mask calibration failed: {res['mask_error']}")
    return "\n".join([title, "", table, *(["", *notes] if notes else []), *(["", *extra] if extra else [])])


def goals_table(results: list[dict]) -> str:
    rows = []
    for res in results:
        pub = PUBLISHED.get(res["model"])
        nl, ts = res["methods"].get("nonlinear", {}), res["methods"].get("talos", {})
        if "error" in nl or "error" in ts or not nl or not ts:
            continue
        speed, mem = ratio(nl["iter_s"], ts["iter_s"]), ratio(ts.get("peak_mb"), nl.get("peak_mb"))
        goal_s = ratio(pub["nonlinear"][2], pub["talos"][2]) if pub else None
        goal_m = ratio(pub["talos"][3], pub["nonlinear"][3]) if pub else None
        rows.append({"device": res["device_name"], "model": res["model"], "speed": speed, "goal_s": goal_s,
                     "ok_s": None if goal_s is None or speed is None else speed >= goal_s - 5e-3,
                     "mem": mem, "goal_m": goal_m,
                     "ok_m": None if goal_m is None or mem is None else mem <= goal_m + 5e-3,
                     "fb": ratio(nl["fwd_bwd_s"], ts["fwd_bwd_s"]), "opt": ratio(ts["opt_s"], nl["opt_s"])})
        b = res.get("bound") or {}
        if "speedup" in b:
            rows[-1].update(bound=b["speedup"], of_bound=ratio(rows[-1]["fb"], b["speedup"]))
    if not rows:
        return ""
    keys = ["device", "model", "speed", "goal_s", "ok_s", "mem", "goal_m", "ok_m", "fb", "opt"]
    heads = ["device", "model", "TaLoS iteration speed-up", "published (goal ≥)", "met", "TaLoS peak memory / NL",
             "published (goal ≤)", "met", "fwd+bwd speed-up", "optimizer step TaLoS / NL"]
    if any("bound" in r for r in rows):
        keys += ["bound", "of_bound"]
        heads += ["exact-gradient bound (fwd+bwd)", "measured / bound (goal ≥ 0.9)"]
    return "\n".join(["### TaLoS vs non-linear FT against the paper (goals: at least its speed-up, at most its "
                      "memory ratio)", "",
                      markdown_table(rows, keys, heads)])


def fisher_table(f: dict, name: str) -> str:
    row = {"device": name, "model": f["model"], "n": f["samples"], "loop": f["loop_s"], "fast": f["engine_s"],
           "speed": ratio(f["loop_s"], f["engine_s"]), "engine": f"{f['engine']} (chunk {f['chunk_size']})",
           "l2": f["rel_l2"], "err": f["max_abs_rel"], "prec": f["precision"]}
    row["ok"] = None if row["speed"] is None else row["speed"] >= 5.0
    return "\n".join([f"### Per-sample Fisher scores: engine vs one backward per sample — device: {name}", "",
                      markdown_table([row], ["device", "model", "n", "loop", "fast", "speed", "ok", "engine", "l2",
                                             "err", "prec"],
                                     ["device", "model", "samples", "loop s", "fisher_scores s",
                                      "speed-up (goal ≥ 5)", "met", "engine", "relative L2 error",
                                      "max |Δ| / max score", "precision"])])


def tables(payload: dict) -> str:
    parts = [model_table(r) for r in payload["results"]]
    goals = goals_table(payload["results"])
    if goals:
        parts.append(goals)
    f = payload.get("fisher")
    if f and "error" not in f:
        parts.append(fisher_table(f, payload["device_name"]))
    elif f:
        parts.append(f"Per-sample Fisher on {payload['device_name']}: not measured ({f['error']})")
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> dict:
    parser = common_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, help="fine-tuning batch (default: 128 on CUDA, 8 on CPU, 32 with --quick)")
    parser.add_argument("--warmup", type=int, help="warm-up steps per configuration (default 3 on CUDA, else 1)")
    parser.add_argument("--iters", type=int, help="timed steps per configuration (default 10 on CUDA)")
    parser.add_argument("--lota-steps", type=int, help="dense calibration steps of the LoTA mask (default 10 on CUDA)")
    parser.add_argument("--fisher-samples", type=int, help="examples of the Fisher comparison (default 64 on CUDA)")
    parser.add_argument("--methods", nargs="*", default=list(METHODS), help=f"subset of {list(METHODS)}")
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"],
                        help="training precision (default auto: bf16 autocast on CUDA, fp32 on CPU)")
    parser.add_argument("--no-fisher", action="store_true", help="skip the per-sample Fisher comparison")
    parser.add_argument("--bound", action="store_true",
                        help="also compute the exact-gradient bound of the TaLoS mask at the same batch (bench.bound)")
    parser.add_argument("--budget", type=float,
                        help="seconds for the whole run: configurations that would start later are reported as "
                             "skipped (default: no limit; results are written to --json as they come)")
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and args.threads == 1:
        args.threads = max(1, min(8, os.cpu_count() or 1))  # data preparation and model building on the CPU side
    device = resolve_device(args.device, args.threads, args.timeout)
    unknown = [m for m in args.methods if m not in METHODS]
    if unknown:
        raise SystemExit(f"unknown method(s) {unknown}; choose from {list(METHODS)}")
    s = sizes(device, args.quick)
    for key in ("batch", "warmup", "iters", "lota_steps", "fisher_samples"):
        if getattr(args, key) is not None:
            s[key] = getattr(args, key)
    models = args.models or s["models"]
    name = device_name(device)
    t_start = time.perf_counter()
    print(f"## bench_table3 — {name} — {machine_line(device)}", flush=True)
    payload: dict = {"benchmark": "table3", "device": device, "device_name": name, "machine": machine_line(device),
                     "sizes": s, "precision_requested": args.precision, "published": PUBLISHED, "results": []}
    timeout = min(args.timeout, 300.0) if device.startswith("cuda") else args.timeout
    deadline = t_start + args.budget if args.budget else None

    def fisher() -> None:
        print(f"- per-sample Fisher vs loop on {s['fisher_model']} ({s['fisher_samples']} samples) on {name} …",
              flush=True)
        limit = _time_left(timeout, deadline)
        try:
            if limit is None:
                raise RuntimeError("skipped: the time budget (--budget) is spent")
            payload["fisher"] = run_fisher(s["fisher_model"], device, s, limit)
            f = payload["fisher"]
            print(f"  engine {f['engine_s']:.3f} s vs loop {f['loop_s']:.3f} s: "
                  f"{fmt(ratio(f['loop_s'], f['engine_s']))}× ({f['engine']}) [{name}]", flush=True)
        except Exception as exc:
            payload["fisher"] = {"model": s["fisher_model"], "error": _short(exc)}
            print(f"  FAILED: {payload['fisher']['error']}", flush=True)
        write_json(args.json, payload)

    def on_row(res: dict) -> None:
        if not any(r is res for r in payload["results"]):
            payload["results"].append(res)
        write_json(args.json, payload)

    for model in models:
        print(f"- {model} at batch {s['batch']} on {name} …", flush=True)
        try:
            on_row(run_model(model, device, s, args.precision, timeout, name, args.methods, deadline=deadline,
                             on_row=on_row, bound=args.bound))
        except Exception as exc:
            print(f"  {model} FAILED: {_short(exc)}", flush=True)
            payload.setdefault("errors", []).append({"model": model, "error": _short(exc)})
        if model == s["fisher_model"] and not args.no_fisher and "fisher" not in payload:
            fisher()  # right after its model: cheap, and done before a large model can spend the budget
    if not args.no_fisher and "fisher" not in payload:
        fisher()
    payload["total_s"] = time.perf_counter() - t_start
    write_json(args.json, payload)
    print()
    print(tables(payload))
    print(f"\ntotal wall time: {payload['total_s']:.0f} s on {name}", flush=True)
    return payload


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] in WORKER_JOBS:
        worker_main(sys.argv[1:])
    else:
        main()
