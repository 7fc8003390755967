"""Argument helpers shared by the command modules of :mod:`talos_core.cli`."""

from __future__ import annotations

import argparse

from talos_core.methods.finetuning import SPARSITY
from talos_core.schema import default_store, viewer_store


def _int_at_least(text: str, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a {what} integer, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected a {what} integer, got {text!r}")
    return value


def positive_int(text: str) -> int:
    return _int_at_least(text, 1, "positive")


def non_negative_int(text: str) -> int:
    return _int_at_least(text, 0, "non-negative")


def seed(text: str) -> int:
    """A seed, ``0`` to ``2**63 - 1`` (what numpy's and torch's generators take)."""
    from talos_core.errors import MAX_SEED

    value = _int_at_least(text, 0, "non-negative")
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected a seed in [0, 2**63 - 1], got {text!r}")
    return value


def port(text: str) -> int:
    """A TCP port, ``1`` to ``65535``."""
    value = _int_at_least(text, 1, "port")
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port in [1, 65535], got {text!r}")
    return value


def folder(text: str) -> str:
    """A folder path: not empty (``--store ""`` would silently mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a folder, got {text!r}")
    return text


def check_sparsity_flag(sparsity: float | None, method: str) -> None:
    """``--sparsity`` given for a method that trains no sparse subset (``nonlinear``, ``llora``, post-hoc merges of
    ``nonlinear`` vectors) would be silently ignored: one sentence instead. Unknown methods are left to their own
    check."""
    from talos_core.errors import TalosError
    from talos_core.schema import METHODS, base_method_of

    info = METHODS.get(base_method_of(method) or "")
    if sparsity is None or info is None:
        return
    if not METHODS[info.base_method or info.name].sparse:
        sparse = ", ".join(m for m, i in METHODS.items() if i.sparse)
        raise TalosError(f"--sparsity {sparsity:g} applies only to sparse methods ({sparse}); method {method!r} "
                         f"trains no sparse subset: leave --sparsity out")


def number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def option(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    for cast in (int, float):
        try:
            return key, cast(value)
        except ValueError:
            pass
    return key, value


def add_store_argument(p: argparse.ArgumentParser, *, viewer: bool = False,
                       help: str = "results store folder") -> None:
    """``--store DIR`` with the one default-store rule of :mod:`talos_core.schema`.

    Commands that compute (finetune, runs, evaluate, suite) default to :func:`~talos_core.schema.default_store`
    (``$TALOS_STORE``, else ``./runs``); the viewers (dashboard, report, ``viewer=True``) to
    :func:`~talos_core.schema.viewer_store` (``$TALOS_STORE``, else the shipped ``cached_results/``, else
    ``./runs``). The default is resolved when the parser is built, i.e. on every :func:`talos_core.cli.main`.
    """
    default, rule = ((viewer_store(), "$TALOS_STORE, else the shipped cached_results/, else ./runs") if viewer
                     else (default_store(), "$TALOS_STORE, else ./runs"))
    p.add_argument("--store", type=folder, default=str(default), help=f"{help} (default: {rule})")


def add_eval_precision_argument(p: argparse.ArgumentParser,
                                default_help: str = "$TALOS_EVAL_PRECISION or auto") -> None:
    """``--eval-precision auto|fp32|bf16`` (see :mod:`talos_core.inference.precision`); ``main`` applies it."""
    p.add_argument("--eval-precision", choices=["auto", "fp32", "bf16"], default=None,
                   help="precision of evaluation forward passes: auto = bf16 on GPUs and, for text encoders, on "
                        f"AMX CPUs, else fp32 (default: {default_help}; training is not affected)")


def add_train_precision_argument(p: argparse.ArgumentParser,
                                 default_help: str = "$TALOS_TRAIN_PRECISION or auto") -> None:
    """``--train-precision auto|fp32|bf16`` (see :mod:`talos_core.inference.precision`): the request's
    ``train_precision``."""
    p.add_argument("--train-precision", choices=["auto", "fp32", "bf16"], default=None,
                   help="precision of fine-tuning: bf16 = autocast with fp32 master weights; auto = bf16 on GPUs, "
                        "fp32 on CPUs (bf16 only for model families measured faster on AMX CPUs) "
                        f"(default: {default_help})")


def add_run_arguments(p: argparse.ArgumentParser, *, single_task: bool = True) -> None:
    """Arguments shared by every command that fine-tunes (finetune, evaluate, suite)."""
    p.add_argument("--model", required=True, help="model name (see `talos models`)")
    if single_task:
        p.add_argument("--task", required=True,
                       help="task name (see `talos tasks`), or your own data: csv:PATH, images:DIR or hf:DATASET_ID")
    p.add_argument("--method", default="talos", help="fine-tuning method (default: talos)")
    p.add_argument("--sparsity", type=number, default=None,
                   help="fraction of maskable entries frozen, in [0, 1) "
                        f"(sparse methods only; default {SPARSITY.default:g})")
    add_store_argument(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=positive_int, help="training steps (default: the model's)")
    p.add_argument("--batch-size", type=positive_int,
                   help="training examples per step (default: the model's; at most 65536 and at most --max-train)")
    p.add_argument("--lr", type=number)
    p.add_argument("--weight-decay", type=number)
    p.add_argument("--warmup-steps", type=int, help="linear warm-up steps (default: the model's; at most the run's "
                                                     "steps)")
    p.add_argument("--rounds", type=positive_int, default=4, help="TaLoS calibration rounds")
    p.add_argument("--calib-samples", type=positive_int, help="calibration examples per round")
    p.add_argument("--soft-mask", type=number, default=None,
                   help="soft-mask factor of TaLoS calibration (default: the model's — paper 0.01; 1 = none for "
                        "BatchNorm CNNs; official code 0.1)")
    p.add_argument("--score-target", choices=["logprob", "logit"], default="logprob")
    p.add_argument("--param-set", choices=["paper", "official"], default="paper")
    p.add_argument("--zero-scores", choices=["exclude", "rank"], default="exclude",
                   help="TaLoS calibration: entries with exactly zero sensitivity are left out (default: they cannot "
                        "learn) or ranked like any score (the official code)")
    p.add_argument("--ties", choices=["keep", "random"], default="keep",
                   help="TaLoS calibration: entries tied at a round's threshold are all kept (default: Algorithm 1) or "
                        "drawn at random to keep exactly k (seeded)")
    p.add_argument("--max-train", type=positive_int)
    p.add_argument("--max-val", type=positive_int)
    p.add_argument("--max-test", type=positive_int)
    p.add_argument("--device", default="auto", help="auto, cpu or cuda[:N]")
    add_eval_precision_argument(p)
    add_train_precision_argument(p)
    p.add_argument("--checkpoint-every", type=non_negative_int, default=0,
                   help="save a resumable checkpoint every N steps (default 0: none)")
    p.add_argument("--eval-every", type=non_negative_int, default=0,
                   help="learning curve: validation accuracy of the model being trained every N steps and at the "
                        "last, stored in the run's manifest (default 0: off; does not change the run)")
    p.add_argument("--batching", choices=["random", "length"], default="random",
                   help="how a step's examples are drawn: random (default), or length — the same examples per epoch, "
                        "grouped by input length so text batches pad less (changes the run)")
    p.add_argument("--option", type=option, action="append", default=[],
                   help="method option KEY=VALUE (e.g. rank=16 for llora); repeatable")
    p.add_argument("--force", action="store_true", help="re-run even if the store has this run")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def request_from_args(args: argparse.Namespace, task: str | None = None, method: str | None = None):
    from talos_core.pipeline import CalibrationSettings, FinetuneRequest

    check_sparsity_flag(args.sparsity, method or args.method)
    return FinetuneRequest(
        model=args.model, task=task or args.task, method=method or args.method,
        sparsity=SPARSITY.default if args.sparsity is None else args.sparsity,
        seed=args.seed, steps=args.steps, batch_size=args.batch_size, lr=args.lr,
        weight_decay=args.weight_decay, warmup_steps=args.warmup_steps,
        calibration=CalibrationSettings(rounds=args.rounds, calib_samples=args.calib_samples,
                                        soft_mask_value=args.soft_mask, score_target=args.score_target,
                                        param_set=args.param_set, zero_scores=args.zero_scores,
                                        calibration_ties=args.ties),
        max_train=args.max_train, max_val=args.max_val, max_test=args.max_test,
        device=args.device, checkpoint_every=args.checkpoint_every, options=tuple(args.option),
        train_precision=args.train_precision, eval_every=args.eval_every,
        batching=args.batching)


def print_table(df) -> None:
    import pandas as pd

    with pd.option_context("display.max_rows", None, "display.max_columns", None, "display.width", 200,
                           "display.max_colwidth", 70):
        print(df.to_string(index=False))
