"""Shipped and user results side by side: one view over every store the server serves.

The sidebar's store picker has one more choice, **"All stores side by side"** (``?store=all``), the default when
the server was started without ``--store`` and more than one of its stores holds results (e.g. the shipped results
and the results the Run page wrote into your own store). In that view:

* the **suite picker** lists the suites of every store, labelled by where they come from:
  ``vision · shipped``, ``tiny · yours`` (and ``<folder> · <name>`` for stores under ``--store-root``); picking one
  shows that store's results on every page, exactly as when that store is picked alone;
* where **another store holds the same suite and model** (you re-ran the shipped ``tiny`` suite), the comparison
  tables (Efficiency's method comparison, Arithmetic's addition/negation at the selected α) show the rows of
  both, with a ``store`` column saying which is which.

Only the server's stores take part (:meth:`dashboard.access.ServerConfig.stores`: the allowed roots); nothing here
writes; the Run page still writes into your own store only. Pure functions (no Streamlit), tested without a server.

    >>> from dashboard.access import StoreChoice
    >>> e = SuiteEntry(StoreChoice(Path("/x/cached_results"), "shipped"), "vision")
    >>> e.label
    'vision · shipped'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dashboard.access import StoreChoice

#: the ``?store=`` value of the merged view
ALL_STORES = "all"
ALL_STORES_LABEL = "All stores side by side (shipped + yours)"
#: the column naming each row's store in a merged table
ORIGIN_COLUMN = "store"


def origin(choice: StoreChoice) -> str:
    """How a row or a suite says where it comes from: ``shipped``, ``yours``, or the folder's name."""
    return {"shipped": "shipped", "user": "yours"}.get(choice.kind, choice.path.name)


def origins(stores: Sequence[StoreChoice]) -> dict[Path, str]:
    """Each store's :func:`origin`, unique: same-named folders under different roots get ``parent/name``, and
    still-equal labels their full path."""
    out = {c.path: origin(c) for c in stores}
    for fallback in (lambda c: f"{c.path.parent.name}/{c.path.name}", lambda c: str(c.path)):
        labels = list(out.values())
        out = {c.path: (fallback(c) if labels.count(out[c.path]) > 1 else out[c.path]) for c in stores}
    return out


@dataclass(frozen=True)
class SuiteEntry:
    """One suite of one store in the merged suite picker."""

    store: StoreChoice
    suite: str
    origin: str = ""

    def __post_init__(self) -> None:
        if not self.origin:
            object.__setattr__(self, "origin", origin(self.store))

    @property
    def label(self) -> str:
        """What the picker shows and the URL keeps (``?suite=vision · shipped``)."""
        return f"{self.suite} · {self.origin}"


def suite_entries(stores: Sequence[StoreChoice], suites_of: Callable[[Path], Sequence[str]]) -> list[SuiteEntry]:
    """Every store's suites, in store order (shipped, yours, extra roots), suites sorted within a store;
    ``suites_of(path)`` lists a store's suites (empty for a store without results or a broken one)."""
    names = origins(stores)
    return [SuiteEntry(c, s, names[c.path]) for c in stores for s in sorted(suites_of(c.path))]


def entry_by_label(entries: Sequence[SuiteEntry], label: str | None) -> SuiteEntry | None:
    for e in entries:
        if e.label == label:
            return e
    return None


def stores_with(stores: Sequence[StoreChoice], suite: str, model: str,
                has: Callable[[Path, str, str], bool]) -> list[StoreChoice]:
    """The stores (in order) holding results of ``suite`` for ``model``: ``has(path, suite, model)``."""
    return [c for c in stores if has(c.path, suite, model)]


def merge_tables(tables: Mapping[str, pd.DataFrame | None], *, column: str = ORIGIN_COLUMN) -> pd.DataFrame | None:
    """The rows of each store's table, one after the other, with a first column ``column`` naming the store
    (``tables``: origin label → table, in display order; ``None`` or empty tables are left out). ``None`` when no
    table has rows. Columns are the union (a store written before a column existed gets empty cells there).

    >>> merge_tables({"shipped": pd.DataFrame({"method": ["talos"], "acc": [0.5]}),
    ...               "yours": pd.DataFrame({"method": ["talos"], "acc": [0.7]})}).values.tolist()
    [['shipped', 'talos', 0.5], ['yours', 'talos', 0.7]]
    """
    parts = []
    for name, table in tables.items():
        if table is None or table.empty:
            continue
        part = table.drop(columns=[column], errors="ignore").reset_index(drop=True)
        part.insert(0, column, name)
        parts.append(part)
    if not parts:
        return None
    return pd.concat(parts, ignore_index=True, sort=False)


def _pct(summary: Mapping, key: str) -> float:
    try:
        return float(summary.get(key))
    except (TypeError, ValueError):
        return float("nan")


def arithmetic_rows(kind: str, results: Mapping[str, object], method: str) -> pd.DataFrame | None:
    """The Arithmetic page's across-stores table: for each store's ``addition`` (or ``negation``) result of
    ``method`` (origin → :class:`dashboard.data.Addition` / ``Negation``), the selected α and the test
    summary at it (abs./normalized accuracy; target/control accuracy). ``None`` without results."""
    rows = []
    for name, res in results.items():
        summary = getattr(res, "summary", None) or {}
        if kind == "addition":
            rows.append({"method": method, "selected α": getattr(res, "selected_alpha", float("nan")),
                         "test abs. accuracy": _pct(summary, "abs_acc"),
                         "test normalized accuracy": _pct(summary, "norm_acc"), ORIGIN_COLUMN: name})
        else:
            selected = getattr(res, "selected", {}) or {}
            rows.append({"method": method, "selected α": ", ".join(f"{t} {a:g}" for t, a in selected.items()),
                         "test target accuracy": _pct(summary, "target_acc"),
                         "test control accuracy": _pct(summary, "control_acc"), ORIGIN_COLUMN: name})
    return merge_tables({r[ORIGIN_COLUMN]: pd.DataFrame([r]) for r in rows})
