"""Load: one dashboard server, N concurrent browser sessions moving the Arithmetic α slider (a
workshop room shares one server).

A bounded load script against localhost, not a timed test. It

1. starts one server as a workshop would (``python -m talos_core.cli dashboard --port P --read-only``, from the
   repository root, on the default store: the shipped ``cached_results/``),
2. opens N sessions in one headless Chromium (Playwright, asyncio; one browser context + page per session),
   each on the Arithmetic page (``/arithmetic``),
3. in every session, for ``--seconds``: focus the α slider, press ArrowRight (ArrowLeft once the slider is at
   its maximum, and back), and time until the *First-order model* chart changes — the same detection as
   ``tests/test_browser.py::test_arithmetic_slider_updates_chart_in_a_real_browser`` (the Plotly figure's
   title and trace values read from the DOM); one move at a time per session,
4. samples the RSS of the server's process tree with psutil every 0.5 s (before the sessions, peak, after).

Errors (all must be 0): a move whose chart did not change within ``--move-timeout`` (10 s), a page that did
not load its chart within ``--load-timeout``, page exceptions (``pageerror``), Streamlit error elements
(``stException``, ``st.error``) and Streamlit's connection-lost dialog seen on a page.

``--client ws`` replaces the browsers by websocket clients speaking Streamlit's own protocol
(:mod:`bench.st_client`: the frontend's ``BackMsg``/``ForwardMsg`` protobufs on ``/_stcore/stream``), so the
server is measured alone, not 30 Chromium renderers sharing its cores: each session opens ``/arithmetic``, finds
the first α control in the deltas (:func:`bench.st_client.alpha_control`: the in-browser preview component, or a
``st.slider`` where the page falls back to one) and moves it one slider step at a time (the widget state and the
fragment rerun request the frontend sends on release), timing send → the fragment run's ``script_finished`` and →
the delta of the chart the server redraws: the component's *Exact* chart (the URL the server writes must then hold
the new α), or the server-drawn *First-order model* (its title must carry the new α). Errors: a move or page load
without ``script_finished`` within its timeout, exception elements, ``st.error`` alerts, a missing chart or a move
that did not take effect ("stale"), a closed
connection. ``--ramp S`` starts one session every S seconds (default 0.5 s for ws, 0 for browsers).

    python -m bench.bench_load                          # 30 browser sessions, 60 s
    python -m bench.bench_load --client ws --sessions 30 --seconds 60
    python -m bench.bench_load --sessions 2 --seconds 10 --json /tmp/load.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.server import free_port, stop_server, wait_healthy
from dashboard.views import FIRST_ORDER

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("TALOS_CHROMIUM", "/usr/bin/chromium")
PREVIEW = FIRST_ORDER  # the page's own title constant

# the preview chart's signature: title (holds α) + trace values, or null while it is not drawn; the first chart in
# page order whose title starts with the prefix: a Plotly chart, or the in-browser preview component's SVG chart
# (its data-title / data-values, set after each draw)
SIGNATURE_JS = """(prefix) => {
    for (const el of document.querySelectorAll('.js-plotly-plot, [data-talos-chart][data-state="drawn"]')) {
        if (el.dataset.talosChart) {
            const t = el.dataset.title || '';
            if (t.startsWith(prefix)) return JSON.stringify([t, [JSON.parse(el.dataset.values || '[]')]]);
            continue;
        }
        const t = ((el.layout && el.layout.title && el.layout.title.text) || '').replace(/<[^>]+>/g, '');
        if (t.startsWith(prefix)) return JSON.stringify([t, (el.data || []).map(d => Array.from(d.y || []))]);
    }
    return null;
}"""
CHANGED_JS = "([prefix, prev]) => { const s = (" + SIGNATURE_JS + ")(prefix); return s !== null && s !== prev; }"
ERRORS_JS = """() => document.querySelectorAll(
    '[data-testid="stException"], [data-testid="stAlertContentError"], [data-testid="stConnectionStatus"]').length"""
# the first α slider: the in-browser preview component's, else Streamlit's
SLIDER = '.talos-live input[type="range"], [data-testid="stSlider"] input[type="range"]'


class TreeRSS:
    """Sum of the RSS of a process and all its descendants, sampled every ``interval`` s in a thread."""

    def __init__(self, pid: int, interval: float = 0.5):
        import psutil

        self._proc = psutil.Process(pid)
        self.interval = interval
        self.samples: list[tuple[float, float]] = []  # (t, MB)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def now_mb(self) -> float:
        return self._sum(lambda p: p.memory_info().rss) / 2**20

    def cpu_s(self) -> float:
        """User + system CPU seconds of the tree's live processes (a busy server vs a busy load generator)."""
        return self._sum(lambda p: sum(p.cpu_times()[:2]))  # user + system

    def _sum(self, value) -> float:
        """``value(process)`` summed over the tree's live processes (NaN when the root is gone)."""
        import psutil

        try:
            procs = [self._proc, *self._proc.children(recursive=True)]
        except psutil.Error:
            return float("nan")
        total = 0.0
        for p in procs:
            try:
                total += value(p)
            except psutil.Error:
                pass
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), self.now_mb()))
            self._stop.wait(self.interval)

    def start(self) -> TreeRSS:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def peak_mb(self) -> float:
        return max((mb for _, mb in self.samples), default=float("nan"))


async def _session(i: int, browser, url: str, seconds: float, move_timeout: float, load_timeout: float,
                   stats: dict) -> None:
    ctx = await browser.new_context(viewport={"width": 1400, "height": 1600})
    page = await ctx.new_page()
    page.on("pageerror", lambda exc: stats["page_exceptions"].append(f"session {i}: {exc}"))
    try:
        t0 = time.monotonic()
        try:
            await page.goto(url, timeout=load_timeout * 1000)
            await page.wait_for_function(f"() => ({SIGNATURE_JS})({json.dumps(PREVIEW)}) !== null",
                                         timeout=load_timeout * 1000, polling=250)
        except Exception as exc:  # Playwright's TimeoutError and navigation errors alike
            stats["load_failures"].append(f"session {i}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
            return
        stats["load_ms"].append((time.monotonic() - t0) * 1000)
        slider = page.locator(SLIDER).first
        await slider.focus()
        key = "ArrowRight"
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            value, lo, hi = await slider.evaluate("el => [Number(el.value), Number(el.min), Number(el.max)]")
            if value >= hi - 1e-9:
                key = "ArrowLeft"
            elif value <= lo + 1e-9:
                key = "ArrowRight"
            prev = await page.evaluate(SIGNATURE_JS, PREVIEW)
            t = time.monotonic()
            await page.keyboard.press(key)
            try:
                await page.wait_for_function(CHANGED_JS, arg=[PREVIEW, prev], timeout=move_timeout * 1000,
                                             polling=50)
                stats["move_ms"].append((time.monotonic() - t) * 1000)
            except Exception as exc:
                stats["timeouts"].append(f"session {i}: {type(exc).__name__}")
                await slider.focus()  # a rerun may have re-created the input
        n_err = await page.evaluate(ERRORS_JS)
        if n_err:
            stats["streamlit_errors"].append(f"session {i}: {n_err} error element(s)")
    except Exception as exc:  # a session that broke mid-way is an error, the others go on
        stats["session_errors"].append(f"session {i}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
    finally:
        await ctx.close()


async def _after(delay: float, coro) -> None:
    """``coro`` started ``delay`` s from now (the ramp-up: one session every ``--ramp`` s)."""
    await asyncio.sleep(delay)
    await coro


async def _ws_session(i: int, base: str, page: str, seconds: float, move_timeout: float, load_timeout: float,
                      stats: dict) -> None:
    """One protocol-level session (:mod:`bench.st_client`): open the page, then move the α slider for ``seconds``."""
    from bench.st_client import ProtocolError, StreamlitSession, alpha_control

    def errors_of(result, what: str) -> None:
        for e in result.errors:
            stats["page_exceptions" if e.startswith("exception") else "streamlit_errors"].append(
                f"session {i} {what}: {e}")

    try:
        async with StreamlitSession(base, page, timeout=load_timeout) as s:
            t0 = time.monotonic()
            try:
                first = await s.run_page()
            except ProtocolError as exc:
                stats["load_failures"].append(f"session {i}: {exc}")
                return
            errors_of(first, "load")
            control = alpha_control(first.elements)
            title, _ = first.chart(control.chart) if control is not None else (None, None)
            if control is None or title is None:
                stats["load_failures"].append(f"session {i}: no α control or no chart it redraws on {page}")
                return
            stats["load_ms"].append((time.monotonic() - t0) * 1000)
            stats["controls"].append(f"{control.kind} → {control.chart}…")
            s.timeout = move_timeout
            direction = 1
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                value, direction = control.next_value(direction)
                t = time.monotonic()
                try:
                    result = await s.move(control, value)
                except ProtocolError as exc:
                    stats["timeouts"].append(f"session {i}: {exc}")
                    s.timeout = load_timeout  # wait for the late run to finish before the next move (not timed)
                    await s.finish_run(control, value)
                    s.timeout = move_timeout
                    continue
                stats["move_ms"].append((time.monotonic() - t) * 1000)
                errors_of(result, f"move to {value:g}")
                new_title, at = result.chart(control.chart)
                # the move took effect: a st.slider's preview title carries α; the component's exact chart is on
                # the α grid (it changes every few steps), so the URL the server wrote must hold the new value
                stale = (new_title is None or not control.in_url(s.query_string)
                         or (control.kind == "slider" and new_title == title))
                if stale:
                    stats["stale_preview"].append(f"session {i}: α {value:g}: chart {new_title!r}, "
                                                  f"URL {s.query_string!r}")
                else:
                    stats["preview_ms"].append((at - t) * 1000)
                    title = new_title
    except Exception as exc:  # a closed connection, a protocol surprise: an error, the others go on
        first_line = (str(exc).splitlines() or [""])[0]
        stats["session_errors"].append(f"session {i}: {type(exc).__name__}: {first_line}")


async def _drive_ws(base: str, page: str, sessions: int, seconds: float, move_timeout: float, load_timeout: float,
                    ramp: float, stats: dict) -> None:
    await asyncio.gather(*(_after(i * ramp, _ws_session(i, base, page, seconds, move_timeout, load_timeout, stats))
                           for i in range(sessions)))


async def _drive(url: str, sessions: int, seconds: float, move_timeout: float, load_timeout: float,
                 stats: dict, ramp: float = 0.0) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM,
                                          args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                                "--disable-renderer-backgrounding",
                                                "--disable-background-timer-throttling"])
        try:
            await asyncio.gather(*(_after(i * ramp, _session(i, browser, url, seconds, move_timeout, load_timeout,
                                                            stats))
                                   for i in range(sessions)))
        finally:
            await browser.close()


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    if len(xs) == 1:
        return xs[0]
    return statistics.quantiles(xs, n=100, method="inclusive")[int(q) - 1]


def run(sessions: int, seconds: float, path: str = "/arithmetic", move_timeout: float = 10.0,
        load_timeout: float = 180.0, client: str = "browser", ramp: float | None = None) -> dict:
    """Start the server, drive ``sessions`` sessions (``client``: ``browser`` = headless Chromium pages, ``ws`` =
    Streamlit-protocol websocket clients) for ``seconds``, one started every ``ramp`` s, stop the server; the
    summary dict."""
    import psutil

    if ramp is None:
        ramp = 0.5 if client == "ws" else 0.0
    port = free_port()
    # the server writes to its log while it runs: no context manager
    log = tempfile.NamedTemporaryFile("w+", prefix="talos_load_", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "talos_core.cli", "dashboard", "--port", str(port),
                             "--read-only"], cwd=str(ROOT), stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True)
    stats: dict = {k: [] for k in ("move_ms", "load_ms", "preview_ms", "timeouts", "page_exceptions",
                                   "streamlit_errors", "load_failures", "session_errors", "stale_preview", "controls")}
    try:
        wait_healthy(port, proc, timeout=120.0)
        mem = TreeRSS(proc.pid).start()
        time.sleep(1.0)
        before = mem.now_mb()
        cpu0 = mem.cpu_s()
        me = psutil.Process()  # the load generator itself (the ws clients run here)
        own0 = sum(me.cpu_times()[:2])
        t0 = time.monotonic()
        if client == "ws":
            asyncio.run(_drive_ws(f"http://127.0.0.1:{port}", path, sessions, seconds, move_timeout, load_timeout,
                                  ramp, stats))
        else:
            asyncio.run(_drive(f"http://127.0.0.1:{port}{path}", sessions, seconds, move_timeout, load_timeout,
                               stats, ramp))
        wall = time.monotonic() - t0
        server_cpu = mem.cpu_s() - cpu0
        client_cpu = sum(me.cpu_times()[:2]) - own0
        time.sleep(3.0)  # sessions closed: what the server keeps
        after = mem.now_mb()
        mem.stop()
        server_alive = proc.poll() is None
    finally:
        stop_server(proc)
        log.close()
    moves = stats["move_ms"]
    errors = {k: len(stats[k]) for k in ("timeouts", "load_failures", "page_exceptions", "streamlit_errors",
                                         "session_errors", "stale_preview")}
    if not server_alive:
        errors["server_died"] = 1
    return {
        "client": client, "ramp_s": ramp,
        "sessions": sessions, "seconds": seconds, "path": path, "move_timeout_s": move_timeout,
        "sessions_loaded": len(stats["load_ms"]), "moves": len(moves),
        "moves_per_s": len(moves) / wall if wall else float("nan"),
        "p50_ms": _pct(moves, 50), "p95_ms": _pct(moves, 95), "max_ms": max(moves, default=float("nan")),
        "controls": sorted(set(stats["controls"])),  # ws: which α control moved, timed to which chart
        "preview_p50_ms": _pct(stats["preview_ms"], 50), "preview_p95_ms": _pct(stats["preview_ms"], 95),
        "preview_max_ms": max(stats["preview_ms"], default=float("nan")),
        "client_cpu_s": client_cpu,
        "load_p50_ms": _pct(stats["load_ms"], 50), "load_max_ms": max(stats["load_ms"], default=float("nan")),
        "errors": errors, "errors_total": sum(errors.values()),
        "rss_before_mb": before, "rss_peak_mb": mem.peak_mb(), "rss_after_mb": after,
        "wall_s": wall, "server_cpu_s": server_cpu, "server_cpu_share": server_cpu / wall if wall else None,
        "server_log": log.name, "server_cpu_s_per_move": server_cpu / len(moves) if moves else None,
        "error_samples": {k: stats[k][:5] for k in errors if stats.get(k)},
    }


def table(rows: list[dict]) -> str:
    head = ("| client | sessions | ramp s | s | sessions loaded | moves | p50 move ms | p95 ms | max ms "
            "| page load p50 / max s | errors (timeouts / load / exc / st.error / other / stale preview) "
            "| server CPU s (% of one core) | server RSS MB before / peak / after |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in rows:
        e = r["errors"]
        lines.append(
            f"| {r.get('client', 'browser')} | {r['sessions']} | {r.get('ramp_s', 0):g} | {r['seconds']:g} "
            f"| {r['sessions_loaded']} | {r['moves']} | {r['p50_ms']:.0f} "
            f"| {r['p95_ms']:.0f} | {r['max_ms']:.0f} | {r['load_p50_ms'] / 1000:.1f} / {r['load_max_ms'] / 1000:.1f} "
            f"| {r['errors_total']} ({e['timeouts']} / {e['load_failures']} / {e['page_exceptions']} / "
            f"{e['streamlit_errors']} / {e['session_errors'] + e.get('server_died', 0)} / {e.get('stale_preview', 0)}) "
            f"| {r['server_cpu_s']:.0f} ({100 * r['server_cpu_share']:.0f} %) "
            f"| {r['rss_before_mb']:.0f} / {r['rss_peak_mb']:.0f} / {r['rss_after_mb']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=30, help="concurrent browser sessions (default 30)")
    ap.add_argument("--seconds", type=float, default=60.0, help="how long each session moves the slider (default 60)")
    ap.add_argument("--path", default="/arithmetic", help="page to open (default /arithmetic)")
    ap.add_argument("--move-timeout", type=float, default=10.0,
                    help="a move whose chart did not change after this many s is an error (default 10)")
    ap.add_argument("--load-timeout", type=float, default=180.0,
                    help="a page whose chart is not drawn after this many s is an error (default 180)")
    ap.add_argument("--client", choices=("browser", "ws"), default="browser",
                    help="browser: headless Chromium pages; ws: Streamlit-protocol websocket clients (no rendering)")
    ap.add_argument("--ramp", type=float, default=None,
                    help="start one session every RAMP s (default 0.5 for ws, 0 for browser)")
    ap.add_argument("--json", type=Path, default=None, help="also write the summary here")
    args = ap.parse_args(argv)
    if args.sessions < 1 or args.seconds <= 0:
        ap.error(f"--sessions must be ≥ 1 and --seconds > 0 (got {args.sessions}, {args.seconds:g})")
    if args.ramp is not None and args.ramp < 0:
        ap.error(f"--ramp must be ≥ 0 (got {args.ramp:g})")
    if args.client == "browser" and not Path(CHROMIUM).exists():
        ap.error(f"no Chromium at {CHROMIUM} (apt-get install -y chromium, or set TALOS_CHROMIUM)")
    from bench.common import machine_line, write_json  # run as ``python -m bench.bench_load`` from the repo root

    machine = machine_line("cpu")
    r = run(args.sessions, args.seconds, args.path, args.move_timeout, args.load_timeout, args.client, args.ramp)
    print(machine)
    print()
    print(table([r]))
    print(f"\nwall {r['wall_s']:.0f} s; server CPU {r['server_cpu_s']:.0f} s "
          f"({100 * r['server_cpu_share']:.0f} % of one core); load generator (this Python process) CPU "
          f"{r['client_cpu_s']:.0f} s"
          + ("; the browsers run on the same machine" if args.client == "browser" else "")
          + (f"; α control {', '.join(r['controls']) or '?'}: move → that chart's delta p50 "
             f"{r['preview_p50_ms']:.0f} ms, p95 {r['preview_p95_ms']:.0f} ms, max {r['preview_max_ms']:.0f} ms"
             if args.client == "ws" else ""))
    if r["errors_total"]:
        print("\nerrors:", json.dumps(r["error_samples"], indent=1))
    write_json(args.json, {"machine": machine, **r})
    return 0


if __name__ == "__main__":
    sys.exit(main())
