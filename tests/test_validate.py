"""The typed input checks of ``talos_core.errors`` (is_int, is_number, check_int, check_number) and the sites that
let a boolean or another wrong value through before they used them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from talos_core.errors import (
    TalosError,
    check_int,
    check_number,
    check_range,
    check_seed,
    is_int,
    is_number,
    is_strict_instance,
)


# --------------------------------------------------------------------------------------------
# the predicates
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, plain, with_numpy", [
    (0, True, True), (-3, True, True), (2**70, True, True),
    (np.int64(4), False, True), (np.int8(-1), False, True), (np.uint16(7), False, True),
    (True, False, False), (False, False, False), (np.bool_(True), False, False),
    (1.0, False, False), (np.float64(2.0), False, False), ("3", False, False), (None, False, False),
])
def test_is_int(value, plain, with_numpy):
    assert is_int(value) is plain
    assert is_int(value, numpy=True) is with_numpy


@pytest.mark.parametrize("value, plain, with_numpy", [
    (0, True, True), (0.5, True, True), (-1e300, True, True),
    (np.float64(0.25), True, True),  # a numpy float64 is a Python float
    (np.float32(0.25), False, True), (np.int64(3), False, True),
    (True, False, False), (False, False, False), (np.bool_(False), False, False),
    (math.nan, False, False), (math.inf, False, False), (-math.inf, False, False),
    (np.float32("nan"), False, False), (np.float32("inf"), False, False),
    (10**400, False, False),  # too large for a float: no finite number
    ("0.5", False, False), (None, False, False), (1j, False, False),
])
def test_is_number(value, plain, with_numpy):
    assert is_number(value) is plain
    assert is_number(value, numpy=True) is with_numpy


def test_is_strict_instance():
    assert is_strict_instance(3, (int,)) and is_strict_instance(3.0, (int, float))
    assert not is_strict_instance(True, (int,)) and not is_strict_instance(False, (int, float))
    assert is_strict_instance(True, (bool,)) and not is_strict_instance("x", (int,))


# --------------------------------------------------------------------------------------------
# check_int
# --------------------------------------------------------------------------------------------
def test_check_int_returns_an_int():
    assert check_int("n", 3) == 3
    out = check_int("n", np.int64(5), low=1, numpy=True)
    assert out == 5 and type(out) is int
    assert check_int("n", None, optional=True) is None


@pytest.mark.parametrize("kwargs, value, message", [
    (dict(low=1), True, "n must be a positive integer, got True"),
    (dict(low=1), False, "n must be a positive integer, got False"),
    (dict(low=1), 0, "n must be a positive integer, got 0"),
    (dict(low=1), 1.0, "n must be a positive integer, got 1.0"),
    (dict(low=1), np.int64(2), f"n must be a positive integer, got {np.int64(2)!r}"),  # numpy only when asked
    (dict(low=1), None, "n must be a positive integer, got None"),  # None only when optional
    (dict(low=0), -1, "n must be a non-negative integer, got -1"),
    (dict(low=0), True, "n must be a non-negative integer, got True"),
    (dict(), "3", "n must be an integer, got '3'"),
    (dict(low=0, high=7), 8, "n must be an integer in [0, 7], got 8"),
    (dict(low=2), 1, "n must be an integer ≥ 2, got 1"),
    (dict(high=10), 11, "n must be an integer ≤ 10, got 11"),
    (dict(low=1, optional=True, what="a positive integer or None"), 0, "n must be a positive integer or None, got 0"),
    (dict(low=1, optional=True), True, "n must be a positive integer, got True"),
])
def test_check_int_refuses_in_one_sentence(kwargs, value, message):
    with pytest.raises(TalosError) as exc:
        check_int("n", value, **kwargs)
    assert str(exc.value) == message


def test_check_int_bounds_are_closed():
    assert check_int("n", 0, low=0, high=3) == 0 and check_int("n", 3, low=0, high=3) == 3
    with pytest.raises(TalosError):
        check_int("n", 4, low=0, high=3)


# --------------------------------------------------------------------------------------------
# check_number
# --------------------------------------------------------------------------------------------
def test_check_number_returns_a_float():
    out = check_number("x", 2)
    assert out == 2.0 and type(out) is float
    assert type(check_number("x", np.float32(0.5), numpy=True)) is float
    assert check_number("x", None, optional=True) is None


@pytest.mark.parametrize("kwargs, value, message", [
    (dict(), True, "x must be a finite number, got True"),
    (dict(), math.nan, "x must be a finite number, got nan"),
    (dict(), math.inf, "x must be a finite number, got inf"),
    (dict(), None, "x must be a finite number, got None"),
    (dict(), "1", "x must be a finite number, got '1'"),
    (dict(low=0), -0.5, "x must be a finite number ≥ 0, got -0.5"),
    (dict(low=0, low_open=True), 0, "x must be a positive number, got 0"),
    (dict(low=0, high=1), 1.5, "x must be a number in [0, 1], got 1.5"),
    (dict(low=0, high=1, low_open=True, high_open=True), 1, "x must be a number in (0, 1), got 1"),
    (dict(low=0, high=1, high_open=True), False, "x must be a number in [0, 1), got False"),
    (dict(low=1), 0.5, "x must be a finite number ≥ 1, got 0.5"),
    (dict(high=1, high_open=True), 1, "x must be a finite number < 1, got 1"),
    (dict(what="a learning rate"), math.nan, "x must be a learning rate, got nan"),
])
def test_check_number_refuses_in_one_sentence(kwargs, value, message):
    with pytest.raises(TalosError) as exc:
        check_number("x", value, **kwargs)
    assert str(exc.value) == message


@pytest.mark.parametrize("value, low_open, high_open, ok", [
    (0.0, False, False, True), (0.0, True, False, False), (1.0, False, False, True), (1.0, False, True, False),
    (0.5, True, True, True),
])
def test_check_number_open_and_closed_bounds(value, low_open, high_open, ok):
    if ok:
        assert check_number("x", value, low=0, high=1, low_open=low_open, high_open=high_open) == value
    else:
        with pytest.raises(TalosError):
            check_number("x", value, low=0, high=1, low_open=low_open, high_open=high_open)


def test_check_range_and_check_seed_keep_their_sentences():
    assert check_range("w", 3, 0.0, math.inf) == 3  # the value as given
    for bad in (True, math.nan, 1.0):
        with pytest.raises(TalosError, match=r"^sparsity must be in \[0, 1\), got "):
            check_range("sparsity", bad, 0.0, 1.0)
    with pytest.raises(TalosError, match=r"^lr must be in \(0, 1\], got 0$"):
        check_range("lr", 0, 0.0, 1.0, low_open=True, high_open=False)
    assert check_seed(2**63 - 1) == 2**63 - 1
    for bad in (True, -1, 2**63, 1.0):
        with pytest.raises(TalosError, match=r"^seed must be an integer in \[0, 2\*\*63 - 1\], got "):
            check_seed(bad)


# --------------------------------------------------------------------------------------------
# sites that let a wrong value through before (one test each)
# --------------------------------------------------------------------------------------------
def _request(**kwargs):
    from talos_core.pipeline import FinetuneRequest

    return FinetuneRequest.from_flat(model="tiny-text", task="drug-reviews", **kwargs)


@pytest.mark.parametrize("name", ["max_train", "max_val", "max_test"])
def test_finetune_request_refuses_a_boolean_max(name):
    """``max_train=True`` passed (``True`` is an int ≥ 1) and trained on one example."""
    with pytest.raises(TalosError) as exc:
        _request(**{name: True}).validate()
    assert str(exc.value) == f"{name} must be a positive integer, got True"


@pytest.mark.parametrize("name, value, message", [
    ("warmup_steps", True, "warmup_steps must be a non-negative integer, got True"),
    ("eval_batch_size", 0, "eval_batch_size must be a positive integer, got 0"),  # was never checked
    ("eval_batch_size", True, "eval_batch_size must be a positive integer, got True"),
    ("rounds", True, "rounds must be an integer in [1, 100], got True"),
    ("calib_samples", True, "calib_samples must be a positive integer, got True"),
    ("calib_samples", 0, "calib_samples must be a positive integer, got 0"),  # was the model's default silently
    ("checkpoint_every", False, "checkpoint_every must be a non-negative integer, got False"),
    ("micro_batch_size", True, "micro_batch_size must be a positive integer (or unset for the whole batch), "
                               "got True"),
    ("early_stopping_patience", True, "early_stopping_patience must be a non-negative integer (0 = off), got True"),
    ("steps", True, "steps must be an integer in [1, 1000000], got True"),
])
def test_finetune_request_refuses_a_boolean_or_bad_count(name, value, message):
    with pytest.raises(TalosError) as exc:
        _request(**{name: value}).validate()
    assert str(exc.value) == message


def test_finetune_request_refuses_a_text_max_train_before_comparing_the_batch():
    """A text ``max_train`` met ``batch_size > max_train`` first: a TypeError, not a sentence."""
    with pytest.raises(TalosError, match=r"^max_train must be a positive integer, got '64'$"):
        _request(batch_size=8, max_train="64").validate()


def test_a_requests_calibration_is_the_talos_declarations_parameters_stored_flat():
    """The nested settings take their names and defaults from the declaration, and a manifest still records them
    flat, between ``grad_clip`` and ``max_train``, ``calibration_ties`` under its former key ``ties``."""
    from talos_core.methods.finetuning import CALIBRATION
    from talos_core.pipeline import CALIBRATION_FIELDS, CalibrationSettings, FinetuneRequest, stored_request

    assert tuple(p.name for p in CALIBRATION) == CALIBRATION_FIELDS
    assert all(getattr(CalibrationSettings(), p.name) == p.default for p in CALIBRATION)
    req = _request(rounds=2, calibration_ties="random", steps=3)
    assert req == FinetuneRequest(model="tiny-text", task="drug-reviews", steps=3,
                                  calibration=CalibrationSettings(rounds=2, calibration_ties="random"))
    keys = list(stored_request(req))
    assert keys[keys.index("grad_clip") + 1:keys.index("max_train")] == [
        "rounds", "calib_samples", "soft_mask_value", "score_target", "param_set", "zero_scores", "ties"]
    assert stored_request(req)["ties"] == "random" and "calibration" not in keys
    with pytest.raises(TalosError, match=r"^param_set must be one of 'paper', 'official', got 'x'$"):
        _request(param_set="x").validate()


def test_finetune_request_still_takes_good_counts():
    _request(max_train=64, max_val=8, max_test=8, warmup_steps=0, eval_batch_size=16, rounds=2, calib_samples=8,
             checkpoint_every=0).validate()


@pytest.mark.parametrize("bad, message", [
    (dict(steps=True), "steps must be a positive integer or empty, got True"),
    (dict(max_train=True), "max_train must be a positive integer or empty, got True"),
    (dict(grid=True), "grid must be a positive integer, got True"),
    (dict(points=False), "points must be a positive integer, got False"),
    (dict(sparsity=False), "sparsity must be in [0, 1), got False"),  # was sparsity 0
    (dict(sparsity="0.9"), "sparsity must be in [0, 1), got '0.9'"),  # was a TypeError
    (dict(seed=True), "seed must be an integer in [0, 2**63 - 1], got True"),  # was never checked
])
def test_dashboard_job_spec_refuses_booleans(bad, message):
    from dashboard.jobs import JobSpec

    with pytest.raises(TalosError) as exc:
        JobSpec(model="tiny-clip", tasks=("digits",), **bad).validate()
    assert str(exc.value) == message


@pytest.mark.parametrize("gpus", [True, 0, math.inf])
def test_suite_job_refuses_a_boolean_or_infinite_gpu_count(gpus):
    from dashboard.suite_jobs import SuiteJobSpec

    with pytest.raises(TalosError, match=r"^GPUs per task must be a positive number, got "):
        SuiteJobSpec("tiny", executor="ray", address="auto", gpus_per_task=gpus).validate()
    SuiteJobSpec("tiny", executor="ray", address="auto", gpus_per_task=0.5).validate()


def test_selection_refuses_a_boolean_control_accuracy():
    from talos_core.evaluation.selection import select_by_negation

    with pytest.raises(TalosError, match=r"^the control task's zero-shot accuracy must be a number, got True$"):
        select_by_negation({0.5: [(0.0, 0.9, 0.8)]}, True)


def test_linear_probe_refuses_a_boolean_l2():
    import torch

    from talos_core.models.cnn import fit_linear_probe

    with pytest.raises(TalosError, match=r"^probe l2 must be a finite number >= 0, got True$"):
        fit_linear_probe(torch.randn(4, 3), torch.tensor([0, 1, 0, 1]), 2, l2=True)


@pytest.mark.parametrize("points", [True, 2.5, 0])
def test_subset_refuses_a_boolean_or_fractional_count(points):
    from talos_core.evaluation.context import subset
    from talos_core.tasks.base import Split

    with pytest.raises(TalosError, match=r"^points must be a positive integer, got "):
        subset(Split([str(i) for i in range(10)], np.arange(10)), points, 0)
    assert len(subset(Split([str(i) for i in range(10)], np.arange(10)), np.int64(4), 0)) == 4


def test_dashboard_protocol_numbers_skip_booleans_and_non_finite():
    from dashboard.protocol import _num

    assert _num(3) == 3.0 and _num(np.int64(3)) == 3.0 and _num(np.float32(0.5)) == 0.5
    assert _num(True) is None and _num(math.nan) is None and _num(None) is None
