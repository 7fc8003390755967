"""``talos suite`` and ``talos report``: whole suites into a store, and their results tables (docs/results.md).

Stores follow the documented rule (:mod:`talos_core.schema`): ``talos suite`` writes into ``--store``,
else ``$TALOS_STORE``, else ``./runs``; ``talos report`` is a viewer and reads ``--store``, else
``$TALOS_STORE``, else the shipped ``cached_results``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from talos_core.cli.common import (
    add_eval_precision_argument,
    add_store_argument,
    add_train_precision_argument,
    non_negative_int,
    number,
    positive_int,
)
from talos_core.errors import TalosError, unknown
from talos_core.store import Store
from talos_core.suites import (
    STAGES,
    SUITES,
    ExecutorOptions,
    SuiteRunOptions,
    default_scale,
    report_markdown,
    results_markdown,
    run_suite,
)
from talos_core.suites.executors import EXECUTORS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("suite", help="run a whole suite (all methods and analyses) into a store")
    p.add_argument("name", help=f"suite name: {', '.join(SUITES)}")
    add_store_argument(p, help="store to write")
    p.add_argument("--scale", default=None,
                   help="the suite's scale: full (documented) or mini (down-scaled) (default: full, or the suite's "
                        "first scale when it has no full one: mini for tiny)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto")
    p.add_argument("--methods", default=None, help="comma-separated subset of the suite's methods")
    p.add_argument("--posthoc", default=None, help="comma-separated subset of the suite's post-hoc methods")
    p.add_argument("--resume", action="store_true",
                   help="skip the steps an interrupted run of this suite (same settings) already finished")
    p.add_argument("--stage", default="all", choices=STAGES,
                   help="all (default) or train: only the fine-tuning steps, no suite record; run one such process "
                        "per method (--methods) into one store to share a GPU, then the suite (docs/scale-out.md)")
    p.add_argument("--part", default=None,
                   help="comma-separated methods (fine-tuning or post-hoc) whose steps this call runs, with the "
                        "comparison: a suite run in parts, one call each (on one machine or several, the store "
                        "carried between them, task vectors not needed), resuming the same record until every step "
                        "is done; implies --resume (docs/scale-out.md)")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--model", default=None,
                   help="run the suite with another model where it offers one (paper-vision: clip-vit-b-16, "
                        "clip-vit-l-14, clip:<arch>:<tag>; paper-nlp: t5-small, t5-large, t5:<id>); default: the "
                        "suite's own")
    p.add_argument("--plan", action="store_true",
                   help="print the steps, their dependencies, the runs and evaluations (and which the store has) and "
                        "an estimated cost, then stop: nothing is downloaded or trained (docs/scale-out.md)")
    p.add_argument("--plan-device", default=None,
                   help="device of the plan's cost estimate (talos_core/suites/plan_costs.json: h100, h100-shared, "
                        "h100-mps8, cpu-2core (AMD EPYC), cpu-2core-xeon; default: this machine's — h100 with a GPU, "
                        "else the CPU device measured on this CPU model, which the plan names)")
    p.add_argument("--executor", default="local", choices=EXECUTORS,
                   help="local (default): the steps one after another in this process; processes: every step and "
                        "fine-tuning run in its own worker process of this machine (--jobs of them at a time), in "
                        "parallel where the steps' dependencies allow; ray: the same as Ray tasks "
                        "(pip install -e '.[ray]'; docs/scale-out.md)")
    p.add_argument("--jobs", type=positive_int, default=None,
                   help="with --executor processes: worker processes at a time (default: this machine's CPU count; "
                        "on one GPU, e.g. 6 with CUDA MPS); with --plan: the workers its wall time is estimated for")
    p.add_argument("--address", default=None,
                   help="with --executor ray: the Ray cluster (HOST:PORT from `ray start --head`, or auto); default: "
                        "a new local Ray instance on this machine's CPUs and GPUs. The store must be on a "
                        "filesystem every node sees at the same path")
    p.add_argument("--gpus-per-task", type=number, default=None,
                   help="with --executor ray: GPUs per model step (default 1 when the cluster has GPUs; a fraction "
                        "such as 0.25 lets small models share one GPU)")
    p.add_argument("--cpus-per-task", type=number, default=1.0,
                   help="with --executor ray: CPUs each task declares (default 1)")
    add_eval_precision_argument(p, default_help="the scale's; see docs/protocol.md 'Precision'")
    add_train_precision_argument(p, default_help="the scale's, else $TALOS_TRAIN_PRECISION or auto")
    p.add_argument("--checkpoint-every", type=non_negative_int, default=0, metavar="N",
                   help="every fine-tuning run saves a resumable checkpoint every N steps, so a suite cut off "
                        "mid-run (--resume) continues the run from its last checkpoint, with the same task vector "
                        "(default 0: none; changes no run id or result)")
    p.set_defaults(handler=_suite)
    p = sub.add_parser("report", help="print the results table of a suite from a store, with its audit flags, "
                                      "learning-rate checks and what each row chose (as in docs/results.md)")
    p.add_argument("name")
    add_store_argument(p, viewer=True, help="store to read")
    p.set_defaults(handler=_report)


def _suite(args: argparse.Namespace) -> int:
    methods = [m for m in args.methods.split(",") if m] if args.methods else None
    posthoc = [m for m in args.posthoc.split(",") if m] if args.posthoc is not None else None
    part = [m for m in args.part.split(",") if m] if args.part is not None else None
    if args.name not in SUITES:
        raise unknown("suite", args.name, SUITES)
    store = Path(args.store)
    Store(store).check_folder()
    scale = args.scale or default_scale(args.name)
    if args.plan and part is not None:
        raise TalosError("--plan prices the whole suite (and marks what the store has done); leave --part out")
    if args.plan:
        from talos_core.suites.costs import check_device, detect_device
        from talos_core.suites.plan import plan_suite

        device, why = (check_device(args.plan_device), "given with --plan-device") if args.plan_device else \
            detect_device()
        workers = args.jobs or (1 if device.startswith("h100") and device != "h100-mps8" else os.cpu_count() or 1)
        print(plan_suite(args.name, scale, store, model=args.model, device=device, seed=args.seed, methods=methods,
                         posthoc=posthoc, workers=workers, device_note=why).text())
        return 0
    if args.executor != "ray" and (args.address or args.gpus_per_task is not None or args.cpus_per_task != 1.0):
        raise TalosError("--address, --gpus-per-task and --cpus-per-task go with --executor ray; add it, or leave "
                         "them out to run locally")
    if args.executor != "processes" and args.jobs is not None:
        raise TalosError("--jobs goes with --executor processes; add it, or leave --jobs out")
    runner = ExecutorOptions(args.executor, address=args.address, gpus_per_task=args.gpus_per_task,
                             cpus_per_task=args.cpus_per_task, jobs=args.jobs)
    options = SuiteRunOptions(scale=scale, seed=args.seed, device=args.device, methods=methods, posthoc=posthoc,
                              resume=args.resume, eval_precision=args.eval_precision,
                              train_precision=args.train_precision, stage=args.stage, model=args.model,
                              checkpoint_every=args.checkpoint_every, part=part, executor=runner)
    run_suite(args.name, store, options=options, log=(lambda s: None) if args.quiet else print)
    if args.stage == "all":
        print(results_markdown(store, args.name))
    return 0


def _report(args: argparse.Namespace) -> int:
    print(report_markdown(Path(args.store), args.name))
    return 0
