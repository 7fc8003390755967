"""The lr check on the dashboard: the loader, the pure table and sentence on hand-made results with
known answers, and the Efficiency page (AppTest) with and without lr_check results."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pandas as pd
import pytest
from dashboard_fixtures import MODEL, SUITE, TASKS
from test_dashboard import open_app

from dashboard import data as D
from dashboard.protocol import LR_CHECK_COLUMNS, lr_check_sentence, lr_check_table
from talos_core.schema import CorruptResult
from talos_core.store import Store

EVIL = "![x](http://example.invalid/leak.png) <b>bold</b>"


def _name(*parts: str) -> str:
    return "__".join([SUITE, MODEL, *parts])


def write_lr_checks(root, rule: str = "highest mean validation accuracy") -> Store:
    """TaLoS (its k = 0.9 row) agrees at 1e-3; Non-linear FT disagrees: 1e-3 beats its own 1e-4."""
    store = Store(root)
    for method, row, suite_lr, accs in (
            ("talos", "talos-k0.9", 1e-3, {1e-4: (0.60, 0.70), 1e-3: (0.72, 0.70)}),
            ("nonlinear", "nonlinear", 1e-4, {1e-4: (0.50, 0.60), 1e-3: (0.70, 0.80)})):
        rows = [{"task": t, "lr": lr, "val_acc": a, "run_id": f"run-{method}-{t}-{lr:g}", "steps": 300}
                for lr, pair in accs.items() for t, a in zip(TASKS[:2], pair)]
        means = [{"lr": lr, "val_acc": sum(pair) / 2} for lr, pair in accs.items()]
        best = max(means, key=lambda m: m["val_acc"])["lr"]
        store.write_table("lr_check", _name(method), pd.DataFrame(rows), suite_lr=suite_lr, best_lr=best,
                          agrees=best == suite_lr, means=means, rule=rule, budget=300, values=list(accs),
                          tasks=list(TASKS[:2]), row=row, method=method, model=MODEL, suite=SUITE)
    return store


# --------------------------------------------------------------------------------------------
# loader and pure functions
# --------------------------------------------------------------------------------------------
def test_loader_table_and_sentence(tmp_path):
    write_lr_checks(tmp_path)
    talos = D.load_lr_check(tmp_path, _name("talos"))
    assert talos.method == "talos" and talos.row == "talos-k0.9" and talos.agrees and talos.budget == 300
    assert talos.means == pytest.approx({1e-4: 0.65, 1e-3: 0.71}) and talos.tasks == list(TASKS[:2])
    nonlinear = D.get("lr_check", tmp_path, _name("nonlinear"))
    table = lr_check_table([nonlinear, talos])  # catalogue order: TaLoS first
    assert list(table.columns) == LR_CHECK_COLUMNS
    assert table.to_dict(orient="records") == [
        {"method": "TaLoS (k = 0.9)", "budget (steps)": "300", "tasks": ", ".join(TASKS[:2]), "suite lr": "1e-3",
         "mean val acc at the suite lr": "0.710", "other lrs: mean val acc": "1e-4: 0.650", "best lr": "1e-3",
         "verdict": "agrees"},
        {"method": "Non-linear FT", "budget (steps)": "300", "tasks": ", ".join(TASKS[:2]), "suite lr": "1e-4",
         "mean val acc at the suite lr": "0.550", "other lrs: mean val acc": "1e-3: 0.750", "best lr": "1e-3",
         "verdict": "disagrees"}]
    text = lr_check_sentence([talos, nonlinear])
    assert "for 1 of 2 methods" in text and "**Rule**: highest mean validation accuracy." in text
    assert lr_check_table([]).empty


def test_sentence_escapes_store_text():
    text = lr_check_sentence([SimpleNamespace(agrees=True, rule=EVIL)])
    assert "![x](http://" not in text and "<b>" not in text and "!\\[x\\]" in text


def test_loader_refuses_a_malformed_result(tmp_path):
    store = write_lr_checks(tmp_path)
    payload = store.read_result("lr_check", _name("talos"))
    store.write_result("lr_check", _name("talos"), {**payload, "means": []})
    with pytest.raises(CorruptResult, match="no mean per learning rate"):
        D.load_lr_check(tmp_path, _name("talos"))
    store.write_result("lr_check", _name("talos"), {**payload, "suite_lr": "fast"})
    with pytest.raises(CorruptResult, match=r"suite_lr = .fast., which must be a finite number"):
        D.load_lr_check(tmp_path, _name("talos"))
    store.write_result("lr_check", _name("talos"), {k: v for k, v in payload.items() if k != "agrees"})
    with pytest.raises(CorruptResult, match="agrees"):
        D.load_lr_check(tmp_path, _name("talos"))


# --------------------------------------------------------------------------------------------
# the Efficiency page
# --------------------------------------------------------------------------------------------
def _check_tables(at):
    return [d.value for d in at.dataframe if "verdict" in d.value.columns]


def test_efficiency_page_shows_the_lr_check(monkeypatch, fixture_store, tmp_path):
    root = shutil.copytree(fixture_store, tmp_path / "store")
    write_lr_checks(root, rule=EVIL)
    at = open_app(monkeypatch, root, "efficiency")
    tables = _check_tables(at)
    assert len(tables) == 1
    assert tables[0]["method"].tolist() == ["TaLoS (k = 0.9)", "Non-linear FT"]
    assert tables[0]["verdict"].tolist() == ["agrees", "disagrees"]
    md = "\n".join(m.value for m in at.markdown)
    assert "**Learning rate re-checked at the budget**" in md and "for 1 of 2 methods" in md
    assert "![x](http://" not in md and "<b>" not in md and "!\\[x\\]" in md  # the stored rule: plain text


def test_efficiency_page_without_lr_check_shows_nothing_new(monkeypatch, fixture_store, tmp_path):
    root = shutil.copytree(fixture_store, tmp_path / "store")
    shutil.rmtree(root / "results" / "lr_check")  # a store written before the check (the shipped one today)
    at = open_app(monkeypatch, root, "efficiency")
    assert not _check_tables(at)
    assert not any("re-checked" in m.value for m in at.markdown)


def test_efficiency_page_with_a_broken_lr_check_says_so(monkeypatch, fixture_store, tmp_path):
    root = shutil.copytree(fixture_store, tmp_path / "store")
    store = write_lr_checks(root)
    payload = store.read_result("lr_check", _name("nonlinear"))
    store.write_result("lr_check", _name("nonlinear"), {**payload, "means": []})
    at = open_app(monkeypatch, root, "efficiency")
    assert any("no mean per learning rate" in e.value for e in at.error)
    assert _check_tables(at)[0]["method"].tolist() == ["TaLoS (k = 0.9)"]  # the good one is still shown
