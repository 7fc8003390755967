"""Task registry: look tasks up by name and load their train/val/test splits.

Two families are registered on import:

* :mod:`talos_core.tasks.offline` — real data sets that load here without network access
  (``source="offline"``), e.g. ``tweets``, ``wordnet-nouns``, ``mnist``, ``fashion-mnist``.
* :mod:`talos_core.tasks.files` — not registered: the user's own data named by a spec wherever a task
  name is accepted, ``csv:PATH``, ``images:DIR`` or ``hf:ID`` (:func:`get_task` resolves it).
* :mod:`talos_core.tasks.paper` — the paper's vision and NLP benchmarks, loaded from the Hugging Face
  hub (``source="huggingface"``); they raise :class:`~talos_core.errors.TalosError` when the hub is out
  of reach.

Inputs are model-agnostic: text tasks give ``list[str]``; image tasks give a ``uint8`` array of shape
``(N, H, W)`` or ``(N, H, W, 3)``, or — for Hugging Face image sets whose pictures differ in size —
a ``list`` of ``uint8`` arrays ``(H_i, W_i, 3)``. Treat loaded splits as read-only: they are cached
and shared between calls.

>>> data = load_task("digits", max_train=100)
>>> len(data.train), len(data.val), len(data.test)
(100, 143, 359)
>>> get_task("digits").num_classes
10
"""

from __future__ import annotations

import functools

import numpy as np

from talos_core.errors import TalosError, unknown
from talos_core.tasks.base import Split, TaskData, TaskSpec
from talos_core.tasks.files import is_file_task, resolve_file_task
from talos_core.tasks.offline import OFFLINE_TASKS
from talos_core.tasks.paper import PAPER_TASKS
from talos_core.tasks.splits import carve_validation, check_max, subsample

__all__ = ["TASKS", "Split", "TaskData", "TaskSpec", "get_task", "list_tasks", "load_task",
           "register_task", "task_table"]

TASKS: dict[str, TaskSpec] = {}
"""All registered tasks by name, in registration order."""


def register_task(spec: TaskSpec, *, replace: bool = False) -> TaskSpec:
    """Add ``spec`` to :data:`TASKS` and return it.

    Registering a different spec under a taken name is an error unless ``replace=True`` (which also
    drops the cached data of the old spec).

    >>> register_task(get_task("digits")) is get_task("digits")
    True
    """
    old = TASKS.get(spec.name)
    if old is not None and old is not spec:
        if not replace:
            raise TalosError(f"task {spec.name!r} is already registered; pass replace=True to override it")
        _load_splits.cache_clear()
    TASKS[spec.name] = spec
    return spec


def get_task(name: str) -> TaskSpec:
    """The spec registered as ``name``.

    >>> get_task("no-such-task")
    Traceback (most recent call last):
    ...
    talos_core.errors.TalosError: unknown task 'no-such-task'; choose one of: ...
    """
    try:
        return TASKS[name]
    except (KeyError, TypeError):
        pass
    if is_file_task(name):  # csv:PATH, images:DIR, hf:ID (talos_core.tasks.files)
        return resolve_file_task(name)
    raise TalosError(f"{unknown('task', name, TASKS)}; or your own data: csv:PATH, images:DIR or hf:DATASET_ID")


def list_tasks() -> list[TaskSpec]:
    """All registered specs, offline tasks first.

    >>> "mnist" in [s.name for s in list_tasks()]
    True
    """
    return list(TASKS.values())


def _check_split(spec: TaskSpec, split_name: str, split: Split) -> None:
    """Raise a :class:`TalosError` unless ``split`` is non-empty with labels in range."""
    if len(split) == 0:
        raise TalosError(f"task {spec.name!r} has an empty {split_name} split")
    labels = np.asarray(split.labels)
    if not np.issubdtype(labels.dtype, np.integer):
        raise TalosError(f"task {spec.name!r}: {split_name} labels must be integers, got {labels.dtype}")
    low, high = int(labels.min()), int(labels.max())
    if low < 0 or high >= spec.num_classes:
        raise TalosError(f"task {spec.name!r}: {split_name} labels span {low}..{high}, "
                         f"outside 0..{spec.num_classes - 1}")


@functools.cache
def _load_splits(name: str) -> TaskData:
    """Run the loader of ``name`` once per process and carve the validation split."""
    spec = get_task(name)
    train, test = spec.loader()
    _check_split(spec, "train", train)
    _check_split(spec, "test", test)
    train, val = carve_validation(train)
    return TaskData(train=train, val=val, test=test)


def load_task(name: str, *, max_train: int | None = None, max_val: int | None = None,
              max_test: int | None = None) -> TaskData:
    """Load task ``name`` as :class:`TaskData`, optionally subsampled.

    ``val`` is a fixed 10% of the source's training set (at most 5,000 examples), disjoint from
    ``train``; the split seed is fixed and independent of any training seed. ``max_*`` keep the
    first N examples of a fixed permutation of each split (source order kept), so a smaller
    subsample is contained in a larger one. The loader runs once per process; later calls are
    instant.

    >>> data = load_task("drug-reviews", max_val=10)
    >>> len(data.train), len(data.val), len(data.test)
    (540, 10, 379)
    """
    limits = {"train": check_max("max_train", max_train), "val": check_max("max_val", max_val),
              "test": check_max("max_test", max_test)}
    spec = get_task(name)
    full = _load_splits(spec.name)
    parts = {}
    for split_name, limit in limits.items():
        part = subsample(getattr(full, split_name), limit)
        _check_split(spec, split_name, part)
        parts[split_name] = part
    return TaskData(**parts)


def task_table() -> pandas.DataFrame:  # noqa: F821 - pandas is imported lazily
    """One row per registered task, for ``talos tasks``.

    >>> list(task_table().columns)
    ['name', 'modality', 'num_classes', 'source', 'hf_id', 'control', 'description']
    """
    import pandas as pd

    rows = [{"name": s.name, "modality": s.modality, "num_classes": s.num_classes, "source": s.source,
             "hf_id": s.hf_id, "control": s.control, "description": s.description} for s in TASKS.values()]
    return pd.DataFrame(rows, columns=["name", "modality", "num_classes", "source", "hf_id", "control",
                                       "description"])


def _register_builtin() -> None:
    for spec in (*OFFLINE_TASKS, *PAPER_TASKS):
        register_task(spec)


_register_builtin()
