"""Benchmark: fine-tuning in two variants side by side — fp32 vs bf16 autocast (fp32 master weights), or a CNN's
contiguous vs channels-last input — time per step, evaluation time and validation accuracy.

``python -m bench.bench_train_precision [--compare precision|memory-format] [--device cuda] [--quick] [--models ...]
[--reps N]``

Per model and method, one worker trains the method twice on the same data, once per variant, in two
threads that take turns step by step (so the two runs are measured side by side under the same CPU load),
as ``talos finetune`` would (the suite's learning rate, TaLoS calibration included; see
``bench._worker.job_train_precision``). Reported: the median wall time per step of each variant (the
first step, which holds the set-up, left out), their ratio (above 1 means the second variant is faster),
the validation accuracy of each trained vector (evaluated in fp32 by its variant's model) beside the zero-shot
one, the wall time of that evaluation, and the relative distance between the two task vectors. With ``--reps N``
the pair is trained N times, the starting variant alternating (interleaved repetitions); the tables give the
median over repetitions.

``--compare precision`` (default) decides ``talos_core.inference.precision.CPU_TRAIN_BF16_FAMILIES``: a model
family trains in bf16 under ``auto`` on AMX CPUs only if this benchmark, run on such a CPU, shows it faster at no
loss of accuracy. ``--compare memory-format`` (CNN models) decides ``CnnTaskModel.channels_last_on_cpu``.
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


# learning rates as the text / vision suites use them (talos_core/suites/specs.py)
CASES: dict[str, PrecisionCase] = {c.model: c for c in [
    PrecisionCase("minilm-l6", "tweets", (("talos", 1e-3), ("nonlinear", 1e-4)), steps=40, batch=16, max_train=640,
                  max_val=200),
    PrecisionCase("efficientnet-lite0", "mnist", (("talos", 1e-3), ("nonlinear", 1e-4)), steps=10, batch=32,
                  max_train=640, max_val=200),
    PrecisionCase("tiny-cnn", "digits", (("talos", 1e-3), ("nonlinear", 1e-3)), steps=40, batch=16, max_train=640,
                  max_val=200),
    PrecisionCase("tiny-clip", "digits", (("talos", 1e-3), ("nonlinear", 1e-3)), steps=40, batch=16, max_train=640,
                  max_val=200),
    PrecisionCase("tiny-text", "tweets", (("talos", 1e-3), ("nonlinear", 1e-3)), steps=40, batch=16, max_train=640,
                  max_val=200),
]}
DEFAULT = ("minilm-l6", "tiny-clip")
QUICK = ("tiny-clip", "tiny-text")
#: ``--compare`` → (the two variants of ``bench._worker.TRAIN_VARIANTS``, title); the second is the candidate
COMPARISONS = {"precision": (("fp32", "bf16"), "Training precision: fp32 vs bf16 autocast (fp32 master weights)"),
               "memory-format": (("contiguous", "channels-last"),
                                 "CNN input memory format on a CPU: contiguous (NCHW) vs channels-last (NHWC)")}
CNN_CASES = ("efficientnet-lite0", "tiny-cnn")


def run_case(case: PrecisionCase, method: str, lr: float, device: str, reps: int, quick: bool,
             pair: tuple[str, str] = COMPARISONS["precision"][0]) -> dict:
    steps = min(case.steps, 6) if quick else case.steps
    a, b = pair
    results = []
    for rep in range(reps):
        order = [a, b] if rep % 2 == 0 else [b, a]
        results.append(run_worker("train_precision", {
            "model": case.model, "task": case.task, "method": method, "steps": steps, "batch": case.batch,
            "lr": lr, "max_train": case.max_train, "max_val": case.max_val, "calib_samples": case.calib_samples,
            "device": device, "order": order}))
    med = lambda key, p: statistics.median(r[p][key] for r in results)  # noqa: E731
    per_variant = {f"{v}_{key}": med(src, v) for v in pair for key, src in
                   (("step_s", "step_s_median"), ("val_acc", "val_acc"), ("loss", "final_loss_mean5"),
                    ("eval_s", "eval_s"))}
    return {"case": case.model, "task": case.task, "method": method, "lr": lr, "steps": steps, "batch": case.batch,
            "reps": reps, "pair": list(pair), "native_bf16": results[0]["native_bf16"],
            "val_examples": results[0]["val_examples"], "zero_shot_val_acc": results[0]["zero_shot_val_acc"],
            **per_variant, "vector_rel_diff": statistics.median(r["vector_rel_diff"] for r in results), "raw": results}


def table(results: list[dict], compare: str = "precision") -> str:
    (a, b), title = COMPARISONS[compare]

    def ratio_of(r: dict, key: str) -> float | None:
        return r[f"{a}_{key}"] / r[f"{b}_{key}"] if r[f"{b}_{key}"] else None

    rows = []
    for r in results:
        if "error" in r:
            continue
        rows.append({**r, "native": "yes" if r["native_bf16"] else "no", "speed": ratio_of(r, "step_s"),
                     "eval_speed": ratio_of(r, "eval_s"), "delta": 100 * (r[f"{b}_val_acc"] - r[f"{a}_val_acc"]),
                     "zs": 100 * r["zero_shot_val_acc"], "va": 100 * r[f"{a}_val_acc"], "vb": 100 * r[f"{b}_val_acc"]})
    return "\n".join([f"### {title}", "",
                      markdown_table(rows, ["case", "task", "method", "steps", "batch", "reps", "native",
                                            f"{a}_step_s", f"{b}_step_s", "speed", "eval_speed", "zs", "va", "vb",
                                            "delta", f"{a}_loss", f"{b}_loss", "vector_rel_diff"],
                                     ["model", "task", "method", "steps", "batch", "reps", "native bf16 (AMX/GPU)",
                                      f"{a} s/step", f"{b} s/step", f"{a} / {b} (>1: {b} faster)",
                                      f"evaluation {a} / {b}", "zero-shot val acc %", f"{a} val acc %",
                                      f"{b} val acc %", f"{b} − {a} (points)", f"{a} final loss", f"{b} final loss",
                                      f"‖τ_{b} − τ_{a}‖ / ‖τ_{a}‖"])])


def main(argv: list[str] | None = None) -> list[dict]:
    parser = common_parser(__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1, help="trained pairs per model and method, the starting "
                                                            "variant alternating (default 1)")
    parser.add_argument("--compare", choices=sorted(COMPARISONS), default="precision",
                        help="the two variants: fp32 vs bf16 (default), or contiguous vs channels-last CNN input")
    args = parser.parse_args(argv)
    device = resolve_device(args.device, args.threads, args.timeout)
    pair = COMPARISONS[args.compare][0]
    default = CNN_CASES if args.compare == "memory-format" else (QUICK if args.quick else DEFAULT)
    names = args.models or list(default)
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
                results.append(run_case(case, method, lr, device, max(1, args.reps), args.quick, pair))
            except Exception as exc:  # report and keep going
                first = str(exc).strip().splitlines()
                results.append({"case": case.model, "method": method,
                                "error": f"{type(exc).__name__}: {first[-1][:200] if first else ''}"})
                print(f"  FAILED: {results[-1]['error']}", flush=True)
            write_json(args.json, {"benchmark": "train_precision", "compare": args.compare, "device": device,
                                   "results": results})
    print()
    print(table(results, args.compare))
    for r in results:
        if "error" in r:
            print(f"- {r['case']} {r['method']}: not measured ({r['error']})")
    return results


if __name__ == "__main__":
    main()
