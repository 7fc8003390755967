"""The Streamlit app through streamlit.testing.v1.AppTest on the synthetic store (and, with
``TALOS_DASHBOARD_TEST_STORE=cached_results``, on the real shipped store)."""

from __future__ import annotations

import base64
import json
import shutil

import numpy as np
import plotly.graph_objects as go
import pytest
from dashboard_fixtures import REPO, TASKS
from streamlit.testing.v1 import AppTest

from dashboard import figures_core
from dashboard.views import ARITHMETIC_TAB_KEY, ARITHMETIC_TABS

figures_core.VALIDATE = True  # the app runs in this process: validate its figures against plotly's schema

APP = str(REPO / "dashboard" / "app.py")
PAGES = ["learn", "arithmetic", "disentanglement", "localization", "masks", "efficiency", "run"]


def open_app(monkeypatch, store, page: str | None = None, query: dict | None = None) -> AppTest:
    monkeypatch.setenv("TALOS_STORE", str(store))
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    if page and page != "learn":
        at.switch_page(f"app_pages/{page}.py")  # before the first run = opening a deep link
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_negation_tab(at: AppTest) -> AppTest:
    """The Arithmetic page builds only its open tab: open the negation tab, as a click on it does (a rerun)."""
    at.session_state[ARITHMETIC_TAB_KEY] = ARITHMETIC_TABS[1]
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _decode(obj):
    """Plotly's typed-array JSON (``{"dtype", "bdata", "shape"}``) back to lists, recursively."""
    if isinstance(obj, dict):
        if "bdata" in obj and "dtype" in obj:
            arr = np.frombuffer(base64.b64decode(obj["bdata"]), dtype=np.dtype(obj["dtype"]))
            if obj.get("shape"):
                arr = arr.reshape([int(n) for n in str(obj["shape"]).split(",")])
            return arr.tolist()
        return {k: _decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v) for v in obj]
    return obj


def figures(at: AppTest) -> list:
    return [go.Figure(_decode(json.loads(c.proto.spec))) for c in at.get("plotly_chart")]


def figure_titled(at: AppTest, prefix: str):
    for f in figures(at):
        if (f.layout.title.text or "").startswith(prefix):
            return f
    raise AssertionError(f"no figure titled {prefix!r}: {[f.layout.title.text for f in figures(at)]}")


@pytest.mark.parametrize("page", PAGES)
def test_every_page_opens_without_errors(monkeypatch, dashboard_store, page):
    at = open_app(monkeypatch, dashboard_store, page)
    assert at.title, "page has a title"
    errors = [e.value for e in at.error if not e.value.startswith("The job")]  # a failed job's own status is fine
    assert not errors, errors
    if page != "run":
        if dashboard_store.name == "store" and "dash-store" in str(dashboard_store):  # the complete synthetic store
            assert figures(at), f"{page} shows at least one figure"
        else:  # a real store may lack some result kinds: then the page says so in a sentence
            assert figures(at) or at.info, f"{page} shows a figure or says what is missing"


def test_arithmetic_slider_moves_exact_and_preview(monkeypatch, fixture_store):
    at = open_app(monkeypatch, fixture_store, "arithmetic", {"method": "talos"})
    before_exact = figure_titled(at, "Exact model (test): θ0 +")
    before_prev = figure_titled(at, "First-order model")
    assert "θ0 + 8·Στ_t" in before_exact.layout.title.text  # starts at the selected α
    at.slider(key="a.talos").set_value(4.2).run()
    assert not at.exception
    after_exact = figure_titled(at, "Exact model (test): θ0 +")
    after_prev = figure_titled(at, "First-order model")
    assert "θ0 + 4·Στ_t" in after_exact.layout.title.text  # snapped to the grid point 4.0
    assert not np.allclose(after_exact.data[0].y, before_exact.data[0].y)
    assert not np.allclose(after_prev.data[0].y, before_prev.data[0].y)
    assert any("snapped to the nearest cached grid point α = 4" in w.value for w in at.warning)
    curve = figure_titled(at, "Mean normalized accuracy")
    assert next(t for t in curve.data if t.name.startswith("selected α")).x[0] == 8.0


def test_arithmetic_per_task_sliders(monkeypatch, fixture_store):
    at = open_app(monkeypatch, fixture_store, "arithmetic", {"method": "talos"})
    at.toggle(key="same_alpha").set_value(False).run()
    keys = {s.key for s in at.slider}
    assert {f"a.talos.{t}" for t in TASKS} <= keys
    before = figure_titled(at, "First-order model")
    at.slider(key=f"a.talos.{TASKS[0]}").set_value(0.0).run()
    after = figure_titled(at, "First-order model")
    assert after.data[0].y[0] != before.data[0].y[0]
    assert any("shared by all tasks" in w.value for w in at.warning)


def test_arithmetic_method_switch_and_negation(monkeypatch, fixture_store):
    at = open_app(monkeypatch, fixture_store, "arithmetic")
    at.selectbox(key="method").set_value("nonlinear").run()
    exact = figure_titled(at, "Exact model (test): θ0 +")
    from dashboard.figures import method_color

    assert exact.data[0].marker.color == method_color("nonlinear")
    assert not [f for f in figures(at) if f.layout.title.text.startswith("Exact model (test): θ0 − α")], "a closed tab"
    open_negation_tab(at)
    key = f"n.nonlinear.{TASKS[0]}"
    neg0 = figure_titled(at, "Exact model (test): θ0 − α τ_target")
    at.slider(key=key).set_value(0.0).run()
    neg1 = figure_titled(at, "Exact model (test): θ0 − α τ_target")
    assert neg1.data[0].y[0] > neg0.data[0].y[0]  # less negation → target accuracy higher


def test_url_query_restores_view(monkeypatch, fixture_store):
    at = open_app(monkeypatch, fixture_store, "arithmetic", {"method": "nonlinear", "a.nonlinear": "0.3"})
    assert at.selectbox(key="method").value == "nonlinear"
    assert at.slider(key="a.nonlinear").value == pytest.approx(0.3)
    assert "θ0 + 0.3·Στ_t" in figure_titled(at, "Exact model (test): θ0 +").layout.title.text


def test_method_pickers_show_the_catalogues_labels(monkeypatch, fixture_store):
    """Pickers and chips name methods as the figures do ("TaLoS", "Non-linear FT"); the page still gets the method
    itself, and a link naming the method itself (``?method=nonlinear``, links from before) still opens it."""
    at = open_app(monkeypatch, fixture_store, "arithmetic", {"method": "nonlinear"})
    box = at.selectbox(key="method")
    assert box.value == "nonlinear" and box.options == ["TaLoS", "Non-linear FT"]
    at = open_app(monkeypatch, fixture_store, "disentanglement")
    chips = at.multiselect(key="methods")
    assert chips.options == ["TaLoS", "Non-linear FT"] and chips.value == ["talos", "nonlinear"]
    learn = open_app(monkeypatch, fixture_store, "learn")
    assert learn.selectbox(key="method").options == ["TaLoS", "Non-linear FT", "LoTA"]


def test_disentanglement_method_selection(monkeypatch, fixture_store):
    at = open_app(monkeypatch, fixture_store, "disentanglement")
    side = figure_titled(at, "ξ for")
    assert len(side.data) == 2 and side.layout.coloraxis.cmax > 0
    at.multiselect(key="methods").set_value(["talos"]).run()
    side = figure_titled(at, "ξ for")
    assert len(side.data) == 1
    one = figure_titled(at, "TaLoS: ξ")
    assert one.layout.shapes[0].line.color == "#d62728"
    at.multiselect(key="methods").set_value(["talos", "nonlinear"]).run()
    table = at.dataframe[0].value
    shared = [c for c in table.columns if c.startswith("mean ξ on [")]
    assert len(shared) == 1 and {"chosen addition α", "ξ at (α, α)", "own search region"} <= set(table.columns)
    assert table[shared[0]].notna().all()  # one square for every method, not each method's own region


def test_masks_compare_two_tasks(monkeypatch, fixture_store):
    at = open_app(monkeypatch, fixture_store, "masks")
    at.radio(key="mcompare").set_value("two tasks").run()
    assert not at.exception
    titles = [f.layout.title.text for f in figures(at)]
    assert f"TaLoS · {sorted(TASKS)[0]}" in titles and f"TaLoS · {sorted(TASKS)[1]}" in titles
    heat = [f for f in figures(at) if f.layout.title.text.startswith("TaLoS · ")]
    assert heat[0].data[0].zmax == heat[1].data[0].zmax  # shared colour scale


def test_localization_shared_scale(monkeypatch, fixture_store):
    at = open_app(monkeypatch, fixture_store, "localization")
    heats = [f for f in figures(at) if f.layout.title.text in ("TaLoS", "Non-linear FT")]
    assert len(heats) == 2
    assert heats[0].data[0].zmax == heats[1].data[0].zmax and heats[0].data[0].zmin == heats[1].data[0].zmin
    assert len(heats[0].layout.shapes) == len(TASKS)


@pytest.mark.parametrize("page", ["learn", "arithmetic", "masks", "efficiency"])
def test_empty_store_shows_a_sentence(monkeypatch, tmp_path, page):
    (tmp_path / "empty").mkdir()
    at = open_app(monkeypatch, tmp_path / "empty", page)
    assert any("has no results yet" in i.value for i in at.info)
    assert not figures(at)


def _comparison_frame(at: AppTest):
    """The comparison table as the Efficiency page shows it (``st.table``: headers a person reads)."""
    for t in at.table:
        if "Addition: absolute accuracy (%)" in t.value.columns and "Time per step (ms)" in t.value.columns:
            return t.value
    raise AssertionError("the Efficiency page shows no comparison table")


def test_comparison_table_shows_intervals_beside_means(monkeypatch, fixture_store, tmp_path):
    """The comparison table shows "mean [lo, hi]" where the store has intervals, the bare mean otherwise."""
    from talos_core.store import Store

    at = open_app(monkeypatch, fixture_store, "efficiency")
    plain = _comparison_frame(at)
    abs_, norm, target = ("Addition: absolute accuracy (%)", "Addition: normalized accuracy (%)",
                          "Negation: target accuracy (%, ↓)")
    assert not plain[abs_].str.contains(r"\[").any()
    assert not any("bootstrap interval" in c.value for c in at.caption)
    assert any("no best is marked" in c.value for c in at.caption)

    store = Store(shutil.copytree(fixture_store, tmp_path / "store"))
    name = "default__tiny-clip"
    comp = store.read_table("comparison", name)
    for col in ("addition_abs", "negation_target"):
        comp[f"{col}_lo"], comp[f"{col}_hi"] = (comp[col] - 0.05).clip(0, 1), (comp[col] + 0.05).clip(0, 1)
    store.write_table("comparison", name, comp)
    at = open_app(monkeypatch, store.root, "efficiency")
    shown = _comparison_frame(at).set_index("Method")
    want = comp.set_index("method").loc["talos"]
    lo, hi = 100 * want.addition_abs_lo, 100 * want.addition_abs_hi
    # the cell may end with the audit's ⚑ badge (this tiny store has flags)
    assert shown.loc["TaLoS", abs_].split(" ⚑")[0] == f"{100 * want.addition_abs:.2f} [{lo:.1f}, {hi:.1f}]"
    assert shown[target].str.contains(r"\[").all()
    assert not shown[norm].str.contains(r"\[").any()  # no interval stored for it
    assert not any("_" in c for c in shown.columns)
    assert any("95 % bootstrap interval over test examples" in c.value for c in at.caption)


def test_efficiency_page_warns_when_methods_were_timed_on_different_machines(monkeypatch, fixture_store, tmp_path):
    """A suite run in parts on a GPU and a CPU: the page says the bars compare machines (one machine: no word)."""
    from talos_core.store import Store

    at = open_app(monkeypatch, fixture_store, "efficiency")
    assert not any("different machines" in w.value for w in at.warning)
    store = Store(shutil.copytree(fixture_store, tmp_path / "store"))
    name = "default__tiny-clip"
    eff = store.read_table("efficiency", name)
    eff["machine"] = ["cuda · NVIDIA H200" if m == "talos" else "cpu · AMD EPYC · 1 thread" for m in eff["method"]]
    store.write_table("efficiency", name, eff)
    at = open_app(monkeypatch, store.root, "efficiency")
    (note,) = [w.value for w in at.warning if "different machines" in w.value]
    assert "TaLoS: cuda · NVIDIA H200" in note and "compare machines, not methods" in note


def test_missing_store_folder_is_an_error_message(monkeypatch, tmp_path):
    at = open_app(monkeypatch, tmp_path / "does-not-exist")
    assert any("does not exist" in e.value for e in at.error)


def test_corrupt_json_is_a_message_not_a_traceback(monkeypatch, fixture_store, tmp_path):
    store = shutil.copytree(fixture_store, tmp_path / "store")
    name = "default__tiny-clip__talos"
    (store / "results" / "addition" / f"{name}.json").write_text("{broken")
    (store / "results" / "localization" / f"{name}.json").write_text(json.dumps({"tasks": ["a"]}))
    at = open_app(monkeypatch, store, "arithmetic", {"method": "talos"})
    assert any("corrupt" in e.value for e in at.error)
    at = open_app(monkeypatch, store, "localization")
    assert any("lacks field" in e.value for e in at.error)


@pytest.mark.parametrize("page", [p for p in PAGES if p != "run"])
def test_corrupt_suite_record_is_one_sentence_and_the_pages_still_work(monkeypatch, fixture_store, tmp_path, page):
    """A corrupt ``results/suite/<name>.json`` costs the suite's description only: one warning naming the file
    on every page, no traceback, the page's results still shown."""
    store = shutil.copytree(fixture_store, tmp_path / "store")
    suite_dir = store / "results" / "suite"
    suite_dir.mkdir(parents=True, exist_ok=True)
    (suite_dir / "default.json").write_text("{broken")
    at = open_app(monkeypatch, store, page)
    warnings = [w.value for w in at.sidebar.warning]
    assert len(warnings) == 1 and "default.json" in warnings[0] and "corrupt" in warnings[0]
    assert not at.error


def test_run_page_shows_the_commands(monkeypatch, tmp_path):
    at = open_app(monkeypatch, tmp_path, "run")
    code = "\n".join(c.value for c in at.code)
    assert "talos finetune --task" in code and "talos evaluate addition" in code
    assert any("No jobs yet" in c.value for c in at.caption)


def test_run_page_offers_the_registrys_cpu_models(monkeypatch, tmp_path):
    """Which models the Run page calls feasible on a CPU comes from the model registry (``ModelSpec.cpu``)."""
    import torch

    from talos_core.models import MODELS

    if torch.cuda.is_available():
        pytest.skip("the CPU-only advice is shown on machines without a GPU")
    at = open_app(monkeypatch, tmp_path, "run")
    advice = " ".join(i.value for i in at.info if "CPU only" in i.value)
    assert {n for n in MODELS if f"`{n}`" in advice} == {n for n, s in MODELS.items() if s.cpu}
    assert {"tiny-clip", "minilm-l6", "efficientnet-lite0"} <= {n for n, s in MODELS.items() if s.cpu}
    assert not any("too large" in w.value for w in at.warning)
    at.selectbox(key="run_model").set_value("clip-vit-b-32-random").run()
    assert any("too large for a CPU-only machine" in w.value for w in at.warning)


def test_sidebar_names_device_and_evaluation_precision(monkeypatch):
    """On the shipped store, the suite caption says where and in which precision results were computed."""
    at = open_app(monkeypatch, REPO / "cached_results", "learn", {"suite": "text"})
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "computed on cpu, fp32 evaluation" in captions, captions


def _damage_results(store, how: str, every: int) -> list:
    """Damage every ``every``-th file under ``results/`` (sorted; JSON and the preview / examples arrays):
    ``truncate`` to half, ``garble`` the middle with 0xFF bytes. Returns the damaged files."""
    files = sorted(p for p in (store / "results").rglob("*") if p.is_file() and p.suffix in (".json", ".safetensors"))
    hit = files[::every]
    for p in hit:
        data = p.read_bytes()
        if how == "truncate":
            p.write_bytes(data[: len(data) // 2])
        else:
            mid = len(data) // 2
            p.write_bytes(data[:mid] + b"\xff" * 64 + data[mid + 64:])
    return hit


@pytest.mark.parametrize("how", ["truncate", "garble"])
@pytest.mark.parametrize("page", [p for p in PAGES if p != "run"])
def test_a_damaged_store_gives_messages_not_tracebacks_on_every_page(monkeypatch, fixture_store, tmp_path, page, how):
    """The corrupted-store generator on the dashboard: every other result file (JSON and arrays) of the
    synthetic store truncated or garbled. Every page opens without an exception element, says what is wrong in
    visible messages, and still shows what it can (the undamaged results: charts or tables), and nothing is written
    into the store."""
    store = shutil.copytree(fixture_store, tmp_path / "store")
    damaged = _damage_results(store, how, every=2)
    assert damaged
    before = sorted(str(p.relative_to(store)) for p in store.rglob("*"))
    at = open_app(monkeypatch, store, page)  # asserts: no exception element
    messages = [m.value for m in (*at.error, *at.warning, *at.info, *at.sidebar.warning, *at.sidebar.error)]
    assert any("corrupt" in m or "damaged" in m or "not a valid" in m for m in messages), messages
    shown = len(at.get("plotly_chart")) + len(at.get("arrow_data_frame")) + len(at.get("metric"))
    pickers = [s for s in at.selectbox if len(s.options) > 1]
    # the results it can still read are shown, or (the picked result is the damaged one) reachable from a picker
    assert shown > 0 or pickers, f"{page}: nothing shown besides the messages {messages}"
    assert sorted(str(p.relative_to(store)) for p in store.rglob("*")) == before


@pytest.mark.parametrize(("suite", "word"), [("vision", "stage of the CNN"), ("text", "transformer block")])
def test_mask_heatmaps_name_the_models_blocks(monkeypatch, suite, word):
    """The Learn page and the Masks page say what a heatmap column is for the suite's model (EfficientNet is a
    CNN: no transformer blocks)."""
    learn = open_app(monkeypatch, REPO / "cached_results", "learn", {"suite": suite})
    assert f"per {word} and layer type" in " ".join(m.value for m in learn.markdown)
    masks = open_app(monkeypatch, REPO / "cached_results", "masks", {"suite": suite})
    assert f"in each {word} (x)" in " ".join(c.value for c in masks.caption)


def test_audit_badges_and_panel_on_the_shipped_store(monkeypatch):
    """Every number the audit flags carries a ⚑ badge with its footnote numbers, and the panel below lists each
    footnote with what was found and why it matters (vision: TIES' search chose the smallest sparsity it tried;
    TaLoS's negation is flagged, its single-task accuracy, from converged runs, is not)."""
    from dashboard.figures import header
    from talos_core.evaluation.audit import audit_suite

    at = open_app(monkeypatch, REPO / "cached_results", "efficiency", {"suite": "vision"})
    shown = _comparison_frame(at).set_index("Method")
    assert "⚑" in shown.loc["TaLoS", header("negation_target")]
    assert "⚑" not in shown.loc["TaLoS", header("single_task_acc")]  # no run-level flag on a converged row
    assert "⚑" not in shown.loc["TaLoS", header("zero_shot_acc")]  # measured, not selected: nothing to flag
    timed = {f.row for f in audit_suite(REPO / "cached_results", "vision") if f.check == "timing-disturbed"}
    assert "talos" in timed and "lota" not in timed
    assert "⚑" in shown.loc["TaLoS", header("time_per_step_s")]  # a step time measured on a shared CPU
    assert "⚑" not in shown.loc["LoTA", header("time_per_step_s")]  # LoTA's run-level flag says nothing of timing
    flags = audit_suite(REPO / "cached_results", "vision")
    panel = next(d.value for d in at.dataframe if "why it matters" in d.value.columns)
    assert len(panel) == len({(f.row or "", f.check) for f in flags})
    edge = panel[panel["check"] == "hyperparameter at the edge of its candidates"]
    assert edge["found"].str.contains("sparsity chosen at the edge of the 4 points searched (0.1…0.99): 0.1",
                                      regex=False).any()
    assert any(f"Audit: {len(flags)} flags" in e.label for e in at.expander)


def test_a_machine_flag_badges_time_and_memory_but_a_run_flag_reaches_neither():
    """``timing-other-machine`` names peak memory too when GPU and CPU runs meet (a GPU's allocated memory and a CPU
    process's resident set are not one quantity): the memory cell carries its badge; a run-level flag (every number
    of the row) reaches the accuracies, never the costs."""
    from dashboard import audit_view
    from talos_core.evaluation.audit import ALL, Flag

    machine = Flag("timing-other-machine", "text", "talos", ("time_per_step_s", "peak_memory_mb"),
                   "efficiency/text__minilm-l6", "timed on cuda, nonlinear's runs on cpu")
    run = Flag("not-converged", "text", "lota", (ALL,), "runs", "curve still rising")
    badges = audit_view.cell_badges([machine, run], ["talos", "lota"], audit_view.AUDITED_COLUMNS)
    assert badges[("talos", "peak_memory_mb")] == badges[("talos", "time_per_step_s")] == "⚑1"
    assert ("lota", "single_task_acc") in badges
    assert ("lota", "peak_memory_mb") not in badges and ("lota", "time_per_step_s") not in badges


def test_efficiency_page_shows_what_each_row_chose_as_the_report_prints_it(monkeypatch):
    """Opened, the "What each row chose" expander holds the report's choices table of the suite (the same rows and
    cells as ``talos report``), read from the store; closed, it builds nothing."""
    from talos_core.suites.report import choices_table

    at = open_app(monkeypatch, REPO / "cached_results", "efficiency", {"suite": "vision"})
    label = "What each row chose (on validation) and how long its runs trained"
    assert any(e.label == label for e in at.expander)
    assert not any("negation α per target" in t.value.columns for t in at.table)  # closed: not built
    at.session_state["eff.choices"] = True  # open it (a rerun)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    shown = next(t.value for t in at.table if "negation α per target" in t.value.columns)
    expected = choices_table(REPO / "cached_results", "vision").set_index("method")
    assert shown.equals(expected)
    assert shown.loc["talos", "lr"] == "0.001"


def test_normalized_accuracy_above_100_is_never_best():
    import pandas as pd

    from dashboard.figures import best_per_column

    df = pd.DataFrame({"method": ["iso_c", "talos"], "addition_norm": [1.15, 0.9]})
    assert best_per_column(df)["addition_norm"] == 1


def test_a_flagged_number_is_never_highlighted_as_best(monkeypatch):
    import pandas as pd

    from dashboard.figures import best_per_column, header

    at = open_app(monkeypatch, REPO / "cached_results", "efficiency", {"suite": "vision"})
    shown = _comparison_frame(at)
    assert "⚑" in shown.set_index("Method").loc["TaLoS", header("negation_target")]
    df = pd.DataFrame({"method": ["talos", "nonlinear"], "negation_target": [0.155, 0.21]})
    assert best_per_column(df)["negation_target"] == 0
    assert best_per_column(df, {("talos", "negation_target")})["negation_target"] == 1  # excluded: passed on
    assert "negation_target" not in best_per_column(df, (), {("talos", "negation_target")})  # vetoed: no best
    norm = pd.DataFrame({"method": ["talos", "tall_consensus"], "addition_norm": [0.953, 0.90]})
    assert best_per_column(norm, {("talos", "addition_norm")})["addition_norm"] == 1


def test_the_exact_model_unavailable_is_said_once_per_edit(monkeypatch):
    """Between stored α's on the shipped store (manifests only), the negation galleries of target and control are both
    first-order for the same edit: the reason the exact model cannot be evaluated is one sentence, not two."""
    at = open_app(monkeypatch, REPO / "cached_results", "arithmetic",
                  {"suite": "vision", "method": "talos", "n.talos.mnist": "1.02", "tab": "Negation"})
    assert any("first-order model at α = 1.02" in m.value for m in at.markdown)  # both galleries, one edit
    said = [c.value for c in at.caption if "cannot be evaluated here" in c.value]
    assert len(said) == 1, said
