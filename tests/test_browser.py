"""Real browser: `streamlit run dashboard/app.py` on the synthetic store, headless Chromium via Playwright.

Run with ``python -m pytest tests/test_browser.py -m browser``. Needs Debian's chromium at
/usr/bin/chromium (``apt-get install -y chromium``); skipped when it or playwright is missing.
Screenshots go to /tmp/talos_dashboard_*.png.

The browser tests wait on the page's own state (:mod:`bench.page_state`: Streamlit's script state, drawn charts,
the texts a step must produce), never for a fixed time: a loaded machine makes them slower, not flaky. Playwright's
own waits (navigation, clicks) get the same last-resort ceiling (:data:`bench.page_state.CEILING_S`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from dashboard_fixtures import app_server

from bench.page_state import CEILING_S, wait_drawn, wait_until

CHROMIUM = os.environ.get("TALOS_CHROMIUM", "/usr/bin/chromium")
pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Plotly charts, and the in-browser preview component's SVG chart (title and bar values in data- attributes), in
# page order
TRACES_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot, [data-talos-chart][data-state="drawn"]'))
    .map(el => el.dataset.talosChart ? {title: el.dataset.title || '', y: [JSON.parse(el.dataset.values || '[]')]} : {
        title: (el.layout && el.layout.title && el.layout.title.text) || '',
        y: (el.data || []).map(t => Array.from(t.y || []))})"""
SLIDER = '.talos-live input[type="range"], [data-testid="stSlider"] input[type="range"]'  # the first α slider


@pytest.fixture()
def server(fixture_store, tmp_path):
    """The app launched as docs/dashboard.md says (streamlit run), on a free port, killed (process group) afterwards."""
    with app_server(fixture_store, tmp_path / "streamlit.log") as url:
        yield url


def _traces(page, prefix: str) -> list[list[float]]:
    for fig in page.evaluate(TRACES_JS):
        if re.sub(r"<[^>]+>", "", fig["title"]).startswith(prefix):  # Streamlit's theme wraps titles in <b>
            return fig["y"]
    return []


def new_page(browser, **kwargs):
    """A page whose Playwright waits (navigation, clicks, selectors) all end only at the last-resort ceiling."""
    page = browser.new_page(**kwargs)
    page.set_default_timeout(CEILING_S * 1000)
    page.set_default_navigation_timeout(CEILING_S * 1000)
    return page


def test_arithmetic_slider_updates_chart_in_a_real_browser(server):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        try:
            page = new_page(browser, viewport={"width": 1400, "height": 2200})
            page.goto(f"{server}/arithmetic?method=talos")
            exact_title = "Exact model (test): θ0 +"
            before = wait_until(page, lambda: _traces(page, exact_title), "the exact-results chart")
            # the in-browser preview component draws its chart after it mounts, possibly after the exact chart
            preview_before = wait_until(page, lambda: _traces(page, "First-order model"), "the linearized preview")
            wait_drawn(page)  # the first run is over: a key press now starts a run of its own
            page.screenshot(path="/tmp/talos_dashboard_arithmetic_before.png", full_page=True)

            # the in-browser preview component's range input (Streamlit's, a react-aria range input inside
            # [data-testid=stSlider], where the page keeps its Streamlit sliders)
            slider = page.locator(SLIDER).first
            assert float(slider.input_value()) == pytest.approx(8.0)
            slider.focus()
            for _ in range(25):  # step = grid step / 5 = 0.1 → α 8.0 → 5.5 (snapped to 5.5)
                page.keyboard.press("ArrowLeft")
            wait_until(page, lambda: _traces(page, exact_title) and _traces(page, exact_title)[0] != before[0],
                       "the exact chart to change after the slider move")
            after = _traces(page, exact_title)
            preview_after = wait_until(page, lambda: (_traces(page, "First-order model")
                                                      if _traces(page, "First-order model")[0] != preview_before[0]
                                                      else None), "the preview chart to change")
            assert after[0] != before[0] and preview_after[0] != preview_before[0]
            assert float(slider.input_value()) == pytest.approx(5.5)
            assert "a.talos=5.5" in page.url  # the view is in the URL
            page.screenshot(path="/tmp/talos_dashboard_arithmetic_after.png", full_page=True)

            # export: PNG via kaleido + local Chromium, or a clear warning offering the HTML export (the popover's
            # panel is built once it is opened: Playwright's click waits for its button)
            wait_drawn(page)
            page.get_by_text("Export figure").first.click()
            page.get_by_role("button", name="Render PNG").first.click()
            done = page.get_by_text(".png").or_(page.get_by_text("use the HTML export instead"))
            done.first.wait_for()
            page.get_by_text("HTML (interactive").first.wait_for()  # the offline fallback is always there
            page.screenshot(path="/tmp/talos_dashboard_export.png")
            page.keyboard.press("Escape")

            page.goto(f"{server}/disentanglement")
            wait_until(page, lambda: _traces(page, "ξ for"), "the ξ heatmaps")
            page.screenshot(path="/tmp/talos_dashboard_disentanglement.png", full_page=True)
        finally:
            browser.close()
