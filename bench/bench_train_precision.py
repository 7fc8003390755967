"""Benchmark: fine-tuning in fp32 vs bf16 autocast (fp32 master weights) — time per step and validation accuracy.

``python -m bench.bench_train_precision [--device cuda] [--quick] [--models ...] [--reps N]``

Per model and method, one worker trains the method twice on the same data, once per precision, in two
threads that take turns step by step (so the two runs are measured side by side under the same CPU load),
as ``talos finetune`` would (the suite's learning rate, TaLoS calibration included; see
``bench._worker.job_train_precision``). Reported: the median wall time per step of each precision (the
first step, which holds the set-up, left out), their ratio (fp32 / bf16: above 1 means bf16 is faster),
the validation accuracy of each trained vector (evaluated in fp32) beside the zero-shot one, and the
relative distance between the two task vectors. With ``--reps N`` the pair is trained N times, the
starting precision alternating (interleaved repetitions); the tables give the median over repetitions.

This decides ``talos_core.inference.precision.CPU_TRAIN_BF16_FAMILIES``: a model family trains in bf16 under
``auto`` on AMX CPUs only if this benchmark, run on such a CPU, shows it faster at no loss of accuracy.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from bench.common import common_parser, machine_line, markdown_table, resolve_device, run_worker, write_json


@dataclass(frozen=True)
class PrecisionCase:
    """A model, its task and the run sizes: ``lrs`` = (method, learning rate) as the model's suite uses them."""

    model: str
    task: str
    lrs: tuple[tuple[str, float], ...]
    steps: int
    batch: int
    max_train: int
    max_val: int
    calib_samples: int = 32


# learning rates as the text / vision suites use them (talos_core/suites.py)
CASES: dict[str, PrecisionCase] = {c.model: c for c in [
    PrecisionCase("minilm-l6", "tweets", (("talos", 1e-3), ("nonlinear", 1e-4)), steps=40, batch=16, max_train=640,
                  max_val=200),
    PrecisionCase("efficientnet-lite0", "mnist", (("talos", 1e-3), ("nonlinear", 1e-4)), steps=10, batch=32,
                  max_train=640, max_val=200),
    PrecisionCase("tiny-clip", "digits", (("talos", 1e-3), ("nonlinear", 1e-3)), steps=40, batch=16, max_train=640,
                  max_val=200),
    PrecisionCase("tiny-text", "tweets", (("talos", 1e-3), ("nonlinear", 1e-3)), steps=40, batch=16, max_train=640,
                  max_val=200),
]}
DEFAULT = ("minilm-l6", "tiny-clip")
QUICK = ("tiny-clip", "tiny-text")


def run_case(case: PrecisionCase, method: str, lr: float, device: str, reps: int, quick: bool) -> dict:
    steps = min(case.steps, 6) if quick else case.steps
    results = []
    for rep in range(reps):
        order = ["fp32", "bf16"] if rep % 2 == 0 else ["bf16", "fp32"]
        results.append(run_worker("train_precision", {
            "model": case.model, "task": case.task, "method": method, "steps": steps, "batch": case.batch,
            "lr": lr, "max_train": case.max_train, "max_val": case.max_val, "calib_samples": case.calib_samples,
            "device": device, "order": order}))
    med = lambda key, p: statistics.median(r[p][key] for r in results)  # noqa: E731
    return {"case": case.model, "task": case.task, "method": method, "lr": lr, "steps": steps, "batch": case.batch,
            "reps": reps, "native_bf16": results[0]["native_bf16"], "val_examples": results[0]["val_examples"],
            "zero_shot_val_acc": results[0]["zero_shot_val_acc"],
            "fp32_step_s": med("step_s_median", "fp32"), "bf16_step_s": med("step_s_median", "bf16"),
            "fp32_val_acc": med("val_acc", "fp32"), "bf16_val_acc": med("val_acc", "bf16"),
            "fp32_loss": med("final_loss_mean5", "fp32"), "bf16_loss": med("final_loss_mean5", "bf16"),
            "vector_rel_diff": statistics.median(r["vector_rel_diff"] for r in results), "raw": results}


def table(results: list[dict]) -> str:
    rows = []
    for r in results:
        if "error" in r:
            continue
        rows.append({**r, "native": "yes" if r["native_bf16"] else "no",
                     "speed": r["fp32_step_s"] / r["bf16_step_s"] if r["bf16_step_s"] else None,
                     "delta": 100 * (r["bf16_val_acc"] - r["fp32_val_acc"]),
                     "zs": 100 * r["zero_shot_val_acc"], "f": 100 * r["fp32_val_acc"], "b": 100 * r["bf16_val_acc"]})
    return "\n".join(["### Training precision: fp32 vs bf16 autocast (fp32 master weights)", "",
                      markdown_table(rows, ["case", "task", "method", "steps", "batch", "reps", "native", "fp32_step_s",
                                            "bf16_step_s", "speed", "zs", "f", "b", "delta", "fp32_loss", "bf16_loss",
                                            "vector_rel_diff"],
                                     ["model", "task", "method", "steps", "batch", "reps", "native bf16 (AMX/GPU)",
                                      "fp32 s/step", "bf16 s/step", "fp32 / bf16 (>1: bf16 faster)",
                                      "zero-shot val acc %", "fp32 val acc %", "bf16 val acc %", "bf16 − fp32 (points)",
                                      "fp32 final loss", "bf16 final loss", "‖τ_bf16 − τ_fp32‖ / ‖τ_fp32‖"])])


def main(argv: list[str] | None = None) -> list[dict]:
    parser = common_parser(__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1, help="trained pairs per model and method, the starting "
                                                            "precision alternating (default 1)")
    args = parser.parse_args(argv)
    device = resolve_device(args.device, args.threads, args.timeout)
    names = args.models or list(QUICK if args.quick else DEFAULT)
    if not any(m in CASES for m in names):
        raise SystemExit(f"no training-precision case for {names}; choose from {sorted(CASES)}")
    print(f"## bench_train_precision — {machine_line(device)}", flush=True)
    for m in names:
        if m not in CASES:  # e.g. a model of the other benchmarks, passed on by bench.run_all
            print(f"- {m}: skipped (no training-precision case; cases: {', '.join(CASES)})", flush=True)
    names = [m for m in names if m in CASES]
    results = []
    for name in names:
        case = CASES[name]
        for method, lr in case.lrs:
            print(f"- {case.model} ({case.task}), {method} …", flush=True)
            try:
                results.append(run_case(case, method, lr, device, max(1, args.reps), args.quick))
            except Exception as exc:  # report and keep going
                first = str(exc).strip().splitlines()
                results.append({"case": case.model, "method": method,
                                "error": f"{type(exc).__name__}: {first[-1][:200] if first else ''}"})
                print(f"  FAILED: {results[-1]['error']}", flush=True)
            write_json(args.json, {"benchmark": "train_precision", "device": device, "results": results})
    print()
    print(table(results))
    for r in results:
        if "error" in r:
            print(f"- {r['case']} {r['method']}: not measured ({r['error']})")
    return results


if __name__ == "__main__":
    main()
