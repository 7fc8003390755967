"""Run every benchmark: calibration (also caches the real TaLoS masks), fine-tuning, eval grid, training precision.

``python -m bench.run_all [--device cuda] [--quick] [--models ...] [--json results.json] [--table3]``

Prints each benchmark's tables (markdown, ready for ``bench/RESULTS.md``) and the total wall time. With
``--device cuda`` (or ``--table3``) the paper's Table 3 analogue (``bench.bench_table3``: the five fine-tuning
methods on random-init CLIP ViT-B/32 and ViT-L/14 at batch 128) runs last; it ignores ``--models``.
"""

from __future__ import annotations

import time

from bench import bench_calibration, bench_eval_grid, bench_finetune, bench_table3, bench_train_precision
from bench.common import common_parser, write_json


def main(argv: list[str] | None = None) -> dict:
    parser = common_parser(__doc__.splitlines()[0])
    parser.add_argument("--table3", action="store_true",
                        help="also run bench_table3 (always on with --device cuda)")
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
    if args.table3 or args.device.startswith("cuda"):
        extra = ["--json", str(args.json.with_name(f"{args.json.stem}-table3.json"))] if args.json else []
        table3_args = ["--device", args.device, "--timeout", str(args.timeout)] + (["--quick"] if args.quick else [])
        if args.threads != 1:
            table3_args += ["--threads", str(args.threads)]
        out["table3"] = bench_table3.main(table3_args + extra)
        print(flush=True)
    total = time.perf_counter() - t0
    print(f"total wall time: {total:.0f} s")
    write_json(args.json, {"device": args.device, "total_s": total, **out})
    return out


if __name__ == "__main__":
    main()
