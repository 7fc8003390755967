"""The method comparison table as a person reads it (headers with units, 95 % intervals, the bests those intervals
separate) and the paper's published numbers, labelled as such.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from dashboard.figures_core import SINGLE_TASK_COLOR, _fmt, _title, make_figure, method_color
from dashboard.plain import plain_figure
from talos_core.schema import method_label

COMPARISON_HIGHER_BETTER = {"addition_abs", "addition_norm", "negation_control", "single_task_acc",
                            "zero_shot_acc"}
COMPARISON_LOWER_BETTER = {"negation_target", "time_per_step_s", "peak_memory_mb"}


#: the comparison table's columns as a person reads them (units in the header, numbers alone in the cells)
COMPARISON_HEADERS = {
    "store": "Store", "name": "Method", "addition_abs": "Addition: absolute accuracy (%)",
    "addition_norm": "Addition: normalized accuracy (%)", "negation_target": "Negation: target accuracy (%, ↓)",
    "negation_control": "Negation: control accuracy (%)", "single_task_acc": "Single-task accuracy (%)",
    "zero_shot_acc": "Zero-shot accuracy (%)", "time_per_step_s": "Time per step (ms)",
    "peak_memory_mb": "Peak memory (MB)", "sparsity": "Sparsity (fraction frozen)"}


def header(col: str) -> str:
    """A table column as a person reads it: :data:`COMPARISON_HEADERS`, else the id with spaces (``snake_case``
    never reaches the page).

    >>> header("addition_abs"), header("time_per_step_s"), header("some_new_column")
    ('Addition: absolute accuracy (%)', 'Time per step (ms)', 'Some new column')
    """
    return COMPARISON_HEADERS.get(col) or col.replace("_", " ").strip().capitalize()


def best_per_column(df: pd.DataFrame, exclude: Iterable[tuple[str, str]] = (),
                    veto: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
    """Index label of the best row per comparison column (max for accuracies, min for costs and the
    negation target accuracy). Columns with no finite value are skipped; normalized accuracy above 100 % and the
    ``(method, column)`` cells of ``exclude`` are never best; a column whose best is a cell of ``veto`` (a number the
    audit flags) has no best.

    >>> best_per_column(pd.DataFrame({"addition_abs": [0.5, 0.7], "peak_memory_mb": [10, 5]}))
    {'addition_abs': 1, 'peak_memory_mb': 1}
    """
    out: dict[str, Any] = {}
    excluded, vetoed = set(exclude), set(veto)
    for col in df.columns:
        if col not in COMPARISON_HIGHER_BETTER | COMPARISON_LOWER_BETTER:
            continue
        s = pd.to_numeric(df[col], errors="coerce")
        if col == "addition_norm":  # above 100 % it says the method's own single-task models are weak
            s = s.where(s <= 1.0)
        if excluded and "method" in df.columns:
            s = s.where([(str(m), col) not in excluded for m in df["method"]])
        if s.notna().any():
            best = s.idxmax() if col in COMPARISON_HIGHER_BETTER else s.idxmin()
            if "method" in df.columns and (str(df.at[best, "method"]), col) in vetoed:
                continue
            out[col] = best
    return out


def separated_best(df: pd.DataFrame, exclude: Iterable[tuple[str, str]] = (),
                   veto: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
    """The best row per column (:func:`best_per_column`, with its ``exclude`` and ``veto`` cells: numbers the audit
    flags) only where the 95 % intervals separate it from every other competing row: its interval lies wholly above
    (below, for lower-is-better columns) every other row's. A column without intervals (time, memory, a store
    written before them) or a row without one cannot be told apart: no best.

    >>> df = pd.DataFrame({"addition_abs": [0.8209, 0.8208, 0.5], "addition_abs_lo": [0.80, 0.79, 0.45],
    ...                    "addition_abs_hi": [0.84, 0.85, 0.55], "addition_norm": [0.9, 0.6, 0.5],
    ...                    "addition_norm_lo": [0.88, 0.55, 0.45], "addition_norm_hi": [0.92, 0.65, 0.55]})
    >>> separated_best(df)
    {'addition_norm': 0}
    """
    out: dict[str, Any] = {}
    excluded = set(exclude)
    methods = [str(m) for m in df["method"]] if "method" in df.columns else [None] * len(df)
    for col, best in best_per_column(df, excluded, veto).items():
        iv = interval_of(df, col)
        if iv is None:
            continue
        lo, hi = iv
        values = pd.to_numeric(df[col], errors="coerce")
        out_of_race = {i for i, m in zip(df.index, methods) if (m, col) in excluded
                       or (col == "addition_norm" and values[i] > 1.0)}
        others = [i for i in df.index if i != best and pd.notna(values[i]) and i not in out_of_race]
        if not others or pd.isna(lo[best]) or pd.isna(hi[best]):
            continue
        if col in COMPARISON_HIGHER_BETTER:
            apart = all(pd.notna(hi[i]) and hi[i] < lo[best] for i in others)
        else:
            apart = all(pd.notna(lo[i]) and lo[i] > hi[best] for i in others)
        if apart:
            out[col] = best
    return out


INTERVAL_SUFFIXES = ("_lo", "_hi")


def interval_of(df: pd.DataFrame, col: str) -> tuple[pd.Series, pd.Series] | None:
    """The ``<col>_lo``, ``<col>_hi`` columns (numeric) of a mean column, or ``None`` when the table has
    none (stores written before intervals existed)."""
    lo, hi = (f"{col}{sfx}" for sfx in INTERVAL_SUFFIXES)
    if lo not in df.columns or hi not in df.columns:
        return None
    return pd.to_numeric(df[lo], errors="coerce"), pd.to_numeric(df[hi], errors="coerce")


def has_intervals(df: pd.DataFrame) -> bool:
    """Whether any mean of the table has a (finite) 95% interval beside it."""
    return any(iv is not None and (iv[0].notna() & iv[1].notna()).any()
               for iv in (interval_of(df, c) for c in df.columns))


def _is_accuracy(col: str) -> bool:
    return col in COMPARISON_HIGHER_BETTER or col == "negation_target" or col.endswith(("_acc", "_norm", "_abs"))


def comparison_cells(df: pd.DataFrame, *, labels: bool = False, units: bool = True) -> pd.DataFrame:
    """The comparison table as display strings (pure), column ids kept: accuracies as percentages with their 95%
    bootstrap interval over test examples beside them where the table has one (``45.00% [41.2, 48.9]``), seconds in
    ms, memory in MB; the ``_lo``/``_hi`` columns folded into their means. ``labels``: a first column ``name`` with
    each method's readable label (:func:`~talos_core.schema.method_label`, variant rows such as ``talos-k0.9`` as
    ``TaLoS (k = 0.9)``). ``units=False``: the numbers without their unit (the header names it:
    :func:`comparison_table`).

    >>> comparison_cells(pd.DataFrame({"method": ["talos"], "addition_abs": [0.45],
    ...                                "addition_abs_lo": [0.412], "addition_abs_hi": [0.489]})).iloc[0].tolist()
    ['talos', '45.00% [41.2, 48.9]']
    """
    pct, ms, mb = ("%", " ms", " MB") if units else ("", "", "")
    folded = {f"{c}{sfx}" for c in df.columns if interval_of(df, c) is not None for sfx in INTERVAL_SUFFIXES}
    out = pd.DataFrame(index=df.index)
    if labels and "method" in df.columns:
        out["name"] = [method_label(str(m)) for m in df["method"]]
    for col in df.columns:
        if col in folded:
            continue
        values = df[col]
        if _is_accuracy(col):
            num = pd.to_numeric(values, errors="coerce")
            iv = interval_of(df, col)
            cells = []
            for i, v in zip(df.index, num):
                text = "—" if pd.isna(v) else f"{100 * v:.2f}{pct}"
                if iv is not None and not pd.isna(v) and not (pd.isna(iv[0][i]) or pd.isna(iv[1][i])):
                    text += f" [{100 * iv[0][i]:.1f}, {100 * iv[1][i]:.1f}]"
                cells.append(text)
            out[col] = cells
        elif col == "time_per_step_s":
            out[col] = ["—" if pd.isna(v) else f"{1000 * v:.1f}{ms}" for v in pd.to_numeric(values, errors="coerce")]
        elif col == "peak_memory_mb":
            out[col] = ["—" if pd.isna(v) else f"{v:.0f}{mb}" for v in pd.to_numeric(values, errors="coerce")]
        else:
            out[col] = values
    return out


BEST_STYLE = "font-weight: bold; background-color: #d9f0d3"


@dataclass(frozen=True)
class ComparisonTable:
    """The method comparison table as the Efficiency page shows it: ``cells`` (display strings under the headers a
    person reads, :func:`header`; one row per method, named by its catalogue label), ``best`` (header → row
    position of a best the 95 % intervals separate, :func:`separated_best`) and the table it was built from."""

    cells: pd.DataFrame
    best: dict[str, int]
    raw: pd.DataFrame

    def styler(self):
        """The cells as a pandas ``Styler`` (the separated bests bold on green; no index column)."""
        def _highlight(col: pd.Series) -> list[str]:
            return [BEST_STYLE if self.best.get(col.name) == pos else "" for pos in range(len(col))]

        return self.cells.style.apply(_highlight, axis=0).hide(axis="index")


def comparison_table(df: pd.DataFrame, *, badges: Mapping[tuple[str, str], str] | None = None,
                     not_best: tuple[Iterable[tuple[str, str]], Iterable[tuple[str, str]]] = ((), ())
                     ) -> ComparisonTable:
    """The one builder of the displayed comparison table (:class:`ComparisonTable`): method labels instead of
    ids, headers with units, numbers with their 95 % interval, and the bests the intervals separate. ``badges``:
    ``{(method, column): text}`` appended to those cells (the audit's ⚑ footnote numbers,
    :func:`dashboard.audit_view.cell_badges`); ``not_best``: the ``(exclude, veto)`` cells of
    :func:`best_per_column` (:func:`dashboard.audit_view.not_best`)."""
    cells = comparison_cells(df, labels=True, units=False)
    if badges and "method" in df.columns:
        from dashboard.audit_view import badge_table

        cells = badge_table(cells, [str(m) for m in df["method"]], badges)
    if "name" in cells.columns:
        cells = cells.drop(columns=["method"])
    first = [c for c in ("store", "name") if c in cells.columns]
    cells = cells[first + [c for c in cells.columns if c not in first]]
    positions = {idx: pos for pos, idx in enumerate(df.index)}
    best = {header(col): positions[idx] for col, idx in separated_best(df, *not_best).items()}
    return ComparisonTable(cells.rename(columns=header).reset_index(drop=True), best, df)


# --------------------------------------------------------------------------------------------
# published numbers (paper, not measured here)
# --------------------------------------------------------------------------------------------
#: Task addition, ViT-B/32, 8 vision tasks — absolute / normalized accuracy (%), paper Table 1.
PUBLISHED_ADDITION_VITB32: dict[str, tuple[float | None, float | None]] = {
    "zero-shot": (47.72, None),
    "nonlinear": (71.25, 76.94),
    "linearized": (76.70, 85.86),
    "ties": (74.79, 82.84),
    "tall_consensus": (74.55, 80.27),
    "dare": (70.88, 76.59),
    "breadcrumbs": (69.39, 79.51),
    "llora": (78.00, 86.08),
    "lota": (64.94, 74.37),
    "talos": (79.67, 90.73),
}
PUBLISHED_SOURCE = "published: TaLoS paper (ICLR 2025), Table 1, ViT-B/32, 8 tasks"


def published_addition_table() -> pd.DataFrame:
    """Paper Table 1 (ViT-B/32 task addition) as fractions, with a ``source`` column saying "published".

    >>> float(published_addition_table().set_index("method").loc["talos", "addition_abs"])
    0.7967
    """
    rows = [{"method": m, "addition_abs": a / 100.0, "addition_norm": None if n is None else n / 100.0,
             "source": PUBLISHED_SOURCE} for m, (a, n) in PUBLISHED_ADDITION_VITB32.items()]
    return pd.DataFrame(rows)


@plain_figure
def published_addition_bars(*, title: str = "PUBLISHED (paper Table 1, ViT-B/32) — not measured here") -> go.Figure:
    """Bars of the paper's published ViT-B/32 task-addition accuracies, clearly titled "published"."""
    t = published_addition_table()
    x = [method_label(m) for m in t["method"]]
    norm = [float("nan") if v is None or pd.isna(v) else float(v) for v in t["addition_norm"]]
    traces = [
        {"type": "bar", "x": x, "y": t["addition_abs"].tolist(), "name": "published absolute",
         "marker": {"color": [method_color(m) for m in t["method"]]}, "opacity": 0.55,
         "text": [_fmt(v) for v in t["addition_abs"]], "textposition": "outside"},
        {"type": "scatter", "x": x, "y": norm, "mode": "markers", "name": "published normalized",
         "marker": {"symbol": "diamond", "size": 10, "color": SINGLE_TASK_COLOR}},
    ]
    return make_figure(traces, title, height=360,
                       annotations=[{"text": "published numbers, copied from the paper", "xref": "paper",
                                     "yref": "paper", "x": 1, "y": 1.0, "showarrow": False,
                                     "font": {"color": "#666", "size": 11}, "xanchor": "right",
                                     "yanchor": "bottom"}],
                       yaxis={"range": [0, 1.05], "title": _title("accuracy (published)")},
                       xaxis={"type": "category"})
