"""Building and saving the linearized preview cache (SCHEMA.md kind ``preview``).

For the linearized model (paper Eq. lin_net_addition)::

    f_lin(x, θ0 + Σ_t α_t τ_t) = f(x, θ0) + Σ_t α_t · τ_tᵀ∇θ f(x, θ0)

so storing, per evaluated task e, the logits ``base::e = f(x, θ0)`` and, per task vector t,
``jvp::e::t = τ_tᵀ∇θ f(x, θ0)`` (``[N, C]`` each) makes every mix a weighted sum of cached arrays.
:func:`build_preview` computes them, :func:`save_preview` writes ``results/preview/<name>.json`` (meta)
and its sibling ``results/preview/<name>.safetensors`` (arrays).

Reading a preview and evaluating an α mix (:class:`~talos_core.result_arrays.PreviewCache`,
:func:`~talos_core.result_arrays.load_preview`, :func:`~talos_core.result_arrays.preview_accuracy`) lives in the
torch-free :mod:`talos_core.result_arrays`, shared with the dashboard. Building a cache takes an
:class:`~talos_core.evaluation.context.EvalContext`, imported lazily.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from talos_core.result_arrays import PREVIEW_FORMAT, PreviewCache, array_key_base, array_key_jvp
from talos_core.schema import preview_paths


def save_preview(store, name: str, cache: PreviewCache, **extra) -> Path:
    """Write arrays (atomically, first) then the JSON meta into ``store`` (a :class:`~talos_core.store.Store`)."""
    from safetensors.numpy import save

    from talos_core.atomic import atomic_write_bytes

    _meta_path, arr_path = preview_paths(store.root, name)
    arrays = {array_key_base(e): np.ascontiguousarray(cache.base[e], dtype=np.float32) for e in cache.eval_tasks}
    arrays.update({array_key_jvp(e, t): np.ascontiguousarray(cache.jvp[(e, t)], dtype=np.float32)
                   for e in cache.eval_tasks for t in cache.tasks})
    store.ensure()
    atomic_write_bytes(arr_path, save(arrays, metadata={"format": PREVIEW_FORMAT}))
    n = {e: int(len(cache.labels[e])) for e in cache.eval_tasks}
    meta = {"tasks": cache.tasks, "eval_tasks": cache.eval_tasks,
            "n_per_task": min(n.values()) if n else 0, "n": n,
            "labels": {e: cache.labels[e].tolist() for e in cache.eval_tasks}, "arrays": arr_path.name, **extra}
    return store.write_result("preview", name, meta)


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
