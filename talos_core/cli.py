"""``talos`` command line.

Every user error (unknown model/task/method, impossible values, corrupt store files) is printed as
one ``error: ...`` line with exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from talos_core.errors import TalosError

DEFAULT_STORE = "runs"
_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}
_PARSERS: list[Callable[[argparse._SubParsersAction], None]] = []


def command(name: str):
    """Register ``func(args) -> exit code`` as the handler of sub-command ``name``."""

    def deco(func: Callable[[argparse.Namespace], int]):
        _COMMANDS[name] = func
        return func

    return deco


def subparsers(func: Callable[[argparse._SubParsersAction], None]):
    """Register a function that adds sub-command parsers (used by other modules too)."""
    _PARSERS.append(func)
    return func


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _option(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    for cast in (int, float):
        try:
            return key, cast(value)
        except ValueError:
            pass
    return key, value


def add_eval_precision_argument(p: argparse.ArgumentParser,
                                default_help: str = "$TALOS_EVAL_PRECISION or auto") -> None:
    """``--eval-precision auto|fp32|bf16`` (see :mod:`talos_core.evaluation.precision`); ``main`` applies it."""
    p.add_argument("--eval-precision", choices=["auto", "fp32", "bf16"], default=None,
                   help="precision of evaluation forward passes: auto = bf16 on GPUs and, for text encoders, on "
                        f"AMX CPUs, else fp32 (default: {default_help}; training is not affected)")


def add_run_arguments(p: argparse.ArgumentParser, *, single_task: bool = True) -> None:
    """Arguments shared by every command that fine-tunes (finetune, evaluate, suite)."""
    p.add_argument("--model", required=True, help="model name (see `talos models`)")
    if single_task:
        p.add_argument("--task", required=True, help="task name (see `talos tasks`)")
    p.add_argument("--method", default="talos", help="fine-tuning method (default: talos)")
    p.add_argument("--sparsity", type=_float, default=0.9, help="fraction of maskable entries frozen, in [0, 1)")
    p.add_argument("--store", default=DEFAULT_STORE, help=f"results store folder (default: ./{DEFAULT_STORE})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=_positive_int, help="training steps (default: the model's)")
    p.add_argument("--batch-size", type=_positive_int)
    p.add_argument("--lr", type=_float)
    p.add_argument("--weight-decay", type=_float)
    p.add_argument("--warmup-steps", type=int)
    p.add_argument("--rounds", type=_positive_int, default=4, help="TaLoS calibration rounds")
    p.add_argument("--calib-samples", type=_positive_int, help="calibration examples per round")
    p.add_argument("--soft-mask", type=_float, default=0.01, help="soft-mask factor (paper 0.01, official code 0.1)")
    p.add_argument("--score-target", choices=["logprob", "logit"], default="logprob")
    p.add_argument("--param-set", choices=["paper", "official"], default="paper")
    p.add_argument("--max-train", type=_positive_int)
    p.add_argument("--max-val", type=_positive_int)
    p.add_argument("--max-test", type=_positive_int)
    p.add_argument("--device", default="auto", help="auto, cpu or cuda[:N]")
    add_eval_precision_argument(p)
    p.add_argument("--checkpoint-every", type=int, default=0, help="save a resumable checkpoint every N steps")
    p.add_argument("--option", type=_option, action="append", default=[],
                   help="method option KEY=VALUE (e.g. rank=16 for llora); repeatable")
    p.add_argument("--force", action="store_true", help="re-run even if the store has this run")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def request_from_args(args: argparse.Namespace, task: str | None = None, method: str | None = None):
    from talos_core.pipeline import FinetuneRequest

    return FinetuneRequest(
        model=args.model, task=task or args.task, method=method or args.method, sparsity=args.sparsity,
        seed=args.seed, steps=args.steps, batch_size=args.batch_size, lr=args.lr,
        weight_decay=args.weight_decay, warmup_steps=args.warmup_steps, rounds=args.rounds,
        calib_samples=args.calib_samples, soft_mask_value=args.soft_mask, score_target=args.score_target,
        param_set=args.param_set, max_train=args.max_train, max_val=args.max_val, max_test=args.max_test,
        device=args.device, checkpoint_every=args.checkpoint_every, options=tuple(args.option))


@subparsers
def _core_parsers(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("models", help="list registered models")
    sub.add_parser("tasks", help="list registered tasks")
    p = sub.add_parser("finetune", help="calibrate (if needed) + fine-tune + evaluate one run into a store")
    add_run_arguments(p)
    p = sub.add_parser("runs", help="list the runs in a store")
    p.add_argument("--store", default=DEFAULT_STORE)
    p = sub.add_parser("export", help="copy a store's results and run manifests (no weights) into another store")
    p.add_argument("--store", required=True, help="source store")
    p.add_argument("--to", required=True, help="destination store (e.g. cached_results)")
    p.add_argument("--artifacts", action="store_true", help="also copy task vectors and masks (large)")
    p.add_argument("--referenced-only", action="store_true",
                   help="copy only the runs that some result refers to")
    p = sub.add_parser("dashboard", help="launch the Streamlit dashboard")
    p.add_argument("--store", default=None, help="store to open (default: the shipped cached_results)")
    p.add_argument("--port", type=int, default=8501)


def _print_table(df) -> None:
    import pandas as pd

    with pd.option_context("display.max_rows", None, "display.max_columns", None, "display.width", 200,
                           "display.max_colwidth", 70):
        print(df.to_string(index=False))


@command("models")
def _models(args: argparse.Namespace) -> int:
    from talos_core.models import model_table

    _print_table(model_table())
    return 0


@command("tasks")
def _tasks(args: argparse.Namespace) -> int:
    from talos_core.tasks import task_table

    _print_table(task_table())
    return 0


@command("finetune")
def _finetune(args: argparse.Namespace) -> int:
    from talos_core.pipeline import run_finetune
    from talos_core.store import Store

    req = request_from_args(args)
    req.validate()
    run = run_finetune(req, Store(args.store), force=args.force, progress=not args.quiet)
    m = run.manifest["metrics"]
    print(f"run {run.id} -> {run.path}")
    line = f"zero-shot test acc {m['zero_shot_test_acc']:.4f} | fine-tuned test acc {m['finetuned_test_acc']:.4f}"
    if "mask_density" in m:
        line += f" | mask density {m['mask_density']:.4f}"
    print(line)
    return 0


@command("runs")
def _runs(args: argparse.Namespace) -> int:
    from talos_core.store import Store

    table = Store(args.store).run_table()
    if table.empty:
        print(f"no runs in {args.store}")
    else:
        _print_table(table)
    return 0


@command("export")
def _export(args: argparse.Namespace) -> int:
    from talos_core.store import export_store

    counts = export_store(args.store, args.to, artifacts=args.artifacts, referenced_only=args.referenced_only)
    print(f"exported {counts['results']} result files, {counts['manifests']} run manifests, "
          f"{counts['artifacts']} artifacts from {args.store} to {args.to}")
    return 0


@command("dashboard")
def _dashboard(args: argparse.Namespace) -> int:
    import subprocess

    app = Path(__file__).resolve().parent.parent / "dashboard" / "app.py"
    if not app.exists():
        raise TalosError(f"dashboard app not found at {app}")
    env = dict(os.environ)
    if args.store:
        env["TALOS_STORE"] = str(Path(args.store).resolve())
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(args.port),
           "--server.headless", "true", "--browser.gatherUsageStats", "false"]
    return subprocess.call(cmd, env=env)


def build_parser() -> argparse.ArgumentParser:
    _load_extensions()
    parser = argparse.ArgumentParser(prog="talos", description="TaLoS Studio: task arithmetic with TaLoS")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in _PARSERS:
        add(sub)
    return parser


def _load_extensions() -> None:
    """Modules that add sub-commands (evaluation, suites) register them on import."""
    import importlib

    for module in ("talos_core.evaluation.cli", "talos_core.suites"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from talos_core.evaluation.precision import eval_precision

    try:
        with eval_precision(getattr(args, "eval_precision", None)):
            return _COMMANDS[args.command](args)
    except TalosError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    # run the *package* module's main: `python -m talos_core.cli` would otherwise build a second copy
    # of this module whose command table lacks the sub-commands other modules register
    from talos_core.cli import main as _package_main

    sys.exit(_package_main())
