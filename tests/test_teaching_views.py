"""Teaching views: example galleries, live first-order ξ, localization click-through.

Pure functions on hand-made arrays with known answers, then AppTest on the synthetic store (which has an
``examples`` result per method)."""

from __future__ import annotations

import numpy as np
import pytest

from dashboard import figures_examples as FX
from talos_core.errors import TalosError
from talos_core.result_arrays import ExampleSet, PreviewCache


def _example_set(with_linear: bool = True) -> ExampleSet:
    """Two tasks a, b (2 classes, 3 examples each), control c; grid 0, 1, 2."""
    lab = {"a": [0, 1, 1], "b": [1, 1, 0], "c": [0, 0, 1]}
    zs = {"a": [0, 0, 0], "b": [1, 0, 0], "c": [0, 0, 1]}
    arrays = {f"pred::zero_shot::{e}": np.array(v, dtype=np.int32) for e, v in zs.items()}
    arrays["pred::addition::a"] = np.array([[0, 0, 0], [0, 1, 0], [1, 1, 1]], dtype=np.int32)
    arrays["pred::addition::b"] = np.array([[1, 0, 0], [1, 1, 0], [1, 1, 0]], dtype=np.int32)
    for t in "ab":
        arrays[f"pred::negation::{t}::{t}"] = np.stack([arrays[f"pred::zero_shot::{t}"], np.ones(3, np.int32),
                                                        np.ones(3, np.int32)])
        arrays[f"pred::negation::{t}::c"] = np.array([[0, 0, 1], [0, 0, 1], [1, 0, 1]], dtype=np.int32)
        for e in "ab":
            arrays[f"pred::single::{t}::{e}"] = np.array(lab[e] if t == e else zs[e], dtype=np.int32)
    if with_linear:
        for e in "abc":
            arrays[f"base::{e}"] = np.eye(2, dtype=np.float32)[zs[e]]
            for t in "ab":  # τ_a moves a's logits towards class 1 by α per unit; τ_b does nothing
                arrays[f"jvp::{e}::{t}"] = np.tile([-0.5, 0.5], (3, 1)).astype(np.float32) if t == "a" \
                    else np.zeros((3, 2), np.float32)
    meta = {"tasks": ["a", "b"], "eval_tasks": ["a", "b", "c"], "control_task": "c", "labels": lab,
            "indices": {e: [0, 5, 9] for e in "abc"}, "classes": {e: ["neg", "pos"] for e in "abc"},
            "modality": {e: "text" for e in "abc"}, "snippets": {e: ["x", "y", "z"] for e in "abc"},
            "addition_alphas": [0.0, 1.0, 2.0], "negation_alphas": {"a": [0.0, 1.0, 2.0], "b": [0.0, 1.0, 2.0]}}
    return ExampleSet(meta, arrays)


def test_addition_gallery_is_exact_on_the_grid_and_linearized_between():
    ex = _example_set()
    g = FX.addition_gallery(ex, "a", {"a": 1.0, "b": 1.0})
    assert g.source == "exact" and g.alpha == 1.0
    assert g.table["predicted"].tolist() == ["neg", "pos", "neg"]
    assert g.table["status"].tolist() == ["", "learned", ""] and g.changed == 1
    assert g.table["#"].tolist() == [0, 5, 9] and g.table["input"].tolist() == ["x", "y", "z"]
    lin = FX.addition_gallery(ex, "a", {"a": 1.5, "b": 1.5})  # base [1, 0] + 1.5·[-0.5, 0.5] → class 1
    assert lin.source == "linearized" and lin.table["predicted"].tolist() == ["pos", "pos", "pos"]
    assert lin.table["status"].tolist() == ["forgotten", "learned", "learned"]
    assert lin.model == "first-order model at α = 1.5" and "nearest exact point, α = 1" in lin.note
    assert "first-order model gets 1/3 right and the exact model 2/3" in lin.note  # its distance to the exact one
    assert g.model == "exact model at α = 1"
    mixed = FX.addition_gallery(ex, "a", {"a": 0.5, "b": 2.0})  # per-task α: linearized (0.5 keeps class 0)
    assert mixed.source == "linearized" and mixed.model == "first-order model at α = (0.5, 2)" and mixed.changed == 0
    near = FX.addition_gallery(_example_set(with_linear=False), "a", {"a": 1.6, "b": 1.6})
    assert near.source == "nearest" and near.alpha == 2.0
    with pytest.raises(TalosError, match="no examples of task 'c'"):
        FX.addition_gallery(ex, "c", {})


def test_negation_gallery_marks_forgotten_targets_and_flipped_controls():
    ex = _example_set()
    tg, cg = FX.negation_gallery(ex, "b", 2.0)
    assert tg.source == cg.source == "exact"
    assert tg.table["status"].tolist() == ["", "learned", "forgotten"]  # label 0, zero-shot 0, now 1
    assert cg.task == "c" and cg.table["status"].tolist() == ["forgotten", "", ""]  # a flipped control example
    assert FX.summary(cg) == "2/3 right (zero-shot 3/3); 1 changed: 1 forgotten"
    lin_t, _ = FX.negation_gallery(ex, "a", 0.5)  # base [1, 0] − 0.5·[-0.5, 0.5] → stays class 0
    assert lin_t.source == "linearized" and lin_t.changed == 0


def test_localization_gallery_and_tiles():
    ex = _example_set()
    g = FX.localization_gallery(ex, "a", "b")
    assert g.table["predicted"].tolist() == g.table["zero-shot"].tolist()  # off-diagonal: untouched here
    d = FX.localization_gallery(ex, "a", "a")
    assert d.table["predicted"].tolist() == ["neg", "pos", "pos"]
    with pytest.raises(TalosError, match="no examples"):
        FX.localization_gallery(ex, "a", "c")
    thumbs = np.zeros((3, 8, 8, 3), dtype=np.uint8)
    img = FX.Gallery("a", "image", d.table, "exact", 1.0, "", d.predicted, thumbs)
    tiles = FX.tiles(img, size=32, border=2)
    assert len(tiles) == 3 and tiles[0].shape == (32 + 8, 32 + 8, 3)
    assert tuple(tiles[0][0, 0]) == (255, 255, 255) and tuple(tiles[0][2, 2]) == FX.GREEN  # right, unchanged
    assert tuple(tiles[1][0, 0]) == FX.AMBER  # changed from zero-shot
    assert FX.captions(img)[1] == "pos → pos (was neg)"


def test_xi_linearized_known_answers():
    # task 1's points: τ2 flips class 0 → 1 once α2 > 0.5 (ties keep class 0); task 2's points: nothing moves
    cache = PreviewCache(tasks=["t1", "t2"], eval_tasks=["t1", "t2"],
                         labels={"t1": np.array([0]), "t2": np.array([0])},
                         base={"t1": np.array([[1.0, 0.0]]), "t2": np.array([[1.0, 0.0]])},
                         jvp={("t1", "t1"): np.zeros((1, 2)), ("t1", "t2"): np.array([[-1.0, 1.0]]),
                              ("t2", "t1"): np.zeros((1, 2)), ("t2", "t2"): np.zeros((1, 2))})
    a = np.linspace(-1, 1, 5)  # -1, -.5, 0, .5, 1
    xi, x1, x2 = FX.xi_linearized(cache, "t1", "t2", a, a)
    assert xi.shape == (5, 5) and (x2 == 0).all()
    assert (xi == x1).all() and xi.tolist() == [[0, 0, 0, 0, 1]] * 5  # only α2 = 1 > 0.5 flips
    # symmetric check: task 2's own term compares against θ0 + α2 τ2 on its points
    cache.jvp[("t2", "t1")] = np.array([[-1.0, 1.0]])
    xi, _, x2 = FX.xi_linearized(cache, "t1", "t2", a, a)
    assert x2[:, 0].tolist() == [0, 0, 0, 0, 1] and (x2[:, 0] == x2[:, 4]).all()
    big = PreviewCache(["t1", "t2"], ["t1", "t2"], {t: np.zeros(64, int) for t in ("t1", "t2")},
                       {t: np.random.default_rng(0).normal(size=(64, 10)) for t in ("t1", "t2")},
                       {(e, t): np.random.default_rng(1).normal(size=(64, 10)) for e in ("t1", "t2")
                        for t in ("t1", "t2")})
    xi, _, _ = FX.xi_linearized(big, "t1", "t2", np.linspace(-3, 3, 51), np.linspace(-3, 3, 51))
    assert xi.shape == (51, 51) and xi[25, 25] == 0.0  # ξ(0, 0) = 0 exactly
    with pytest.raises(TalosError, match="no task vector"):
        FX.xi_linearized(big, "t1", "zz", [0.0], [0.0])


# --------------------------------------------------------------------------------------------
# pages (AppTest)
# --------------------------------------------------------------------------------------------
def _open(monkeypatch, store, page, query=None):
    from tests.test_dashboard import open_app

    return open_app(monkeypatch, store, page, query)


def test_arithmetic_page_shows_the_gallery_and_follows_the_slider(monkeypatch, fixture_store):
    at = _open(monkeypatch, fixture_store, "arithmetic", {"method": "nonlinear"})
    assert at.get("image"), "the image gallery is drawn"
    assert any("under addition" in m.value for m in at.markdown)
    exact_note = [c.value for c in at.caption if c.value.startswith("Exact predictions of θ0 +")]
    assert exact_note, [c.value for c in at.caption]
    assert any("· exact model at α = " in m.value for m in at.markdown)
    at.slider(key="a.nonlinear").set_value(0.52).run()  # between grid points 0.5 and 0.55
    assert not at.exception
    assert any("· first-order model at α = 0.52" in m.value for m in at.markdown)
    assert any("At the nearest exact point, α = 0.5," in i.value for i in at.info)
    from tests.test_dashboard import open_negation_tab

    open_negation_tab(at)  # the negation tab (built once opened) holds the forgotten/flipped galleries
    assert any(m.value.startswith("**target ") for m in at.markdown)
    assert any(m.value.startswith("**control ") for m in at.markdown)


def test_disentanglement_page_live_xi_at_any_resolution(monkeypatch, fixture_store):
    at = _open(monkeypatch, fixture_store, "disentanglement")
    from tests.test_dashboard import figure_titled

    live = figure_titled(at, "First-order model: live ξ, 50×50")
    assert np.asarray(live.data[0].z).shape == (50, 50)
    assert figure_titled(at, "Exact model: ξ on the stored")
    assert any("First order means" in c.value for c in at.caption)
    at.slider(key="xires").set_value(20).run()
    assert np.asarray(figure_titled(at, "First-order model: live ξ, 20×20").data[0].z).shape == (20, 20)


def test_localization_page_cell_examples(monkeypatch, fixture_store):
    at = _open(monkeypatch, fixture_store, "localization")
    assert any("click a cell" in (f.layout.title.text or "") for f in __import__("tests.test_dashboard",
                                                                                 fromlist=["figures"]).figures(at))
    at.selectbox(key="xrow").set_value("digits").run()
    at.selectbox(key="xcol").set_value("mnist").run()
    assert not at.exception
    assert any(m.value.startswith("**mnist under τ_digits**") for m in at.markdown)
    assert any("interference" in c.value for c in at.caption)


def test_pages_say_what_to_run_without_examples(monkeypatch, fixture_store, tmp_path):
    import shutil

    store = tmp_path / "store"
    shutil.copytree(fixture_store, store)
    shutil.rmtree(store / "results" / "examples")
    at = _open(monkeypatch, store, "arithmetic", {"method": "talos"})
    assert any("talos examples --store" in c.value for c in at.caption)
    at = _open(monkeypatch, store, "localization")
    assert any("talos examples --store" in c.value for c in at.caption)


def test_clickable_cells_put_one_selectable_point_on_every_cell():
    from dashboard import figures as F

    fig = FX.clickable_cells(F.localization_heatmap(["a", "b"], [[1.0, 0.5], [0.9, 1.2]]), ["a", "b"],
                             [[1.0, 0.5], [0.9, 1.2]])
    pts = fig.data[-1]
    assert pts.type == "scatter" and pts.marker.opacity == 0.0
    assert list(zip(pts.y, pts.x, pts.customdata)) == [("a", "a", 1.0), ("a", "b", 0.5), ("b", "a", 0.9),
                                                       ("b", "b", 1.2)]


@pytest.mark.parametrize("suite, modality", [("text", "text"), ("vision", "image")])
def test_shipped_store_has_the_galleries_of_both_suites(monkeypatch, suite, modality):
    """The shipped ``cached_results`` carries per-example predictions for every fine-tuning method of both suites:
    the Arithmetic page shows text snippets in a table (text) or thumbnails (vision), and the negation tab its
    forgotten/flipped examples, and a Localization cell the examples behind it."""
    from dashboard_fixtures import REPO

    from talos_core.result_arrays import MAX_EXAMPLES, SNIPPET_CHARS, load_examples
    from talos_core.store import Store

    shipped = REPO / "cached_results"
    store = Store(shipped)
    methods = store.read_result("suite", suite)["methods"]
    names = [n for n in store.results("examples") if n.startswith(f"{suite}__")]
    assert sorted(n.rsplit("__", 1)[1] for n in names) == sorted(methods), (names, methods)
    ex = load_examples(shipped, names[0])
    task = ex.eval_tasks[0]
    assert ex.modality(task) == modality and len(ex.labels(task)) == MAX_EXAMPLES == 24
    if modality == "text":
        assert len(ex.snippets(task)) == 24 and all(0 < len(s) <= SNIPPET_CHARS for s in ex.snippets(task))
    at = _open(monkeypatch, shipped, "arithmetic", {"suite": suite, "method": "talos"})
    assert any(" under addition** · exact model" in m.value for m in at.markdown), [m.value for m in at.markdown][:20]
    if modality == "text":
        assert not at.get("image")
        tables = [d.value for d in at.dataframe if "input" in getattr(d.value, "columns", [])]
        assert tables and set(ex.snippets(task)) & set(map(str, tables[0]["input"]))
    else:
        assert at.get("image")
    from tests.test_dashboard import open_negation_tab

    assert any(m.value.startswith("**target ") for m in open_negation_tab(at).markdown)
    row, col = ex.tasks[0], ex.tasks[1]  # the Localization click-through: θ0 + τ_row on col's examples
    at = _open(monkeypatch, shipped, "localization", {"suite": suite})
    at.selectbox(key="xrow").set_value(row).run()
    at.selectbox(key="xcol").set_value(col).run()
    assert not at.exception
    assert any(m.value.startswith(f"**{col} under τ_{row}**") for m in at.markdown)
