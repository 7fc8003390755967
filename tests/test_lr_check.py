"""The learning rate re-checked at the step budget: the rule on hand-made numbers with known answers,
the suite steps (order, overrides, run ids shared with the suite's rows, run parts), bad input, the protocol on
the tiny model and the report line."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from talos_core.errors import TalosError
from talos_core.evaluation.lr_check import (
    RULE,
    LrCheckSettings,
    check_lr_values,
    compare_lrs,
    lr_overrides,
    lr_text,
    summary_line,
)
from talos_core.store import Store

# --------------------------------------------------------------------------------------------
# the rule
# --------------------------------------------------------------------------------------------


def test_rule_agrees_when_the_suite_lr_has_the_highest_mean():
    r = compare_lrs({1e-4: {"a": 0.60, "b": 0.70}, 1e-3: {"a": 0.72, "b": 0.70}}, suite_lr=1e-3)
    assert r.means == pytest.approx({1e-4: 0.65, 1e-3: 0.71})
    assert r.best_lr == 1e-3 and r.suite_lr == 1e-3 and r.agrees


def test_rule_disagrees_on_the_mean_not_on_one_task():
    # 1e-3 wins on task a, but 1e-4 has the higher mean: 0.75 vs 0.70
    r = compare_lrs({1e-3: {"a": 0.80, "b": 0.60}, 1e-4: {"a": 0.70, "b": 0.80}, 5e-4: {"a": 0.1, "b": 0.1}},
                    suite_lr=1e-3)
    assert r.best_lr == 1e-4 and not r.agrees
    assert list(r.means) == [1e-3, 1e-4, 5e-4]  # the candidates' order


def test_rule_tie_goes_to_the_suite_lr():
    assert compare_lrs({1e-4: {"a": 0.5, "b": 0.7}, 1e-3: {"a": 0.7, "b": 0.5}}, suite_lr=1e-3).best_lr == 1e-3
    assert compare_lrs({1e-4: {"a": 0.5, "b": 0.7}, 1e-3: {"a": 0.7, "b": 0.5}}, suite_lr=1e-4).agrees
    # a tie among the others only: the first listed
    r = compare_lrs({1e-2: {"a": 0.9}, 1e-4: {"a": 0.9}, 1e-3: {"a": 0.1}}, suite_lr=1e-3)
    assert r.best_lr == 1e-2 and not r.agrees


@pytest.mark.parametrize("val_acc, suite_lr, match", [
    ({}, 1e-3, "needs learning rates"),
    ({1e-4: {"a": 0.5}}, 1e-3, "not the method's own learning rate 1e-3"),
    ({1e-3: {"a": 0.5}, 1e-4: {"b": 0.5}}, 1e-3, "every lr must be checked on the same tasks"),
    ({1e-3: {"a": 1.5}}, 1e-3, "must be a number in \\[0, 1\\]"),
    ({1e-3: {"a": float("nan")}}, 1e-3, "must be a number in \\[0, 1\\]"),
    ({1e-3: {}}, 1e-3, "no validation accuracies"),
    ({0.0: {"a": 0.5}}, 1e-3, "learning rate 0.0 to check is not allowed"),
])
def test_rule_bad_input_is_one_sentence(val_acc, suite_lr, match):
    with pytest.raises(TalosError, match=match):
        compare_lrs(val_acc, suite_lr)


@pytest.mark.parametrize("values, match", [
    ((), "needs learning rates to compare"),
    ((1e-3, 0), "learning rate 0 to check is not allowed; each must be a number in \\(0, 1\\]"),
    ((-1e-3,), "learning rate -0.001 to check is not allowed"),
    ((2.0,), "learning rate 2.0 to check is not allowed"),
    ((True,), "learning rate True"),
    (("fast",), "learning rate 'fast'"),
    ((1e-3, 0.001), "listed twice"),
])
def test_bad_values_are_one_sentence(values, match):
    with pytest.raises(TalosError, match=match):
        LrCheckSettings(values=values)


def test_values_text_and_summary():
    assert check_lr_values([1e-4, 1e-3]) == (1e-4, 1e-3) and check_lr_values(1e-3) == (1e-3,)
    assert LrCheckSettings().values == (1e-4, 1e-3)  # the default: the two the shipped choice compared
    assert [lr_text(v) for v in (1e-3, 1e-4, 5e-4, 2.5e-5)] == ["1e-3", "1e-4", "5e-4", "2.5e-5"]
    payload = {"suite_lr": 1e-3, "best_lr": 1e-4, "agrees": False, "budget": 300, "tasks": ["tweets", "wordnet-verbs"],
               "means": [{"lr": 1e-4, "val_acc": 0.65}, {"lr": 1e-3, "val_acc": 0.61}]}
    assert summary_line(payload) == ("lr check at 300 steps (tweets, wordnet-verbs): 1e-3 (suite) 0.610 vs 1e-4 0.650 "
                                     "mean val acc → disagrees: 1e-4 is higher")
    # the suite's own lr: its other rows' overrides as they are (same request), the others with their lr
    assert lr_overrides({"steps": 4, "lr": 1e-4}, 1e-4, 1e-4) == {"steps": 4, "lr": 1e-4}
    assert lr_overrides({"steps": 4, "lr": 1e-3}, 1e-4, 1e-3) == {"steps": 4, "lr": 1e-4}
    # a base that leaves the lr to the model's default gets it named (a run is found by the settings named)
    assert lr_overrides({"steps": 4}, 1e-3, 1e-3) == {"steps": 4, "lr": 1e-3}


# --------------------------------------------------------------------------------------------
# the suite steps
# --------------------------------------------------------------------------------------------
def _store_with_budgets(root, suite: str, model: str, methods, budget: int) -> Store:
    store = Store(root)
    for m in methods:
        store.write_table("learning_curve", f"{suite}__{model}__{m}", pd.DataFrame({"step": [budget]}), budget=budget)
    return store


def _store_with_choices(root, suite: str, model: str, chosen: dict) -> Store:
    """A store holding lr checks that chose ``{method: lr}`` (what later steps of a converged scale read)."""
    store = Store(root)
    for m, lr in chosen.items():
        store.write_table("lr_check", f"{suite}__{model}__{m}", pd.DataFrame({"lr": [lr]}), best_lr=lr, suite_lr=lr,
                          agrees=True, chooses=True)
    return store


def test_scales_and_step_order():
    from talos_core.suites import get_suite, lr_check_tasks, suite_steps

    for name in ("text", "vision"):  # the converged protocol: the check chooses each method's lr
        sc = get_suite(name).scales["full"]
        assert sc.lr_check == (1e-4, 1e-3) and sc.lr_chosen and sc.one_rate_rows == ("talos",) and sc.lr is None
        assert sc.curve_steps is None and not sc.lr_rows
    assert lr_check_tasks(get_suite("text"), "full") == ("tweets", "wordnet-verbs")
    assert lr_check_tasks(get_suite("vision"), "full") == ("mnist", "digits")
    for name in ("text", "vision", "tiny"):  # the mini scales (and the tiny determinism suite): no check
        assert get_suite(name).scales["mini"].lr_check == ()
        steps = suite_steps(get_suite(name), "mini", get_suite(name).methods, get_suite(name).posthoc, seed=0,
                            device="cpu")
        assert not [st for st in steps if st.protocol == "lr-check"]

    spec = get_suite("text")
    steps = suite_steps(spec, "full", spec.methods, spec.posthoc, seed=0, device="cpu")
    labels = [st.label for st in steps]
    assert not [st for st in steps if st.protocol == "learning-curve"]  # the curve is the run
    for m in spec.methods:  # the first step of its method: every later one trains at the rate it chooses
        first = next(lab for lab in labels if lab.startswith((f"{m}: ", f"{m}-")))
        assert first == f"{m}: lr check"
    check = steps[labels.index("talos: lr check")]
    assert check.protocol == "lr-check" and check.trains and check.feeds
    assert check.tasks == ("tweets", "wordnet-verbs")
    assert check.settings == LrCheckSettings(values=(1e-4, 1e-3), row="talos-k0.9", choose=True)
    assert not callable(check.overrides) and check.overrides["steps"] == 2000  # reads nothing of its own
    assert steps[labels.index("llora: lr check")].settings.row is None
    # TaLoS at the dense baseline's chosen rate: after every method's steps, waiting for nonlinear's check
    one = [st for st in steps if st.label.startswith("talos-k0.9 at nonlinear's lr: ")]
    assert [st.label.split(": ")[1] for st in one] == ["single", "addition", "negation"]
    assert labels.index(one[0].label) > labels.index("lota-k0.9: negation")
    assert all(st.after == ("nonlinear: lr check",) and callable(st.result_method) for st in one)
    assert not [lab for lab in labels if "-lr0" in lab]  # the fixed lr rows of the reporting check are gone

    # the learning-curve protocol (kept for other scales): the check reports, right after the method's curve
    from tiny_text import with_curves_scale

    tiny = with_curves_scale(get_suite("tiny"))
    steps = suite_steps(tiny, "curves", ["talos", "nonlinear"], ["ties"], seed=0, device="cpu")
    labels = [st.label for st in steps]
    for m in ("talos", "nonlinear"):
        assert labels[labels.index(f"{m}: learning curve") + 1] == f"{m}: lr check"
    check = steps[labels.index("talos: lr check")]
    assert not check.feeds and check.settings == LrCheckSettings(values=(1e-4, 1e-3), row="talos-k0.9")


def test_check_runs_are_the_suite_rows_runs(tmp_path):
    """At the rate the check chose, its run IS the variant row's (talos, k 0.9), the selection candidate's (k 0.9;
    L-LoRA: the default rank) and the main row's (nonlinear): same run ids; TaLoS at the rate nonlinear's check chose
    is the check's run at that rate. The other lr differs only in lr."""
    from talos_core.evaluation.runs import build_request
    from talos_core.suites import get_suite, suite_steps
    from talos_core.suites.executors import part_overrides, run_parts

    spec = get_suite("text")
    steps = suite_steps(spec, "full", spec.methods, spec.posthoc, seed=0, device="cpu")
    by = {st.label: st for st in steps}
    chosen = {"talos": 1e-3, "nonlinear": 1e-4, "linearized": 1e-4, "llora": 1e-3, "lota": 1e-3}
    store = _store_with_choices(tmp_path, "text", spec.model, chosen)

    def rid(task, method, ov):
        return build_request(spec.model, task, method, ov).run_id()

    def part_ids(label):
        st = by[label]
        return {key: rid(task, st.method, part_overrides(st, store, task, v)) for key, task, v in run_parts(st)}

    task = "tweets"
    ids = part_ids("talos: lr check")  # a check that chooses needs no model to name its runs
    assert list(ids) == ["tweets lr=0.0001", "wordnet-verbs lr=0.0001", "tweets lr=0.001", "wordnet-verbs lr=0.001"]
    variant = by["talos-k0.9: single"]
    assert variant.resolve(store)[1]["lr"] == 1e-3 and variant.resolve(store)[1]["steps"] == 2000
    assert ids[f"{task} lr=0.001"] == rid(task, "talos", variant.resolve(store)[1])
    sel = {key: rid(t, "talos", part_overrides(by["talos: selection (sparsity)"], store, t, v))
           for key, t, v in run_parts(by["talos: selection (sparsity)"])}
    assert ids[f"{task} lr=0.001"] == sel[f"{task} sparsity=0.9"] and ids[f"{task} lr=0.0001"] not in sel.values()
    one = by["talos-k0.9 at nonlinear's lr: single"]
    assert one.result_method(store) == "talos-k0.9-lr0.0001"
    assert ids[f"{task} lr=0.0001"] == rid(task, "talos", one.resolve(store)[1])
    assert one.resolve(store)[1] == {**variant.resolve(store)[1], "lr": 1e-4}
    # nonlinear: the main row, at its chosen rate
    ids = part_ids("nonlinear: lr check")
    main = by["nonlinear: fine-tune + single"].resolve(store)[1]
    assert main["lr"] == 1e-4 and ids[f"{task} lr=0.0001"] == rid(task, "nonlinear", main)
    assert part_overrides(by["nonlinear: lr check"], store, task, 1e-3) == {**main, "lr": 1e-3}
    # llora: the selection's default-rank candidate
    ids = part_ids("llora: lr check")
    sel = {key: rid(t, "llora", part_overrides(by["llora: selection (rank)"], store, t, v))
           for key, t, v in run_parts(by["llora: selection (rank)"])}
    assert ids[f"{task} lr=0.001"] == sel[f"{task} rank=16"]
    # lota: its fixed-0.9 row; the post-hoc merges and the ablation read their base method's rate
    lota_row = by["lota-k0.9: single"].resolve(store)[1]
    assert part_ids("lota: lr check")[f"{task} lr=0.001"] == rid(task, "lota", lota_row)
    assert by["ties: post-hoc addition + negation"].resolve(store)[1]["lr"] == 1e-4
    assert by["talos sparsity ablation"].resolve(store)[1]["lr"] == 1e-3
    # where both checks chose the same rate, the one-rate row would repeat talos-k0.9: it is not written
    same = _store_with_choices(tmp_path / "same", "text", spec.model, {**chosen, "nonlinear": 1e-3})
    assert one.result_method(same) is None and one.run(same, spec.model, "text") is None
    with pytest.raises(TalosError, match="no lr check 'text__minilm-l6__talos'"):
        variant.resolve(Store(tmp_path / "empty"))


def test_check_steps_feed_their_method_when_they_choose_and_no_other_step_when_they_report():
    """A check that chooses is waited for by every later step of its method (they train at its rate); one that
    reports (the learning-curve protocol) feeds no step. Without the check the table is the same but for its
    steps, and the fingerprint of a reporting scale does not see it."""
    from dataclasses import replace

    from tiny_text import with_curves_scale

    from talos_core.suites import get_suite, suite_steps
    from talos_core.suites.executors import step_graph

    spec = get_suite("tiny")
    steps = suite_steps(spec, "paper", ["talos", "nonlinear"], ["ties"], seed=0, device="cpu")
    graph, runs = step_graph(steps), step_graph(steps, results=False)
    assert graph["talos: lr check"] == () == runs["talos: lr check"]
    for label in ("talos: selection (sparsity)", "talos-k0.9: single", "talos sparsity ablation"):
        assert "talos: lr check" in graph[label] and "talos: lr check" in runs[label]
    assert "nonlinear: lr check" in runs["ties: post-hoc addition + negation"]
    assert set(runs["talos-k0.9 at nonlinear's lr: single"]) >= {"talos: lr check", "nonlinear: lr check"}

    spec = with_curves_scale(spec)
    steps = suite_steps(spec, "curves", ["talos", "nonlinear"], ["ties"], seed=0, device="cpu")
    graph, runs = step_graph(steps), step_graph(steps, results=False)
    assert graph["talos: lr check"] == ("talos: learning curve",) == runs["talos: lr check"]
    for deps in runs.values():
        assert "talos: lr check" not in deps and "nonlinear: lr check" not in deps
    assert "talos: lr check" in graph["comparison"]  # the comparison still waits for everything
    plain = replace(spec, scales={**spec.scales, "curves": replace(spec.scales["curves"], lr_check=())})
    without = suite_steps(plain, "curves", ["talos", "nonlinear"], ["ties"], seed=0, device="cpu")
    assert [st.label for st in without] == [st.label for st in steps if st.protocol != "lr-check"]
    assert [(st.settings, st.result_method, st.tasks) for st in without] == \
        [(st.settings, st.result_method, st.tasks) for st in steps if st.protocol != "lr-check"]
    # the fingerprint of a suite record does not see the check (a partial run recorded before it resumes)
    assert spec.scales["curves"].settings_dict() == plain.scales["curves"].settings_dict()


def test_bad_check_tasks_in_a_scale(tmp_path):
    from dataclasses import replace

    from talos_core.suites import get_suite, suite_steps

    spec = get_suite("tiny")
    for tasks, match in ((("tweets",), "lr-check task 'tweets' of suite 'tiny' is not one of its tasks; choose"),
                         (("drug-reviews", "drug-reviews"), "listed twice")):
        bad = replace(spec, scales={"paper": replace(spec.scales["paper"], lr_check_tasks=tasks)})
        with pytest.raises(TalosError, match=match):
            suite_steps(bad, "paper", ["talos"], [], seed=0, device="cpu")
    with pytest.raises(TalosError, match="learning rate 0 to check"):
        suite_steps(replace(spec, scales={"paper": replace(spec.scales["paper"], lr_check=(0, 1e-3))}), "paper",
                    ["talos"], [], seed=0, device="cpu")


# --------------------------------------------------------------------------------------------
# the protocol on the tiny model
# --------------------------------------------------------------------------------------------
OVERRIDES = {"steps": 2, "batch_size": 8, "max_train": 16, "max_val": 8, "max_test": 8, "calib_samples": 8,
             "lr": 1e-3, "device": "cpu"}
TASKS = ["drug-reviews", "fortune-topics"]


@pytest.mark.parametrize("kwargs, match", [
    (dict(settings={"values": ()}), "needs learning rates to compare"),
    (dict(settings={"values": (1e-3, -1.0)}), "learning rate -1.0 to check is not allowed"),
    (dict(settings={"values": (1e-4, 5e-4)}), "not the method's own learning rate 1e-3; add it"),
    (dict(tasks=["drug-reviews", "no-such-task"]), "no-such-task"),
    (dict(settings={"values": (1e-3,), "speed": 2}), "has no setting 'speed'"),
])
def test_protocol_bad_input_writes_nothing(tmp_path, kwargs, match):
    from talos_core.evaluation.protocols import evaluate

    call = {"tasks": TASKS, "settings": {"values": (1e-4, 1e-3)}, **kwargs}
    with pytest.raises(TalosError, match=match):
        evaluate(Store(tmp_path / "s"), "lr-check", "tiny-text", call["tasks"], "nonlinear", suite="t",
                 settings=call["settings"], overrides=OVERRIDES)
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").rglob("*.json"))


def test_protocol_end_to_end(tmp_path, monkeypatch):
    from talos_core import pipeline
    from talos_core.evaluation.protocols import PROTOCOLS, evaluate
    from talos_core.evaluation.runs import resolve_runs
    from talos_core.schema import KINDS

    assert "lr-check" in PROTOCOLS
    store = Store(tmp_path)
    own = resolve_runs(store, "tiny-text", TASKS, "talos", overrides=OVERRIDES)  # the suite's own runs, first
    calls = []
    real = pipeline.run_finetune
    monkeypatch.setattr(pipeline, "run_finetune", lambda req, *a, **k: calls.append((req.task, req.lr))
                        or real(req, *a, **k))
    out = evaluate(store, "lr-check", "tiny-text", TASKS, "talos", suite="t", settings={"values": (1e-4, 1e-3)},
                   overrides=OVERRIDES)
    assert calls == [(t, 1e-4) for t in TASKS]  # only the other lr trains: the own-lr runs are the stored ones
    assert out.results == [("lr_check", "t__tiny-text__talos")]
    assert [p.name for p in (tmp_path / "results").iterdir()] == ["lr_check"]
    payload = store.read_result("lr_check", "t__tiny-text__talos")
    table = store.read_table("lr_check", "t__tiny-text__talos")
    assert list(table.columns) == list(KINDS["lr_check"].columns) == ["task", "lr", "val_acc", "run_id", "steps"]
    assert table["lr"].tolist() == [1e-4, 1e-4, 1e-3, 1e-3] and set(table["steps"]) == {2}
    mine = table[table["lr"] == 1e-3].set_index("task")
    assert mine["run_id"].to_dict() == {t: r.id for t, r in own.items()}
    assert mine["val_acc"].to_dict() == {t: r.manifest.metrics["finetuned_val_acc"] for t, r in own.items()}
    means = {r["lr"]: r["val_acc"] for r in payload["means"]}
    assert means[1e-3] == pytest.approx(mine["val_acc"].mean())
    expected = compare_lrs({lr: dict(zip(g["task"], g["val_acc"])) for lr, g in table.groupby("lr")}, 1e-3)
    assert payload["best_lr"] == expected.best_lr and payload["agrees"] == expected.agrees
    assert payload["suite_lr"] == 1e-3 and payload["rule"] == RULE and payload["budget"] == 2
    assert payload["fixed"] == {"sparsity": 0.9} and payload["row"] == "talos" and payload["tasks"] == TASKS
    assert out.lines[-1] == summary_line(payload)
    # again: nothing trains; a run whose manifest lacks its validation accuracy is evaluated, to the same number
    rid = table.loc[0, "run_id"]
    path = tmp_path / "runs" / rid / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["metrics"].pop("finetuned_val_acc")
    path.write_text(json.dumps(manifest))
    calls.clear()
    again = evaluate(store, "lr-check", "tiny-text", TASKS, "talos", suite="t", settings={"values": (1e-4, 1e-3)},
                     overrides=OVERRIDES, train=False)
    assert calls == [] and again.table["val_acc"].tolist() == pytest.approx(table["val_acc"].tolist())


def test_protocol_at_the_models_default_lr(tmp_path):
    """Without an lr in the overrides the method's own lr is the model's default (tiny-text: 1e-3): its run is
    the request's run, with no lr given."""
    from talos_core.evaluation.protocols import evaluate
    from talos_core.evaluation.runs import find_run

    ov = {k: v for k, v in OVERRIDES.items() if k != "lr"}
    evaluate(Store(tmp_path), "lr-check", "tiny-text", TASKS[:1], "nonlinear", suite="t",
             settings={"values": (1e-3, 3e-3)}, overrides=ov)
    payload = Store(tmp_path).read_result("lr_check", "t__tiny-text__nonlinear")
    assert payload["suite_lr"] == 1e-3 and "fixed" in payload and payload["fixed"] == {}
    assert payload["runs"][TASKS[0]]["1e-3"] == find_run(Store(tmp_path), "tiny-text", TASKS[0], "nonlinear", ov).id


def test_cli_and_report(tmp_path, capsys, monkeypatch):
    from talos_core.cli import main

    base = ["evaluate", "lr-check", "--model", "tiny-text", "--tasks", "drug-reviews", "--method", "nonlinear",
            "--suite", "tiny", "--steps", "2", "--batch-size", "8", "--max-train", "16", "--max-val", "8",
            "--max-test", "8", "--lr", "1e-3", "--device", "cpu", "--store", str(tmp_path), "--quiet"]
    assert main([*base, "--values", "0,1e-3"]) == 2
    assert "learning rate 0 to check is not allowed" in capsys.readouterr().err
    assert main([*base, "--values", "1e-4"]) == 2
    assert "not the method's own learning rate 1e-3" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()  # nothing written
    assert main([*base, "--values", "1e-3,1e-4"]) == 0
    out = capsys.readouterr().out
    assert "lr check at 2 steps (drug-reviews): 1e-3 (suite)" in out
    # talos report: one line per method below the results table (a store without checks: nothing more)
    monkeypatch.setattr("talos_core.suites.report.results_markdown", lambda store, name: "TABLE")
    store = Store(tmp_path)
    assert main(["report", "tiny", "--store", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "TABLE"  # no suite record: the model is unknown, nothing more
    store.write_result("suite", "tiny", {"model": "tiny-text"})
    assert main(["report", "tiny", "--store", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "TABLE" and len(lines) == 4
    assert lines[3] == "- nonlinear: " + summary_line(store.read_result("lr_check", "tiny__tiny-text__nonlinear"))
    store.write_result("lr_check", "tiny__tiny-text__talos", {"records": []})
    assert main(["report", "tiny", "--store", str(tmp_path)]) == 2
    assert "lr_check result 'tiny__tiny-text__talos'" in capsys.readouterr().err


def test_run_parts_train_one_by_one(tmp_path):
    """``--stage train`` and the processes/Ray executors train the check's runs one part at a time: the part at
    each lr is that lr's run; the step, run afterwards, finds every run and chooses."""
    from tiny_text import with_curves_scale

    from talos_core.evaluation.runs import find_run
    from talos_core.suites import get_suite, suite_steps
    from talos_core.suites.executors import fine_tune_parts, fine_tune_run, part_overrides, run_parts

    spec = get_suite("tiny")
    steps = suite_steps(spec, "paper", ["nonlinear"], [], seed=0, device="cpu")
    check = next(st for st in steps if st.protocol == "lr-check")
    assert [k for k, _, _ in run_parts(check)] == ["drug-reviews lr=0.001", "fortune-topics lr=0.001",
                                                   "drug-reviews lr=0.03", "fortune-topics lr=0.03"]
    store = Store(tmp_path)
    fine_tune_run(check, store, spec.model, "drug-reviews lr=0.001")
    ov = part_overrides(check, store, "drug-reviews", 1e-3)
    run = find_run(store, spec.model, "drug-reviews", "nonlinear", ov)
    assert run is not None and run.manifest.request["lr"] == 1e-3 and run.manifest.config["train"]["steps"] == 8
    assert run.manifest.curve and run.manifest.request["eval_every"] == 2  # its own validation curve
    assert fine_tune_parts(check, store, spec.model) == ["fortune-topics lr=0.001", "drug-reviews lr=0.03",
                                                         "fortune-topics lr=0.03"]
    n = len(list(store.runs()))
    check.run(store, spec.model, spec.name)
    assert len(list(store.runs())) == n  # the step trains nothing more
    payload = store.read_result("lr_check", "tiny__tiny-text__nonlinear")
    assert payload["budget"] == 8 and payload["chooses"] and payload["agrees"]
    assert payload["suite_lr"] == payload["best_lr"] in (1e-3, 3e-2)
    # a check that reports names its own-lr run through the model's default: it needs the model
    curves = with_curves_scale(spec)
    report = next(st for st in suite_steps(curves, "curves", ["nonlinear"], [], seed=0, device="cpu")
                  if st.protocol == "lr-check")
    budgets = _store_with_budgets(tmp_path / "b", "tiny", spec.model, ["nonlinear"], 2)
    with pytest.raises(TalosError, match="depend on the model"):
        part_overrides(report, budgets, "drug-reviews", 1e-4)
    assert part_overrides(report, budgets, "drug-reviews", 1e-4, spec.model)["steps"] == 2


def test_the_other_lrs_run_is_never_taken_for_the_own_one(tmp_path):
    """Regression (found on the CPU vision run): where the overrides leave the lr to the model's default and the
    other candidate's run was trained first, a lookup by the named settings found that run (same settings but the
    lr) for the own lr, so the own-lr run was never trained and the check compared a run with itself. The check
    and the suite's rows now name the lr: two different runs, each at its own lr."""
    from talos_core.evaluation.protocols import evaluate
    from talos_core.evaluation.runs import find_run
    from talos_core.suites import get_suite, suite_steps

    ov = {k: v for k, v in OVERRIDES.items() if k != "lr"}
    store = Store(tmp_path)
    evaluate(store, "lr-check", "tiny-text", TASKS[:1], "nonlinear", suite="t",
             settings={"values": (3e-3, 1e-3)}, overrides=ov)  # the other lr first
    payload = store.read_result("lr_check", "t__tiny-text__nonlinear")
    runs = payload["runs"][TASKS[0]]
    assert runs["1e-3"] != runs["3e-3"]
    lrs = {rid: store.get_run(rid).manifest.config["train"]["lr"] for rid in runs.values()}
    assert lrs == {runs["1e-3"]: 1e-3, runs["3e-3"]: 3e-3}
    assert find_run(store, "tiny-text", TASKS[0], "nonlinear", {**ov, "lr": 1e-3}).id == runs["1e-3"]
    # every fine-tuning step of a scale with an lr check names its lr (text/full: the rate each check chose)
    spec = get_suite("text")
    steps = suite_steps(spec, "full", spec.methods, spec.posthoc, seed=0, device="cpu")
    store2 = _store_with_choices(tmp_path / "b", "text", spec.model, dict.fromkeys(spec.methods, 1e-4))
    checked = 0
    for st in steps:
        if st.trains and st.protocol != "learning-curve":
            try:
                ov = st.resolve(store2)[1]
            except TalosError:  # a main row waiting for its selection's choices (none in this hand-made store)
                continue
            assert "lr" in ov, st.label
            checked += 1
    assert checked >= 10  # lr checks, selections, variant rows, the dense methods' main rows
