"""Deterministic splitting and subsampling of :class:`~talos_core.tasks.base.Split` objects.

Every function here is a pure function of its arguments: the same split and the same seed always
give the same result, whatever training seed a run uses. Positions are chosen as the first ``n``
entries of a fixed permutation and then sorted, so the selected examples keep their source order and
a smaller subsample is always contained in a larger one drawn with the same seed.

>>> import numpy as np
>>> from talos_core.tasks.base import Split
>>> s = Split([f"x{i}" for i in range(20)], np.arange(20) % 2)
>>> rest, held = holdout(s, 5, seed=0)
>>> len(rest), len(held)
(15, 5)
>>> sorted(set(rest.inputs) | set(held.inputs)) == sorted(s.inputs)
True
"""

from __future__ import annotations

import numpy as np

from talos_core.errors import check_int
from talos_core.tasks.base import Split

SPLIT_SEED = 20240917
"""Seed of every data split (validation carving, test hold-outs, subsampling).

Fixed and independent of any training seed, so every run of every method sees the same examples.
"""

VAL_FRACTION = 0.10
VAL_CAP = 5_000
TEST_FRACTION = 0.20


def permutation(n: int, seed: int = SPLIT_SEED) -> np.ndarray:
    """The fixed permutation of ``range(n)`` for ``seed``.

    >>> permutation(5, seed=1).tolist() == permutation(5, seed=1).tolist()
    True
    >>> sorted(permutation(5).tolist())
    [0, 1, 2, 3, 4]
    """
    return np.random.default_rng(seed).permutation(n)


def validation_size(n_train: int) -> int:
    """How many of ``n_train`` training examples become validation: 10%, at most 5,000, at least 1.

    >>> validation_size(600), validation_size(60_000), validation_size(1), validation_size(0)
    (60, 5000, 1, 0)
    """
    if n_train <= 0:
        return 0
    return min(VAL_CAP, max(1, int(n_train * VAL_FRACTION)))


def holdout(split: Split, n_holdout: int, seed: int = SPLIT_SEED) -> tuple[Split, Split]:
    """Split ``split`` into ``(rest, held)`` where ``held`` has ``n_holdout`` examples.

    ``held`` is the first ``n_holdout`` positions of the fixed permutation; both parts keep source
    order. The two parts are disjoint and together cover ``split``.

    >>> from talos_core.tasks.base import Split
    >>> rest, held = holdout(Split(["a", "b", "c", "d"], np.array([0, 1, 0, 1])), 1, seed=3)
    >>> len(rest) + len(held)
    4
    """
    n = len(split)
    if not 0 <= n_holdout <= n:
        raise ValueError(f"cannot hold out {n_holdout} of {n} examples")
    perm = permutation(n, seed)
    held_idx = np.sort(perm[:n_holdout])
    rest_idx = np.sort(perm[n_holdout:])
    return split.take(rest_idx), split.take(held_idx)


def holdout_fraction(split: Split, fraction: float = TEST_FRACTION, seed: int = SPLIT_SEED) -> tuple[Split, Split]:
    """Hold out ``fraction`` of ``split`` (rounded down, at least one example when there are two).

    Used by loaders whose source has no test split: ``train, test = holdout_fraction(everything)``.

    >>> from talos_core.tasks.base import Split
    >>> train, test = holdout_fraction(Split(list("abcdefghij"), np.zeros(10, dtype=np.int64)))
    >>> len(train), len(test)
    (8, 2)
    """
    n = len(split)
    n_held = min(n - 1, max(1, int(n * fraction))) if n >= 2 else 0
    return holdout(split, n_held, seed)


def carve_validation(train: Split, seed: int = SPLIT_SEED) -> tuple[Split, Split]:
    """Return ``(train_rest, val)``: val is :func:`validation_size` examples of ``train``.

    >>> from talos_core.tasks.base import Split
    >>> rest, val = carve_validation(Split(list(range(100)), np.zeros(100, dtype=np.int64)))
    >>> len(rest), len(val)
    (90, 10)
    """
    return holdout(train, validation_size(len(train)), seed)


def subsample(split: Split, max_size: int | None, seed: int = SPLIT_SEED) -> Split:
    """At most ``max_size`` examples of ``split``: the first ``max_size`` of the fixed permutation.

    ``None`` (or a size at least ``len(split)``) returns ``split`` itself.

    >>> from talos_core.tasks.base import Split
    >>> s = Split(list("abcdef"), np.arange(6))
    >>> small, big = subsample(s, 2), subsample(s, 4)
    >>> set(small.inputs) <= set(big.inputs), len(subsample(s, None))
    (True, 6)
    """
    if max_size is None or max_size >= len(split):
        return split
    return split.take(np.sort(permutation(len(split), seed)[:max_size]))


def check_max(name: str, value: int | None) -> int | None:
    """Validate a ``max_*`` argument: ``None`` or a positive integer.

    >>> check_max("max_train", 10)
    10
    >>> check_max("max_train", 0)
    Traceback (most recent call last):
    ...
    talos_core.errors.TalosError: max_train must be a positive integer or None, got 0
    """
    return check_int(name, value, low=1, optional=True, numpy=True, what="a positive integer or None")
