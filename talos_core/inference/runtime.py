"""The model at θ0 on a device, ready for inference: device choice, the cached pre-trained model with a
task's frozen head, and the process-wide memo of zero-shot accuracies.

This is the layer every user of a pre-trained model stands on — fine-tuning
(:mod:`talos_core.pipeline`), evaluation contexts (:mod:`talos_core.evaluation.context`) and suites —
below the protocols. The pre-trained model is loaded once per process (:func:`prepared_model`) and
never mutated for good: edits and fine-tuning restore it bitwise, which is what makes the memo of
zero-shot accuracies valid.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import torch

from talos_core.errors import TalosError
from talos_core.models import load_model
from talos_core.models.base import TaskModel
from talos_core.tasks.base import TaskSpec


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise TalosError(f"device {device!r} was asked for but no CUDA GPU is available; use --device cpu")
    return torch.device(device)


@lru_cache(maxsize=4)
def _cached_model(name: str) -> TaskModel:
    return load_model(name)


def cached_model(name: str) -> TaskModel:
    """The model ``name`` as loaded once per process (the same object :func:`prepared_model` prepares)."""
    return _cached_model(name)


def prepared_model(name: str, task: TaskSpec, device: torch.device) -> TaskModel:
    """The (cached) model ``name`` on ``device`` carrying ``task``'s zero-shot head, at θ0."""
    model = _cached_model(name).to(device)
    if model.head_task != task.name:
        model.set_head(head_for(model, name, task), task.name)
    return model


_HEADS: dict[tuple[str, str], dict] = {}


def head_for(model: TaskModel, name: str, task: TaskSpec) -> dict:
    """The frozen head of ``task`` on model ``name`` (built once per process). A head that gives every class the same
    row (class names the model's tokenizer reads the same, e.g. emoji it does not know) is one :class:`TalosError`:
    with it the model's outputs never depend on the class, so nothing could be learned or measured."""
    key = (name, task.name)
    if key not in _HEADS:
        head = model.build_head(task)
        weight = head.get("weight")
        if isinstance(weight, torch.Tensor) and len(weight) > 1 and bool((weight == weight[:1]).all()):
            shown = ", ".join(repr(c) for c in task.classes[:4]) + (", ..." if len(task.classes) > 4 else "")
            raise TalosError(f"model {name!r} gives every class of task {task.name!r} ({shown}) the same zero-shot "
                             f"head: its tokenizer reads their names the same, so the model could never tell the "
                             f"classes apart; name the classes in words")
        _HEADS[key] = head
    return _HEADS[key]


_ZERO_SHOT_MEMO: dict[tuple, float] = {}
"""Zero-shot accuracies of contexts built by :meth:`EvalContext.for_model`, shared across the contexts of
one process (a suite builds one per protocol step). The key holds everything the value depends on:
model name, device, resolved evaluation precision, task, split, data limits and batch size; θ0 itself is
the cached, never-mutated pre-trained model (edits and fine-tuning restore it bitwise)."""


def clear_zero_shot_memo() -> None:
    """Forget the process-wide zero-shot accuracies (e.g. after replacing a cached model)."""
    _ZERO_SHOT_MEMO.clear()


def memoized_zero_shot(compute: Callable[[], float], *, model: str, device: str | torch.device, precision: str,
                       max_val: int | None, max_test: int | None, batch_size: int, task: str, split: str) -> float:
    """The zero-shot accuracy of ``model`` on ``task``'s ``split`` (data loaded with ``max_val``/``max_test``,
    evaluated in batches of ``batch_size`` at the resolved evaluation ``precision``), computed by
    ``compute()`` the first time in this process."""
    key = (model, str(device), precision, max_val, max_test, batch_size, task, split)
    if key not in _ZERO_SHOT_MEMO:
        _ZERO_SHOT_MEMO[key] = compute()
    return _ZERO_SHOT_MEMO[key]
