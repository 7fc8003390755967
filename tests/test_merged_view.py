"""Shipped and user results side by side: the "All stores side by side" view (``?store=all``) lists every
store's suites labelled by origin, and where two stores hold the same suite and model the comparison tables show
both sets of rows with a ``store`` column. Pure functions without Streamlit, then the app through AppTest."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from dashboard_fixtures import REPO
from streamlit.testing.v1 import AppTest

from dashboard import merged as M
from dashboard.access import ServerConfig, StoreChoice

APP = str(REPO / "dashboard" / "app.py")
SHIPPED = REPO / "cached_results"
SERVER_ENV = ("TALOS_STORE", "TALOS_DASHBOARD_ROOTS", "TALOS_DASHBOARD_READ_ONLY")


# --------------------------------------------------------------------------------------------
# pure functions
# --------------------------------------------------------------------------------------------
def test_suite_entries_are_labelled_by_origin_in_store_order():
    shipped, mine = StoreChoice(Path("/s/cached_results"), "shipped"), StoreChoice(Path("/home/u/runs"), "user")
    a, b = StoreChoice(Path("/r1/lab"), "extra", Path("/r1")), StoreChoice(Path("/r2/lab"), "extra", Path("/r2"))
    suites = {shipped.path: ["vision", "tiny"], mine.path: ["tiny"], a.path: ["x"], b.path: ["x"]}
    entries = M.suite_entries([shipped, mine, a, b], lambda p: suites[p])
    assert [e.label for e in entries] == ["tiny · shipped", "vision · shipped", "tiny · yours", "x · r1/lab",
                                          "x · r2/lab"], "same-named folders under two roots stay apart"
    assert M.entry_by_label(entries, "tiny · yours").store == mine
    assert M.entry_by_label(entries, "tiny") is None
    have = {(shipped.path, "tiny", "m"), (mine.path, "tiny", "m")}
    assert M.stores_with([shipped, mine, a], "tiny", "m", lambda p, s, m: (p, s, m) in have) == [shipped, mine]


def test_merge_tables_labels_rows_and_keeps_the_union_of_columns():
    out = M.merge_tables({"shipped": pd.DataFrame({"method": ["talos", "lota"], "acc": [0.5, 0.4]}),
                          "yours": pd.DataFrame({"method": ["talos"], "acc": [0.7], "extra": [1.0]}),
                          "empty": pd.DataFrame(), "missing": None})
    assert out.columns.tolist() == ["store", "method", "acc", "extra"]
    assert out["store"].tolist() == ["shipped", "shipped", "yours"] and out["acc"].tolist() == [0.5, 0.4, 0.7]
    assert out["extra"].isna().tolist() == [True, True, False]
    assert M.merge_tables({"a": None}) is None


def test_arithmetic_rows():
    class Add:
        selected_alpha, summary = 0.3, {"abs_acc": 0.5, "norm_acc": 0.9}

    class Neg:
        selected, summary = {"digits": 1.0}, {"target_acc": 0.1, "control_acc": 0.8}

    add = M.arithmetic_rows("addition", {"shipped": Add(), "yours": Add()}, "talos")
    assert add.columns[0] == "store" and add["test normalized accuracy"].tolist() == [0.9, 0.9]
    neg = M.arithmetic_rows("negation", {"yours": Neg()}, "talos")
    assert neg.iloc[0].tolist() == ["yours", "talos", "digits 1", 0.1, 0.8]


# --------------------------------------------------------------------------------------------
# the app
# --------------------------------------------------------------------------------------------
def my_tiny_store(dest: Path) -> Path:
    """A user's store holding the shipped ``tiny`` suite for ``tiny-text`` again (as after `talos suite tiny`), with
    different numbers in its comparison table and addition summary, plus nothing else."""
    for path in (SHIPPED / "results").rglob("*"):
        if path.is_file() and (path.name.startswith("tiny__tiny-text") or path.name == "tiny.json"):
            target = dest / "results" / path.relative_to(SHIPPED / "results")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
    comp = dest / "results" / "comparison" / "tiny__tiny-text.json"
    rec = json.loads(comp.read_text())
    for r in rec["records"]:  # with an interval that fits (a mean outside its own interval is refused as damaged)
        r.update(addition_abs=0.99, addition_abs_lo=0.98, addition_abs_hi=1.0)
    comp.write_text(json.dumps(rec))
    add = dest / "results" / "addition" / "tiny__tiny-text__talos.json"
    rec = json.loads(add.read_text())
    rec["summary"]["abs_acc"] = 0.99
    rec.get("ci95", {})["abs_acc"] = [0.98, 1.0]
    add.write_text(json.dumps(rec))
    return dest


def open_app(monkeypatch, cwd: Path, page: str | None, query: dict, env: dict | None = None) -> AppTest:
    """The app as `talos dashboard` started in ``cwd`` without --store (the user's store is ``cwd/runs``)."""
    monkeypatch.chdir(cwd)
    for var in SERVER_ENV:
        monkeypatch.delenv(var, raising=False)
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, str(v))
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    if page:
        at.switch_page(f"app_pages/{page}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture()
def workshop(tmp_path):
    if not (SHIPPED / "results" / "suite" / "tiny.json").exists():
        pytest.skip("needs the shipped cached_results")
    my_tiny_store(tmp_path / "runs")
    return tmp_path


def test_all_stores_is_the_default_and_lists_every_suite_by_origin(monkeypatch, workshop):
    at = open_app(monkeypatch, workshop, None, {})
    store = at.selectbox(key="store")
    assert store.value == M.ALL_STORES and store.options[-1] == M.ALL_STORES_LABEL
    suites = at.selectbox(key="suite").options
    assert {"tiny · shipped", "vision · shipped", "text · shipped", "tiny · yours"} <= set(suites)
    assert not at.error
    assert ServerConfig.from_env({}).writable_store().resolve() == (workshop / "runs").resolve(), \
        "the Run page still writes into the user's store"


def test_a_named_store_is_still_shown_alone(monkeypatch, workshop):
    at = open_app(monkeypatch, workshop, None, {}, env={"TALOS_STORE": workshop / "runs"})
    assert at.selectbox(key="store").value == str(workshop / "runs"), "--store keeps its store first"
    suites = at.selectbox(key="suite").options  # the only suite, shown as what it is
    assert len(suites) == 1 and suites[0].startswith("tiny — smoke test")
    at = open_app(monkeypatch, workshop, None, {"store": "all"}, env={"TALOS_STORE": workshop / "runs"})
    assert at.selectbox(key="store").value == M.ALL_STORES, "the link ?store=all opens the side-by-side view"


def test_same_suite_in_two_stores_shows_both_sets_of_rows(monkeypatch, workshop):
    query = {"store": "all", "suite": "tiny · yours", "model": "tiny-text"}
    at = open_app(monkeypatch, workshop, "efficiency", query)
    tables = [t.value for t in at.table if "Store" in getattr(t.value, "columns", [])]
    assert tables, "the comparison table has a store column"
    comp = tables[0]
    abs_ = "Addition: absolute accuracy (%)"
    assert set(comp["Store"]) == {"yours", "shipped"}
    mine = comp[comp["Store"] == "yours"]
    assert all(v.startswith("99.00") for v in mine[abs_]), mine
    assert not any(str(v).startswith("99.00") for v in comp[comp["Store"] == "shipped"][abs_])
    assert any("Also in shipped" in c.value for c in at.sidebar.caption)

    at = open_app(monkeypatch, workshop, "arithmetic", {**query, "method": "talos"})
    across = [t.value for t in at.dataframe if "store" in getattr(t.value, "columns", [])]
    assert across and across[0]["store"].tolist() == ["yours", "shipped"]
    assert across[0]["test abs. accuracy"].tolist()[0] == 0.99


def test_a_suite_in_one_store_only_has_no_store_column(monkeypatch, workshop):
    at = open_app(monkeypatch, workshop, "efficiency", {"store": "all", "suite": "vision · shipped"})
    assert not [t for t in at.table if "Store" in getattr(t.value, "columns", [])]
    assert any(t.value is not None for t in at.table), "the shipped comparison table is shown as before"


def test_read_only_side_by_side_has_no_run_page_and_refuses_other_folders(monkeypatch, workshop, tmp_path):
    at = open_app(monkeypatch, workshop, None, {}, env={"TALOS_DASHBOARD_READ_ONLY": "1"})
    assert at.selectbox(key="store").value == M.ALL_STORES
    assert "tiny · yours" in at.selectbox(key="suite").options
    with pytest.raises(Exception, match="read-only"):
        ServerConfig.from_env({"TALOS_DASHBOARD_READ_ONLY": "1"}).writable_store()
    outside = tmp_path / "outside"
    my_tiny_store(outside)
    at = open_app(monkeypatch, workshop, None, {"store": str(outside)})
    assert any("is not one this dashboard serves" in e.value for e in at.error)
    assert [w.key for w in at.selectbox] == ["store"], "nothing of the refused folder is read"


def test_a_side_by_side_link_on_a_server_with_one_store_shows_that_store(monkeypatch, tmp_path):
    """``?store=all`` shared by an instructor, opened where only the shipped store holds results: the shipped
    store, not a refusal."""
    if not (SHIPPED / "results" / "suite" / "tiny.json").exists():
        pytest.skip("needs the shipped cached_results")
    at = open_app(monkeypatch, tmp_path, None, {"store": "all"})
    assert M.ALL_STORES not in at.selectbox(key="store").options
    assert at.selectbox(key="store").value == ServerConfig.from_env({}).default_choice().key
    assert not at.error and at.query_params["store"] != [M.ALL_STORES]
