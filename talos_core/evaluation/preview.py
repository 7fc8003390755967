"""Linearized preview cache: task-arithmetic accuracies for ANY α mix in milliseconds (numpy only).

For the linearized model (paper Eq. lin_net_addition)::

    f_lin(x, θ0 + Σ_t α_t τ_t) = f(x, θ0) + Σ_t α_t · τ_tᵀ∇θ f(x, θ0)

so storing, per evaluated task e, the logits ``base::e = f(x, θ0)`` and, per task vector t,
``jvp::e::t = τ_tᵀ∇θ f(x, θ0)`` (``[N, C]`` each) makes every mix a weighted sum of cached arrays.
:func:`preview_accuracy` does exactly that; it needs no torch and no model, so the dashboard can call it
on every slider move. Files (SCHEMA.md, kind ``preview``): ``results/preview/<name>.json`` (meta) and
``results/preview/<name>.safetensors`` (arrays).

This module imports only numpy, json and safetensors' numpy API; building a cache
(:func:`build_preview`) takes an :class:`~talos_core.evaluation.context.EvalContext` and is imported lazily.

>>> import numpy as np
>>> cache = PreviewCache(tasks=["a"], eval_tasks=["a"], labels={"a": np.array([0, 1])},
...                      base={"a": np.array([[1.0, 0.0], [1.0, 0.0]])},
...                      jvp={("a", "a"): np.array([[0.0, 0.0], [-2.0, 2.0]])})
>>> preview_accuracy(cache, {"a": 0.0}), preview_accuracy(cache, {"a": 1.0})
({'a': 0.5}, {'a': 1.0})
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from talos_core.errors import TalosError

KIND = "preview"


@dataclass
class PreviewCache:
    """Cached ``f(x, θ0)`` and ``τ_tᵀ∇f(x, θ0)`` logits; ``jvp[(eval_task, vector_task)]``."""

    tasks: list[str]  # task vectors (the α's)
    eval_tasks: list[str]
    labels: dict[str, np.ndarray]
    base: dict[str, np.ndarray]
    jvp: dict[tuple[str, str], np.ndarray]
    meta: dict = field(default_factory=dict)
    _stacks: dict = field(default_factory=dict, repr=False)

    def stack(self, eval_task: str) -> np.ndarray:
        """``[T, N, C]`` jvps of every vector on ``eval_task`` (built once, then reused)."""
        if eval_task not in self._stacks:
            self._stacks[eval_task] = np.stack([self.jvp[(eval_task, t)] for t in self.tasks]) if self.tasks \
                else np.zeros((0, *self.base[eval_task].shape), dtype=self.base[eval_task].dtype)
        return self._stacks[eval_task]


def _check_alphas(cache: PreviewCache, alphas: Mapping[str, float]) -> np.ndarray:
    unknown = [t for t in alphas if t not in cache.tasks]
    if unknown:
        raise TalosError(f"no cached task vector for {unknown[0]!r}; choose among: {', '.join(cache.tasks)}")
    return np.array([float(alphas.get(t, 0.0)) for t in cache.tasks], dtype=np.float32)


def preview_logits(cache: PreviewCache, alphas: Mapping[str, float], eval_task: str) -> np.ndarray:
    """``base + Σ_t α_t jvp_t`` on ``eval_task`` (tasks missing from ``alphas`` get α = 0)."""
    a = _check_alphas(cache, alphas)
    if eval_task not in cache.base:
        raise TalosError(f"no cached evaluation task {eval_task!r}; choose among: {', '.join(cache.eval_tasks)}")
    return cache.base[eval_task] + np.tensordot(a, cache.stack(eval_task), axes=1)


def preview_accuracy(cache: PreviewCache, alphas: Mapping[str, float],
                     eval_tasks: Sequence[str] | None = None) -> dict[str, float]:
    """Accuracy of the linearized ``θ0 + Σ α_t τ_t`` on each cached evaluation task (pure numpy)."""
    out = {}
    for e in (eval_tasks if eval_tasks is not None else cache.eval_tasks):
        logits = preview_logits(cache, alphas, e)
        labels = cache.labels[e]
        out[e] = float((logits.argmax(-1) == labels).mean()) if len(labels) else float("nan")
    return out


# --------------------------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------------------------
def array_key_base(eval_task: str) -> str:
    return f"base::{eval_task}"


def array_key_jvp(eval_task: str, vector_task: str) -> str:
    return f"jvp::{eval_task}::{vector_task}"


def preview_paths(store_root: str | Path, name: str) -> tuple[Path, Path]:
    """``results/preview/<name>.json`` and its sibling ``.safetensors``."""
    folder = Path(store_root) / "results" / KIND
    return folder / f"{name}.json", folder / f"{name}.safetensors"


def load_preview(store_root: str | Path, name: str) -> PreviewCache:
    """Read a preview cache written by :func:`save_preview` (numpy only, no torch)."""
    from safetensors.numpy import load_file

    meta_path, arr_path = preview_paths(store_root, name)
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise TalosError(f"no preview cache {name!r} in {store_root}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TalosError(f"corrupt preview metadata {meta_path}: {exc}") from None
    arr_path = meta_path.with_name(meta.get("arrays", arr_path.name))
    try:
        arrays = load_file(str(arr_path))
    except FileNotFoundError:
        raise TalosError(f"missing preview arrays {arr_path}") from None
    except Exception as exc:
        raise TalosError(f"corrupt preview arrays {arr_path}: {exc}") from None
    tasks, evals = list(meta["tasks"]), list(meta["eval_tasks"])
    try:
        base = {e: arrays[array_key_base(e)] for e in evals}
        jvp = {(e, t): arrays[array_key_jvp(e, t)] for e in evals for t in tasks}
    except KeyError as exc:
        raise TalosError(f"preview arrays {arr_path} lack {exc.args[0]!r}") from None
    labels = {e: np.asarray(meta["labels"][e], dtype=np.int64) for e in evals}
    return PreviewCache(tasks, evals, labels, base, jvp, meta)


def save_preview(store, name: str, cache: PreviewCache, **extra) -> Path:
    """Write arrays (atomically, first) then the JSON meta into ``store`` (a :class:`~talos_core.store.Store`)."""
    from safetensors.numpy import save

    from talos_core.atomic import atomic_write_bytes

    meta_path, arr_path = preview_paths(store.root, name)
    arrays = {array_key_base(e): np.ascontiguousarray(cache.base[e], dtype=np.float32) for e in cache.eval_tasks}
    arrays.update({array_key_jvp(e, t): np.ascontiguousarray(cache.jvp[(e, t)], dtype=np.float32)
                   for e in cache.eval_tasks for t in cache.tasks})
    store.ensure()
    atomic_write_bytes(arr_path, save(arrays, metadata={"format": "talos-preview/1"}))
    n = {e: int(len(cache.labels[e])) for e in cache.eval_tasks}
    meta = {"tasks": cache.tasks, "eval_tasks": cache.eval_tasks,
            "n_per_task": min(n.values()) if n else 0, "n": n,
            "labels": {e: cache.labels[e].tolist() for e in cache.eval_tasks}, "arrays": arr_path.name, **extra}
    return store.write_result(KIND, name, meta)


def build_preview(ctx, vectors: Mapping, eval_tasks: Sequence[str] | None = None, *, points: int = 512,
                  seed: int = 0, split: str = "test") -> PreviewCache:
    """Compute ``f(x, θ0)`` and every ``τ_tᵀ∇f(x, θ0)`` on ``points`` random ``split`` examples per eval task.

    Cost: per eval task one forward and one JVP per vector (``torch.func.jvp``); the model is unchanged.
    """
    from talos_core.evaluation.context import subset

    tasks = list(vectors)
    evals = list(eval_tasks) if eval_tasks is not None else tasks
    base, jvp, labels = {}, {}, {}
    for k, e in enumerate(evals):
        part = subset(ctx.split(e, split), points, seed + k)
        b, jv = ctx.base_and_jvps(e, part, [vectors[t] for t in tasks])
        base[e] = b.numpy().astype(np.float32)
        for t, arr in zip(tasks, jv):
            jvp[(e, t)] = arr.numpy().astype(np.float32)
        labels[e] = np.asarray(part.labels, dtype=np.int64)
    return PreviewCache(tasks, evals, labels, base, jvp)
