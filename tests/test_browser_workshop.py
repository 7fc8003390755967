"""Real browser: the defects a first workshop hit (an instructor at a 1280×720 projector, students on laptops, often
offline, one read-only server for the room), each checked on the running app the way a person meets it, plus the
views that make the dashboard teachable: one labelled model at every α, α sliders on a scale people can drag, and
linked ξ / Arithmetic views.

Two servers per module (``streamlit run dashboard/app.py``): one whose own store is a copy of the synthetic store
(with a finished job in it) beside the shipped ``cached_results/``, and the same in read-only mode. Every wait is on
the page's own state (:mod:`bench.page_state`). Screenshots go to /tmp/talos_workshop_*.png.

    python -m pytest tests/test_browser_workshop.py -m browser
"""

from __future__ import annotations

import itertools
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from dashboard_fixtures import MODEL, REPO, SUITE, TASKS, app_server
from test_browser import CHROMIUM
from test_browser_teaching import CELL_JS

from bench.page_state import CEILING_S, wait_drawn, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHIPPED = REPO / "cached_results"
VIEW = {"width": 1280, "height": 720}  # the projector
TALL = {"width": 1280, "height": 2400}  # the same width, the whole page in view
LIVE = '[data-talos-chart="addition_preview"]'
LIVE_SLIDERS = f".talos-live:has({LIVE}) input[type=range]"
NEG_LIVE = '[data-talos-chart="negation_preview"]'
NEG_SLIDERS = f".talos-live:has({NEG_LIVE}) input[type=range]"

# every Plotly chart on the page: its title, traces and the layout parts the tests read
PLOTS_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(el => {
    const fl = el._fullLayout || {};
    const ax = (a) => a ? {range: a.range, tickangle: a.tickangle, length: a._length, title: (a.title || {}).text || '',
                           ticktext: a._vals ? a._vals.map(v => v.text) : []} : null;
    return {title: ((el.layout && el.layout.title && el.layout.title.text) || '').replace(/<[^>]+>/g, ''),
            data: (el.data || []).map(t => ({name: t.name || '', type: t.type || '', mode: t.mode || '',
                                              x: t.x ? Array.from(t.x) : [], y: t.y ? Array.from(t.y) : [],
                                              text: t.text ? Array.from(t.text) : [], zmin: t.zmin, zmax: t.zmax,
                                              error_y: t.error_y || null})),
            annotations: (el.layout && el.layout.annotations || []).map(a => a.text || ''),
            xaxis: ax(fl.xaxis), yaxis: ax(fl.yaxis), width: el.getBoundingClientRect().width,
            top: el.getBoundingClientRect().top};
})"""


def texts(page) -> list[str]:
    """Every text block a person reads: markdown, captions (their own container), alerts; in page order."""
    return page.evaluate("""() => Array.from(document.querySelectorAll(
        '[data-testid="stMarkdownContainer"], [data-testid="stCaptionContainer"]')).map(e => e.innerText)""")


def plots(page, prefix: str = "") -> list[dict]:
    return [p for p in page.evaluate(PLOTS_JS) if p["title"].startswith(prefix)]


def plot(page, prefix: str) -> dict:
    return wait_until(page, lambda: (plots(page, prefix) or [None])[0], f"a chart titled {prefix!r}")


def choose(page, label: str, option: str | re.Pattern, *, within=None) -> None:
    """Pick ``option`` in the selectbox labelled ``label`` (Streamlit's combobox: open it, click the option)."""
    where = within or page
    where.get_by_role("combobox", name=label).click()
    page.get_by_role("option", name=option).first.click()


def combobox_value(page, label: str, *, within=None) -> str:
    return (within or page).get_by_role("combobox", name=label).input_value()


def body(page) -> str:
    return page.inner_text("body")


def live_state(page, chart: str = LIVE) -> dict | None:
    return page.evaluate(f"() => {{ const el = document.querySelector('{chart}'); "
                         "return el && el.dataset.state === 'drawn' ? {...el.dataset} : null; }")


def drag(page, slider, fraction: float, *, dy: float = 0.0) -> None:
    """Press the mouse on ``slider``'s thumb (``dy`` px below the track's middle: an imprecise grab) and drag it to
    ``fraction`` of the track."""
    box = slider.bounding_box()
    lo, hi, v = float(slider.get_attribute("min")), float(slider.get_attribute("max")), float(slider.input_value())
    x = box["x"] + (v - lo) / (hi - lo) * box["width"] if hi > lo else box["x"]
    y = box["y"] + box["height"] / 2 + dy
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(box["x"] + fraction * box["width"], y, steps=8)
    page.mouse.up()


# --------------------------------------------------------------------------------------------
# servers and pages
# --------------------------------------------------------------------------------------------
def _with_a_finished_job(store: Path) -> Path:
    """A finished Run-page job in ``store`` (its folder as ``dashboard.jobs`` writes it)."""
    from dashboard import jobs

    job = jobs.create_job(store, [["talos", "runs"]], {"model": MODEL, "method": "talos", "tasks": list(TASKS),
                                                      "suite": SUITE})
    (job.path / "status.json").write_text(json.dumps({"state": "done", "step": 1, "n_steps": 1,
                                                      "returncodes": [0], "offsets": []}))
    return store


@pytest.fixture(scope="module")
def own_store(fixture_store, tmp_path_factory) -> Path:
    return _with_a_finished_job(Path(shutil.copytree(fixture_store, tmp_path_factory.mktemp("own") / "store")))


@pytest.fixture(scope="module")
def url(own_store, tmp_path_factory):
    """The app with the synthetic store as the user's own store; the shipped results are listed beside it."""
    with app_server(own_store, tmp_path_factory.mktemp("log") / "streamlit.log") as u:
        yield u


@pytest.fixture(scope="module")
def ro_url(own_store, tmp_path_factory):
    """The same in read-only (classroom) mode."""
    with app_server(own_store, tmp_path_factory.mktemp("log") / "streamlit.log",
                    env={"TALOS_DASHBOARD_READ_ONLY": "1"}) as u:
        yield u


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture()
def page_at(browser):
    """``page_at(url, viewport=TALL)``: a fresh browser session (a Streamlit session of its own) at ``url``, drawn;
    uncaught page errors fail the test."""
    opened, errors = [], []

    def open_(address: str, viewport: dict = TALL):
        ctx = browser.new_context(viewport=viewport)
        page = ctx.new_page()
        page.set_default_timeout(CEILING_S * 1000)
        page.set_default_navigation_timeout(CEILING_S * 1000)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        opened.append(ctx)
        page.goto(address)
        wait_drawn(page)
        return page

    yield open_
    for ctx in opened:
        ctx.close()
    assert not errors, errors


def shipped(suite: str) -> str:
    return f"store={SHIPPED}&suite={suite}"


# --------------------------------------------------------------------------------------------
# 1 · the sidebar follows a store switch
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("suite", ["vision", "text"])
def test_sidebar_and_sliders_follow_a_store_switch(url, page_at, suite):
    page = page_at(f"{url}/arithmetic?{shipped(suite)}")
    side = page.locator('[data-testid="stSidebar"]')
    choose(page, "Store", re.compile("^Your store"), within=side)
    wait_until(page, lambda: "digits" in (live_state(page) or {}).get("alphas", ""), "the own store's preview")
    wait_drawn(page)
    assert combobox_value(page, "Suite (task set)", within=side).startswith(SUITE)
    assert combobox_value(page, "Model", within=side) == MODEL
    state = live_state(page)
    alphas = json.loads(state["alphas"])
    slider = page.locator(LIVE_SLIDERS).first
    assert set(alphas) == set(TASKS), alphas  # the preview reads this store's tasks, every one of them
    assert all(a == float(slider.input_value()) for a in alphas.values()), (alphas, slider.input_value())
    assert float(slider.get_attribute("max")) <= 10, "the slider keeps the previous store's range"
    page.screenshot(path=f"/tmp/talos_workshop_store_switch_{suite}.png")


# --------------------------------------------------------------------------------------------
# 2 · one trustworthy model at every α: every view says which model it shows
# --------------------------------------------------------------------------------------------
def _gallery_heads(page) -> list[str]:
    return [t for t in texts(page) if re.search(r"(under addition|θ0 − α τ_|^control )", t)]


def _mnist_negated(page_at, url: str, alpha: float):
    """The Negation tab of TaLoS on the shipped ``vision`` at MNIST's α = ``alpha``: the page and the target
    gallery's heading."""
    page = page_at(f"{url}/arithmetic?{shipped('vision')}&n.talos.mnist={alpha:g}")
    page.get_by_role("tab", name=re.compile("^Negation")).click()
    wait_until(page, lambda: any("target mnist" in t for t in _gallery_heads(page)), "the target gallery")
    wait_drawn(page)
    return page, next(t for t in _gallery_heads(page) if "target mnist" in t)


def _stored_and_between() -> tuple[float, float]:
    """A stored exact negation point of TaLoS on MNIST in the shipped ``vision`` examples, inside the sliders'
    teaching range (up to 1), and an α 0.02 past it, before the next stored point: read from the store, not assumed."""
    alphas = json.loads((SHIPPED / "results/examples/vision__efficientnet-lite0__talos.json").read_text())
    grid = sorted(alphas["negation_alphas"]["mnist"])
    lo = max(a for a, b in itertools.pairwise(grid) if a <= 1.0 and b - a >= 0.04)
    return lo, round(lo + 0.02, 2)


def test_negation_gallery_names_its_model_and_its_distance_to_exact(url, page_at):
    stored, between = _stored_and_between()
    page, head = _mnist_negated(page_at, url, between)
    assert "first-order model" in head, head
    notes = [t for t in texts(page) if "nearest exact point" in t]
    assert any(f"α = {stored:g}" in t and re.search(r"\d+/24", t) for t in notes), notes  # the gap, in examples
    assert any("target accuracy" in t for t in notes), notes  # and on the preview's bars
    page.screenshot(path="/tmp/talos_workshop_gallery_first_order.png")

    _, head = _mnist_negated(page_at, url, stored)  # a stored exact point
    assert "exact model" in head, head


def test_addition_views_are_labelled_exact_or_first_order(url, page_at):
    page = page_at(f"{url}/arithmetic?{shipped('text')}&a.talos=0.53")
    wait_until(page, lambda: _gallery_heads(page), "the gallery")
    assert "first-order model" in _gallery_heads(page)[0]
    assert plots(page, "Exact model"), [p["title"] for p in plots(page)]
    assert live_state(page)["title"].startswith("First-order model")
    assert any("nearest exact point" in t and "α = 0.5" in t for t in texts(page))
    page = page_at(f"{url}/arithmetic?{shipped('text')}&a.talos=0.5")
    wait_until(page, lambda: _gallery_heads(page), "the gallery")
    assert "exact model" in _gallery_heads(page)[0]


# --------------------------------------------------------------------------------------------
# 3 · the live negation preview draws what its legend lists
# --------------------------------------------------------------------------------------------
def test_negation_preview_draws_what_its_legend_lists(url, page_at):
    page = page_at(f"{url}/arithmetic?{shipped('vision')}")
    page.get_by_role("tab", name=re.compile("^Negation")).click()
    wait_until(page, lambda: live_state(page, NEG_LIVE), "the negation preview")
    wait_drawn(page)
    svg = page.locator(f"{NEG_LIVE} svg")
    legend = svg.locator("text").all_text_contents()
    bars = list(svg.locator("rect.talos-live-bar title").all_text_contents())
    if any(t.startswith("control accuracy") for t in legend):
        assert any(": control " in b for b in bars), (legend, bars)
    else:  # the cache has no points of the control task: said in words next to the chart
        assert any("no points of the control task" in t for t in texts(page)), texts(page)
    page.screenshot(path="/tmp/talos_workshop_negation_preview.png")


# --------------------------------------------------------------------------------------------
# 4 · α on a scale people can drag
# --------------------------------------------------------------------------------------------
def test_alpha_sliders_open_on_the_teaching_range_and_drag_by_mouse(url, page_at):
    page = page_at(f"{url}/arithmetic?{shipped('vision')}")
    slider = page.locator(LIVE_SLIDERS).first
    assert float(slider.get_attribute("min")) == 0 and float(slider.get_attribute("max")) == 2
    curve = plot(page, "Mean normalized accuracy")
    assert curve["xaxis"]["range"][1] <= 2.2, curve["xaxis"]  # the α curve on the same scale
    addition = json.loads((SHIPPED / "results/addition/vision__efficientnet-lite0__talos.json").read_text())
    top = max(addition["alpha_grid"])
    page.get_by_text("Full searched α range").click()  # one click to the whole grid (read from the store)
    wait_until(page, lambda: float(page.locator(LIVE_SLIDERS).first.get_attribute("max")) == top, f"0–{top:g}")
    wait_until(page, lambda: "afull=true" in page.url, "the range in the URL")
    wait_drawn(page)
    assert plot(page, "Mean normalized accuracy")["xaxis"]["range"][1] >= top

    page = page_at(f"{url}/arithmetic?{shipped('text')}&same=false")
    sliders = page.locator(LIVE_SLIDERS)
    assert sliders.count() == 5
    for i in range(sliders.count()):  # each per-task thumb, grabbed a little below the track, dragged to the middle
        s = sliders.nth(i)
        lo, hi = float(s.get_attribute("min")), float(s.get_attribute("max"))
        assert hi <= 2, "the teaching range"
        drag(page, s, 0.5, dy=7)
        assert abs(float(s.input_value()) - (lo + hi) / 2) <= 0.05 * (hi - lo), (i, s.input_value())
    wait_until(page, lambda: all(f"a.talos.{t}=" in page.url for t in ("tweets", "fortune-topics")), "the URL")
    page.screenshot(path="/tmp/talos_workshop_teaching_range.png")


# --------------------------------------------------------------------------------------------
# 5 · efficiency: error bars never below zero
# --------------------------------------------------------------------------------------------
def test_step_time_error_bars_stay_above_zero(url, page_at):
    page = page_at(f"{url}/efficiency?{shipped('vision')}")
    fig = plot(page, "Cost per method")
    checked = 0
    for tr in fig["data"]:
        err = tr["error_y"]
        if not err or not err.get("visible") or not tr["y"]:
            continue
        minus = err.get("arrayminus") if err.get("symmetric") is False else err.get("array")
        plus = err.get("array")
        for y, lo, hi in zip(tr["y"], minus, plus):
            assert y - lo >= 0, (tr["name"], y, lo)
            assert hi <= 2 * y, (tr["name"], y, hi)  # a whisker no longer than twice its bar
            checked += 1
    assert checked
    assert any("95 % interval of the mean" in t for t in texts(page))


# --------------------------------------------------------------------------------------------
# 6 · the open tab and the toggles stay in the URL
# --------------------------------------------------------------------------------------------
def test_tab_and_toggle_stay_in_the_url(url, page_at):
    page = page_at(f"{url}/arithmetic?same=false")
    page.get_by_role("tab", name=re.compile("^Negation")).click()
    wait_until(page, lambda: "tab=" in page.url, "the tab in the URL")
    wait_drawn(page)
    assert "same=false" in page.url
    again = page_at(page.url)
    wait_until(again, lambda: live_state(again, NEG_LIVE), "the negation tab, restored from the link")
    again.get_by_role("tab", name=re.compile("^Addition")).click()
    wait_until(again, lambda: again.locator(LIVE_SLIDERS).count() == len(TASKS), "per-task sliders kept")


# --------------------------------------------------------------------------------------------
# 7 · read-only (classroom) mode: /run says so, and no server path is shown to visitors
# --------------------------------------------------------------------------------------------
def test_read_only_run_page_and_no_server_paths(ro_url, page_at, own_store):
    page = page_at(f"{ro_url}/run")
    assert "Page not found" not in body(page)
    assert any("Classroom mode" in t for t in texts(page)), texts(page)
    assert page.get_by_role("button", name="Launch in background").count() == 0
    for path in ("", "arithmetic", "efficiency"):
        page = page_at(f"{ro_url}/{path}")
        shown = body(page)
        assert str(own_store) not in shown and str(SHIPPED) not in shown and str(REPO) not in shown, path
        page.locator('[data-testid="stSidebar"]').get_by_role("combobox", name="Store").click()
        options = page.get_by_role("option").all_inner_texts()
        assert options and not any("/" in o for o in options), options
        page.keyboard.press("Escape")
    page.screenshot(path="/tmp/talos_workshop_read_only.png")


# --------------------------------------------------------------------------------------------
# 8 · "Export this mix" only where it can work
# --------------------------------------------------------------------------------------------
def test_export_is_offered_only_with_task_vectors(url, page_at):
    page = page_at(f"{url}/arithmetic?{shipped('vision')}")
    assert page.get_by_text("Export this mix:").count() == 0
    assert any("task vectors" in t and "export" in t.lower() for t in texts(page))


# --------------------------------------------------------------------------------------------
# 9, 10 · Localization: a readable linear-regime chart, a sharing caption about the map shown
# --------------------------------------------------------------------------------------------
def test_linear_regime_chart_and_caption(url, page_at):
    page = page_at(f"{url}/localization?{shipped('text')}")
    fig = plot(page, "Is fine-tuning in the linear regime?")
    assert all("text" not in tr["mode"] for tr in fig["data"]), "point labels pile up"
    words = " ".join(texts(page))
    assert "TaLoS stays there" not in words
    assert re.search(r"TaLoS[^.;]*gap \d\.\d\d", words), "the caption reads the points shown"
    grid = page.locator('[data-testid="stTable"], [data-testid="stDataFrame"]').filter(has_text="fine-tuned")
    assert "finetuned_acc" not in grid.last.inner_text() and "talos\n" not in grid.last.inner_text()


def test_sharing_caption_describes_the_map(url, page_at):
    page = page_at(f"{url}/localization?{shipped('text')}")
    figs = wait_until(page, lambda: plots(page, "Parameter sharing"), "the sharing maps")
    for fig in figs:
        assert "perturbd" not in fig["yaxis"]["title"]
    from dashboard import data as D

    sh = D.get("sharing", str(SHIPPED), "text__minilm-l6__perturb")
    m = np.asarray(sh.matrix)
    diag, off = np.mean(np.diag(m)), np.mean(m[~np.eye(len(m), dtype=bool)])
    assert any(f"{diag:.2f}" in t and f"{off:.2f}" in t for t in texts(page)), texts(page)


# --------------------------------------------------------------------------------------------
# 11 · Masks: each heatmap readable
# --------------------------------------------------------------------------------------------
def test_mask_heatmaps_of_unlike_methods_get_their_own_scale(url, page_at):
    page = page_at(f"{url}/masks?{shipped('vision')}&method=TaLoS&method2=Non-linear+FT")
    figs = wait_until(page, lambda: [p for p in plots(page) if " · " in p["title"]], "the two heatmaps")
    talos = next(f for f in figs if f["title"].startswith("TaLoS"))
    # TaLoS trains ≤ 10 % of a cell: its own colour scale, not non-linear FT's 0–1
    assert talos["data"][0]["zmax"] < 0.5, talos["data"][0]["zmax"]
    assert any("own colour scale" in t for t in texts(page))


# --------------------------------------------------------------------------------------------
# 12 · comparison tables: catalogue labels with units; "best" only where the intervals separate it
# --------------------------------------------------------------------------------------------
def test_comparison_table_labels_and_best_only_when_separated(url, page_at):
    page = page_at(f"{url}/efficiency?{shipped('vision')}")
    table = page.locator('[data-testid="stTable"]').filter(has_text="Addition").first
    table.wait_for()
    heads = table.locator("thead th").all_inner_texts()
    assert heads and not any("_" in h for h in heads), heads
    assert any("%" in h for h in heads) and any("ms" in h for h in heads), heads
    cells = table.locator("tbody td, tbody th").all_inner_texts()
    assert not any(c.strip() in ("tall_consensus", "iso_c", "talos", "nonlinear") for c in cells), cells
    bold = table.evaluate("""t => Array.from(t.querySelectorAll('tbody td')).filter(td =>
        parseInt(getComputedStyle(td).fontWeight) >= 600).map(td => ({col: td.cellIndex, text: td.innerText}))""")
    rows = table.locator("tbody tr").all()
    for b in bold:  # a highlighted best: its interval does not overlap any other row's in that column
        mine = re.search(r"\[([\d.]+), ([\d.]+)\]", b["text"])
        if mine is None:
            continue
        lo = float(mine.group(1))
        for r in rows:
            other = r.locator("td").nth(b["col"] - 1).inner_text()
            m = re.search(r"\[([\d.]+), ([\d.]+)\]", other)
            if m and other != b["text"]:
                assert float(m.group(2)) < lo or float(m.group(1)) > float(mine.group(2)), (b, other)
    page.screenshot(path="/tmp/talos_workshop_comparison.png")


# --------------------------------------------------------------------------------------------
# 13 · the tiny suite says what it is
# --------------------------------------------------------------------------------------------
def test_tiny_suite_is_labelled_as_a_smoke_test(url, page_at):
    page = page_at(f"{url}/arithmetic?{shipped('vision')}")
    side = page.locator('[data-testid="stSidebar"]')
    side.get_by_role("combobox", name="Suite (task set)").click()
    options = page.get_by_role("option").all_inner_texts()
    assert options[0].startswith("vision") or options[0].startswith("text"), options
    tiny = [o for o in options if o.startswith("tiny")]
    assert tiny and "smoke test" in tiny[0] and tiny == options[-1:], options
    page.get_by_role("option", name=tiny[0]).click()
    wait_until(page, lambda: any("numbers mean nothing" in t for t in texts(page)), "the smoke-test warning")


# --------------------------------------------------------------------------------------------
# 14 · nothing drawn over anything
# --------------------------------------------------------------------------------------------
def test_alpha_markers_and_task_names_do_not_overlap(url, page_at):
    page = page_at(f"{url}/arithmetic?{shipped('text')}")
    curve = plot(page, "Mean normalized accuracy")
    assert not any("selected" in a for a in curve["annotations"]), curve["annotations"]  # in the legend instead
    assert any(tr["name"].startswith("selected α") for tr in curve["data"])
    exact = plot(page, "Exact model")
    turned = page.locator(f"{LIVE} svg text[transform*='rotate']").count() > 0
    assert turned == (exact["xaxis"]["tickangle"] not in (0, None, "auto")), (turned, exact["xaxis"])
    page.get_by_role("tab", name=re.compile("^Negation")).click()
    wait_until(page, lambda: live_state(page, NEG_LIVE), "the negation preview")
    wait_drawn(page)
    exact = plot(page, "Exact model")
    turned = page.locator(f"{NEG_LIVE} svg text[transform*='rotate']").count() > 0
    assert turned == (exact["xaxis"]["tickangle"] not in (0, None, "auto")), (turned, exact["xaxis"])
    curve = plot(page, "Negating")
    assert not any("selected" in a for a in curve["annotations"]), curve["annotations"]


# --------------------------------------------------------------------------------------------
# 15 · one notation, readable names
# --------------------------------------------------------------------------------------------
def test_one_notation_and_readable_names(url, page_at):
    page = page_at(f"{url}/arithmetic?{shipped('vision')}")
    words = body(page)
    for ascii_math in ("theta0", "alpha *", "x 1/(1", ">= 0.95", "alpha = 0"):
        assert ascii_math not in words, ascii_math
    page = page_at(f"{url}/disentanglement?{shipped('vision')}")
    caption = " ".join(texts(page))
    assert "how often" not in caption and re.search(r"from 0 .* to 2", caption), caption
    page = page_at(f"{url}/masks?{shipped('text')}")
    fig = wait_until(page, lambda: [p for p in plots(page) if " · " in p["title"]], "the heatmaps")[0]
    names = fig["yaxis"]["ticktext"] + fig["xaxis"]["ticktext"]
    assert names and not set(names) & {"attn_out", "mlp_in", "mlp_out", "outside", "layernorm"}, names


def test_readme_mask_overlap_is_what_the_masks_page_shows(url, page_at):
    readme = (REPO / "README.md").read_text()
    m = re.search(r"IoU\s+(0\.\d\d)–(0\.\d\d)[^)]*?“([^”]+)” on the Masks page", readme, re.S)
    assert m, "the README names where its mask overlap is shown"
    label = m.group(3)
    page = page_at(f"{url}/masks?{shipped('text')}&method={label}")
    plot(page, f"{label}: IoU between tasks")
    z = np.asarray(page.evaluate("""() => { for (const el of document.querySelectorAll('.js-plotly-plot'))
        if ((el.layout.title.text || '').includes('IoU between tasks')) return el.data[0].z; }"""), dtype=float)
    off = z[~np.eye(len(z), dtype=bool)]
    assert (f"{off.min():.2f}", f"{off.max():.2f}") == (m.group(1), m.group(2))


# --------------------------------------------------------------------------------------------
# 16 · the first screen at 1280×720 and ξ maps wide enough to read
# --------------------------------------------------------------------------------------------
def test_first_screen_has_a_chart_and_a_slider_and_xi_maps_are_wide(url, page_at):
    page = page_at(f"{url}/arithmetic?{shipped('vision')}", viewport=VIEW)
    slider = page.locator(LIVE_SLIDERS).first.bounding_box()
    chart = page.locator(LIVE).bounding_box()
    assert slider["y"] + slider["height"] <= VIEW["height"], slider
    assert chart["y"] + 120 <= VIEW["height"], chart  # the chart starts on the first screen
    page.screenshot(path="/tmp/talos_workshop_first_screen.png")
    page = page_at(f"{url}/disentanglement?{shipped('vision')}", viewport=VIEW)
    panels = wait_until(page, lambda: plots(page, "ξ for"), "the side-by-side maps")
    assert all(p["xaxis"]["length"] >= 250 for p in panels), [p["xaxis"]["length"] for p in panels]


# --------------------------------------------------------------------------------------------
# 17 · offline: a local favicon, /start, and where the results of a finished job are
# --------------------------------------------------------------------------------------------
PAGES = ("", "start", "learn", "arithmetic", "disentanglement", "localization", "masks", "efficiency", "run")


def test_every_page_loads_with_the_network_blocked(url, browser):
    failed, errors = [], []
    ctx = browser.new_context(viewport=VIEW)
    local = re.compile(r"^(https?|wss?)://(127\.0\.0\.1|localhost)(:\d+)?/")
    ctx.route(lambda u: not local.match(u) and not u.startswith(("data:", "blob:")), lambda route: route.abort())
    page = ctx.new_page()
    page.set_default_timeout(CEILING_S * 1000)
    # a download button checks its /media/ file on mount (Streamlit's checkSourceUrlResponse); the next goto may
    # cancel that check (net::ERR_ABORTED), which is the test navigating on, not the page failing offline
    page.on("requestfailed", lambda r: None if local.match(r.url) and r.failure == "net::ERR_ABORTED"
            else failed.append((r.url, r.failure)))
    # Streamlit's client probes <page path>/_stcore/{health,host-config} for a base path before the root one
    probe = re.compile(r"/[a-z]+/_stcore/(health|host-config)$")
    page.on("response", lambda r: errors.append((r.status, r.url))
            if r.status >= 400 and not probe.search(r.url) else None)
    try:
        for store in (f"store={SHIPPED}&suite=vision", f"store={SHIPPED}&suite=text", ""):
            for path in PAGES:
                page.goto(f"{url}/{path}?{store}")
                wait_drawn(page)
                assert "Page not found" not in body(page), path
        favicon = page.evaluate("() => Array.from(document.querySelectorAll('link[rel~=icon]')).map(l => l.href)")
        assert favicon and all(local.match(f) or f.startswith("data:") for f in favicon), favicon
    finally:
        ctx.close()
    assert not failed, failed
    assert not errors, errors


def test_start_path_and_the_finished_job_message(url, page_at):
    page = page_at(f"{url}/start")
    assert page.locator("h1").first.inner_text().startswith("Learn")
    page = page_at(f"{url}/run")
    done = wait_until(page, lambda: [t for t in texts(page) if t.startswith("Finished")], "the finished job")[0]
    assert "Arithmetic" in done and SUITE in done and MODEL in done, done
    link = page.locator('[data-testid="stPageLink"] a').filter(has_text="results").first
    href = link.get_attribute("href")
    assert "arithmetic" in href and f"suite={SUITE}" in href and f"model={MODEL}" in href, href


# --------------------------------------------------------------------------------------------
# linked views: a ξ cell opens Arithmetic at its α's; the Arithmetic α is marked on the ξ map
# --------------------------------------------------------------------------------------------
def test_xi_cell_opens_arithmetic_and_its_alpha_is_marked_back(url, page_at):
    page = page_at(f"{url}/disentanglement?pair={TASKS[0]}+%2B+{TASKS[1]}&methods=TaLoS&focus=TaLoS")
    title = f"TaLoS: ξ({TASKS[0]}, {TASKS[1]})"
    fig = plot(page, title)
    a2 = [v for v in fig["data"][0]["x"] if v > 0][1]
    a1 = [v for v in fig["data"][0]["y"] if v > 0][2]
    page.get_by_text(title).scroll_into_view_if_needed()
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    x, y = page.evaluate(CELL_JS, [title, a1, a2])  # the cell at α₁ (y) = a1, α₂ (x) = a2
    page.mouse.click(x, y)
    wait_until(page, lambda: "/arithmetic" in page.url, "the Arithmetic page")
    wait_drawn(page)
    assert "same=false" in page.url
    values = {s.get_attribute("data-slider-id"): float(s.input_value()) for s in page.locator(LIVE_SLIDERS).all()}
    assert math.isclose(values[f"a.talos.{TASKS[0]}"], a1, abs_tol=0.1), values
    assert math.isclose(values[f"a.talos.{TASKS[1]}"], a2, abs_tol=0.1), values
    assert values[f"a.talos.{TASKS[2]}"] == 0.0, values

    page.locator('[data-testid="stSidebarNav"]').get_by_text("Disentanglement").click()
    fig = wait_until(page, lambda: [f for f in plots(page, title) if any(t["name"].startswith("Arithmetic α")
                                                                          for t in f["data"])], "the marked α")[0]
    mark = next(t for t in fig["data"] if t["name"].startswith("Arithmetic α"))
    assert math.isclose(mark["x"][0], values[f"a.talos.{TASKS[1]}"]) and \
        math.isclose(mark["y"][0], values[f"a.talos.{TASKS[0]}"]), mark
    page.screenshot(path="/tmp/talos_workshop_linked.png")


# --------------------------------------------------------------------------------------------
# a store with the runs' task vectors: the exact model on demand for the gallery
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def vector_url(tmp_path_factory):
    """A tiny-text TaLoS store made by the protocols (runs with their task vectors, addition, negation, examples)."""
    from test_examples import OVERRIDES
    from tiny_text import CONTROL as TEXT_CONTROL
    from tiny_text import MODEL as TEXT_MODEL
    from tiny_text import TASKS as TEXT_TASKS

    from talos_core.evaluation.protocols import AdditionSettings, ExamplesSettings, NegationSettings, evaluate
    from talos_core.store import Store

    store = Store(tmp_path_factory.mktemp("vectors") / "store")
    kw = dict(overrides=OVERRIDES)
    evaluate(store, "single", TEXT_MODEL, TEXT_TASKS, "talos", **kw)
    evaluate(store, "addition", TEXT_MODEL, TEXT_TASKS, "talos", settings=AdditionSettings(alpha_step=0.5), **kw)
    evaluate(store, "negation", TEXT_MODEL, TEXT_TASKS, "talos",
             settings=NegationSettings(control_task=TEXT_CONTROL, alpha_step=0.5), **kw)
    evaluate(store, "examples", TEXT_MODEL, TEXT_TASKS, "talos",
             settings=ExamplesSettings(points=12, control_task=TEXT_CONTROL, alpha_step=0.5), **kw)
    with app_server(store.root, tmp_path_factory.mktemp("log") / "streamlit.log") as u:
        yield u


def test_gallery_evaluates_the_exact_model_on_demand_where_the_store_has_task_vectors(vector_url, page_at):
    page = page_at(f"{vector_url}/arithmetic?a.talos=0.53")  # between the stored exact points 0.5 and 0.55
    wait_until(page, lambda: _gallery_heads(page), "the gallery")
    assert "first-order model at α = 0.53" in _gallery_heads(page)[0]
    page.get_by_role("button", name=re.compile("^Evaluate the exact model at α = 0.53")).click()
    wait_until(page, lambda: "exact model at α = 0.53" in (_gallery_heads(page) or [""])[0], "the exact gallery")
    wait_drawn(page)
    assert any("evaluated now from the runs' task vectors" in t for t in texts(page))
    page.screenshot(path="/tmp/talos_workshop_exact_on_demand.png")
    page = page_at(f"{vector_url}/arithmetic?a.talos=0.55")  # a stored teaching-range point: exact, no button
    wait_until(page, lambda: _gallery_heads(page), "the gallery")
    assert "exact model at α = 0.55" in _gallery_heads(page)[0]
    assert page.get_by_role("button", name=re.compile("^Evaluate the exact model")).count() == 0
