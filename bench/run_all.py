"""Run every benchmark: calibration (also caches the real TaLoS masks), fine-tuning, eval grid, training precision.

``python -m bench.run_all [--device cuda] [--quick] [--models ...] [--json results.json]``

Prints each benchmark's tables (markdown, ready for ``bench/RESULTS.md``) and the total wall time.
"""

from __future__ import annotations

import time

from bench import bench_calibration, bench_eval_grid, bench_finetune, bench_train_precision
from bench.common import common_parser, write_json


def main(argv: list[str] | None = None) -> dict:
    parser = common_parser(__doc__.splitlines()[0])
    args = parser.parse_args(argv)
    passthrough = ["--device", args.device, "--threads", str(args.threads)] + (["--quick"] if args.quick else [])
    if args.models:
        passthrough += ["--models", *args.models]
    t0 = time.perf_counter()
    out = {}
    passthrough += ["--timeout", str(args.timeout)]
    for name, module in (("calibration", bench_calibration), ("finetune", bench_finetune),
                         ("eval_grid", bench_eval_grid), ("train_precision", bench_train_precision)):
        extra = ["--json", str(args.json.with_name(f"{args.json.stem}-{name}.json"))] if args.json else []
        out[name] = module.main(passthrough + extra)
        print(flush=True)
    total = time.perf_counter() - t0
    print(f"total wall time: {total:.0f} s")
    write_json(args.json, {"device": args.device, "total_s": total, **out})
    return out


if __name__ == "__main__":
    main()
