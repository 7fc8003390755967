"""The evaluation work ``talos suite --plan`` counts (talos_core/suites/workload.py) against what a suite run
counted (the suite record's ``step_work``, talos_core/inference/tally.py): equal, step by step."""

from __future__ import annotations

import pytest

from bench.plan_costs import computed_work
from talos_core.result_arrays import load_examples
from talos_core.store import Store
from talos_core.suites import run_suite
from talos_core.suites.plan import plan_suite, recount
from talos_core.suites.workload import COUNTED


def _mismatched(rows: list[dict]) -> dict:
    """The steps of a ``recount`` whose recorded passes differ from the counted ones less the forwards the logits
    cache served (the same edit on the same split earlier in the run: recorded as ``cached``)."""
    return {r["label"]: (r["counted"], r["recorded"]) for r in rows
            if any(computed_work(r["counted"], r["recorded"]).get(k, 0) != r["recorded"].get(k, 0) for k in COUNTED)}


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
    rows = recount(store, "tiny")
    assert _mismatched(rows) == {}
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


@pytest.mark.slow
def test_the_text_full_step_graph_runs_on_the_tiny_model_and_its_plan_counts_every_pass(tmp_path, monkeypatch,
                                                                                        one_thread):
    """``text`` ``full`` has steps no other suite runs (L-LoRA's lr check and per-task rank selection with every step
    that follows it) and a CPU run of many hours: its whole step graph — runs to a maximum with early stopping, the lr
    checks that choose each method's rate, the three per-task selections, the fixed-sparsity rows and TaLoS at the
    dense rate, the eight post-hoc merges, the ablation, ξ grids, examples, α searches on the union grid with
    extension — runs here on the tiny random-init text model at tiny sizes, and ``--plan``'s count of every step
    equals what the run recorded. Same structure, smaller numbers: four of its tasks (its ξ pairs), two candidates per
    selection, two ablation sparsities, learning rates the tiny model tells apart."""
    from dataclasses import replace

    from talos_core.suites import specs

    text = specs.get_suite("text")
    full = text.scales["full"]
    small = {"sparsity": (0.5, 0.9), "rank": (2, 4)}
    tiny = replace(full, steps=6, max_train=48, max_val=12, max_test=16, calib_samples=8, batch_size=8,
                   alpha_step=0.5, xi_grid=3, xi_points=6, preview_points=6, sharing_samples=6, posthoc_points=1,
                   ablation=(0.5, 0.9), eval_every=2, early_stopping_patience=2, examples=3, lr_check=(1e-3, 3e-2),
                   selection=tuple((m, p, small[p]) for m, p, _ in full.selection))
    tasks = tuple(t for pair in text.xi_pairs for t in pair)
    monkeypatch.setitem(specs.SUITES, "text", replace(text, model="tiny-text", tasks=tasks, scales={"full": tiny}))
    store = Store(tmp_path / "text")
    run_suite("text", store, scale="full", log=lambda s: None)
    meta = store.read_result("suite", "text")
    assert meta["complete"] and {m for m, *_ in full.selection} == {"talos", "lota", "llora"}
    for method, param, values in tiny.selection:  # every selection chose among its candidates, per task
        chosen = store.read_result("selection", f"text__tiny-text__{method}")["choices"]
        assert set(chosen) == set(tasks) and {c[param] for c in chosen.values()} <= set(values), (method, chosen)
    rows = recount(store, "text")
    assert {r["label"] for r in rows} == set(meta["step_work"])
    assert _mismatched(rows) == {}
    # the suite's examples step stores the exact model every 0.05 from 0 to 2 besides the 0.5-step grid (and --plan
    # counted those passes: above)
    ex = load_examples(store.root, "text__tiny-text__talos")
    assert {round(0.05 * k, 10) for k in range(41)} <= set(ex.meta["addition_alphas"])
    assert all({0.05, 1.95} <= set(grid) for grid in ex.meta["negation_alphas"].values())
