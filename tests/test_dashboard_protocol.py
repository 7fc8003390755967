"""The paper's protocol on the dashboard: learning curves (Efficiency), chosen hyperparameters beside the results
(Arithmetic, Efficiency), the protocol block (Learn). Pure functions on hand-made inputs with known answers,
then the pages through AppTest on a hand-written store (fast) and on a store written by the real
``learning-curve`` and ``selection`` protocols on the tiny model (slow)."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from dashboard_fixtures import CONTROL, MODEL, REPO, SUITE, TASKS
from test_dashboard import figure_titled, figures, open_app

from dashboard import data as D
from dashboard import figures as F
from dashboard import figures_core
from dashboard.data import count_test_examples
from dashboard.protocol import budget_sentence, fixed_steps, protocol_summary
from talos_core.errors import TalosError
from talos_core.schema import CorruptResult
from talos_core.store import Store

figures_core.VALIDATE = True

PAPER_RULE = "budget = the smallest evaluated step s such that no later validation accuracy rises by more than tol"


def _name(*parts: str) -> str:
    return "__".join([SUITE, MODEL, *parts])


# --------------------------------------------------------------------------------------------
# hand-made store: the synthetic fixture + paper-protocol results
# --------------------------------------------------------------------------------------------
def _curve(method: str, rise: float) -> pd.DataFrame:
    return pd.DataFrame([{"method": method, "task": t, "step": s,
                          "val_acc": round(min(0.3 + rise * s, 0.3 + rise * 40 + 0.1 * i, 0.99), 4)}
                         for i, t in enumerate(TASKS) for s in range(10, 101, 10)])


def write_protocol_results(root) -> Store:
    """Learning curves with budgets, plateaus and zero-shot; an L-LoRA rank selection; a ``talos-k0.9``
    variant row (addition, negation, comparison); a suite record with the paper-protocol fields."""
    store = Store(root)
    for m, rise, budget in (("talos", 0.01, 60), ("nonlinear", 0.02, 40)):
        store.write_table("learning_curve", _name(m), _curve(m, rise), budget=budget, rule=PAPER_RULE,
                          tolerance=0.01, eval_every=10, steps=100, method=m,
                          plateau={t: budget - 10 * (i % 2) for i, t in enumerate(TASKS)},
                          zero_shot={t: 0.25 for t in TASKS})
    ranks = (8, 16, 64)
    rows = [{"task": t, "value": r, "best_alpha": 1.0, "target_val_acc": 0.5 - 0.1 * j + 0.05 * i,
             "control_val_acc": 0.6, "score": 0.5 - 0.1 * j + 0.05 * i, "single_val_acc": 0.8, "chosen": j == 2,
             "run_id": f"run-{t}-{r}"} for i, t in enumerate(TASKS) for j, r in enumerate(ranks)]
    store.write_table("selection", _name("llora"), pd.DataFrame(rows), param="rank", values=list(ranks),
                      choices={t: {"rank": 64} for t in TASKS}, overrides={t: {"options": {"rank": 64}} for t in TASKS},
                      runs={t: f"run-{t}-64" for t in TASKS}, rule="lowest val negation target", keep=0.95,
                      control_task=CONTROL, method="llora")
    for kind in ("addition", "negation"):
        payload = store.read_result(kind, _name("talos"))
        store.write_result(kind, _name("talos-k0.9"), {**payload, "method": "talos-k0.9", "variant_of": "talos"})
    comp = store.read_table("comparison", _name())
    row = comp[comp["method"] == "talos"].assign(method="talos-k0.9", addition_abs=0.5)
    store.write_table("comparison", _name(), pd.concat([comp, row], ignore_index=True))
    rec = store.read_result("suite", SUITE)
    rec["scale"] = "paper"
    rec["scale_settings"] = {"steps": 40, "batch_size": 32, "max_train": 2000, "max_test": 400, "alpha_step": 0.05,
                             "xi_grid": 20, "xi_points": 128, "lr": 1e-3, "lr_by_method": [["talos", 1e-3]],
                             "protocol": "paper", "curve_steps": 100, "curve_every": 10, "curve_tolerance": 0.01,
                             "selection": [["talos", "sparsity", [0.5, 0.9, 0.99]], ["llora", "rank", [8, 16, 64]]],
                             "variants": [["talos", "sparsity", 0.9]]}
    store.write_result("suite", SUITE, rec)
    return store


@pytest.fixture(scope="module")
def protocol_store(fixture_store, tmp_path_factory):
    root = shutil.copytree(fixture_store, tmp_path_factory.mktemp("protocol") / "store")
    return write_protocol_results(root).root


# --------------------------------------------------------------------------------------------
# pure: the protocol text
# --------------------------------------------------------------------------------------------
OLD_SUITE = {"model": "m", "tasks": ["a", "b"], "methods": ["talos", "nonlinear"], "scale": "mini",
             "scale_settings": {"steps": 40, "max_train": 640, "max_test": 96, "batch_size": 16, "alpha_step": 0.25,
                                "xi_grid": 6, "xi_points": 24, "lr": None,
                                "lr_by_method": [["talos", 0.001], ["llora", 0.001]]}}


def test_protocol_summary_of_an_old_store_says_what_is_known():
    s = protocol_summary(OLD_SUITE, methods=["talos", "nonlinear"])
    text = s.markdown()
    assert s.headline == "fixed-budget protocol (scale mini)"
    assert "40 steps per task for every method, fixed by the suite scale (no learning curves" in text
    assert "batch size 16" in text and "learning rate 0.001 (TaLoS, L-LoRA), the model's default otherwise" in text
    assert "0, 0.25, …, 1 (5 points), × 1/(1 − k) for sparse methods" in text
    assert "(the paper: step 0.05, 21 points)" in text
    assert "none in this store" in text
    assert "6×6 grid, 24 points per task" in text
    assert "at most 96 per task (the exact count is not recorded" in text


def test_protocol_summary_of_the_paper_protocol():
    ss = {**OLD_SUITE["scale_settings"], "alpha_step": 0.05, "protocol": "paper", "curve_steps": 400,
          "curve_every": 25, "curve_tolerance": 0.01, "variants": [["talos", "sparsity", 0.9]]}
    curves = {"talos": {"budget": 300, "steps": 400, "eval_every": 25, "tolerance": 0.01},
              "nonlinear": {"budget": 250, "steps": 400, "eval_every": 25, "tolerance": 0.01}}
    sels = {"talos": {"param": "sparsity", "values": [0.5, 0.8, 0.9, 0.95, 0.99], "keep": 0.95,
                      "control_task": "ctl"},
            "llora": {"param": "rank", "values": [8, 16, 64]}}
    xi = [{"alphas1": list(np.linspace(-3, 3, 20)), "alphas2": list(np.linspace(-3, 3, 20)), "points_per_task": 128},
          {"alphas1": [0, 1, 2], "alphas2": [0, 1, 2], "points_per_task": 24}]
    s = protocol_summary({**OLD_SUITE, "scale": "paper", "scale_settings": ss}, learning_curves=curves,
                         selections=sels, alpha_grids={"talos": [0.1 * i for i in range(21)]}, xi=xi,
                         test_examples={"a": 400, "b": 400}, methods=["talos", "nonlinear", "talos-k0.9"])
    budget, batch, alpha, selection, xi_line, test = s.lines
    assert s.headline == "the paper's protocol (scale paper)"
    assert budget.startswith("**Training budget**: TaLoS 300 steps; Non-linear FT 250 steps per task, set by "
                             "convergence (learning curves up to 400 steps, validation accuracy every 25 steps, "
                             "tolerance 0.01 = 1 point of accuracy)")
    assert "0, 0.05, …, 1 (21 points), × 1/(1 − k) for sparse methods" in alpha and "the paper's grid" in alpha
    assert "Stored addition grids: 21 points." in alpha
    assert ("by validation task negation: the lowest target accuracy with the control task (ctl) at ≥ 95% of its "
            "zero-shot accuracy: TaLoS sparsity from {0.5, 0.8, 0.9, 0.95, 0.99}; L-LoRA rank from {8, 16, 64}"
            ) in selection
    assert "TaLoS (k = 0.9) (`talos-k0.9`)" in selection
    assert "20×20 on [-3, 3]², 128 points per task (1 result); 3×3 on [0, 2]², 24 points per task" in xi_line
    assert test == "**Test examples**: 400 per task."
    assert "batch size 16" in batch


def test_protocol_summary_without_a_suite_record():
    s = protocol_summary(None, learning_curves={"talos": {"budget": 8}})
    assert s.headline == "the paper's protocol"
    assert s.lines[0].startswith("**Training budget**: 8 steps per task for TaLoS")
    assert "not recorded" in s.lines[1] and "not recorded" in s.lines[2] and "not recorded" in s.lines[5]
    assert protocol_summary({}).headline.startswith("protocol not recorded")


def test_count_test_examples_budget_sentence_fixed_steps():
    single = {"examples": {"talos": {"a": {"zero_shot": "0101", "finetuned": "0111"}, "b": {"zero_shot": "01"}},
                           "nonlinear": {"a": {"finetuned": "01110"}}}}
    assert count_test_examples(single) == {"a": 5, "b": 2}
    assert count_test_examples({}) == {} and count_test_examples(None) == {}
    curves = [SimpleNamespace(method="talos-k0.9", budget=300, tolerance=0.01, rule="rule A."),
              SimpleNamespace(method="nonlinear", budget=None, tolerance=None, rule="")]
    assert budget_sentence(curves) == ("**Budget**: TaLoS (k = 0.9) 300 steps, Non-linear FT: no budget recorded "
                                       "(tolerance 0.01). **Rule**: rule A.")
    assert fixed_steps(OLD_SUITE) == 40 and fixed_steps({"scale_settings": {}}) is None


# --------------------------------------------------------------------------------------------
# pure: loaders and tables
# --------------------------------------------------------------------------------------------
def test_learning_curve_and_selection_loaders(protocol_store, fixture_store):
    lc = D.load_learning_curve(protocol_store, _name("talos"))
    assert (lc.method, lc.budget, lc.tolerance, lc.eval_every, lc.steps) == ("talos", 60, 0.01, 10, 100)
    assert lc.tasks == list(TASKS) and lc.plateau[TASKS[1]] == 50 and lc.zero_shot[TASKS[0]] == 0.25
    old = D.load_learning_curve(fixture_store, _name("talos"))  # written before plateau / zero_shot existed
    assert old.plateau == {} and old.zero_shot == {} and old.budget == 50
    sel = D.load_selection(protocol_store, _name("llora"))
    assert sel.param == "rank" and sel.choices == {t: 64 for t in TASKS} and sel.values == [8, 16, 64]
    assert sel.curves().empty  # this result stores no candidate curves
    talos = D.load_selection(fixture_store, _name("talos"))
    assert talos.choices == dict(zip(TASKS, (0.5, 0.9, 0.99)))


def test_selection_loader_rejects_bad_choices(tmp_path):
    store = Store(tmp_path)
    store.write_table("selection", _name("talos"), pd.DataFrame(
        [{"task": "a", "value": 0.5, "best_alpha": 0, "target_val_acc": 0.5, "control_val_acc": 0.5, "score": 0.5,
          "single_val_acc": 0.5, "chosen": True, "run_id": "r"}]), param="sparsity", values=[0.5], choices=[0.5],
        overrides={}, runs={}, rule="r")
    with pytest.raises(CorruptResult, match="'choices' that is not a mapping"):
        D.load_selection(tmp_path, _name("talos"))


def test_chosen_hyperparameters_table_labels_variants(protocol_store, fixture_store):
    sels = [D.load_selection(fixture_store, _name("talos")), D.load_selection(protocol_store, _name("llora"))]
    variant = D.Selection("x", "talos-k0.9", "lr", pd.DataFrame(), {TASKS[0]: 1e-4}, [1e-4, 1e-3], "", None, None)
    df = D.chosen_hyperparameters([*sels, variant])
    assert list(df.columns) == ["task", "TaLoS · sparsity", "L-LoRA · rank", "TaLoS (k = 0.9) · lr"]
    assert df["TaLoS · sparsity"].tolist() == ["0.5", "0.9", "0.99"]
    assert df["L-LoRA · rank"].tolist() == ["64"] * 3
    assert df["TaLoS (k = 0.9) · lr"].tolist() == ["0.0001", "—", "—"]
    cand = D.selection_candidates(sels[1])
    assert cand.loc[cand["chosen"] == "✓", "rank"].tolist() == ["64"] * 3


def test_comparison_cells_label_column():
    df = pd.DataFrame({"method": ["talos", "talos-k0.9"], "addition_abs": [0.5, 0.4]})
    cells = F.comparison_cells(df, labels=True)
    assert list(cells.columns) == ["name", "method", "addition_abs"]
    assert cells["name"].tolist() == ["TaLoS", "TaLoS (k = 0.9)"]
    assert "name" not in F.comparison_cells(df).columns


# --------------------------------------------------------------------------------------------
# pure: figures
# --------------------------------------------------------------------------------------------
def test_learning_curves_figure_facets_budget_plateau_zero_shot():
    table = pd.concat([_curve("talos", 0.01), _curve("nonlinear", 0.02)], ignore_index=True)
    plateaus = {"talos": {t: 60 for t in TASKS}, "nonlinear": {t: 40 for t in TASKS}}
    fig = F.learning_curves(table, budgets={"talos": 60, "nonlinear": 40}, plateaus=plateaus,
                            zero_shot={t: 0.25 for t in TASKS})
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    assert len(lines) == 2 * len(TASKS)  # one line per method per task panel
    assert {t.xaxis for t in lines} == {"x", "x2", "x3"} and fig.layout.xaxis3.anchor == "y3"
    budget = [s for s in fig.layout.shapes if s.name == "budget"]
    assert sorted({s.x0 for s in budget}) == [40, 60] and len(budget) == 2 * len(TASKS)
    assert {s.line.color for s in budget} == {F.method_color("talos"), F.method_color("nonlinear")}
    marks = [t for t in fig.data if t.name == "plateau"]
    assert len(marks) == 2 * len(TASKS) and sum(bool(t.showlegend) for t in marks) == 1
    talos0 = next(t for t in marks if t.xaxis == "x" and t.marker.color == F.method_color("talos"))
    assert talos0.x == (60,) and talos0.y[0] == pytest.approx(0.7)  # on the curve at its plateau (capped)
    assert len([s for s in fig.layout.shapes if s.name == "zero-shot"]) == len(TASKS)
    assert "budget TaLoS = 60" in [t.name for t in fig.data]


def test_learning_curves_figure_one_task_and_shared_budget():
    table = _curve("talos", 0.01)
    fig = F.learning_curves(table, budgets={"talos": 60, "ghost": 10}, tasks=[TASKS[1]])
    assert [a.text for a in fig.layout.annotations] == [TASKS[1]]
    budget = [s for s in fig.layout.shapes if s.name == "budget"]
    assert len(budget) == 1 and budget[0].x0 == 60 and budget[0].line.color == F.MARK_COLOR
    assert "budget = 60 steps" in [t.name for t in fig.data]
    with pytest.raises(TalosError, match="no learning curves for the chosen task"):
        F.learning_curves(table, tasks=["nope"])
    with pytest.raises(TalosError, match="missing column 'val_acc'"):
        F.learning_curves(table.drop(columns=["val_acc"]))


def test_selection_scores_figure(protocol_store):
    sel = D.load_selection(protocol_store, _name("llora"))
    fig = F.selection_scores(sel.table, param="rank", method="llora")
    assert [t.name for t in fig.data] == [*TASKS, "chosen"]
    assert list(fig.layout.xaxis.categoryarray) == ["8", "16", "64"]
    chosen = fig.data[-1]
    assert list(chosen.x) == ["64"] * 3 and chosen.marker.color == F.MARK_COLOR
    assert list(chosen.y) == pytest.approx([0.3, 0.35, 0.4])
    assert fig.layout.title.text.startswith("L-LoRA: rank per task")


# --------------------------------------------------------------------------------------------
# pages (AppTest)
# --------------------------------------------------------------------------------------------
def _texts(elements) -> str:
    return "\n".join(e.value for e in elements)


def test_efficiency_page_learning_curves(monkeypatch, protocol_store):
    at = open_app(monkeypatch, protocol_store, "efficiency")
    fig = figure_titled(at, "Validation accuracy vs training step")
    assert {s.x0 for s in fig.layout.shapes if s.name == "budget"} == {60, 40}
    assert len(fig.layout.annotations) == len(TASKS)
    md = _texts(at.markdown)
    assert "**Budget**: TaLoS 60 steps, Non-linear FT 40 steps (tolerance 0.01)" in md and PAPER_RULE in md
    at.selectbox(key="lctask").set_value(TASKS[2]).run()
    fig = figure_titled(at, "Validation accuracy vs training step")
    assert [a.text for a in fig.layout.annotations] == [TASKS[2]]
    at.multiselect(key="lcmethods").set_value(["talos"]).run()
    fig = figure_titled(at, "Validation accuracy vs training step")
    assert {t.name for t in fig.data if t.mode == "lines+markers"} == {"TaLoS"}
    # the comparison table names the variant row, and the chosen hyperparameters sit beside it
    comp = next(t.value for t in at.table if "Method" in t.value.columns)
    assert "TaLoS (k = 0.9)" in comp["Method"].tolist() and "talos-k0.9" not in comp["Method"].tolist()
    chosen = next(d.value for d in at.dataframe if "TaLoS · sparsity" in d.value.columns)
    assert chosen["L-LoRA · rank"].tolist() == ["64"] * 3


def test_efficiency_page_without_learning_curves_says_so(monkeypatch, fixture_store, tmp_path):
    root = shutil.copytree(fixture_store, tmp_path / "store")
    shutil.rmtree(root / "results" / "learning_curve")
    at = open_app(monkeypatch, root, "efficiency")
    assert any("No learning curves in this store" in i.value for i in at.info)
    assert not [f for f in figures(at) if (f.layout.title.text or "").startswith("Validation accuracy vs")]


def test_efficiency_page_says_each_converged_run_is_its_own_curve(monkeypatch):
    # the shipped stores ran the converged protocol: no learning-curve step, each run early-stopped on its own curve
    at = open_app(monkeypatch, REPO / "cached_results", "efficiency")
    info = " ".join(i.value for i in at.info)
    assert "every run is its own learning curve" in info and "fixed budget" not in info


def test_arithmetic_page_shows_chosen_hyperparameters(monkeypatch, protocol_store):
    at = open_app(monkeypatch, protocol_store, "arithmetic", {"method": "talos"})
    chosen = [d.value for d in at.dataframe if "TaLoS · sparsity" in d.value.columns]
    assert chosen and chosen[0]["TaLoS · sparsity"].tolist() == ["0.5", "0.9", "0.99"]
    assert not [f for f in figures(at) if f.layout.title.text.startswith("TaLoS: sparsity")], "built once opened"
    at.session_state["arith.candidates"] = True  # open the "Selection candidates" expander (a rerun)
    at.run()
    fig = figure_titled(at, "TaLoS: sparsity per task")
    assert list(fig.data[-1].x) == ["0.5", "0.9", "0.99"]
    at = open_app(monkeypatch, protocol_store, "arithmetic", {"method": "talos-k0.9"})
    assert any("**TaLoS (k = 0.9)** (result id talos-k0.9): TaLoS with fixed sparsity 0.9" in c.value
               for c in at.caption)
    assert not [d for d in at.dataframe if "TaLoS · sparsity" in d.value.columns]


def test_learn_page_names_the_protocol(monkeypatch, protocol_store):
    at = open_app(monkeypatch, protocol_store, "learn")
    assert any(e.label == "How these results were produced: the paper's protocol (scale paper)" for e in at.expander)
    md = _texts(at.markdown)
    assert "TaLoS 60 steps; Non-linear FT 40 steps per task, set by convergence" in md
    assert "batch size 32" in md and "(21 points)" in md
    assert "TaLoS sparsity from {0.5, 0.9, 0.99}" in md and "L-LoRA rank from {8, 16, 64}" in md
    assert "TaLoS (k = 0.9) (`talos-k0.9`)" in md and "20×20 on [-3, 3]², 64 points per task" in md


def test_learn_page_on_the_shipped_store_says_what_is_known(monkeypatch):
    at = open_app(monkeypatch, REPO / "cached_results", "learn", {"suite": "text"})
    label = [e.label for e in at.expander if e.label.startswith("How these results were produced")]
    assert label, [e.label for e in at.expander]
    md = _texts(at.markdown)
    assert "**Training budget**" in md and "**α grid**" in md and "**Test examples**" in md


# --------------------------------------------------------------------------------------------
# a store written by the real protocols on the tiny model
# --------------------------------------------------------------------------------------------
TINY_TASKS = ["drug-reviews", "fortune-topics"]
TINY = {"max_train": 64, "max_val": 16, "max_test": 24, "calib_samples": 8, "batch_size": 8, "lr": 1e-3}


@pytest.mark.slow
def test_pages_on_a_store_written_by_the_real_protocols(monkeypatch, tmp_path):
    from talos_core.evaluation.protocols import evaluate
    from talos_core.evaluation.selection import selected_overrides

    root = tmp_path / "store"
    for m in ("talos", "nonlinear"):
        evaluate(root, "learning-curve", "tiny-text", TINY_TASKS, m, suite="tiny",
                 settings={"eval_every": 2, "steps": 6}, overrides=TINY)
    small = {**TINY, "steps": 4}
    evaluate(root, "selection", "tiny-text", TINY_TASKS, "talos", suite="tiny",
             settings={"param": "sparsity", "values": (0.5, 0.9), "alpha_step": 0.5}, overrides=small)
    chosen = selected_overrides(root, "tiny", "tiny-text", "talos", TINY_TASKS)
    evaluate(root, "addition", "tiny-text", TINY_TASKS, "talos", suite="tiny", settings={"alpha_step": 0.5},
             overrides=small, task_overrides=chosen)
    evaluate(root, "addition", "tiny-text", TINY_TASKS, "talos", suite="tiny", settings={"alpha_step": 0.5},
             overrides={**small, "sparsity": 0.9}, result_method="talos-k0.9")

    at = open_app(monkeypatch, root, "efficiency")
    fig = figure_titled(at, "Validation accuracy vs training step")
    assert len([t for t in fig.data if t.mode == "lines+markers"]) == 2 * len(TINY_TASKS)
    assert len([t for t in fig.data if t.name == "plateau"]) == 2 * len(TINY_TASKS)
    assert "**Rule**: budget = the smallest evaluated step" in _texts(at.markdown)
    at = open_app(monkeypatch, root, "arithmetic", {"method": "talos"})
    table = next(d.value for d in at.dataframe if "TaLoS · sparsity" in d.value.columns)
    assert table.set_index("task")["TaLoS · sparsity"].to_dict() == {t: f"{c['sparsity']:g}" for t, c in chosen.items()}
    at = open_app(monkeypatch, root, "learn", {"method": "talos-k0.9"})
    md = _texts(at.markdown)
    assert "set by convergence" in md and "TaLoS sparsity from {0.5, 0.9}" in md
    assert "TaLoS (k = 0.9) (`talos-k0.9`)" in md and "Stored addition grids" in md


def test_budget_line_does_not_claim_curves_the_results_did_not_use():
    """A fixed-budget suite record beside learning curves of another scale (the shipped store today): the budget
    is the record's, and the curves' budgets are named as not used."""
    from dashboard.protocol import _budget_line

    line = _budget_line({"steps": 40}, {"talos": {"budget": 750, "steps": 1000}}, ["talos"])
    assert line.startswith("**Training budget**: 40 steps per task") and "750" in line and "do not use" in line
    line = _budget_line({"steps": 1000, "curve_steps": 1000}, {"talos": {"budget": 750, "steps": 1000}}, ["talos"])
    assert "750 steps" in line and "set by convergence" in line


def test_curves_note_flags_curves_the_results_did_not_use():
    from types import SimpleNamespace

    from dashboard.protocol import curves_note

    curve = SimpleNamespace(steps=1000, meta={"train_precision": ["bf16"]})
    note = curves_note({"scale": "mini", "scale_settings": {"steps": 40}}, [curve])
    assert "up to 1000 steps, bf16 training" in note and "fixed 40 steps" in note and "scale mini" in note
    assert curves_note({"scale_settings": {"steps": 1000, "curve_steps": 1000}}, [curve]) is None
    assert curves_note({"scale_settings": {"steps": 40}}, []) is None and curves_note(None, [curve]) is None


def test_protocol_summary_of_the_converged_protocol():
    """A record of the converged `full` scales: every run its own curve (maximum, validation cadence, patience), the
    learning rate each method's lr check chose, the union α grid with its extension."""
    from talos_core.atomic import json_ready
    from talos_core.suites import get_suite

    ss = json_ready(get_suite("vision").scales["full"].settings_dict())
    s = protocol_summary({"scale": "full", "scale_settings": ss, "methods": ["talos", "nonlinear"]})
    assert s.headline == "the paper's protocol, every run converged (scale full)"
    text = "\n".join(s.lines)
    assert ("every run trains up to 2000 steps with validation accuracy every 50 steps, stops after 5 evaluations "
            "without improvement and keeps the best evaluation's weights") in text
    assert "each method's learning rate chosen by its lr check on validation among 0.0001, 0.001" in text
    assert "together with its stretch × 1/(1 − k)" in text and "at most 4× its largest value" in text
    old = protocol_summary({"scale": "mini", "scale_settings": {"steps": 40, "alpha_step": 0.25}})
    assert "fixed by the suite scale" in old.lines[0] and "extends" not in "\n".join(old.lines)
