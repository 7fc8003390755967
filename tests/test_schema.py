"""talos_core.schema: the one home of the store format (kinds, names, paths, readers, default stores).

Checks it against its description for people (``talos_core/evaluation/SCHEMA.md``), that importing it (and
the dashboard's data layer) never imports torch, and that the one preview reader refuses incomplete or
garbled files with one sentence naming the file.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from dashboard_fixtures import MODEL, REPO, SUITE, TASKS

from talos_core import result_arrays, schema
from talos_core.errors import TalosError
from talos_core.schema import CorruptResult, MissingResult

SCHEMA_MD = REPO / "talos_core" / "evaluation" / "SCHEMA.md"


def _name(*parts: str) -> str:
    return schema.result_name(SUITE, MODEL, *parts)


# --------------------------------------------------------------------------------------------
# SCHEMA.md and schema.py agree
# --------------------------------------------------------------------------------------------
def _schema_rows() -> dict[str, tuple[str, str]]:
    """``{kind: (name pattern, content)}`` of SCHEMA.md's table, in its order."""
    rows = {}
    for line in SCHEMA_MD.read_text().splitlines():
        m = re.match(r"^\| `([a-z_]+)` \| `([^`]+)` \| (.*) \|$", line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3))
    return rows


def _columns(text: str) -> tuple[str, ...]:
    return tuple(c.strip() for c in text.split(","))


def test_schema_md_lists_the_kinds_of_schema_py_in_order():
    rows = _schema_rows()
    assert list(rows) == list(schema.KINDS)


@pytest.mark.parametrize("kind", list(schema.KINDS))
def test_schema_md_row_matches_kind(kind):
    pattern, content = _schema_rows()[kind]
    info = schema.KINDS[kind]
    parts = pattern.split(schema.SEP)
    assert parts[0] == "<suite>"
    assert tuple(p.strip("<>") for p in parts[1:]) == info.parts, pattern
    table = re.match(r"^table[^`]*`([^`]+)`", content)
    assert (table is not None) == info.table, content
    if table:
        assert _columns(table.group(1)) == info.columns
    for key in info.fields:
        assert re.search(rf'[`"]{key}[`"]', content), f"SCHEMA.md's {kind} row does not name field {key!r}"
    pair = re.search(r"`<suite>__<model>__<m1>__vs__<m2>`.*?table `([^`]+)`", content)
    assert (pair is not None) == bool(info.pair_columns)
    if pair:
        assert _columns(pair.group(1)) == info.pair_columns


@pytest.mark.parametrize("kind", list(schema.KINDS))
def test_schema_md_row_names_the_optional_columns_and_fields(kind):
    """Optional columns/fields (per-example correctness, 95% intervals) are in SCHEMA.md's row too."""
    _, content = _schema_rows()[kind]
    info = schema.KINDS[kind]
    optional = re.search(r"optional columns `([^`]+)`", content)
    assert (optional is not None) == bool(info.optional_columns), content
    if optional:
        assert _columns(optional.group(1)) == info.optional_columns
    assert not set(info.optional_columns) & set(info.columns)
    for key in info.optional_fields:
        assert re.search(rf'optional.*[`"]{key}[`":]', content), f"SCHEMA.md's {kind} row lacks optional {key!r}"


def test_interval_columns_follow_the_means():
    comp = schema.KINDS["comparison"]
    assert comp.optional_columns == schema.interval_columns(*schema.COMPARISON_MEANS)
    assert all(m in comp.columns for m in schema.COMPARISON_MEANS)
    abl = schema.KINDS["sparsity_ablation"]
    assert all(c[: -len("_lo")] in abl.columns for c in abl.optional_columns)


def test_schema_md_method_lists_match_the_catalogue():
    text = SCHEMA_MD.read_text()
    sparse = re.search(r"for sparse methods \(([^)]*)\)", text).group(1)
    assert set(re.findall(r"`([^`]+)`", sparse)) == {m for m, i in schema.METHODS.items() if i.sparse}
    posthoc = re.search(r"or a post-hoc one \(([^)]*)\)", text).group(1)
    assert set(re.findall(r"`([^`]+)`", posthoc)) == {m for m, i in schema.METHODS.items() if i.posthoc}
    assert all(schema.METHODS[m].base_method == "nonlinear" for m in schema.METHODS if schema.METHODS[m].posthoc)


def test_schema_md_names_paths_keys_and_twin():
    text = SCHEMA_MD.read_text()
    assert "talos_core/schema.py" in text
    assert "`results/<kind>/<name>.json`" in text
    assert schema.result_path("S", "<kind>", "<name>").relative_to("S").as_posix() == "results/<kind>/<name>.json"
    assert f"`{result_arrays.array_key_base('<eval_task>')}`" in text
    assert f"`{result_arrays.array_key_jvp('<eval_task>', '<vector_task>')}`" in text
    assert f"format: {result_arrays.PREVIEW_FORMAT}" in text


# --------------------------------------------------------------------------------------------
# names
# --------------------------------------------------------------------------------------------
def test_slug_is_ascii_only_like_the_engine():
    assert schema.slug("café-ü/model:1") == "caf----model-1"
    assert schema.result_name("s", "Modèle", "tâlos") == "s__Mod-le__t-los"
    with pytest.raises(TalosError, match="suite name"):
        schema.result_name("sé", "m")


@pytest.mark.parametrize("kind", list(schema.KINDS))
def test_result_names_round_trip(kind):
    info = schema.KINDS[kind]
    values = {p: f"{p}-x" for p in info.parts}
    name = schema.SEP.join(["s", *(values[p] for p in info.parts)])
    assert schema.parse_result_name(kind, name) == {"suite": "s", **values}
    assert schema.parse_result_name(kind, name + "__extra") is None
    assert schema.parse_result_name("nonsense", name) is None


def test_mask_iou_pair_names():
    assert schema.parse_result_name("mask_iou", "s__m__talos__vs__lota") == {
        "suite": "s", "model": "m", "method": "talos", "vs": "lota"}
    assert schema.parse_result_name("addition", "s__m__talos__vs__lota") is None
    assert schema.parse_result_name("addition", "s____talos") is None


def test_iter_results_skips_hidden_unknown_and_misnamed(tmp_path):
    for rel in ("results/addition/s__m__talos.json", "results/addition/.s__m__x.json.tmp.json",
                "results/addition/s__m.json", "results/unknown/s__m.json", "results/suite/s.json"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}")
    assert [(k, n) for k, n, _ in schema.iter_results(tmp_path)] == [("addition", "s__m__talos"), ("suite", "s")]
    assert list(schema.iter_results(tmp_path / "nope")) == []


# --------------------------------------------------------------------------------------------
# default stores
# --------------------------------------------------------------------------------------------
def test_default_store_rule(tmp_path):
    assert schema.default_store({}) == Path("runs")
    assert schema.default_store({"TALOS_STORE": " /x/y "}) == Path("/x/y")
    assert schema.shipped_store() == REPO / "cached_results"
    assert schema.viewer_store({}) == REPO / "cached_results"
    assert schema.viewer_store({"TALOS_STORE": str(tmp_path)}) == tmp_path


def test_cli_store_defaults_follow_the_rule(monkeypatch, tmp_path):
    from talos_core.cli import build_parser

    monkeypatch.delenv("TALOS_STORE", raising=False)
    parser = build_parser()
    assert parser.parse_args(["runs"]).store == "runs"
    assert parser.parse_args(["finetune", "--model", "m", "--task", "t"]).store == "runs"
    assert parser.parse_args(["dashboard"]).store == str(REPO / "cached_results")
    monkeypatch.setenv("TALOS_STORE", str(tmp_path))
    parser = build_parser()
    commands = (["runs"], ["dashboard"], ["finetune", "--model", "m", "--task", "t"])
    assert {parser.parse_args(a).store for a in commands} == {str(tmp_path)}
    assert parser.parse_args(["runs", "--store", "elsewhere"]).store == "elsewhere"


# --------------------------------------------------------------------------------------------
# torch-free imports
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("modules", ["talos_core", "talos_core.schema", "talos_core.result_arrays", "dashboard.data",
                                     "dashboard.data, dashboard.views, dashboard.figures, dashboard.jobs"])
def test_import_does_not_import_torch(modules):
    code = f"import sys\nimport {modules}\nassert 'torch' not in sys.modules, 'torch imported'\nprint('ok')\n"
    out = subprocess.run([sys.executable, "-c", code], cwd=str(REPO), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


# --------------------------------------------------------------------------------------------
# readers
# --------------------------------------------------------------------------------------------
@pytest.fixture()
def store(fixture_store, tmp_path):
    return shutil.copytree(fixture_store, tmp_path / "store")


def test_read_result_missing_and_corrupt(store):
    with pytest.raises(MissingResult, match=r"has no addition result 's__m__x'.*does not exist") as exc:
        schema.read_result(store, "addition", "s__m__x")
    assert exc.value.level == "info"
    path = schema.result_path(store, "negation", _name("talos"))
    path.write_text("[1, 2]")
    with pytest.raises(CorruptResult, match=re.escape(str(path))):
        schema.read_result(store, "negation", _name("talos"))
    with pytest.raises(CorruptResult, match=r"lacks field.*selected_alpha"):
        schema.require_fields({}, "addition", "x")


def _meta(store, name):
    path = schema.result_path(store, "preview", name)
    return path, json.loads(path.read_text())


def _rewrite_arrays(store, name, change):
    from safetensors.numpy import load_file, save

    _, arr = schema.preview_paths(store, name)
    arrays = load_file(str(arr))
    change(arrays)
    arr.write_bytes(save(arrays))
    return arr


def test_preview_reader_reads_the_fixture(fixture_store):
    cache = result_arrays.load_preview(fixture_store, _name("talos"))
    assert cache.tasks == list(TASKS) and len(cache.eval_tasks) == len(TASKS) + 1
    assert cache.stack(TASKS[0]).shape == (len(TASKS), *cache.base[TASKS[0]].shape)
    with pytest.raises(MissingResult):
        result_arrays.load_preview(fixture_store, _name("nope"))


def test_preview_reader_refuses_a_missing_jvp_array(store):
    name = _name("talos")
    key = result_arrays.array_key_jvp(TASKS[1], TASKS[2])
    arr = _rewrite_arrays(store, name, lambda a: a.pop(key))
    with pytest.raises(CorruptResult, match=rf"{re.escape(str(arr))} lacks 1 array.*{re.escape(key)}.*incomplete"):
        result_arrays.load_preview(store, name)


def test_preview_reader_refuses_garbled_or_missing_arrays(store):
    name = _name("talos")
    _, arr = schema.preview_paths(store, name)
    arr.write_bytes(b"garbage")
    with pytest.raises(CorruptResult, match=rf"{re.escape(str(arr))} is corrupt"):
        result_arrays.load_preview(store, name)
    arr.unlink()
    with pytest.raises(CorruptResult, match=rf"incomplete: its arrays file {re.escape(str(arr))} is missing"):
        result_arrays.load_preview(store, name)


@pytest.mark.parametrize("arrays", ["../addition/x.safetensors", "/etc/passwd", "..", "", 3])
def test_preview_arrays_must_be_in_the_preview_folder(store, arrays):
    name = _name("talos")
    path, meta = _meta(store, name)
    path.write_text(json.dumps({**meta, "arrays": arrays}))
    with pytest.raises(CorruptResult, match=rf"{re.escape(str(path))} names arrays .* not a file in its folder"):
        result_arrays.load_preview(store, name)


def test_preview_reader_refuses_bad_shapes_and_labels(store):
    name = _name("talos")
    path, meta = _meta(store, name)
    key = result_arrays.array_key_jvp(TASKS[0], TASKS[0])
    arr = _rewrite_arrays(store, name, lambda a: a.update({key: a[key][:, :3].copy()}))
    with pytest.raises(CorruptResult, match=rf"{re.escape(str(arr))} has {re.escape(key)} of shape"):
        result_arrays.load_preview(store, name)
    meta["labels"][TASKS[0]] = meta["labels"][TASKS[0]][:-1]
    path.write_text(json.dumps(meta))
    with pytest.raises(CorruptResult, match=rf"{len(meta['labels'][TASKS[0]])} labels in {re.escape(str(path))}"):
        result_arrays.load_preview(store, name)
    path.write_text(json.dumps({**meta, "tasks": "digits"}))
    with pytest.raises(CorruptResult, match=rf"{re.escape(str(path))} has malformed tasks"):
        result_arrays.load_preview(store, name)
    path.write_text(json.dumps({k: v for k, v in meta.items() if k != "labels"}))
    with pytest.raises(CorruptResult, match=r"lacks field.*labels"):
        result_arrays.load_preview(store, name)


def test_preview_accuracy_is_numpy_arithmetic():
    cache = result_arrays.PreviewCache(["a"], ["a", "b"], {"a": np.array([0, 1]), "b": np.array([], dtype=np.int64)},
                                {"a": np.array([[1.0, 0.0], [1.0, 0.0]]), "b": np.zeros((0, 2))},
                                {("a", "a"): np.array([[0.0, 0.0], [-2.0, 2.0]]), ("b", "a"): np.zeros((0, 2))})
    assert result_arrays.preview_accuracy(cache, {"a": 1.0}, ["a"]) == {"a": 1.0}
    assert np.isnan(result_arrays.preview_accuracy(cache, {}, ["b"])["b"])
    np.testing.assert_allclose(result_arrays.preview_logits(cache, {"a": 0.5}, "a"), [[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(TalosError, match="no cached evaluation task"):
        result_arrays.preview_logits(cache, {}, "zzz")
