"""Benchmark: TaLoS mask calibration — per-sample Fisher scores and calibration vs fine-tuning time.

``python -m bench.bench_calibration [--device cuda] [--quick] [--models ...]``

Per model, in one worker process:

1. ``talos_core.fisher.fisher_scores`` (batched per-sample gradients) vs ``fisher_scores_loop`` (one
   backward per sample) on the same examples and the same sampled labels ŷ: times, speed-up (goal
   ≥ 5), relative agreement of the scores and agreement of the 10%-density masks they give;
2. a full 4-round TaLoS calibration on a few samples, and the per-step cost of the TaLoS fine-tuning
   it serves. Projected to the model's defaults: the scoring part of calibration scales linearly
   with ``calib_samples`` (the per-round selection over all maskable entries does not; it is taken
   from the calibration log, where the engine records it), fine-tuning with default batch size ×
   default steps; their ratio is the goal (≤ 0.10).
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


def run_case(case: Case, device: str, quick: bool) -> dict:
    args = {"model": case.model, "task": case.task, "device": device, "chunk_size": case.chunk_size,
            "score_samples": min(case.score_samples, 16) if quick else case.score_samples,
            "mask_samples": case.mask_samples, "batch": case.ft_batch, "iters": 2 if quick else case.ft_iters,
            "reps": 1 if case.model.startswith("clip-vit") else 2}
    path = mask_cache_path(case, device)
    path.parent.mkdir(parents=True, exist_ok=True)
    args["mask_out"] = str(path)
    return {"case": case.model, **run_worker("calib", args)}


def tables(results: list[dict]) -> str:
    scores, cal = [], []
    for r in results:
        scores.append({"model": r["case"], "n": r["scores_samples"], "loop": r["loop_s"], "vmap": r["vmap_s"],
                       "speed": ratio(r["loop_s"], r["vmap_s"]), "err": r["max_abs_rel"], "l2": r["rel_l2"],
                       "agree": r["mask_agreement"]})
        cal.append({"model": r["case"], "n": r["calibration_samples"], "cal": r["calibration_s"],
                    "score": r.get("scoring_s") or None,
                    "step": r["step_s"], "b": r["ft_batch"], "cs": r["default_calib_samples"],
                    "cp": r["calib_projected_s"], "st": f"{r['default_steps']}×{r['default_batch']}",
                    "fp": r["ft_projected_s"], "ratio": ratio(r["calib_projected_s"], r["ft_projected_s"])})
    return "\n".join([
        "### Per-sample Fisher scores: batched (vmap) vs one backward per sample", "",
        markdown_table(scores, ["model", "n", "loop", "vmap", "speed", "err", "l2", "agree"],
                       ["model", "samples", "loop s", "fisher_scores s", "speed-up (goal ≥ 5)",
                        "max |Δ| / max score", "relative L2 error", "10%-mask agreement"]),
        "", "### Calibration vs the fine-tuning it serves (projected to the model's defaults)", "",
        markdown_table(cal, ["model", "n", "cal", "score", "step", "b", "cs", "cp", "st", "fp", "ratio"],
                       ["model", "calib samples measured", "4-round calibration s", "of which scoring s",
                        "TaLoS step s",
                        "at batch", "default calib samples", "projected calibration s",
                        "default steps×batch", "projected fine-tuning s",
                        "calibration / fine-tuning (goal ≤ 0.10)"]),
    ])


def main(argv: list[str] | None = None) -> list[dict]:
    args = common_parser(__doc__.splitlines()[0]).parse_args(argv)
    device = resolve_device(args.device, args.threads, args.timeout)
    print(f"## bench_calibration — {machine_line(device)}", flush=True)
    results = run_cases(select_cases(args.models, args.quick, device),
                        lambda case: run_case(case, device, args.quick), args.json, "calibration", device)
    print()
    print(tables([r for r in results if "error" not in r]))
    print(error_rows(results))
    return results


if __name__ == "__main__":
    main()
