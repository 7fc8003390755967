"""The ``talos`` command line: one module per command group, assembled here from an explicit list.

Every user error (unknown model/task/method, impossible values, corrupt store files) is printed as
one ``error: ...`` line with exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from talos_core.cli import audit, catalog, dashboard, docs, evaluate, examples, imports, merge, runs, suite
from talos_core.errors import TalosError

#: command groups, in the order ``talos --help`` lists them; each has ``register(subparsers)``
COMMAND_GROUPS = (catalog, runs, imports, evaluate, examples, merge, suite, audit, dashboard, docs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="talos", description="TaLoS Studio: task arithmetic with TaLoS")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in COMMAND_GROUPS:
        group.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from talos_core.inference.precision import eval_precision

    store = getattr(args, "store", None)
    new_store = isinstance(store, str) and not os.path.lexists(store)
    try:
        with eval_precision(getattr(args, "eval_precision", None)):
            return args.handler(args)
    except TalosError as exc:
        if new_store:  # a refused command leaves nothing behind, not even the empty store it created
            from talos_core.store import discard_unused

            discard_unused(store)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (`talos report ... | head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at interpreter exit
        return 141
    except OSError as exc:  # a folder that cannot be written or read (read-only store, a file where a folder goes)
        where = f" {exc.filename}" if exc.filename else ""
        print(f"error: cannot use{where}: {exc.strerror or exc}; check --store and the paths given", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
