"""Bootstrap intervals over test examples (talos_core.evaluation.stats): known answers on hand-made data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from talos_core.errors import TalosError
from talos_core.evaluation import stats
from talos_core.evaluation.stats import (
    addition_intervals,
    bootstrap_ci,
    bootstrap_replicates,
    decode_examples,
    encode_examples,
    interval_text,
    mean_accuracy,
    mean_interval,
    negation_intervals,
    normalized_accuracy,
    statistic_value,
)


def _examples(n: int, correct: int, seed: int = 0) -> np.ndarray:
    out = np.zeros(n, dtype=bool)
    out[np.random.default_rng(seed).choice(n, size=correct, replace=False)] = True
    return out


# --------------------------------------------------------------------------------------------
# known answers
# --------------------------------------------------------------------------------------------
def test_all_correct_and_all_wrong_are_degenerate_intervals():
    assert bootstrap_ci({"a": np.ones(50, bool), "b": np.ones(7, bool)}, mean_accuracy) == (1.0, 1.0)
    assert bootstrap_ci({"a": np.zeros(50, bool)}, mean_accuracy) == (0.0, 0.0)
    # one task always right, one always wrong: the mean over tasks is 0.5 in every resample
    assert bootstrap_ci({"a": np.ones(30), "b": np.zeros(40)}, mean_accuracy) == (0.5, 0.5)


@pytest.mark.parametrize(("n", "p"), [(400, 0.3), (400, 0.5), (1000, 0.8)])
def test_one_task_matches_the_normal_approximation(n, p):
    """n examples with p·n correct: the percentile interval is close to p ± 1.96·sqrt(p(1 − p)/n)."""
    data = {"t": _examples(n, int(p * n))}
    lo, hi = bootstrap_ci(data, mean_accuracy, resamples=4000)
    half = 1.959964 * math.sqrt(p * (1 - p) / n)
    assert lo == pytest.approx(p - half, abs=0.25 * half)
    assert hi == pytest.approx(p + half, abs=0.25 * half)
    assert lo < p < hi


def test_tasks_are_resampled_independently_and_averaged():
    """Two tasks of n examples at accuracy p: the mean over tasks has standard error sqrt(p(1 − p)/n)/sqrt(2)."""
    n, p = 500, 0.4
    data = {"a": _examples(n, int(p * n), seed=1), "b": _examples(n, int(p * n), seed=2)}
    reps = bootstrap_replicates(data, mean_accuracy, resamples=4000)
    assert reps.mean() == pytest.approx(p, abs=0.005)
    assert reps.std() == pytest.approx(math.sqrt(p * (1 - p) / n) / math.sqrt(2), rel=0.1)


def test_deterministic_for_a_seed():
    data = {"a": _examples(200, 90), "b": _examples(150, 100, seed=3)}
    first = bootstrap_ci(data, mean_accuracy, seed=7)
    assert bootstrap_ci(data, mean_accuracy, seed=7) == first
    assert bootstrap_ci(data, mean_accuracy, seed=8) != first
    # the draws do not depend on how the resamples are blocked in memory
    small = bootstrap_replicates(data, mean_accuracy, resamples=300, seed=7)
    old = stats._BLOCK
    try:
        stats._BLOCK = 1000  # a few resamples per block
        np.testing.assert_array_equal(bootstrap_replicates(data, mean_accuracy, resamples=300, seed=7), small)
    finally:
        stats._BLOCK = old


def test_level_widens_the_interval():
    data = {"a": _examples(300, 120)}
    lo90, hi90 = bootstrap_ci(data, mean_accuracy, level=0.90)
    lo99, hi99 = bootstrap_ci(data, mean_accuracy, level=0.99)
    assert lo99 < lo90 < 0.4 < hi90 < hi99


def test_normalized_accuracy_resamples_merged_and_single_with_the_same_indices():
    """Merged == single-task model example by example: the ratio is 1 in every resample (independent
    resampling of the two rows would give a wide interval)."""
    single = _examples(100, 60)
    pairs = {"a": np.stack([single, single])}
    assert bootstrap_ci(pairs, normalized_accuracy) == (1.0, 1.0)
    assert statistic_value(pairs, normalized_accuracy) == 1.0
    iv = addition_intervals({"a": single}, {"a": single})
    assert iv["norm_acc"] == [1.0, 1.0]
    lo, hi = iv["abs_acc"]
    assert lo < 0.6 < hi


def test_normalized_accuracy_point_value_and_zero_normalizer():
    merged, single = np.array([1, 0, 1, 0]), np.array([1, 1, 1, 0])  # 0.5 / 0.75
    assert statistic_value({"a": np.stack([merged, single])}, normalized_accuracy) == pytest.approx(2 / 3)
    # a task whose single-task accuracy is 0 is left out of the mean (like the stored summary)
    both = {"a": np.stack([merged, single]), "b": np.stack([np.ones(3), np.zeros(3)])}
    assert statistic_value(both, normalized_accuracy) == pytest.approx(2 / 3)
    lo, hi = bootstrap_ci({"b": np.stack([np.ones(3), np.zeros(3)])}, normalized_accuracy)
    assert math.isnan(lo) and math.isnan(hi)
    assert addition_intervals({"b": np.ones(3)}, {"b": np.zeros(3)})["norm_acc"] == [None, None]
    with pytest.raises(TalosError, match="merged, single-task"):
        bootstrap_ci({"a": merged}, normalized_accuracy)


def test_negation_control_rows_share_the_control_examples():
    control = _examples(120, 60)
    one = negation_intervals({"x": np.ones(10)}, {"x": control})
    two = negation_intervals({"x": np.ones(10), "y": np.ones(20)}, {"x": control, "y": control})
    assert one["target_acc"] == two["target_acc"] == [1.0, 1.0]
    assert one["control_acc"] == two["control_acc"]  # identical rows resampled alike: same interval
    lo, hi = two["control_acc"]
    assert lo < 0.5 < hi
    with pytest.raises(TalosError, match="same test examples"):
        negation_intervals({"x": np.ones(2), "y": np.ones(2)}, {"x": np.ones(5), "y": np.ones(6)})


def test_point_value_is_the_mean_over_tasks():
    data = {"a": [1, 0, 0, 0], "b": [1, 1, 1, 0, 0, 0]}
    assert statistic_value(data, mean_accuracy) == pytest.approx((0.25 + 0.5) / 2)
    assert statistic_value({"c": [[1, 1], [0, 0]]}, mean_accuracy) == 0.5  # rows of one task averaged
    assert mean_interval({"a": np.ones(4)}) == [1.0, 1.0]


# --------------------------------------------------------------------------------------------
# encoding and errors
# --------------------------------------------------------------------------------------------
def test_examples_round_trip_as_01_strings():
    arr = _examples(37, 11)
    text = encode_examples(arr)
    assert len(text) == 37 and set(text) <= {"0", "1"} and text.count("1") == 11
    np.testing.assert_array_equal(decode_examples(text), arr)
    assert encode_examples([]) == "" and decode_examples("").size == 0
    for bad in ("01x1", 101, None):
        with pytest.raises(TalosError, match="string of 0 and 1"):
            decode_examples(bad)
    with pytest.raises(TalosError, match="only 0/1"):
        encode_examples([0, 2])
    with pytest.raises(TalosError, match="1-D"):
        encode_examples([[0, 1]])


@pytest.mark.parametrize(("samples", "kwargs", "message"), [
    ({}, {}, "at least one task"),
    ([1, 0, 1], {}, "needs a mapping"),
    ({"a": []}, {}, "non-empty"),
    ({"a": np.zeros((2, 2, 2))}, {}, "non-empty"),
    ({"a": ["x", "y"]}, {}, "not numbers"),
    ({"a": [1.0, float("nan")]}, {}, "non-finite"),
    ({"a": [1, 0]}, {"resamples": 0}, "resamples must be a positive integer"),
    ({"a": [1, 0]}, {"resamples": 10.5}, "resamples must be a positive integer"),
    ({"a": [1, 0]}, {"level": 1.5}, "level must be a number strictly between 0 and 1"),
    ({"a": [1, 0]}, {"seed": -1}, "seed must be a non-negative integer"),
])
def test_invalid_inputs_are_one_sentence(samples, kwargs, message):
    with pytest.raises(TalosError, match=message) as info:
        bootstrap_ci(samples, mean_accuracy, **kwargs)
    assert "\n" not in str(info.value)


def test_a_statistic_must_return_one_value_per_resample():
    with pytest.raises(TalosError, match="one value per resample"):
        bootstrap_ci({"a": [1, 0]}, lambda s: np.zeros(3), resamples=5)


def test_interval_text():
    assert interval_text({"abs_acc": [0.41, 0.59]}, "abs_acc", scale=100, digits=1) == " [41.0, 59.0]"
    assert interval_text({"abs_acc": [None, None]}, "abs_acc") == ""
    assert interval_text(None, "abs_acc") == ""
