"""The learning rate re-checked at the step budget (issue 13): the rule on hand-made numbers with known answers,
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


def test_scales_and_step_order():
    from talos_core.suites import get_suite, lr_check_tasks, suite_steps

    assert get_suite("text").scales["full"].lr_check == (1e-4, 1e-3)
    assert get_suite("vision").scales["full"].lr_check == (1e-4, 1e-3)
    assert lr_check_tasks(get_suite("text"), "full") == ("tweets", "wordnet-verbs")
    assert lr_check_tasks(get_suite("vision"), "full") == ("mnist", "digits")
    for name in ("text", "vision", "tiny"):  # the mini scales (and the tiny determinism suite): no check
        assert get_suite(name).scales["mini"].lr_check == ()
        steps = suite_steps(get_suite(name), "mini", get_suite(name).methods, get_suite(name).posthoc, seed=0,
                            device="cpu")
        assert not [st for st in steps if st.protocol == "lr-check"]
    # every shipped check compares each method's own lr (the lr its rows train with) against the others
    from talos_core.evaluation.lr_check import own_lr, same_lr
    from talos_core.suites import Scale  # noqa: F401

    for name, scale in (("text", "full"), ("vision", "full"), ("tiny", "paper")):
        spec = get_suite(name)
        sc = spec.scales[scale]
        for m in spec.methods:
            ov = {"lr": sc.lr_for(m)} if sc.lr_for(m) is not None else {}
            assert any(same_lr(v, own_lr(spec.model, spec.tasks[0], m, ov)) for v in sc.lr_check), (name, m)

    spec = get_suite("text")
    steps = suite_steps(spec, "full", spec.methods, spec.posthoc, seed=0, device="cpu")
    labels = [st.label for st in steps]
    for m in spec.methods:  # right after its learning curve
        assert labels[labels.index(f"{m}: learning curve") + 1] == f"{m}: lr check"
    check = steps[labels.index("talos: lr check")]
    assert check.protocol == "lr-check" and check.trains and not check.feeds
    assert check.tasks == ("tweets", "wordnet-verbs")
    assert check.settings == LrCheckSettings(values=(1e-4, 1e-3), row="talos-k0.9")
    assert steps[labels.index("llora: lr check")].settings.row is None


def test_check_runs_are_the_suite_rows_runs(tmp_path):
    """At the suite's lr the check's run IS the variant row's (talos, k 0.9), the selection candidate's (k 0.9;
    L-LoRA: the default rank) and the main row's (nonlinear, at the model's default lr): same run ids. The other
    lr differs only in lr. No other step's overrides change."""
    from talos_core.evaluation.runs import build_request
    from talos_core.suites import get_suite, suite_steps
    from talos_core.suites.executors import part_overrides, run_parts

    spec = get_suite("text")
    steps = suite_steps(spec, "full", spec.methods, spec.posthoc, seed=0, device="cpu")
    by = {st.label: st for st in steps}
    store = _store_with_budgets(tmp_path, "text", spec.model, spec.methods, 300)

    def rid(task, method, ov):
        return build_request(spec.model, task, method, ov).run_id()

    def part_ids(label):
        st = by[label]
        return {key: rid(task, st.method, part_overrides(st, store, task, v, spec.model))
                for key, task, v in run_parts(st)}

    task = "tweets"
    # talos: the fixed-0.9 row and the selection's 0.9 candidate
    ids = part_ids("talos: lr check")
    assert list(ids) == ["tweets lr=0.0001", "wordnet-verbs lr=0.0001", "tweets lr=0.001", "wordnet-verbs lr=0.001"]
    variant = by["talos-k0.9: single"]
    # one learning rate for every method (issue 29): the suite's 1e-4 run is the row's, the other lr (1e-3) is the
    # labelled per-method-lr row's
    assert ids[f"{task} lr=0.0001"] == rid(task, "talos", variant.resolve(store)[1])
    sel = {key: rid(t, "talos", part_overrides(by["talos: selection (sparsity)"], store, t, v, spec.model))
           for key, t, v in run_parts(by["talos: selection (sparsity)"])}
    assert ids[f"{task} lr=0.0001"] == sel[f"{task} sparsity=0.9"]
    other = part_overrides(by["talos: lr check"], store, task, 1e-3, spec.model)
    assert other == {**variant.resolve(store)[1], "lr": 1e-3}
    assert ids[f"{task} lr=0.001"] not in set(sel.values())
    assert ids[f"{task} lr=0.001"] == rid(task, "talos", by["talos-k0.9-lr0.001: single"].resolve(store)[1])
    # nonlinear: the main row, at MiniLM's default lr 1e-4 (the suite sets none for it)
    ids = part_ids("nonlinear: lr check")
    main = by["nonlinear: fine-tune + single"].resolve(store)[1]
    # the suite names MiniLM's default lr 1e-4 for it (with the check's 1e-3 runs in the store, a request without
    # an lr would find one of them as compatible: test_the_other_lrs_run_is_never_taken_for_the_own_one)
    assert main["lr"] == 1e-4 and ids[f"{task} lr=0.0001"] == rid(task, "nonlinear", main)
    assert rid(task, "nonlinear", main) == rid(task, "nonlinear", {k: v for k, v in main.items() if k != "lr"})
    assert part_overrides(by["nonlinear: lr check"], store, task, 1e-3, spec.model) == {**main, "lr": 1e-3}
    # llora: the selection's default-rank candidate
    ids = part_ids("llora: lr check")
    sel = {key: rid(t, "llora", part_overrides(by["llora: selection (rank)"], store, t, v, spec.model))
           for key, t, v in run_parts(by["llora: selection (rank)"])}
    assert ids[f"{task} lr=0.0001"] == sel[f"{task} rank=16"]
    # lota: its fixed-0.9 row
    lota_row = by["lota-k0.9: single"].resolve(store)[1]
    assert part_ids("lota: lr check")[f"{task} lr=0.0001"] == rid(task, "lota", lota_row)


def test_check_steps_feed_no_other_step_and_leave_the_others_unchanged():
    """Later steps of a method do not wait for its lr check (it only reports); it waits for the learning curve.
    Without the check the step table is the same but for the check steps."""
    from dataclasses import replace

    from talos_core.suites import get_suite, suite_steps
    from talos_core.suites.executors import step_graph

    spec = get_suite("tiny")
    steps = suite_steps(spec, "paper", ["talos", "nonlinear"], ["ties"], seed=0, device="cpu")
    graph, runs = step_graph(steps), step_graph(steps, results=False)
    assert graph["talos: lr check"] == ("talos: learning curve",) == runs["talos: lr check"]
    for deps in runs.values():
        assert "talos: lr check" not in deps and "nonlinear: lr check" not in deps
    assert "talos: lr check" in graph["comparison"]  # the comparison still waits for everything
    plain = replace(spec, scales={**spec.scales, "paper": replace(spec.scales["paper"], lr_check=())})
    without = suite_steps(plain, "paper", ["talos", "nonlinear"], ["ties"], seed=0, device="cpu")
    assert [st.label for st in without] == [st.label for st in steps if st.protocol != "lr-check"]
    assert [(st.settings, st.result_method, st.tasks) for st in without] == \
        [(st.settings, st.result_method, st.tasks) for st in steps if st.protocol != "lr-check"]
    # the fingerprint of a suite record does not see the check (a partial run recorded before it resumes)
    assert spec.scales["paper"].settings_dict() == plain.scales["paper"].settings_dict()


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
    """``--stage train`` and the processes/Ray executors train the check's runs one part at a time: the part at the
    other lr is that lr's run; the step, run afterwards, finds every run."""
    from talos_core.evaluation.runs import find_run
    from talos_core.suites import get_suite, suite_steps
    from talos_core.suites.executors import fine_tune_parts, fine_tune_run, part_overrides, run_parts

    spec = get_suite("tiny")
    steps = suite_steps(spec, "paper", ["nonlinear"], [], seed=0, device="cpu")
    check = next(st for st in steps if st.protocol == "lr-check")
    assert [k for k, _, _ in run_parts(check)] == ["drug-reviews lr=0.0001", "fortune-topics lr=0.0001",
                                                   "drug-reviews lr=0.001", "fortune-topics lr=0.001"]
    store = _store_with_budgets(tmp_path, "tiny", spec.model, ["nonlinear"], 2)
    fine_tune_run(check, store, spec.model, "drug-reviews lr=0.0001")
    ov = part_overrides(check, store, "drug-reviews", 1e-4, spec.model)
    run = find_run(store, spec.model, "drug-reviews", "nonlinear", ov)
    assert run is not None and run.manifest.request["lr"] == 1e-4 and run.manifest.config["train"]["steps"] == 2
    with pytest.raises(TalosError, match="depend on the model"):
        part_overrides(check, store, "drug-reviews", 1e-4)
    assert fine_tune_parts(check, store, spec.model) == ["fortune-topics lr=0.0001", "drug-reviews lr=0.001",
                                                         "fortune-topics lr=0.001"]
    n = len(list(store.runs()))
    check.run(store, spec.model, spec.name)
    assert len(list(store.runs())) == n  # the step trains nothing more
    assert store.read_result("lr_check", "tiny__tiny-text__nonlinear")["budget"] == 2


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
    # every fine-tuning step of a scale with an lr check names its lr (text/full: nonlinear at MiniLM's 1e-4)
    spec = get_suite("text")
    steps = suite_steps(spec, "full", spec.methods, spec.posthoc, seed=0, device="cpu")
    store2 = _store_with_budgets(tmp_path / "b", "text", spec.model, spec.methods, 300)
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
