"""Suite reports: the results table of a suite in Markdown (:func:`results_markdown`, from the store's
``comparison`` result; ``docs/results.md``) and what ``talos report`` prints (:func:`report_markdown`: the table and
the learning-rate checks).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from talos_core.errors import TalosError
from talos_core.evaluation.audit import audit_suite, footnotes, number_ranges
from talos_core.store import Store


def report_markdown(store: Store | str, suite: str) -> str:
    """What ``talos report`` prints: :func:`results_markdown` and, where the store has them, the learning-rate
    checks (one line per method; ``docs/results.md`` carries it, ``talos docs``)."""
    from talos_core.evaluation.lr_check import report_lines

    store = Store(store) if not isinstance(store, Store) else store
    try:
        text = results_markdown(store, suite)
    except KeyError as exc:
        raise TalosError(f"suite {suite!r} in {store.root} lacks {exc}") from None
    model = store.read_result("suite", suite).get("model") if suite in store.results("suite") else None
    checks = report_lines(store, suite, model) if model else []
    if checks:  # a store without lr checks prints nothing more
        text += ("\n\nLearning-rate check (mean validation accuracy over the check's tasks; each line says whether the "
                 "method trains at the rate it chooses or the suite keeps its own):\n"
                 + "\n".join(f"- {line}" for line in checks))
    return text


def markdown_text(value: Any) -> str:
    """A name read from a store, safe inside a Markdown table row and a code span: ``|`` escaped, line breaks
    and backticks replaced (a store is data, never markup).

    >>> print(markdown_text("a|b`c"))
    a\\|b'c
    """
    return " ".join(str(value).replace("\\", "\\\\").replace("|", "\\|").replace("`", "'").split())


def results_markdown(store: Store | str, suite: str) -> str:
    """The results table of ``suite`` (docs/results.md) (from the store's ``comparison`` result).

    Accuracies are percentages; where the comparison carries a mean's 95% bootstrap interval over test
    examples (``<column>_lo``, ``<column>_hi``) the cell reads ``45.00 [41.2, 48.9]``, else ``45.00``.
    """
    from talos_core.schema import result_name

    store = Store(store) if not isinstance(store, Store) else store
    if suite not in store.results("suite"):
        raise TalosError(f"no results of suite {suite!r} in {store.root}; pass --store or set $TALOS_STORE to the "
                         f"store that holds them")
    meta = store.read_result("suite", suite)
    table = store.read_table("comparison", result_name(suite, meta["model"]))
    pct = lambda v: "–" if v is None or pd.isna(v) else f"{100 * float(v):.2f}"  # noqa: E731

    def acc(r: dict, col: str) -> str:
        lo, hi = r.get(f"{col}_lo"), r.get(f"{col}_hi")
        if pct(r.get(col)) == "–" or lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
            return pct(r.get(col))
        return f"{pct(r.get(col))} [{100 * float(lo):.1f}, {100 * float(hi):.1f}]"

    num = lambda v, f: "–" if v is None or pd.isna(v) else format(float(v), f)  # noqa: E731
    md = markdown_text
    lines = [f"**{suite}** — `{md(meta['model'])}` on {', '.join(map(md, meta['tasks']))} (control: "
             f"{md(meta['control_task'])}); scale `{md(meta['scale'])}`, seed {meta['seed']}, "
             f"{meta['wall_time_s'] / 60:.1f} min on {md(meta['device'])}",
             "", "| method | add. abs | add. norm | neg. target ↓ | neg. control | single-task | zero-shot "
             "| time/step (s) | peak memory (MiB) | audit flags |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    order = [*meta["methods"], *meta.get("posthoc", [])]
    rank = {m: i for i, m in enumerate(order)}
    records = sorted(table.to_dict(orient="records"), key=lambda r: (rank.get(r["method"], len(rank)), r["method"]))
    flags = audit_suite(store, suite)
    by_row, notes = footnotes(flags, [str(r["method"]) for r in records])
    refs = lambda row: number_ranges(by_row.get(row, []) + by_row.get("", [])) or "–"  # noqa: E731
    for r in records:
        lines.append(f"| {md(r['method'])} | {acc(r, 'addition_abs')} | {acc(r, 'addition_norm')} | "
                     f"{acc(r, 'negation_target')} | {acc(r, 'negation_control')} | "
                     f"{acc(r, 'single_task_acc')} | {acc(r, 'zero_shot_acc')} | "
                     f"{num(r.get('time_per_step_s'), '.3f')} | {num(r.get('peak_memory_mb'), '.0f')} | "
                     f"{refs(str(r['method']))} |")
    if any(c.endswith("_lo") and table[c].notna().any() for c in table.columns):
        lines += ["", "Accuracies in %; [lo, hi] = 95% bootstrap interval over test examples (1,000 resamples "
                      "within each task)."]
    if notes:
        lines += ["", f"Audit flags (`talos audit {md(suite)}`: {len(flags)} flags; what each check means: "
                      "docs/audit.md):", ""]
        lines += [f"- {md(n)}" for n in notes]
    else:
        lines += ["", "Audit: no flags."]
    return "\n".join(lines)
