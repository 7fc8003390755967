"""What about 1,000 probes of a hostile or careless user found open: each probe as a test. A downgraded or swapped
manifest never lets unchecked weights through; NaN outputs are never stored as accuracies; the dashboard's settings
fail closed; one label names one checkpoint; a result file is what its name says; a stopped run is never published
as complete; contradicting values are refused; pathological JSON, huge tasks, non-UTF-8 docs, bad hosts, named
pipes and absurd step counts are one sentence (exit 2, nothing written) — never a traceback, a hang or a wrong
number."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import ClassVar

import pytest
from dashboard_fixtures import REPO
from test_reliability import _files, _one_sentence

from talos_core.cli import main
from talos_core.store import Store

MODEL, TASK, OTHER = "tiny-text", "drug-reviews", "tweets"
TINY = ["--steps", "2", "--max-train", "32", "--max-val", "16", "--max-test", "16", "--calib-samples", "8",
        "--batch-size", "8", "--quiet"]
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> Path:
    """A store with TaLoS runs of the tiny text model on two tasks (mask, task vector, manifest each)."""
    root = tmp_path_factory.mktemp("probes") / "store"
    for task in (TASK, OTHER):
        assert main(["finetune", "--model", MODEL, "--task", task, "--store", str(root), *TINY]) == 0
    return root


@pytest.fixture
def store(two_runs, tmp_path) -> Path:
    return Path(shutil.copytree(two_runs, tmp_path / "store"))


def _run(root: Path, task: str):
    return next(r for r in Store(root).runs() if r.manifest.task == task)


def _edit(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _downgrade(run) -> None:
    """Relabel a run's manifest as the older format written before checksums (``artifacts`` deleted)."""
    _edit(run.path / "manifest.json", lambda d: (d.pop("artifacts"), d.update(format="talos-run/1")))


# --------------------------------------------------------------------------------------------
# 1: a manifest relabelled as the older format must not let altered weights through
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["scaled", "swapped"])
def test_1_downgraded_manifest_never_lets_altered_weights_through(store, tmp_path, capsys, how):
    from talos_core.vectors import TaskVector

    run, other = _run(store, TASK), _run(store, OTHER)
    _downgrade(run)
    if how == "scaled":
        (TaskVector.load(run.path / "task_vector.safetensors") * 50.0).save(run.path / "task_vector.safetensors")
    else:  # another run's files, in a manifest that cannot say they are not its own
        for name in ("task_vector.safetensors", "mask.safetensors"):
            shutil.copy(other.path / name, run.path / name)
    out = tmp_path / "merged"
    code = main(["merge", "--model", MODEL, "--tasks", f"{TASK},{OTHER}", "--alpha", "0.5", "--store", str(store),
                 "--out", str(out)])
    _one_sentence(capsys, code, "records no SHA-256 of it, so it is not used")
    assert not out.exists()
    before = _files(store / "results")
    code = main(["evaluate", "addition", "--model", MODEL, "--tasks", f"{TASK},{OTHER}", "--store", str(store),
                 "--no-train", *TINY])
    _one_sentence(capsys, code, f"run {run.id}'s manifest (format talos-run/1) records no SHA-256")
    assert _files(store / "results") == before
    assert main(["runs", "--store", str(store), "--verify"]) == 1
    assert f"CORRUPT {run.id}" in capsys.readouterr().out


def test_1_recorded_checksums_of_altered_weights_still_contradict_the_manifest(store, capsys):
    """The explicit opt-in (`talos runs --record-checksums`, for a store the user trusts) cannot launder a scaled
    vector: the manifest's own norm of it no longer fits."""
    from talos_core.vectors import TaskVector

    run = _run(store, TASK)
    _downgrade(run)
    (TaskVector.load(run.path / "task_vector.safetensors") * 50.0).save(run.path / "task_vector.safetensors")
    assert main(["runs", "--store", str(store), "--record-checksums", "--verify"]) == 1
    out = capsys.readouterr().out
    assert f"recorded the checksums of run {run.id}: 2 file(s) hashed" in out
    assert "but the run's manifest records 6707 of norm" in out and json.loads(
        (run.path / "manifest.json").read_text())["format"] == "talos-run/2"


# --------------------------------------------------------------------------------------------
# 2: non-finite outputs stop an evaluation
# --------------------------------------------------------------------------------------------
def _encoder_checkpoint(path: Path, scale: float) -> Path:
    """The tiny text model's encoder weights × ``scale`` as a BertForSequenceClassification-style safetensors."""
    from safetensors.torch import save_file

    from talos_core.models import load_model

    model = load_model(MODEL)
    save_file({f"bert.{k}": (v * scale if v.is_floating_point() else v).contiguous()
               for k, v in model.encoder.state_dict().items()}, str(path))
    return path


def test_2_nan_outputs_are_never_stored_as_accuracies(tmp_path, capsys):
    root = tmp_path / "store"
    assert main(["import", "--model", MODEL, "--task", TASK, str(_encoder_checkpoint(tmp_path / "big.safetensors",
                                                                                    1e30)), "--store", str(root)]) == 0
    rid = next(Store(root).runs()).id
    capsys.readouterr()
    before = _files(root)
    code = main(["evaluate", "single", "--model", MODEL, "--tasks", TASK, "--method", "imported", "--store",
                 str(root), "--max-val", "16", "--max-test", "16"])
    line = _one_sentence(capsys, code, f"model '{MODEL}' gives non-finite outputs (NaN or ±inf) on 16 of 16")
    assert f"run {rid} at α 1" in line and "no accuracy is computed" in line
    assert _files(root) == before


# --------------------------------------------------------------------------------------------
# 3: the dashboard's settings fail closed
# --------------------------------------------------------------------------------------------
class _Server:
    """Stands in for the Streamlit process: records that it was started."""

    started: ClassVar[list] = []

    def __init__(self, cmd, env=None, **kwargs):
        _Server.started.append(env)

    def wait(self, timeout=None):
        return 0


@pytest.fixture
def server(monkeypatch):
    _Server.started = []
    monkeypatch.setattr(subprocess, "Popen", _Server)
    for name in list(os.environ):
        if name.startswith("TALOS_DASHBOARD_"):
            monkeypatch.delenv(name)
    return _Server


@pytest.mark.parametrize("var,value", [("TALOS_DASHBOARD_READ_ONLY", "maybe"), ("TALOS_DASHBOARD_READ_ONLY", "y"),
                                       ("TALOS_DASHBOARD_MAX_JOBS", "abc"), ("TALOS_DASHBOARD_MAX_UPLOAD_MB", "0")])
def test_3_unknown_dashboard_settings_refuse_to_start(server, monkeypatch, capsys, var, value):
    from dashboard.access import ServerConfig
    from talos_core.errors import TalosError

    monkeypatch.setenv(var, value)
    _one_sentence(capsys, main(["dashboard", "--store", str(REPO / "cached_results")]), f"{var} must be")
    assert server.started == []
    with pytest.raises(TalosError, match=f"{var} must be"):
        ServerConfig.from_env({var: value})


def test_3_read_only_from_the_environment_is_what_the_banner_says(server, monkeypatch, capsys):
    monkeypatch.setenv("TALOS_DASHBOARD_READ_ONLY", " On ")
    assert main(["dashboard", "--store", str(REPO / "cached_results")]) == 0
    assert "(read-only)" in capsys.readouterr().out and len(server.started) == 1


def test_3_the_cli_checks_every_setting_the_dashboard_reads():
    """`talos dashboard` checks the same variables with the same rules as the server reads them."""
    import re

    from dashboard.access import ROOTS_ENV, ServerConfig
    from talos_core.cli.dashboard import CAP_VARIABLES, READ_ONLY_ENV, check_server_env
    from talos_core.errors import TalosError

    read = set(re.findall(r'"(TALOS_DASHBOARD_[A-Z_]+)"', " ".join(
        p.read_text() for p in (REPO / "dashboard").rglob("*.py"))))
    # the roots are folders (checked by the server); figure validation is a developer's switch, not server policy
    assert read - {ROOTS_ENV, "TALOS_DASHBOARD_VALIDATE"} == {*CAP_VARIABLES, READ_ONLY_ENV}

    def refused(check, env) -> bool:
        try:
            check(env)
        except TalosError:
            return True
        return False

    for var in (*CAP_VARIABLES, READ_ONLY_ENV):
        for value in ("abc", "-1", "0", "1", " 2 ", "", "yes", "1.5"):
            env = {var: value}
            assert refused(check_server_env, env) == refused(ServerConfig.from_env, env), (var, value)


# --------------------------------------------------------------------------------------------
# 4: one label, one checkpoint
# --------------------------------------------------------------------------------------------
def test_4_two_checkpoints_under_one_label_are_refused(tmp_path, capsys):
    root = tmp_path / "store"
    a, b = (_encoder_checkpoint(tmp_path / f"{n}.safetensors", s) for n, s in (("a", 1.01), ("b", 0.99)))
    base = ["import", "--model", MODEL, "--task", TASK, "--method-label", "ext", "--store", str(root)]
    assert main([*base, str(a)]) == 0
    capsys.readouterr()
    before = _files(root)
    _one_sentence(capsys, main([*base, str(b)]), "already holds an imported run of 'tiny-text' on 'drug-reviews' "
                                                 "labelled 'ext' from another checkpoint")
    assert _files(root) == before
    # a store that already holds two (written before this check): evaluation names them instead of picking one
    shutil.copytree(next(Store(root).runs()).path, root / "runs" / "copy")
    other = tmp_path / "other"
    assert main(["import", "--model", MODEL, "--task", TASK, "--method-label", "ext", "--store", str(other),
                 str(b)]) == 0
    shutil.rmtree(root / "runs" / "copy")
    (b_run,) = Store(other).runs()
    shutil.copytree(b_run.path, root / "runs" / b_run.id)
    capsys.readouterr()
    code = main(["evaluate", "single", "--model", MODEL, "--tasks", TASK, "--method", "imported", "--store",
                 str(root), "--max-val", "16", "--max-test", "16"])
    _one_sentence(capsys, code, "holds 2 'imported' runs of 'tiny-text' on 'drug-reviews' labelled 'ext'")


def test_4_an_import_manifest_with_two_checkpoints_under_one_label_writes_nothing(tmp_path, capsys):
    a, b = (_encoder_checkpoint(tmp_path / f"{n}.safetensors", s) for n, s in (("a", 1.01), ("b", 0.99)))
    listing = tmp_path / "imports.json"
    listing.write_text(json.dumps([{"model": MODEL, "task": TASK, "path": str(p), "label": "ext"} for p in (a, b)]))
    code = main(["import", "--manifest", str(listing), "--store", str(tmp_path / "store")])
    _one_sentence(capsys, code, "are two checkpoints of 'tiny-text' on 'drug-reviews' with the same label 'ext'")
    assert not (tmp_path / "store").exists()


# --------------------------------------------------------------------------------------------
# 5, 7, 8, 10: result files that contradict their name, themselves, or any sane shape
# --------------------------------------------------------------------------------------------
@pytest.fixture
def shipped(tmp_path) -> Path:
    return Path(shutil.copytree(REPO / "cached_results", tmp_path / "shipped"))


def _comparison(root: Path, suite: str) -> Path:
    return next((root / "results" / "comparison").glob(f"{suite}__*.json"))


def test_5_a_comparison_file_copied_over_another_suites_is_refused(shipped, capsys):
    target = _comparison(shipped, "vision")
    shutil.copy(_comparison(shipped, "text"), target)
    line = _one_sentence(capsys, main(["report", "vision", "--store", str(shipped)]),
                         "its suite field 'text', where its file name says 'vision'")
    assert str(target) in line and "minilm" not in line.split("says")[-1]


@pytest.mark.parametrize("edit,needle", [
    ({"addition_abs": 0.99}, "addition_abs = 0.99 outside its own interval"),
    ({"addition_abs_lo": 0.9, "addition_abs_hi": 0.1}, "whose low end is above its high end"),
])
def test_7_values_that_contradict_each_other_are_refused(shipped, capsys, edit, needle):
    path = _comparison(shipped, "vision")
    _edit(path, lambda d: d["records"][0].update(edit))
    line = _one_sentence(capsys, main(["report", "vision", "--store", str(shipped)]), needle)
    assert str(path) in line


def test_7_a_summary_outside_its_own_interval_is_refused(shipped):
    from talos_core.schema import CorruptResult, read_result

    path = next((shipped / "results" / "addition").glob("text__*__talos.json"))
    _edit(path, lambda d: d["summary"].update(abs_acc=d["ci95"]["abs_acc"][1] + 0.05))
    with pytest.raises(CorruptResult, match=r"summary abs_acc = .* outside its own interval ci95"):
        read_result(shipped, "addition", path.stem)


def _claims_doc(tmp_path: Path, suite: str) -> Path:
    doc = tmp_path / "claims.md"
    doc.write_text(f"# x\n<!-- talos:claims {suite} -->\nold\n<!-- /talos:claims -->\n", encoding="utf-8")
    return doc


def test_8_deeply_nested_json_is_one_sentence_in_every_command(shipped, tmp_path, capsys):
    path = _comparison(shipped, "text")
    path.write_text(DEEP)
    needle = "nests lists or objects more than 64 levels deep"
    _one_sentence(capsys, main(["report", "text", "--store", str(shipped)]), needle)
    doc = _claims_doc(tmp_path, "text")
    _one_sentence(capsys, main(["docs", "--check", "--store", str(shipped), str(doc)]), needle)
    manifest = sorted((shipped / "runs").glob("*/manifest.json"))[0]
    manifest.write_text(DEEP)
    for argv in (["runs", "--store", str(shipped)], ["runs", "--store", str(shipped), "--verify"]):
        code = main(argv)
        out = capsys.readouterr()
        assert code == 1 and "Traceback" not in out.err
        assert f"CORRUPT {manifest.parent.name}: corrupt JSON file {manifest}: it {needle}" in out.out


@pytest.mark.parametrize("page", ["efficiency", "arithmetic", "learn"])
def test_8_deeply_nested_result_files_are_warnings_on_the_pages(monkeypatch, fixture_store, tmp_path, page):
    from streamlit.testing.v1 import AppTest

    root = Path(shutil.copytree(fixture_store, tmp_path / "store"))
    for path in sorted((root / "results").rglob("*.json"))[::2]:
        path.write_text(DEEP)
    monkeypatch.setenv("TALOS_STORE", str(root))
    at = AppTest.from_file(str(REPO / "dashboard" / "app.py"), default_timeout=120)
    if page != "learn":
        at.switch_page(f"app_pages/{page}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    messages = [m.value for m in (*at.error, *at.warning, *at.info, *at.sidebar.warning, *at.sidebar.error)]
    assert any("levels deep" in m for m in messages), messages


@pytest.mark.parametrize("text,needle", [
    ('{"a": 1, "a": 2}', "it has the key 'a' twice in one object"),
    ('{"a": NaN}', "it holds NaN, which is not JSON"),
    ('{"a": 1e999}', "it holds the number 1e999, beyond the range of a float"),
    ("[" * 65 + "]" * 65, "more than 64 levels deep"),
])
def test_8_pathological_json_is_refused_by_the_one_reader(tmp_path, text, needle):
    from talos_core.atomic import read_json
    from talos_core.errors import TalosError

    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(TalosError, match=r"corrupt JSON file .*x.json: ") as exc:
        read_json(path)
    assert needle in str(exc.value)


def test_8_json_as_deep_as_allowed_is_read(tmp_path):
    from talos_core.atomic import MAX_JSON_DEPTH, read_json

    path = tmp_path / "x.json"
    path.write_text("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)
    assert read_json(path) is not None


def test_10_a_repeated_method_row_is_one_sentence(shipped, tmp_path, capsys):
    path = _comparison(shipped, "text")
    _edit(path, lambda d: d["records"].append(dict(d["records"][0])))
    needle = "repeating row 1 (method 'breadcrumbs')"
    _one_sentence(capsys, main(["report", "text", "--store", str(shipped)]), needle)
    doc = _claims_doc(tmp_path, "text")
    _one_sentence(capsys, main(["docs", "--check", "--store", str(shipped), str(doc)]), needle)


# --------------------------------------------------------------------------------------------
# 6: a stopped run is never published as complete
# --------------------------------------------------------------------------------------------
def test_6_a_checkpoint_claiming_a_finished_run_before_its_last_step_is_discarded(tmp_path):
    from talos_core.pipeline import FinetuneRequest, run_finetune

    store = Store(tmp_path / "store")
    req = FinetuneRequest(model=MODEL, task=TASK, method="nonlinear", steps=6, max_train=32, max_val=16, max_test=16,
                          batch_size=8, checkpoint_every=2)

    def killed(step, record):
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_finetune(req, store, progress=False, on_step=killed)
    meta = store.root / "checkpoints" / req.run_id() / "checkpoint.json"
    _edit(meta, lambda d: d.update(finished=True))
    assert json.loads(meta.read_text())["step"] == 2
    with pytest.warns(UserWarning, match="it says training finished at step 2 of 6 without stopping early"):
        run = run_finetune(req, store, progress=False)
    assert [h["step"] for h in run.manifest.history] == [1, 2, 3, 4, 5, 6]


# --------------------------------------------------------------------------------------------
# 9, 11, 12, 13: crashes and hangs
# --------------------------------------------------------------------------------------------
def test_9_a_task_with_more_classes_than_a_task_may_have_is_refused(tmp_path, capsys):
    from talos_core.tasks.files import MAX_CLASSES

    csv = tmp_path / "many.csv"
    csv.write_text("text,label\n" + "".join(f"text number {i},class{i}\n" for i in range(MAX_CLASSES + 1)))
    store = tmp_path / "store"
    code = main(["finetune", "--model", MODEL, "--task", f"csv:{csv}", "--store", str(store), *TINY])
    _one_sentence(capsys, code, f"it has 10,001 classes, more than the {MAX_CLASSES:,} a task may have")
    assert not store.exists()


def test_11_docs_on_a_file_that_is_not_utf8(tmp_path, capsys):
    doc = tmp_path / "latin1.md"
    doc.write_bytes("# caf\xe9\n".encode("latin-1"))
    for argv in (["docs", "--check", str(doc)], ["docs", str(doc)]):
        _one_sentence(capsys, main([*argv[:-1], "--store", str(REPO / "cached_results"), argv[-1]]),
                      f"{doc} is not UTF-8 text (byte 0xe9 at offset 5)")
    assert doc.read_bytes() == "# caf\xe9\n".encode("latin-1")


@pytest.mark.parametrize("host", ["999.999.1.1", "192.0.2.1"])
def test_12_dashboard_host_that_cannot_be_listened_on(server, capsys, host):
    code = main(["dashboard", "--host", host, "--store", str(REPO / "cached_results")])
    _one_sentence(capsys, code, f"--host {host!r} is not an address this machine can listen on")
    assert server.started == []


def test_13_import_of_a_named_pipe_does_not_block(tmp_path, capsys):
    fifo = tmp_path / "fifo.safetensors"
    os.mkfifo(fifo)
    code = main(["import", "--model", MODEL, "--task", TASK, str(fifo), "--store", str(tmp_path / "store")])
    _one_sentence(capsys, code, f"checkpoint {fifo} is neither a file nor a folder (a named pipe or a device)")
    assert not (tmp_path / "store").exists()


def test_13_a_named_pipe_in_a_store_does_not_block_its_readers(store, capsys):
    run = _run(store, TASK)
    (run.path / "manifest.json").unlink()
    os.mkfifo(run.path / "manifest.json")
    assert main(["runs", "--store", str(store)]) == 1
    assert f"CORRUPT {run.id}: {run.path / 'manifest.json'} is not a regular file" in capsys.readouterr().out


@pytest.mark.parametrize("option,value,needle", [
    ("--steps", "9223372036854775808", "steps must be an integer in [1, 1000000]"),
    ("--steps", "100000000", "steps must be an integer in [1, 1000000]"),
    ("--rounds", "100000000", "rounds must be an integer in [1, 100]"),
])
def test_13_step_and_round_counts_no_run_can_do_are_refused(tmp_path, capsys, option, value, needle):
    store = tmp_path / "store"
    code = main(["finetune", "--model", MODEL, "--task", TASK, "--store", str(store), *TINY, option, value])
    _one_sentence(capsys, code, needle)
    assert not store.exists()


# --------------------------------------------------------------------------------------------
# the smaller items
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("data,what", [(bytes(range(7, 200)), "binary data"), (b'{"a": [1, 2]}', "text")])
def test_bytes_that_are_no_torch_file_are_not_called_a_pickle(tmp_path, capsys, data, what):
    path = tmp_path / "weights.bin"
    path.write_bytes(data)
    code = main(["import", "--model", MODEL, "--task", TASK, str(path), "--store", str(tmp_path / "store")])
    line = _one_sentence(capsys, code, f"is not a file written by torch.save (it starts with {what}")
    assert "pickled" not in line


def test_a_full_disk_names_the_file_being_written(store, monkeypatch, capsys):
    import errno

    import talos_core.atomic as atomic

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full)
    code = main(["evaluate", "single", "--model", MODEL, "--tasks", TASK, "--store", str(store), "--no-train", *TINY])
    line = _one_sentence(capsys, code, f"cannot use {store / 'results'}")
    assert line.endswith("No space left on device; check --store and the paths given")


def test_class_names_the_model_reads_the_same_are_refused_before_calibration(tmp_path, capsys):
    csv = tmp_path / "emoji.csv"
    csv.write_text("text,label\n" + "".join(f"text {i},{'😀' if i % 2 else '😢'}\n" for i in range(12)),
                   encoding="utf-8")
    store = tmp_path / "store"
    code = main(["finetune", "--model", MODEL, "--task", f"csv:{csv}", "--store", str(store), *TINY])
    line = _one_sentence(capsys, code, "the same zero-shot head: its tokenizer reads their names the same")
    assert "soft_mask_value" not in line and not store.exists()


def test_a_typed_registered_model_is_not_said_to_download(monkeypatch, tmp_path):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("TALOS_STORE", str(tmp_path))
    at = AppTest.from_file(str(REPO / "dashboard" / "app.py"), default_timeout=120)
    at.switch_page("app_pages/run.py")
    at.run()
    at.text_input(key="run_model_typed").set_value(MODEL).run()
    assert not at.exception and not any("download their weights" in w.value for w in at.warning)
    at.text_input(key="run_model_typed").set_value("hf-encoder:sentence-transformers/all-mpnet-base-v2").run()
    assert any("download their weights" in w.value for w in at.warning)


def test_export_into_the_source_store_is_refused(store, capsys):
    before = _files(store)
    code = main(["export", "--store", str(store), "--to", str(store / "runs" / "sub")])
    _one_sentence(capsys, code, f"the destination {store / 'runs' / 'sub'} lies inside the source store {store}")
    assert _files(store) == before


def test_a_run_folder_linked_from_outside_the_store_is_named(store, two_runs, tmp_path, capsys):
    outside = Path(shutil.copytree(two_runs, tmp_path / "outside"))
    run = _run(store, TASK)
    shutil.rmtree(run.path)
    run.path.symlink_to(_run(outside, TASK).path, target_is_directory=True)
    assert main(["runs", "--store", str(store)]) == 1
    assert f"CORRUPT {run.id}: run folder {run.path} is a link to" in capsys.readouterr().out
    assert run.id not in {r.id for r in Store(store).runs()}


def test_an_artifact_name_leading_outside_the_run_is_corrupt(store, capsys):
    run = _run(store, TASK)
    _edit(run.path / "manifest.json", lambda d: d["artifacts"].update({"../../../../etc/x": "0" * 64}))
    assert main(["runs", "--store", str(store), "--verify"]) == 1
    assert "its artifacts name '../../../../etc/x', which is not a .safetensors file" in capsys.readouterr().out


@pytest.mark.parametrize("extra,needle", [
    (["--soft-mask", "0"], "no eligible entry has a non-zero sensitivity"),
    (["--model", "hf-encoder:/nonexistent/model"], "could not be loaded"),
    (["--model", "clip-vit-b-32", "--task", "digits"], "could not be loaded"),
])
def test_refused_commands_leave_no_store_behind(tmp_path, capsys, extra, needle):
    store = tmp_path / "store"
    argv = ["finetune", "--model", MODEL, "--task", TASK, "--store", str(store), *TINY, *extra]
    _one_sentence(capsys, main(argv), needle)
    assert not store.exists()


def test_a_refused_command_keeps_a_store_that_holds_anything(store, tmp_path, capsys):
    from talos_core.store import discard_unused

    code = main(["finetune", "--model", "hf-encoder:/nonexistent/model", "--task", TASK, "--store", str(store), *TINY])
    _one_sentence(capsys, code, "could not be loaded")
    assert not discard_unused(store) and len(list(Store(store).runs())) == 2
    new = Store(tmp_path / "new")
    new.ensure()
    with new.run_lock("x"):  # another process fine-tuning into the new store: its lock is held
        assert not discard_unused(new.root)
    assert discard_unused(new.root) and not new.root.exists()


# --------------------------------------------------------------------------------------------
# found by the fuzzer at 300 examples per property
# --------------------------------------------------------------------------------------------
def test_a_null_mask_measurement_is_not_compared(store, capsys):
    run = _run(store, TASK)
    _edit(run.path / "manifest.json", lambda d: d["metrics"].update(mask_density=None, maskable_numel=None))
    assert main(["runs", "--store", str(store), "--verify"]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_a_table_whose_records_are_null_is_refused(shipped, capsys):
    path = _comparison(shipped, "vision")
    _edit(path, lambda d: d.update(records=None))
    _one_sentence(capsys, main(["report", "vision", "--store", str(shipped)]), "'records' that is not a list")
