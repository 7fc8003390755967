"""Results store: atomic writes, staging + commit, listing that survives corrupt runs."""

from __future__ import annotations

import pandas as pd
import pytest

from talos_core.atomic import atomic_write_json, read_json
from talos_core.errors import TalosError
from talos_core.store import Store, run_id

SHA = "0" * 64


def _manifest(task: str = "t", method: str = "talos", **extra) -> tuple[str, dict]:
    """``(run id, manifest)`` of a complete current-format run of model ``m`` (its folder name is its run id)."""
    from talos_core.store import RunManifest

    rid, sparse = run_id("m", task, method, {}), method == "talos"
    metrics = {"zero_shot_test_acc": 0.5, "zero_shot_val_acc": 0.5, "finetuned_test_acc": 0.9,
               "finetuned_val_acc": 0.9, "eval_precision": "fp32", "vector_nnz": 3, "vector_norm": 1.0,
               "theta_numel": 30, **({"mask_density": 0.1, "maskable_numel": 30} if sparse else {})}
    m = RunManifest(run_id=rid, model="m", task=task, method=method, family="text-encoder",
                    sparsity=0.9 if sparse else None, seed=0, sparse_method=sparse,
                    data_sizes={"train": 8, "val": 4, "test": 4}, metrics=metrics, device="cpu",
                    created="2025-01-01T00:00:00+0000", train_precision="fp32", curve=[],
                    artifacts={"task_vector.safetensors": SHA, **({"mask.safetensors": SHA} if sparse else {})})
    return rid, {**m.to_dict(), **extra}


def _commit(store: Store, task: str = "t", method: str = "talos", **extra) -> str:
    rid, manifest = _manifest(task, method, **extra)
    st = store.staging(rid)
    atomic_write_json(st / "manifest.json", manifest)
    store.commit(st, rid)
    return rid


def test_run_id_is_deterministic():
    a = run_id("m", "t", "talos", {"x": 1, "y": [1, 2]})
    assert a == run_id("m", "t", "talos", {"y": [1, 2], "x": 1})
    assert a != run_id("m", "t", "talos", {"x": 2, "y": [1, 2]})


def test_staging_commit_and_listing(tmp_path):
    store = Store(tmp_path / "s")
    r1, r2 = (_commit(store, task) for task in ("r1", "r2"))
    # replacing an existing run is atomic and leaves no staging folders
    st = store.staging(r1)
    atomic_write_json(st / "manifest.json", {**_manifest("r1")[1], "created": "later"})
    store.commit(st, r1)
    assert store.get_run(r1).manifest.created == "later"
    assert sorted(p.name for p in (tmp_path / "s" / "runs").iterdir()) == sorted([r1, r2])
    (tmp_path / "s" / "runs" / r2 / "manifest.json").write_text("{broken")
    assert [r.id for r in store.runs()] == [r1]
    with pytest.raises(TalosError, match="corrupt"):
        store.get_run(r2)
    with pytest.raises(TalosError, match="no run"):
        store.get_run("zzz")


def test_tables_round_trip(tmp_path):
    store = Store(tmp_path)
    df = pd.DataFrame({"method": ["talos"] * 2, "task": ["a", "b"], "zero_shot_acc": [0.5, float("nan")],
                       "finetuned_acc": [0.6, 0.7], "split": ["test"] * 2})
    store.write_table("single", "x", df, note="hi")
    back = store.read_table("single", "x")
    assert list(back.columns) == list(df.columns) and back["zero_shot_acc"].isna().iloc[1]
    assert store.read_result("single", "x")["note"] == "hi"
    assert store.results("single") == ["x"]
    assert not list((tmp_path / "results" / "single").glob(".*"))


def test_read_json_errors(tmp_path):
    with pytest.raises(TalosError, match="missing"):
        read_json(tmp_path / "nope.json")


def test_export_keeps_results_and_manifests_only(tmp_path):
    import torch

    from talos_core.store import export_store, save_mask

    src = Store(tmp_path / "src")
    rid, manifest = _manifest()
    st = src.staging(rid)
    atomic_write_json(st / "manifest.json", manifest)
    save_mask({"w": torch.ones(3, dtype=torch.bool)}, st / "mask.safetensors")
    src.commit(st, rid)
    src.write_table("single", "x", pd.DataFrame([{"method": "talos", "task": "t", "zero_shot_acc": 0.5,
                                                  "finetuned_acc": 0.9, "split": "test"}]))
    counts = export_store(src.root, tmp_path / "dst")
    assert counts == {"results": 1, "manifests": 1, "artifacts": 0}
    dst = Store(tmp_path / "dst")
    assert dst.read_table("single", "x")["finetuned_acc"].tolist() == [0.9]
    assert [r.id for r in dst.runs()] == [rid] and dst.get_run(rid).mask() is None
    with pytest.raises(TalosError, match="not a results store"):
        export_store(tmp_path / "nothing", tmp_path / "dst2")


def test_export_referenced_only_leaves_out_unused_runs(tmp_path):
    from talos_core.store import export_store

    src = Store(tmp_path / "src")
    _, bbb = (_commit(src, task) for task in ("aaa", "bbb"))
    src.write_table("single", "x", pd.DataFrame({"a": [1]}), runs={"talos": {"t": bbb}})
    counts = export_store(src.root, tmp_path / "dst", referenced_only=True)
    assert counts["manifests"] == 1
    assert [r.id for r in Store(tmp_path / "dst").runs()] == [bbb]
    assert export_store(src.root, tmp_path / "all")["manifests"] == 2


def test_export_replace_re_ships_a_suite_and_keeps_everything_else(tmp_path, capsys):
    """`talos export --replace`: the destination's old results of the re-shipped (suite, model) go, results of other
    suites, models and single commands stay, and runs no remaining result refers to are removed."""
    from talos_core.atomic import atomic_write_json
    from talos_core.cli import main

    dst, src = Store(tmp_path / "dst"), Store(tmp_path / "src")
    r_old, r_kept, r_text, r_single = (_commit(dst, t) for t in ("old", "kept", "text", "single"))
    res = dst.root / "results"
    atomic_write_json(res / "addition" / "vision__m__talos.json", {"suite": "vision", "model": "m", "runs": [r_kept]})
    atomic_write_json(res / "addition" / "vision__m__gone.json", {"suite": "vision", "model": "m", "runs": [r_old]})
    atomic_write_json(res / "suite" / "vision.json", {"model": "m", "created": "old"})
    atomic_write_json(res / "addition" / "vision__m2__talos.json", {"suite": "vision", "model": "m2", "runs": []})
    atomic_write_json(res / "addition" / "text__m__talos.json", {"suite": "text", "model": "m", "runs": [r_text]})
    atomic_write_json(res / "single" / "mine.json", {"model": "m", "runs": [r_single]})
    r_new = _commit(src, "new")
    atomic_write_json(src.root / "results" / "addition" / "vision__m__talos.json",
                      {"suite": "vision", "model": "m", "runs": [r_new]})
    atomic_write_json(src.root / "results" / "suite" / "vision.json", {"model": "m", "created": "new"})
    assert main(["export", "--store", str(src.root), "--to", str(dst.root), "--replace", "--referenced-only"]) == 0
    assert "removed 3 result files of the re-shipped suites and 2 runs" in capsys.readouterr().out
    left = sorted(str(p.relative_to(res)) for p in res.rglob("*.json"))
    assert left == ["addition/text__m__talos.json", "addition/vision__m2__talos.json",
                    "addition/vision__m__talos.json", "single/mine.json", "suite/vision.json"]
    assert read_json(res / "suite" / "vision.json")["created"] == "new"
    assert sorted(r.id for r in dst.runs()) == sorted([r_new, r_text, r_single])


def test_run_manifest_round_trip_and_defaults():
    from talos_core.store import RunManifest

    full = {"format": "talos-run/1", "run_id": "m__t__talos__x", "model": "m", "task": "t", "method": "talos",
            "family": "text", "sparsity": 0.9, "seed": 0, "eval_mode": "nonlinear", "sparse_method": True,
            "config": {"seed": 0}, "request": {"steps": 5}, "data_sizes": {"train": 8}, "metrics": {"acc": 0.5},
            "timings": {"train_s": 1.0}, "info": {}, "history": [{"step": 1}], "device": "cpu",
            "versions": {"torch": "2"}, "created": "2025-01-01T00:00:00+0000"}
    m = RunManifest.from_dict(full, "x.json")
    assert m.to_dict() == full and list(m.to_dict()) == list(full)  # the file's keys, in the file's order
    minimal = RunManifest.from_dict({"format": "talos-run/1", "model": "m", "task": "t", "method": "nonlinear",
                                     "config": None}, "x.json")
    assert (minimal.eval_mode, minimal.sparsity, minimal.sparse_method, minimal.config) == ("nonlinear", None,
                                                                                             False, {})


@pytest.mark.parametrize("payload,needle", [
    ({k: v for k, v in _manifest()[1].items() if k != "model"}, "incomplete: it has no 'model'"),
    ({**_manifest()[1], "metrics": [1]}, "corrupt: 'metrics' must be an object"),
    ({**_manifest()[1], "sparsity": "0.9"}, "corrupt: 'sparsity' must be a number"),
    ({**_manifest()[1], "seed": True}, "corrupt: 'seed' must be an integer"),
    (["model"], "corrupt: expected a JSON object"),
    # what probing once got through: a current-format manifest without checksums, edited numbers, a manifest in
    # another run's folder
    ({**_manifest()[1], "artifacts": None}, "incomplete: it has no 'artifacts'"),
    ({**_manifest()[1], "artifacts": {"mask.safetensors": SHA}}, "records no SHA-256 of task_vector.safetensors"),
    ({**_manifest()[1], "artifacts": {"task_vector.safetensors": SHA}}, "records no SHA-256 of mask.safetensors"),
    ({**_manifest()[1], "format": "talos-run/9"}, "'format' is 'talos-run/9', not 'talos-run/2'"),
    ({**_manifest()[1], "metrics": {**_manifest()[1]["metrics"], "finetuned_test_acc": 7.5}},
     "metrics.finetuned_test_acc = 7.5, which must be an accuracy in [0, 1]"),
    ({**_manifest()[1], "seed": None}, "incomplete: it has no 'seed'"),
    ({**_manifest()[1], "data_sizes": {"train": -1, "val": 1, "test": 1}},
     "data_sizes.train = -1, which must be a whole number ≥ 0"),
    ({**_manifest()[1], "sparsity": 1.5}, "sparsity = 1.5, which must be a sparsity in [0, 1)"),
    ({**_manifest()[1], "task": "other"}, "not its folder's name"),
    ({**_manifest()[1], "run_id": "m__t__talos__0000000000"}, "its run_id says 'm__t__talos__0000000000'"),
])
def test_bad_manifests_are_one_sentence_naming_the_file(tmp_path, payload, needle):
    store = Store(tmp_path / "s")
    rid = _commit(store)
    path = tmp_path / "s" / "runs" / rid / "manifest.json"
    atomic_write_json(path, payload)
    with pytest.raises(TalosError) as exc:
        store.get_run(rid)
    assert needle in str(exc.value) and str(path) in str(exc.value) and "\n" not in str(exc.value)
    assert list(store.runs()) == []  # listing skips it
    assert [name for name, _ in store.corrupt_runs()] == [rid]  # and `talos runs` lists it as corrupt


def test_legacy_manifest_without_checksums_reads(tmp_path):
    """Only the older format talos-run/1 may lack checksums (33 of the shipped cached_results manifests do)."""
    store = Store(tmp_path / "s")
    rid = _commit(store, format="talos-run/1", artifacts=None)
    assert store.get_run(rid).manifest.artifacts is None and store.corrupt_runs() == []


def test_find_runs_matches_given_fields(tmp_path):
    store = Store(tmp_path)
    a, b = (_commit(store, method=method) for method in ("talos", "nonlinear"))
    assert sorted(r.id for r in store.find_runs(model="m")) == sorted([a, b])
    assert [r.id for r in store.find_runs(model="m", task="t", method="nonlinear")] == [b]
    assert store.find_runs(task="other") == []
