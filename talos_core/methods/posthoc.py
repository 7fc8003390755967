"""Glue between stored :class:`~talos_core.vectors.TaskVector` s and the post-hoc methods of
:mod:`talos_core.methods.merging` (TIES-Merging, DARE, Breadcrumbs, TALL mask / Consensus, TSV-Merge, Iso-C,
Iso-CTS, LiNeS).

As the paper prescribes, post-hoc methods are applied to ``nonlinear`` fine-tuning vectors
(:data:`BASE_METHOD`). Everything here is pure: inputs are never modified and the same inputs give the
same outputs (DARE is seeded per ``(seed, task index)``).

* :func:`posthoc_vectors` — ``(merged, singles)``: the merged vector for task addition (scale it by α
  afterwards) and, per task, the method's processed single-task vector (for its own single-task
  accuracy — the normaliser of normalized accuracy — and, scaled by a negative α, for task negation);
* :func:`posthoc_merged` / :func:`posthoc_singles` — one half each, to save work in a grid search;
* :func:`posthoc_grid` — the paper's hyperparameter grid for ``T`` tasks (pick the point on the
  validation split, as the evaluation protocols do).

Missing hyperparameters take the registry's defaults (those of the official scripts). Task order is the
order of the input dict: it is the task index DARE seeds with and the order TALL masks are computed in.

>>> import torch
>>> from talos_core.vectors import TaskVector
>>> tvs = {"a": TaskVector.from_dense({"w": torch.tensor([4.0, -1.0, 0.5, 2.0])}),
...        "b": TaskVector.from_dense({"w": torch.tensor([-3.0, 1.0, 0.5, 2.0])})}
>>> merged, singles = posthoc_vectors("ties", tvs, sparsity=0.5)
>>> merged.dense("w").tolist(), singles["a"].dense("w").tolist()
([4.0, 0.0, 0.0, 2.0], [4.0, 0.0, 0.0, 2.0])
>>> posthoc_grid("ties", 2)[:2]
[{'sparsity': 0.1}, {'sparsity': 0.2}]
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import torch

from talos_core.errors import TalosError
from talos_core.methods.merging import POSTHOC_METHODS, PosthocSpec, get_posthoc
from talos_core.vectors import TaskVector

BASE_METHOD = "nonlinear"
"""The fine-tuning method whose vectors the post-hoc methods process (paper Sec. 5)."""


def _dense_vectors(vectors: Mapping[str, TaskVector]) -> tuple[list[str], list[dict[str, torch.Tensor]]]:
    """Tasks and dense ``{param: Δ}`` dicts over the *union* of parameter names (zeros where absent)."""
    if not isinstance(vectors, Mapping) or not vectors:
        raise TalosError("expected a non-empty dict of task name -> TaskVector")
    shapes: dict[str, tuple[int, ...]] = {}
    for task, tv in vectors.items():
        if not isinstance(tv, TaskVector):
            raise TalosError(f"vector of task {task!r} must be a TaskVector, got {type(tv).__name__}")
        for name, shape in tv.shapes.items():
            if shapes.setdefault(name, tuple(shape)) != tuple(shape):
                raise TalosError(f"task vectors disagree on the shape of {name!r}: {shapes[name]} vs {tuple(shape)}")
    tasks = list(vectors)
    dense = []
    for task in tasks:
        tv = vectors[task]
        dense.append({n: (tv.dense(n).float() if n in tv.values else torch.zeros(s)) for n, s in shapes.items()})
    return tasks, dense


def _hparams(spec: PosthocSpec, method: str, hparams: dict[str, Any]) -> dict[str, Any]:
    """Registry defaults overridden by ``hparams``; unknown names raise a :class:`TalosError`."""
    allowed = [p for p in inspect.signature(spec.merge).parameters if p != "vectors"]
    extra = sorted(set(hparams) - set(allowed))
    if extra:
        raise TalosError(f"unknown hyperparameter(s) {extra} for post-hoc method {method!r}; "
                         f"allowed: {', '.join(allowed)}")
    return {**{k: v for k, v in spec.defaults.items() if k in allowed}, **hparams}


def posthoc_merged(method_name: str, nonlinear_vectors: Mapping[str, TaskVector], **hparams: Any) -> TaskVector:
    """The merged vector of ``method_name`` over all tasks (``POSTHOC_METHODS[m].merge``), sparse-stored."""
    spec = get_posthoc(method_name)
    hp = _hparams(spec, method_name, hparams)
    _, dense = _dense_vectors(nonlinear_vectors)
    return TaskVector.from_dense(spec.merge(dense, **hp))


def posthoc_singles(method_name: str, nonlinear_vectors: Mapping[str, TaskVector],
                    **hparams: Any) -> dict[str, TaskVector]:
    """Per task, the method's processed single-task vector (``POSTHOC_METHODS[m].single_task``)."""
    spec = get_posthoc(method_name)
    hp = _hparams(spec, method_name, hparams)
    tasks, dense = _dense_vectors(nonlinear_vectors)
    return {t: TaskVector.from_dense(spec.single_task(dense, i, **hp)) for i, t in enumerate(tasks)}


def posthoc_vectors(method_name: str, nonlinear_vectors: Mapping[str, TaskVector],
                    **hparams: Any) -> tuple[TaskVector, dict[str, TaskVector]]:
    """``(merged, singles)`` of a post-hoc method applied to ``{task: nonlinear TaskVector}``.

    ``hparams`` are the method's (see :func:`posthoc_grid`; e.g. ``sparsity=0.9`` for ``ties``,
    ``lam=0.2, k=2`` for ``tall_consensus``); missing ones take the registry defaults. Vectors may
    have different supports: they are aligned on the union of parameter names, zeros elsewhere.
    """
    return (posthoc_merged(method_name, nonlinear_vectors, **hparams),
            posthoc_singles(method_name, nonlinear_vectors, **hparams))


def posthoc_grid(method_name: str, num_tasks: int) -> list[dict[str, Any]]:
    """The paper's hyperparameter grid of ``method_name`` for ``num_tasks`` tasks (list of kwargs dicts).

    >>> len(posthoc_grid("breadcrumbs", 8)) > len(posthoc_grid("dare", 8)) == 11
    True
    """
    return get_posthoc(method_name).grid_points(num_tasks)


def posthoc_methods() -> list[str]:
    """Ids of the registered post-hoc methods.

    >>> posthoc_methods()[:2]
    ['breadcrumbs', 'dare']
    """
    return sorted(POSTHOC_METHODS)
