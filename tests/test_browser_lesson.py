"""Real browser: the lesson (``/lesson``) end to end on the shipped store, as a workshop runs it — a read-only server,
a 1280 × 720 projector, the keys a presentation clicker sends, no network beyond the server. Every step's question
and answer fit the screen; ← / PageUp go back; a reloaded URL opens the same screen with the same α; keys typed into
the α slider move α, not the lesson. The walk is :func:`docs.make_lesson_screenshots.walk` (it waits on the page's
own state); screenshots go to /tmp/talos_lesson_<suite>_<step>_<question|answer>.png.

    python -m pytest tests/test_browser_lesson.py -m browser
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from dashboard_fixtures import REPO, app_server
from test_browser import CHROMIUM, new_page

from bench.page_state import wait_until
from dashboard.lesson import N_STEPS
from docs.make_lesson_screenshots import VIEWPORT, file_name, positions, wait_screen, walk

pytestmark = [pytest.mark.browser, pytest.mark.slow]

#: where the main content of a screen ends (px from the top of the window), and whether the page scrolls sideways
LAYOUT_JS = """() => {
    const bottom = (sel) => {
        const e = document.querySelector(sel);
        return e ? e.getBoundingClientRect().bottom : null;
    };
    const main = document.querySelector('[data-testid="stMain"]');
    return {title: bottom('h1'), text: bottom('.st-key-lesson_text'), chart: bottom('[data-testid="stPlotlyChart"]'),
            scrolled: main ? main.scrollTop : 0, wide: main ? main.scrollWidth > main.clientWidth + 1 : false,
            font: parseFloat(getComputedStyle(document.querySelector('.st-key-lesson_text p')).fontSize)};
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The dashboard on the shipped store in read-only mode (``TALOS_DASHBOARD_READ_ONLY=1``, what
    ``talos dashboard --read-only`` sets)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("TALOS_DASHBOARD_READ_ONLY", "1")
    try:
        with app_server(REPO / "cached_results", tmp_path_factory.mktemp("lesson") / "streamlit.log") as url:
            yield url
    finally:
        mp.undo()


@contextmanager
def _projector(url: str):
    """A 1280 × 720 page that can reach the dashboard's server only, and the list its page errors go to."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    host = urlparse(url).netloc
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = new_page(browser, viewport=VIEWPORT)
            page.route("**/*", lambda route: route.continue_() if urlparse(route.request.url).netloc == host
                       else route.abort())  # offline: a classroom without internet
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            yield page, errors
        finally:
            browser.close()


def _query(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


@pytest.mark.parametrize("suite", ["vision", "text"])
def test_the_lesson_runs_end_to_end_by_keyboard_read_only_at_1280x720(server, suite):
    with _projector(server) as (page, errors):
        def check(step: int, revealed: bool) -> None:
            q = _query(page)
            assert (q.get("step"), q.get("reveal")) == (str(step), "1" if revealed else "0"), "a URL per screen"
            box = page.evaluate(LAYOUT_JS)
            assert box["scrolled"] == 0 and not box["wide"], box
            for part in ("title", "text", "chart"):
                if box[part] is not None:
                    assert box[part] <= VIEWPORT["height"], f"step {step}: the {part} ends below the screen ({box})"
            assert box["chart"] is not None or not revealed, f"step {step}: the answer comes with its chart"
            assert box["font"] >= 20, f"large type for the room ({box['font']} px)"
            page.screenshot(path=f"/tmp/talos_{file_name(suite, step, revealed).replace('-', '_')}")

        walk(page, server, suite, check)
        assert page.locator(".st-key-lesson_next button").is_disabled(), "the last screen ends the lesson"
        for key, want in (("ArrowLeft", (N_STEPS, False)), ("PageUp", (N_STEPS - 1, True)),
                          ("ArrowLeft", (N_STEPS - 1, False))):
            page.keyboard.press(key)
            wait_screen(page, *want)
        assert not errors, errors


def test_a_reloaded_url_opens_the_same_screen_and_the_slider_keeps_its_keys(server):
    with _projector(server) as (page, errors):
        page.goto(f"{server}/lesson?suite=vision&step=2&reveal=1")
        wait_screen(page, 2, True)
        chart = page.locator('[data-testid="stPlotlyChart"]').first
        before = chart.text_content()
        page.locator('.st-key-lesson_alpha input[type="range"]').first.focus()
        page.keyboard.press("ArrowRight")  # inside the slider: α moves, the lesson stays on its screen
        wait_until(page, lambda: "alpha" in _query(page), "the new α in the URL")
        wait_screen(page, 2, True)
        alpha = _query(page)["alpha"]
        wait_until(page, lambda: f"α = {alpha}" in chart.text_content(), "the chart at the new α")
        assert chart.text_content() != before and _query(page)["step"] == "2"

        page.reload()  # the same URL: the same screen, the same α
        wait_screen(page, 2, True)
        assert _query(page)["alpha"] == alpha
        wait_until(page, lambda: f"α = {alpha}" in chart.text_content(), "the chart at the URL's α after the reload")
        page.goto(f"{server}/lesson?suite=vision&step=4&reveal=1&alpha={alpha}")  # a link to the ξ map at that α
        wait_screen(page, 4, True)
        assert f"α = {alpha}" in chart.text_content(), "the ξ map marks the linked α"
        assert not errors, errors


def test_every_position_of_the_walk_is_a_screen():
    assert positions()[0] == (1, False) and positions()[-1] == (N_STEPS, True) and len(positions()) == 2 * N_STEPS
