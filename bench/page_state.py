"""What a dashboard page in the browser is doing, read from the page itself: for Playwright (the browser tests,
``docs/make_screenshots.py``, the benchmarks) to wait on the page's own state instead of the clock.

Streamlit marks its app root (``[data-testid="stApp"]``) with ``data-test-script-state``: ``initial`` before the
first script run, ``running`` while a script or fragment runs, ``notRunning`` after; elements of a run being
replaced are ``data-stale="true"``; a lazily loaded element (Plotly, dataframes, components) shows a
``stSkeleton`` until its code has loaded. A Plotly chart is drawn once its ``.main-svg`` exists; the in-browser
preview component's chart says ``data-state="drawn"`` (``dashboard/live_preview.js``).

Stdlib only (no Playwright import): the functions take a Playwright ``Page``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: the page has finished its script run and drawn everything it shows (charts, images, fonts)
DRAWN_JS = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if (!document.querySelector('h1')) return false;
    if (document.querySelector('[data-testid="stSkeleton"], [data-stale="true"]')) return false;
    for (const el of document.querySelectorAll('[data-testid="stPlotlyChart"]'))
        if (!el.querySelector('.main-svg')) return false;
    for (const el of document.querySelectorAll('[data-talos-chart]'))
        if (el.dataset.state !== 'drawn') return false;
    for (const img of document.images) if (!img.complete) return false;
    return document.fonts.status === 'loaded';
}"""

#: the texts of the page's markdown blocks (captions, notes, gallery summaries), in page order
TEXTS_JS = ("() => Array.from(document.querySelectorAll('[data-testid=\"stMarkdownContainer\"]'))"
            ".map(e => e.innerText)")

#: the script state on the app root ('initial', 'running', 'notRunning', ...), null before the app has mounted
SCRIPT_STATE_JS = ("() => { const a = document.querySelector('[data-testid=\"stApp\"]'); "
                   "return a ? a.getAttribute('data-test-script-state') : null; }")

#: the last resort of every wait: far above what a loaded 2-core machine needs, so it only ends a wait that would
#: never end (a broken page), never a slow one
CEILING_S = 300.0


def wait_until(page: Any, predicate: Callable[[], Any], what: str, ceiling_s: float = CEILING_S) -> Any:
    """Poll ``predicate()`` (Python, reading the page) on the page's animation frames until it is truthy; return
    its value. ``ceiling_s`` only guards against a page that never gets there (an error naming ``what``)."""
    deadline = time.monotonic() + ceiling_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"the page never showed {what} (gave up after {ceiling_s:.0f} s)")
        page.wait_for_timeout(100)


def wait_drawn(page: Any, ceiling_s: float = CEILING_S) -> None:
    """Wait until the page's script run has finished and everything it shows is drawn (:data:`DRAWN_JS`), and is
    still so two animation frames later (a component that re-runs its fragment on mount starts a new run)."""
    deadline = time.monotonic() + ceiling_s
    while True:
        page.wait_for_function(DRAWN_JS, polling="raf", timeout=max(1.0, deadline - time.monotonic()) * 1000)
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        if page.evaluate(DRAWN_JS):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the page never settled (gave up after {ceiling_s:.0f} s)")


def texts(page: Any) -> list[str]:
    """The page's markdown texts (:data:`TEXTS_JS`)."""
    return page.evaluate(TEXTS_JS)
