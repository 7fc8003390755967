"""The ``alpha-rule`` protocol (addition and negation under the paper's and the official code's α grids) and claim
(a) re-judged with its rows: the other α grid is measured on a suite to report where it changes a verdict."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from talos_core.cli import main
from talos_core.evaluation.claims import alpha_rule_markdown
from talos_core.evaluation.protocols import evaluate
from talos_core.store import Store
from tests.tiny_text import CONTROL, MODEL, OVERRIDES, TASKS

pytestmark = pytest.mark.usefixtures("one_thread")


def test_both_rules_on_the_same_runs_and_the_paper_rule_taken_from_the_stored_results(tmp_path):
    """TaLoS at k = 0.9: the paper's grid reaches 10, the official one 1; where the suite's addition and negation
    of the same runs are stored, the paper row is theirs (not evaluated again) and equals a fresh evaluation."""
    ov = {**OVERRIDES, "sparsity": 0.9}
    store = Store(tmp_path / "s")
    evaluate(store, "addition", MODEL, TASKS, "talos", suite="t", overrides=ov)
    evaluate(store, "negation", MODEL, TASKS, "talos", suite="t", overrides=ov, settings={"control_task": CONTROL})
    out = evaluate(store, "alpha-rule", MODEL, TASKS, "talos", suite="t", overrides=ov,
                   settings={"control_task": CONTROL})
    payload = store.read_result("alpha_rule", "t__tiny-text__talos")
    assert payload["reused"] == ["paper"] and payload["control_task"] == CONTROL
    table = store.read_table("alpha_rule", "t__tiny-text__talos").set_index("rule")
    assert list(table.index) == ["paper", "unit"]
    assert table.loc["paper", "alpha_max"] == pytest.approx(10.0) and table.loc["unit", "alpha_max"] == 1.0
    stored = store.read_result("addition", "t__tiny-text__talos")
    assert table.loc["paper", "addition_abs"] == stored["summary"]["abs_acc"]
    assert table.loc["paper", "addition_alpha"] == stored["selected_alpha"]
    assert table.loc["unit", "addition_alpha"] <= 1.0
    assert set(payload["negation_alphas"]["unit"]) == set(TASKS)
    assert all(a <= 1.0 for a in payload["negation_alphas"]["unit"].values())
    assert "taken from the stored addition/negation results" in out.summary()
    # a store without those results evaluates both rules, to the same numbers (evaluation is deterministic)
    shutil.copytree(store.root, tmp_path / "fresh")  # the same runs: nothing is fine-tuned again (train=False)
    fresh = Store(tmp_path / "fresh")
    for kind in ("addition", "negation", "alpha_rule"):
        fresh.result_path(kind, "t__tiny-text__talos").unlink()
    evaluate(fresh, "alpha-rule", MODEL, TASKS, "talos", suite="t", overrides=ov, settings={"control_task": CONTROL},
             train=False)
    again = fresh.read_table("alpha_rule", "t__tiny-text__talos").set_index("rule")
    assert fresh.read_result("alpha_rule", "t__tiny-text__talos")["reused"] == []
    pd.testing.assert_frame_equal(again, table)


def test_cli_errors_are_one_sentence(tmp_path, capsys):
    argv = ["evaluate", "alpha-rule", "--model", MODEL, "--tasks", TASKS[0], "--method", "talos",
            "--store", str(tmp_path / "s")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "needs at least 2 tasks" in err or "at least two" in err, err
    assert main([*argv[:4], "--tasks", ",".join(TASKS), "--alpha-step", "7", *argv[6:]]) == 2
    assert "alpha" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def _store(root, unit_talos: dict) -> Store:
    """A hand-made suite ``s``: TaLoS loses claim (a) under the paper's grid; its ``unit`` row is ``unit_talos``."""
    store = Store(root)
    store.write_result("suite", "s", {"model": "m", "scale": "full", "tasks": ["a", "b"]})
    store.write_table("comparison", "s__m", pd.DataFrame([
        {"method": "talos", "addition_abs": 0.6, "addition_norm": 0.7, "negation_target": 0.3,
         "negation_control": 0.6, "single_task_acc": 0.8},
        {"method": "nonlinear", "addition_abs": 0.7, "addition_norm": 0.8, "negation_target": 0.2,
         "negation_control": 0.6, "single_task_acc": 0.9},
    ]))
    rows = [{"rule": "paper", "alpha_max": 10.0, "addition_alpha": 1.0, "addition_abs": 0.6, "addition_norm": 0.7,
             "negation_target": 0.3, "negation_control": 0.6},
            {"rule": "unit", "alpha_max": 1.0, "addition_alpha": 0.35, **unit_talos}]
    store.write_table("alpha_rule", "s__m__talos", pd.DataFrame(rows), negation_alphas={}, runs={})
    return store


def test_claim_a_under_each_rule(tmp_path):
    wins = {"addition_abs": 0.75, "addition_norm": 0.85, "negation_target": 0.1, "negation_control": 0.6}
    text = alpha_rule_markdown(_store(tmp_path / "w", wins), "s")
    assert "| TaLoS | unit | 1 | 0.35 | 75.0 | 85.0 | 10.0 | 60.0 |" in text
    assert "- Claim (a) with the `paper` grid: TaLoS addition abs 60.0 vs 70.0 (nonlinear)" in text
    assert text.splitlines()[-2].endswith("**not reproduced**.")
    assert text.splitlines()[-1].startswith("- Claim (a) with the `unit` grid: TaLoS addition abs 75.0 vs 70.0")
    assert text.splitlines()[-1].endswith("**reproduced**.")
    same = alpha_rule_markdown(_store(tmp_path / "l", {**wins, "addition_abs": 0.5}), "s")
    assert same.splitlines()[-1].endswith("**not reproduced**.")
    empty = Store(tmp_path / "e")
    empty.write_result("suite", "s", {"model": "m"})
    assert alpha_rule_markdown(empty, "s").startswith("n/a: no alpha_rule results of suite 's'")


@pytest.mark.slow
def test_a_suite_row_is_evaluated_on_the_suites_own_runs(tmp_path, capsys):
    """``--suite-row``: the row's runs, settings and choices come from the suite's record; nothing is trained
    (``--no-train``) and the paper row is the suite's own addition and negation."""
    from talos_core.suites import run_suite

    store = Store(tmp_path / "s")
    run_suite("tiny", store, scale="mini", methods=["talos"], posthoc=[], log=lambda s: None)
    runs = {r.id for r in store.runs()}
    base = ["evaluate", "alpha-rule", "--suite", "tiny", "--model", "tiny-text", "--store", str(store.root)]
    assert main([*base, "--suite-row", "talos", "--no-train", "--quiet"]) == 0
    capsys.readouterr()
    assert {r.id for r in store.runs()} == runs
    payload = store.read_result("alpha_rule", "tiny__tiny-text__talos")
    assert payload["reused"] == ["paper"]
    assert payload["runs"] == store.read_result("addition", "tiny__tiny-text__talos")["runs"]
    for argv, said in ((["--suite-row", "nope"], "unknown row of suite 'tiny' 'nope'"),
                       (["--suite-row", "talos", "--steps", "3"], "leave --steps out"),
                       (["--suite-row", "talos", "--tasks", "tweets,wordnet-verbs"], "leave --tasks out")):
        assert main([*base, *argv]) == 2
        assert said in capsys.readouterr().err
    assert main([*base[:4], "--model", "tiny-clip", *base[6:], "--suite-row", "talos"]) == 2
    assert "ran model 'tiny-text', not 'tiny-clip'" in capsys.readouterr().err
    assert main([*base[:2], "--suite", "other", *base[4:], "--suite-row", "talos"]) == 2
    assert "no record of suite 'other'" in capsys.readouterr().err
