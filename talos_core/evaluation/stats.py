"""Bootstrap confidence intervals over test examples for the shipped means (numpy only, no torch).

Every mean the tables report (task addition's absolute and normalized accuracy, task negation's target
and control accuracy, single-task and zero-shot accuracy) is an average over tasks of per-task test
accuracies. Its 95% interval is a *percentile bootstrap over test examples*: each replicate draws, for
every task independently, ``n_t`` of that task's ``n_t`` test examples with replacement, recomputes the
statistic, and the interval is the 2.5th and 97.5th percentiles of the replicates (Efron & Tibshirani,
"An Introduction to the Bootstrap", ch. 13). Vectors measured on the *same* examples (the merged and the
single-task model for normalized accuracy, paper App. Eq. "Normalized Accuracy"; the control task under
each negated target) are stacked as rows of one ``[k, n]`` array and resampled with the same indices.

Per-example correctness is stored compactly as a string of ``0``/``1`` (:func:`encode_examples`,
:func:`decode_examples`), one character per test example in the split's order.

>>> bootstrap_ci({"a": [1, 1, 1, 1]}, mean_accuracy)
(1.0, 1.0)
>>> encode_examples([True, False, True]), decode_examples("101").tolist()
('101', [True, False, True])
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from talos_core.errors import TalosError, check_int, check_number

RESAMPLES = 1000
SEED = 0
LEVEL = 0.95
_BLOCK = 4_000_000  # resampled examples held in memory at once (per task: block rows × n)

Statistic = Callable[[Mapping[str, np.ndarray]], np.ndarray]


# --------------------------------------------------------------------------------------------
# compact per-example correctness
# --------------------------------------------------------------------------------------------
def encode_examples(correct: Sequence[bool] | np.ndarray) -> str:
    """Per-example correctness as a ``"0101…"`` string (one character per example, in order)."""
    arr = np.asarray(correct)
    if arr.ndim != 1:
        raise TalosError(f"per-example correctness must be a 1-D sequence, got shape {arr.shape}")
    if arr.size and not np.isin(arr, (0, 1)).all():
        raise TalosError("per-example correctness must hold only 0/1 (or False/True) values")
    return (arr.astype(np.uint8) + ord("0")).tobytes().decode("ascii")


def decode_examples(text: Any) -> np.ndarray:
    """The boolean array of a ``"0101…"`` string written by :func:`encode_examples`."""
    if not isinstance(text, str) or (text and set(text) - {"0", "1"}):
        shown = text if not isinstance(text, str) else text[:20] + ("…" if len(text) > 20 else "")
        raise TalosError(f"per-example correctness must be a string of 0 and 1, got {shown!r}")
    return np.frombuffer(text.encode("ascii"), dtype=np.uint8) == ord("1")


# --------------------------------------------------------------------------------------------
# the bootstrap
# --------------------------------------------------------------------------------------------
def _check_samples(samples_by_task: Mapping[str, Any]) -> dict[str, np.ndarray]:
    if not isinstance(samples_by_task, Mapping):
        raise TalosError(f"bootstrap needs a mapping {{task: per-example values}}, "
                         f"got {type(samples_by_task).__name__}")
    if not samples_by_task:
        raise TalosError("bootstrap needs the examples of at least one task, got none")
    out = {}
    for task, values in samples_by_task.items():
        try:
            arr = np.asarray(values, dtype=float)
        except (TypeError, ValueError):
            raise TalosError(f"the examples of task {task!r} are not numbers") from None
        if arr.ndim not in (1, 2) or arr.shape[-1] == 0 or (arr.ndim == 2 and arr.shape[0] == 0):
            raise TalosError(f"the examples of task {task!r} must be a non-empty [n] or [k, n] array, "
                             f"got shape {arr.shape}")
        if not np.isfinite(arr).all():
            raise TalosError(f"the examples of task {task!r} hold a non-finite value")
        out[str(task)] = arr
    return out


def _check_settings(resamples: Any, seed: Any, level: Any) -> None:
    check_int("resamples", resamples, low=1)
    check_int("seed", seed, low=0)
    check_number("level", level, low=0, high=1, low_open=True, high_open=True,
                 what="a number strictly between 0 and 1")


def statistic_value(samples_by_task: Mapping[str, Any], statistic: Statistic) -> float:
    """``statistic`` of the examples as given (no resampling): the point estimate an interval goes with."""
    data = _check_samples(samples_by_task)
    return float(np.asarray(statistic({t: a[None] for t, a in data.items()}), dtype=float).reshape(-1)[0])


def bootstrap_replicates(samples_by_task: Mapping[str, Any], statistic: Statistic, *, resamples: int = RESAMPLES,
                         seed: int = SEED) -> np.ndarray:
    """``resamples`` bootstrap replicates of ``statistic`` (see :func:`bootstrap_ci`), NaN ones included."""
    _check_settings(resamples, seed, LEVEL)
    data = _check_samples(samples_by_task)
    # one generator per task (in the mapping's order): a task's draws do not depend on the block size
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(len(data))]
    block = max(1, min(resamples, _BLOCK // max(a.shape[-1] * (a.shape[0] if a.ndim == 2 else 1)
                                                 for a in data.values())))
    out = []
    for start in range(0, resamples, block):
        size = min(block, resamples - start)
        drawn = {}
        for rng, (task, arr) in zip(rngs, data.items()):
            idx = rng.integers(0, arr.shape[-1], size=(size, arr.shape[-1]))
            # [n] -> [size, n]; [k, n] -> [size, k, n] (the k rows share the indices: same examples)
            drawn[task] = arr[idx] if arr.ndim == 1 else np.moveaxis(arr[:, idx], 0, 1)
        values = np.asarray(statistic(drawn), dtype=float).reshape(-1)
        if values.shape != (size,):
            raise TalosError(f"the bootstrap statistic must return one value per resample ({size}), "
                             f"got {values.size}")
        out.append(values)
    return np.concatenate(out)


def bootstrap_ci(samples_by_task: Mapping[str, Any], statistic: Statistic, *, resamples: int = RESAMPLES,
                 seed: int = SEED, level: float = LEVEL) -> tuple[float, float]:
    """Percentile bootstrap interval ``(lo, hi)`` of ``statistic`` over examples, resampled within each task.

    ``samples_by_task[t]`` holds task t's per-example values (``[n_t]``, e.g. 0/1 correctness) or
    ``[k, n_t]`` for k vectors measured on the same n_t examples (resampled with the same indices).
    ``statistic`` maps ``{task: resampled array}`` — ``[R, n_t]`` or ``[R, k, n_t]`` for R resamples
    — to R values (e.g. :func:`mean_accuracy`, :func:`normalized_accuracy`). Each task's indices are
    drawn from its own generator seeded from ``seed``, so the interval is deterministic. Replicates
    where the statistic is NaN (e.g. a normalizer resampled to 0) are left out; ``(nan, nan)`` if all are.

    >>> lo, hi = bootstrap_ci({"a": [1] * 50 + [0] * 50}, mean_accuracy)
    >>> 0.38 < lo < 0.42 and 0.58 < hi < 0.62
    True
    """
    _check_settings(resamples, seed, level)
    values = bootstrap_replicates(samples_by_task, statistic, resamples=resamples, seed=seed)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return float("nan"), float("nan")
    tail = (1.0 - float(level)) / 2.0
    lo, hi = np.quantile(values, [tail, 1.0 - tail])
    return float(lo), float(hi)


# --------------------------------------------------------------------------------------------
# the statistics of the tables
# --------------------------------------------------------------------------------------------
def _task_accuracy(arr: np.ndarray) -> np.ndarray:
    """``[R]`` accuracy of one task: mean over examples (and over the k rows of a ``[R, k, n]`` array)."""
    acc = arr.mean(axis=-1)
    return acc.mean(axis=-1) if acc.ndim == 2 else acc


def mean_accuracy(resampled: Mapping[str, np.ndarray]) -> np.ndarray:
    """Mean over tasks of the per-task accuracy (a ``[k, n]`` task: the mean of its k rows' accuracies).

    The statistic of addition's absolute accuracy, negation's target accuracy (targets' examples) and
    control accuracy (one ``[T, n]`` array: the control examples under each of the T negated targets),
    single-task and zero-shot accuracy.
    """
    return np.mean(np.stack([_task_accuracy(a) for a in resampled.values()]), axis=0)


def normalized_accuracy(resampled: Mapping[str, np.ndarray]) -> np.ndarray:
    """Mean over tasks of ``Acc(merged) / Acc(single-task)`` (paper App. Eq. "Normalized Accuracy").

    Each task is a ``[R, 2, n]`` array: row 0 the merged model's correctness, row 1 the single-task
    fine-tuned model's, on the same examples. Tasks whose single-task accuracy is 0 are left out of the
    mean (as the stored summary does); NaN when no task is left.
    """
    ratios = []
    for task, a in resampled.items():
        if a.ndim != 3 or a.shape[1] != 2:
            raise TalosError(f"normalized accuracy needs [merged, single-task] rows per task; task {task!r} "
                             f"has {a.shape[1] if a.ndim == 3 else 1} row(s)")
        acc = a.mean(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios.append(np.where(acc[:, 1] > 0, acc[:, 0] / np.where(acc[:, 1] > 0, acc[:, 1], 1.0), np.nan))
    stacked = np.stack(ratios)
    count = np.isfinite(stacked).sum(axis=0)
    total = np.nansum(stacked, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


# --------------------------------------------------------------------------------------------
# the intervals the results carry
# --------------------------------------------------------------------------------------------
def _interval(lo_hi: tuple[float, float]) -> list[float | None]:
    return [None if math.isnan(v) else v for v in lo_hi]


def bootstrap_settings(resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL) -> dict:
    """What a result records next to its intervals (``bootstrap`` in SCHEMA.md)."""
    return {"resamples": resamples, "seed": seed, "level": level, "method": "percentile",
            "unit": "test examples, resampled within each task"}


def addition_intervals(examples: Mapping[str, Any], reference: Mapping[str, Any] | None = None, *,
                       resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL) -> dict:
    """``{"abs_acc": [lo, hi], "norm_acc": [lo, hi]}`` of task addition at the selected α.

    ``examples[t]``: the merged model's test correctness on task t; ``reference[t]``: the single-task
    fine-tuned model's on the same examples (``norm_acc`` is left out without it).
    """
    kw = dict(resamples=resamples, seed=seed, level=level)
    out = {"abs_acc": _interval(bootstrap_ci(examples, mean_accuracy, **kw))}
    if reference is not None and all(t in reference for t in examples):
        pairs = {}
        for t, merged in examples.items():
            m, r = np.asarray(merged, dtype=float), np.asarray(reference[t], dtype=float)
            if m.shape != r.shape:
                raise TalosError(f"task {t!r} has {m.size} merged but {r.size} single-task examples; both must be "
                                 f"the same test examples")
            pairs[t] = np.stack([m, r])
        out["norm_acc"] = _interval(bootstrap_ci(pairs, normalized_accuracy, **kw))
    return out


def negation_intervals(target: Mapping[str, Any], control: Mapping[str, Any], *, resamples: int = RESAMPLES,
                       seed: int = SEED, level: float = LEVEL) -> dict:
    """``{"target_acc": [lo, hi], "control_acc": [lo, hi]}`` of task negation at each target's α.

    ``target[t]``: test correctness on target t after negating τ_t; ``control[t]``: the control task's
    test correctness under that same edit (the same control examples for every target, resampled alike).
    """
    kw = dict(resamples=resamples, seed=seed, level=level)
    out = {"target_acc": _interval(bootstrap_ci(target, mean_accuracy, **kw))}
    if control:
        rows = [np.asarray(control[t], dtype=float) for t in control]
        if len({r.shape for r in rows}) != 1:
            raise TalosError("the control task's examples must be the same test examples under every target")
        out["control_acc"] = _interval(bootstrap_ci({"control": np.stack(rows)}, mean_accuracy, **kw))
    return out


def mean_interval(examples: Mapping[str, Any], *, resamples: int = RESAMPLES, seed: int = SEED,
                  level: float = LEVEL) -> list[float | None]:
    """``[lo, hi]`` of the mean over tasks of per-task accuracy (single-task, zero-shot)."""
    return _interval(bootstrap_ci(examples, mean_accuracy, resamples=resamples, seed=seed, level=level))


def interval_text(ci95: Mapping[str, Any] | None, key: str, *, scale: float = 1.0, digits: int = 4) -> str:
    """``" [lo, hi]"`` of ``ci95[key]`` (times ``scale``), or ``""`` when there is none.

    >>> interval_text({"abs_acc": [0.41, 0.59]}, "abs_acc")
    ' [0.4100, 0.5900]'
    >>> interval_text({}, "abs_acc")
    ''
    """
    iv = ci95.get(key) if isinstance(ci95, Mapping) else None
    if not isinstance(iv, (list, tuple)) or len(iv) != 2 or any(v is None for v in iv):
        return ""
    lo, hi = (float(v) * scale for v in iv)
    if math.isnan(lo) or math.isnan(hi):
        return ""
    return f" [{lo:.{digits}f}, {hi:.{digits}f}]"
