"""Which examples each training step takes: seeded epochs of random batches (:func:`batch_indices`), batches grouped
by input length (:class:`GroupedBatches`), and a step's micro-batches (:func:`micro_batches`). Pure numpy: the same
step of the same run draws the same examples on every machine; :mod:`talos_core.training` uses them.
"""

from __future__ import annotations

import numpy as np

#: length-grouped batching sorts pools of this many batches (transformers' ``group_by_length`` uses 50)
POOL_BATCHES = 50


def batch_indices(step: int, n: int, batch_size: int, seed: int) -> np.ndarray:
    """Indices of the examples in training step ``step``: epochs of fixed seeded permutations.

    Stateless, so a resumed run sees exactly the batches an uninterrupted one would.
    """
    start = step * batch_size
    out = []
    while len(out) < batch_size:
        epoch, offset = divmod(start, n)
        perm = np.random.default_rng([seed, epoch]).permutation(n)
        take = perm[offset: offset + batch_size - len(out)]
        out.extend(take.tolist())
        start += len(take)
    return np.asarray(out, dtype=np.int64)


def _grouped_epoch(epoch: int, lengths: np.ndarray, batch_size: int, seed: int, pool_batches: int) -> np.ndarray:
    """Epoch ``epoch``'s example order under length grouping: the epoch's seeded permutation (the one
    :func:`batch_indices` uses) cut into pools of ``pool_batches × batch_size`` examples, each pool sorted by length
    (longest first, ties in permutation order), cut into batches, and the batches of the epoch shuffled (seeded)."""
    n = len(lengths)
    perm = np.random.default_rng([seed, epoch]).permutation(n)
    pool = max(1, pool_batches * batch_size)
    grouped = np.concatenate([p[np.argsort(-lengths[p], kind="stable")] for p in np.split(perm, range(pool, n, pool))])
    batches = np.split(grouped, range(batch_size, n, batch_size))
    order = np.random.default_rng([seed, epoch, 1]).permutation(len(batches))
    return np.concatenate([batches[i] for i in order])


class GroupedBatches:
    """Length-grouped batches of one run (the ``group_by_length`` idea of transformers' Trainer): every epoch holds
    the same examples as with :func:`batch_indices`, each once, but a batch's examples have similar lengths, so
    dynamic padding pads less. Stateless in what it returns (a resumed run sees the same batches); it only keeps the
    current epoch's order, computed once per epoch rather than once per step."""

    def __init__(self, lengths: np.ndarray, batch_size: int, seed: int, pool_batches: int = POOL_BATCHES) -> None:
        self.lengths, self.batch_size, self.seed, self.pool_batches = lengths, batch_size, seed, pool_batches
        self._epoch: tuple[int, np.ndarray] | None = None

    def epoch(self, epoch: int) -> np.ndarray:
        """Epoch ``epoch``'s example order (:func:`_grouped_epoch`), cached for the current epoch."""
        if self._epoch is None or self._epoch[0] != epoch:
            self._epoch = (epoch, _grouped_epoch(epoch, self.lengths, self.batch_size, self.seed, self.pool_batches))
        return self._epoch[1]

    def indices(self, step: int) -> np.ndarray:
        """Indices of the examples in training step ``step``."""
        n, start, out = len(self.lengths), step * self.batch_size, []
        while len(out) < self.batch_size:
            epoch, offset = divmod(start, n)
            take = self.epoch(epoch)[offset: offset + self.batch_size - len(out)]
            out.extend(take.tolist())
            start += len(take)
        return np.asarray(out, dtype=np.int64)


def grouped_batch_indices(step: int, lengths: np.ndarray, batch_size: int, seed: int,
                          pool_batches: int = POOL_BATCHES) -> np.ndarray:
    """Indices of the examples in step ``step`` with length grouping (:class:`GroupedBatches`, for one step).

    >>> lengths = np.array([5, 1, 9, 2, 8, 3, 7, 4])
    >>> sorted(np.concatenate([grouped_batch_indices(s, lengths, 2, 0) for s in range(4)]).tolist())
    [0, 1, 2, 3, 4, 5, 6, 7]
    >>> [sorted(lengths[grouped_batch_indices(s, lengths, 2, 0, pool_batches=4)].tolist()) for s in range(4)]
    [[1, 2], [5, 7], [3, 4], [8, 9]]
    >>> g = GroupedBatches(lengths, 3, 0)
    >>> all((g.indices(s) == grouped_batch_indices(s, lengths, 3, 0)).all() for s in range(9))
    True
    """
    return GroupedBatches(lengths, batch_size, seed, pool_batches).indices(step)


def micro_batches(idx: np.ndarray, size: int) -> list[np.ndarray]:
    """``idx`` in consecutive chunks of ``size`` (0 = one chunk): the micro-batches of one accumulated step.

    >>> [c.tolist() for c in micro_batches(np.arange(5), 2)]
    [[0, 1], [2, 3], [4]]
    """
    if size <= 0 or size >= len(idx):
        return [idx]
    return [idx[i: i + size] for i in range(0, len(idx), size)]
