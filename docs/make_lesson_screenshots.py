"""Screenshots of the lesson (``/lesson``) as the room sees it: 1280 × 720, read-only server, walked with the keys.

Starts ``talos dashboard`` in read-only mode on the shipped store, opens the lesson of a suite and presses → and
PageDown (what a presentation clicker sends) through every step, question then answer, waiting on the page's own
state (:func:`wait_screen`: the step's title, its answer shown or not, everything drawn). Writes
``docs/img/lesson-<suite>-<step>-<question|answer>.png`` (palette PNGs; the vision suite's questions and answers,
the text suite's answers: its questions read the same) or, with ``--out``, every screen into that folder.

    python -m docs.make_lesson_screenshots                      # → docs/img/lesson-*.png
    python -m docs.make_lesson_screenshots --out /tmp/lesson    # every screen of both suites → /tmp/lesson

Needs Playwright and Chromium (``/usr/bin/chromium``, or ``TALOS_CHROMIUM``), as the browser tests do. The browser
test ``tests/test_browser_lesson.py`` walks the lesson with the same functions.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench.page_state import wait_drawn, wait_until
from bench.server import ROOT, dashboard
from dashboard.lesson import N_STEPS, STEPS

IMG = ROOT / "docs" / "img"
CHROMIUM = os.environ.get("TALOS_CHROMIUM", "/usr/bin/chromium")
VIEWPORT = {"width": 1280, "height": 720}
#: which screens go to docs/img: suite -> shown states (False = the question, True = the answer)
SHOTS = {"vision": (False, True), "text": (True,)}

#: the lesson's position as the page shows it: its title, whether the answer is out, the keyboard mounted
STATE_JS = """() => {
    const h1 = document.querySelector('h1');
    return {title: h1 ? h1.innerText : '', answer: !!document.querySelector('.st-key-lesson_answer'),
            keys: !!document.querySelector('[data-talos-lesson-keys="on"]')};
}"""


def screen_state(page) -> dict:
    """The lesson's title, whether its answer is shown and whether its keys listen (:data:`STATE_JS`)."""
    return page.evaluate(STATE_JS)


def wait_screen(page, step: int, revealed: bool) -> None:
    """Wait until the page shows ``step`` with (``revealed``) or without its answer, its keys listen and everything
    is drawn."""
    def there() -> bool:
        s = screen_state(page)
        return s["title"].startswith(f"{step} / {N_STEPS} ·") and s["answer"] == revealed and s["keys"]

    wait_until(page, there, f"step {step} of the lesson {'with' if revealed else 'without'} its answer")
    wait_drawn(page)


def positions() -> list[tuple[int, bool]]:
    """Every screen of the lesson in order: each step's question, then its answer."""
    return [(s, r) for s in range(1, N_STEPS + 1) for r in (False, True)]


def walk(page, url: str, suite: str, at: Callable[[int, bool], None] | None = None) -> None:
    """Open ``suite``'s lesson at ``url`` and press → and PageDown in turn through every screen, calling
    ``at(step, revealed)`` on each once it is drawn."""
    page.goto(f"{url}/lesson?suite={suite}")
    order = positions()
    for i, (step, revealed) in enumerate(order):
        wait_screen(page, step, revealed)
        if at is not None:
            at(step, revealed)
        if i + 1 < len(order):
            page.keyboard.press("ArrowRight" if i % 2 == 0 else "PageDown")


def file_name(suite: str, step: int, revealed: bool) -> str:
    return f"lesson-{suite}-{step}-{'answer' if revealed else 'question'}.png"


def main(argv: list[str] | None = None) -> int:
    from playwright.sync_api import sync_playwright

    from docs.make_screenshots import small_png

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=str(ROOT / "cached_results"), help="store to show (default: cached_results)")
    ap.add_argument("--out", default=None, help="write every screen of both suites here instead of docs/img")
    args = ap.parse_args(argv)
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"no Chromium at {CHROMIUM} (apt-get install -y chromium, or set TALOS_CHROMIUM)")
    out = Path(args.out) if args.out else IMG
    out.mkdir(parents=True, exist_ok=True)
    os.environ["TALOS_DASHBOARD_READ_ONLY"] = "1"  # as a workshop server runs: the dashboard inherits it
    log = Path(tempfile.mkdtemp(prefix="talos-lesson-shots-")) / "dashboard.log"
    with dashboard(Path(args.store).resolve(), log) as (url, _), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            for suite, kept in SHOTS.items():
                page = browser.new_context(viewport=VIEWPORT).new_page()

                def shoot(step: int, revealed: bool, suite: str = suite, kept: tuple = kept, page=page) -> None:
                    if args.out is None and revealed not in kept:
                        return
                    path = out / file_name(suite, step, revealed)
                    png = page.screenshot()
                    path.write_bytes(png if args.out else small_png(png))
                    print(f"{path}  ({STEPS[step - 1][1]}, {len(path.read_bytes()) / 1024:.0f} kB)", flush=True)

                walk(page, url, suite, shoot)
                page.context.close()
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
