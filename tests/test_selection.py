"""Per-task hyperparameter selection by validation task negation (paper App. "Hyperparameter selection"),
per-task runs in the other protocols, and method variant ids (a fixed-hyperparameter row beside the
selected one).

The rule is checked on hand-made curves with known answers; the protocol end to end on tiny-text runs
(a few seconds each, one thread).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
from tiny_text import CONTROL, MODEL, OVERRIDES, TASKS

from talos_core import schema
from talos_core.errors import TalosError
from talos_core.evaluation.protocols import evaluate, get_protocol
from talos_core.evaluation.selection import (
    SelectionSettings,
    candidate_delta,
    select_by_negation,
    selected_overrides,
)
from talos_core.store import Store

pytestmark = pytest.mark.usefixtures("one_thread")


# --------------------------------------------------------------------------------------------
# the rule on hand-made curves
# --------------------------------------------------------------------------------------------
ZS = 0.80  # control zero-shot validation accuracy: the floor is 0.95 × 0.80 = 0.76


def test_lowest_feasible_target_wins():
    res = select_by_negation({
        0.5: [(0.0, 0.90, 0.80), (1.0, 0.60, 0.78), (2.0, 0.40, 0.70)],  # 2.0 breaks the floor: score 0.60
        0.9: [(0.0, 0.90, 0.80), (5.0, 0.45, 0.77), (10.0, 0.20, 0.50)],  # score 0.45 at α 5
        0.99: [(0.0, 0.90, 0.80), (50.0, 0.55, 0.76)],  # exactly at the floor counts: score 0.55
    }, ZS)
    assert res.choice == 0.9 and res.best_alpha == 5.0
    t = res.table.set_index("value")
    assert list(res.table.columns) == ["value", "best_alpha", "target_val_acc", "control_val_acc", "score",
                                       "single_val_acc", "chosen"]
    assert t["score"].to_dict() == {0.5: 0.60, 0.9: 0.45, 0.99: 0.55}
    assert t["best_alpha"].to_dict() == {0.5: 1.0, 0.9: 5.0, 0.99: 50.0}
    assert t["control_val_acc"].to_dict() == {0.5: 0.78, 0.9: 0.77, 0.99: 0.76}
    assert t["chosen"].tolist() == [False, True, False] and t["single_val_acc"].isna().all()


def test_control_constraint_excludes_the_lowest_target():
    # candidate A reaches the lowest target overall (0.05) but only by losing the control task
    res = select_by_negation({"A": [(0.0, 0.9, 0.8), (1.0, 0.05, 0.75), (0.5, 0.5, 0.79)],
                              "B": [(0.0, 0.9, 0.8), (1.0, 0.30, 0.77)]}, ZS)
    assert res.choice == "B"
    assert res.table.set_index("value").loc["A", "score"] == 0.5  # its best feasible point, α 0.5
    # with a looser constraint A's 0.05 counts and wins
    assert select_by_negation({"A": [(0.0, 0.9, 0.8), (1.0, 0.05, 0.75)], "B": [(0.0, 0.9, 0.8), (1.0, 0.3, 0.77)]},
                              ZS, keep=0.9).choice == "A"


def test_candidate_whose_only_feasible_alpha_is_zero():
    only_zero = [(0.0, 0.70, 0.80), (1.0, 0.10, 0.50), (2.0, 0.05, 0.40)]
    res = select_by_negation({0.5: only_zero, 0.9: [(0.0, 0.70, 0.80), (1.0, 0.65, 0.79)]}, ZS)
    row = res.table.set_index("value").loc[0.5]
    assert row["best_alpha"] == 0.0 and row["score"] == 0.70  # the pre-trained model's own target accuracy
    assert res.choice == 0.9
    # alone it is still a valid choice (α = 0 always qualifies, even under a control floor above it)
    alone = select_by_negation({0.5: only_zero}, 0.9)
    assert alone.choice == 0.5 and alone.best_alpha == 0.0


def test_ties_go_to_higher_single_task_accuracy_then_grid_order():
    curve = [(0.0, 0.9, 0.8), (1.0, 0.4, 0.79)]
    cands = {0.5: curve, 0.8: curve, 0.9: curve}
    assert select_by_negation(cands, ZS).choice == 0.5  # no single-task accuracies: first in grid order
    assert select_by_negation(cands, ZS, single_val_acc={0.5: 0.70, 0.8: 0.75, 0.9: 0.72}).choice == 0.8
    assert select_by_negation(cands, ZS, single_val_acc={0.5: 0.70, 0.8: 0.75, 0.9: 0.75}).choice == 0.8
    reordered = {0.9: curve, 0.8: curve, 0.5: curve}
    assert select_by_negation(reordered, ZS, single_val_acc={0.5: 0.70, 0.8: 0.75, 0.9: 0.75}).choice == 0.9
    # a strictly lower score beats any single-task accuracy
    better = {0.5: curve, 0.8: [(0.0, 0.9, 0.8), (1.0, 0.39, 0.79)]}
    assert select_by_negation(better, ZS, single_val_acc={0.5: 0.99, 0.8: 0.1}).choice == 0.8
    # within one curve, equal targets go to the higher control accuracy, then the smaller α
    res = select_by_negation({1: [(0.0, 0.9, 0.8), (2.0, 0.4, 0.77), (1.0, 0.4, 0.77), (3.0, 0.4, 0.78)]}, ZS)
    assert res.best_alpha == 3.0
    res = select_by_negation({1: [(0.0, 0.9, 0.8), (2.0, 0.4, 0.77), (1.0, 0.4, 0.77)]}, ZS)
    assert res.best_alpha == 1.0


def test_curves_as_frames_and_bad_input():
    frame = pd.DataFrame({"alpha": [0.0, 0.5], "target_val_acc": [0.9, 0.2], "control_val_acc": [0.8, 0.79],
                          "extra": [1, 2]})
    assert select_by_negation({8: frame}, ZS).best_alpha == 0.5
    with pytest.raises(TalosError, match="needs at least one candidate"):
        select_by_negation({}, ZS)
    with pytest.raises(TalosError, match=re.escape("candidate 16 has no alpha = 0")):
        select_by_negation({16: [(0.5, 0.2, 0.8)]}, ZS)
    with pytest.raises(TalosError, match="lacks control_val_acc"):
        select_by_negation({16: frame.drop(columns="control_val_acc")}, ZS)
    with pytest.raises(TalosError, match=re.escape("keep must be in [0, 1]")):
        select_by_negation({16: frame}, ZS, keep=1.5)


# --------------------------------------------------------------------------------------------
# settings
# --------------------------------------------------------------------------------------------
def test_selection_settings_defaults_and_errors():
    proto = get_protocol("selection")
    assert proto.make_settings(None).values == (0.5, 0.8, 0.9, 0.95, 0.99)
    assert proto.make_settings({"param": "rank"}).values == (8, 16, 64)
    assert proto.make_settings({"param": "lr", "values": [1e-4, 1e-3]}).values == (1e-4, 1e-3)
    for bad, needle in (({"param": "momentum"}, "selection param must be one of sparsity, rank, lr"),
                        ({"values": ()}, "values must be a non-empty tuple"),
                        ({"values": (0.5, 1.0)}, "sparsity must be in [0, 1), got 1.0"),
                        ({"values": (0.5, 0.5)}, "candidate value 0.5 is listed twice"),
                        ({"param": "rank", "values": (8, 0)}, "rank must be a positive integer, got 0"),
                        ({"param": "rank", "values": (8, 1.5)}, "rank must be a positive integer, got 1.5"),
                        ({"param": "lr", "values": (0.0,)}, "lr must be in (0, 1], got 0.0"),
                        ({"param": "lr", "values": (2.0,)}, "lr must be in (0, 1], got 2.0"),
                        ({"param": "lr"}, "selecting lr needs candidate values"),
                        ({"alpha_step": 0}, "alpha_step must be in [0.001, 1]")):
        with pytest.raises(TalosError, match=re.escape(needle)):
            proto.make_settings(bad)


def test_candidate_overrides():
    assert candidate_delta("sparsity", 0.8, {}) == {"sparsity": 0.8}
    assert candidate_delta("lr", 1e-4, {"lr": 1e-3}) == {"lr": 1e-4}
    assert candidate_delta("rank", 64, {}) == {"options": {"rank": 64}}
    assert candidate_delta("rank", 16, {}) == {}  # the default rank is the method's default run
    assert candidate_delta("rank", 16, {"options": {"rank": 8}}) == {"options": {"rank": 16}}


@pytest.mark.parametrize("method,param,needle", [
    ("nonlinear", "sparsity", "method 'nonlinear' trains no sparse subset"),
    ("talos", "rank", "only llora has a rank to select, not 'talos'"),
    ("ties", "lr", "unknown method 'ties'"),
])
def test_param_must_suit_the_method(tmp_path, method, param, needle):
    store = Store(tmp_path / "s")
    with pytest.raises(TalosError, match=re.escape(needle)):
        evaluate(store, "selection", MODEL, TASKS, method, settings={"param": param, "values": (8,) if param == "rank"
                                                                      else (1e-3,) if param == "lr" else (0.5,)},
                 overrides=OVERRIDES)
    assert not (tmp_path / "s" / "runs").exists() or not any((tmp_path / "s" / "runs").iterdir())
    assert not store.results("selection")


# --------------------------------------------------------------------------------------------
# variant ids and readers
# --------------------------------------------------------------------------------------------
def test_variant_ids_labels_and_names():
    assert schema.variant_id("talos", sparsity=0.9) == "talos-k0.9"
    assert schema.method_label("talos-k0.9") == "TaLoS (k = 0.9)"
    assert schema.method_label("llora-r16") == "L-LoRA (r = 16)"
    assert schema.method_label("talos-lr0.0001") == "TaLoS (lr = 0.0001)"
    assert schema.variant_id("nonlinear", lr=1e-5) == "nonlinear-lr0.00001"
    for method in schema.METHODS:
        vid = schema.variant_id(method, sparsity=0.95)
        assert schema.base_method_of(vid) == method and schema.parse_variant(vid) == (method, {"sparsity": 0.95})
        assert schema.slug(vid) == vid and schema.SEP not in vid
        assert schema.base_method_of(method) == method and schema.parse_variant(method) is None
    assert schema.method_family("talos-k0.9") == "parameter-efficient"
    for other in ("my-method", "talos-x1", "talos-k", "talos-k0.9-k0.5", "talos-", "-k0.9"):
        assert schema.base_method_of(other) is None
    assert schema.method_label("my-method") == "my-method"
    with pytest.raises(TalosError, match="unknown method"):
        schema.variant_id("nope", sparsity=0.9)
    with pytest.raises(TalosError, match="unknown variant hyperparameter"):
        schema.variant_id("talos", momentum=0.9)
    with pytest.raises(TalosError, match="at least one"):
        schema.variant_id("talos")
    for kind, info in schema.KINDS.items():
        if "method" in info.parts:
            parts = ["s", *("talos-k0.9" if p == "method" else f"{p}-x" for p in info.parts)]
            assert schema.parse_result_name(kind, "__".join(parts))["method"] == "talos-k0.9"


def _fake_arith(store: Store, method: str, abs_acc: float) -> None:
    name = schema.result_name("v", "m", method)
    curve = pd.DataFrame([{"alpha": 0.0, "split": s, "task": "a", "accuracy": abs_acc, "normalized_accuracy": 1.0}
                          for s in ("val", "test")])
    store.write_table("addition", name, curve, selected_alpha=0.0, alpha_grid=[0.0],
                      summary={"abs_acc": abs_acc, "norm_acc": 1.0}, tasks=["a"], sparsity=None, method=method)
    neg = pd.DataFrame([{"target": "a", "alpha": 0.0, "split": s, "target_acc": 0.5, "control_acc": 0.6}
                        for s in ("val", "test")])
    store.write_table("negation", name, neg, control_task="c", selected={"a": 0.0},
                      control_zero_shot_acc={"val": 0.6, "test": 0.6}, summary={"target_acc": 0.5, "control_acc": 0.6},
                      per_task=[{"target": "a", "alpha": 0.0, "target_acc": 0.5, "control_acc": 0.6}])


def test_comparison_and_dashboard_readers_accept_variant_ids(tmp_path):
    from dashboard import data as D
    from talos_core.evaluation.reports import comparison_table

    store = Store(tmp_path)
    _fake_arith(store, "talos", 0.7)
    _fake_arith(store, "talos-k0.9", 0.6)
    table = comparison_table(store, "v", "m").set_index("method")
    assert table.loc["talos", "addition_abs"] == 0.7 and table.loc["talos-k0.9", "addition_abs"] == 0.6
    idx = D.store_index(tmp_path)
    assert D.available(idx, "method", kind="addition") == ["talos", "talos-k0.9"]
    assert D.order_methods(["talos-k0.9", "nonlinear", "talos"]) == ["talos", "nonlinear", "talos-k0.9"]
    add = D.load_addition(tmp_path, "v__m__talos-k0.9")
    assert add.summary["abs_acc"] == 0.6


# --------------------------------------------------------------------------------------------
# the protocol end to end on tiny-text runs
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sel_store(tmp_path_factory) -> Store:
    """A sparsity selection of TaLoS over {0.5, 0.9} on two tasks (four tiny runs)."""
    store = Store(tmp_path_factory.mktemp("sel-store"))
    evaluate(store, "selection", MODEL, TASKS, "talos", overrides=OVERRIDES,
             settings=SelectionSettings(values=(0.5, 0.9), control_task=CONTROL, alpha_step=0.25))
    return store


def test_selection_protocol_writes_schema_and_reproducible_choices(sel_store):
    name = schema.result_name("default", MODEL, "talos")
    payload = sel_store.read_result("selection", name)
    info = schema.KINDS["selection"]
    assert payload["columns"] == list(info.columns) and set(info.fields) <= set(payload)
    table = sel_store.read_table("selection", name)
    assert len(table) == 4 and set(table["task"]) == set(TASKS) and set(table["value"]) == {0.5, 0.9}
    assert payload["param"] == "sparsity" and payload["values"] == [0.5, 0.9] and payload["control_task"] == CONTROL
    assert "95" in payload["rule"] or "0.95" in payload["rule"]
    curves = pd.DataFrame(payload["curves"])
    for task in TASKS:
        rows = table[table.task == task]
        assert rows["chosen"].sum() == 1
        chosen = rows[rows.chosen].iloc[0]
        assert payload["choices"][task] == {"sparsity": chosen["value"]}
        assert payload["runs"][task] == chosen["run_id"]
        assert payload["overrides"][task] == {"sparsity": chosen["value"]}
        run = sel_store.get_run(chosen["run_id"])
        assert run.manifest.sparsity == chosen["value"] and run.manifest.task == task
        # each candidate's grid is 0, 0.25, …, 1 × 1/(1 − k); re-applying the rule to the stored curves agrees
        for k in (0.5, 0.9):
            grid = payload["alpha_grids"][task][str(k)]
            assert grid[0] == 0.0 and grid[-1] == pytest.approx(1 / (1 - k)) and len(grid) == 5
        again = select_by_negation(
            {k: curves[(curves.task == task) & (curves.value == k)] for k in (0.5, 0.9)},
            payload["control_zero_shot_val"], single_val_acc=dict(zip(rows["value"], rows["single_val_acc"])))
        assert again.choice == chosen["value"]
        assert np.allclose(again.table["score"], rows["score"])
        for r in rows.itertuples():  # single_val_acc is the run's own validation accuracy
            assert r.single_val_acc == pytest.approx(sel_store.get_run(r.run_id).manifest.metrics["finetuned_val_acc"])
    assert selected_overrides(sel_store, "default", MODEL, "talos", TASKS) == payload["overrides"]


def test_selected_runs_drive_the_other_protocols(sel_store):
    choices = selected_overrides(sel_store, "default", MODEL, "talos")
    runs = sel_store.read_result("selection", schema.result_name("default", MODEL, "talos"))["runs"]
    kw = dict(overrides=OVERRIDES, train=False, task_overrides=choices)
    for proto, settings in (("single", None), ("addition", {"alpha_step": 0.25}),
                            ("negation", {"alpha_step": 0.25, "control_task": CONTROL}), ("localization", None)):
        evaluate(sel_store, proto, MODEL, TASKS, "talos", settings=settings, **kw)
    name = schema.result_name("default", MODEL, "talos")
    assert sel_store.read_result("addition", name)["runs"] == runs
    assert sel_store.read_result("negation", name)["runs"] == runs
    assert sel_store.read_result("localization", name)["runs"] == runs
    assert sel_store.read_result("single", schema.result_name("default", MODEL))["runs"]["talos"] == runs
    assert sel_store.read_result("addition", name)["task_overrides"] == choices


def test_mixed_sparsities_addition_and_negation(sel_store):
    """One α for all vectors on the union of the tasks' grids; negation per target on its own grid."""
    mixed = {TASKS[0]: {"sparsity": 0.5}, TASKS[1]: {"sparsity": 0.9}}
    kw = dict(overrides=OVERRIDES, train=False, task_overrides=mixed, suite="mixed")
    evaluate(sel_store, "addition", MODEL, TASKS, "talos", settings={"alpha_step": 0.25}, **kw)
    evaluate(sel_store, "negation", MODEL, TASKS, "talos", settings={"alpha_step": 0.25, "control_task": CONTROL},
             **kw)
    name = schema.result_name("mixed", MODEL, "talos")
    add = sel_store.read_result("addition", name)
    g05, g09 = [0.0, 0.5, 1.0, 1.5, 2.0], [0.0, 2.5, 5.0, 7.5, 10.0]
    assert add["alpha_grid"] == sorted(set(g05) | set(g09)) and add["search_region"] == [0.0, 10.0]
    assert add["sparsity"] is None and add["sparsities"] == {TASKS[0]: 0.5, TASKS[1]: 0.9}
    assert add["selected_alpha"] in add["alpha_grid"]
    curve = sel_store.read_table("addition", name)
    assert sorted(curve["alpha"].unique()) == add["alpha_grid"]
    neg = sel_store.read_result("negation", name)
    assert neg["alpha_grids"] == {TASKS[0]: g05, TASKS[1]: g09} and neg["sparsities"] == add["sparsities"]
    table = sel_store.read_table("negation", name)
    for task, grid in neg["alpha_grids"].items():
        assert sorted(table[table.target == task]["alpha"].unique()) == grid
        assert neg["selected"][task] in grid
    # without per-task runs nothing changes: one grid, one sparsity, no extra keys
    evaluate(sel_store, "addition", MODEL, TASKS, "talos", settings={"alpha_step": 0.25}, overrides=OVERRIDES,
             train=False, suite="plain")
    plain = sel_store.read_result("addition", schema.result_name("plain", MODEL, "talos"))
    assert plain["alpha_grid"] == g09 and plain["sparsity"] == 0.9
    assert not {"sparsities", "task_overrides", "variant_of"} & set(plain)


def test_fixed_variant_row_beside_the_selected_one(sel_store):
    from talos_core.evaluation.reports import comparison_table

    choices = selected_overrides(sel_store, "default", MODEL, "talos")
    common = dict(overrides=OVERRIDES, train=False, suite="rows")
    for proto, settings in (("single", None), ("addition", {"alpha_step": 0.25}), ("efficiency", None)):
        evaluate(sel_store, proto, MODEL, TASKS, "talos", settings=settings, task_overrides=choices, **common)
        evaluate(sel_store, proto, MODEL, TASKS, "talos", settings=settings, result_method="talos-k0.9", **common)
    fixed = sel_store.read_result("addition", schema.result_name("rows", MODEL, "talos-k0.9"))
    assert fixed["method"] == "talos-k0.9" and fixed["variant_of"] == "talos" and fixed["sparsity"] == 0.9
    single = sel_store.read_table("single", schema.result_name("rows", MODEL))
    assert set(single["method"]) == {"talos", "talos-k0.9"} and len(single) == 8
    eff = sel_store.read_table("efficiency", schema.result_name("rows", MODEL))
    assert set(eff["method"]) == {"talos", "talos-k0.9"}
    comp = comparison_table(sel_store, "rows", MODEL).set_index("method")
    assert {"talos", "talos-k0.9"} <= set(comp.index)
    assert comp.loc["talos-k0.9", "addition_abs"] == pytest.approx(fixed["summary"]["abs_acc"])
    assert not math.isnan(comp.loc["talos-k0.9", "time_per_step_s"])


def test_request_errors_write_nothing(sel_store, tmp_path):
    store = Store(tmp_path / "s")
    with pytest.raises(TalosError, match=re.escape("result method 'llora-r8' must be 'talos' or a variant id")):
        evaluate(store, "addition", MODEL, TASKS, "talos", overrides=OVERRIDES, result_method="llora-r8")
    with pytest.raises(TalosError, match=re.escape("task overrides may not set 'max_val'")):
        evaluate(store, "addition", MODEL, TASKS, "talos", overrides=OVERRIDES,
                 task_overrides={TASKS[0]: {"max_val": 8}})
    with pytest.raises(TalosError, match="sparsity must be in"):
        evaluate(store, "addition", MODEL, TASKS, "talos", overrides=OVERRIDES,
                 task_overrides={TASKS[0]: {"sparsity": 1.5}})
    with pytest.raises(TalosError, match="unknown fine-tuning setting 'stepz'"):
        evaluate(store, "addition", MODEL, TASKS, "talos", overrides=OVERRIDES, task_overrides={TASKS[0]: {"stepz": 1}})
    with pytest.raises(TalosError, match="has no selection result"):
        selected_overrides(store, "default", MODEL, "talos")
    with pytest.raises(TalosError, match="has no choice for task 'tweets'"):
        selected_overrides(sel_store, "default", MODEL, "talos", [*TASKS, "tweets"])
    assert not (tmp_path / "s" / "results").exists()


def _cli(argv):
    from talos_core.cli import main

    return main(argv)


def _flags() -> list[str]:
    out = []
    for key, value in OVERRIDES.items():
        out += ["--" + key.replace("_", "-"), str(value)]
    return out


def test_cli_selection_use_selection_and_result_method(sel_store, capsys):
    common = ["--model", MODEL, "--tasks", ",".join(TASKS), "--store", str(sel_store.root), "--suite", "cli",
              "--control-task", CONTROL, "--alpha-step", "0.25", "--no-train", "--quiet", *_flags()]
    assert _cli(["evaluate", "selection", "--method", "talos", "--values", "0.5,0.9", *common]) == 0
    out = capsys.readouterr().out
    assert "cli__tiny-text__talos" in out and "sparsity" in out
    cli_sel = sel_store.read_result("selection", "cli__tiny-text__talos")
    assert cli_sel["choices"] == sel_store.read_result("selection", "default__tiny-text__talos")["choices"]
    assert _cli(["evaluate", "addition", "--method", "talos", "--use-selection", *common]) == 0
    assert sel_store.read_result("addition", "cli__tiny-text__talos")["runs"] == cli_sel["runs"]
    assert _cli(["evaluate", "addition", "--method", "talos", "--result-method", "talos-k0.9", *common]) == 0
    assert "cli__tiny-text__talos-k0.9" in capsys.readouterr().out
    for argv, needle in ((["selection", "--method", "talos", "--param", "rank"], "only llora has a rank"),
                         (["selection", "--method", "talos", "--values", "0.5,1"], "sparsity must be in [0, 1)"),
                         (["addition", "--method", "lota", "--use-selection"], "has no selection result"),
                         (["addition", "--method", "talos", "--result-method", "lota-k0.9"], "result method")):
        assert _cli(["evaluate", *argv, *common]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert needle in err[-1], err
    with pytest.raises(SystemExit) as exc:  # argparse: usage and one error line
        _cli(["evaluate", "selection", "--method", "talos", "--values", "a,b", *common])
    assert exc.value.code == 2 and "expected comma-separated numbers, got 'a,b'" in capsys.readouterr().err


def test_llora_rank_selection_uses_the_default_run_for_the_default_rank(tmp_path):
    store = Store(tmp_path / "s")
    ov = {k: v for k, v in OVERRIDES.items() if k not in ("calib_samples", "rounds")}
    evaluate(store, "selection", MODEL, TASKS[:1], "llora", overrides=ov,
             settings={"param": "rank", "values": (2, 16), "control_task": CONTROL, "alpha_step": 0.5})
    payload = store.read_result("selection", schema.result_name("default", MODEL, "llora"))
    table = store.read_table("selection", schema.result_name("default", MODEL, "llora")).set_index("value")
    assert store.get_run(table.loc[2, "run_id"]).manifest.info["rank"] == 2
    default = store.get_run(table.loc[16, "run_id"])
    assert default.manifest.info["rank"] == 16 and default.manifest.config["options"] == {}
    from talos_core.evaluation.runs import build_request, find_run

    assert default.id == build_request(MODEL, TASKS[0], "llora", ov).run_id()  # the plain llora run
    assert find_run(store, MODEL, TASKS[0], "llora", {"steps": ov["steps"]}).id == default.id  # not the rank-2 run
    choice = payload["choices"][TASKS[0]]["rank"]
    assert payload["overrides"][TASKS[0]] == ({} if choice == 16 else {"options": {"rank": 2}})
    evaluate(store, "single", MODEL, TASKS[:1], "llora", overrides=ov, train=False,
             task_overrides=selected_overrides(store, "default", MODEL, "llora"))
    single = store.read_result("single", schema.result_name("default", MODEL))
    assert single["runs"]["llora"] == payload["runs"]
