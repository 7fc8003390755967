"""Suite reports: the results table of a suite in Markdown (:func:`results_markdown`, from the store's
``comparison`` result; ``docs/results.md``) and what ``talos report`` prints (:func:`report_markdown`: the table and
the learning-rate checks, and what each row chose: :func:`choices_markdown`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from talos_core.errors import TalosError
from talos_core.evaluation.audit import SuiteReader, audit_suite, footnotes, number_ranges
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
    choices = choices_markdown(store, suite) if model else ""
    return text + ("\n\n" + choices if choices else "")


def _g(value: Any) -> str:
    """A chosen value as the tables print it: ``0.95``, ``2``, ``0.001``; a name as is."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{float(value):g}"


def _per_task(values: dict, tasks: list[str]) -> str:
    """``mnist 0.8 · digits 0.95`` in the suite's task order; one value shared by every task once."""
    shown = [(t, values[t]) for t in [*tasks, *sorted(set(values) - set(tasks))] if t in values]
    if not shown:
        return "–"
    if len(shown) > 1 and len({_g(v) for _, v in shown}) == 1:
        return f"{_g(shown[0][1])} (every task)"
    return " · ".join(f"{t} {_g(v)}" for t, v in shown)


def _flat(override: dict) -> dict:
    """A run's per-task override with nested settings lifted (L-LoRA's ``{"options": {"rank": 64}}`` → rank 64)."""
    out: dict = {}
    for k, v in override.items():
        out.update(v if isinstance(v, dict) else {k: v})
    return out


def _devices(meta: dict) -> list[str]:
    """The devices the suite's steps ran on: each session's that ran a step, in order (a part on a lent GPU beside
    the CPU's), else the record's last device.

    >>> _devices({"device": "cpu", "sessions": [{"device": "cpu", "steps_run": ["a"]}, {"device": "cuda",
    ...           "steps_run": ["b"]}, {"device": "cpu", "steps_run": []}]})
    ['cpu', 'cuda']
    """
    ran = [str(s.get("device")) for s in meta.get("sessions") or [] if isinstance(s, dict) and s.get("steps_run")]
    return list(dict.fromkeys(ran)) or [str(meta.get("device"))]


def _in_suite_order(order: list[str], items: list, method: Callable[[Any], str] = lambda m: m) -> list:
    """``items`` (method names, or records whose ``method(item)`` is one) in the suite's ``order`` (its methods, then
    its post-hoc methods), methods it does not list last, by name: the row order of both report tables."""
    rank = {m: i for i, m in enumerate(order)}
    return sorted(items, key=lambda x: (rank.get(method(x), len(rank)), method(x)))


def _span(values: list[int]) -> str:
    return "–" if not values else (f"{min(values):,}" if min(values) == max(values)
                                   else f"{min(values):,}–{max(values):,}")


#: the columns of :func:`choices_table`, as the report and the dashboard head them
CHOICE_COLUMNS = ("method", "lr", "per task", "addition α (grid)", "negation α per target", "steps: best / run")


def choices_table(store: Store | str | Path, suite: str) -> pd.DataFrame:
    """What each row of ``suite``'s table chose on validation, read from its results and run manifests (one row per
    comparison row, in the suite's order; text cells, :data:`CHOICE_COLUMNS`): the learning rate its runs trained at,
    its per-task hyperparameter (sparsity, rank; from its selection, which names a default value too) or a post-hoc
    merge's point, the addition α and the grid it was chosen on, each negation's α, and where its runs stopped (best
    step / steps run, the span over tasks). Empty for a suite whose store has no comparison; a suite the store has no
    record of is one :class:`TalosError`."""
    root = store.root if isinstance(store, Store) else store
    r = SuiteReader(Path(root), suite)
    if r.result("comparison") is None:
        return pd.DataFrame(columns=list(CHOICE_COLUMNS))
    tasks = [str(t) for t in r.meta.get("tasks") or []]
    posthoc = r.posthoc()
    rows = []
    for row in _in_suite_order([*r.meta.get("methods", []), *r.meta.get("posthoc", [])], r.rows()):
        add, neg = r.result("addition", row) or {}, r.result("negation", row) or {}
        mans = [m for rid in r.row_runs(row).values() if (m := r.manifest(rid))]
        if row in posthoc:
            point = add.get("hyperparameters") or neg.get("hyperparameters") or {}
            chosen = ", ".join(f"{k} {_g(v)}" for k, v in point.items())
            lr = steps = f"{add.get('base_method') or 'nonlinear'}'s runs"
        else:
            sel = r.result("selection", row) or {}
            over = {t: _flat(o) for t, o in (sel.get("choices") or add.get("task_overrides")
                                             or neg.get("task_overrides") or {}).items() if isinstance(o, dict)}
            params = sorted({k for o in over.values() for k in o})
            chosen = "; ".join(f"{p}: " + _per_task({t: o[p] for t, o in over.items() if p in o}, tasks)
                               for p in params)
            if not chosen and add.get("sparsity") is not None:
                chosen = f"sparsity {_g(add['sparsity'])}"
            train = [(m.get("config") or {}).get("train") or {} for m in mans]
            rates = sorted({float(t["lr"]) for t in train if isinstance(t.get("lr"), (int, float))})
            lr = ", ".join(f"{v:g}" for v in rates) or "–"
            timed = [m.get("timings") or {} for m in mans]
            run = [int(t["steps_run"]) for t in timed if isinstance(t.get("steps_run"), (int, float))]
            best = [int(t["best_step"]) for t in timed if isinstance(t.get("best_step"), (int, float))]
            fixed = [int(t["steps"]) for t in train if isinstance(t.get("steps"), (int, float))]
            steps = f"{_span(best)} / {_span(run)}" if run else (f"fixed {_span(fixed)}" if fixed else "–")
        grid = [float(a) for a in add.get("alpha_grid") or [] if isinstance(a, (int, float))]
        alpha = add.get("selected_alpha")
        addition = "–" if alpha is None else (
            f"{_g(alpha)} (fixed)" if len(grid) == 1 else f"{_g(alpha)} ({_g(min(grid))}…{_g(max(grid))})" if grid
            else _g(alpha))
        selected = neg.get("selected") if isinstance(neg.get("selected"), dict) else {}
        rows.append((row, lr, chosen or "–", addition, _per_task(selected, tasks), steps))
    return pd.DataFrame(rows, columns=list(CHOICE_COLUMNS))


def choices_markdown(store: Store | str | Path, suite: str) -> str:
    """:func:`choices_table` as the Markdown ``talos report`` and docs/results.md print (``""`` when it is empty)."""
    table = choices_table(store, suite)
    if table.empty:
        return ""
    lines = ["What each row chose (on validation) and how long its runs trained:", "",
             "| " + " | ".join(CHOICE_COLUMNS) + " |", "|" + "---|" * len(CHOICE_COLUMNS)]
    lines += ["| " + " | ".join(markdown_text(v) for v in rec) + " |" for rec in table.itertuples(index=False)]
    return "\n".join(lines)


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
             f"{meta['wall_time_s'] / 60:.1f} min of step time on {', '.join(map(md, _devices(meta)))}",
             "", "| method | add. abs | add. norm | neg. target ↓ | neg. control | single-task | zero-shot "
             "| time/step (s) | peak memory (MiB) | audit flags |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    records = _in_suite_order([*meta["methods"], *meta.get("posthoc", [])], table.to_dict(orient="records"),
                              lambda r: r["method"])
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
