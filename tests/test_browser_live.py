"""Real browser: the Arithmetic page's in-browser linearized preview (sliders that feel live).

* the component's JavaScript numerics (``dashboard/live_preview.js``) give exactly the accuracies of
  :func:`talos_core.result_arrays.preview_accuracy` and Python's number formatting, on the shipped stores and the
  synthetic one (a blank page importing the module: no server);
* on the running app (synthetic store), a slider key press redraws the preview chart before any server round
  trip, with Python's accuracies and title for the slider's α; the release then updates the exact chart and the
  URL; "Same α for all tasks" off gives per-task sliders; a URL α is restored.

Run with ``python -m pytest tests/test_browser_live.py -m browser``; needs /usr/bin/chromium (or
``TALOS_CHROMIUM``) and playwright, else skipped. Screenshots: /tmp/talos_live_*.png.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import numpy as np
import pytest
from dashboard_fixtures import MODEL, REPO, SUITE, TASKS, app_server
from test_browser import new_page

from bench.page_state import wait_drawn, wait_until
from dashboard import live_preview as LP
from talos_core.result_arrays import load_preview, preview_accuracy
from talos_core.schema import result_name

CHROMIUM = os.environ.get("TALOS_CHROMIUM", "/usr/bin/chromium")
pytestmark = [pytest.mark.browser, pytest.mark.slow]
CHART = '[data-talos-chart="addition_preview"]'
SLIDERS = f".talos-live:has({CHART}) input[type=range]"  # the addition tab's sliders
DATASET_JS = f"() => {{ const el = document.querySelector('{CHART}'); return el ? {{...el.dataset}} : null; }}"


def _browser(p):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    return p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])


def _module_url() -> str:
    js = (REPO / "dashboard" / "live_preview.js").read_bytes()
    return "data:text/javascript;base64," + base64.b64encode(js).decode()


def test_js_numerics_equal_python(fixture_store):
    sync_api = pytest.importorskip("playwright.sync_api")
    caches = [load_preview(REPO / "cached_results", n) for n in
              ("text__minilm-l6__talos", "vision__efficientnet-lite0__nonlinear", "tiny__tiny-text__talos")]
    caches.append(load_preview(fixture_store, result_name(SUITE, MODEL, "talos")))
    rng = np.random.default_rng(7)
    numbers = [0.0, -0.0, 0.125, 0.375, 2.5, 12.5, 0.0625, 5 / 48, 6 / 48, 1 / 3, 99.95, 120.0, 1e-5, float("nan")]
    numbers += [float(v) for v in rng.uniform(-3, 3, 200)] + [k / 256 for k in range(257)]
    with sync_api.sync_playwright() as p:
        browser = _browser(p)
        try:
            page = browser.new_page()
            page.goto("about:blank")
            page.evaluate("async (url) => { window.LP = await import(url); }", _module_url())
            for cache in caches:
                payload = LP.preview_payload(cache, cache.eval_tasks, method="talos")
                mixes = [{t: 0.0 for t in cache.tasks}] + [{t: float(rng.uniform(-2, 3)) for t in cache.tasks}
                                                           for _ in range(40)]
                mixes += [{t: float(a) for t in cache.tasks} for a in np.round(np.arange(-1, 3.01, 0.05), 2)]
                got = page.evaluate("""([payload, mixes]) => { const d = LP.decodePayload(payload);
                    return mixes.map(m => d.tasks.map(t => LP.accuracy(d, m, t))); }""", [payload, mixes])
                for mix, row in zip(mixes, got):
                    want = preview_accuracy(cache, mix)
                    assert row == [want[t] for t in cache.eval_tasks], (mix, row, want)
            fmt = page.evaluate("""(xs) => xs.map(x => [LP.fmtG(x, 2), LP.fmtG(x, 3), LP.fmtF(x, 2), LP.fmtF(x, 3)])""",
                                [v if v == v else None for v in numbers])
            for x, row in zip(numbers, fmt):
                if x == x:  # JSON has no NaN: checked via the empty-task case instead
                    assert row == [f"{x:.2g}", f"{x:.3g}", f"{x:.2f}", f"{x:.3f}"], x
        finally:
            browser.close()


def test_js_mean_is_numpys_pairwise_sum():
    sync_api = pytest.importorskip("playwright.sync_api")
    rows = [list(np.random.default_rng(n).uniform(0, 1, n)) for n in (2, 3, 7, 8, 9, 17, 130, 300)]
    with sync_api.sync_playwright() as p:
        browser = _browser(p)
        try:
            page = browser.new_page()
            page.goto("about:blank")
            page.evaluate("async (url) => { window.LP = await import(url); }", _module_url())
            got = page.evaluate(
                "(rows) => rows.map(r => [LP.npMean(r), LP.npNanMean(r.map((v, i) => i % 3 ? v : NaN))])", rows)
        finally:
            browser.close()
    for row, (mean, nanmean) in zip(rows, got):
        arr = np.array(row)
        assert mean == float(np.mean(arr))
        masked = arr.copy()
        masked[::3] = np.nan
        assert nanmean == float(np.nanmean(masked))


@pytest.fixture()
def server(fixture_store, tmp_path):
    with app_server(fixture_store, tmp_path / "streamlit.log") as url:
        yield url


def _exact_title(page) -> str:
    return page.evaluate("""() => { for (const el of document.querySelectorAll('.js-plotly-plot')) {
        const t = ((el.layout && el.layout.title && el.layout.title.text) || '').replace(/<[^>]+>/g, '');
        if (t.startsWith('Exact model (test): θ0 +')) return t; } return ''; }""")


def _check_drawn(page, cache, tasks, slider_values: list[float], n_sliders: int) -> dict:
    """The chart as drawn now (no waiting): its α's are the sliders' and its numbers are Python's."""
    ds = page.evaluate(DATASET_JS)
    assert ds and ds["state"] == "drawn"
    alphas = json.loads(ds["alphas"])
    if n_sliders == 1:
        assert all(alphas[t] == slider_values[0] for t in tasks), (alphas, slider_values)
    else:
        assert [alphas[t] for t in tasks] == slider_values
    want = preview_accuracy(cache, {t: a for t, a in alphas.items() if t in cache.tasks})
    assert json.loads(ds["values"]) == [want[t] for t in tasks]
    assert ds["title"] == LP.preview_title(tasks, alphas, want)
    return ds


def test_live_slider_redraws_in_the_browser_then_updates_the_page(server, fixture_store):
    sync_api = pytest.importorskip("playwright.sync_api")
    name = result_name(SUITE, MODEL, "talos")
    cache = load_preview(fixture_store, name)
    tasks = [t for t in TASKS if t in cache.eval_tasks]
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = _browser(p)
        try:
            page = new_page(browser, viewport={"width": 1400, "height": 2000})
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{server}/arithmetic?method=talos")
            wait_drawn(page)  # the component's chart and the exact chart drawn, the first run over
            assert _exact_title(page)
            slider = page.locator(SLIDERS).first
            assert page.locator(SLIDERS).count() == 1
            assert float(slider.input_value()) == 8.0  # the selected α
            _check_drawn(page, cache, tasks, [8.0], 1)
            page.screenshot(path="/tmp/talos_live_before.png", full_page=True)

            slider.focus()
            for k in range(1, 6):  # every key press is drawn at once, from the browser's own arrays
                page.keyboard.press("ArrowLeft")
                _check_drawn(page, cache, tasks, [round(8.0 - 0.1 * k, 10)], 1)
            # the release went to Python: exact chart (grid point 7.5), URL
            wait_until(page, lambda: "θ0 + 7.5·Στ_t" in _exact_title(page), "the exact chart at α = 7.5")
            wait_until(page, lambda: "a.talos=7.5" in page.url, "the URL to hold α")
            for _ in range(10):  # fast presses: reruns answering older releases must not move the slider back
                page.keyboard.press("ArrowLeft")
            wait_until(page, lambda: "θ0 + 6.5·Στ_t" in _exact_title(page), "the exact chart at α = 6.5")
            wait_drawn(page)  # every rerun the presses started has finished
            assert float(slider.input_value()) == 6.5
            _check_drawn(page, cache, tasks, [6.5], 1)
            page.screenshot(path="/tmp/talos_live_after.png", full_page=True)

            page.get_by_text("Same α for all tasks").click()  # per-task sliders
            wait_until(page, lambda: page.locator(SLIDERS).count() == len(tasks), "one slider per task")
            wait_drawn(page)
            second = page.locator(SLIDERS).nth(1)
            start = [float(page.locator(SLIDERS).nth(i).input_value()) for i in range(len(tasks))]
            second.focus()
            for _ in range(3):
                page.keyboard.press("ArrowLeft")
            moved = list(start)
            moved[1] = round(start[1] - 0.3, 10)
            _check_drawn(page, cache, tasks, moved, len(tasks))
            wait_until(page, lambda: f"a.talos.{tasks[1]}=" in page.url, "the per-task α in the URL")
            wait_until(page, lambda: "shared by all tasks" in page.inner_text("body"), "the exact panel's note")
            page.screenshot(path="/tmp/talos_live_per_task.png", full_page=True)

            page.goto(f"{server}/arithmetic?method=talos&a.talos=2.5")  # a shared view
            wait_drawn(page)
            assert float(page.locator(SLIDERS).first.input_value()) == 2.5
            _check_drawn(page, cache, tasks, [2.5], 1)
            assert "θ0 + 2.5·Στ_t" in _exact_title(page)
            # a browser that lost the arrays (e.g. a reconnect to the same session) asks for them by key
            key = page.evaluate(f"() => document.querySelector('{CHART}').dataset.key")
            page.evaluate("() => { window.__talosLive.payloads = {}; }")
            page.locator(SLIDERS).first.focus()
            page.keyboard.press("ArrowRight")  # still drawn from the arrays the mounted chart holds
            _check_drawn(page, cache, tasks, [2.6], 1)
            wait_until(page, lambda: page.evaluate("(k) => k in window.__talosLive.payloads", key),
                       "the arrays sent again")
            wait_drawn(page)
            _check_drawn(page, cache, tasks, [2.6], 1)
            errs = page.evaluate("""() => document.querySelectorAll(
                '[data-testid="stException"], [data-testid="stAlertContentError"]').length""")
            assert errs == 0
        finally:
            browser.close()
    assert not errors, errors


NEG_CHART = '[data-talos-chart="negation_preview"]'


def test_live_negation_preview_in_the_browser(server, fixture_store):
    sync_api = pytest.importorskip("playwright.sync_api")
    from dashboard import data as D

    name = result_name(SUITE, MODEL, "talos")
    cache = load_preview(fixture_store, name)
    neg = D.get("negation", str(fixture_store), name)
    targets = [t for t in neg.targets if t in cache.tasks and t in cache.eval_tasks]
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = _browser(p)
        try:
            page = new_page(browser, viewport={"width": 1400, "height": 2000})
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{server}/arithmetic?method=talos")
            wait_drawn(page)
            page.get_by_role("tab", name="Negation").click()  # the tab is built once opened (a rerun)
            wait_until(page, lambda: page.locator(f'{NEG_CHART}[data-state="drawn"]').count() == 1,
                       "the negation tab's preview chart")
            wait_drawn(page)
            sliders = page.locator(f".talos-live:has({NEG_CHART}) input[type=range]")
            assert sliders.count() == len(neg.targets)

            def check() -> None:
                ds = page.evaluate(f"() => ({{...document.querySelector('{NEG_CHART}').dataset}})")
                alphas = json.loads(ds["alphas"])
                want_t, want_c = [], []
                for t in targets:
                    evals = [t] + ([neg.control_task] if neg.control_task in cache.eval_tasks else [])
                    acc = preview_accuracy(cache, {t: -alphas[t]}, eval_tasks=evals)
                    want_t.append(acc[t])
                    want_c.append(acc.get(neg.control_task))
                assert json.loads(ds["values"]) == want_t + want_c
                assert [alphas[t] for t in neg.targets] == [float(sliders.nth(i).input_value())
                                                           for i in range(len(neg.targets))]

            check()
            sliders.nth(0).focus()
            for _ in range(3):
                page.keyboard.press("ArrowLeft")
                check()  # drawn at once, before any server round trip
            key = f"n.talos.{neg.targets[0]}="
            wait_until(page, lambda: key in page.url, "the negation α in the URL")
            page.screenshot(path="/tmp/talos_live_negation.png", full_page=True)
        finally:
            browser.close()
    assert not errors, errors
