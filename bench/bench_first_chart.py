"""First chart of a new browser session: before and after, side by side in one run (the first chart
is what a new visitor waits for).

A measurement script, not a timed test. It serves the shipped ``cached_results/`` (or ``--store``) twice, with the
same ``talos dashboard`` command line: **after** = this checkout, **before** = the ``dashboard/`` and
``talos_core/`` of ``--baseline`` (a git revision, extracted with ``git archive`` into a temporary folder and served
from there). Both servers are warmed (each page opened once: its result caches are filled, as on a server that has
served before). Then, ``--reps`` times, every page is opened in a **new browser context** (headless Chromium via
Playwright: empty HTTP cache, new Streamlit session, as a first-time visitor) of each server, the two in alternating
order, so both see the same machine load.

The number is taken in the page: ``performance.now()`` (milliseconds since navigation start) of the first animation
frame showing a chart with a size (a Plotly chart's SVG, or the in-browser preview component's drawn chart), from a
``requestAnimationFrame`` loop installed before the page's own scripts; no Playwright round trip is in it. Also
reported: the first frame showing the page title (Streamlit's own start-up, which this work does not touch), and the
**CPU time** the visit cost up to its first chart: the page's renderer process (Chrome's ``ProcessTime``, read through
the DevTools protocol right after the first chart) and the dashboard server's process group (``/proc``: its script
run, and serving the page's files). On a machine other jobs load, wall times mostly measure the wait for a core; the
CPU times measure the work, which is what a visit costs on an idle machine.

Reported per page: median and range of each, and the ratio after / before of the medians (the machine-independent
number: absolute times depend on the machine's load, the ratio much less).

    python -m bench.bench_first_chart                                  # before = c07adf0, 5 reps
    python -m bench.bench_first_chart --baseline main --reps 7 --pages learn "arithmetic?suite=vision"
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from bench.server import ROOT, dashboard

CHROMIUM = os.environ.get("TALOS_CHROMIUM", "/usr/bin/chromium")
#: the commit before the dashboard's first-chart work: the 'before' of the comparison
DEFAULT_BASELINE = "c07adf0"
DEFAULT_PAGES = ("learn", "arithmetic", "arithmetic?suite=vision")

# installed before the page's scripts: the first animation frame with a title, and with a chart that has a size
PROBE_INIT = """(() => {
    const P = window.__talosFirst = {title: null, chart: null};
    const sized = (el) => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
    const tick = () => {
        if (P.title === null && document.querySelector('h1')) P.title = performance.now();
        if (P.chart === null) {
            for (const el of document.querySelectorAll(
                    '.js-plotly-plot .main-svg, [data-talos-chart][data-state="drawn"]'))
                if (sized(el)) { P.chart = performance.now(); break; }
        }
        if (P.chart === null || P.title === null) requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
})();"""


def extract(rev: str, dest: Path) -> Path:
    """The ``dashboard/`` and ``talos_core/`` of git revision ``rev`` of this checkout, written under ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "dashboard", "talos_core"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def group_cpu_s(pgid: int) -> float:
    """CPU seconds (user + system) used so far by the live processes of process group ``pgid`` (Linux ``/proc``)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # fields after the command: state, ppid, pgrp, ..., utime (12), stime (13)
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _open(browser, url: str, server_pgid: int, timeout_s: float) -> dict[str, float]:
    """One first-time visit: title and first chart (ms since navigation start), and the CPU ms the renderer and the
    server had used by then."""
    ctx = browser.new_context(viewport={"width": 1500, "height": 1100})
    try:
        page = ctx.new_page()
        page.add_init_script(PROBE_INIT)
        cdp = ctx.new_cdp_session(page)
        cdp.send("Performance.enable")
        server0 = group_cpu_s(server_pgid)
        page.goto(url, timeout=timeout_s * 1000)
        page.wait_for_function("() => window.__talosFirst && window.__talosFirst.chart !== null",
                               timeout=timeout_s * 1000, polling="raf")
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        server1 = group_cpu_s(server_pgid)
        got = page.evaluate("() => window.__talosFirst")
        return {"title": float(got["title"]), "chart": float(got["chart"]),
                "renderer_cpu": 1000 * float(metrics.get("ProcessTime", float("nan"))),
                "server_cpu": 1000 * (server1 - server0)}
    finally:
        ctx.close()


def _summary(xs: list[float]) -> dict:
    return {"median_ms": statistics.median(xs), "min_ms": min(xs), "max_ms": max(xs), "samples_ms": xs}


def run(pages: list[str], reps: int, baseline: str, store: Path, timeout_s: float = 120.0) -> dict:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise SystemExit(f"no Chromium at {CHROMIUM} (apt-get install -y chromium, or set TALOS_CHROMIUM)")
    tmp = Path(tempfile.mkdtemp(prefix="talos-first-chart-"))
    samples: dict[tuple[str, str], dict[str, list[float]]] = {}
    measures = ("chart", "title", "renderer_cpu", "server_cpu")
    load = [os.getloadavg()[0]]
    try:
        before_root = extract(baseline, tmp / "before")
        with sync_playwright() as p, ExitStack() as stack:
            urls = {"before": stack.enter_context(dashboard(store, tmp / "before.log", checkout=before_root)),
                    "after": stack.enter_context(dashboard(store, tmp / "after.log"))}
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            stack.callback(browser.close)
            for url, pgid in urls.values():  # warm each server's result caches
                for page in pages:
                    _open(browser, f"{url}/{page}", pgid, timeout_s)
            for rep in range(reps):
                order = ("before", "after") if rep % 2 == 0 else ("after", "before")
                for page in pages:
                    for variant in order:
                        url, pgid = urls[variant]
                        got = _open(browser, f"{url}/{page}", pgid, timeout_s)
                        s = samples.setdefault((page, variant), {m: [] for m in measures})
                        for m in measures:
                            s[m].append(round(got[m]))
                        load.append(os.getloadavg()[0])
                print(f"rep {rep + 1}/{reps} done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = {"baseline": baseline, "store": str(store), "reps": reps, "loadavg_1min": [min(load), max(load)],
           "pages": {}}
    for page in pages:
        b, a = samples[(page, "before")], samples[(page, "after")]
        out["pages"][page] = {
            variant: {"first_chart": _summary(v["chart"]), "title": _summary(v["title"]),
                      "renderer_cpu": _summary(v["renderer_cpu"]), "server_cpu": _summary(v["server_cpu"])}
            for variant, v in (("before", b), ("after", a))}
        for m, name in (("chart", "first_chart"), ("renderer_cpu", "renderer_cpu"), ("server_cpu", "server_cpu")):
            out["pages"][page][f"ratio_{name}"] = statistics.median(a[m]) / statistics.median(b[m])
    return out


def table(res: dict) -> str:
    """Medians (range) before → after and the ratio after / before, per page."""
    def cell(r: dict, key: str) -> str:
        b, a = r["before"][key], r["after"][key]
        return (f"{b['median_ms']:.0f} ({b['min_ms']:.0f}–{b['max_ms']:.0f}) → {a['median_ms']:.0f} "
                f"({a['min_ms']:.0f}–{a['max_ms']:.0f}) | {r[f'ratio_{key}']:.2f}")

    rows = ["| page | first chart, wall ms | ratio | renderer CPU ms | ratio | server CPU ms | ratio | title ms |",
            "|---|---|---|---|---|---|---|---|"]
    for page, r in res["pages"].items():
        rows.append(f"| {page} | {cell(r, 'first_chart')} | {cell(r, 'renderer_cpu')} | {cell(r, 'server_cpu')} | "
                    f"{r['before']['title']['median_ms']:.0f} → {r['after']['title']['median_ms']:.0f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default=DEFAULT_BASELINE,
                    help=f"git revision served as 'before' (default {DEFAULT_BASELINE}, before the first-chart work)")
    ap.add_argument("--reps", type=int, default=5, help="first-time visits per page and variant (default 5)")
    ap.add_argument("--pages", nargs="+", default=list(DEFAULT_PAGES),
                    help="page paths with their query (default: learn, arithmetic, arithmetic?suite=vision)")
    ap.add_argument("--store", default=str(ROOT / "cached_results"), help="store served (default: cached_results)")
    ap.add_argument("--json", default=None, help="also write the result here")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    res = run(args.pages, args.reps, args.baseline, Path(args.store).resolve())
    res["wall_s"] = round(time.monotonic() - t0, 1)
    print(table(res))
    print(f"baseline {res['baseline']}, {res['reps']} visits per page and variant, load average (1 min) "
          f"{res['loadavg_1min'][0]:.1f}–{res['loadavg_1min'][1]:.1f}, {res['wall_s']:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
