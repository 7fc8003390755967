"""Slider latency: one browser session, time from an Arithmetic α slider move to the updated preview chart (a slider
must feel live).

A measurement script, not a timed test. It starts one dashboard server on the shipped ``cached_results/`` (or
``--store``; ``--root`` serves another checkout, e.g. main's page from a ``git archive`` copy, for a before/after
pair), opens the Arithmetic page in headless Chromium (Playwright, ``--no-sandbox``), focuses the first α slider
(the in-browser preview component's range input, or Streamlit's slider on a page without it) and, ``--moves``
times, presses ArrowRight (ArrowLeft at the end of the range). Two clocks per move:

* **in page** (the number to quote): the ``keydown`` event's ``timeStamp`` (when the browser created it) to the
  first animation frame whose *First-order model* chart signature (title and bar values, the detection of
  ``bench.bench_load`` and ``tests/test_browser.py``) differs from before the press. A ``requestAnimationFrame``
  loop checks the signature every frame, so this is key press → first frame that paints the new chart, to
  within one frame (≈ 16 ms), with no Playwright round trip in it;
* **Playwright**: from just before ``keyboard.press`` to ``wait_for_function`` (polling every frame) seeing the
  change, which adds the driver's IPC round trips (the number the earlier rows of RESULTS.md used).

Moves are spaced by ``--pause`` seconds so each starts on an idle page (the server's rerun for the previous
release has finished). Also counts the Plotly charts re-drawn by a move, the bytes the server sent over the
websocket at page load and per move (the rerun's deltas), for the component the in-page compute + draw time of its
``input`` event, and records the load average.

    python -m bench.bench_slider --moves 20
    python -m bench.bench_slider --moves 15 --root /tmp/main_copy --json /tmp/before.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_load import CHANGED_JS, CHROMIUM, ERRORS_JS, PREVIEW, SIGNATURE_JS, SLIDER, _pct
from bench.server import free_port, stop_server, wait_healthy

ROOT = Path(__file__).resolve().parent.parent

# every Plotly chart gets a fresh marker; a chart re-drawn by Streamlit loses it (its element is replaced or its
# data re-plotted: plotly_afterplot fires)
MARK_JS = """() => { let n = 0; for (const el of document.querySelectorAll('.js-plotly-plot')) {
    el.dataset.talosMark = '1'; n++;
    if (!el.dataset.talosHook && el.on) { el.dataset.talosHook = '1';
        el.on('plotly_afterplot', () => { el.dataset.talosMark = '0'; }); } }
    return n; }"""
REDRAWN_JS = """() => { let n = 0; for (const el of document.querySelectorAll('.js-plotly-plot'))
    if (el.dataset.talosMark !== '1') n++; return n; }"""


# in-page clock: keydown time, and the time of the first animation frame whose preview signature changed
PROBE_JS = f"""(prefix) => {{
    const B = window.__talosBench = window.__talosBench || {{}};
    const sig = () => ({SIGNATURE_JS})(prefix);
    B.sig = sig(); B.keyAt = null; B.changedAt = null;
    if (!B.installed) {{
        B.installed = true;
        document.addEventListener('keydown', (e) => {{ B.keyAt = e.timeStamp; B.before = B.sig; }}, true);
        const tick = () => {{
            const now = sig();
            if (B.keyAt !== null && B.changedAt === null && now !== null && now !== B.before)
                B.changedAt = performance.now();
            B.sig = now;
            requestAnimationFrame(tick);
        }};
        requestAnimationFrame(tick);
    }}
    return B.sig !== null;
}}"""
RESULT_JS = """() => { const B = window.__talosBench; const L = window.__talosLive && window.__talosLive.lastInput;
    return [B.keyAt, B.changedAt, L && L.start >= B.keyAt ? L.drawn - L.start : null]; }"""


async def _measure(url: str, moves: int, pause: float, timeout: float) -> dict:
    from playwright.async_api import async_playwright

    out = {"move_ms": [], "page_ms": [], "draw_ms": [], "redrawn": [], "timeouts": 0, "charts": 0, "ws_bytes": []}
    received = [0]  # bytes the server sent over the websocket (the rerun deltas)

    def _on_ws(ws) -> None:
        ws.on("framereceived", lambda payload: received.__setitem__(0, received[0] + len(payload)))

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = await (await browser.new_context(viewport={"width": 1400, "height": 1600})).new_page()
            page.on("websocket", _on_ws)
            t0 = time.monotonic()
            await page.goto(url, timeout=180_000)
            await page.wait_for_function(f"() => ({SIGNATURE_JS})({json.dumps(PREVIEW)}) !== null", timeout=180_000,
                                         polling=100)
            out["load_ms"] = (time.monotonic() - t0) * 1000
            await asyncio.sleep(2.0)  # let the first run finish drawing everything
            out["ws_bytes_load"] = received[0]
            out["live_component"] = await page.locator(".talos-live").count() > 0
            slider = page.locator(SLIDER).first
            key = "ArrowRight"
            for _ in range(moves):
                await slider.focus()
                value, lo, hi = await slider.evaluate("el => [Number(el.value), Number(el.min), Number(el.max)]")
                key = "ArrowLeft" if value >= hi - 1e-9 else ("ArrowRight" if value <= lo + 1e-9 else key)
                out["charts"] = await page.evaluate(MARK_JS)
                prev = await page.evaluate(SIGNATURE_JS, PREVIEW)
                await page.evaluate(PROBE_JS, PREVIEW)
                got_before = received[0]
                t = time.monotonic()
                await page.keyboard.press(key)
                try:
                    await page.wait_for_function(CHANGED_JS, arg=[PREVIEW, prev], timeout=timeout * 1000, polling="raf")
                    out["move_ms"].append((time.monotonic() - t) * 1000)
                    await page.wait_for_function("() => window.__talosBench.changedAt !== null", timeout=5000)
                    key_at, changed_at, draw = await page.evaluate(RESULT_JS)
                    out["page_ms"].append(changed_at - key_at)
                    if draw is not None:
                        out["draw_ms"].append(draw)
                except Exception:  # Playwright's TimeoutError
                    out["timeouts"] += 1
                await asyncio.sleep(pause)
                out["ws_bytes"].append(received[0] - got_before)
                out["redrawn"].append(await page.evaluate(REDRAWN_JS))
            out["streamlit_errors"] = await page.evaluate(ERRORS_JS)
        finally:
            await browser.close()
    return out


def _stats(ms: list[float], unit: str = "ms") -> dict:
    return {"n": len(ms), f"p50_{unit}": _pct(ms, 50), f"p90_{unit}": _pct(ms, 90),
            f"min_{unit}": min(ms, default=float("nan")), f"max_{unit}": max(ms, default=float("nan"))}


def run(moves: int = 20, pause: float = 1.5, timeout: float = 10.0, store: str | None = None,
        path: str = "/arithmetic", root: str | Path | None = None) -> dict:
    port = free_port()
    # the server writes to its log while it runs: no context manager
    log = tempfile.NamedTemporaryFile("w+", prefix="talos_slider_", suffix=".log", delete=False)  # noqa: SIM115
    cmd = [sys.executable, "-m", "talos_core.cli", "dashboard", "--port", str(port), "--read-only"]
    if store:
        cmd += ["--store", store]
    load_before = os.getloadavg()
    proc = subprocess.Popen(cmd, cwd=str(root or ROOT), stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True)
    try:
        wait_healthy(port, proc, timeout=120.0)
        res = asyncio.run(_measure(f"http://127.0.0.1:{port}{path}", moves, pause, timeout))
    finally:
        stop_server(proc)
        log.close()
    ms = res["move_ms"]
    return {"root": str(root or ROOT), "path": path, "live_component": res.get("live_component"),
            "moves": len(ms), "timeouts": res["timeouts"],
            "in_page": _stats(res["page_ms"]), "playwright": _stats(ms),
            "p50_ms": _pct(ms, 50), "p90_ms": _pct(ms, 90),
            "min_ms": min(ms, default=float("nan")), "max_ms": max(ms, default=float("nan")),
            "component_compute_draw_ms": _stats(res["draw_ms"]) if res["draw_ms"] else None,
            "charts_on_page": res["charts"], "charts_redrawn_per_move": sorted(set(res["redrawn"])),
            "ws_bytes_page_load": res.get("ws_bytes_load"), "ws_bytes_per_move": _stats(res["ws_bytes"], "bytes"),
            "load_ms": res.get("load_ms"), "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
            "streamlit_errors": res.get("streamlit_errors"), "server_log": log.name,
            "samples_in_page_ms": res["page_ms"], "samples_ms": ms}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moves", type=int, default=20, help="slider moves to time (default 20)")
    ap.add_argument("--pause", type=float, default=1.5, help="seconds between moves (default 1.5)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds a move may take (default 10)")
    ap.add_argument("--store", default=None, help="store to serve (default: the shipped cached_results/)")
    ap.add_argument("--path", default="/arithmetic", help="page and query (default /arithmetic)")
    ap.add_argument("--root", default=None, help="serve this checkout instead of this one (before/after pairs)")
    ap.add_argument("--json", default=None, help="also write the result here")
    args = ap.parse_args(argv)
    res = run(args.moves, args.pause, args.timeout, args.store, args.path, args.root)
    text = json.dumps(res, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0 if res["timeouts"] == 0 and not res["streamlit_errors"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
