"""Store-supplied strings reach Plotly figures as plain text: Plotly.js renders an HTML subset (links,
``<span style>``, ``<b>``, ...) in titles, tick labels, legends, hover labels and annotations, so every figure function
escapes the strings among its arguments (``dashboard.plain.plain_figure``)."""

from __future__ import annotations

import html
import importlib
import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dashboard_fixtures import REPO
from streamlit.testing.v1 import AppTest

from bench.page_state import CEILING_S, wait_drawn
from bench.server import free_port, wait_healthy
from dashboard import figures as F
from dashboard import figures_examples as FX
from dashboard.plain import figure_data, figure_text, figure_text_back

APP = str(REPO / "dashboard" / "app.py")
PAGES = ["learn", "arithmetic", "disentanglement", "localization", "masks", "efficiency"]
LINK_TASK = '<a href="http://127.0.0.1:9/x">t</a>'
BOLD_TASK = "<b>x</b> & $y$ %{x}"
HTML_METHOD = '<span style="font-size:90px">nl</span>'
#: any "<" that is not the figure functions' own markup (<br>, <extra>, </extra>)
LIVE_TAG = re.compile(r"<(?!br>|/?extra>)")


def test_figure_text_escapes_what_plotly_interprets_and_round_trips():
    for s in (LINK_TASK, BOLD_TASK, "<span style='fill:red'>r</span>", "&lt;b&gt;", "a$b$", "%{y:.2f}",
              "tiny-clip", "fashion-mnist", "α 0.3", ""):
        out = figure_text(s)
        assert "<" not in out and ">" not in out and "$" not in out and "%{" not in out
        assert re.sub(r"&(?!amp;|lt;|gt;|#36;|#37;)", "", out) == out, "every & starts one of our entities"
        assert figure_text_back(out) == s
    assert figure_text("tiny-clip") == "tiny-clip"


def test_figure_data_escapes_strings_inside_containers_and_frames():
    df = pd.DataFrame({"task": [LINK_TASK, "digits"], "acc": [0.5, 0.7],
                       "kind": pd.Categorical(["<i>k</i>", "plain"])}, index=["<u>r</u>", "b"])
    out = figure_data(df)
    assert out["task"].tolist() == [figure_text(LINK_TASK), "digits"] and out["acc"].tolist() == [0.5, 0.7]
    assert list(out["kind"].cat.categories) == sorted([figure_text("<i>k</i>"), "plain"])
    assert list(out.index) == [figure_text("<u>r</u>"), "b"]
    assert df["task"].iloc[0] == LINK_TASK, "the caller's frame is not modified"
    plain = pd.DataFrame({"task": ["digits"], "acc": [1.0]})
    assert figure_data(plain) is plain, "nothing to escape: no copy"
    nested = figure_data({"<b>k</b>": [("<i>", 1), np.array(["<s>"])], "n": 3})
    assert nested["&lt;b&gt;k&lt;/b&gt;"][0] == ("&lt;i&gt;", 1) and nested["n"] == 3
    assert nested["&lt;b&gt;k&lt;/b&gt;"][1].tolist() == ["&lt;s&gt;"]


def _returns_figure(fn) -> bool:
    ann = inspect.signature(fn).return_annotation
    return "Figure" in (ann if isinstance(ann, str) else getattr(ann, "__name__", ""))


#: every module that defines figure functions (dashboard/figures.py re-exports the families it is split into;
#: figures_core holds only what they share)
FIGURE_MODULES = sorted(p.stem for p in (REPO / "dashboard").glob("figures_*.py") if p.stem != "figures_core")


@pytest.mark.parametrize("module_name", FIGURE_MODULES)
def test_every_figure_function_escapes_its_arguments(module_name):
    module = importlib.import_module(f"dashboard.{module_name}")
    funcs = [fn for name, fn in vars(module).items() if inspect.isfunction(fn) and not name.startswith("_")
             and fn.__module__ == module.__name__ and _returns_figure(fn) and name not in ("make_figure",
                                                                                         "export_ready")]
    assert funcs
    missing = [fn.__name__ for fn in funcs if not getattr(fn, "plain_figure", False)]
    assert not missing, f"figure functions without @plain_figure: {missing}"


def _strings(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)
    elif isinstance(obj, str):
        yield obj


def test_figure_functions_on_hostile_names():
    tasks = [LINK_TASK, BOLD_TASK]
    figs = [F.arithmetic_bars(tasks, [0.5, 0.6], name=HTML_METHOD, method=HTML_METHOD, zero_shot=[0.2, 0.3],
                              title=f"{HTML_METHOD} on {LINK_TASK}"),
            F.localization_heatmap(tasks, [[1.0, 0.9], [0.8, 1.0]]),
            FX.clickable_cells(F.localization_heatmap(tasks, [[1.0, 0.9], [0.8, 1.0]]), tasks, [[1, 0.9], [0.8, 1]]),
            F.xi_heatmap([0, 1], [0, 1], [[0, 0.1], [0.2, 0.3]], task1=LINK_TASK, task2=BOLD_TASK),
            F.mask_iou_heatmap(tasks, [[1, 0.2], [0.2, 1]])]
    for fig in figs:
        texts = list(_strings(json.loads(fig.to_json())))
        assert not [t for t in texts if LIVE_TAG.search(t)], [t for t in texts if LIVE_TAG.search(t)]
        joined = html.unescape(" ".join(texts))
        assert LINK_TASK in joined or BOLD_TASK in joined, "the names still read the same"


# --------------------------------------------------------------------------------------------
# a crafted store with HTML in task and method names, on every page
# --------------------------------------------------------------------------------------------
def html_store(fixture_store: Path, dest: Path) -> Path:
    """The synthetic store with two tasks and a method renamed to Plotly markup inside every result (a link, bold
    text, LaTeX, a hover placeholder, a styled span), and in the names of the result files, sanitized as the engine
    writes them (a file whose fields contradict its name is refused as damaged)."""
    from talos_core.schema import slug

    store = shutil.copytree(fixture_store, dest)
    renamed = {"mnist": LINK_TASK, "digits": BOLD_TASK, "nonlinear": HTML_METHOD}

    def new_name(path: Path) -> str:
        return "__".join(slug(renamed.get(p, p)) if p in renamed else p for p in path.stem.split("__")) + path.suffix

    for path in sorted((store / "results").rglob("*.json")):
        text = path.read_text()
        for old, new in renamed.items():
            text = text.replace(json.dumps(old), json.dumps(new))
        arrays = path.with_suffix(".safetensors")
        if arrays.exists():
            text = text.replace(json.dumps(arrays.name), json.dumps(new_name(arrays)))
            arrays.rename(arrays.with_name(new_name(arrays)))
        path.unlink()
        path.with_name(new_name(path)).write_text(text)
    return store


def _open(monkeypatch, store, page, query):
    monkeypatch.setenv("TALOS_STORE", str(store))
    for var in ("TALOS_DASHBOARD_ROOTS", "TALOS_DASHBOARD_READ_ONLY"):
        monkeypatch.delenv(var, raising=False)
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    if page != "learn":
        at.switch_page(f"app_pages/{page}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("page,query", [(p, {"same": "false"}) for p in PAGES])
def test_html_store_names_reach_figures_as_plain_text(monkeypatch, fixture_store, tmp_path, page, query):
    store = html_store(fixture_store, tmp_path / "html")
    at = _open(monkeypatch, store, page, query)
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    if page == "arithmetic":  # and the negation tab's figures (the tab is built once opened)
        from test_dashboard import open_negation_tab

        specs += [json.loads(c.proto.spec) for c in open_negation_tab(at).get("plotly_chart")]
    assert specs, "the page still draws its figures"
    texts = [t for spec in specs for t in _strings(spec)]
    live = sorted({t for t in texts if LIVE_TAG.search(t)})
    assert not live, live
    shown = html.unescape(" ".join(texts))
    assert LINK_TASK in shown or BOLD_TASK in shown, "the crafted names reached the figures, reading the same"


@pytest.mark.browser
@pytest.mark.slow
def test_html_store_in_a_real_browser_makes_no_link(fixture_store, tmp_path):
    """Chromium on every page of the HTML store: no SVG/HTML <a> pointing at the crafted URL, no bold tspan made from
    a name, and the names are shown as the literal text."""
    chromium = os.environ.get("TALOS_CHROMIUM", "/usr/bin/chromium")
    playwright = pytest.importorskip("playwright.sync_api")
    if not Path(chromium).exists():
        pytest.skip(f"no Chromium at {chromium}")
    store = html_store(fixture_store, tmp_path / "html")
    port = free_port()
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - the server writes to it while it runs
    proc = subprocess.Popen([sys.executable, "-m", "talos_core.cli", "dashboard", "--port", str(port),
                             "--store", str(store)], cwd=str(tmp_path), stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, PYTHONPATH=str(REPO)), start_new_session=True)
    links_js = ("() => [...document.querySelectorAll('a')].map(e => e.getAttribute('href') || "
                "e.getAttributeNS('http://www.w3.org/1999/xlink', 'href') || '')"
                ".filter(u => u.includes('127.0.0.1:9'))")
    svg_text_js = "() => [...document.querySelectorAll('svg text')].map(e => e.textContent).join('\\n')"
    try:
        wait_healthy(port, proc)
        seen = ""
        with playwright.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 2400})
            page.set_default_timeout(CEILING_S * 1000)
            page.set_default_navigation_timeout(CEILING_S * 1000)
            for path in ["?same=false", "arithmetic?same=false", "localization", "masks", "disentanglement"]:
                page.goto(f"http://127.0.0.1:{port}/{path}")
                wait_drawn(page)  # the run is over and every chart it sent is drawn
                assert page.locator(".js-plotly-plot").count(), path  # the page draws its figures
                assert page.evaluate(links_js) == [], path
                seen += page.evaluate(svg_text_js)
            browser.close()
        assert "t</a>" in seen or "<b>x</b>" in seen, "the names are drawn as their literal text"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
        log.close()
