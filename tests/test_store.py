"""Results store: atomic writes, staging + commit, listing that survives corrupt runs."""

from __future__ import annotations

import pandas as pd
import pytest

from talos_core.atomic import atomic_write_json, read_json
from talos_core.errors import TalosError
from talos_core.store import Store, run_id


def test_run_id_is_deterministic():
    a = run_id("m", "t", "talos", {"x": 1, "y": [1, 2]})
    assert a == run_id("m", "t", "talos", {"y": [1, 2], "x": 1})
    assert a != run_id("m", "t", "talos", {"x": 2, "y": [1, 2]})


def test_staging_commit_and_listing(tmp_path):
    store = Store(tmp_path / "s")
    for rid in ("r1", "r2"):
        st = store.staging(rid)
        atomic_write_json(st / "manifest.json", {"model": "m", "task": rid, "method": "talos"})
        store.commit(st, rid)
    # replacing an existing run is atomic and leaves no staging folders
    st = store.staging("r1")
    atomic_write_json(st / "manifest.json", {"model": "m", "task": "r1", "method": "nonlinear"})
    store.commit(st, "r1")
    assert store.get_run("r1").manifest.method == "nonlinear"
    assert sorted(p.name for p in (tmp_path / "s" / "runs").iterdir()) == ["r1", "r2"]
    (tmp_path / "s" / "runs" / "r2" / "manifest.json").write_text("{broken")
    assert [r.id for r in store.runs()] == ["r1"]
    with pytest.raises(TalosError, match="corrupt"):
        store.get_run("r2")
    with pytest.raises(TalosError, match="no run"):
        store.get_run("zzz")


def test_tables_round_trip(tmp_path):
    store = Store(tmp_path)
    df = pd.DataFrame({"task": ["a", "b"], "acc": [0.5, float("nan")]})
    store.write_table("single", "x", df, note="hi")
    back = store.read_table("single", "x")
    assert list(back.columns) == ["task", "acc"] and back["acc"].isna().iloc[1]
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
    st = src.staging("r1")
    atomic_write_json(st / "manifest.json", {"model": "m", "task": "t", "method": "talos"})
    save_mask({"w": torch.ones(3, dtype=torch.bool)}, st / "mask.safetensors")
    src.commit(st, "r1")
    src.write_table("single", "x", pd.DataFrame({"a": [1]}))
    counts = export_store(src.root, tmp_path / "dst")
    assert counts == {"results": 1, "manifests": 1, "artifacts": 0}
    dst = Store(tmp_path / "dst")
    assert dst.read_table("single", "x")["a"].tolist() == [1]
    assert [r.id for r in dst.runs()] == ["r1"] and dst.get_run("r1").mask() is None
    with pytest.raises(TalosError, match="not a results store"):
        export_store(tmp_path / "nothing", tmp_path / "dst2")


def test_export_referenced_only_leaves_out_unused_runs(tmp_path):
    from talos_core.store import export_store

    src = Store(tmp_path / "src")
    for rid in ("m__t__talos__aaa", "m__t__talos__bbb"):
        st = src.staging(rid)
        atomic_write_json(st / "manifest.json", {"model": "m", "task": "t", "method": "talos"})
        src.commit(st, rid)
    src.write_table("single", "x", pd.DataFrame({"a": [1]}), runs={"talos": {"t": "m__t__talos__bbb"}})
    counts = export_store(src.root, tmp_path / "dst", referenced_only=True)
    assert counts["manifests"] == 1
    assert [r.id for r in Store(tmp_path / "dst").runs()] == ["m__t__talos__bbb"]
    assert export_store(src.root, tmp_path / "all")["manifests"] == 2


def test_run_manifest_round_trip_and_defaults():
    from talos_core.store import RunManifest

    full = {"format": "talos-run/1", "run_id": "m__t__talos__x", "model": "m", "task": "t", "method": "talos",
            "family": "text", "sparsity": 0.9, "seed": 0, "eval_mode": "nonlinear", "sparse_method": True,
            "config": {"seed": 0}, "request": {"steps": 5}, "data_sizes": {"train": 8}, "metrics": {"acc": 0.5},
            "timings": {"train_s": 1.0}, "info": {}, "history": [{"step": 1}], "device": "cpu",
            "versions": {"torch": "2"}, "created": "2025-01-01T00:00:00+0000"}
    m = RunManifest.from_dict(full, "x.json")
    assert m.to_dict() == full and list(m.to_dict()) == list(full)  # the file's keys, in the file's order
    minimal = RunManifest.from_dict({"model": "m", "task": "t", "method": "nonlinear", "config": None}, "x.json")
    assert (minimal.eval_mode, minimal.sparsity, minimal.sparse_method, minimal.config) == ("nonlinear", None,
                                                                                             False, {})


@pytest.mark.parametrize("payload,needle", [
    ({"task": "t", "method": "talos"}, "incomplete: it has no 'model'"),
    ({"model": "m", "task": "t", "method": "talos", "metrics": [1]}, "corrupt: 'metrics' must be an object"),
    ({"model": "m", "task": "t", "method": "talos", "sparsity": "0.9"}, "corrupt: 'sparsity' must be a number"),
    ({"model": "m", "task": "t", "method": "talos", "seed": True}, "corrupt: 'seed' must be an integer"),
    (["model"], "corrupt: expected a JSON object"),
])
def test_bad_manifests_are_one_sentence_naming_the_file(tmp_path, payload, needle):
    store = Store(tmp_path / "s")
    st = store.staging("r1")
    atomic_write_json(st / "manifest.json", {"model": "m", "task": "t", "method": "talos"})
    store.commit(st, "r1")
    path = tmp_path / "s" / "runs" / "r1" / "manifest.json"
    atomic_write_json(path, payload)
    with pytest.raises(TalosError) as exc:
        store.get_run("r1")
    assert needle in str(exc.value) and str(path) in str(exc.value) and "\n" not in str(exc.value)
    assert list(store.runs()) == []  # listing skips it


def test_find_runs_matches_given_fields(tmp_path):
    store = Store(tmp_path)
    for rid, method in (("a", "talos"), ("b", "nonlinear")):
        st = store.staging(rid)
        atomic_write_json(st / "manifest.json", {"model": "m", "task": "t", "method": method})
        store.commit(st, rid)
    assert [r.id for r in store.find_runs(model="m")] == ["a", "b"]
    assert [r.id for r in store.find_runs(model="m", task="t", method="nonlinear")] == ["b"]
    assert store.find_runs(task="other") == []
