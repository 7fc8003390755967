"""The method registries against the catalogue (talos_core.schema.METHODS), ``talos methods``, and the
flags that decide a run's identity. No training: < 5 s."""

from __future__ import annotations

import pytest

from talos_core import schema
from talos_core.cli import main
from talos_core.errors import TalosError
from talos_core.masks import CalibrationConfig
from talos_core.methods.merging import POSTHOC_METHODS, PosthocSpec
from talos_core.methods.posthoc import BASE_METHOD
from talos_core.pipeline import FinetuneRequest
from talos_core.runners import FINETUNE_METHODS, get_method, method_table
from talos_core.runners.base import FinetuneMethod, MethodContext


def test_every_registered_method_has_a_catalogue_entry_of_its_kind_and_vice_versa() -> None:
    for name in FINETUNE_METHODS:
        assert schema.method_info(name).kind == "finetune", name
    for name in POSTHOC_METHODS:
        assert schema.method_info(name).kind == "posthoc", name
    for name, info in schema.METHODS.items():
        registry = FINETUNE_METHODS if info.kind == "finetune" else POSTHOC_METHODS
        assert name in registry, f"catalogued {info.kind} method {name!r} is not registered"
    assert list(FINETUNE_METHODS) == [n for n, i in schema.METHODS.items() if i.kind == "finetune"]


def test_method_flags_are_the_catalogue_s() -> None:
    for name, method in FINETUNE_METHODS.items():
        info = schema.METHODS[name]
        assert method.name == name and method.info is info
        assert (method.sparse, method.calibrates, method.eval_mode) == (info.sparse, info.calibrates, info.eval_mode)
        assert (method.label, method.family) == (info.label, info.family)
    for name, spec in POSTHOC_METHODS.items():
        assert spec.name == name and spec.label == schema.method_label(name)
        assert schema.METHODS[name].base_method == BASE_METHOD


def test_entries_must_match_their_catalogue_kind() -> None:
    with pytest.raises(TalosError, match="not fine-tuning"):
        FinetuneMethod("ties", "a post-hoc id", lambda ctx: None)
    with pytest.raises(TalosError, match="unknown method 'mine'"):
        FinetuneMethod("mine", "not catalogued", lambda ctx: None)
    with pytest.raises(TalosError, match="not post-hoc"):
        PosthocSpec("talos", "a fine-tuning id", merge=dict, single_task=dict, grid={})


@pytest.mark.parametrize("name", sorted(FINETUNE_METHODS))
def test_run_identity_follows_the_flags(name: str) -> None:
    config = FinetuneRequest(model="tiny-clip", task="digits", method=name).config_dict()
    assert ("sparsity" in config) == get_method(name).sparse
    assert ("calibration" in config) == get_method(name).calibrates


def test_run_ids_are_stable() -> None:
    """Ids of runs already in stores (computed before the flags moved to the catalogue). The calibrating methods'
    ids changed once, on purpose, when calibration stopped breaking ties by position: their calibration settings
    gained ``zero_scores`` and ``ties``, and TaLoS masks changed (earlier ids: talos 0bff1c7029, talos-top a3bb94a072,
    lota 79f1d56982)."""
    expect = {"random": "81f0dd55ed", "magnitude": "9dc4b7b317", "talos": "4b96d0c4f3",
              "talos-top": "bfaedbe83b", "lota": "a69b4bd6a3", "llora": "28f6737091",
              "nonlinear": "06a2cf7abc", "linearized": "fae465a706"}
    for method, digest in expect.items():
        req = FinetuneRequest(model="tiny-clip", task="digits", method=method)
        assert req.run_id() == f"tiny-clip__digits__{method}__{digest}"
    assert FinetuneRequest(model="tiny-clip", task="digits", method="talos", sparsity=0.8, seed=3).run_id() \
        == "tiny-clip__digits__talos__d331af95b8"


def test_context_holds_sparsity_and_calibration_only_where_needed() -> None:
    ctx = MethodContext(None, None, None, None, sparsity=0.8, seed=1)
    assert ctx.calib_config is None
    with pytest.raises(TalosError, match="calibration config"):
        ctx.calibration()
    with pytest.raises(TalosError, match="differ"):
        MethodContext(None, None, None, None, sparsity=0.8, seed=1, calib_config=CalibrationConfig(sparsity=0.9))
    with pytest.raises(TalosError, match="sparsity"):
        MethodContext(None, None, None, None, sparsity=1.0, seed=0)
    cfg = CalibrationConfig(sparsity=0.8, seed=1)
    assert MethodContext(None, None, None, None, sparsity=0.8, seed=1, calib_config=cfg).calibration() is cfg


def test_method_table_lists_every_method_once() -> None:
    table = method_table()
    assert list(table["name"]) == list(schema.METHODS)
    assert list(table.columns) == ["name", "label", "family", "kind", "sparse", "calibrates", "eval_mode",
                                   "options", "description"]
    options = table.set_index("name")["options"]
    assert options["iso_c"] == "nonmatrix=mean|sum conv1x1=other|matrix"
    assert options["lines"] == "nonblock=first|nearest"
    assert options["ties"] == options["talos"] == "-"
    assert table["description"].str.len().min() > 0
    row = table.set_index("name").loc["talos"]
    assert (row["label"], row["family"], row["kind"], row["sparse"], row["calibrates"]) == \
        ("TaLoS", "parameter-efficient", "finetune", True, True)


def test_talos_methods_command(capsys) -> None:
    assert main(["methods"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 + len(schema.METHODS)
    assert lines[0].split()[:7] == ["name", "label", "family", "kind", "sparse", "calibrates", "eval_mode"]
    for name, line in zip(schema.METHODS, lines[1:]):
        info = schema.METHODS[name]
        assert line.split()[0] == name and info.label in line and info.family in line and info.kind in line
