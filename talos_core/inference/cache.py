"""Exact reuse of an edited model's logits inside one suite run, so that a step cut off mid-way (a session that
ends, a pre-empted node, Ctrl-C) loses at most the evaluation in flight, and steps that evaluate the same edit on
the same examples compute it once.

An evaluation of ``θ0 + Σ α_t τ_t`` on a split is deterministic: the same weights, examples, head, evaluation
precision, batch size and device give the same logits bit for bit. The cache keys an edit by the content of all of
them (SHA-256 of the θ0 weights, of every task vector's entries with its α, in the order the terms are applied; of
each split's inputs and labels and of the task's frozen head), so a hit is the number a re-computation would give,
and anything that changes the numbers misses. One file per edit (``<root>/<key[:2]>/<key>.safetensors``, float32
logits per evaluated split, written atomically) holds the splits evaluated under it so far.

It is on only inside :func:`logits_cache` (``talos suite`` wraps every step in it, with the folder
``<store>/checkpoints/logits``, which the suite removes once it is complete) and only for non-linear edits (the
linearized model already evaluates every α from one JVP; θ0's own passes are memoized per process). A hit counts
as ``cached`` in :mod:`talos_core.inference.tally`, not as a forward pass. The key does not cover the code: a
resumed suite must run the code it started with (``docs/scale-out.md``), as its checkpoints already ask.

>>> import tempfile
>>> with logits_cache(tempfile.mkdtemp()):
...     active() is not None
True
>>> active() is None
True
"""

from __future__ import annotations

import hashlib
import json
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

CACHE_VERSION = 1
"""Part of every key: bump it when what a key stands for changes (then old files simply miss)."""

_root: Path | None = None
_vector_digests: dict[int, tuple[weakref.ref, str]] = {}


@contextmanager
def logits_cache(root: str | Path | None) -> Iterator[Path | None]:
    """Evaluations inside the block read and write the cache in folder ``root`` (``None``: off)."""
    global _root
    before = _root
    _root = Path(root) if root is not None else None
    try:
        yield _root
    finally:
        _root = before


def active() -> Path | None:
    """The cache folder evaluations use now (``None``: no cache)."""
    return _root


def _update_tensor(h, t: torch.Tensor) -> None:
    t = t.detach().cpu().contiguous()
    h.update(f"{t.dtype}{tuple(t.shape)}".encode())
    if t.numel():
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())


def tensors_digest(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 of named tensors (names, dtypes, shapes and bytes, in name order)."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        h.update(name.encode() + b"\0")
        _update_tensor(h, tensors[name])
    return h.hexdigest()


def vector_digest(tv) -> str:
    """SHA-256 of a :class:`~talos_core.vectors.TaskVector`'s entries (values, indices, shapes); remembered for as
    long as the vector object lives (vectors are not changed after they are built)."""
    key = id(tv)
    seen = _vector_digests.get(key)
    if seen is not None and seen[0]() is tv:
        return seen[1]
    h = hashlib.sha256()
    for name in sorted(tv.values):
        idx = tv.indices.get(name)
        h.update(f"{name}\0{tuple(tv.shapes[name])}\0{'dense' if idx is None else 'sparse'}".encode())
        if idx is not None:
            _update_tensor(h, idx)
        _update_tensor(h, tv.values[name])
    digest = h.hexdigest()
    _vector_digests[key] = (weakref.ref(tv, lambda _r, k=key: _vector_digests.pop(k, None)), digest)
    return digest


def split_digest(split) -> str:
    """SHA-256 of a :class:`~talos_core.tasks.base.Split`'s inputs (texts or an array) and labels."""
    h = hashlib.sha256()
    inputs = split.inputs
    if isinstance(inputs, np.ndarray):
        a = np.ascontiguousarray(inputs)
        h.update(f"array{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    else:
        h.update(f"texts{len(inputs)}".encode())
        for x in inputs:
            b = str(x).encode()
            h.update(len(b).to_bytes(8, "little") + b)
    labels = np.ascontiguousarray(np.asarray(split.labels, dtype=np.int64))
    h.update(labels.tobytes())
    return h.hexdigest()


def edit_key(*, model: str, theta0: str, device: str, precision: str, batch_size: int,
             terms: Sequence[tuple[str, float]]) -> str:
    """The key of one non-linear edit ``θ0 + Σ α τ`` (``terms``: vector digests with their α, in order)."""
    payload = {"version": CACHE_VERSION, "model": model, "theta0": theta0, "device": device, "precision": precision,
               "batch_size": int(batch_size), "terms": [[d, float(a).hex()] for d, a in terms]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def item_key(task: str, head: str, split: str) -> str:
    """The name under which one evaluated split's logits are kept in its edit's file."""
    return hashlib.sha256(f"{task}\0{head}\0{split}".encode()).hexdigest()[:40]


def _path(key: str) -> Path:
    assert _root is not None
    return _root / key[:2] / f"{key}.safetensors"


def read(key: str) -> dict[str, torch.Tensor]:
    """The logits kept for edit ``key`` (``{item: tensor}``; ``{}`` with none, or for a damaged file)."""
    from talos_core.atomic import load_safetensors
    from talos_core.errors import TalosError

    try:
        return load_safetensors(_path(key))[0]
    except TalosError:  # none yet, or a damaged file (a killed writer cannot leave one: writes are atomic): a miss
        return {}


def write(key: str, logits: dict[str, torch.Tensor]) -> None:
    """Keep ``logits`` (``{item: tensor}``, the edit's whole set) for edit ``key``, atomically."""
    from talos_core.atomic import atomic_save_safetensors

    path = _path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_save_safetensors({k: v.float().contiguous() for k, v in logits.items()}, path)


__all__ = ["CACHE_VERSION", "active", "edit_key", "item_key", "logits_cache", "read", "split_digest",
           "tensors_digest", "vector_digest", "write"]
