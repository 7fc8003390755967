"""Per-example predictions (SCHEMA.md ``examples``): choice, display forms, the protocol, ``talos examples``,
the torch-free reader, and agreement with the stored per-example correctness of the other protocols."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tiny_text import CONTROL, MODEL, TASKS

from talos_core.cli import main
from talos_core.errors import TalosError
from talos_core.evaluation.examples import (
    choose_examples,
    exact_context,
    exact_predictions,
    examples_from_store,
    snippet,
    teaching_alphas,
    thumbnails,
    vectors_missing,
)
from talos_core.evaluation.protocols import AdditionSettings, ExamplesSettings, NegationSettings, evaluate
from talos_core.evaluation.stats import decode_examples
from talos_core.result_arrays import load_examples
from talos_core.schema import CorruptResult, MissingResult, examples_paths, result_name
from talos_core.store import Store

OVERRIDES = dict(steps=4, max_train=64, max_val=16, max_test=32, calib_samples=8, batch_size=8, rounds=1, lr=5e-3)


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A tiny-text TaLoS store with single, addition, negation and examples results (one fine-tuning per task)."""
    st = Store(tmp_path_factory.mktemp("examples_store"))
    kw = dict(overrides=OVERRIDES)
    evaluate(st, "single", MODEL, TASKS, "talos", **kw)
    evaluate(st, "addition", MODEL, TASKS, "talos", settings=AdditionSettings(alpha_step=0.5), **kw)
    evaluate(st, "negation", MODEL, TASKS, "talos", settings=NegationSettings(control_task=CONTROL, alpha_step=0.5),
             **kw)
    evaluate(st, "examples", MODEL, TASKS, "talos", settings=ExamplesSettings(points=12, control_task=CONTROL,
                                                                             alpha_step=0.5), **kw)
    return st


def test_choose_examples_is_deterministic_sorted_and_covers_classes():
    labels = np.array([0] * 50 + [1] * 5 + [2] * 3)
    a, b = choose_examples(labels, 9, seed=3), choose_examples(labels, 9, seed=3)
    assert a.tolist() == b.tolist() and a.tolist() == sorted(a.tolist()) and len(set(a.tolist())) == 9
    assert set(labels[a].tolist()) == {0, 1, 2}  # classes taken in turn: the rare ones are shown
    assert choose_examples(labels, 9, seed=4).tolist() != a.tolist()
    assert len(choose_examples(labels[:4], 24)) == 4
    for bad in (0, 25, 2.5, True):
        with pytest.raises(TalosError, match="from 1 to 24"):
            choose_examples(labels, bad)


def test_snippets_and_thumbnails():
    assert snippet("  a\n\tb  ") == "a b"
    long = snippet("word " * 100)
    assert len(long) == 120 and long.endswith("…")
    grey = np.arange(2 * 28 * 28, dtype=np.int64).reshape(2, 28, 28) % 256
    t = thumbnails(grey.astype(np.uint8))
    assert t.shape == (2, 28, 28, 3) and t.dtype == np.uint8  # small images kept, grey → RGB
    assert (t[..., 0] == grey).all() and (t[..., 2] == grey).all()
    big = thumbnails(np.full((1, 96, 192, 3), 200, dtype=np.uint8))
    assert big.shape == (1, 24, 48, 3) and (big == 200).all()  # box filter of a flat image is flat
    with pytest.raises(TalosError, match="shape"):
        thumbnails(np.zeros((2, 3), dtype=np.uint8))


def test_protocol_writes_the_schema_and_agrees_with_the_stored_correctness(store):
    name = result_name("default", MODEL, "talos")
    ex = load_examples(store.root, name)
    meta_path, arr_path = examples_paths(store.root, name)
    assert arr_path.is_file() and arr_path.read_bytes()[:8] and "pickle" not in meta_path.read_text()
    assert ex.tasks == TASKS and ex.eval_tasks == [*TASKS, CONTROL] and ex.control_task == CONTROL
    add = store.read_result("addition", name)
    neg = store.read_result("negation", name)
    # the protocol's grids, and the teaching range's exact points (every 0.05 from 0 to 2) inside them
    assert ex.meta["addition_alphas"] == teaching_alphas(add["alpha_grid"])
    assert ex.meta["negation_alphas"] == {t: teaching_alphas(neg["alpha_grid"]) for t in TASKS}
    single = store.read_result("single", result_name("default", MODEL))
    for k, t in enumerate(ex.eval_tasks):
        idx = np.asarray(ex.meta["indices"][t])
        assert len(idx) == 12 and ex.snippets(t) and all(len(s) <= 120 for s in ex.snippets(t))
        assert ex.classes(t) and ex.modality(t) == "text" and ex.thumbnails(t) is None
        test_labels = np.asarray(_test_labels(t))
        assert idx.tolist() == choose_examples(test_labels, 12, k).tolist()  # seed + k, on the evaluated split
        assert ex.labels(t).tolist() == test_labels[idx].tolist()
    for t in TASKS:
        idx = np.asarray(ex.meta["indices"][t])
        labels = ex.labels(t)
        # α = 0 of addition and negation is θ0: the zero-shot predictions
        assert (ex.addition_at(t, 0.0)[0] == ex.zero_shot(t)).all()
        assert (ex.negation_at(t, t, 0.0)[0] == ex.zero_shot(t)).all()
        assert (ex.negation_at(t, CONTROL, 0.0)[0] == ex.zero_shot(CONTROL)).all()
        # the stored per-example correctness of the other protocols, at these examples' positions
        zs = decode_examples(single["examples"]["talos"][t]["zero_shot"])
        ft = decode_examples(single["examples"]["talos"][t]["finetuned"])
        assert ((ex.zero_shot(t) == labels) == zs[idx]).all()
        assert ((ex.single(t, t) == labels) == ft[idx]).all()
        at_sel, grid_alpha = ex.addition_at(t, add["selected_alpha"])
        assert grid_alpha == add["selected_alpha"]
        assert ((at_sel == labels) == decode_examples(add["examples"][t])[idx]).all()
        target_sel, _ = ex.negation_at(t, t, neg["selected"][t])
        assert ((target_sel == labels) == decode_examples(neg["examples"][t]["target"])[idx]).all()
        assert ex.has_linearized(t)


def _test_labels(task):
    from talos_core.tasks import load_task

    return load_task(task, max_train=1, max_val=OVERRIDES["max_val"], max_test=OVERRIDES["max_test"]).test.labels


def test_the_teaching_range_is_exact_and_the_exact_model_is_evaluated_on_demand(store):
    """Exact predictions are stored every 0.05 from 0 to 2 (besides the grid, here 0, 5, 10), and the exact model
    evaluated on demand from the runs' task vectors gives the stored predictions at any stored α — addition, a mix,
    negation, on the target and the control task."""
    ex = load_examples(store.root, result_name("default", MODEL, "talos"))
    add = store.read_result("addition", result_name("default", MODEL, "talos"))
    dense = [round(0.05 * k, 10) for k in range(41)]
    assert set(dense) <= set(ex.meta["addition_alphas"]) and set(add["alpha_grid"]) <= set(ex.meta["addition_alphas"])
    assert set(dense) <= set(ex.meta["negation_alphas"][TASKS[0]])
    assert vectors_missing(store, ex) is None
    ctx, vectors, mode = exact_context(store, ex, device="cpu")
    for a in (0.35, 1.05, 5.0):  # two teaching points and a grid point
        for t in TASKS:
            stored, at = ex.addition_at(t, a)
            assert at == a and (exact_predictions(ctx, vectors, mode, ex, t, {u: a for u in TASKS}) == stored).all()
    target = TASKS[1]
    for e in (target, CONTROL):
        stored, at = ex.negation_at(target, e, 0.7)
        assert at == 0.7 and (exact_predictions(ctx, vectors, mode, ex, e, {target: -0.7}) == stored).all()
    mix = {TASKS[0]: 0.3, TASKS[1]: 1.2}  # no stored exact point: evaluated now; θ0 at α = 0
    assert exact_predictions(ctx, vectors, mode, ex, TASKS[1], {t: 0.0 for t in TASKS}).tolist() == \
        ex.zero_shot(TASKS[1]).tolist()
    assert exact_predictions(ctx, vectors, mode, ex, TASKS[0], mix).shape == ex.labels(TASKS[0]).shape
    assert teaching_alphas(add["alpha_grid"], hi=0.0) == sorted(add["alpha_grid"])  # teaching_max 0: the grid only
    with pytest.raises(TalosError, match="teaching_max"):
        ExamplesSettings(teaching_max=-1)


def test_linearized_terms_give_the_zero_shot_prediction_at_zero(store):
    ex = load_examples(store.root, result_name("default", MODEL, "talos"))
    for t in ex.eval_tasks:
        assert (ex.linearized(t, {}) == ex.zero_shot(t)).all()
        assert ex.arrays[f"jvp::{t}::{TASKS[0]}"].shape == ex.arrays[f"base::{t}"].shape


def test_examples_from_store_recomputes_the_same_predictions(store, capsys):
    name = result_name("default", MODEL, "talos")
    before = load_examples(store.root, name)
    examples_paths(store.root, name)[0].unlink()
    assert main(["examples", "--store", str(store.root), "--points", "12", "--quiet"]) == 0
    assert "wrote" in capsys.readouterr().out
    after = load_examples(store.root, name)
    assert after.meta["indices"] == before.meta["indices"]
    for key, arr in before.arrays.items():
        if key.startswith(("pred::", "thumb::")):
            assert (after.arrays[key] == arr).all(), key


def test_bad_input_is_one_sentence_and_writes_nothing(store, tmp_path, capsys):
    with pytest.raises(TalosError, match="from 1 to 24"):
        ExamplesSettings(points=30)
    assert main(["examples", "--store", str(store.root), "--points", "30"]) == 2
    assert "from 1 to 24" in capsys.readouterr().err
    empty = tmp_path / "empty"
    assert main(["examples", "--store", str(empty)]) == 2
    assert "no results" in capsys.readouterr().err and not empty.exists()
    assert main(["examples", "--store", str(store.root), "--methods", "lota"]) == 2
    assert "no addition results" in capsys.readouterr().err
    with pytest.raises(TalosError, match="no addition results"):
        examples_from_store(store, suites=["nosuch"])


def test_reader_refuses_missing_and_damaged_files(store, tmp_path):
    import shutil

    copy = Store(tmp_path / "copy")
    shutil.copytree(store.root / "results", copy.root / "results")
    name = result_name("default", MODEL, "talos")
    meta_path, arr_path = examples_paths(copy.root, name)
    with pytest.raises(MissingResult):
        load_examples(copy.root, "default__tiny-text__nosuch")
    from safetensors.numpy import load_file, save_file

    arrays = load_file(str(arr_path))
    arrays.pop(f"pred::addition::{TASKS[0]}")
    save_file(arrays, str(arr_path))
    with pytest.raises(CorruptResult, match="lacks 'pred::addition::drug-reviews'"):
        load_examples(copy.root, name)
    arrays[f"pred::addition::{TASKS[0]}"] = np.zeros((1, 12), dtype=np.int32)
    save_file(arrays, str(arr_path))
    with pytest.raises(CorruptResult, match="shape"):
        load_examples(copy.root, name)
    meta = json.loads(meta_path.read_text())
    meta["arrays"] = "../preview/x.safetensors"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CorruptResult, match="not a file in its folder"):
        load_examples(copy.root, name)
    arr_path.write_bytes(b"garbage")
    meta["arrays"] = arr_path.name
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CorruptResult, match="corrupt"):
        load_examples(copy.root, name)


def test_suite_step_only_where_the_scale_asks_and_no_trace_otherwise():
    from dataclasses import replace

    from talos_core.suites import get_suite, suite_steps

    spec = get_suite("tiny")
    plain = suite_steps(spec, "mini", ["talos", "nonlinear"], ["ties"], seed=0, device="cpu")
    assert not [st for st in plain if st.protocol == "examples"]
    assert "examples" not in spec.scales["mini"].settings_dict()  # tiny's suite record stays as it was
    on = replace(spec, scales={"mini": replace(spec.scales["mini"], examples=24)})
    labels = [st.label for st in suite_steps(on, "mini", ["talos", "nonlinear"], ["ties"], seed=0, device="cpu")]
    for m in ("talos", "nonlinear"):
        assert labels.index(f"{m}: examples") == labels.index(f"{m}: preview") + 1
    assert on.scales["mini"].settings_dict()["examples"] == 24
    assert get_suite("text").scales["full"].examples == 24 and get_suite("vision").scales["full"].examples == 24
