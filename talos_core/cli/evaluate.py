"""``talos evaluate PROTOCOL --model M --tasks t1,t2 --method talos --store DIR ...``.

Fine-tunes missing runs with the usual fine-tuning flags (shared with ``talos finetune``), runs the
protocol (see :data:`talos_core.evaluation.protocols.PROTOCOLS`) with the settings its flags give,
writes its results into the store (``results/<kind>/<name>.json``, see SCHEMA.md) and prints a short
summary. Flags of other protocols are ignored. Every user error is one ``error: ...`` line (exit
status 2).

Example::

    talos evaluate addition --model tiny-text --tasks tweets,drug-reviews --method talos \\
        --steps 20 --max-train 256 --max-test 128 --store /tmp/store --quiet
    talos evaluate posthoc --method ties --model tiny-text --tasks tweets,drug-reviews --steps 20 --quiet

Per-task hyperparameter selection (paper App. "Hyperparameter selection"), then the selected runs, then
the fixed-sparsity row beside them::

    talos evaluate selection --method talos --param sparsity --values 0.5,0.8,0.9,0.95,0.99 ...
    talos evaluate addition --method talos --use-selection ...
    talos evaluate addition --method talos --sparsity 0.9 --result-method talos-k0.9 ...
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

from talos_core.cli.common import add_run_arguments, number, option, positive_int, request_from_args, seed
from talos_core.errors import TalosError


def candidate_values(text: str) -> tuple[int | float, ...]:
    """``"8,16,64"`` → ``(8, 16, 64)``, ``"0.5,1e-4"`` → ``(0.5, 0.0001)``: integers stay integers (ranks)."""
    out: list[int | float] = []
    for v in (v.strip() for v in text.split(",")):
        if not v:
            continue
        try:
            out.append(int(v))
        except ValueError:
            try:
                out.append(float(v))
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    return tuple(out)


def option_pairs(text: str) -> tuple[tuple[str, object], ...]:
    """``"conv1x1=matrix,nonmatrix=sum"`` → ``(("conv1x1", "matrix"), ("nonmatrix", "sum"))``."""
    return tuple(option(part.strip()) for part in text.split(",") if part.strip())


def numbers(text: str) -> tuple[float, ...]:
    """``"0.5,0.9"`` → ``(0.5, 0.9)``."""
    try:
        return tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


#: the flags of protocol settings: (flag, the settings field it sets, type, help, the protocols it applies to
#: (None: every protocol whose settings have that field)); a flag not given leaves the protocol's default
SETTING_FLAGS: tuple[tuple[str, str, Callable[[str], Any], str, tuple[str, ...] | None], ...] = (
    ("--control-task", "control_task", str, "control task of negation, posthoc, sparsity-ablation, alpha-rule and "
                                            "selection (default: the registered control task)", None),
    ("--grid", "grid", positive_int, "disentanglement grid size per axis (default: 20, as the paper)", None),
    ("--range", "alpha_range", number, "disentanglement alpha range [-R, R] (default: 3, as the paper)", None),
    ("--points", "points", positive_int, "disentanglement test points per task (default: 2048)",
     ("disentanglement",)),
    ("--fraction", "fraction", number, "sharing: bottom-k fraction (default: 0.1, as the paper)", None),
    ("--sharing-mode", "mode", str, "sharing: prune, perturb or both (default: prune)", None),
    ("--samples", "samples", positive_int, "sharing: Fisher examples per task (default: 128)", None),
    ("--compare-method", "compare_method", str, "masks: also compute per-task mask IoU against this method", None),
    ("--preview-points", "points", positive_int, "preview: test points per task (default: 512)", ("preview",)),
    ("--example-points", "points", positive_int, "examples: fixed test examples per task (default and most: 24)",
     ("examples",)),
    ("--alpha-step", "alpha_step", number, "alpha grid step of addition, negation, posthoc, sparsity-ablation and "
                                           "selection (default: 0.05, as the paper; x 1/(1-sparsity) for sparse "
                                           "methods)", None),
    ("--alpha-rule", "alpha_rule", str, "addition and negation: how the alpha grid is spread: paper (default: "
                                        "0..1, x 1/(1-sparsity) for sparse methods) or unit (0..1 for every method, "
                                        "as the official code at HEAD; an ablation: give it its own --result-method)",
     None),
    ("--posthoc-points", "max_points", positive_int, "posthoc: hyperparameter grid points tried, spread evenly "
                                                     "(default: the whole grid)", None),
    ("--posthoc-base", "base_method", str, "posthoc: the fine-tuning method whose runs are merged (default: "
                                           "nonlinear, as the paper; e.g. imported for checkpoints from talos import; "
                                           "results are written under the post-hoc method, so give them their own "
                                           "--suite)", None),
    ("--posthoc-option", "options", option_pairs, "posthoc: the method's labelled options KEY=VALUE[,KEY=VALUE] "
                                                  "instead of its authors' conventions, e.g. conv1x1=matrix for TSV / "
                                                  "Iso-C / Iso-CTS, nonmatrix=sum, nonblock=nearest for LiNeS (`talos "
                                                  "methods` lists them; give the results their own --suite)", None),
    ("--sparsities", "sparsities", numbers, "sparsity-ablation: comma-separated sparsities "
                                            "(default: 0.5,0.9,0.95,0.99)", None),
    ("--param", "param", str, "selection: the hyperparameter chosen per task: sparsity (sparse methods), rank "
                              "(llora) or lr (default: sparsity)", None),
    ("--values", "values", candidate_values, "selection: comma-separated candidates (default: 0.5,0.8,0.9,0.95,0.99 "
                                             "for sparsity, 8,16,64 for rank; lr needs them); lr-check: the learning "
                                             "rates compared, the method's own among them (default: 1e-4,1e-3)", None),
    ("--tolerance", "tolerance", number, "learning-curve: accuracy gain below which a curve counts as plateaued "
                                         "(default: 0.01); --eval-every and --steps set the curve", None),
    ("--eval-seed", "seed", seed, "seed of evaluation subsets and noise (default: 0)", None),
    ("--eval-batch-size", "batch_size", positive_int, "evaluation batch size (default: the device's, 32 "
                                                      "on CPUs, 128 on GPUs)", None),
)


def _dest(flag: str) -> str:
    return flag[2:].replace("-", "_")


def _flags_of(protocol) -> list[tuple[str, str]]:
    """``(flag, settings field)`` of every flag that sets a setting of ``protocol``."""
    names = {f.name for f in fields(protocol.settings)}
    return [(flag, name) for flag, name, _, _, only in SETTING_FLAGS
            if name in names and (only is None or protocol.name in only)]


def register(sub: argparse._SubParsersAction) -> None:
    from talos_core.evaluation.protocols import PROTOCOLS

    p = sub.add_parser("evaluate", help="run an evaluation protocol (task addition, negation, ...) into a store",
                       description=_protocols_help(PROTOCOLS), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("protocol", help="one of: " + ", ".join(PROTOCOLS))
    p.add_argument("--tasks", default="", help="comma-separated task names (see `talos tasks`)")
    add_run_arguments(p, single_task=False)
    p.add_argument("--suite", default="default", help="suite name grouping these results (default: default)")
    for flag, _name, kind, text, _only in SETTING_FLAGS:
        p.add_argument(flag, type=kind, help=text)
    p.add_argument("--no-train", action="store_true", help="fail instead of fine-tuning missing runs")
    p.add_argument("--use-selection", action="store_true",
                   help="evaluate the run chosen per task by the stored selection of this method, suite and model "
                        "(talos evaluate selection)")
    p.add_argument("--suite-row", default=None,
                   help="evaluate the runs of this row of the suite named by --suite (talos, talos-k0.9, ...), with "
                        "the suite's own settings and per-task choices read from its record in --store: e.g. "
                        "`talos evaluate alpha-rule --suite vision --suite-row talos --model efficientnet-lite0`")
    p.add_argument("--result-method", default=None,
                   help="write the results under this id instead of the method: a variant id such as talos-k0.9 "
                        "(a separate, labelled row)")
    p.set_defaults(handler=_evaluate)


def _protocols_help(protocols: dict) -> str:
    lines = ["Protocols (and the flags that set their settings):"]
    for name, proto in protocols.items():
        flags = [flag for flag, _ in _flags_of(proto)]
        lines.append(f"  {name}: {proto.description}" + (f" [{' '.join(flags)}]" if flags else ""))
    return "\n".join(lines)


def settings_from_args(protocol, args: argparse.Namespace, defaults: Mapping[str, Any] | None = None):
    """The protocol's settings: each field from its flag when given, else from ``defaults`` (those of its fields
    there: a suite row's α step and control task), else the protocol's default."""
    names = {f.name for f in fields(protocol.settings)}
    given = {name: getattr(args, _dest(flag)) for flag, name in _flags_of(protocol)
             if getattr(args, _dest(flag)) is not None}
    return protocol.settings(**{**{k: v for k, v in (defaults or {}).items() if k in names}, **given})


def overrides_from_args(args: argparse.Namespace, task: str) -> dict:
    """The request fields set on the command line that differ from a default request."""
    from talos_core.pipeline import STORED_KEYS, FinetuneRequest

    given = request_from_args(args, task=task).flat()
    default = FinetuneRequest(model=args.model, task=task, method=args.method).flat()
    skip = {"model", "task", "method"}
    return {STORED_KEYS.get(k, k): v for k, v in given.items() if k not in skip and v != default[k]}


def _evaluate(args: argparse.Namespace) -> int:
    from talos_core.evaluation.protocols import evaluate, get_protocol
    from talos_core.store import Store
    from talos_core.tasks.files import canonical_task

    protocol = get_protocol(args.protocol)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    tasks = [canonical_task(t) for t in tasks]  # csv:PATH, images:DIR, hf:ID → named with their content hash
    if protocol.needs_tasks and not tasks and args.suite_row is None:
        raise TalosError("--tasks is required: a comma-separated list such as tweets,wordnet-verbs")
    settings = settings_from_args(protocol, args)
    overrides = overrides_from_args(args, tasks[0] if tasks else "tweets")
    t0 = time.perf_counter()
    store = Store(args.store)
    task_overrides = None
    method, result_method = args.method, args.result_method
    if args.suite_row is not None:
        from talos_core.suites import suite_row

        given = [flag for flag, on in (("--tasks", bool(tasks)), ("--use-selection", args.use_selection),
                                       ("--result-method", args.result_method is not None),
                                       ("--method", args.method != "talos")) if on]
        given += [f"--{k.replace('_', '-')}" for k in overrides]
        if given:
            raise TalosError(f"--suite-row takes the method, tasks, run settings and choices from the suite; leave "
                             f"{', '.join(given)} out")
        row = suite_row(store, args.suite, args.suite_row)
        if row.model != args.model:
            raise TalosError(f"suite {args.suite!r} in {store.root} ran model {row.model!r}, not {args.model!r}; pass "
                             f"--model {row.model}")
        tasks, method, overrides = list(row.tasks), row.method, row.overrides
        task_overrides, result_method = row.task_overrides, row.result_method
        settings = settings_from_args(protocol, args, defaults=row.settings)  # the suite's, unless flags say else
    if args.use_selection:
        from talos_core.evaluation.selection import selected_overrides
        from talos_core.methods.posthoc import BASE_METHOD

        of = BASE_METHOD if protocol.method_kind == "posthoc" else args.method  # post-hoc merges its runs
        task_overrides = selected_overrides(store, args.suite, args.model, of, tasks)
    out = evaluate(store, protocol.name, args.model, tasks, method, suite=args.suite, settings=settings,
                   overrides=overrides, train=not args.no_train, progress=not args.quiet, force=args.force,
                   task_overrides=task_overrides, result_method=result_method)
    print(f"{protocol.name} | {args.model} | {result_method or method} | tasks: {', '.join(tasks) or '-'}")
    print(out.summary())
    for kind, name in out.results:
        print(f"wrote {store.result_path(kind, name)}")
    print(f"done in {time.perf_counter() - t0:.1f} s")
    return 0
