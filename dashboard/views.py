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
from talos_core.result_arrays import PreviewCache, preview_accuracy

#: the Arithmetic page's tabs, and the key of their state and of the URL (``?tab=Negation``; only the open tab is
#: built)
ARITHMETIC_TABS = ("Addition", "Negation")
ARITHMETIC_TAB_KEY = "tab"
#: the words every chart title starts with: which model it shows
EXACT, FIRST_ORDER = "Exact model", "First-order model"


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
                  preview: PreviewCache | None = None, method: str | None = None, split: str = "test",
                  x_range: tuple[float, float] | None = None) -> AdditionView:
    """Exact bars (snapped to the α grid), the first-order preview for any α mix, and the α curve (over
    ``x_range``: the sliders' span; ``None``: the whole grid)."""
    vals = np.array([float(alphas.get(t, 0.0)) for t in add.tasks], dtype=float)
    requested = float(vals.mean()) if vals.size else add.selected_alpha
    mixed = bool(vals.size and np.ptp(vals) > 1e-9)
    exact_alpha, exact = data.addition_at(add, requested, split)
    _, snapped = data.snap(add.curve["alpha"].unique(), requested)
    zs, st_acc = data.single_reference(single, method or "", add.tasks, split)
    mean = float(np.nanmean(exact["accuracy"])) if exact["accuracy"].notna().any() else float("nan")
    exact_fig = figures.arithmetic_bars(add.tasks, exact["accuracy"].to_numpy(dtype=float), method=method,
                                        name=f"exact, α = {exact_alpha:.3g}", zero_shot=zs, single_task=st_acc,
                                        title=f"{EXACT} ({split}): θ0 + {exact_alpha:.3g}·Στ_t — mean {mean:.3f}",
                                        turn=figures.turn_labels(add.tasks))
    curve_fig = figures.alpha_curve(data.average_curve(add), selected_alpha=add.selected_alpha,
                                    current_alpha=exact_alpha, method=method, x_range=x_range,
                                    title="Mean normalized accuracy vs shared α (exact model)")
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
                                    name="first-order model",
                                    zero_shot=[zs[add.tasks.index(t)] for t in tasks],
                                    single_task=[st_acc[add.tasks.index(t)] for t in tasks],
                                    title=f"{FIRST_ORDER}, α = ({label}) — mean {pm:.3f}",
                                    turn=figures.turn_labels(tasks))
    return p_acc, p_fig


def addition_gap(add: data.Addition, preview: PreviewCache | None, alphas: Mapping[str, float],
                 split: str = "test") -> str | None:
    """How far the first-order preview is from the exact model at the nearest stored exact point (the α the exact
    panel shows: the grid point nearest the mean of ``alphas``), in one sentence; ``None`` without a preview.

    The preview is evaluated there with that α for every task, the exact model's accuracies are the stored ones."""
    if preview is None:
        return None
    tasks = [t for t in add.tasks if t in preview.eval_tasks]
    vals = [float(alphas.get(t, 0.0)) for t in add.tasks]
    point, exact = data.addition_at(add, float(np.mean(vals)) if vals else add.selected_alpha, split)
    first = preview_accuracy(preview, {t: point for t in add.tasks if t in preview.tasks}, eval_tasks=tasks)
    exact_acc = dict(zip(add.tasks, exact["accuracy"].to_numpy(dtype=float)))
    gaps = {t: first[t] - exact_acc[t] for t in tasks if np.isfinite(exact_acc[t])}
    if not gaps:
        return None
    worst = max(gaps, key=lambda t: abs(gaps[t]))
    fm, em = np.mean([first[t] for t in gaps]), np.mean([exact_acc[t] for t in gaps])
    return (f"First-order vs exact at the nearest exact point α = {point:.3g}: mean accuracy {fm:.3f} vs {em:.3f}; "
            f"largest gap {worst} {gaps[worst]:+.2f}. The first-order model ignores curvature, which is what "
            "causes interference: exact for linearized methods, an approximation for the others.")


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
    turn = figures.turn_labels(neg.targets)
    fig = figures.negation_bars(neg.targets, exact["target_acc"], exact["control_acc"],
                                control_task=neg.control_task, zero_shot_target=zs, control_zero_shot=czs,
                                method=method, turn=turn,
                                title=f"{EXACT} ({split}): θ0 − α τ_target, each target on its own")
    p_df, p_fig = None, None
    if preview is not None and any(t in preview.tasks for t in neg.targets):
        p_df = negation_preview_rows(neg, preview, alphas)
        if not p_df.empty:
            has_control = neg.control_task in preview.eval_tasks
            p_fig = figures.negation_bars(p_df["target"].tolist(), p_df["target_acc"],
                                          p_df["control_acc"] if has_control else None,
                                          control_task=neg.control_task, control_zero_shot=czs, method=method,
                                          title=f"{FIRST_ORDER}: θ0 − α τ_target", turn=turn)
    return NegationView(dict(alphas), exact, fig, p_df, p_fig)


def negation_preview_rows(neg: data.Negation, preview: PreviewCache, alphas: Mapping[str, float]) -> pd.DataFrame:
    """The first-order model's target and control accuracy (NaN where the preview has no control points) per
    target with a preview, each negated on its own at ``alphas[target]``."""
    rows = []
    for t in neg.targets:
        if t not in preview.tasks or t not in preview.eval_tasks:
            continue
        evals = [t] + ([neg.control_task] if neg.control_task in preview.eval_tasks else [])
        acc = preview_accuracy(preview, {t: -float(alphas.get(t, neg.selected.get(t, 0.0)))}, eval_tasks=evals)
        rows.append({"target": t, "target_acc": acc[t], "control_acc": acc.get(neg.control_task, float("nan"))})
    return pd.DataFrame(rows, columns=["target", "target_acc", "control_acc"])


def negation_gap(neg: data.Negation, preview: PreviewCache | None, alphas: Mapping[str, float],
                 split: str = "test") -> str | None:
    """How far the first-order preview is from the exact model at each target's nearest stored exact point, in one
    sentence (target accuracy, and control accuracy where the preview has control points); ``None`` without one."""
    if preview is None:
        return None
    at = {t: data.negation_at(neg, t, float(alphas.get(t, neg.selected.get(t, 0.0))), split) for t in neg.targets}
    rows = negation_preview_rows(neg, preview, {t: a for t, (a, _, _) in at.items()})
    if rows.empty:
        return None
    parts = []
    for r in rows.itertuples():
        a, tacc, cacc = at[r.target]
        part = f"{r.target} at α = {a:.3g}: target accuracy {r.target_acc:.2f} vs {tacc:.2f}"
        if np.isfinite(r.control_acc):
            part += f", control {r.control_acc:.2f} vs {cacc:.2f}"
        parts.append(part)
    return ("First-order vs exact at the nearest exact point — " + "; ".join(parts) + ". Far from α = 0 the "
            "first-order model can be far from the exact one: it ignores the curvature that makes negation work.")
