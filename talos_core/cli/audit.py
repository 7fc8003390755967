"""``talos audit SUITE [--store DIR] [--strict] [--json]``: the audit's flags on a suite's stored results.

Prints every flag (:mod:`talos_core.evaluation.audit`), grouped by check with the check's explanation, and exits 0;
``--strict`` exits 1 when any flag is raised (for CI on a store you ship). ``--json`` prints the flags as a JSON
list instead (one object per flag: check, title, row, metrics, source, message, numbers, explanation).

Example::

    talos audit vision                    # the shipped store
    talos audit text --store runs --strict
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from talos_core.cli.common import add_store_argument


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="list the audit's flags on a suite's results (α at a grid edge, runs not "
                                     "converged, control broken on test, ...)")
    p.add_argument("name", metavar="SUITE", help="suite name, e.g. vision or text")
    add_store_argument(p, viewer=True, help="store the suite's results are read from")
    p.add_argument("--strict", action="store_true", help="exit 1 when any flag is raised (default: exit 0)")
    p.add_argument("--json", action="store_true", help="print the flags as a JSON list")
    p.set_defaults(handler=_audit)


def _audit(args: argparse.Namespace) -> int:
    from talos_core.evaluation.audit import audit_suite, audit_text
    from talos_core.schema import check_suite

    check_suite(args.name)
    flags = audit_suite(Path(args.store), args.name)
    if args.json:
        print(json.dumps([f.to_dict() for f in flags], indent=1, ensure_ascii=False))
    else:
        print(audit_text(flags, args.name))
    return 1 if args.strict and flags else 0
