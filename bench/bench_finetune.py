"""Benchmark: TaLoS sparse fine-tuning (90% sparsity, a real calibrated mask) vs non-linear FT.

``python -m bench.bench_finetune [--device cuda] [--quick] [--models ...]``

Per model, on the same batch and data: median forward+backward time and optimizer-step time of
``iters`` steps per configuration (after one warm-up step each), the configurations interleaved
step by step in one process so that a shared CPU's load hits them alike; and peak memory of each
configuration, measured in its own fresh process (CPU: peak RSS, also net of the process's RSS
before the model was loaded; GPU: ``torch.cuda.max_memory_allocated``). Ratios: fwd+bwd speed-up
(non-linear / TaLoS, goal ≥ 3), optimizer-step ratio (TaLoS / non-linear, goal ≤ 1) and memory
ratio (TaLoS / non-linear, goal ≤ 0.5). Configurations: non-linear FT (every parameter), TaLoS
(the calibrated mask) and, unless ``--no-checkpointing``, TaLoS with activation checkpointing.

Beside the measurements: the exact-gradient bound of the same model, batch and mask
(:mod:`bench.bound`: multiply-adds of forward + activation gradients + weight gradients for each
configuration, and the memory the step must keep), and measured / bound — goal ≥ 0.9 (for memory:
bound / measured). The speed-up is measured in wall time and in process CPU time (one thread: the
cycles the worker actually got, which other jobs on a shared CPU do not inflate).

The mask is a real TaLoS calibration (4 rounds, few samples), cached under ``bench/.cache`` keyed by
the source of ``talos_core/masks.py``; its structure is printed too.
"""

from __future__ import annotations

from bench.common import (
    Case,
    common_parser,
    error_rows,
    machine_line,
    markdown_table,
    mask_cache_path,
    ratio,
    resolve_device,
    run_cases,
    run_worker,
    select_cases,
)


def ensure_mask(case: Case, device: str) -> dict:
    """Path and structure of the case's real TaLoS mask, calibrating it (in a worker) when not cached."""
    from bench._worker import mask_structure
    from talos_core.store import load_mask

    path = mask_cache_path(case, device)
    if not path.exists():
        info = run_worker("mask", {"model": case.model, "task": case.task, "device": device,
                                   "samples": case.mask_samples, "chunk_size": case.chunk_size, "out": str(path)})
        print(f"  calibrated {case.model} mask on {case.mask_samples} samples in {info['calibration_s']:.1f}s",
              flush=True)
    return {"path": str(path), **mask_structure(load_mask(path))}


def run_case(case: Case, device: str, quick: bool, checkpointing: bool) -> dict:
    mask = ensure_mask(case, device)
    iters = 2 if quick else case.ft_iters
    common = {"model": case.model, "task": case.task, "device": device, "batch": case.ft_batch}
    times = run_worker("train_time", {**common, "iters": iters, "mask": mask["path"], "checkpointing": checkpointing})
    out = {"case": case.model, "batch": case.ft_batch, "iters": iters, "mask": mask, "params": times["params"],
           "forward_s": times["forward_s"]}
    out["bound"] = run_worker("bound", {**common, "mask": mask["path"]})
    for plan in CONFIGS:
        if plan in times:
            mem = run_worker("train_mem", {**common, "plan": plan, "mask": mask["path"]})
            out[plan] = {**times[plan], **mem}
    return out


CONFIGS = {"nonlinear": "non-linear FT", "talos": "TaLoS 90%", "talos_ckpt": "TaLoS 90% + activation checkpointing"}


def tensor_memory(x: dict, params: int | None = None) -> float | None:
    """Model tensors + what training adds at its peak: on CUDA the peak itself
    (``max_memory_allocated``); on CPU the model's parameter and buffer bytes plus the peak RSS
    growth over the live process before the measured steps — the CPU analogue of the GPU figure,
    without the interpreter and libraries that RSS also counts."""
    if x.get("peak_kind", "").startswith("cuda"):
        return x["peak_mb"]
    param_mb = x.get("param_mb", params * 4 / 2**20 if params else None)  # older results: fp32 parameters
    if param_mb is None:
        return None
    return param_mb + x["peak_mb"] - x["model_mb"]


def bound_tables(results: list[dict]) -> list[str]:
    """Bound vs measured: fwd+bwd speed-up (multiply-adds) and memory (MiB), per model (results with a bound)."""
    speed, memory = [], []
    for r in results:
        b = r.get("bound")
        if not b:
            continue
        nl, ts = r["nonlinear"], r["talos"]
        measured = ratio(nl["fwd_bwd_s"], ts["fwd_bwd_s"])
        on_gpu = str(ts.get("peak_kind", "")).startswith("cuda")  # CPU time says nothing about GPU kernels
        time_key = "fwd_bwd_s" if on_gpu else "fwd_bwd_cpu_s"
        cpu = None if on_gpu else ratio(nl.get("fwd_bwd_cpu_s"), ts.get("fwd_bwd_cpu_s"))
        speed.append({"model": r["case"], "nl": b["nonlinear"]["macs"] / 1e9, "ts": b["talos"]["macs"] / 1e9,
                      "fwd": b["nonlinear"]["forward"] / 1e9, "bound": b["speedup"], "measured": measured,
                      "ratio": ratio(measured, b["speedup"]), "cpu": cpu, "cpu_ratio": ratio(cpu, b["speedup"]),
                      "rows": b["speedup_rows"], "floor": b["forward_floor"],
                      "nl_rate": ratio(b["nonlinear"]["macs"] / 1e9, nl.get(time_key)),
                      "ts_rate": ratio(b["talos"]["macs"] / 1e9, ts.get(time_key))})
        mib = {}
        for key, name in (("nonlinear", "non-linear FT"), ("talos", "TaLoS 90%")):
            c, x = b[key], r[key]
            mib[key] = (c["memory_bytes"] / 2**20, tensor_memory(x, r.get("params")))
            memory.append({"model": r["case"], "method": name, "bound": mib[key][0],
                           "acts": c["activation_bytes"] / 2**20, "grads": c["grad_bytes"] / 2**20,
                           "state": (c["optimizer_bytes"] + c["snapshot_bytes"]) / 2**20,
                           "params": c["param_bytes"] / 2**20, "measured": mib[key][1],
                           "ratio": ratio(mib[key][0], mib[key][1])})
        memory.append({"model": r["case"], "method": "TaLoS / NL", "bound": b["memory_ratio"],
                       "measured": ratio(mib["talos"][1], mib["nonlinear"][1]),
                       "ratio": ratio(b["memory_ratio"], ratio(mib["talos"][1], mib["nonlinear"][1]))})
    if not speed:
        return []
    return ["", "### Exact-gradient bound vs measured: fwd+bwd (multiply-adds, `bench/bound.py`)", "",
            markdown_table(speed, ["model", "nl", "ts", "fwd", "bound", "measured", "ratio", "cpu", "cpu_ratio",
                                   "rows", "floor", "nl_rate", "ts_rate"],
                           ["model", "NL GMAC/step", "TaLoS GMAC/step", "forward GMAC", "bound speed-up NL/TaLoS",
                            "measured speed-up (wall)", "wall / bound (goal ≥ 0.9)", "measured speed-up (CPU time)",
                            "CPU time / bound (goal ≥ 0.9)", "bound with row-split weight grads",
                            "bound for a free backward (NL / forward)", "NL GMAC per CPU s (GPU: per s)",
                            "TaLoS GMAC per CPU s (GPU: per s)"]),
            "", "### Exact-gradient bound vs measured: memory (MiB; the TaLoS / NL rows are ratios)", "",
            markdown_table(memory, ["model", "method", "params", "acts", "grads", "state", "bound", "measured",
                                    "ratio"],
                           ["model", "method", "parameters + buffers", "activations kept for backward",
                            "gradients (full-size)", "AdamW moments + θ0 snapshot (+ indices)",
                            "bound (sum)", "measured: model tensors + overhead", "bound / measured (goal ≥ 0.9)"])]


def tables(results: list[dict]) -> str:
    rows, ratios, structure, ckpt = [], [], [], []
    for r in results:
        nl, ts = r["nonlinear"], r["talos"]
        if "talos_ckpt" in r:
            tc = r["talos_ckpt"]
            ckpt.append({"model": r["case"], "fb": ratio(nl["fwd_bwd_s"], tc["fwd_bwd_s"]),
                         "cost": ratio(tc["fwd_bwd_s"], ts["fwd_bwd_s"]), "mem": ratio(tc["peak_mb"], nl["peak_mb"]),
                         "net": ratio(tc["peak_mb"] - tc["base_mb"], nl["peak_mb"] - nl["base_mb"]),
                         "over": ratio(tc["peak_mb"] - tc["model_mb"], nl["peak_mb"] - nl["model_mb"]),
                         "tm": ratio(tensor_memory(tc, r.get("params")), tensor_memory(nl, r.get("params")))})
        for key, name in CONFIGS.items():
            if key not in r:
                continue
            x = r[key]
            rows.append({"model": r["case"], "method": name, "batch": r["batch"], "fb": x["fwd_bwd_s"],
                         "fbr": f"{x['fwd_bwd_min']:.3f}–{x['fwd_bwd_max']:.3f}", "opt": x["opt_s"],
                         "it": x["iter_s"], "peak": x["peak_mb"], "net": x["peak_mb"] - x["base_mb"],
                         "over": x["peak_mb"] - x["model_mb"], "tm": tensor_memory(x, r.get("params")),
                         "entries": x["trainable_entries"]})
        ratios.append({"model": r["case"], "fb": ratio(nl["fwd_bwd_s"], ts["fwd_bwd_s"]),
                       "opt": ratio(ts["opt_s"], nl["opt_s"]), "it": ratio(nl["iter_s"], ts["iter_s"]),
                       "mem": ratio(ts["peak_mb"], nl["peak_mb"]),
                       "net": ratio(ts["peak_mb"] - ts["base_mb"], nl["peak_mb"] - nl["base_mb"]),
                       "over": ratio(ts["peak_mb"] - ts["model_mb"], nl["peak_mb"] - nl["model_mb"]),
                       "tm": ratio(tensor_memory(ts, r.get("params")), tensor_memory(nl, r.get("params"))),
                       "fwd": r["forward_s"], "floor": ratio(nl["fwd_bwd_s"], r["forward_s"])})
        m = r["mask"]
        structure.append({"model": r["case"], "density": m["density"], "depth": m.get("first_trainable_depth"),
                          "full": m["full"], "partial": m["partial"],
                          "frozen": m["frozen"], "share": m["share_in_full"], "rows": m["partial_rows_touched"],
                          "cols": m["partial_cols_touched"]})
    kind = results[0]["talos"]["peak_kind"] if results else ""
    out = ["### Fine-tuning cost per iteration (seconds, MiB)", "",
           markdown_table(rows, ["model", "method", "batch", "fb", "fbr", "opt", "it", "peak", "net", "over", "tm",
                                 "entries"],
                          ["model", "method", "batch", "fwd+bwd s (median)", "min–max", "opt step s (median)",
                           "iter s", f"peak MiB ({kind})", "peak − pre-model RSS MiB",
                           "peak − live model MiB", "model tensors + overhead MiB", "trainable entries"]),
           "", "### Ratios (side by side, same run)", "",
           markdown_table(ratios, ["model", "fb", "opt", "it", "mem", "net", "over", "tm", "fwd", "floor"],
                          ["model", "fwd+bwd speed-up NL/TaLoS (goal ≥ 3)", "opt step TaLoS/NL (goal ≤ 1)",
                           "iteration speed-up", "peak memory TaLoS/NL (goal ≤ 0.5)",
                           "peak − pre-model RSS TaLoS/NL", "training overhead (peak − live model) TaLoS/NL",
                           "model tensors + training overhead TaLoS/NL (≈ GPU max_memory_allocated)",
                           "no-grad forward s", "NL fwd+bwd / forward (bound on any speed-up)"]),
           "", "### Structure of the calibrated TaLoS masks", "",
           markdown_table(structure, ["model", "density", "depth", "full", "partial", "frozen", "share", "rows",
                                      "cols"],
                          ["model", "density", "first trainable tensor (fraction of depth)",
                           "tensors 100% trainable", "partly trainable", "frozen",
                           "share of entries in 100% tensors", "rows touched (partial matrices)",
                           "columns touched (partial matrices)"])]
    out += bound_tables(results)
    if ckpt:
        out += ["", "### Opt-in activation checkpointing for TaLoS (`finetune(..., checkpoint_activations=True)`)", "",
                markdown_table(ckpt, ["model", "fb", "cost", "mem", "net", "over", "tm"],
                               ["model", "fwd+bwd speed-up NL/TaLoS+ckpt", "fwd+bwd cost vs TaLoS",
                                "peak memory TaLoS+ckpt/NL", "peak − pre-model RSS TaLoS+ckpt/NL",
                                "training overhead TaLoS+ckpt/NL", "model tensors + overhead TaLoS+ckpt/NL"])]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = common_parser(__doc__.splitlines()[0])
    parser.add_argument("--no-checkpointing", action="store_true",
                        help="skip the third configuration, TaLoS with activation checkpointing")
    args = parser.parse_args(argv)
    device = resolve_device(args.device, args.threads, args.timeout)
    print(f"## bench_finetune — {machine_line(device)}", flush=True)
    results = run_cases(select_cases(args.models, args.quick, device),
                        lambda case: run_case(case, device, args.quick, not args.no_checkpointing), args.json,
                        "finetune", device)
    print()
    print(tables([r for r in results if "error" not in r]))
    print(error_rows(results))
    return results


if __name__ == "__main__":
    main()
