"""Suites: registry, CLI errors, and a down-scaled suite that is complete and deterministic."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from talos_core.cli import main
from talos_core.errors import TalosError
from talos_core.evaluation.ablation import AblationSettings
from talos_core.evaluation.posthoc import _thin
from talos_core.evaluation.protocols import evaluate
from talos_core.store import Store
from talos_core.suites import SUITES, get_suite, results_markdown, run_suite
from talos_core.suites.steps import logits_cache_dir


def test_registry_and_specs():
    text = get_suite("text")
    assert text.model == "minilm-l6" and len(text.tasks) >= 5
    assert text.control_task not in text.tasks
    assert {"talos", "nonlinear", "linearized", "llora", "lota"} <= set(text.methods)
    assert {"ties", "dare", "breadcrumbs", "tall_consensus", "tsv", "iso_c", "iso_cts", "lines"} == set(text.posthoc)
    assert get_suite("vision").posthoc == text.posthoc and get_suite("tiny").posthoc == ("ties", *text.posthoc[4:])
    for scale in ("full", "mini"):  # the shipped run is the mini scale: it must carry the whole ablation
        assert set(text.scales[scale].ablation) >= {0.5, 0.9, 0.95, 0.99}
    vision = get_suite("vision")
    assert vision.model == "efficientnet-lite0" and len(vision.tasks) >= 3
    assert vision.control_task == "fashion-mnist" and len(vision.xi_pairs) >= 2
    assert len(text.xi_pairs) >= 2
    for spec in SUITES.values():
        for a, b in spec.xi_pairs:
            assert a in spec.tasks and b in spec.tasks
    with pytest.raises(TalosError, match="unknown suite"):
        get_suite("nope")


def test_thin_keeps_endpoints():
    pts = [{"k": i} for i in range(11)]
    assert _thin(pts, 3) == [{"k": 0}, {"k": 5}, {"k": 10}]
    assert _thin(pts, 20) == pts
    assert _thin(pts, 1) == [{"k": 5}]


def test_cli_errors(capsys, tmp_path):
    assert main(["suite", "nope", "--store", str(tmp_path)]) == 2
    assert "unknown suite 'nope'" in capsys.readouterr().err
    assert main(["suite", "tiny", "--scale", "huge", "--store", str(tmp_path)]) == 2
    assert "unknown scale" in capsys.readouterr().err
    assert main(["suite", "tiny", "--scale", "mini", "--methods", "magic", "--store", str(tmp_path)]) == 2
    assert "magic" in capsys.readouterr().err
    store = tmp_path / "parts"
    for argv, said in ((["--part", "magic"], "unknown method of this suite run (--part) 'magic'"),
                       (["--part", "lota", "--methods", "talos"], "'lota'"),
                       (["--part", ","], "--part needs at least one method"),
                       (["--part", "talos", "--stage", "train"], "--part goes with the whole suite"),
                       (["--part", "talos", "--plan"], "leave --part out")):
        assert main(["suite", "tiny", "--scale", "mini", "--store", str(store), *argv]) == 2, argv
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not store.exists()  # nothing written


@pytest.mark.parametrize("name", ["text", "vision", "tiny"])
def test_step_table_matches_the_shipped_records(name):
    """The step table gives the labels (and their order) of the shipped suite records, so ``--resume``
    of those records keeps working; each step names a registered protocol with valid settings."""
    from talos_core.evaluation.protocols import PROTOCOLS
    from talos_core.suites import suite_steps

    meta = Store(Path(__file__).resolve().parents[1] / "cached_results").read_result("suite", name)
    sc = get_suite(name).scales[meta["scale"]]
    if any(label.endswith(": learning curve") for label in meta["step_times_s"]) and sc.curve_steps is None:
        # a record of the learning-curve protocol, before the converged `full` scales: its fingerprint differs, so
        # `--resume` starts such a suite afresh; the check applies again once the suite ships under this one
        assert sc.settings_dict()["lr_choose"] and "lr_choose" not in meta["scale_settings"]
        pytest.skip(f"cached_results holds {name!r} run under the learning-curve protocol; re-run it to ship this one")
    steps = suite_steps(get_suite(name), meta["scale"], meta["methods"], meta["posthoc"], seed=meta["seed"],
                        device="auto")
    labels = [st.label for st in steps]
    if not any(label.endswith(": examples") for label in meta["step_times_s"]):
        # a record written before the per-example step existed: the other steps keep their labels and order
        labels = [label for label in labels if not label.endswith(": examples")]
    if not any(label.endswith(": lr check") for label in meta["step_times_s"]):
        # a record written before the lr check existed: the other steps keep their labels and order
        labels = [label for label in labels if not label.endswith(": lr check")]
    if not any("-lr" in label.split(":")[0] for label in meta["step_times_s"]):
        # a record written before the labelled learning-rate rows existed: the others keep their order
        labels = [label for label in labels if "-lr" not in label.split(":")[0]]
    assert labels == list(meta["step_times_s"])
    for st in steps:  # settings read from the store when the step runs are checked by the paper-scale tests
        assert callable(st.settings) or isinstance(st.settings, PROTOCOLS[st.protocol].settings)
    assert [st.label for st in steps if st.always] == ["comparison"]


def test_checkpoint_every_reaches_every_fine_tuning_request_and_changes_no_run_id():
    """``--checkpoint-every`` is a fine-tuning override of every step (the executors rebuild the same table), and
    like ``device`` it is not part of any run's identity."""
    from talos_core.pipeline import FinetuneRequest
    from talos_core.suites import suite_steps

    plain, ck = (suite_steps(get_suite("tiny"), "mini", ["talos", "nonlinear"], ["ties"], seed=0, device="auto",
                             checkpoint_every=n) for n in (0, 7))
    assert [st.label for st in plain] == [st.label for st in ck]
    tuned = [(a, b) for a, b in zip(plain, ck) if isinstance(a.overrides, dict) and "steps" in a.overrides]
    assert len(tuned) > 10  # every step that names fine-tuning settings
    for a, b in tuned:
        assert b.overrides == {**a.overrides, "checkpoint_every": 7}
    first = plain[0].overrides
    request = dict(model="tiny-text", task="tweets", method="talos", **first)
    assert FinetuneRequest.from_flat(**request).run_id() == \
        FinetuneRequest.from_flat(**request, checkpoint_every=7).run_id()


def test_converged_scale_steps_read_the_chosen_lr_and_choices_from_the_store(tmp_path):
    """Under the converged protocol each method starts with its lr check (then its selection); later steps train up
    to the maximum with early stopping at the rate the check chose, the selected methods' rows on the stored per-task
    choices, every α search on the union grid with extension."""
    from talos_core.evaluation.lr_check import LrCheckSettings
    from talos_core.evaluation.selection import SelectionSettings
    from talos_core.suites import suite_steps

    spec = get_suite("tiny")
    sc = spec.scales["paper"]
    steps = suite_steps(spec, "paper", ["talos", "nonlinear"], ["ties"], seed=0, device="cpu")
    labels = [st.label for st in steps]
    assert labels[:3] == ["talos: lr check", "talos: selection (sparsity)", "talos: fine-tune + single"]
    assert steps[0].settings == LrCheckSettings(values=(1e-3, 3e-2), row="talos-k0.9", choose=True)
    select = steps[1]
    assert select.settings == SelectionSettings(param="sparsity", values=(0.5, 0.9), control_task=spec.control_task,
                                                alpha_step=sc.alpha_step, alpha_rule="union", alpha_extend=4.0)
    assert [st.label for st in steps if st.trains] == [
        "talos: lr check", "talos: selection (sparsity)", "talos: fine-tune + single", "talos-k0.9: single",
        "nonlinear: lr check", "nonlinear: fine-tune + single", "talos-k0.9 at nonlinear's lr: single"]
    store = Store(tmp_path)
    with pytest.raises(TalosError, match="no lr check"):
        select.resolve(store)
    for m, lr in (("talos", 3e-2), ("nonlinear", 1e-3)):
        store.write_result("lr_check", f"tiny__tiny-text__{m}", {"best_lr": lr, "chooses": True})
    store.write_table("selection", "tiny__tiny-text__talos", pd.DataFrame({"value": [0.5]}),
                      overrides={t: {"sparsity": 0.5 if t == "drug-reviews" else 0.9} for t in spec.tasks})
    _, ov, per_task = steps[2].resolve(store)
    assert (ov["steps"], ov["eval_every"], ov["early_stopping_patience"], ov["lr"]) == (8, 2, 2, 3e-2)
    assert per_task["drug-reviews"] == {"sparsity": 0.5}
    assert steps[labels.index("nonlinear: addition")].resolve(store)[1]["lr"] == 1e-3
    assert steps[labels.index("talos: addition")].settings.alpha_extend == 4.0
    one = steps[labels.index("talos-k0.9 at nonlinear's lr: addition")]
    assert one.result_method(store) == "talos-k0.9-lr0.001" and one.resolve(store)[1]["lr"] == 1e-3
    # every step keeps the per-model tables in the table's row order (any writer order gives the same table)
    assert steps[0].row_order[:3] == ("talos", "talos-k0.9", "nonlinear")
    assert {"talos-k0.9-lr0.001", "talos-k0.9-lr0.03"} <= set(steps[0].row_order)


def test_paper_scale_steps_read_budget_and_choices_from_the_store(tmp_path):
    """Under the learning-curve protocol (kept for other scales) each method starts with its learning curve (and
    selection); later steps take their step budget from the stored learning curve and, for selected methods, the
    per-task runs from the stored selection; the fixed-sparsity row is written under its variant id."""
    from tiny_text import with_curves_scale

    from talos_core.evaluation.learning_curve import LearningCurveSettings
    from talos_core.evaluation.selection import SelectionSettings
    from talos_core.suites import suite_steps

    spec = with_curves_scale(get_suite("tiny"))
    sc = spec.scales["curves"]
    steps = suite_steps(spec, "curves", ["talos", "nonlinear"], ["ties"], seed=0, device="cpu")
    steps = [st for st in steps if st.protocol != "lr-check"]  # the lr check steps: test_lr_check.py
    labels = [st.label for st in steps]
    assert labels[:3] == ["talos: learning curve", "talos: selection (sparsity)", "talos: fine-tune + single"]
    assert labels.index("talos-k0.9: single") > labels.index("talos: disentanglement drug-reviews/fortune-topics")
    assert labels.index("nonlinear: learning curve") > labels.index("talos-k0.9: negation")
    assert "nonlinear: selection (sparsity)" not in labels  # nonlinear has nothing to select
    curve, select = steps[0], steps[1]
    assert curve.settings == LearningCurveSettings(eval_every=sc.curve_every, steps=sc.curve_steps,
                                                   tolerance=sc.curve_tolerance)
    assert isinstance(select.settings, SelectionSettings) and select.settings.values == (0.5, 0.9)
    assert select.settings.control_task == spec.control_task and select.settings.alpha_step == sc.alpha_step
    assert [st.label for st in steps if st.trains] == [
        "talos: learning curve", "talos: selection (sparsity)", "talos: fine-tune + single", "talos-k0.9: single",
        "nonlinear: learning curve", "nonlinear: fine-tune + single"]
    store = Store(tmp_path)
    with pytest.raises(TalosError, match="no learning curve"):
        select.resolve(store)
    store.write_table("learning_curve", "tiny__tiny-text__talos", pd.DataFrame({"step": [2]}), budget=4)
    store.write_table("selection", "tiny__tiny-text__talos", pd.DataFrame({"value": [0.5]}),
                      overrides={t: {"sparsity": 0.5 if t == "drug-reviews" else 0.9} for t in spec.tasks})
    _, ov, per_task = steps[2].resolve(store)
    assert ov["steps"] == 4 and ov["lr"] == sc.lr and per_task["drug-reviews"] == {"sparsity": 0.5}
    variant = steps[labels.index("talos-k0.9: addition")]
    _, ov, per_task = variant.resolve(store)
    assert variant.result_method == "talos-k0.9" and ov["sparsity"] == 0.9 and ov["steps"] == 4 and per_task is None


def test_suite_stage_is_checked(tmp_path):
    with pytest.raises(TalosError, match="suite stage"):
        run_suite("tiny", tmp_path, scale="paper", stage="eval")
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_paper_scale_suite_runs_the_protocol_end_to_end(tmp_path):
    """The tiny suite under the converged protocol, its runs first fine-tuned by a ``--stage train`` pass: the suite
    then trains nothing; every run behind a row recorded its own validation curve up to its maximum or its early stop;
    each method's rows train at the rate its lr check chose (the check agrees by construction); TaLoS at nonlinear's
    rate is its own labelled row; the audit raises no lr or budget flag."""
    from talos_core.evaluation.audit import audit_suite

    store = Store(tmp_path / "s")
    kw = dict(methods=["talos", "nonlinear"], posthoc=["ties"])
    out = run_suite("tiny", store, scale="paper", stage="train", log=lambda s: None, **kw)
    assert out["stage"] == "train" and "suite" not in [p.name for p in (store.root / "results").iterdir()]
    trained = {r.id for r in store.runs()}
    meta = run_suite("tiny", store, scale="paper", log=lambda s: None, **kw)
    assert meta["complete"] and {r.id for r in store.runs()} == trained  # the evaluation pass trained nothing
    assert "learning_curve" not in [p.name for p in (store.root / "results").iterdir()]
    checks = {m: store.read_result("lr_check", f"tiny__tiny-text__{m}") for m in ("talos", "nonlinear")}
    assert all(c["chooses"] and c["agrees"] and c["suite_lr"] == c["best_lr"] for c in checks.values())
    assert checks["talos"]["best_lr"] != checks["nonlinear"]["best_lr"]  # the tiny scale's candidates differ here
    selection = store.read_result("selection", "tiny__tiny-text__talos")
    addition = store.read_result("addition", "tiny__tiny-text__talos")
    for task, rid in addition["runs"].items():
        run = store.get_run(rid)
        train = run.manifest.config["train"]
        assert train["steps"] == 8 and train["lr"] == checks["talos"]["best_lr"]
        assert run.manifest.request["sparsity"] == selection["choices"][task]["sparsity"]
        assert run.manifest.curve and run.manifest.curve[-1]["step"] == run.manifest.timings["steps_run"]
    assert addition["task_overrides"] == selection["overrides"] and addition["alpha_rule"] == "union"
    one = f"talos-k0.9-lr{checks['nonlinear']['best_lr']:g}"
    fixed = store.read_result("addition", f"tiny__tiny-text__{one}")
    assert fixed["variant_of"] == "talos"
    assert {store.get_run(r).manifest.config["train"]["lr"] for r in fixed["runs"].values()} == \
        {checks["nonlinear"]["best_lr"]}
    table = store.read_table("comparison", "tiny__tiny-text")
    assert {"talos", "talos-k0.9", one, "nonlinear", "ties"} == set(table["method"])
    flags = {f.check for f in audit_suite(store.root, "tiny")}
    assert not flags & {"lr-disagrees", "budget-other-schedule", "convergence-unknown"}, flags
    # the lr check's runs at TaLoS's rate are the fixed-0.9 row's
    from talos_core.evaluation.lr_check import lr_text

    fixed9 = store.read_result("addition", "tiny__tiny-text__talos-k0.9")
    assert {t: r[lr_text(checks["talos"]["best_lr"])] for t, r in checks["talos"]["runs"].items()} == \
        {t: fixed9["runs"][t] for t in checks["talos"]["tasks"]}
    assert "talos: lr check" in meta["step_times_s"]


def test_suite_and_report_default_stores(tmp_path, monkeypatch, capsys):
    """``talos suite`` writes into $TALOS_STORE, else ./runs; ``talos report`` reads --store, else
    $TALOS_STORE, else the shipped cached_results."""
    import talos_core.cli.suite as cli_suite

    calls = []
    monkeypatch.setattr(cli_suite, "run_suite", lambda name, store, **kw: calls.append(Path(store)))
    monkeypatch.setattr(cli_suite, "results_markdown", lambda store, name: f"table of {Path(store).name}")
    monkeypatch.setattr("talos_core.suites.report.results_markdown",
                        lambda store, name: f"table of {Path(store.root).name}")
    monkeypatch.setattr("talos_core.suites.report.choices_markdown", lambda store, name: "")
    monkeypatch.delenv("TALOS_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["suite", "tiny", "--scale", "mini"]) == 0
    assert calls[-1] == Path("runs")
    monkeypatch.setenv("TALOS_STORE", str(tmp_path / "env-store"))
    assert main(["suite", "tiny", "--scale", "mini"]) == 0
    assert calls[-1] == tmp_path / "env-store"
    assert main(["suite", "tiny", "--scale", "mini", "--store", "given"]) == 0
    assert calls[-1] == Path("given")
    capsys.readouterr()
    assert main(["report", "tiny"]) == 0
    assert capsys.readouterr().out.strip() == "table of env-store"
    monkeypatch.delenv("TALOS_STORE")
    assert main(["report", "tiny"]) == 0
    assert capsys.readouterr().out.strip() == "table of cached_results"
    monkeypatch.setattr("talos_core.schema.shipped_store", lambda: None)  # e.g. installed from a wheel
    assert main(["report", "tiny"]) == 0  # the viewer falls back to the user's store
    assert capsys.readouterr().out.strip() == "table of runs"
    monkeypatch.undo()  # the real report: a store without this suite is one sentence
    assert main(["report", "tiny", "--store", str(tmp_path / "empty")]) == 2
    assert "no results of suite 'tiny'" in capsys.readouterr().err


def test_report_prints_intervals_beside_means_when_the_comparison_has_them(tmp_path):
    """``talos report``: "45.00 [41.2, 48.9]" where the comparison carries a mean's 95% interval,
    the bare mean where it does not (stores written before intervals existed)."""
    store = Store(tmp_path)
    store.write_result("suite", "s", {"model": "m", "tasks": ["a", "b"], "control_task": "c", "scale": "mini",
                                      "seed": 0, "wall_time_s": 60.0, "device": "cpu", "methods": ["talos"]})
    base = {"method": "talos", "addition_abs": 0.45, "addition_norm": 0.8, "negation_target": 0.2,
            "negation_control": 0.7, "single_task_acc": 0.9, "zero_shot_acc": 0.3, "time_per_step_s": 0.5,
            "peak_memory_mb": 1000.0}
    store.write_table("comparison", "s__m", pd.DataFrame([base]))
    plain = results_markdown(store, "s")
    assert "| talos | 45.00 | 80.00 | 20.00 | 70.00 | 90.00 | 30.00 | 0.500 | 1000 |" in plain
    assert "[" not in plain and "bootstrap" not in plain
    ci = {"addition_abs_lo": 0.412, "addition_abs_hi": 0.489, "single_task_acc_lo": 0.85,
          "single_task_acc_hi": 0.94, "negation_target_lo": float("nan"), "negation_target_hi": float("nan")}
    store.write_table("comparison", "s__m", pd.DataFrame([{**base, **ci}]))
    table = results_markdown(store, "s")
    assert ("| talos | 45.00 [41.2, 48.9] | 80.00 | 20.00 | 70.00 | 90.00 [85.0, 94.0] | 30.00 | 0.500 | 1000 |"
            in table)
    assert "95% bootstrap interval over test examples" in table


def _metrics(store: Store) -> dict:
    out = {}
    for kind in ("single", "addition", "negation", "localization", "disentanglement", "sparsity_ablation"):
        for name in store.results(kind):
            payload = store.read_result(kind, name)
            payload.pop("runs", None)
            out[f"{kind}/{name}"] = json.dumps(payload, sort_keys=True)
    return out


@pytest.mark.slow
def test_a_suite_run_in_parts_on_two_machines_equals_one_run(tmp_path):
    """``--part``: the first part's store travels to a second machine without its task vectors (as a lent GPU's
    JSON snapshot does); the second part completes the same record, trains nothing the first part trained, and the
    results equal one uninterrupted run's."""
    import shutil

    methods, posthoc = ["talos", "nonlinear"], ["ties"]
    first, lines = Store(tmp_path / "first"), []
    meta = run_suite("tiny", first, scale="mini", methods=methods, posthoc=posthoc, part=["talos", "ties"],
                     log=lines.append)
    assert meta["complete"] is False and "sharing (prune)" in meta["step_times_s"]
    assert not any(k.startswith(("nonlinear", "ties")) for k in meta["step_times_s"])
    assert meta["sessions"][0]["part"] == ["talos", "ties"]
    assert meta["sessions"][0]["steps"]["ties: post-hoc addition + negation"] == {  # ties merges nonlinear's runs
        "state": "later", "error": "reads nonlinear runs (another part)"}
    assert "of other parts remain (nonlinear, ties): run them with --part" in lines[-1]
    shutil.copytree(first.root, tmp_path / "second", ignore=shutil.ignore_patterns("*.safetensors", "checkpoints"))
    second = Store(tmp_path / "second")
    trained_first = {r.id for r in first.runs()}
    lines.clear()
    meta = run_suite("tiny", second, scale="mini", methods=methods, posthoc=posthoc, part=["nonlinear", "ties"],
                     log=lines.append)
    assert meta["complete"] is True and len(meta["sessions"]) == 2 and "finished in" in lines[-1]
    assert not any(ln.endswith(" ...") and ln.split("] ")[1].startswith("talos") for ln in lines)
    assert {r.id for r in second.runs() if (r.path / "task_vector.safetensors").is_file()}.isdisjoint(trained_first)
    whole = Store(tmp_path / "whole")
    run_suite("tiny", whole, scale="mini", methods=methods, posthoc=posthoc, log=lambda s: None)
    assert _metrics(second) == _metrics(whole)
    ours, theirs = (st.read_table("comparison", "tiny__tiny-text").set_index("method").sort_index()
                    for st in (second, whole))
    acc = [c for c in theirs.columns if "acc" in c or c.startswith(("addition", "negation"))]
    assert list(ours.index) == list(theirs.index) == ["nonlinear", "talos", "ties"] and len(acc) > 6
    pd.testing.assert_frame_equal(ours[acc], theirs[acc])  # time and memory are measurements, not results


@pytest.mark.slow
def test_tiny_suite_is_complete_and_deterministic(tmp_path):
    a, b = Store(tmp_path / "a"), Store(tmp_path / "b")
    for store in (a, b):
        run_suite("tiny", store, scale="mini", methods=["talos", "nonlinear"], posthoc=["ties"], log=lambda s: None)
    for kind in ("single", "addition", "negation", "localization", "disentanglement", "masks", "mask_iou",
                 "sharing", "linearization", "preview", "efficiency", "comparison", "sparsity_ablation", "suite"):
        assert a.results(kind), f"suite wrote no {kind} result"
    ma, mb = _metrics(a), _metrics(b)
    assert ma.keys() == mb.keys()
    for key in ma:
        assert ma[key] == mb[key], f"{key} differs between two runs with the same seed"
    timing = ["time_per_step_s", "peak_memory_mb"]
    ca = a.read_table("comparison", "tiny__tiny-text").drop(columns=timing, errors="ignore")
    cb = b.read_table("comparison", "tiny__tiny-text").drop(columns=timing, errors="ignore")
    assert ca.equals(cb)
    assert not logits_cache_dir(a).exists()  # a complete suite leaves no logits cache behind
    meta = a.read_result("suite", "tiny")  # the resolved evaluation precision is part of the record
    assert meta["eval_precision"] == "fp32" and meta["sessions"][-1]["eval_precision"] == "fp32"
    # which code ran the session (this checkout's commit), and how far it got at its latest step event
    from talos_core.provenance import code_version

    session = meta["sessions"][-1]
    assert session["code"]["commit"] == code_version()["commit"] and session["code"]["talos_core"]
    assert 0 < session["elapsed_s"] <= session["wall_time_s"]
    single = a.read_result("single", "tiny__tiny-text")  # post-hoc rows were upserted without losing `data`
    assert single["data"] == {"max_val": 16, "max_test": 24, "eval_precision": "fp32"}
    assert set(single["runs"]) == {"talos", "nonlinear", "ties"}
    table = results_markdown(a, "tiny")
    assert "| talos |" in table and "| ties |" in table
    assert "peak memory (MiB)" in table and "zero-shot" in table

    # the ablation at the method's own sparsity reuses the suite's results for the very same runs;
    # they equal a re-evaluation
    spec, sc = get_suite("tiny"), get_suite("tiny").scales["mini"]
    overrides = {"steps": sc.steps, "max_train": sc.max_train, "max_val": sc.max_val, "max_test": sc.max_test,
                 "calib_samples": sc.calib_samples, "batch_size": sc.batch_size, "seed": 0, "device": "auto",
                 "lr": sc.lr_for("talos")}
    args = (a, "sparsity-ablation", spec.model, list(spec.tasks), "talos")
    kw = dict(suite="tiny", settings=AblationSettings(sparsities=(0.9,), control_task=spec.control_task),
              overrides=overrides)
    reused = evaluate(*args, **kw).table
    import talos_core.evaluation.ablation as ablation_mod

    original = ablation_mod._stored_summaries
    ablation_mod._stored_summaries = lambda *a, **k: None
    try:
        recomputed = evaluate(*args, **kw).table
    finally:
        ablation_mod._stored_summaries = original
    add = a.read_result("addition", "tiny__tiny-text__talos")
    assert original(a, "tiny", spec.model, "talos", add["runs"], add["alpha_grid"], spec.control_task) is not None
    pd.testing.assert_frame_equal(reused, recomputed)

    # a step run again (as after a cut) reads the logits it computed from the store's logits cache
    from talos_core.inference import tally
    from talos_core.suites.steps import suite_steps

    neg = next(st for st in suite_steps(spec, "mini", ["talos", "nonlinear"], ["ties"], seed=0, device="auto")
               if st.label == "talos: negation")
    work = []
    for _ in range(2):
        before = tally.snapshot()
        neg.run(a, spec.model, "tiny")
        work.append(tally.since(before))
    assert work[0]["forward"] > 0 and work[1]["forward"] == 0
    assert work[1]["cached"] == work[0]["forward"] + work[0]["cached"]


@pytest.mark.slow
def test_tiny_suite_reproduces_the_shipped_results(tmp_path):
    """Re-running the shipped ``tiny`` suite with the same seed reproduces cached_results' metrics exactly
    (the shipped store was written by an earlier version of the evaluation code)."""
    shipped = Store(Path(__file__).resolve().parents[1] / "cached_results")
    fresh = Store(tmp_path / "fresh")
    meta = shipped.read_result("suite", "tiny")
    run_suite("tiny", fresh, scale=meta["scale"], seed=meta["seed"], methods=meta["methods"],
              posthoc=meta["posthoc"], log=lambda s: None)
    ours = _metrics(fresh)
    theirs = {k: v for k, v in _metrics(shipped).items() if k.split("/", 1)[1].startswith("tiny__")}
    assert ours.keys() == theirs.keys()
    for key in ours:
        assert ours[key] == theirs[key], f"{key} differs from the shipped result"


class _Stop(Exception):
    pass


@pytest.mark.slow
def test_interrupted_suite_resumes_where_it_stopped(tmp_path):
    """A run stopped after a few steps writes ``complete: false``; ``resume=True`` skips finished steps
    and ends with the same metrics as an uninterrupted run; other settings are not resumed."""
    started: list[str] = []

    def stop_at_negation(line: str) -> None:
        if line.endswith(" ..."):
            started.append(line)
            if "talos: negation" in line:
                raise _Stop

    store = Store(tmp_path / "s")
    with pytest.raises(_Stop):
        run_suite("tiny", store, scale="mini", methods=["talos", "nonlinear"], posthoc=["ties"],
                  log=stop_at_negation)
    meta = store.read_result("suite", "tiny")
    assert meta["complete"] is False
    assert set(meta["step_times_s"]) == {"talos: fine-tune + single", "talos: efficiency", "talos: masks",
                                         "talos: addition"}
    lines: list[str] = []
    run_suite("tiny", store, scale="mini", methods=["talos", "nonlinear"], posthoc=["ties"], resume=True,
              log=lines.append)
    skipped = [ln for ln in lines if ln.endswith("skipped")]
    assert len(skipped) == 4 and not any("talos: addition ..." in ln for ln in lines)
    meta = store.read_result("suite", "tiny")
    assert meta["complete"] is True and len(meta["sessions"]) == 2
    assert meta["wall_time_s"] == pytest.approx(sum(meta["step_times_s"].values()))

    fresh = Store(tmp_path / "fresh")
    run_suite("tiny", fresh, scale="mini", methods=["talos", "nonlinear"], posthoc=["ties"], log=lambda s: None)
    assert _metrics(store) == _metrics(fresh)

    # a finished suite is not "resumed": every step runs again
    lines.clear()
    run_suite("tiny", store, scale="mini", methods=["talos", "nonlinear"], posthoc=["ties"], resume=True,
              log=lines.append)
    assert not any(ln.endswith("skipped") for ln in lines)


@pytest.mark.slow
@pytest.mark.parametrize("scale, methods, posthoc", [("mini", ["talos", "nonlinear"], ["ties"]),
                                                     ("paper", ["talos"], [])])  # paper: curves and a selection
def test_a_cut_off_suite_resumes_from_its_json_snapshot_training_again_only_the_runs_it_still_reads(
        tmp_path, scale, methods, posthoc):
    """A long run survives losing its machine through a JSON snapshot of its store (``talos export``: results and
    run manifests, no task vectors), committed and restored: ``--resume`` skips the finished steps and trains again
    only the runs a remaining step reads (the finished steps' other runs stay manifests). Training is deterministic
    here, so each new task vector is the one its manifest described, and the results equal one uninterrupted run's."""
    from talos_core.store import export_store
    from talos_core.suites.plan import plan_suite

    def stop_at_negation(line: str) -> None:
        if line.endswith(" ...") and "talos: negation" in line:
            raise _Stop

    kw = dict(scale=scale, methods=methods, posthoc=posthoc)
    store = Store(tmp_path / "lost")
    with pytest.raises(_Stop):
        run_suite("tiny", store, log=stop_at_negation, **kw)
    export_store(store.root, tmp_path / "snapshot")
    snapshot = Store(tmp_path / "snapshot")
    assert not list(snapshot.root.rglob("*.safetensors")) and not (snapshot.root / "checkpoints").exists()
    before = {r.id: r.manifest.artifacts for r in snapshot.runs()}
    to_train = {r.key for r in plan_suite("tiny", scale, snapshot, methods=methods, posthoc=posthoc).to_train()}
    lines: list[str] = []
    meta = run_suite("tiny", snapshot, resume=True, log=lines.append, **kw)
    done = store.read_result("suite", "tiny")["step_times_s"]
    assert meta["complete"] is True and len([ln for ln in lines if ln.endswith("skipped")]) == len(done) >= 4
    again = {r.id: r.manifest.info["retrained"] for r in snapshot.runs() if "retrained" in r.manifest.info}
    assert again and set(again) <= set(before)
    assert all(v["same_artifacts"] and v["previous_artifacts"] == before[k] for k, v in again.items())
    assert all(r.has_weights == (r.id in again or r.id not in before) for r in snapshot.runs())
    assert to_train == {r.id for r in snapshot.runs() if r.has_weights}  # --plan counted what resuming trained
    fresh = Store(tmp_path / "fresh")
    run_suite("tiny", fresh, log=lambda s: None, **kw)
    assert _metrics(snapshot) == _metrics(fresh)


@pytest.mark.slow
def test_a_suite_cut_off_mid_run_continues_the_run_from_its_checkpoint(tmp_path, monkeypatch):
    """``checkpoint_every`` (``talos suite --checkpoint-every``): a suite stopped inside a fine-tuning run resumes
    that run from its last checkpoint, and ends with the same run ids and metrics as a run without checkpoints."""
    import talos_core.training as training

    save, resume = training._save_checkpoint, training._maybe_resume
    resumed_at: list[int] = []

    def save_then_stop(*args, **kwargs):
        save(*args, **kwargs)
        raise _Stop  # the process dies right after its first checkpoint

    def recording_resume(*args, **kwargs):
        out = resume(*args, **kwargs)
        resumed_at.append(out[0])
        return out

    kw = dict(scale="mini", methods=["talos"], posthoc=[], log=lambda s: None)
    store = Store(tmp_path / "s")
    monkeypatch.setattr(training, "_save_checkpoint", save_then_stop)
    with pytest.raises(_Stop):
        run_suite("tiny", store, checkpoint_every=2, **kw)
    assert list((store.root / "checkpoints").rglob("checkpoint.json"))
    monkeypatch.setattr(training, "_save_checkpoint", save)
    monkeypatch.setattr(training, "_maybe_resume", recording_resume)
    run_suite("tiny", store, checkpoint_every=2, resume=True, **kw)
    assert resumed_at[0] == 2  # the cut-off run went on from step 2, not from 0
    assert not list((store.root / "checkpoints").rglob("checkpoint.json"))  # finished runs leave none behind

    fresh = Store(tmp_path / "fresh")
    run_suite("tiny", fresh, **kw)
    assert _metrics(store) == _metrics(fresh)
    runs = [s.read_result("single", "tiny__tiny-text")["runs"] for s in (store, fresh)]
    assert runs[0] == runs[1]
    with pytest.raises(TalosError, match="checkpoint_every must be a whole number"):
        run_suite("tiny", tmp_path / "bad", checkpoint_every=-1, **kw)
    assert not (tmp_path / "bad").exists()
