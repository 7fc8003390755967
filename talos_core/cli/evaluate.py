"""``talos evaluate PROTOCOL --model M --tasks t1,t2 --method talos --store DIR ...``.

Fine-tunes missing runs with the usual fine-tuning flags (shared with ``talos finetune``), runs the
protocol, writes its results into the store (``results/<kind>/<name>.json``, see SCHEMA.md) and
prints a short summary. Every user error is one ``error: ...`` line (exit status 2).

Example::

    talos evaluate addition --model tiny-text --tasks tweets,drug-reviews --method talos \\
        --steps 20 --max-train 256 --max-test 128 --store /tmp/store --quiet
"""

from __future__ import annotations

import argparse
import time
from dataclasses import fields

from talos_core.cli.common import add_run_arguments, number, positive_int, request_from_args
from talos_core.errors import TalosError


def register(sub: argparse._SubParsersAction) -> None:
    from talos_core.evaluation.protocols import PROTOCOLS

    p = sub.add_parser("evaluate", help="run an evaluation protocol (task addition, negation, ...) into a store",
                       description="Protocols: " + "; ".join(f"{k}: {v}" for k, v in PROTOCOLS.items()))
    p.add_argument("protocol", help="one of: " + ", ".join(PROTOCOLS))
    p.add_argument("--tasks", default="", help="comma-separated task names (see `talos tasks`)")
    add_run_arguments(p, single_task=False)
    p.add_argument("--suite", default="default", help="suite name grouping these results (default: default)")
    p.add_argument("--control-task", help="negation control task (default: the registered control task)")
    p.add_argument("--grid", type=positive_int, default=20, help="disentanglement grid size per axis (paper 20)")
    p.add_argument("--range", type=number, default=3.0, dest="alpha_range",
                   help="disentanglement alpha range [-R, R] (paper 3)")
    p.add_argument("--points", type=positive_int, default=2048, help="disentanglement test points per task")
    p.add_argument("--fraction", type=number, default=0.1, help="sharing: bottom-k fraction (paper 0.1)")
    p.add_argument("--sharing-mode", default="prune", help="sharing: prune, perturb or both")
    p.add_argument("--samples", type=positive_int, default=128, help="sharing: Fisher examples per task")
    p.add_argument("--compare-method", help="masks: also compute per-task mask IoU against this method")
    p.add_argument("--preview-points", type=positive_int, default=512, help="preview: test points per task")
    p.add_argument("--alpha-step", type=number, default=0.05,
                   help="addition/negation alpha grid step (paper 0.05; x 1/(1-sparsity) for sparse methods)")
    p.add_argument("--eval-seed", type=int, default=0, help="seed of evaluation subsets and noise")
    p.add_argument("--eval-batch-size", type=positive_int, default=128)
    p.add_argument("--no-train", action="store_true", help="fail instead of fine-tuning missing runs")
    p.set_defaults(handler=_evaluate)


def overrides_from_args(args: argparse.Namespace, task: str) -> dict:
    """The request fields set on the command line that differ from a default request."""
    from talos_core.pipeline import FinetuneRequest

    given = request_from_args(args, task=task)
    default = FinetuneRequest(model=args.model, task=task, method=args.method)
    skip = {"model", "task", "method"}
    return {f.name: getattr(given, f.name) for f in fields(FinetuneRequest)
            if f.name not in skip and getattr(given, f.name) != getattr(default, f.name)}


def _evaluate(args: argparse.Namespace) -> int:
    from talos_core.evaluation.protocols import check_protocol, evaluate
    from talos_core.store import Store

    protocol = check_protocol(args.protocol)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if protocol != "comparison" and not tasks:
        raise TalosError("--tasks is required: a comma-separated list such as tweets,wordnet-verbs")
    overrides = overrides_from_args(args, tasks[0] if tasks else "tweets")
    t0 = time.perf_counter()
    out = evaluate(Store(args.store), protocol, args.model, tasks, args.method, suite=args.suite,
                   control_task=args.control_task, grid=args.grid, alpha_range=args.alpha_range,
                   points=args.points, fraction=args.fraction, sharing_mode=args.sharing_mode,
                   samples=args.samples, compare_method=args.compare_method, preview_points=args.preview_points,
                   seed=args.eval_seed, alpha_step=args.alpha_step, overrides=overrides,
                   train=not args.no_train, progress=not args.quiet, force=args.force, batch_size=args.eval_batch_size)
    print(f"{protocol} | {args.model} | {args.method} | tasks: {', '.join(tasks) or '-'}")
    print(out.summary())
    for kind, name in out.results:
        print(f"wrote {Store(args.store).result_path(kind, name)}")
    print(f"done in {time.perf_counter() - t0:.1f} s")
    return 0
