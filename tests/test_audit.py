"""The audit (talos_core.evaluation.audit): each check fires on a small store built to trip it and stays silent on
one built not to (known answers, not snapshots of the shipped store); ``talos audit``; claims read flagged evidence
as inconclusive; the report's flags column."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from talos_core.cli import main
from talos_core.evaluation import audit
from talos_core.evaluation.audit import CHECKS, audit_suite, footnotes, infer_count, still_rising
from talos_core.evaluation.claims import TRAINING, check_claims, evidence_flags
from talos_core.suites.report import choices_markdown, report_markdown, results_markdown

REPO = Path(__file__).resolve().parents[1]
ROWS = ("talos", "nonlinear", "lota")
TASKS = ("a", "b")
GRID = [0.0, 0.25, 0.5, 0.75, 1.0]
CONTROL = {0.0: 0.84, 0.25: 0.82, 0.5: 0.80, 0.75: 0.70, 1.0: 0.66}


def _run_id(row: str, task: str) -> str:
    return f"m__{task}__{row}__0000000000"


def _spec() -> dict:
    """A suite ``s`` of model ``m`` (tasks a, b; control c; 100 validation examples) that no check flags: α inside
    its grid, the control met with room on validation and on test, converged runs, separated intervals."""
    spec: dict = {"suite": {"model": "m", "tasks": list(TASKS), "control_task": "c", "methods": list(ROWS),
                            "posthoc": [], "scale": "mini", "scale_settings": {"max_val": 100}, "complete": True,
                            "seed": 0, "device": "cpu", "wall_time_s": 1.0},
                  "runs": {}, "addition": {}, "negation": {}}
    for i, row in enumerate(ROWS):
        for task in TASKS:
            spec["runs"][_run_id(row, task)] = {
                "run_id": _run_id(row, task), "model": "m", "task": task, "method": row.split("-")[0],
                "config": {"train": {"steps": 100}}, "data_sizes": {"val": 100},
                "metrics": {"vector_norm": 1.0 + 0.1 * i},
                "timings": {"fwd_bwd_s_mean": 0.20 + 0.01 * i, "fwd_bwd_s_std": 0.01},
                "curve": [{"step": s, "val_acc": a} for s, a in ((25, .5), (50, .8), (75, .8), (100, .8))]}
        runs = {t: _run_id(row, t) for t in TASKS}
        spec["addition"][row] = {
            "columns": ["alpha", "split", "task", "accuracy", "normalized_accuracy"],
            "records": [{"alpha": a, "split": sp, "task": t, "accuracy": 0.5, "normalized_accuracy": 0.6 + a * 0.3}
                        for a in GRID for sp in ("val", "test") for t in TASKS],
            "selected_alpha": 0.5, "alpha_grid": GRID, "summary": {"abs_acc": 0.7, "norm_acc": 0.75 + 0.05 * i},
            "tasks": list(TASKS), "runs": runs}
        recs = []
        for t in TASKS:
            for a in GRID:
                # the control constraint (0.95 × 0.8 = 0.76) is met up to α = 0.5 by 4 examples of 100, and
                # α = 0.75 misses it by 6
                control = CONTROL[a]
                recs.append({"target": t, "alpha": a, "split": "val", "target_acc": 0.8 - 0.6 * a,
                             "control_acc": control})
                recs.append({"target": t, "alpha": a, "split": "test", "target_acc": 0.8 - 0.6 * a,
                             "control_acc": control})
        spec["negation"][row] = {
            "columns": ["target", "alpha", "split", "target_acc", "control_acc"], "records": recs,
            "control_task": "c", "selected": {t: 0.5 for t in TASKS},
            "control_zero_shot_acc": {"val": 0.8, "test": 0.8}, "threshold": 0.95, "alpha_grid": GRID,
            "summary": {"target_acc": 0.5, "control_acc": 0.76}, "runs": runs}
    spec["single"] = {"columns": ["method", "task", "zero_shot_acc", "finetuned_acc", "split"],
                      "records": [{"method": r, "task": t, "zero_shot_acc": 0.5, "finetuned_acc": 0.9, "split": "test"}
                                  for r in ROWS for t in TASKS],
                      "runs": {r: {t: _run_id(r, t) for t in TASKS} for r in ROWS}}
    spec["comparison"] = {
        "columns": ["method", "addition_abs", "addition_abs_lo", "addition_abs_hi", "negation_target",
                    "negation_target_lo", "negation_target_hi", "negation_control", "single_task_acc"],
        "records": [{"method": r, "addition_abs": 0.8 - 0.1 * i, "addition_abs_lo": 0.78 - 0.1 * i,
                     "addition_abs_hi": 0.82 - 0.1 * i, "negation_target": 0.2 + 0.1 * i,
                     "negation_target_lo": 0.18 + 0.1 * i, "negation_target_hi": 0.22 + 0.1 * i,
                     "negation_control": 0.8, "single_task_acc": 0.9, "time_per_step_s": 0.2 + 0.01 * i}
                    for i, r in enumerate(ROWS)]}
    spec["lr_check"] = {"talos": {"columns": ["task", "lr", "val_acc", "run_id", "steps"], "records": [],
                                  "suite_lr": 1e-4, "best_lr": 1e-4, "agrees": True, "budget": 100,
                                  "means": [{"lr": 1e-4, "val_acc": 0.8}, {"lr": 1e-3, "val_acc": 0.7}]}}
    spec["selection"] = {"talos": {
        "columns": ["task", "value", "score", "chosen", "run_id"], "param": "sparsity", "values": [0.5, 0.9, 0.99],
        "choices": {t: {"sparsity": 0.9} for t in TASKS},
        "records": [{"task": t, "value": v, "score": {0.5: 0.5, 0.9: 0.3, 0.99: 0.6}[v], "chosen": v == 0.9,
                     "run_id": _run_id("talos", t)} for t in TASKS for v in (0.5, 0.9, 0.99)]}}
    spec["masks"] = {"talos": {"columns": ["task", "param", "block", "layer_type", "numel", "trainable", "density"],
                               "records": [], "diagnostics": [{"task": t, "moved": 1.0} for t in TASKS]}}
    return spec


def _write(root: Path, spec: dict) -> Path:
    def put(kind: str, name: str, payload: dict) -> None:
        path = root / "results" / kind / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload))

    (root / "store.json").parent.mkdir(parents=True, exist_ok=True)
    (root / "store.json").write_text(json.dumps({"format": "talos-store/1"}))
    put("suite", "s", spec["suite"])
    for rid, manifest in spec["runs"].items():
        (root / "runs" / rid).mkdir(parents=True, exist_ok=True)
        (root / "runs" / rid / "manifest.json").write_text(json.dumps(manifest))
    for kind in ("addition", "negation", "lr_check", "selection", "masks", "learning_curve"):
        for row, payload in spec.get(kind, {}).items():
            put(kind, f"s__m__{row}", payload)
    put("single", "s__m", spec["single"])
    put("comparison", "s__m", spec["comparison"])
    return root


def _checks(root: Path) -> set[tuple[str, str | None]]:
    return {(f.check, f.row) for f in audit_suite(root, "s")}


def test_the_clean_store_raises_no_flag(tmp_path):
    assert audit_suite(_write(tmp_path, _spec()), "s") == []


def _neg_records(spec: dict, row: str) -> list[dict]:
    return spec["negation"][row]["records"]


def _set(records: list[dict], match: dict, **values) -> None:
    hit = [r for r in records if all(r.get(k) == v for k, v in match.items())]
    assert hit, match
    for r in hit:
        r.update(values)


def _alpha_last(spec):
    spec["addition"]["nonlinear"]["selected_alpha"] = 1.0


def _alpha_zero(spec):
    spec["addition"]["nonlinear"]["selected_alpha"] = 0.0


def _alpha_first_nonzero(spec):
    spec["negation"]["lota"]["selected"]["a"] = 0.25


def _control_one_example(spec):
    # α = 0.5 keeps 76 of 100 where 76 are needed; α = 0.25 is 15 test points worse on the target
    _set(_neg_records(spec, "talos"), {"target": "a", "alpha": 0.5, "split": "val"}, control_acc=0.76)


def _next_alpha_one_short(spec):
    _set(_neg_records(spec, "talos"), {"target": "a", "alpha": 0.75, "split": "val"}, control_acc=0.75)


def _control_broken_on_test(spec):
    _set(_neg_records(spec, "lota"), {"target": "b", "alpha": 0.5, "split": "test"}, control_acc=0.70)


def _norm_above_100(spec):
    spec["addition"]["lota"]["summary"]["norm_acc"] = 1.12


def _norm_unedited(spec):
    for r in spec["addition"]["talos"]["records"]:
        if r["alpha"] == 0.0:
            r["normalized_accuracy"] = 0.95


def _displacement(spec):
    for t in TASKS:
        spec["runs"][_run_id("talos", t)]["metrics"]["vector_norm"] = 30.0


def _not_converged(spec):
    spec["runs"][_run_id("nonlinear", "a")]["curve"] = [{"step": s, "val_acc": a} for s, a in
                                                        ((25, .5), (50, .6), (75, .7), (100, .8))]


def _no_curve(spec):
    spec["runs"][_run_id("nonlinear", "b")]["curve"] = []


def _other_schedule(spec):
    spec["runs"][_run_id("nonlinear", "b")]["curve"] = []
    spec["learning_curve"] = {"nonlinear": {"columns": ["method", "task", "step", "val_acc"], "records": [],
                                            "steps": 400, "budget": 100}}


def _lr_disagrees(spec):
    spec["lr_check"]["talos"].update(agrees=False, best_lr=1e-3)


def _lr_check_runs(spec, means: tuple[float, float], val_n: dict[str, int]) -> None:
    """The talos lr check compares 1e-4 (chosen) with 1e-3 on tasks a and b, each run's validation size as given."""
    check = spec["lr_check"]["talos"]
    check["means"] = [{"lr": 1e-4, "val_acc": means[0]}, {"lr": 1e-3, "val_acc": means[1]}]
    for task, n in val_n.items():
        for lr in (1e-4, 1e-3):
            rid = f"m__{task}__talos__lr{lr:g}"
            spec["runs"][rid] = {"run_id": rid, "model": "m", "task": task, "method": "talos",
                                 "data_sizes": {"val": n}}
            check["records"].append({"task": task, "lr": lr, "val_acc": 0.8, "run_id": rid, "steps": 100})


def _lr_margin(spec):
    # mean over a (100 examples) and b (50): one example of b moves the mean by 1 / (2 × 50) = 0.01, so a lead of
    # 0.02 is two examples of b
    _lr_check_runs(spec, (0.80, 0.78), {"a": 100, "b": 50})


def test_lr_margin_counts_the_smallest_check_tasks_examples(tmp_path):
    """Three examples of the smallest task's lead is enough (silent); so is a check whose runs' validation sizes the
    store lacks (nothing to count); a rate the check rejects is lr-disagrees's, not lr-margin's."""
    spec = copy.deepcopy(_spec())
    _lr_check_runs(spec, (0.80, 0.77), {"a": 100, "b": 50})
    assert _checks(_write(tmp_path / "three", spec)) == set()
    spec = copy.deepcopy(_spec())
    _lr_margin(spec)
    (flag,) = audit_suite(_write(tmp_path / "two", spec), "s")
    assert flag.message == ("talos trained at lr 0.0001, which the suite's check preferred over 0.001 by 2 "
                            "validation examples of b (50 examples; 0.800 vs 0.780 mean validation accuracy)")
    assert flag.numbers["lead_examples"] == 2 and flag.metrics == (audit.ALL,)
    for rec in spec["lr_check"]["talos"]["records"]:
        spec["runs"][rec["run_id"]].pop("data_sizes")
    assert _checks(_write(tmp_path / "unsized", spec)) == set()
    spec = copy.deepcopy(_spec())
    _lr_margin(spec)
    spec["lr_check"]["talos"].update(agrees=False, best_lr=1e-3)
    assert _checks(_write(tmp_path / "rejected", spec)) == {("lr-disagrees", "talos")}


def _selection_margin(spec):
    for r in spec["selection"]["talos"]["records"]:
        if r["task"] == "a" and r["value"] == 0.5:
            r["score"] = 0.31  # one example of 100 behind the chosen 0.30


def _selection_edge(spec):
    spec["selection"]["talos"]["choices"]["b"] = {"sparsity": 0.99}


def _little_gain(spec):
    _set(spec["single"]["records"], {"method": "lota", "task": "a"}, finetuned_acc=0.52)


def _best_not_separated(spec):
    _set(spec["comparison"]["records"], {"method": "nonlinear"}, addition_abs=0.79, addition_abs_lo=0.77,
         addition_abs_hi=0.81)


def _result_unreadable(spec):
    # a number outside its own interval: the store's reader refuses the file, the audit says it could not check it
    _set(spec["comparison"]["records"], {"method": "lota"}, negation_target=0.99)


def _mask_unmoved(spec):
    spec["masks"]["talos"]["diagnostics"][0]["moved"] = 0.9


def _timing_spread(spec):
    """One of TaLoS's runs had a few very slow steps (a pause): its standard deviation exceeds its mean."""
    spec["runs"][_run_id("talos", "a")]["timings"] = {"fwd_bwd_s_mean": 0.3, "fwd_bwd_s_std": 0.9}


def _timing_slow(spec):
    """Non-linear FT's run on b took 2× an identical run's time per step (same model, task, method): a shared CPU."""
    spec["runs"][_run_id("nonlinear", "b")]["timings"] = {"fwd_bwd_s_mean": 0.42, "fwd_bwd_s_std": 0.05}
    twin = copy.deepcopy(spec["runs"][_run_id("nonlinear", "b")])
    twin.update(run_id="m__b__nonlinear__1111111111", timings={"fwd_bwd_s_mean": 0.21, "fwd_bwd_s_std": 0.01})
    spec["runs"][twin["run_id"]] = twin


def _timing_other_machine(spec):
    """TaLoS was timed on a GPU, non-linear FT and LoTA on a CPU (manifests from before ``hardware`` was recorded
    say only ``cpu``; they still compare with a CPU that names its model)."""
    for task in TASKS:
        spec["runs"][_run_id("talos", task)].update(
            device="cuda", timings={"fwd_bwd_s_mean": 0.02, "fwd_bwd_s_std": 0.001, "hardware": "NVIDIA H200"})
        spec["runs"][_run_id("nonlinear", task)].update(device="cpu")
        spec["runs"][_run_id("lota", task)]["device"] = "cpu"
        spec["runs"][_run_id("lota", task)]["timings"].update(hardware="AMD EPYC", torch_threads=1)


def _timing_two_machines(spec):
    """LoTA's runs were timed on two CPU models: its time per step mixes them."""
    spec["runs"][_run_id("lota", "a")]["timings"].update(hardware="AMD EPYC", torch_threads=1)
    spec["runs"][_run_id("lota", "b")]["timings"].update(hardware="Intel(R) Xeon(R) Processor", torch_threads=1)


def _posthoc_edge(spec):
    """A post-hoc row (LiNeS) whose search chose β at the smallest of the three values it tried."""
    spec["suite"]["posthoc"] = ["lines"]
    add = copy.deepcopy(spec["addition"]["nonlinear"])
    add.update(hyperparameters={"beta": 0.1, "nonblock": "first"}, base_method="nonlinear",
               search=[{"hyperparameters": {"beta": b, "nonblock": "first"}, "val_norm_acc": 0.9 - b / 10,
                        "alpha": 1.0} for b in (0.1, 0.5, 1.0)])
    spec["addition"]["lines"] = add
    spec["negation"]["lines"] = copy.deepcopy(spec["negation"]["nonlinear"])
    spec["comparison"]["records"].append({**spec["comparison"]["records"][1], "method": "lines",
                                          "addition_abs": 0.5, "addition_abs_lo": 0.48, "addition_abs_hi": 0.52,
                                          "negation_target": 0.6, "negation_target_lo": 0.58,
                                          "negation_target_hi": 0.62, "time_per_step_s": None})


def _incomplete(spec):
    spec["suite"]["complete"] = False


def _code_mixed(spec):
    spec["suite"]["sessions"] = [
        {"code": {"talos_core": "0.1.0", "commit": "aaaaaaa1" * 5, "dirty": False}, "steps_run": ["a", "b"]},
        {"steps_run": ["c"]},  # a session from before the record kept its code: named, not judged
        {"code": {"talos_core": "0.1.0", "commit": "bbbbbbb2" * 5, "dirty": False}, "steps_run": ["d", "comparison"]}]


CASES = [
    (_alpha_last, {("alpha-at-edge", "nonlinear")}),
    (_alpha_zero, {("alpha-at-edge", "nonlinear")}),
    (_alpha_first_nonzero, {("alpha-unresolved", "lota")}),
    (_control_one_example, {("control-margin", "talos")}),
    (_next_alpha_one_short, {("control-margin", "talos")}),
    (_control_broken_on_test, {("control-broken-on-test", "lota")}),
    (_norm_above_100, {("norm-above-100", "lota")}),
    (_norm_unedited, {("norm-unedited", "talos")}),
    (_displacement, {("displacement-outlier", "talos")}),
    (_not_converged, {("not-converged", "nonlinear")}),
    (_no_curve, {("convergence-unknown", "nonlinear")}),
    (_other_schedule, {("budget-other-schedule", "nonlinear")}),
    (_lr_disagrees, {("lr-disagrees", "talos")}),
    (_lr_margin, {("lr-margin", "talos")}),
    (_selection_margin, {("selection-margin", "talos")}),
    (_selection_edge, {("selection-at-edge", "talos")}),
    (_little_gain, {("little-gain", "lota")}),
    (_best_not_separated, {("best-not-separated", "talos")}),
    (_result_unreadable, {("result-unreadable", None)}),
    (_mask_unmoved, {("mask-unmoved", "talos")}),
    (_timing_spread, {("timing-disturbed", "talos")}),
    (_timing_slow, {("timing-disturbed", "nonlinear")}),
    (_timing_other_machine, {("timing-other-machine", "talos")}),
    (_timing_two_machines, {("timing-other-machine", "lota")}),
    (_posthoc_edge, {("selection-at-edge", "lines")}),
    (_incomplete, {("suite-incomplete", None)}),
    (_code_mixed, {("code-mixed", None)}),
]


def test_one_code_version_is_silent_and_a_dirty_checkout_is_not(tmp_path):
    """Sessions that all ran one commit raise nothing (the comparison every session gathers again does not count);
    uncommitted changes do, with the steps they ran; the flag decides no claim."""
    spec = copy.deepcopy(_spec())
    one = {"talos_core": "0.1.0", "commit": "c" * 40, "dirty": False}
    spec["suite"]["sessions"] = [{"code": one, "steps_run": ["a"]}, {"code": one, "steps_run": ["b"]},
                                 {"code": {**one, "commit": "d" * 40}, "steps_run": ["comparison"]}]
    assert _checks(_write(tmp_path / "one", spec)) == set()
    spec["suite"]["sessions"][1]["code"] = {**one, "dirty": True}
    (flag,) = audit_suite(_write(tmp_path / "dirty", spec), "s")
    assert flag.check == "code-mixed" and flag.metrics == (audit.PROVENANCE,)
    assert flag.message == "steps ran under 2 code versions: cccccccccccc: 1 step; cccccccccccc (uncommitted " \
                           "changes): 1 step"
    assert evidence_flags([flag], (("talos", "addition_abs"), ("talos", TRAINING))) == ()


def test_a_run_stopped_by_its_patience_is_judged_by_its_stopping_rule_not_by_its_last_quarter(tmp_path):
    """The same curve — best at step 90 (inside the last quarter of its 110 steps), then two evaluations without
    gain — is still rising when the run had no early stopping, and flattened when it stopped after its patience of 2
    (its verdict must not depend on where the quarter boundary falls). The message names the steps it ran."""
    curve = [{"step": s, "val_acc": a} for s, a in ((10, .5), (30, .55), (50, .6), (70, .62), (90, .7), (100, .68),
                                                    (110, .69))]
    spec = copy.deepcopy(_spec())
    spec["runs"][_run_id("nonlinear", "a")]["curve"] = curve
    flags = audit_suite(_write(tmp_path / "plain", spec), "s")
    rising = [f for f in flags if f.check == "not-converged"]
    assert [f.row for f in rising] == ["nonlinear"]
    assert "last quarter of 110 steps" in rising[0].message
    spec["runs"][_run_id("nonlinear", "a")]["config"]["train"]["early_stopping_patience"] = 2
    assert ("not-converged", "nonlinear") not in _checks(_write(tmp_path / "patience", spec))
    spec["runs"][_run_id("nonlinear", "a")]["config"]["train"]["early_stopping_patience"] = 3  # 90 is one of its 3
    assert ("not-converged", "nonlinear") in _checks(_write(tmp_path / "patience3", spec))


def test_a_gallery_without_its_arrays_is_flagged_and_concerns_no_number(tmp_path):
    """A preview or examples result whose arrays file is missing (a part run elsewhere, merged with its JSON alone)
    is `result-unreadable` on its row, concerning the dashboard's panels only: no claim and no table number."""
    root = _write(tmp_path, _spec())
    shipped = REPO / "cached_results" / "results"
    for kind in ("preview", "examples"):
        meta = json.loads((shipped / kind / "text__minilm-l6__talos.json").read_text())
        meta.update(suite="s", model="m")
        (root / "results" / kind).mkdir(parents=True, exist_ok=True)
        (root / "results" / kind / "s__m__talos.json").write_text(json.dumps(meta))
        shutil.copy(shipped / kind / "text__minilm-l6__talos.safetensors", root / "results" / kind / meta["arrays"])
    assert audit_suite(root, "s") == []
    (root / "results" / "examples" / meta["arrays"]).unlink()
    (flag,) = audit_suite(root, "s")
    assert (flag.check, flag.row, flag.metrics, flag.source) == ("result-unreadable", "talos", (audit.GALLERY,),
                                                                 "examples/s__m__talos")
    assert "arrays file" in flag.message and "missing" in flag.message
    assert evidence_flags([flag], (("talos", "addition_abs"), ("talos", TRAINING))) == ()


def test_a_posthoc_search_of_two_values_or_inside_its_range_is_not_an_edge(tmp_path):
    spec = copy.deepcopy(_spec())
    _posthoc_edge(spec)
    spec["addition"]["lines"]["hyperparameters"]["beta"] = 0.5  # inside 0.1…1
    assert _checks(_write(tmp_path, spec)) == set()
    spec["addition"]["lines"]["search"] = spec["addition"]["lines"]["search"][:2]  # 0.1 and 0.5: both are ends
    assert _checks(_write(tmp_path, spec)) == set()
    spec["addition"]["lines"].pop("search")  # written before searches were recorded: nothing to read
    assert _checks(_write(tmp_path, spec)) == set()


def test_a_gpu_run_is_no_yardstick_for_a_cpu_runs_step_time(tmp_path):
    """An identical run timed on a GPU is many times faster than the CPU's: ``timing-disturbed`` compares runs on
    the same kind of machine only (the GPU run's row is told apart by ``timing-other-machine`` instead)."""
    spec = copy.deepcopy(_spec())
    twin = copy.deepcopy(spec["runs"][_run_id("nonlinear", "b")])
    twin.update(run_id="m__b__nonlinear__2222222222", device="cuda",
                timings={"fwd_bwd_s_mean": 0.01, "fwd_bwd_s_std": 0.001, "hardware": "NVIDIA H200"})
    spec["runs"][twin["run_id"]] = twin
    assert _checks(_write(tmp_path, spec)) == set()


def test_timing_other_machine_names_both_machines(tmp_path):
    spec = copy.deepcopy(_spec())
    _timing_other_machine(spec)
    (flag,) = [f for f in audit_suite(_write(tmp_path, spec), "s") if f.check == "timing-other-machine"]
    assert flag.metrics == ("time_per_step_s", "peak_memory_mb")  # a GPU's memory is not a CPU process's either
    assert flag.message == "timed on cuda · NVIDIA H200, nonlinear's runs on cpu"
    _timing_two_machines(spec)  # two CPU models: the time differs, the memory is the same kind of quantity
    lota = [f for f in audit_suite(_write(tmp_path, spec), "s") if f.row == "lota"]
    assert [(f.check, f.metrics) for f in lota] == [("timing-other-machine", ("time_per_step_s",))]
    assert flag.numbers == {"machines": ["cuda · NVIDIA H200"], "reference": "nonlinear",
                            "reference_machines": ["cpu"]}


@pytest.mark.parametrize("mutate, expected", CASES, ids=[c[0].__name__.strip("_") for c in CASES])
def test_each_check_fires_on_the_store_built_to_trip_it(tmp_path, mutate, expected):
    spec = copy.deepcopy(_spec())
    mutate(spec)
    assert _checks(_write(tmp_path, spec)) == expected


def test_a_methods_own_variants_are_not_the_yardstick_of_its_displacement(tmp_path):
    """Two TaLoS variants as large as TaLoS itself would lift the median of "the others" and hide the outlier: the
    check compares a row with the other methods' rows only."""
    spec = copy.deepcopy(_spec())
    _displacement(spec)
    for variant in ("talos-k0.9", "talos-k0.9-lr0.0001"):
        spec["negation"][variant] = copy.deepcopy(spec["negation"]["talos"])
        spec["comparison"]["records"].append({**spec["comparison"]["records"][0], "method": variant})
    flags = [f for f in audit_suite(_write(tmp_path, spec), "s") if f.check == "displacement-outlier"]
    assert {f.row for f in flags} == {"talos", "talos-k0.9", "talos-k0.9-lr0.0001"}
    assert all(f.numbers["median_others"] < 1.5 for f in flags)  # non-linear FT's and LoTA's edits, not TaLoS's


def test_every_check_has_a_case_and_a_readable_explanation():
    tripped = {check for _, expected in CASES for check, _ in expected}
    assert tripped == {c.id for c in CHECKS}
    for c in CHECKS:
        assert c.explanation.endswith(".") and len(c.explanation) < 320 and "_" not in c.explanation


def test_flag_numbers_and_messages_carry_the_data_behind_them(tmp_path):
    spec = _spec()
    _control_one_example(spec)
    _control_broken_on_test(spec)
    flags = {f.check: f for f in audit_suite(_write(tmp_path, spec), "s")}
    margin = flags["control-margin"]
    assert margin.numbers["kept"] == margin.numbers["needed"] == 76 and margin.numbers["n"] == 100
    assert margin.numbers["other_alpha"] == 0.25 and margin.numbers["delta_points"] == pytest.approx(15.0)
    assert "kept 76 of 100 control examples where 76 were needed" in margin.message
    broken = flags["control-broken-on-test"]
    assert broken.numbers["ratio"] == pytest.approx(0.70 / 0.8)
    assert "test control 70.0 % is 87.5 % of zero-shot 80.0 %" in broken.message
    # validation beside it: there the same α kept 80.0 % of zero-shot 80.0 % (the edit, not the yardstick, moved)
    assert broken.message.endswith("; on validation 80.0 % of zero-shot 80.0 % (100.0 %)")
    assert broken.numbers["control_val"] == pytest.approx(0.80) and broken.numbers["zero_shot_val"] == 0.8


def test_helpers():
    assert infer_count([0.67, 0.705], 200) == 200
    assert infer_count([0.7412587413, 0.5034965035], 200) == 143
    assert infer_count([], 10) is None
    assert still_rising([(1, .1), (2, .1)]) is None
    assert audit.number_ranges([3, 1, 2, 9]) == "1–3, 9"


def test_footnotes_number_row_by_row(tmp_path):
    spec = _spec()
    _lr_disagrees(spec)
    _norm_above_100(spec)
    _incomplete(spec)
    flags = audit_suite(_write(tmp_path, spec), "s")
    by_row, lines = footnotes(flags, ROWS)
    assert by_row == {"": [1], "talos": [2], "lota": [3]}
    assert lines[0].startswith("[1] suite — suite not finished") and lines[2].startswith("[3] lota — normalized")


def test_report_carries_a_flags_column_and_footnotes(tmp_path):
    spec = _spec()
    _norm_above_100(spec)
    text = results_markdown(_write(tmp_path, spec), "s")
    assert "| audit flags |" in text
    lota = next(line for line in text.splitlines() if line.startswith("| lota |"))
    talos = next(line for line in text.splitlines() if line.startswith("| talos |"))
    assert lota.endswith("| 1 |") and talos.endswith("| – |")
    assert "- [1] lota — normalized accuracy above 100 %: normalized accuracy 112.0 % (above 100 %)" in text
    clean = results_markdown(_write(tmp_path / "clean", _spec()), "s")
    assert "Audit: no flags." in clean


def test_report_says_what_each_row_chose_from_its_results_and_runs(tmp_path):
    """The choices table reads every number from the store: the rate its runs trained at, the selection's choice per
    task (a value the overrides omit as a default included), the addition α with its grid, each negation's α, where
    the runs stopped; a post-hoc row its merge's point and whose runs it merged."""
    spec = _spec()
    spec["suite"]["posthoc"] = ["ties"]
    spec["selection"]["talos"]["choices"] = {"a": {"sparsity": 0.9}, "b": {"sparsity": 0.99}}
    spec["addition"]["talos"]["task_overrides"] = {"a": {}, "b": {"sparsity": 0.99}}  # a's 0.9 is the default
    spec["negation"]["talos"]["selected"] = {"a": 0.25, "b": 2.0}
    for task, (best, run) in zip(TASKS, ((300, 550), (900, 1150))):
        manifest = spec["runs"][_run_id("talos", task)]
        manifest["config"]["train"]["lr"] = 1e-3
        manifest["timings"].update(best_step=best, steps_run=run)
    spec["addition"]["lota"]["task_overrides"] = {t: {"options": {"rank": 16}} for t in TASKS}
    spec["addition"]["ties"] = {**copy.deepcopy(spec["addition"]["nonlinear"]), "base_method": "nonlinear",
                                "hyperparameters": {"sparsity": 0.1}, "alpha_grid": GRID}
    spec["negation"]["ties"] = copy.deepcopy(spec["negation"]["nonlinear"])
    spec["comparison"]["records"].append({**spec["comparison"]["records"][1], "method": "ties"})
    text = choices_markdown(_write(tmp_path, spec), "s")
    line = {ln.split(" | ")[0][2:]: ln for ln in text.splitlines() if ln.startswith("| ") and " | lr | " not in ln}
    assert line["talos"] == ("| talos | 0.001 | sparsity: a 0.9 · b 0.99 | 0.5 (0…1) | a 0.25 · b 2 | "
                             "300–900 / 550–1,150 |")
    assert line["lota"].startswith("| lota | – | rank: 16 (every task) | 0.5 (0…1) | 0.5 (every task) | ")
    assert line["ties"] == ("| ties | nonlinear's runs | sparsity 0.1 | 0.5 (0…1) | 0.5 (every task) | "
                            "nonlinear's runs |")
    assert "What each row chose" in report_markdown(tmp_path, "s")


def test_talos_audit_cli(tmp_path, capsys):
    root = _write(tmp_path, _spec())
    assert main(["audit", "s", "--store", str(root), "--strict"]) == 0
    assert "s: no audit flags" in capsys.readouterr().out
    spec = _spec()
    _lr_disagrees(spec)
    root = _write(tmp_path / "flagged", spec)
    assert main(["audit", "s", "--store", str(root)]) == 0
    out = capsys.readouterr().out
    assert "1 audit flag(s) — lr-disagrees 1" in out and "[lr-disagrees]" in out
    assert main(["audit", "s", "--store", str(root), "--strict"]) == 1
    capsys.readouterr()
    assert main(["audit", "s", "--store", str(root), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload[0]["check"] == "lr-disagrees" and payload[0]["row"] == "talos"
    assert main(["audit", "nope", "--store", str(root)]) == 2
    assert "no results of suite 'nope'" in capsys.readouterr().err


def test_claim_verdicts_agree_with_the_flags_on_their_evidence():
    """On both shipped suites: a claim is inconclusive exactly when the audit flags its evidence, and an
    inconclusive claim names each flag's check."""
    shipped = REPO / "cached_results"
    for finding in check_claims(shipped, ["vision", "text"]):
        if finding.verdict == "n/a":
            assert not finding.flags
            continue
        # inconclusive exactly when flagged, unless a failing part on clean, separated numbers settles the verdict
        assert (finding.verdict == "inconclusive") == (bool(finding.flags) and not finding.settled_by)
        assert finding.rule_verdict in ("reproduced", "not reproduced")
        if finding.settled_by:
            assert finding.verdict == finding.rule_verdict == "not reproduced"
        if finding.flags:
            flags = audit_suite(shipped, finding.suite)
            assert set(finding.flags) <= set(flags)


def test_evidence_flags_match_rows_and_metrics(tmp_path):
    spec = _spec()
    _norm_above_100(spec)   # lota, addition_norm only
    _lr_disagrees(spec)     # talos, every number
    _mask_unmoved(spec)     # talos masks
    flags = audit_suite(_write(tmp_path, spec), "s")
    checks = lambda ev: {f.check for f in evidence_flags(flags, ev)}  # noqa: E731
    assert checks([("lota", "addition_abs")]) == set()
    assert checks([("lota", "addition_norm")]) == {"norm-above-100"}
    assert checks([("talos", "single_task_acc")]) == {"lr-disagrees"}
    assert checks([("talos", "training")]) == {"lr-disagrees"}
    assert checks([("talos", "masks")]) == {"mask-unmoved"}


def test_control_margin_reads_the_recorded_control_count(tmp_path):
    """A negation that records its control's validation count (``control_val_n``, the converged protocol) is judged
    on it; older stores' counts are inferred from the stored fractions."""
    spec = _spec()
    _control_one_example(spec)
    spec["negation"]["talos"]["control_val_n"] = 200
    margin = next(f for f in audit_suite(_write(tmp_path / "recorded", spec), "s") if f.check == "control-margin")
    assert (margin.numbers["n"], margin.numbers["kept"], margin.numbers["needed"]) == (200, 152, 152)
    del spec["negation"]["talos"]["control_val_n"]  # a store written before it was recorded: inferred
    margin = next(f for f in audit_suite(_write(tmp_path / "inferred", spec), "s") if f.check == "control-margin")
    assert margin.numbers["n"] == 100
