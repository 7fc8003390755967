"""The audit on the dashboard (pure; no Streamlit): which cells of the comparison table carry a flag, the badge text
beside each flagged number, and the panel's rows. The flags come from :mod:`talos_core.evaluation.audit`.

A badge is ``⚑`` followed by the footnote numbers of the flags on that number — the same numbering as the footnotes
``talos report`` and docs/results.md print (one footnote per row and check, row by row in the table's order).

>>> from talos_core.evaluation.audit import Flag
>>> f = Flag("norm-above-100", "s", "iso_c", ("addition_norm",), "addition/x", "normalized accuracy 115.0 %")
>>> cell_badges([f], ["talos", "iso_c"], ["addition_abs", "addition_norm"])
{('iso_c', 'addition_norm'): '⚑1'}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from talos_core.evaluation.audit import ALL, Flag, check_info, footnote_keys

BADGE = "⚑"

#: the comparison table's columns a flag can concern (costs and zero-shot are measured, not selected)
AUDITED_COLUMNS = ("addition_abs", "addition_norm", "negation_target", "negation_control", "single_task_acc",
                   "time_per_step_s", "peak_memory_mb")
#: columns a run-level flag (every number of the row, ALL) does not reach: how long a step took, or how much memory
#: it held, does not depend on how well the run trained; only a flag naming the column (``timing-disturbed``,
#: ``timing-other-machine``) marks it
COST_COLUMNS = ("time_per_step_s", "peak_memory_mb")


def _numbers(flags: Sequence[Flag], rows: Sequence[str]) -> dict[tuple[str, str], int]:
    """``{(row, check): footnote number}``, numbered as ``talos report``'s footnotes."""
    return {key: i for i, key in enumerate(footnote_keys(flags, rows), start=1)}


def cell_badges(flags: Sequence[Flag], rows: Sequence[str], columns: Sequence[str]) -> dict[tuple[str, str], str]:
    """``{(row, column): "⚑1,4"}`` for every flagged number of the table (rows × columns); suite-wide flags mark
    every row."""
    numbers = _numbers(flags, rows)
    out: dict[tuple[str, str], list[int]] = {}
    for f in flags:
        targets = rows if f.row is None else [f.row]
        cols = [c for c in columns if (ALL in f.metrics and c not in COST_COLUMNS) or c in f.metrics]
        for row in targets:
            if row not in rows:
                continue
            for col in cols:
                n = numbers[(f.row or "", f.check)]
                if n not in out.setdefault((row, col), []):
                    out[(row, col)].append(n)
    return {k: BADGE + ",".join(map(str, sorted(v))) for k, v in out.items()}


#: checks whose flag removes a number from the race for "best" (the next best can win): normalized accuracy above
#: 100 % or reached by the unedited model says nothing about the merge
PASS_ON = ("norm-above-100", "norm-unedited")


def not_best(flags: Sequence[Flag], rows: Sequence[str],
             columns: Sequence[str]) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """``(excluded, vetoed)`` cells for the "best" highlight. ``excluded``: numbers that never count as best
    (:data:`PASS_ON`). ``vetoed``: numbers flagged on that very number (an α at a grid edge, a control broken on test,
    an outsized edit, …): when such a number is the best of its column the column shows no best at all, since
    handing the highlight to the runner-up would reward a method for not trying. Run-level flags (training, lr)
    concern every row alike and veto nothing."""
    excluded, vetoed = set(), set()
    for f in flags:
        if ALL in f.metrics or f.row not in rows or f.check == "best-not-separated":
            continue
        cells = {(f.row, c) for c in columns if c in f.metrics}
        (excluded if f.check in PASS_ON else vetoed).update(cells)
    return excluded, vetoed


def badge_table(cells: pd.DataFrame, methods: Sequence[str], badges: Mapping[tuple[str, str], str]) -> pd.DataFrame:
    """Display cells (one row per method, in ``methods`` order) with each flagged number's badge appended."""
    out = cells.copy()
    for i, method in zip(out.index, methods):
        for col in out.columns:
            badge = badges.get((str(method), col))
            if badge:
                out.at[i, col] = f"{out.at[i, col]} {badge}"
    return out


def panel_rows(flags: Sequence[Flag], rows: Sequence[str], label=str) -> pd.DataFrame:
    """The audit panel: one row per footnote (number, row label, check title, what was found, why it matters)."""
    records = []
    for i, (row, check) in enumerate(footnote_keys(flags, rows), start=1):
        found = "; ".join(f.message for f in flags if (f.row or "") == row and f.check == check)
        info = check_info(check)
        records.append({"#": i, "row": label(row) if row else "whole suite", "check": info.title, "found": found,
                        "why it matters": info.explanation})
    return pd.DataFrame(records, columns=["#", "row", "check", "found", "why it matters"])


def counts_line(flags: Sequence[Flag]) -> str:
    """``"3 α at the edge of its grid, 2 control broken on test"`` (checks in the audit's order)."""
    from talos_core.evaluation.audit import counts_by_check

    return ", ".join(f"{n} {check_info(c).title}" for c, n in counts_by_check(flags).items())
