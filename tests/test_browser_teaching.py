"""Real browser: the Arithmetic gallery follows the α slider, the live ξ map draws, and clicking a
localization cell shows the examples behind it. Same server fixture as ``tests/test_browser.py``; screenshots
go to /tmp/talos_teaching_*.png.

    python -m pytest tests/test_browser_teaching.py -m browser
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_browser import CHROMIUM, new_page, server  # noqa: F401  (the server fixture)

from bench.page_state import texts, wait_drawn, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LIVE_SLIDER = '.talos-live input[type="range"]'  # the in-browser preview component's α slider (mounts after the page)
CELL_JS = """([prefix, i, j]) => {
    for (const el of document.querySelectorAll('.js-plotly-plot')) {
        const t = ((el.layout && el.layout.title && el.layout.title.text) || '').replace(/<[^>]+>/g, '');
        if (!t.includes(prefix)) continue;
        const r = el.getBoundingClientRect(), xa = el._fullLayout.xaxis, ya = el._fullLayout.yaxis;
        return [r.left + xa._offset + xa.c2p(j), r.top + ya._offset + ya.c2p(i)];
    }
    return null;
}"""


@contextmanager
def _chromium_page():
    """A headless Chromium page (1400×1400) and the list its uncaught page errors go to; skips without Playwright
    or Chromium."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = new_page(browser, viewport={"width": 1400, "height": 1400})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            yield page, errors
        finally:
            browser.close()


def _step_live_slider(page) -> None:
    """Move the in-browser α slider one step (a fifth of the grid step: between grid points) and wait for the
    gallery's linearized note. The key is pressed once the page has drawn everything (:func:`wait_drawn`: the
    component has mounted and drawn its chart, so the range input is its own, not a Streamlit slider whose step is a
    whole grid step; and the page's first run is over, so the release starts a run of its own); the slider's value
    must then move, and the release's run must bring the gallery's first-order heading."""
    wait_drawn(page)
    slider = page.locator(LIVE_SLIDER).first
    before = slider.input_value()
    slider.focus()
    page.keyboard.press("ArrowRight")
    wait_until(page, lambda: slider.input_value() != before, "the α slider one step further")
    wait_until(page, lambda: any("· first-order model at α =" in t for t in texts(page)),
               "the gallery's first-order heading")


def _frames(page, n: int = 2) -> None:
    """Let the page draw ``n`` animation frames (a scroll has moved what a click's coordinates are read from)."""
    page.evaluate("(n) => new Promise(r => { const f = (k) => k ? requestAnimationFrame(() => f(k - 1)) : r(); "
                  "f(n); })", n)


def test_teaching_views_in_a_real_browser(server):  # noqa: F811
    with _chromium_page() as (page, errors):
        page.goto(f"{server}/arithmetic?method=talos")
        wait_until(page, lambda: page.locator('[data-testid="stImage"] img').count() >= 12, "the gallery thumbnails")
        assert any(re.search(r"under addition · .* — \d+/12 right", t) for t in texts(page))
        _step_live_slider(page)
        wait_drawn(page)
        page.get_by_text("The examples behind the numbers").scroll_into_view_if_needed()
        page.screenshot(path="/tmp/talos_teaching_arithmetic.png")

        page.goto(f"{server}/disentanglement")
        wait_until(page, lambda: page.evaluate(CELL_JS, ["First-order model: live ξ, 50×50", 0, 0]), "the live ξ map")
        wait_drawn(page)
        page.get_by_text("Live ξ of the first-order model").scroll_into_view_if_needed()
        page.screenshot(path="/tmp/talos_teaching_disentanglement.png")

        page.goto(f"{server}/localization")
        wait_until(page, lambda: page.evaluate(CELL_JS, ["click a cell", 0, 1]), "the clickable matrix")
        wait_drawn(page)
        page.get_by_text("The examples behind a cell").scroll_into_view_if_needed()
        _frames(page)
        x, y = page.evaluate(CELL_JS, ["click a cell", 0, 1])  # row digits, column mnist
        page.mouse.click(x, y)
        wait_until(page, lambda: any(t.startswith("mnist under τ_digits") for t in texts(page)),
                   "the clicked cell's examples")
        wait_drawn(page)
        page.screenshot(path="/tmp/talos_teaching_localization.png")
        assert not errors, errors


def test_text_gallery_on_the_shipped_store_in_a_real_browser(tmp_path):
    """The shipped text suite's gallery: a table of snippets (no thumbnails) that follows the α slider."""
    from dashboard_fixtures import REPO, app_server

    with _chromium_page() as (page, errors), app_server(REPO / "cached_results", tmp_path / "streamlit.log") as url:
        page.goto(f"{url}/arithmetic?suite=text&method=talos")
        wait_until(page, lambda: any(re.search(r"under addition · .* — \d+/24 right", t) for t in texts(page)),
                   "the text gallery's summary")
        wait_until(page, lambda: page.locator('[data-testid="stDataFrame"]').count() >= 1, "the gallery table")
        assert page.locator('[data-testid="stImage"] img').count() == 0, "a text suite has no thumbnails"
        _step_live_slider(page)
        wait_drawn(page)
        page.get_by_text("The examples behind the numbers").scroll_into_view_if_needed()
        page.screenshot(path="/tmp/talos_teaching_text.png")
        assert not errors, errors
