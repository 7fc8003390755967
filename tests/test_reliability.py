"""Seven holes found by probing, and the smaller ones beside them — each refused with one sentence (exit 2,
or 1 for a corrupt store), nothing written, never a traceback or a silently wrong number."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch

from talos_core.atomic import file_sha256
from talos_core.cli import main
from talos_core.store import Store, save_mask

MODEL, TASK = "tiny-text", "drug-reviews"
TINY = ["--steps", "2", "--max-train", "32", "--max-val", "16", "--max-test", "16", "--calib-samples", "8",
        "--batch-size", "8", "--quiet"]


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def _one_sentence(capsys, code: int, needle: str, status: int = 2) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert code == status and "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err
    return lines[0]


def _argparse_error(capsys, argv: list[str], needle: str) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err and needle in err.strip().splitlines()[-1], err


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """One TaLoS run (mask + task vector) of the tiny text model."""
    root = tmp_path_factory.mktemp("reliability") / "store"
    assert main(["finetune", "--model", MODEL, "--task", TASK, "--store", str(root), *TINY]) == 0
    return root


@pytest.fixture
def copy(store, tmp_path) -> tuple[Path, object]:
    """A private copy of :func:`store` and its run."""
    root = tmp_path / "store"
    shutil.copytree(store, root)
    return root, next(Store(root).runs())


def _edit_manifest(run, edit) -> None:
    path = run.path / "manifest.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


# --------------------------------------------------------------------------------------------
# 1-3: option values without a bound
# --------------------------------------------------------------------------------------------
def test_1_batch_size_is_bounded(tmp_path, capsys):
    store = tmp_path / "s"
    base = ["finetune", "--model", MODEL, "--task", TASK, "--store", str(store), "--steps", "2", "--quiet"]
    _one_sentence(capsys, main([*base, "--max-train", "32", "--batch-size", "100000000"]),
                  "batch_size 100000000 is larger than max_train (32), the whole training set")
    _one_sentence(capsys, main([*base, "--batch-size", "70000"]), "batch_size 70000 is larger than 65536")
    assert _files(store) == []


def test_2_merge_alpha_beyond_float32_is_refused(store, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["merge", "--model", MODEL, "--tasks", TASK, "--alpha", "1e308", "--store", str(store),
                 "--out", str(out)])
    _one_sentence(capsys, code, "--alpha must be in [0, 1000], got 1e+308")
    code = main(["merge", "--model", MODEL, "--tasks", TASK, "--alpha", f"{TASK}=5000", "--store", str(store),
                 "--out", str(out)])
    _one_sentence(capsys, code, f"--alpha for '{TASK}' must be in [0, 1000], got 5000.0")
    assert not out.exists()


def test_3_dashboard_port_out_of_range(capsys):
    _argparse_error(capsys, ["dashboard", "--port", "99999"], "expected a port in [1, 65535], got '99999'")
    _argparse_error(capsys, ["dashboard", "--port", "0"], "expected a port integer, got '0'")


# --------------------------------------------------------------------------------------------
# 4 and 7: edited numbers in results and manifests
# --------------------------------------------------------------------------------------------
def _report_store(root: Path, **row) -> Path:
    s = Store(root)
    s.write_result("suite", "t", {"model": MODEL, "tasks": [TASK, "tweets"], "control_task": "fortune-langs",
                                  "methods": ["talos"], "posthoc": [], "scale": "mini", "seed": 0,
                                  "wall_time_s": 60.0, "device": "cpu"})
    rec = {"method": "talos", "addition_abs": 0.75, "addition_norm": 0.9, "negation_target": 0.3,
           "negation_control": 0.7, "single_task_acc": 0.8, "zero_shot_acc": 0.5, "time_per_step_s": 0.1,
           "peak_memory_mb": 100.0, **row}
    s.write_table("comparison", f"t__{MODEL}", pd.DataFrame([rec]))
    return s.result_path("comparison", f"t__{MODEL}")


@pytest.mark.parametrize("row,needle", [
    ({"addition_abs": "0.5"}, "addition_abs = '0.5' in row 1 of its table, which must be an accuracy in [0, 1]"),
    ({"addition_abs": 7.5}, "addition_abs = 7.5 in row 1 of its table, which must be an accuracy in [0, 1]"),
    ({"negation_target": -3}, "negation_target = -3 in row 1"),
    ({"peak_memory_mb": -1.0}, "peak_memory_mb = -1.0 in row 1 of its table, which must be a finite number ≥ 0"),
])
def test_4_7_report_refuses_edited_comparison_numbers(tmp_path, capsys, row, needle):
    path = _report_store(tmp_path / "s", **row)
    line = _one_sentence(capsys, main(["report", "t", "--store", str(tmp_path / "s")]), needle)
    assert str(path) in line and "750.00" not in line


def test_7_dashboard_refuses_edited_comparison_numbers(tmp_path):
    from dashboard.data import load_table
    from talos_core.schema import CorruptResult

    _report_store(tmp_path / "s", addition_abs=7.5)
    with pytest.raises(CorruptResult, match=r"addition_abs = 7.5"):
        load_table(tmp_path / "s", "comparison", f"t__{MODEL}")


def test_7_edited_manifest_metric_is_corrupt(copy, capsys):
    root, run = copy
    _edit_manifest(run, lambda d: d["metrics"].update(finetuned_test_acc=7.5))
    for argv in (["runs", "--store", str(root)], ["runs", "--store", str(root), "--verify"]):
        assert main(argv) == 1
        out = capsys.readouterr().out
        assert f"CORRUPT {run.id}: run manifest" in out and "metrics.finetuned_test_acc = 7.5" in out
        assert "7.5000" not in out


def test_report_escapes_store_names(tmp_path, capsys):
    _report_store(tmp_path / "s", method="evil|name")
    assert main(["report", "t", "--store", str(tmp_path / "s")]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "evil" in line)
    assert "evil\\|name" in row and row.replace("\\|", "").count("|") == 11  # one row of ten cells (audit flags last)


# --------------------------------------------------------------------------------------------
# 5 and the Run page: paper-scale suites, their cost, typed model specs
# --------------------------------------------------------------------------------------------
def test_5_suite_job_caps_with_whole_data_sets():
    from dashboard.jobs import JobLimits
    from dashboard.suite_jobs import SuiteJobSpec, suite_job_problem

    problem = suite_job_problem(SuiteJobSpec("paper-vision"), JobLimits())
    assert "uses all train examples of its data sets (no limit), above the cap" in problem
    assert suite_job_problem(SuiteJobSpec("paper-vision"), JobLimits(max_steps=0, max_examples=0)) is None
    assert suite_job_problem(SuiteJobSpec("tiny"), JobLimits()) is None


def test_suite_cost_needs_confirmation(tmp_path):
    from dashboard.suite_jobs import SuiteJobSpec, needs_confirmation, start_suite_job, suite_plan
    from talos_core.errors import TalosError

    spec = SuiteJobSpec("vision")
    plan = suite_plan(spec, tmp_path / "s", gpu=False)
    assert needs_confirmation(plan) and not needs_confirmation(suite_plan(SuiteJobSpec("tiny"), tmp_path, gpu=False))
    with pytest.raises(TalosError, match=r"device-hours of training and evaluation .* confirm its cost to launch it"):
        start_suite_job(spec, tmp_path / "s", plan=plan)
    assert _files(tmp_path / "s") == []


def test_typed_model_specs_on_the_run_page(tmp_path):
    from dashboard.access import ServerConfig

    cfg = ServerConfig.from_env({"TALOS_STORE": str(tmp_path)})
    for ok in ("tiny-clip", "clip:ViT-B-16:laion2b_s34b_b88k", "hf-encoder:sentence-transformers/all-mpnet-base-v2",
               "t5:google/t5-v1_1-base", f"hf-encoder:{tmp_path}"):
        assert cfg.model_problem(ok) is None, ok
    for bad in ("hf-encoder:/etc", "t5:../x", "clip:ViT-B-32:/etc/passwd", "hf-encoder:~/m", "x:y", "hf-encoder:a/b/c"):
        assert cfg.model_problem(bad), bad


def test_run_page_paper_suite_typed_path_and_costly_suite(monkeypatch, tmp_path):
    from dashboard_fixtures import REPO
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("TALOS_STORE", str(tmp_path))
    at = AppTest.from_file(str(REPO / "dashboard" / "app.py"), default_timeout=120)
    at.switch_page("app_pages/run.py")
    at.run()
    at.text_input(key="run_model_typed").set_value("hf-encoder:/etc").run()
    assert not at.exception and any("names a path outside this server's stores" in e.value for e in at.error)
    assert not at.button  # nothing can be launched with it
    at.text_input(key="run_model_typed").set_value("").run()
    at.selectbox(key="suite_name").set_value("paper-vision").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("above the cap of this dashboard server" in e.value for e in at.error)
    at.selectbox(key="suite_name").set_value("vision").run()
    assert not at.exception and at.checkbox(key="suite_confirm").value is False
    assert any("device-hours" in c.value for c in at.caption)
    at.button(key="suite_launch").click().run()
    assert any("confirm its cost" in e.value for e in at.error) and not (tmp_path / "jobs").exists()


def test_job_commands_pass_sparsity_to_sparse_methods_only():
    from dashboard.jobs import JobSpec, build_commands

    dense = build_commands(JobSpec(model="tiny-clip", tasks=("digits",), method="nonlinear"), "/tmp/s")[0]
    sparse = build_commands(JobSpec(model="tiny-clip", tasks=("digits",), method="talos"), "/tmp/s")[0]
    assert "--sparsity" not in dense and sparse[sparse.index("--sparsity") + 1] == "0.9"


# --------------------------------------------------------------------------------------------
# 6: a current-format manifest without checksums is corrupt
# --------------------------------------------------------------------------------------------
def test_6_manifest_without_checksums_is_corrupt(copy, tmp_path, capsys):
    from talos_core.vectors import TaskVector

    root, run = copy
    tv = TaskVector.load(run.path / "task_vector.safetensors")
    (tv * 1000.0).save(run.path / "task_vector.safetensors")
    _edit_manifest(run, lambda d: d.pop("artifacts"))
    assert main(["runs", "--store", str(root), "--verify"]) == 1
    assert "it has no 'artifacts'" in capsys.readouterr().out
    before = _files(root / "results")
    code = main(["evaluate", "single", "--model", MODEL, "--tasks", TASK, "--store", str(root), "--no-train", *TINY])
    _one_sentence(capsys, code, f"run manifest {run.path / 'manifest.json'} is incomplete: it has no 'artifacts'")
    assert _files(root / "results") == before
    code = main(["merge", "--model", MODEL, "--tasks", TASK, "--alpha", "0.5", "--store", str(root),
                 "--out", str(tmp_path / "out")])
    _one_sentence(capsys, code, f"run manifest {run.path / 'manifest.json'} is incomplete")
    assert not (tmp_path / "out").exists()


def test_every_shipped_manifest_records_its_checksums():
    """Every shipped manifest is of the current format and names its artifacts: with their SHA-256, or, for the six
    text `tiny` runs made before checksums existed (whose weights were never kept), recorded as not kept (null,
    `talos runs --record-checksums`) — never a checksum invented for a file that does not exist."""
    from talos_core.schema import shipped_store

    manifests = [json.loads(p.read_text()) for p in sorted((shipped_store() / "runs").glob("*/manifest.json"))]
    assert manifests and all(m["format"] == "talos-run/2" and m["artifacts"] for m in manifests)
    unrecorded = [m for m in manifests if None in m["artifacts"].values()]
    assert len(unrecorded) == 6 and all(set(m["artifacts"].values()) == {None} for m in unrecorded)
    assert all(m["info"]["checksums_recorded"] == {**m["info"]["checksums_recorded"], "from_format": "talos-run/1",
                                                   "hashed": []} for m in unrecorded)
    assert not any((shipped_store() / "runs" / m["run_id"] / n).exists() for m in manifests for n in m["artifacts"])


# --------------------------------------------------------------------------------------------
# the smaller items
# --------------------------------------------------------------------------------------------
def test_nothing_written_for_a_missing_gpu_or_a_bad_lora_rank(tmp_path, capsys, monkeypatch):
    store = tmp_path / "s"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code = main(["finetune", "--model", MODEL, "--task", TASK, "--store", str(store), "--device", "cuda", *TINY])
    _one_sentence(capsys, code, "device 'cuda' was asked for but no CUDA GPU is available")
    code = main(["finetune", "--model", MODEL, "--task", TASK, "--store", str(store), "--method", "llora",
                 "--option", "rank=100000", *TINY])
    _one_sentence(capsys, code, "LoRA rank 100000 exceeds")
    assert not store.exists()


@pytest.mark.parametrize("extra,needle", [
    (["--method", "nonlinear", "--sparsity", "0.5"], "--sparsity 0.5 applies only to sparse methods"),
    (["--method", "llora", "--sparsity", "0.9"], "method 'llora' trains no sparse subset"),
    (["--warmup-steps", "1000000000"], "warmup_steps 1000000000 is longer than the run (2 steps)"),
])
def test_silently_ignored_values_are_refused(tmp_path, capsys, extra, needle):
    store = tmp_path / "s"
    _one_sentence(capsys, main(["finetune", "--model", MODEL, "--task", TASK, "--store", str(store), *TINY, *extra]),
                  needle)
    assert not store.exists()


def test_empty_store_path_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _argparse_error(capsys, ["finetune", "--model", MODEL, "--task", TASK, "--store", "", *TINY],
                    "expected a folder, got ''")
    _argparse_error(capsys, ["runs", "--store", " "], "expected a folder, got ' '")
    assert _files(tmp_path) == []


def test_merge_names_a_corrupt_run_and_keeps_the_sparsity(copy, tmp_path, capsys):
    root, run = copy
    base = ["merge", "--model", MODEL, "--tasks", TASK, "--alpha", "0.5", "--store", str(root),
            "--out", str(tmp_path / "out")]
    code = main([*base, "--sparsity", "0.5"])
    _one_sentence(capsys, code, f"--task {TASK} --method talos --sparsity 0.5 --store")
    (run.path / "manifest.json").write_text('{"model": "tiny-text", "ta')
    _one_sentence(capsys, main(base), f"corrupt JSON file {run.path / 'manifest.json'}")
    assert not (tmp_path / "out").exists()


def test_truncated_mask_with_its_checksum_updated_fails_verify(copy, capsys):
    from talos_core.store import load_mask

    root, run = copy
    mask = load_mask(run.path / "mask.safetensors")
    first = next(iter(mask))
    save_mask({first: mask[first]}, run.path / "mask.safetensors")
    _edit_manifest(run, lambda d: d["artifacts"].update({"mask.safetensors": file_sha256(run.path /
                                                                                          "mask.safetensors")}))
    assert main(["runs", "--store", str(root), "--verify"]) == 1
    assert "but the run's manifest records" in capsys.readouterr().out
    # the same mask with the metrics edited to match: the vector's entries outside it are caught
    _edit_manifest(run, lambda d: d["metrics"].update(maskable_numel=mask[first].numel(),
                                                      mask_density=mask[first].float().mean().item()))
    assert main(["runs", "--store", str(root), "--verify"]) == 1
    assert "does not fit the run's task vector: it has no entry" in capsys.readouterr().out


def test_deleted_mask_stops_every_command(copy, tmp_path, capsys):
    root, run = copy
    (run.path / "mask.safetensors").unlink()
    missing = str(run.path / "mask.safetensors")
    for argv in (["evaluate", "single", "--model", MODEL, "--tasks", TASK, "--store", str(root), "--no-train", *TINY],
                 ["merge", "--model", MODEL, "--tasks", TASK, "--alpha", "0.5", "--store", str(root), "--out",
                  str(tmp_path / "out")]):
        _one_sentence(capsys, main(argv), missing)
    assert not (tmp_path / "out").exists()


def test_manifest_in_another_runs_folder_is_corrupt(copy, capsys):
    root, run = copy
    _edit_manifest(run, lambda d: d.update(task="tweets"))
    assert main(["runs", "--store", str(root)]) == 1
    out = capsys.readouterr().out
    assert f"CORRUPT {run.id}" in out and f"not its folder's name {run.id!r}" in out
