"""Screenshots of every dashboard page, as a first-time visitor sees them (headless Chromium, 1500 × 1100).

Starts ``talos dashboard`` on a store (default: the shipped ``cached_results/``), opens each page of each suite
(``/<page>?suite=<suite>``) and takes a screenshot once the page has finished its script run and drawn every chart,
image and font (:func:`bench.page_state.wait_drawn`: the page's own state, no sleeps). The pages go to a temporary
folder (or ``--out``); ``--readme`` also writes the README's pictures into ``docs/img/`` (palette PNGs, a few
hundred kB in all).

    python -m docs.make_screenshots                     # every page of both shipped suites → a temporary folder
    python -m docs.make_screenshots --readme            # … and the README's pictures → docs/img/
    python -m docs.make_screenshots --full-page --pages learn localization --suites vision --out /tmp/shots

Needs Playwright and Chromium (``/usr/bin/chromium``, or ``TALOS_CHROMIUM``), as the browser tests do.
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile
from pathlib import Path

from bench.page_state import wait_drawn
from bench.server import ROOT, dashboard

IMG = ROOT / "docs" / "img"
CHROMIUM = os.environ.get("TALOS_CHROMIUM", "/usr/bin/chromium")
PAGES = ("learn", "arithmetic", "disentanglement", "localization", "masks", "efficiency", "run")
SUITES = ("text", "vision")
VIEWPORT = {"width": 1500, "height": 1100}
#: the height of the page's content (Streamlit scrolls its main block, not the document)
MAIN_HEIGHT_JS = ("() => { const m = document.querySelector('[data-testid=\"stMain\"]'); "
                  "return m ? m.scrollHeight : 0; }")
#: the README's pictures: (suite, page, file name in docs/img/)
README_SHOTS = (("vision", "learn", "learn.png"), ("text", "arithmetic", "arithmetic.png"),
                ("text", "localization", "localization.png"))


def small_png(png: bytes) -> bytes:
    """``png`` as a 256-colour palette PNG (a dashboard page has few colours: about a quarter of the bytes)."""
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    out = io.BytesIO()
    img.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(out, "PNG", optimize=True)
    return out.getvalue()


def shoot(url: str, shots: list[tuple[str, str]], out: Path, *, full_page: bool = False) -> list[Path]:
    """Screenshots of ``(suite, page)`` pairs of the dashboard at ``url`` into ``out`` (``<suite>_<page>.png``)."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise SystemExit(f"no Chromium at {CHROMIUM} (apt-get install -y chromium, or set TALOS_CHROMIUM)")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            for suite, page_name in shots:
                ctx = browser.new_context(viewport=VIEWPORT)  # a new session per page: a first visit
                try:
                    page = ctx.new_page()
                    errors: list[str] = []
                    page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
                    page.goto(f"{url}/{page_name}?suite={suite}")
                    wait_drawn(page)
                    if full_page:  # Streamlit scrolls its main block, not the document: grow the window to it
                        height = page.evaluate(MAIN_HEIGHT_JS)
                        page.set_viewport_size({"width": VIEWPORT["width"], "height": max(VIEWPORT["height"], height)})
                        wait_drawn(page)
                    path = out / f"{suite}_{page_name}.png"
                    page.screenshot(path=str(path))
                    written.append(path)
                    print(f"{path}" + (f"  (page errors: {errors})" if errors else ""), flush=True)
                finally:
                    ctx.close()
        finally:
            browser.close()
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=str(ROOT / "cached_results"), help="store to show (default: cached_results)")
    ap.add_argument("--suites", nargs="+", default=list(SUITES), help="suites (default: text vision)")
    ap.add_argument("--pages", nargs="+", default=list(PAGES), choices=PAGES, help="pages (default: all)")
    ap.add_argument("--out", default=None, help="folder for the screenshots (default: a new temporary folder)")
    ap.add_argument("--full-page", action="store_true", help="whole pages instead of the 1500 × 1100 window")
    ap.add_argument("--readme", action="store_true",
                    help=f"also write the README's pictures into {IMG.relative_to(ROOT)}/ (window size, palette PNG)")
    args = ap.parse_args(argv)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="talos-screenshots-"))
    out.mkdir(parents=True, exist_ok=True)
    shots = [(s, p) for s in args.suites for p in args.pages]
    with dashboard(Path(args.store).resolve(), out / "dashboard.log") as (url, _):
        shoot(url, shots, out, full_page=args.full_page)
        if args.readme:
            tmp = Path(tempfile.mkdtemp(prefix="talos-readme-shots-"))
            shoot(url, [(s, p) for s, p, _ in README_SHOTS], tmp)
            IMG.mkdir(parents=True, exist_ok=True)
            for suite, page, name in README_SHOTS:
                data = small_png((tmp / f"{suite}_{page}.png").read_bytes())
                (IMG / name).write_bytes(data)
                print(f"{IMG / name}: {len(data) / 1024:.0f} kB")
    print(f"screenshots in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
