"""Bad input and damaged stores: one sentence, exit status 2, no traceback, nothing written; artifacts
checked against the SHA-256 their manifest records; identical runs give identical bytes."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from talos_core.cli import main
from talos_core.errors import TalosError
from talos_core.store import Run, RunManifest, Store

ROOT = Path(__file__).resolve().parents[1]
MODEL, TASK = "tiny-text", "drug-reviews"
TINY = ["--steps", "2", "--max-train", "32", "--max-val", "16", "--max-test", "16", "--calib-samples", "8",
        "--batch-size", "8", "--quiet"]


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def _one_sentence(capsys, code: int, needle: str) -> str:
    """The command failed with exit 2 and printed one ``error: ...`` line containing ``needle``."""
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert "Traceback" not in err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert needle in lines[0], lines[0]
    return lines[0]


# --------------------------------------------------------------------------------------------
# bad input: one sentence naming the value and what is allowed, exit 2, nothing written
# --------------------------------------------------------------------------------------------
BAD_FINETUNE = [
    (["--lr", "0"], "lr must be in (0, 1], got 0.0"),
    (["--lr", "nan"], "lr must be in (0, 1]"),
    (["--weight-decay", "-1"], "weight_decay must be in [0, inf)"),
    (["--warmup-steps", "-3"], "warmup_steps must be a non-negative integer"),
    (["--option", "bogus=3"], "method 'talos' has no option 'bogus'; its options: none"),
    (["--method", "llora", "--option", "rnk=8"], "method 'llora' has no option 'rnk'; its options: rank, lora_alpha"),
    (["--option", "rank=8", "--option", "rank=16", "--method", "llora"], "option 'rank' is given twice"),
    (["--seed", str(2**64)], "seed must be an integer in [0, 2**63 - 1]"),
    (["--seed", "-1"], "seed must be an integer in [0, 2**63 - 1]"),
]


@pytest.mark.parametrize("extra,needle", BAD_FINETUNE)
def test_bad_finetune_values(extra, needle, tmp_path, capsys):
    store = tmp_path / "store"
    code = main(["finetune", "--model", MODEL, "--task", TASK, "--store", str(store), *TINY, *extra])
    _one_sentence(capsys, code, needle)
    assert _files(store) == []


def test_image_model_on_text_task(tmp_path, capsys):
    store = tmp_path / "store"
    code = main(["finetune", "--model", "tiny-clip", "--task", "tweets", "--store", str(store), *TINY])
    line = _one_sentence(capsys, code, "model 'tiny-clip' takes image inputs but task 'tweets' is a text task")
    assert "talos tasks" in line
    code = main(["finetune", "--model", "tiny-text", "--task", "digits", "--store", str(store), *TINY])
    _one_sentence(capsys, code, "takes text inputs but task 'digits' is a image task")
    assert _files(store) == []


def test_lr_zero_is_not_replaced_by_a_default():
    from talos_core.pipeline import FinetuneRequest

    with pytest.raises(TalosError, match=r"lr must be in \(0, 1\], got 0"):
        FinetuneRequest(model=MODEL, task=TASK, lr=0.0).train_config()
    assert FinetuneRequest(model=MODEL, task=TASK, lr=3e-4).train_config().lr == 3e-4
    assert FinetuneRequest(model=MODEL, task=TASK, warmup_steps=0).train_config().warmup_steps == 0


def test_protocols_that_combine_tasks_need_two(tmp_path, capsys):
    store = tmp_path / "store"
    for protocol in ("addition", "disentanglement", "sparsity-ablation"):
        code = main(["evaluate", protocol, "--model", MODEL, "--tasks", TASK, "--store", str(store), *TINY])
        _one_sentence(capsys, code, f"protocol {protocol!r} needs at least 2 tasks, got 1 ({TASK})")
    code = main(["evaluate", "posthoc", "--method", "ties", "--model", MODEL, "--tasks", TASK, "--store", str(store),
                 *TINY])
    _one_sentence(capsys, code, "needs at least 2 tasks")
    assert _files(store) == []


def test_negation_with_the_control_among_the_targets(tmp_path, capsys):
    store = tmp_path / "store"
    code = main(["evaluate", "negation", "--model", MODEL, "--tasks", f"{TASK},tweets", "--control-task", "tweets",
                 "--store", str(store), *TINY])
    _one_sentence(capsys, code, "control task 'tweets' is also a negation target")
    # the registered control (fortune-langs) among the targets: no late fall-back to an online control task
    code = main(["evaluate", "negation", "--model", MODEL, "--tasks", f"{TASK},fortune-langs", "--store", str(store),
                 *TINY])
    _one_sentence(capsys, code, "the control task of text tasks, 'fortune-langs', is among the negation targets")
    assert _files(store) == []


def test_image_negation_without_a_loadable_control_fails_before_fine_tuning(tmp_path, capsys, monkeypatch):
    """Image tasks' registered control is the online ``imagenet``: offline, negation must say so at once, not
    after fine-tuning the targets (the loader is replaced by the sentence the real one gives offline)."""
    import talos_core.tasks as tasks_mod

    real = tasks_mod.load_task

    def offline(name, **kw):
        if name == "imagenet":
            raise TalosError("task 'imagenet' needs the Hugging Face dataset 'ILSVRC/imagenet-1k', which could not "
                             "be loaded: offline")
        return real(name, **kw)

    monkeypatch.setattr(tasks_mod, "load_task", offline)
    store = tmp_path / "store"
    code = main(["evaluate", "negation", "--model", "tiny-clip", "--tasks", "mnist,digits", "--store", str(store),
                 *TINY])
    _one_sentence(capsys, code, "task 'imagenet' needs the Hugging Face dataset")
    assert _files(store / "runs") == []  # nothing was fine-tuned


def test_runs_on_a_missing_folder_or_a_file(tmp_path, capsys):
    _one_sentence(capsys, main(["runs", "--store", str(tmp_path / "nope")]), "does not exist")
    assert not (tmp_path / "nope").exists()
    (tmp_path / "f").write_text("x")
    _one_sentence(capsys, main(["runs", "--store", str(tmp_path / "f")]), "is a file")
    (tmp_path / "empty").mkdir()
    _one_sentence(capsys, main(["runs", "--store", str(tmp_path / "empty")]), "is not a results store")


def test_store_pointing_at_a_file(tmp_path, capsys):
    f = tmp_path / "f"
    f.write_text("x")
    code = main(["finetune", "--model", MODEL, "--task", TASK, "--store", str(f), *TINY])
    _one_sentence(capsys, code, f"store {f} is a file; --store must name a folder")
    code = main(["evaluate", "single", "--model", MODEL, "--tasks", TASK, "--store", str(f), *TINY])
    _one_sentence(capsys, code, "is a file")
    code = main(["suite", "tiny", "--store", str(f), "--quiet"])
    _one_sentence(capsys, code, "is a file")
    code = main(["finetune", "--model", MODEL, "--task", TASK, "--store", str(f / "sub"), *TINY])
    _one_sentence(capsys, code, "is a file, not a folder")
    assert f.read_text() == "x"


def test_export_to_a_file(tmp_path, capsys, fixture_store):
    f = tmp_path / "f"
    f.write_text("x")
    code = main(["export", "--store", str(fixture_store), "--to", str(f)])
    _one_sentence(capsys, code, f"store {f} is a file")
    assert f.read_text() == "x"


def test_read_only_store(tmp_path, capsys, monkeypatch):
    """A store the user cannot write is refused before any work (``os.access``; root passes it, so the test
    fakes it) and, should a write fail anyway (a read-only file system), the error is one sentence."""
    store = tmp_path / "ro"
    store.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == store else real(p, mode, **kw))
    code = main(["finetune", "--model", MODEL, "--task", TASK, "--store", str(store), *TINY])
    _one_sentence(capsys, code, f"store {store} is not writable")
    monkeypatch.setattr(os, "access", real)

    import talos_core.atomic as atomic

    def refuse(path, data):
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(atomic, "atomic_write_bytes", refuse)
    code = main(["finetune", "--model", MODEL, "--task", TASK, "--store", str(store), *TINY])
    line = _one_sentence(capsys, code, "Read-only file system")
    assert str(store) in line


def test_suite_default_scale_and_odd_names(tmp_path, capsys):
    from talos_core.suites import default_scale

    assert default_scale("tiny") == "mini" and default_scale("text") == "full" and default_scale("vision") == "full"
    # without --scale the tiny suite gets past the scale (to the next check) instead of failing on 'full'
    code = main(["suite", "tiny", "--store", str(tmp_path / "s"), "--methods", "nothere", "--quiet"])
    _one_sentence(capsys, code, "unknown method of suite 'tiny' 'nothere'")
    code = main(["suite", "--store", str(tmp_path / "s"), "--", "-x"])
    _one_sentence(capsys, code, "unknown suite '-x'; choose one of: paper-nlp, paper-vision, text, tiny, vision")
    with pytest.raises(SystemExit) as exc:  # `talos suite -x`: argparse's usage error, exit 2
        main(["suite", "-x"])
    assert exc.value.code == 2 and "Traceback" not in capsys.readouterr().err
    assert _files(tmp_path / "s") == []


# --------------------------------------------------------------------------------------------
# stores: runs, checksums, identical bytes, locks, stale staging folders
# --------------------------------------------------------------------------------------------
def _finetune(store: Path, *extra: str, method: str = "talos") -> Run:
    assert main(["finetune", "--model", MODEL, "--task", TASK, "--method", method, "--store", str(store),
                 *TINY, *extra]) == 0
    (run,) = [r for r in Store(store).runs() if r.manifest.method == method]
    return run


@pytest.fixture(scope="module")
def good_store(tmp_path_factory) -> Path:
    """A store with one TaLoS run (mask + task vector) and one non-linear FT run (task vector only)."""
    root = tmp_path_factory.mktemp("good") / "store"
    _finetune(root, method="talos")
    _finetune(root, method="nonlinear")
    return root


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_manifest_records_artifact_checksums(good_store):
    for run in Store(good_store).runs():
        names = {"task_vector.safetensors"} | ({"mask.safetensors"} if run.manifest.method == "talos" else set())
        assert set(run.manifest.artifacts) == names
        for name in names:
            assert run.manifest.artifacts[name] == _sha(run.path / name)
        assert run.verify() == []
        assert run.id == run.manifest.run_id  # the checksums are not part of the id


def test_cached_manifests_without_checksums_still_load_and_keep_their_ids():
    from talos_core.pipeline import FinetuneRequest, request_fields

    store = Store(ROOT / "cached_results")
    runs = list(store.runs())
    assert len(runs) >= 10 and store.corrupt_runs() == []
    names = set(FinetuneRequest.flat_names())
    for run in runs:
        m = run.manifest
        if m.artifacts is None:  # written before checksums existed: read unchecked
            assert "artifacts" not in m.to_dict()
        else:  # later (GPU) runs record their checksums; the shipped store has their manifests, not their weights
            assert not any((run.path / name).exists() for name in m.artifacts)
        if "calibration" in m.config and "zero_scores" not in m.config["calibration"]:
            # calibrated while ties were broken by position: no current request makes that mask, so its id
            # cannot be recomputed; the shipped stores are re-run under the fixed calibration
            assert m.run_id == run.id
            continue
        fields = {k: v for k, v in request_fields(m.request).items() if k in names}
        if fields.get("train_precision") is None and m.train_precision:
            # a precision chosen by $TALOS_TRAIN_PRECISION is in the id but not in the request: the manifest records
            # the one it trained in (text's H200 runs: fp32 where the GPU's default is bf16)
            fields["train_precision"] = m.train_precision
        req = FinetuneRequest.from_flat(**fields, options=tuple(sorted((m.config.get("options") or {}).items())))
        assert req.run_id() == m.run_id == run.id


def _legacy(run: Run) -> None:
    """Make ``run``'s manifest one of the older format, written before checksums (``artifacts`` absent)."""
    data = json.loads((run.path / "manifest.json").read_text())
    del data["artifacts"]
    data["format"] = "talos-run/1"
    (run.path / "manifest.json").write_text(json.dumps(data))


def test_old_manifest_without_checksum_is_refused_until_its_checksums_are_recorded(good_store, tmp_path):
    """Weights whose manifest records no checksum are never read (a manifest relabelled as the old format must not
    let edited weights through); `talos runs --record-checksums` records them for a store the user trusts."""
    from talos_core.errors import TalosError
    from talos_core.store import record_checksums

    root = tmp_path / "store"
    shutil.copytree(good_store, root)
    run = next(r for r in Store(root).runs() if r.manifest.method == "talos")
    _legacy(run)
    run = Store(root).get_run(run.id)
    assert run.manifest.artifacts is None and len(run.verify()) == 2
    with pytest.raises(TalosError, match="records no SHA-256 of it, so it is not used"):
        run.task_vector()
    done = dict(record_checksums(Store(root)))
    assert "2 file(s) hashed as they are now" in done[run.id]
    run = Store(root).get_run(run.id)
    assert run.manifest.format == "talos-run/2" and run.verify() == []
    assert run.manifest.info["checksums_recorded"]["from_format"] == "talos-run/1"
    assert run.task_vector().nnz() > 0 and run.mask() is not None


def test_identical_runs_give_identical_bytes(tmp_path):
    """Two identical tiny runs, each in its own process (the safetensors writer's metadata order varies between
    processes), give byte-identical artifacts: equal SHA-256."""
    cmd = [sys.executable, "-m", "talos_core.cli", "finetune", "--model", MODEL, "--task", TASK, *TINY]
    env = {**os.environ, "PYTHONHASHSEED": "random"}
    for name in ("a", "b"):
        subprocess.run([*cmd, "--store", str(tmp_path / name)], check=True, cwd=ROOT, env=env, capture_output=True)
    (ra,), (rb,) = list(Store(tmp_path / "a").runs()), list(Store(tmp_path / "b").runs())
    assert ra.id == rb.id
    for f in ("task_vector.safetensors", "mask.safetensors"):
        assert _sha(ra.path / f) == _sha(rb.path / f) == ra.manifest.artifacts[f] == rb.manifest.artifacts[f]


def test_safetensors_header_is_canonical(tmp_path):
    from talos_core.atomic import atomic_save_safetensors, load_safetensors

    atomic_save_safetensors({"b": torch.ones(3), "a": torch.zeros(2)}, tmp_path / "x.safetensors",
                            {"z": "1", "a": "2", "m": "3"})
    data = (tmp_path / "x.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = data[8:8 + n].decode()
    assert n % 8 == 0 and header.rstrip() == json.dumps(json.loads(header), sort_keys=True, separators=(",", ":"))
    tensors, meta = load_safetensors(tmp_path / "x.safetensors")
    assert meta == {"z": "1", "a": "2", "m": "3"} and torch.equal(tensors["b"], torch.ones(3))


def test_two_processes_fine_tuning_the_same_run(tmp_path):
    """The second process waits for the first (a lock per run id) and reuses its run: one run, no debris."""
    store = tmp_path / "store"
    cmd = [sys.executable, "-m", "talos_core.cli", "finetune", "--model", MODEL, "--task", TASK, "--store",
           str(store), *TINY]
    procs = [subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert [p.name for p in (store / "runs").iterdir()] == [next(Store(store).runs()).id]
    assert len({o.splitlines()[0] for o, _ in outs}) == 1  # both name the same run


def test_stale_staging_folders_are_cleaned(tmp_path):
    store = Store(tmp_path / "store")
    store.ensure()
    runs = store.root / "runs"
    dead = runs / ".tmp-m__t__talos__0123456789-999999999-abcdef"  # no such pid
    old = runs / f".tmp-m__t__talos__0123456789-{os.getpid()}-fedcba"
    live = runs / f".tmp-m__t__talos__0123456789-{os.getppid()}-aaaaaa"  # a live writer, recent
    for p in (dead, old, live):
        p.mkdir()
        (p / "task_vector.safetensors").write_bytes(b"x")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    staging = store.staging("m__t__talos__0123456789")
    assert not dead.exists() and not old.exists() and live.exists() and staging.exists()


def test_corrupt_checkpoint_is_discarded_with_a_warning(tmp_path, capsys):
    from talos_core.pipeline import CalibrationSettings, FinetuneRequest

    store = tmp_path / "store"
    req = FinetuneRequest(model=MODEL, task=TASK, steps=2, max_train=32, max_val=16, max_test=16,
                          calibration=CalibrationSettings(calib_samples=8), batch_size=8)
    folder = store / "checkpoints" / req.run_id()
    folder.mkdir(parents=True)
    (folder / "checkpoint.json").write_text('{"step": 1, "conf')
    (folder / "checkpoint.safetensors").write_bytes(b"\x00" * 16)
    with pytest.warns(UserWarning, match="discarded the unreadable checkpoint"):
        assert main(["finetune", "--model", MODEL, "--task", TASK, "--store", str(store), *TINY]) == 0
    assert Store(store).has_run(req.run_id()) and not folder.exists()


def test_runs_lists_corrupt_runs(good_store, tmp_path, capsys):
    root = tmp_path / "store"
    shutil.copytree(good_store, root)
    assert main(["runs", "--store", str(root)]) == 0
    capsys.readouterr()
    talos = next(r for r in Store(root).runs() if r.manifest.method == "talos")
    (talos.path / "manifest.json").write_text('{"model": "tiny-text", "ta')
    assert main(["runs", "--store", str(root)]) == 1
    out = capsys.readouterr().out
    assert f"CORRUPT {talos.id}: corrupt JSON file {talos.path / 'manifest.json'}" in out
    assert "nonlinear" in out  # the other run is still listed


# --------------------------------------------------------------------------------------------
# the corrupted-store generator: truncate / garble / NaN / delete, for every artifact kind
# --------------------------------------------------------------------------------------------
def _nan_vector(path: Path) -> None:
    from talos_core.vectors import TaskVector

    tv = TaskVector.load(path)
    name = tv.names()[0]
    tv.values[name] = torch.full_like(tv.values[name], float("nan"))
    tv.save(path)


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif how == "garble":  # keep the header intact, overwrite the middle of the data with 0xFF
        start = 8 + struct.unpack("<Q", data[:8])[0] if path.suffix == ".safetensors" else len(data) // 3
        mid = start + (len(data) - start) // 2
        path.write_bytes(data[:mid] + b"\xff" * 64 + data[mid + 64:])
    elif how == "nan":
        _nan_vector(path)
    elif how == "delete":
        path.unlink()


DAMAGES = [(kind, how) for kind in ("manifest.json", "task_vector.safetensors", "mask.safetensors")
           for how in ("truncate", "garble", "nan", "delete")
           if not (how == "nan" and kind != "task_vector.safetensors")]


#: the artifacts each protocol reads for a sparse run (single: the task vector; masks: the mask)
READS = {"single": ("manifest.json", "task_vector.safetensors"), "masks": ("manifest.json", "mask.safetensors")}


@pytest.mark.parametrize("kind,how", DAMAGES)
@pytest.mark.parametrize("checksums", [True, False], ids=["checksums", "legacy"])
def test_corrupted_store(kind, how, checksums, good_store, tmp_path, capsys):
    """Every damaged artifact of a sparse run makes ``evaluate single`` and ``evaluate masks`` fail with one
    sentence (naming the file where there is one), writes no result, and ``talos runs`` shows the run as corrupt
    (a damaged manifest always; a damaged artifact with ``--verify``). A run of the older format (no checksums) is
    refused whole, damaged or not: its files cannot be checked."""
    root = tmp_path / "store"
    shutil.copytree(good_store, root)
    run = next(r for r in Store(root).runs() if r.manifest.method == "talos")
    if not checksums and kind == "manifest.json":
        pytest.skip("a damaged manifest fails the same way with or without checksums (tested with them)")
    if not checksums:  # a store written before checksums: its weights are never read unchecked
        _legacy(run)
    target = run.path / kind
    _damage(target, how)
    argv = ["--model", MODEL, "--tasks", TASK, "--store", str(root), "--no-train", *TINY]
    for protocol in ("single", "masks"):
        before = _files(root / "results")
        code = main(["evaluate", protocol, *argv])
        if not checksums and how != "delete":
            _one_sentence(capsys, code, "records no SHA-256 of it, so it is not used")
            assert _files(root / "results") == before
            continue
        if kind not in READS[protocol] and how != "delete":  # the protocol does not read the damaged file
            assert code == 0, capsys.readouterr().err
            capsys.readouterr()
            continue
        # a deleted artifact is missed by every protocol (a run is used whole or not at all)
        line = _one_sentence(capsys, code, "")
        if not (kind == "manifest.json" and how == "delete"):
            assert str(target) in line, line
        else:  # no manifest: the folder is named as the corrupt run it is
            assert f"run folder {run.path} has no manifest.json" in line
        assert _files(root / "results") == before
    code = main(["runs", "--store", str(root), "--verify"])
    out = capsys.readouterr().out
    assert code == 1 and f"CORRUPT {run.id}" in out


def test_a_run_kept_without_its_weights_is_named_when_training_is_not_allowed(good_store, tmp_path, capsys):
    root = tmp_path / "store"  # the store as JSON only (talos export): manifests, no artifacts
    shutil.copytree(good_store, root, ignore=shutil.ignore_patterns("*.safetensors"))
    before = _files(root / "results")
    code = main(["evaluate", "single", "--model", MODEL, "--tasks", TASK, "--store", str(root), "--no-train", *TINY])
    line = _one_sentence(capsys, code, "is a manifest without its weights")
    assert "allow training to train it again" in line and _files(root / "results") == before


def test_missing_mask_of_a_sparse_run_is_an_error_not_the_vector_support(good_store, tmp_path, capsys):
    from talos_core.evaluation.maskstats import run_mask

    root = tmp_path / "store"
    shutil.copytree(good_store, root)
    store = Store(root)
    talos = next(r for r in store.runs() if r.manifest.method == "talos")
    nonlinear = next(r for r in store.runs() if r.manifest.method == "nonlinear")
    assert run_mask(nonlinear) is not None  # a method without a mask: its task vector's support
    (talos.path / "mask.safetensors").unlink()
    with pytest.raises(TalosError, match=r"has no mask.safetensors"):
        run_mask(talos)
    code = main(["evaluate", "masks", "--model", MODEL, "--tasks", TASK, "--store", str(root), "--no-train", *TINY])
    _one_sentence(capsys, code, str(talos.path / "mask.safetensors"))


def test_garbled_task_vector_names_the_file(tmp_path):
    from talos_core.vectors import TaskVector

    path = tmp_path / "tv.safetensors"
    TaskVector.from_dense({"w": torch.tensor([0.0, 2.0, 0.0, 0.0])}).save(path)
    tensors = {"w::values": torch.tensor([2.0]), "w::indices": torch.tensor([7])}  # index outside the 4 entries
    from talos_core.atomic import atomic_save_safetensors

    atomic_save_safetensors(tensors, path, {"format": "talos-task-vector/1", "shapes": json.dumps({"w": [4]})})
    with pytest.raises(TalosError, match=f"task vector {path} is corrupt: entry 'w' does not fit its shape"):
        TaskVector.load(path)
    atomic_save_safetensors({"w::values": torch.tensor([float("inf")])}, path,
                            {"format": "talos-task-vector/1", "shapes": json.dumps({"w": [1]})})
    with pytest.raises(TalosError, match="holds non-finite values"):
        TaskVector.load(path)
    atomic_save_safetensors({"x::values": torch.ones(1)}, path,
                            {"format": "talos-task-vector/1", "shapes": json.dumps({"w": [1]})})
    with pytest.raises(TalosError, match="header does not match its tensors"):
        TaskVector.load(path)


def test_manifest_round_trip_with_artifacts():
    m = RunManifest(format="talos-run/1", model="m", task="t", method="talos",
                    artifacts={"task_vector.safetensors": "ab" * 32})
    assert RunManifest.from_dict(m.to_dict(), "x") == m
    assert "artifacts" not in RunManifest(model="m", task="t", method="talos").to_dict()
