"""dashboard.live_preview: the in-browser preview's payload, sliders and URL rules (pure).

The JavaScript side is checked against these functions in tests/test_browser_live.py (marker ``browser``).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from dashboard_fixtures import MODEL, REPO, SUITE, TASKS

from dashboard import live_preview as LP
from talos_core.errors import TalosError
from talos_core.result_arrays import PreviewCache, load_preview, preview_accuracy
from talos_core.schema import result_name

SHIPPED = REPO / "cached_results"
SHIPPED_PREVIEWS = ["text__minilm-l6__talos", "vision__efficientnet-lite0__talos", "tiny__tiny-text__talos"]


def _random_alphas(cache: PreviewCache, rng, k: int = 25) -> list[dict[str, float]]:
    out = [{t: 0.0 for t in cache.tasks}, {t: 1.0 for t in cache.tasks}]
    out += [{t: float(rng.uniform(-2, 3)) for t in cache.tasks} for _ in range(k)]
    return out


@pytest.mark.parametrize("name", SHIPPED_PREVIEWS)
def test_payload_reproduces_preview_accuracy_exactly_on_the_shipped_stores(name):
    cache = load_preview(SHIPPED, name)
    payload = LP.preview_payload(cache, cache.eval_tasks, method="talos")
    for alphas in _random_alphas(cache, np.random.default_rng(0)):
        assert LP.payload_accuracy(payload, alphas) == preview_accuracy(cache, alphas)
    # what the browser needs and nothing else: logits at θ0, JVPs, labels (no inputs); base64 float32
    size = LP.payload_bytes(payload)
    n_floats = sum(cache.base[e].size * (1 + len(cache.tasks)) for e in cache.eval_tasks)
    assert size < 1.4 * 4 * n_floats + 4096
    # page weight, sent once per session: the text `full` preview (256 points of 5 tasks, 59 classes in all, logits at
    # θ0 and 5 JVPs each) is 480 KiB; a store of this shape must not grow past twice the largest shipped one
    assert size < 1024 * 1024, f"{name}: {size} bytes"


def test_payload_on_the_fixture_store(fixture_store):
    cache = load_preview(fixture_store, result_name(SUITE, MODEL, "talos"))
    tasks = [t for t in TASKS if t in cache.eval_tasks]
    payload = LP.preview_payload(cache, tasks, zero_shot=[0.1, float("nan"), 0.3], single_task=None, method="talos")
    assert [e["task"] for e in payload["eval"]] == tasks and payload["vectors"] == list(cache.tasks)
    assert payload["zero_shot"] == [0.1, None, 0.3] and payload["single_task"] == [None] * 3
    assert payload["color"] == "#1b9e77"
    json.dumps(payload, allow_nan=False)  # strict JSON: no NaN in it
    for alphas in _random_alphas(cache, np.random.default_rng(1), 10):
        got = LP.payload_accuracy(payload, alphas)
        assert got == {t: v for t, v in preview_accuracy(cache, alphas).items() if t in tasks}


def test_payload_key_is_a_content_hash():
    cache = load_preview(SHIPPED, SHIPPED_PREVIEWS[2])
    a = LP.preview_payload(cache, cache.eval_tasks, method="talos")
    b = LP.preview_payload(cache, cache.eval_tasks, method="talos")
    assert a["key"] == b["key"] == LP.payload_key(a)
    assert LP.preview_payload(cache, cache.eval_tasks, method="nonlinear")["key"] != a["key"]
    assert LP.preview_payload(cache, cache.eval_tasks[:2], method="talos")["key"] != a["key"]


def _cache(dtype) -> PreviewCache:
    rng = np.random.default_rng(3)
    base = {"a": rng.normal(size=(6, 4)).astype(dtype)}
    jvp = {("a", "a"): rng.normal(size=(6, 4)).astype(dtype), ("a", "b"): rng.normal(size=(6, 4)).astype(dtype)}
    return PreviewCache(["a", "b"], ["a"], {"a": rng.integers(0, 4, 6)}, base, jvp)


@pytest.mark.parametrize("dtype,sent", [(np.float16, "float32"), (np.float32, "float32"), (np.float64, "float64")])
def test_payload_dtypes_are_exact(dtype, sent):
    cache = _cache(dtype)
    payload = LP.preview_payload(cache, ["a"])
    assert payload["eval"][0]["dtype"] == sent
    back = LP.payload_cache(payload)
    np.testing.assert_array_equal(back.base["a"], cache.base["a"].astype(sent))
    np.testing.assert_array_equal(back.jvp[("a", "b")], cache.jvp[("a", "b")].astype(sent))
    for alphas in ({"a": 0.3, "b": -1.7}, {"a": 2.0}, {}):
        if dtype != np.float16:  # a float16 cache is summed in float32 by numpy too; the payload widens it exactly
            assert LP.payload_accuracy(payload, alphas) == preview_accuracy(cache, alphas)


def test_payload_refuses_an_unknown_eval_task_and_bad_references():
    cache = _cache(np.float32)
    with pytest.raises(TalosError, match="no evaluation task 'zzz'"):
        LP.preview_payload(cache, ["zzz"])
    with pytest.raises(TalosError, match="2 reference accuracies for 1 tasks"):
        LP.preview_payload(cache, ["a"], zero_shot=[0.1, 0.2])


def test_empty_eval_task_gives_nan_like_preview_accuracy():
    cache = PreviewCache(["a"], ["a"], {"a": np.zeros(0, np.int64)}, {"a": np.zeros((0, 3), np.float32)},
                         {("a", "a"): np.zeros((0, 3), np.float32)})
    assert np.isnan(LP.payload_accuracy(LP.preview_payload(cache, ["a"]), {"a": 1.0})["a"])


# --------------------------------------------------------------------------------------------
# sliders and the URL
# --------------------------------------------------------------------------------------------
def test_slider_snap_and_parse_follow_the_range_input():
    s = LP.SliderSpec("a.talos", "α", ("x",), 0.0, 2.0, 0.02, 0.3)
    assert s.snap(0.14000000000000001) == 0.14 and s.snap(0.333) == 0.34 and s.snap(-1) == 0.0 and s.snap(9) == 2.0
    assert s.parse("0.3") == 0.3 and s.parse(["1", "0.5"]) == 0.5
    assert s.parse("abc") is None and s.parse("nan") is None and s.parse(None) is None
    odd = LP.SliderSpec("k", "α", ("x",), -1.0, 1.05, 0.1, 0.0)  # max not on the step grid: the last grid point
    assert odd.snap(1.05) == 1.0 and odd.snap(-0.7) == -0.7


def test_addition_sliders_same_and_per_task():
    same = LP.addition_sliders(["digits", "Big Task"], 0.0, 10.0, 0.1, 8.0, same=True, key="a.talos")
    assert [(s.id, s.tasks, s.default) for s in same] == [("a.talos", ("digits", "Big Task"), 8.0)]
    each = LP.addition_sliders(["digits", "Big Task"], 0.0, 10.0, 0.1, 8.0, same=False, key="a.talos")
    assert [s.id for s in each] == ["a.talos.digits", "a.talos.Big-Task"]  # ui.qkey("a", method, task)
    assert [s.label for s in each] == ["α digits", "α Big Task"]
    assert LP.alphas_of(each, {"a.talos.digits": 1.0, "a.talos.Big-Task": 2.0}) == {"digits": 1.0, "Big Task": 2.0}


def test_values_come_from_state_then_url_then_default():
    specs = LP.addition_sliders(["a", "b"], 0.0, 2.0, 0.02, 0.3, same=False, key="k")
    assert LP.resolve_values(specs, None, {}) == {"k.a": 0.3, "k.b": 0.3}
    assert LP.resolve_values(specs, None, {"k.a": "1.5", "k.b": "oops"}) == {"k.a": 1.5, "k.b": 0.3}
    assert LP.resolve_values(specs, {"k.a": 0.5}, {"k.a": "1.5"}) == {"k.a": 0.5, "k.b": 0.3}
    assert LP.resolve_values(specs, {"k.a": 99}, {}) == {"k.a": 2.0, "k.b": 0.3}  # clamped like the input


def test_query_updates_drop_defaults_and_set_changes():
    specs = LP.addition_sliders(["a"], 0.0, 2.0, 0.02, 0.3, same=True, key="k")
    assert LP.query_updates(specs, {"k": 0.3}, {}) == ({}, [])
    assert LP.query_updates(specs, {"k": 0.3}, {"k": "0.5"}) == ({}, ["k"])
    assert LP.query_updates(specs, {"k": 0.5}, {"k": "0.5"}) == ({}, [])
    assert LP.query_updates(specs, {"k": 0.14}, {"k": "0.5"}) == ({"k": "0.14"}, [])


def test_render_data_sends_the_payload_only_when_asked():
    cache = load_preview(SHIPPED, SHIPPED_PREVIEWS[1])
    payload = LP.preview_payload(cache, cache.eval_tasks, method="talos")
    specs = LP.addition_sliders(cache.tasks, 0.0, 2.0, 0.01, 0.3, same=True, key="a.talos")
    full = LP.render_data(specs, {"a.talos": 0.3}, payload, include_payload=True)
    small = LP.render_data(specs, {"a.talos": 0.3}, payload, include_payload=False)
    assert full["payload"]["key"] == small["key"] == payload["key"] and small["payload"] is None
    assert small["sliders"][0] | {"tasks": None} == {"id": "a.talos", "label": "α (all tasks)", "tasks": None,
                                                      "lo": 0.0, "hi": 2.0, "step": 0.01, "default": 0.3,
                                                      "value": 0.3}
    assert len(json.dumps(small)) < 1000 < 100_000 < len(json.dumps(full))


def test_preview_title_is_the_server_charts_title(fixture_store):
    from dashboard import data as D
    from dashboard.views import addition_preview

    add = D.get("addition", str(fixture_store), result_name(SUITE, MODEL, "talos"))
    cache = load_preview(fixture_store, result_name(SUITE, MODEL, "talos"))
    for a in (0.0, 0.125, 2.5, 8.0, 12.5):
        alphas = {t: a for t in add.tasks}
        acc, fig = addition_preview(add, alphas, preview=cache, method="talos")
        assert LP.preview_title([t for t in add.tasks if t in cache.eval_tasks], alphas, acc) == fig.layout.title.text


def test_the_page_keeps_its_streamlit_sliders_where_the_component_cannot_help(monkeypatch):
    """AppTest (components are not rendered), no preview cache, a one-point α grid, a too large payload."""
    import dataclasses

    from streamlit.testing.v1.util import patch_config_options

    from dashboard import data as D
    from dashboard import live_component as LC

    name = "vision__efficientnet-lite0__talos"
    add = D.get("addition", str(SHIPPED), name)
    cache = D.get_preview(str(SHIPPED), name)
    assert LC.live_enabled(add, cache, method="talos")
    first, tasks = LC.addition_payload(add, cache, method="talos")
    assert LC.addition_payload(add, cache, method="talos")[0] is first  # built once per loaded cache
    assert tasks == ["mnist", "digits", "animal-shapes"]
    assert not LC.live_enabled(add, None, method="talos")
    assert not LC.live_enabled(dataclasses.replace(add, alpha_grid=np.array([0.3])), cache, method="talos")
    with patch_config_options({"global.appTest": True}):
        assert LC.in_app_test() and not LC.live_enabled(add, cache, method="talos")
    monkeypatch.setattr(LP, "MAX_PAYLOAD_BYTES", 1000)
    assert not LC.live_enabled(add, cache, method="talos")


def test_negation_sliders_follow_each_targets_grid():
    specs = LP.negation_sliders(["digits", "mnist"], {"digits": [0.0, 0.5, 1.0], "mnist": [0.0, 2.0, 4.0, 1.0]},
                                {"digits": 0.5}, key="n.talos")
    assert [(s.id, s.label, s.tasks, s.lo, s.hi, s.step, s.default) for s in specs] == [
        ("n.talos.digits", "α negate digits", ("digits",), 0.0, 1.0, 0.1, 0.5),
        ("n.talos.mnist", "α negate mnist", ("mnist",), 0.0, 4.0, 0.2, 0.0)]
    cache = _cache(np.float32)
    payload = LP.preview_payload(cache, ["a"])
    data = LP.render_data(specs, {"n.talos.digits": 0.5, "n.talos.mnist": 0.0}, payload, include_payload=False,
                          chart="negation_preview", tasks=["digits"], control=None, control_label="imagenet",
                          control_zero_shot=0.6)
    assert data["chart"] == "negation_preview" and data["control_label"] == "imagenet"
    with pytest.raises(TalosError, match="unknown live chart 'pie'"):
        LP.render_data(specs, {"n.talos.digits": 0.5, "n.talos.mnist": 0.0}, payload, include_payload=False,
                       chart="pie")
