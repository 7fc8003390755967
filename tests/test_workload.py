"""The evaluation work ``talos suite --plan`` counts (talos_core/suites/workload.py) against what a suite run
counted (the suite record's ``step_work``, talos_core/inference/tally.py): equal, step by step."""

from __future__ import annotations

import pytest

from talos_core.store import Store
from talos_core.suites import run_suite
from talos_core.suites.plan import plan_suite, recount
from talos_core.suites.workload import COUNTED


@pytest.mark.slow
@pytest.mark.parametrize("scale", ["mini", "paper"])
def test_plan_counts_the_passes_a_suite_run_makes(tmp_path, scale):
    """Every step of the tiny suite (learning curves, lr check, per-task selection, fixed-sparsity and lr rows,
    post-hoc merges, the ablation's reuse of stored rows) pushes exactly the counted examples through the model."""
    store = Store(tmp_path / scale)
    methods, posthoc = ["talos", "nonlinear"], ["ties", "tsv"]
    run_suite("tiny", store, scale=scale, methods=methods, posthoc=posthoc, log=lambda s: None)
    meta = store.read_result("suite", "tiny")
    assert set(meta["step_work"]) == set(meta["step_times_s"])
    assert sum(w["forward"] for w in meta["step_work"].values()) > 0
    # a forward the logits cache served (the same edit on the same split earlier in the run) is counted as cached
    rows = recount(store, "tiny")
    bad = {r["label"]: (r["counted"], r["recorded"]) for r in rows
           if any(r["counted"].get(k, 0) != r["recorded"].get(k, 0) + (r["recorded"].get("cached", 0)
                                                                       if k == "forward" else 0) for k in COUNTED)}
    assert bad == {}
    assert sum(r["recorded"].get("cached", 0) for r in rows) > 0  # later steps reuse the fine-tuned accuracies


def test_plan_prices_the_evaluation_work_or_says_why_not(tmp_path):
    """``--plan`` counts the evaluation work of the steps to do where the data is on this machine, and prices it with
    the measured cells; where tasks are downloaded by runs it says so instead of printing a number."""
    plan = plan_suite("tiny", "mini", tmp_path / "empty", device="cpu-2core")
    assert plan.work["total"]["forward"] > 0 and plan.work["total"]["grad"] > 0  # TaLoS calibration
    assert set(plan.work["steps"]) == {s.label for s in plan.steps}
    ev = plan.cost["evaluation"]
    assert {r["kind"] for r in ev["rows"]} >= {"forward", "grad"}
    text = plan.text()
    assert "evaluation: examples through the model" in text and "in all:" in text
    paper = plan_suite("paper-vision", "full", None, device="h100")
    assert "downloaded" in paper.work["why"]
    assert "evaluation not included: task" in paper.text()
