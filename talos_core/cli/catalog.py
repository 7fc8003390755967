"""``talos models``, ``talos tasks`` and ``talos methods``: the registries, one line each."""

from __future__ import annotations

import argparse

from talos_core.cli.common import print_table


def register(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("models", help="list registered models").set_defaults(handler=_models)
    sub.add_parser("tasks", help="list registered tasks").set_defaults(handler=_tasks)
    sub.add_parser("methods", help="list fine-tuning and post-hoc methods").set_defaults(handler=_methods)


def _models(args: argparse.Namespace) -> int:
    from talos_core.models import model_table

    print_table(model_table())
    return 0


def _tasks(args: argparse.Namespace) -> int:
    from talos_core.tasks import task_table

    print_table(task_table())
    print("\nYour own data, wherever a task name is accepted: csv:PATH[?text=COLUMN&label=COLUMN], images:DIR "
          "(one sub-folder per class) or hf:DATASET_ID[?config=..&split=..&test_split=..&text=..&label=..]")
    return 0


def _methods(args: argparse.Namespace) -> int:
    from talos_core.runners import method_table

    print_table(method_table())
    return 0
