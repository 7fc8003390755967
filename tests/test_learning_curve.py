"""The learning-curve protocol and its budget rule (choose_budget) on hand-made curves with known answers."""

from __future__ import annotations

import pytest

from talos_core.errors import TalosError
from talos_core.evaluation.learning_curve import RULE, LearningCurveSettings, choose_budget

# --------------------------------------------------------------------------------------------
# the budget rule
# --------------------------------------------------------------------------------------------
RISING = [(10, 0.30), (20, 0.45), (30, 0.60), (40, 0.75)]
FLAT = [(10, 0.60), (20, 0.60), (30, 0.60), (40, 0.60)]
SATURATING = [(10, 0.40), (20, 0.70), (30, 0.71), (40, 0.72)]  # +0.02 after step 20
NOISY = [(10, 0.50), (20, 0.80), (30, 0.78), (40, 0.81), (50, 0.79)]  # ±0.01–0.02 around 0.8 after step 20


@pytest.mark.parametrize("curves, tolerance, expected", [
    ({"rising": RISING}, 0.01, 40),  # never plateaus: the last step
    ({"flat": FLAT}, 0.0, 10),  # nothing to gain: the first evaluated step
    ({"saturating": SATURATING}, 0.02, 20),  # later gains within the tolerance
    ({"saturating": SATURATING}, 0.015, 30),  # a stricter tolerance: one more step
    ({"saturating": SATURATING}, 0.0, 40),
    ({"noisy": NOISY}, 0.01, 20),  # 0.81 at step 40 is within 0.01 of 0.80 at step 20
    ({"noisy": NOISY}, 0.005, 40),  # 0.81 exceeds 0.80 by more: plateau at 40 (0.79 later is lower)
    ({"flat": FLAT, "saturating": SATURATING}, 0.02, 20),  # every curve must have plateaued
    ({"flat": FLAT, "rising": RISING, "noisy": NOISY}, 0.01, 40),  # one curve never plateaus → its last step
    ({"a": [(0, 0.5), (10, 0.9)], "b": [(5, 0.2), (10, 0.2)]}, 0.0, 10),  # different grids; b starts at 5
    ({"a": [(2, 0.1)]}, 0.0, 2),  # a single point
])
def test_choose_budget_known_answers(curves, tolerance, expected):
    assert choose_budget(curves, tolerance) == expected


def test_choose_budget_is_the_smallest_such_step_and_order_free():
    # the condition is checked at each step; a dip later does not move the answer back
    curve = [(1, 0.5), (2, 0.8), (3, 0.7), (4, 0.8)]
    assert choose_budget({"c": curve}, 0.05) == 2
    assert choose_budget({"c": list(reversed(curve))}, 0.05) == 2  # points in any order
    assert choose_budget({"c": curve}, 0.3) == 1  # a gain of exactly the tolerance counts as plateaued
    assert choose_budget({"c": [(1, 0.5), (2, 0.7)]}, 0.2) == 1
    assert choose_budget({"c": [(1, 0.5), (2, 0.71)]}, 0.2) == 2


@pytest.mark.parametrize("curves, tolerance, match", [
    ({}, 0.01, "at least one curve"),
    ({"a": []}, 0.01, "curve 'a' has no points"),
    ({"a": [(1, 0.5), (1, 0.6)]}, 0.01, "step 1 twice"),
    ({"a": [(1, float("nan"))]}, 0.01, "non-finite"),
    ({"a": [(1, 0.5)]}, -0.1, r"tolerance must be an accuracy fraction in \[0, 1\]"),
    ({"a": [(1, 0.5)]}, float("inf"), r"tolerance must be an accuracy fraction in \[0, 1\]"),
])
def test_choose_budget_rejects_bad_input(curves, tolerance, match):
    with pytest.raises(TalosError, match=match):
        choose_budget(curves, tolerance)


@pytest.mark.parametrize("kw", [{"eval_every": 0}, {"steps": -1}, {"tolerance": -0.5}, {"eval_every": 1.5}])
def test_settings_validation(kw):
    with pytest.raises(TalosError):
        LearningCurveSettings(**kw)


# --------------------------------------------------------------------------------------------
# the protocol
# --------------------------------------------------------------------------------------------
OVERRIDES = {"steps": 3, "batch_size": 8, "max_train": 32, "max_val": 16, "max_test": 16, "calib_samples": 8,
             "lr": 1e-3, "device": "cpu"}
TASKS = ["drug-reviews", "fortune-topics"]


def test_learning_curve_protocol_end_to_end(tmp_path, monkeypatch):
    import torch

    from talos_core import pipeline
    from talos_core.evaluation.protocols import PROTOCOLS, evaluate
    from talos_core.evaluation.runs import find_run
    from talos_core.store import Store

    assert "learning-curve" in PROTOCOLS
    store = Store(tmp_path)
    # a run trained earlier without a curve: the protocol trains it again (same id) to measure one
    old = pipeline.run_finetune(pipeline.FinetuneRequest.from_flat(model="tiny-text", task=TASKS[0], method="nonlinear",
                                                         **OVERRIDES), store, progress=False)
    old_vector = old.task_vector()
    calls = []
    real = pipeline.run_finetune
    monkeypatch.setattr(pipeline, "run_finetune", lambda req, *a, **k: calls.append(req.task) or real(req, *a, **k))
    out = evaluate(store, "learning-curve", "tiny-text", TASKS, "nonlinear", suite="t",
                   settings={"eval_every": 2, "tolerance": 0.05}, overrides=OVERRIDES)
    assert calls == TASKS
    assert out.results == [("learning_curve", "t__tiny-text__nonlinear")]
    assert [p.name for p in (tmp_path / "results").iterdir()] == ["learning_curve"]  # nothing else written
    payload = store.read_result("learning_curve", "t__tiny-text__nonlinear")
    table = store.read_table("learning_curve", "t__tiny-text__nonlinear")
    assert list(table.columns) == ["method", "task", "step", "val_acc"]
    assert sorted(table.task.unique()) == sorted(TASKS) and set(table.method) == {"nonlinear"}
    assert table[table.task == TASKS[0]].step.tolist() == [2, 3]
    curves = {t: list(zip(g.step, g.val_acc)) for t, g in table.groupby("task")}
    assert payload["budget"] == choose_budget(curves, 0.05) and payload["rule"] == RULE
    assert payload["eval_every"] == 2 and payload["steps"] == 3 and payload["tolerance"] == 0.05
    assert set(payload["runs"]) == set(TASKS) and payload["train_precision"] == ["fp32"]
    # the re-trained run has the old id and the same vector, now with its curve
    run = find_run(store, "tiny-text", TASKS[0], "nonlinear", OVERRIDES)
    assert run.id == old.id and [c["step"] for c in run.manifest.curve] == [2, 3]
    new_vector = run.task_vector()
    assert all(torch.equal(old_vector.values[n], new_vector.values[n]) for n in old_vector.values)
    # a second call finds the runs with their curves: no training
    calls.clear()
    again = evaluate(store, "learning-curve", "tiny-text", TASKS, "nonlinear", suite="t",
                     settings={"eval_every": 2, "tolerance": 0.05}, overrides=OVERRIDES, train=False)
    assert calls == [] and again.table.equals(out.table)
    # a curve is read from the manifest: runs kept without their weights (a store carried as JSON) train nothing
    for f in (tmp_path / "runs").rglob("*.safetensors"):
        f.unlink()
    bare = evaluate(store, "learning-curve", "tiny-text", TASKS, "nonlinear", suite="t",
                    settings={"eval_every": 2, "tolerance": 0.05}, overrides=OVERRIDES, train=False)
    assert calls == [] and bare.table.equals(out.table)
    # another interval needs new curves, which train=False refuses in one sentence
    with pytest.raises(TalosError, match="learning curve every 3 steps"):
        evaluate(store, "learning-curve", "tiny-text", TASKS, "nonlinear", suite="t", settings={"eval_every": 3},
                 overrides=OVERRIDES, train=False)


def test_learning_curve_cli(tmp_path, capsys):
    from talos_core.cli import main
    from talos_core.store import Store

    base = ["evaluate", "learning-curve", "--model", "tiny-text", "--tasks", "drug-reviews", "--method", "nonlinear",
            "--steps", "2", "--batch-size", "8", "--max-train", "16", "--max-val", "8", "--max-test", "8",
            "--device", "cpu", "--store", str(tmp_path), "--quiet"]
    assert main([*base, "--tolerance", "-1"]) == 2
    assert "tolerance must be an accuracy fraction in [0, 1]" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()  # nothing written
    assert main([*base, "--eval-every", "1", "--tolerance", "0.02"]) == 0
    out = capsys.readouterr().out
    assert "budget" in out and "plateau" in out
    payload = Store(tmp_path).read_result("learning_curve", "default__tiny-text__nonlinear")
    assert payload["eval_every"] == 1 and [r["step"] for r in payload["records"]] == [1, 2]
    assert payload["budget"] in (1, 2)
