"""Slider move → figures ready, server side (the Arithmetic page's data + figure path).

For ~50 slider moves over the α grid this times exactly what the page runs on a rerun:

1. the cached loads (``dashboard.data.get`` / ``get_preview``: a cache hit keyed on file mtime),
2. ``views.addition_view`` + ``views.negation_view`` (snap to the grid, the linearized preview
   ``base + Σ α_t jvp_t`` on every cached example, all figures),
3. the JSON serialization Streamlit does for ``st.plotly_chart`` (``fig.to_json()``).

It prints median / p90 in ms against the 100 ms goal. Browser rendering and websocket transfer are
not included (see tests/test_browser.py for the end-to-end check).

    python -m bench.bench_dashboard                  # the shipped cached_results/, else a synthetic store
    python -m bench.bench_dashboard --store /path/to/store --moves 50
"""

from __future__ import annotations

import argparse
import atexit
import logging
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from talos_core import schema

logging.getLogger("streamlit").setLevel(logging.ERROR)

GOAL_MS = 100.0


def _pick_store(arg: str | None) -> tuple[Path, str]:
    from dashboard import data as D

    if arg:
        return Path(arg), "given"
    shipped = schema.shipped_store()
    try:
        if shipped is None:
            raise schema.StoreNotFound("no shipped cached_results/ (not a source checkout)")
        D.store_index(shipped)
        return shipped, "cached_results"
    except schema.StoreProblem:
        from tests.dashboard_fixtures import write_fixture_store  # run from the repository root (python -m)

        tmp = Path(tempfile.mkdtemp(prefix="talos-bench-"))
        atexit.register(shutil.rmtree, tmp, True)
        return write_fixture_store(tmp / "store"), "synthetic fixture (cached_results has no results yet)"


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", help="results store (default: cached_results, else a synthetic store)")
    ap.add_argument("--moves", type=int, default=50, help="slider moves to time (default 50)")
    ap.add_argument("--method", help="method (default: talos if present)")
    args = ap.parse_args(argv)

    from dashboard import data as D
    from dashboard.views import addition_view, negation_view

    root, origin = _pick_store(args.store)
    idx = D.index(root)
    adds = idx[idx["kind"] == "addition"]
    if adds.empty:
        print(f"store {root} has no addition results; nothing to benchmark")
        return 1
    methods = D.order_methods(adds["method"].dropna())
    method = args.method or methods[0]
    row = adds[adds["method"] == method].iloc[0]
    suite, model = row["suite"], row["model"]
    name = schema.result_name(suite, model, method)
    has = lambda kind, n: bool(((idx["kind"] == kind) & (idx["name"] == n)).any())  # noqa: E731

    def once(alpha: float) -> tuple[float, float]:
        t0 = time.perf_counter()
        add = D.get("addition", root, name)
        sname = schema.result_name(suite, model)
        single = D.get("single", root, sname) if has("single", sname) else None
        preview = D.get_preview(root, name) if has("preview", name) else None
        neg = D.get("negation", root, name) if has("negation", name) else None
        view = addition_view(add, {t: alpha for t in add.tasks}, single=single, preview=preview, method=method)
        figs = [view.exact_fig, view.curve_fig] + ([view.preview_fig] if view.preview_fig is not None else [])
        if neg is not None:
            nview = negation_view(neg, {t: alpha for t in neg.targets}, single=single, preview=preview, method=method)
            figs += [nview.exact_fig] + ([nview.preview_fig] if nview.preview_fig is not None else [])
        t1 = time.perf_counter()
        for f in figs:
            f.to_json()
        t2 = time.perf_counter()
        return (t1 - t0) * 1e3, (t2 - t0) * 1e3

    add = D.get("addition", root, name)
    lo, hi = float(add.alphas.min()), float(add.alphas.max())
    step = add.grid_step / 5
    once(add.selected_alpha)  # warm the caches (first load from disk)
    alphas = [lo + ((i * 7) % (int(round((hi - lo) / step)) + 1)) * step for i in range(args.moves)]
    compute, total = zip(*(once(a) for a in alphas))
    print(f"store: {root} ({origin})")
    print(f"view: suite={suite} model={model} method={method} tasks={len(add.tasks)} "
          f"preview={'yes' if has('preview', name) else 'no'} negation={'yes' if has('negation', name) else 'no'}")
    print(f"slider moves: {len(alphas)}")
    for label, vals in (("data + figures", compute), ("data + figures + JSON (what st.plotly_chart sends)", total)):
        med = statistics.median(vals)
        print(f"{label:55s} median {med:7.1f} ms   p90 {_pct(list(vals), 0.9):7.1f} ms   "
              f"{'OK' if med <= GOAL_MS else 'ABOVE'} vs {GOAL_MS:.0f} ms goal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
