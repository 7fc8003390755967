"""The data → figure path of the Arithmetic page as pure functions (no Streamlit).

A slider move on the Arithmetic page calls :func:`addition_view` / :func:`negation_view` with the cached
results and the new α's; ``bench/bench_dashboard.py`` times exactly these calls.

>>> # doctest-style sketch (needs a store):
>>> # view = addition_view(add, {"digits": 0.3, "mnist": 0.3}, single=single, preview=preview, method="talos")
>>> # view.exact_fig, view.preview_fig, view.curve_fig
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard import data, figures
from talos_core.schema import PreviewCache, preview_accuracy

#: the Arithmetic page's tabs, and the key of their state (the open tab's label; only the open tab is built)
ARITHMETIC_TABS = ("Addition  θ0 + Σ α_t τ_t", "Negation  θ0 − α τ_t")
ARITHMETIC_TAB_KEY = "arith_tab"


@dataclass
class AdditionView:
    alphas: dict[str, float]  # what the sliders say
    exact_alpha: float  # grid point actually shown for the exact results
    requested_alpha: float  # the (mean) α the exact panel was asked for
    snapped: bool  # exact_alpha != requested_alpha
    mixed: bool  # per-task α's differ (exact results only exist for a shared α)
    exact: pd.DataFrame  # task, accuracy, normalized_accuracy at exact_alpha
    exact_fig: go.Figure
    curve_fig: go.Figure
    preview_acc: dict[str, float] | None
    preview_fig: go.Figure | None

    def note(self) -> str:
        """The sentence the page shows under the exact panel."""
        parts = []
        if self.mixed:
            parts.append("Exact results are cached only for one α shared by all tasks (the paper's protocol), so "
                         f"this panel uses the mean of your α's ({self.requested_alpha:.3g})")
        if self.snapped:
            parts.append(f"α = {self.requested_alpha:.3g} was snapped to the nearest cached grid point "
                         f"α = {self.exact_alpha:.3g}")
        return "; ".join(parts) + "." if parts else f"α = {self.exact_alpha:.3g} is on the cached grid."


def addition_view(add: data.Addition, alphas: Mapping[str, float], *, single: pd.DataFrame | None = None,
                  preview: PreviewCache | None = None, method: str | None = None, split: str = "test") -> AdditionView:
    """Exact bars (snapped to the α grid), the linearized preview for any α mix, and the α curve."""
    vals = np.array([float(alphas.get(t, 0.0)) for t in add.tasks], dtype=float)
    requested = float(vals.mean()) if vals.size else add.selected_alpha
    mixed = bool(vals.size and np.ptp(vals) > 1e-9)
    exact_alpha, exact = data.addition_at(add, requested, split)
    _, snapped = data.snap(add.curve["alpha"].unique(), requested)
    zs, st_acc = data.single_reference(single, method or "", add.tasks, split)
    mean = float(np.nanmean(exact["accuracy"])) if exact["accuracy"].notna().any() else float("nan")
    exact_fig = figures.arithmetic_bars(add.tasks, exact["accuracy"].to_numpy(dtype=float), method=method,
                                        name=f"exact, α = {exact_alpha:.3g}", zero_shot=zs, single_task=st_acc,
                                        title=f"Exact ({split}): θ0 + {exact_alpha:.3g}·Στ_t — mean {mean:.3f}")
    curve_fig = figures.alpha_curve(data.average_curve(add), selected_alpha=add.selected_alpha,
                                    current_alpha=exact_alpha, method=method,
                                    title="Mean normalized accuracy vs shared α")
    p_acc, p_fig = addition_preview(add, alphas, preview=preview, method=method, reference=(zs, st_acc))
    return AdditionView(dict(alphas), exact_alpha, requested, snapped, mixed, exact, exact_fig, curve_fig,
                        p_acc, p_fig)


def addition_preview(add: data.Addition, alphas: Mapping[str, float], *, preview: PreviewCache | None = None,
                     single: pd.DataFrame | None = None, method: str | None = None, split: str = "test",
                     reference: tuple | None = None) -> tuple[dict[str, float] | None, go.Figure | None]:
    """The linearized preview's accuracies and bar chart for ``alphas`` alone (``(None, None)`` without a preview
    cache): what a slider move must redraw first. ``reference`` = :func:`dashboard.data.single_reference`'s
    ``(zero_shot, single_task)`` when already known."""
    if preview is None:
        return None, None
    zs, st_acc = reference if reference is not None else data.single_reference(single, method or "", add.tasks, split)
    tasks = [t for t in add.tasks if t in preview.eval_tasks]
    usable = {t: float(a) for t, a in alphas.items() if t in preview.tasks}
    p_acc = preview_accuracy(preview, usable, eval_tasks=tasks)
    pm = float(np.mean(list(p_acc.values()))) if p_acc else float("nan")
    label = ", ".join(f"{alphas.get(t, 0.0):.2g}" for t in tasks)
    p_fig = figures.arithmetic_bars(tasks, [p_acc[t] for t in tasks], method=method, opacity=0.6,
                                    name="linearized preview",
                                    zero_shot=[zs[add.tasks.index(t)] for t in tasks],
                                    single_task=[st_acc[add.tasks.index(t)] for t in tasks],
                                    title=f"Linearized preview, α = ({label}) — mean {pm:.3f}")
    return p_acc, p_fig


@dataclass
class NegationView:
    alphas: dict[str, float]
    exact: pd.DataFrame  # target, requested, alpha, snapped, target_acc, control_acc
    exact_fig: go.Figure
    preview_acc: pd.DataFrame | None  # target, target_acc, control_acc (linearized)
    preview_fig: go.Figure | None

    def note(self) -> str:
        moved = self.exact[self.exact["snapped"]]
        if moved.empty:
            return "All α's are on the cached grid."
        pairs = "; ".join(f"{r.target}: {r.requested:.3g} → {r.alpha:.3g}" for r in moved.itertuples())
        return f"Exact results snap to the cached α grid ({pairs})."


def negation_view(neg: data.Negation, alphas: Mapping[str, float], *, single: pd.DataFrame | None = None,
                  preview: PreviewCache | None = None, method: str | None = None, split: str = "test") -> NegationView:
    """Per target θ0 − α_t τ_t: exact target/control accuracy (snapped) and the linearized preview."""
    rows = []
    for t in neg.targets:
        req = float(alphas.get(t, neg.selected.get(t, 0.0)))
        a, tacc, cacc = data.negation_at(neg, t, req, split)
        rows.append({"target": t, "requested": req, "alpha": a, "snapped": abs(a - req) > 1e-9,
                     "target_acc": tacc, "control_acc": cacc})
    exact = pd.DataFrame(rows)
    zs, _ = data.single_reference(single, method or "", neg.targets, split)
    czs = neg.control_zero_shot.get(split)
    fig = figures.negation_bars(neg.targets, exact["target_acc"], exact["control_acc"],
                                control_task=neg.control_task, zero_shot_target=zs, control_zero_shot=czs,
                                method=method, title=f"Exact ({split}): θ0 − α τ_target (each target on its own)")
    p_df, p_fig = None, None
    if preview is not None and any(t in preview.tasks for t in neg.targets):
        prow = []
        for t in neg.targets:
            if t not in preview.tasks or t not in preview.eval_tasks:
                continue
            evals = [t] + ([neg.control_task] if neg.control_task in preview.eval_tasks else [])
            acc = preview_accuracy(preview, {t: -float(alphas.get(t, neg.selected.get(t, 0.0)))}, eval_tasks=evals)
            prow.append({"target": t, "target_acc": acc[t], "control_acc": acc.get(neg.control_task, float("nan"))})
        if prow:
            p_df = pd.DataFrame(prow)
            p_fig = figures.negation_bars(p_df["target"].tolist(), p_df["target_acc"], p_df["control_acc"],
                                          control_task=neg.control_task, control_zero_shot=czs, method=method,
                                          title="Linearized preview: θ0 − α τ_target")
    return NegationView(dict(alphas), exact, fig, p_df, p_fig)
