"""``talos examples --store DIR``: per-example predictions for the galleries, computed afterwards.

For every fine-tuning method whose ``addition`` result in the store records its runs, the predictions of
≤ 24 fixed test examples per task (zero-shot, every addition and negation α of the stored grids, every
single-task model) are written to ``results/examples/`` (SCHEMA.md ``examples``;
:func:`talos_core.evaluation.examples.examples_from_store`). The runs' task vectors must be in the store.

Example::

    talos suite tiny --scale mini --store /tmp/st
    talos examples --store /tmp/st
"""

from __future__ import annotations

import argparse
import time

from talos_core.cli.common import add_store_argument, positive_int


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("examples", help="per-example predictions (the dashboard's galleries) from a store's stored "
                                        "addition/negation results and their runs")
    add_store_argument(p, help="store to read runs and results from and to write into")
    p.add_argument("--suite", default=None, help="comma-separated suites (default: every suite in the store)")
    p.add_argument("--methods", default=None, help="comma-separated methods or variant ids (default: every "
                                                   "fine-tuning method with stored addition results)")
    p.add_argument("--points", type=positive_int, default=24, help="fixed test examples per task (default and "
                                                                    "most: 24)")
    p.add_argument("--seed", type=int, default=0, help="seed of the example choice (default: 0)")
    p.add_argument("--device", default="auto")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(handler=_examples)


def _examples(args: argparse.Namespace) -> int:
    from talos_core.evaluation.examples import examples_from_store
    from talos_core.evaluation.protocols import ExamplesSettings
    from talos_core.store import Store

    ExamplesSettings(points=args.points, seed=args.seed)  # the protocol's rules (1 to 24 examples), before any work
    store = Store(args.store)
    store.check_folder()
    if not (store.root / "results").is_dir():
        from talos_core.errors import TalosError

        raise TalosError(f"store {store.root} has no results; pass --store with a store a suite was run into")
    split = lambda text: [v.strip() for v in text.split(",") if v.strip()] if text else None  # noqa: E731
    t0 = time.perf_counter()
    written = examples_from_store(store, suites=split(args.suite), methods=split(args.methods), points=args.points,
                                  seed=args.seed, device=args.device,
                                  log=(lambda s: None) if args.quiet else print)
    for kind, name in written:
        print(f"wrote {store.result_path(kind, name)}")
    print(f"done in {time.perf_counter() - t0:.1f} s")
    return 0
