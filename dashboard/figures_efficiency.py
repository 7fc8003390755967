"""Cost and training-budget figures (pure): time and memory per method, metrics against sparsity, the linear
regime, learning curves and the hyperparameter selection's scores.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.figures_core import (
    _FALLBACK,
    MARK_COLOR,
    ZERO_SHOT_COLOR,
    _grid_axes,
    _list,
    _panel_axes,
    _title,
    make_figure,
    method_color,
)
from dashboard.plain import plain_figure
from talos_core.errors import TalosError
from talos_core.schema import method_label


def efficiency_summary(eff: pd.DataFrame) -> pd.DataFrame:
    """One row per method of the SCHEMA ``efficiency`` columns, aggregated as the comparison table does
    (:func:`talos_core.evaluation.reports.efficiency_summary`, paper App. "Measuring computational
    costs"): step timings pooled over all iterations of all tasks (mean ± std), peak memory the
    largest over tasks; calibration and training time and trainable entries are means over tasks."""
    from talos_core.evaluation.reports import efficiency_summary as pooled_summary

    cols = ["fwd_bwd_s_mean", "fwd_bwd_s_std", "opt_s_mean", "opt_s_std", "calibration_s", "train_s",
            "peak_memory_mb", "trainable_entries"]
    present = [c for c in cols if c in eff.columns]
    num = eff[["method", *present]].copy()
    for c in present:
        num[c] = pd.to_numeric(num[c], errors="coerce")
    out = num.groupby("method", sort=False)[present].mean().reset_index()
    if "peak_memory_mb" in present:
        out["peak_memory_mb"] = num.groupby("method", sort=False)["peak_memory_mb"].max().to_numpy()
    needed = {"method", "task", "fwd_bwd_s_mean", "fwd_bwd_s_std", "opt_s_mean", "opt_s_std", "peak_memory_mb",
              "calibration_s"}
    if needed <= set(eff.columns):  # step timings: pooled over all iterations (methods without timings keep NaN)
        numeric = (needed - {"method", "task"}) | ({"steps"} & set(eff.columns))
        pooled = pooled_summary(eff.assign(**{c: pd.to_numeric(eff[c], errors="coerce") for c in numeric}))
        for c in ("fwd_bwd_s_mean", "fwd_bwd_s_std", "opt_s_mean", "opt_s_std"):
            out[c] = [pooled[str(m)][c] if str(m) in pooled else v for m, v in zip(out["method"], out[c])]
    if "peak_memory_kind" in eff.columns:
        out["peak_memory_kind"] = eff.groupby("method", sort=False)["peak_memory_kind"].first().to_numpy()
    if "steps" in eff.columns:  # the steps the timings pool (the error bars' n)
        out["steps"] = pd.to_numeric(eff["steps"], errors="coerce").groupby(eff["method"], sort=False).sum(
            min_count=1).reindex(out["method"]).to_numpy()
    return out


def mean_interval(mean: Any, std: Any, n: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(below, above)``: the half-widths of a 95 % interval of a mean of ``n`` values with standard deviation
    ``std`` (normal approximation, 1.96 · std / √n), clipped so the interval never goes below zero (a time or a size
    cannot be negative); NaN where ``n`` or ``std`` is unknown.

    A standard deviation of step times is no error bar for their mean: one 18-second step among a thousand
    half-second ones makes it 10 s, drawn from −10 to +11 s around a 0.7 s bar.

    >>> [np.round(a, 3).tolist() for a in mean_interval([0.5, 0.01], [0.2, 0.5], [100, 4])]
    [[0.039, 0.01], [0.039, 0.49]]
    """
    m, s, k = (np.asarray(v, dtype=float) for v in (mean, std, n))
    half = 1.96 * s / np.sqrt(np.where(k > 0, k, np.nan))
    return np.minimum(half, m), half


MEMORY_KINDS = {"peak_rss_since_reset": "peak RSS", "peak_rss_since_start": "peak RSS since the process started",
                "cuda_max_memory_allocated": "GPU, max. allocated"}
"""How each ``peak_memory_kind`` of an ``efficiency`` table (``talos_core.memory``) is named in words."""


def memory_kind_label(kind: Any) -> str:
    """``peak_memory_kind`` in words (:data:`MEMORY_KINDS`; an unknown kind as it is, none as ``""``).

    >>> memory_kind_label("peak_rss_since_reset"), memory_kind_label(None)
    ('peak RSS', '')
    """
    if kind is None or (isinstance(kind, float) and math.isnan(kind)) or str(kind) in ("", "nan", "None"):
        return ""
    return MEMORY_KINDS.get(str(kind), str(kind))


def memory_title(summ: pd.DataFrame) -> str:
    """The peak-memory panel's title: the kind of peak its methods recorded, or that the kinds differ (a GPU's
    allocated memory beside a CPU process's resident set are not one measure; the page's caption names them).

    >>> memory_title(pd.DataFrame({"peak_memory_kind": ["peak_rss_since_reset", "peak_rss_since_reset"]}))
    'peak memory (MB, peak RSS)'
    >>> memory_title(pd.DataFrame({"peak_memory_kind": ["cuda_max_memory_allocated", "peak_rss_since_reset"]}))
    'peak memory (MB, kinds differ)'
    """
    kinds = _memory_kind_labels(summ)
    if len(kinds) > 1:  # the caption under the chart names them: the panel title stays short
        return "peak memory (MB, kinds differ)"
    return f"peak memory (MB{', ' + kinds[0] if kinds else ''})"


def memory_kinds(table: pd.DataFrame) -> str:
    """The kinds of peak memory a table's rows recorded, in words: one kind, or ``"not one measure: a / b"``, or
    ``""`` when none is recorded (the page caption's words)."""
    kinds = _memory_kind_labels(table)
    return f"not one measure: {' / '.join(kinds)}" if len(kinds) > 1 else (kinds[0] if kinds else "")


def _memory_kind_labels(table: pd.DataFrame) -> list[str]:
    """Each kind of peak memory the table's rows recorded, once, in words (:func:`memory_kind_label`)."""
    return list(dict.fromkeys(k for k in (memory_kind_label(v) for v in table.get("peak_memory_kind", [])) if k))


def machines_note(eff: pd.DataFrame, label: Any = str) -> str | None:
    """A sentence when the methods of an efficiency table were timed on different machines (its ``machine``
    column; ``label`` names a method), else ``None``: then the bars compare machines, not methods.

    >>> eff = pd.DataFrame({"method": ["talos", "talos", "nonlinear"],
    ...                     "machine": ["cuda · NVIDIA H200", "cuda · NVIDIA H200", "cpu · AMD EPYC · 1 thread"]})
    >>> print(machines_note(eff))  # doctest: +ELLIPSIS
    Timed on different machines — talos: cuda · NVIDIA H200; nonlinear: cpu · AMD EPYC · 1 thread. These bars ...
    >>> machines_note(eff[eff["method"] == "talos"]) is None
    True
    """
    if "machine" not in eff.columns:
        return None
    by = {str(m): sorted({str(x) for x in g["machine"].dropna()}) for m, g in eff.groupby("method", sort=False)}
    by = {m: xs for m, xs in by.items() if xs}
    if len({x for xs in by.values() for x in xs}) < 2:
        return None
    return ("Timed on different machines — " + "; ".join(f"{label(m)}: {', '.join(xs)}" for m, xs in by.items())
            + ". These bars compare machines, not methods (the audit flags such rows: time per step from another "
              "machine).")


@plain_figure
def efficiency_bars(eff: pd.DataFrame, *, title: str = "Cost per method (over all tasks)") -> go.Figure:
    """Three panels: time per step split into forward+backward and optimizer (stacked; whiskers: the 95 % interval
    of each mean over all steps, :func:`mean_interval`), peak memory, calibration time. One colour per method; the
    optimizer part is hatched. The legend (grey: it names the two parts, whatever the method's colour) sits in its own
    row under the title, above the panels' titles."""
    summ = efficiency_summary(eff)
    if summ.empty:
        raise TalosError("efficiency table is empty; nothing to draw")
    methods = [str(m) for m in summ["method"]]
    labels = [method_label(m) for m in methods]
    colors = [method_color(m) for m in methods]
    titles = ["time per step (ms)", memory_title(summ), "mask calibration (s)"]
    axes, anns = _panel_axes(3, spacing=0.09, titles=titles, rangemode="tozero")
    col = lambda c: summ[c].to_numpy(dtype=float) if c in summ else np.zeros(len(summ))  # noqa: E731
    ms = 1000.0
    calib = np.nan_to_num(col("calibration_s"), nan=0.0)
    legend = [{"type": "bar", "x": labels[:1], "y": [0], "name": name, "hoverinfo": "skip", "xaxis": "x",
               "yaxis": "y", "marker": {"color": "#9a9a9a", **({"pattern": {"shape": "/"}} if hatched else {})}}
              for name, hatched in (("forward + backward", False), ("optimizer step (hatched)", True))]
    steps = col("steps") if "steps" in summ else np.full(len(summ), np.nan)

    def whiskers(part: str) -> dict:  # the 95 % interval of the mean step time (mean_interval), none without n
        below, above = mean_interval(col(f"{part}_s_mean") * ms, col(f"{part}_s_std") * ms, steps)
        return {"type": "data", "symmetric": False, "array": _list(np.nan_to_num(above)),
                "arrayminus": _list(np.nan_to_num(below)), "visible": bool(np.isfinite(above).any())}

    traces = [
        {"type": "bar", "x": labels, "y": _list(col("fwd_bwd_s_mean") * ms), "name": "forward + backward",
         "marker": {"color": colors}, "xaxis": "x", "yaxis": "y", "showlegend": False,
         "error_y": whiskers("fwd_bwd")},
        {"type": "bar", "x": labels, "y": _list(col("opt_s_mean") * ms), "name": "optimizer step",
         "marker": {"color": colors, "pattern": {"shape": "/"}, "line": {"color": "white"}}, "xaxis": "x",
         "yaxis": "y", "showlegend": False, "error_y": whiskers("opt")},
        {"type": "bar", "x": labels, "y": _list(col("peak_memory_mb")), "name": "peak memory",
         "marker": {"color": colors}, "showlegend": False, "xaxis": "x2", "yaxis": "y2"},
        {"type": "bar", "x": labels, "y": _list(calib), "name": "calibration", "marker": {"color": colors},
         "showlegend": False, "xaxis": "x3", "yaxis": "y3", "textposition": "outside",
         "text": ["—" if not v > 0 else f"{v:.1f}" for v in calib]},
        *legend,  # zero-height bars: legend entries in grey (the real bars carry one colour per method)
    ]
    # title, then the legend in its own row (container coordinates), then the panels' titles over the plots
    return make_figure(traces, title, height=400, annotations=anns, barmode="stack",
                       margin={"l": 60, "r": 20, "t": 105, "b": 50},
                       legend={"orientation": "h", "yref": "container", "y": 1 - 36 / 400, "yanchor": "top",
                               "xanchor": "left", "x": 0.0, "traceorder": "normal"}, **axes)


@plain_figure
def sparsity_curve(table: pd.DataFrame, *, method: str | None = None,
                   metrics: Sequence[str] = ("addition_norm", "single_task_acc", "negation_target"),
                   title: str = "Sparsity ablation") -> go.Figure:
    """Metrics of a ``sparsity_ablation`` table against sparsity (one line per metric)."""
    dashes = ["solid", "dash", "dot", "dashdot"]
    t = table.sort_values("sparsity")
    traces = [{"type": "scatter", "x": _list(t["sparsity"].to_numpy(dtype=float)),
               "y": _list(pd.to_numeric(t[m], errors="coerce").to_numpy(dtype=float)), "name": m.replace("_", " "),
               "mode": "lines+markers", "line": {"color": method_color(method or "talos"), "dash": dashes[i % 4]}}
              for i, m in enumerate(c for c in metrics if c in t.columns)]
    return make_figure(traces, title, height=320, xaxis={"title": _title("sparsity (fraction frozen)")},
                       yaxis={"title": _title("value")})


@plain_figure
def linearization_scatter(table: pd.DataFrame, *, title: str = "Is fine-tuning in the linear regime?") -> go.Figure:
    """Fine-tuned accuracy (x) vs its linearized prediction's accuracy (y); on the diagonal = linear regime. One
    colour per method; the task is in each point's hover text (labels written beside 25 points pile up)."""
    traces = [{"type": "scatter", "x": _list(sub["finetuned_acc"].to_numpy(dtype=float)),
               "y": _list(sub["linearized_acc"].to_numpy(dtype=float)), "mode": "markers",
               "text": sub["task"].tolist(), "name": method_label(str(method)),
               "hovertemplate": f"{method_label(str(method))} · %{{text}}<br>fine-tuned %{{x:.3f}}<br>linearized "
                                "%{y:.3f}<extra></extra>",
               "marker": {"size": 11, "color": method_color(str(method)), "line": {"width": 1, "color": "white"}}}
              for method, sub in table.groupby("method", sort=False)]
    return make_figure(traces, title, height=380,
                       shapes=[{"type": "line", "x0": 0, "y0": 0, "x1": 1, "y1": 1,
                                "line": {"color": "#999", "dash": "dot"}}],
                       xaxis={"title": _title("fine-tuned (non-linear) accuracy"), "range": [0, 1.02]},
                       yaxis={"title": _title("linearized accuracy"), "range": [0, 1.02]})


# --------------------------------------------------------------------------------------------
# training budget (learning curves) and hyperparameter selection
# --------------------------------------------------------------------------------------------
@plain_figure
def learning_curves(table: pd.DataFrame, *, budgets: Mapping[str, int | None] | None = None,
                    plateaus: Mapping[str, Mapping[str, int]] | None = None,
                    zero_shot: Mapping[str, float] | None = None, tasks: Sequence[str] | None = None,
                    columns: int = 3, title: str = "Validation accuracy vs training step") -> go.Figure:
    """Learning curves (the step budget is set where they flatten, so they are shown): validation accuracy against the
    training step, one panel per task, one line per method (its colour everywhere).

    ``table`` has columns ``method, task, step, val_acc`` (SCHEMA ``learning_curve``, several methods
    concatenated). ``budgets[method]`` is the step budget chosen from that method's curves: a vertical line
    on every panel, red and solid when all drawn methods share one budget, else dashed in each method's
    colour. ``plateaus[method][task]`` (the step where that curve plateaus) is an open diamond on the
    curve. ``zero_shot[task]`` (zero-shot validation accuracy) is a grey dotted line. ``tasks`` picks and
    orders the panels (default: every task of the table).

    >>> t = pd.DataFrame({"method": "talos", "task": ["a", "a", "b", "b"], "step": [5, 10, 5, 10],
    ...                   "val_acc": [0.5, 0.7, 0.4, 0.6]})
    >>> fig = learning_curves(t, budgets={"talos": 10}, plateaus={"talos": {"a": 10, "b": 5}})
    >>> [s["x0"] for s in fig.layout.shapes if s["name"] == "budget"], fig.layout.xaxis2.anchor
    ([10, 10], 'y2')
    """
    for col in ("method", "task", "step", "val_acc"):
        if col not in table.columns:
            raise TalosError(f"learning-curve table is missing column {col!r}")
    if table.empty:
        raise TalosError("learning-curve table is empty; nothing to draw")
    all_tasks = list(dict.fromkeys(table["task"].astype(str)))
    tasks = [t for t in (tasks if tasks is not None else all_tasks) if t in all_tasks]
    if not tasks:
        raise TalosError(f"no learning curves for the chosen task(s); the table has: {', '.join(all_tasks)}")
    methods = list(dict.fromkeys(table["method"].astype(str)))
    budgets = {m: b for m, b in (budgets or {}).items() if m in methods and b is not None}
    plateaus = plateaus or {}
    zero_shot = zero_shot or {}
    cols = max(1, min(columns, len(tasks)))
    axes, anns = _grid_axes(len(tasks), cols, tasks, yaxis={"range": [0, 1.05], "title": _title("val accuracy")},
                            xaxis={"title": _title("step"), "rangemode": "tozero"})
    shared = len(set(budgets.values())) == 1
    traces, shapes = [], []
    for i, task in enumerate(tasks):
        sfx = "" if i == 0 else str(i + 1)
        xa, ya = f"x{sfx}", f"y{sfx}"
        sub = table[table["task"].astype(str) == task]
        for m in methods:
            s = sub[sub["method"].astype(str) == m].sort_values("step")
            if s.empty:
                continue
            steps = s["step"].to_numpy(dtype=float)
            acc = s["val_acc"].to_numpy(dtype=float)
            traces.append({"type": "scatter", "x": _list(steps), "y": _list(acc), "mode": "lines+markers",
                           "name": method_label(m), "legendgroup": m, "showlegend": i == 0, "xaxis": xa, "yaxis": ya,
                           "line": {"color": method_color(m)}, "marker": {"size": 4},
                           "hovertemplate": f"{method_label(m)} · {task}<br>step %{{x}}<br>val acc %{{y:.3f}}"
                                            "<extra></extra>"})
            p = (plateaus.get(m) or {}).get(task)
            if p is not None:
                before = steps <= p
                yv = float(acc[before][-1]) if before.any() else float("nan")
                traces.append({"type": "scatter", "x": [p], "y": [yv], "mode": "markers", "name": "plateau",
                               "legendgroup": "plateau", "showlegend": not any(t.get("name") == "plateau"
                                                                                  for t in traces),
                               "xaxis": xa, "yaxis": ya, "hovertemplate": f"{method_label(m)} · {task}: plateau at "
                                                                          "step %{x}<extra></extra>",
                               "marker": {"symbol": "diamond-open", "size": 12, "color": method_color(m),
                                          "line": {"width": 2}}})
        for m, b in budgets.items():
            color, dash = (MARK_COLOR, "solid") if shared else (method_color(m), "dash")
            shapes.append({"type": "line", "xref": xa, "x0": b, "x1": b, "yref": f"{ya} domain", "y0": 0, "y1": 1,
                           "name": "budget", "line": {"color": color, "dash": dash, "width": 2}})
            if shared:
                break
        z = zero_shot.get(task)
        if z is not None and math.isfinite(z):
            shapes.append({"type": "line", "xref": f"{xa} domain", "x0": 0, "x1": 1, "yref": ya, "y0": z, "y1": z,
                           "name": "zero-shot", "line": {"color": ZERO_SHOT_COLOR, "dash": "dot", "width": 1}})
    if budgets:  # legend entries for the lines drawn as shapes
        if shared:
            b = next(iter(budgets.values()))
            traces.append({"type": "scatter", "x": [None], "y": [None], "mode": "lines", "name": f"budget = {b} steps",
                           "line": {"color": MARK_COLOR, "width": 2}})
        else:
            for m, b in budgets.items():
                traces.append({"type": "scatter", "x": [None], "y": [None], "mode": "lines",
                               "name": f"budget {method_label(m)} = {b}",
                               "line": {"color": method_color(m), "dash": "dash", "width": 2}})
    if any(zero_shot.get(t) is not None for t in tasks):
        traces.append({"type": "scatter", "x": [None], "y": [None], "mode": "lines", "name": "zero-shot",
                       "line": {"color": ZERO_SHOT_COLOR, "dash": "dot", "width": 1}})
    rows = math.ceil(len(tasks) / cols)
    return make_figure(traces, title, height=170 + 260 * rows, shapes=shapes, annotations=anns,
                       margin={"l": 60, "r": 20, "t": 125 if title else 75, "b": 50},
                       legend={"orientation": "h", "yanchor": "bottom", "y": 1.0 + 0.09 / rows, "xanchor": "left",
                               "x": 0.0}, **axes)


@plain_figure
def selection_scores(table: pd.DataFrame, *, param: str, method: str | None = None,
                     title: str | None = None) -> go.Figure:
    """Hyperparameter selection by validation task negation (paper App. "Hyperparameter selection"): for
    each task (a line), each candidate value (x, categorical, in grid order) and its score = the lowest
    validation target accuracy of θ0 − α τ with the control task kept (lower is better); the chosen
    candidate of each task is a red star.

    ``table``: SCHEMA ``selection`` columns (``task, value, score, best_alpha, chosen``, ...).

    >>> t = pd.DataFrame({"task": ["a", "a"], "value": [0.5, 0.9], "score": [0.4, 0.2], "best_alpha": [1.0, 5.0],
    ...                   "control_val_acc": [0.6, 0.6], "chosen": [False, True]})
    >>> fig = selection_scores(t, param="sparsity")
    >>> [tr.name for tr in fig.data], list(fig.data[1].x)
    (['a', 'chosen'], ['0.9'])
    """
    for col in ("task", "value", "score", "chosen"):
        if col not in table.columns:
            raise TalosError(f"selection table is missing column {col!r}")
    if table.empty:
        raise TalosError("selection table is empty; nothing to draw")

    def fmt(v: Any) -> str:
        return str(int(v)) if param == "rank" and float(v).is_integer() else f"{float(v):g}"

    order = [fmt(v) for v in dict.fromkeys(table["value"])]
    palette = [method_color(method or "talos"), *_FALLBACK]
    dashes = ["solid", "dash", "dot", "dashdot", "longdash"]
    traces = []
    for i, (task, sub) in enumerate(table.groupby("task", sort=False)):
        alpha = sub["best_alpha"] if "best_alpha" in sub else pd.Series(np.nan, index=sub.index)
        traces.append({"type": "scatter", "x": [fmt(v) for v in sub["value"]],
                       "y": _list(pd.to_numeric(sub["score"], errors="coerce").to_numpy(dtype=float)),
                       "customdata": _list(pd.to_numeric(alpha, errors="coerce").to_numpy(dtype=float)),
                       "mode": "lines+markers", "name": str(task),
                       "line": {"color": palette[i % len(palette)], "dash": dashes[i // len(palette) % len(dashes)]},
                       "hovertemplate": f"{task}<br>{param} %{{x}}<br>val target acc %{{y:.3f}} at α %{{customdata:g}}"
                                        "<extra></extra>"})
    ch = table[table["chosen"].astype(bool)]
    traces.append({"type": "scatter", "x": [fmt(v) for v in ch["value"]],
                   "y": _list(pd.to_numeric(ch["score"], errors="coerce").to_numpy(dtype=float)), "mode": "markers",
                   "name": "chosen", "text": ch["task"].astype(str).tolist(),
                   "hovertemplate": "%{text}: chosen " + param + " %{x}<extra></extra>",
                   "marker": {"symbol": "star", "size": 15, "color": MARK_COLOR}})
    title = title or (f"{method_label(method) + ': ' if method else ''}{param} per task — validation negation score "
                      "(lower = forgets more)")
    return make_figure(traces, title, height=360,
                       xaxis={"type": "category", "categoryorder": "array", "categoryarray": order,
                              "title": _title(f"candidate {param}")},
                       yaxis={"title": _title("val target accuracy, control kept"), "rangemode": "tozero"})
