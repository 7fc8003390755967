"""The teaching views as pure functions (no Streamlit): the examples behind the numbers and the live ξ.

* :func:`addition_gallery` / :func:`negation_gallery` / :func:`localization_gallery` — the fixed examples of a
  task (SCHEMA.md ``examples``, read by :func:`talos_core.result_arrays.load_examples`) with true label, zero-shot
  prediction and the prediction of the model the page shows, named in every heading (:attr:`Gallery.model`): the
  exact model at the stored α's (the grid and the teaching range), the first-order (linearized) model
  ``f(x, θ0) + Σ α_t τ_tᵀ∇f(x, θ0)`` between them with how far it is from the exact one at the nearest stored point
  (:func:`distance_to_exact`), or the exact model evaluated on demand (:func:`exact_gallery`);
* :func:`tiles` — bordered thumbnails of image examples (green = right, red = wrong, amber frame = the
  prediction changed from zero-shot);
* :func:`xi_linearized` — ξ(α1, α2) of the linearized model at any resolution from a preview cache.

>>> g = Gallery("t", "text", pd.DataFrame({"status": ["changed", ""]}), "exact", 0.5, "")
>>> g.changed
1
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from dashboard.plain import plain_figure
from talos_core.errors import TalosError
from talos_core.result_arrays import ExampleSet, PreviewCache

if TYPE_CHECKING:
    import plotly.graph_objects as go

GRID_TOL = 1e-9
FIRST_ORDER = ("First order means the model is replaced by its tangent at θ0, f(x, θ0) + Σ α_t τ_tᵀ∇f(x, θ0): "
               "each task vector moves the logits along a straight line, so this map is exact for linearized "
               "methods and, for the others, shows the interference that survives when curvature is ignored.")
"""The one sentence on what the live (first-order) ξ means."""

COLUMNS = ("#", "input", "true", "predicted", "zero-shot", "status")


@dataclass
class Gallery:
    """One task's examples under one model: ``table`` (one row per example, :data:`COLUMNS`), where the
    predictions came from (``source``: ``exact`` on the grid, ``linearized`` between grid points, ``nearest``
    grid point when no linearized terms are stored) and the sentence saying so."""

    task: str
    modality: str
    table: pd.DataFrame
    source: str
    alpha: float | None
    note: str
    predicted: np.ndarray | None = None
    thumbnails: np.ndarray | None = None
    asked: str = ""  # the α's the page asked for, as the heading names them ("α = 11", "α = (0.5, 1, 0)")

    @property
    def changed(self) -> int:
        """How many examples' prediction differs from zero-shot."""
        return int((self.table["status"] != "").sum())

    @property
    def model(self) -> str:
        """Which model the predictions are of, in the words every view uses: ``exact model`` (evaluated at the α's
        shown, stored or computed on demand), ``first-order model`` (the linearized model between the stored
        exact points), or the exact model at another α (the nearest stored point, when no first-order terms are
        stored)."""
        if self.source == "exact":
            return f"exact model at {self.asked}" if self.asked else "exact model"
        if self.source == "linearized":
            return f"first-order model at {self.asked}"
        return f"exact model at the nearest exact point α = {self.alpha:.3g} (asked {self.asked})"


def status(labels: np.ndarray, zero_shot: np.ndarray, predicted: np.ndarray) -> list[str]:
    """Per example: ``forgotten`` (right at zero-shot, wrong now), ``learned`` (wrong → right), ``changed``
    (another wrong class), ``""`` (same prediction as zero-shot).

    >>> status(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), np.array([1, 0, 2, 1]))
    ['forgotten', 'learned', 'changed', '']
    """
    out = []
    for y, z, p in zip(np.asarray(labels), np.asarray(zero_shot), np.asarray(predicted)):
        if p == z:
            out.append("")
        elif z == y:
            out.append("forgotten")
        elif p == y:
            out.append("learned")
        else:
            out.append("changed")
    return out


def _name(classes: Sequence[str], k: int) -> str:
    return str(classes[k]) if 0 <= int(k) < len(classes) else str(int(k))


def gallery_table(ex: ExampleSet, task: str, predicted: np.ndarray) -> pd.DataFrame:
    """One row per fixed example of ``task``: position in the test split, the input (snippet, or ``image``),
    true class, ``predicted`` class, zero-shot class and :func:`status`."""
    labels, zs = ex.labels(task), ex.zero_shot(task)
    predicted = np.asarray(predicted)
    if predicted.shape != labels.shape:
        raise TalosError(f"{len(predicted)} predictions for {len(labels)} examples of {task!r}")
    classes = ex.classes(task)
    snippets = ex.snippets(task)
    inputs = snippets if len(snippets) == len(labels) else ["image"] * len(labels)
    return pd.DataFrame({"#": [int(i) for i in ex.meta["indices"][task]], "input": inputs,
                         "true": [_name(classes, k) for k in labels],
                         "predicted": [_name(classes, k) for k in predicted],
                         "zero-shot": [_name(classes, k) for k in zs],
                         "status": status(labels, zs, predicted)}, columns=list(COLUMNS))


def _on_grid(grid: Sequence[float], alpha: float) -> float | None:
    g = np.asarray(grid, dtype=float)
    i = int(np.argmin(np.abs(g - alpha)))
    return float(g[i]) if abs(g[i] - alpha) <= GRID_TOL * max(1.0, abs(alpha)) else None


def _gallery(ex: ExampleSet, task: str, predicted: np.ndarray, source: str, alpha: float | None,
             note: str, asked: str = "") -> Gallery:
    return Gallery(task, ex.modality(task), gallery_table(ex, task, predicted), source, alpha, note,
                   np.asarray(predicted), ex.thumbnails(task), asked)


def asked_alphas(alphas: Sequence[float]) -> str:
    """``α = 0.5`` for one shared α, ``α = (0.5, 1, 0)`` for a mix.

    >>> asked_alphas([0.5, 0.5]), asked_alphas([0.5, 1.0, 0.0])
    ('α = 0.5', 'α = (0.5, 1, 0)')
    """
    vals = [float(a) for a in alphas]
    if vals and max(vals) - min(vals) <= GRID_TOL:
        return f"α = {vals[0]:.3g}"
    return "α = (" + ", ".join(f"{a:.3g}" for a in vals) + ")"


def distance_to_exact(ex: ExampleSet, task: str, first_order: np.ndarray, exact: np.ndarray, point: float) -> str:
    """How far the first-order model is from the exact one at the nearest stored exact point ``point``: right
    answers of each on ``task``'s examples and on how many they disagree (``first_order`` and ``exact``: their
    predictions there)."""
    labels = ex.labels(task)
    n = len(labels)
    fo, xa = int((first_order == labels).sum()), int((exact == labels).sum())
    apart = int((np.asarray(first_order) != np.asarray(exact)).sum())
    return (f"Exact predictions are stored at the grid's α's only; this is the first-order model f(x, θ0) + Σ α_t "
            f"τ_tᵀ∇f(x, θ0) between them. At the nearest exact point, α = {point:.3g}, the first-order model gets "
            f"{fo}/{n} right and the exact model {xa}/{n}: they disagree on {apart} of {n} examples.")


def addition_gallery(ex: ExampleSet, task: str, alphas: Mapping[str, float]) -> Gallery:
    """``task``'s examples under θ0 + Σ_t α_t τ_t: the exact model when every α is the same stored exact point,
    else the first-order model with its distance to the exact one at the nearest exact point (or, without
    first-order terms, the exact model at that point)."""
    if task not in ex.tasks:
        raise TalosError(f"no examples of task {task!r} under addition; tasks: {', '.join(ex.tasks)}")
    vals = np.array([float(alphas.get(t, 0.0)) for t in ex.tasks])
    asked = asked_alphas(vals)
    shared = float(vals.mean()) if vals.size else 0.0
    grid = ex.meta["addition_alphas"]
    point = _on_grid(grid, shared) if np.ptp(vals) <= GRID_TOL else None
    if point is not None:
        pred, a = ex.addition_at(task, point)
        return _gallery(ex, task, pred, "exact", a, f"Exact predictions of θ0 + {a:.3g}·Σ_t τ_t, stored at this α.",
                        asked)
    exact, near = ex.addition_at(task, shared)
    if ex.has_linearized(task):
        pred = ex.linearized(task, {t: float(alphas.get(t, 0.0)) for t in ex.tasks})
        at_point = ex.linearized(task, {t: near for t in ex.tasks})
        return _gallery(ex, task, pred, "linearized", None, distance_to_exact(ex, task, at_point, exact, near), asked)
    return _gallery(ex, task, exact, "nearest", near,
                    f"This result stores no first-order terms: the gallery shows the exact model at the stored α "
                    f"nearest the mean of your α's, {near:.3g}.", asked)


def negation_gallery(ex: ExampleSet, target: str, alpha: float) -> tuple[Gallery, Gallery | None]:
    """θ0 − α τ_target on the target's examples (``forgotten`` ones are what negation should produce) and on
    the control task's (any ``status`` there is a flip the control constraint should keep rare): the exact model
    at a stored exact point, else the first-order model and its distance to the exact one (:func:`addition_gallery`)."""
    if target not in ex.tasks:
        raise TalosError(f"no examples of target {target!r} under negation; targets: {', '.join(ex.tasks)}")
    grid = ex.meta["negation_alphas"][target]
    point = _on_grid(grid, float(alpha))
    control = ex.control_task
    asked = asked_alphas([alpha])
    out = []
    for task in [target] + ([control] if control else []):
        if point is not None:
            pred, a = ex.negation_at(target, task, point)
            out.append(_gallery(ex, task, pred, "exact", a, f"Exact predictions of θ0 − {a:.3g}·τ_{target}, stored "
                                                             "at this α.", asked))
            continue
        exact, near = ex.negation_at(target, task, float(alpha))
        if ex.has_linearized(task):
            pred = ex.linearized(task, {target: -float(alpha)})
            at_point = ex.linearized(task, {target: -near})
            out.append(_gallery(ex, task, pred, "linearized", None,
                                distance_to_exact(ex, task, at_point, exact, near), asked))
        else:
            out.append(_gallery(ex, task, exact, "nearest", near, "This result stores no first-order terms: the "
                                f"gallery shows the exact model at the stored α nearest yours, {near:.3g}.", asked))
    return out[0], (out[1] if len(out) > 1 else None)


def exact_gallery(ex: ExampleSet, task: str, predicted: np.ndarray, alphas: Sequence[float]) -> Gallery:
    """``task``'s examples under the exact model evaluated on demand at ``alphas`` (the page's α's)."""
    return _gallery(ex, task, predicted, "exact", None, "Exact predictions, evaluated now from the runs' task "
                                                         "vectors at these α's.", asked_alphas(alphas))


def localization_gallery(ex: ExampleSet, row_task: str, col_task: str) -> Gallery:
    """The localization cell (row = fine-tuned on, column = evaluated on): ``col_task``'s examples under
    θ0 + τ_row, against zero-shot."""
    pred = ex.single(row_task, col_task)
    if pred is None:
        raise TalosError(f"no examples of {col_task!r} under the {row_task!r} task vector; "
                         f"tasks: {', '.join(ex.tasks)}")
    return _gallery(ex, col_task, pred, "exact", 1.0, f"Exact predictions of θ0 + τ_{row_task} on {col_task}'s "
                                                      "examples.", "α = 1")


def summary(g: Gallery) -> str:
    """``"5/24 right (zero-shot 3/24); 4 changed: 1 forgotten, 3 learned"``."""
    t = g.table
    right = int((t["predicted"] == t["true"]).sum())
    zs = int((t["zero-shot"] == t["true"]).sum())
    counts = t["status"][t["status"] != ""].value_counts()
    detail = ", ".join(f"{int(counts[k])} {k}" for k in ("forgotten", "learned", "changed") if k in counts)
    return f"{right}/{len(t)} right (zero-shot {zs}/{len(t)}); {g.changed} changed" + (f": {detail}" if detail else "")


@plain_figure
def clickable_cells(fig, tasks: Sequence[str], matrix) -> go.Figure:
    """``fig`` (a task × task heatmap) with an invisible marker at every cell centre, so a click selects a point
    (Plotly selects points of scatter traces, not heatmap cells): ``st.plotly_chart(on_select=...)`` then reports
    the clicked cell's ``x`` (column task) and ``y`` (row task)."""
    import plotly.graph_objects as go

    xs = [c for _ in tasks for c in tasks]
    ys = [r for r in tasks for _ in tasks]
    values = np.asarray(matrix, dtype=float).reshape(-1)
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", showlegend=False, customdata=values,
                             marker={"size": 36, "symbol": "square", "opacity": 0.0},
                             hovertemplate="fine-tuned on %{y}<br>evaluated on %{x}<br>%{customdata:.3f}"
                                           "<br>click: the examples<extra></extra>"))
    return fig


# --------------------------------------------------------------------------------------------
# thumbnails
# --------------------------------------------------------------------------------------------
GREEN, RED, AMBER = (44, 160, 44), (214, 39, 40), (255, 170, 0)


def tiles(g: Gallery, size: int = 64, border: int = 3) -> list[np.ndarray]:
    """Each thumbnail enlarged (nearest neighbour) to ``size`` px on its longer side and framed: green when the
    prediction is right, red when wrong, with an outer amber frame when it changed from zero-shot."""
    if g.thumbnails is None:
        return []
    out = []
    for thumb, right, changed in zip(g.thumbnails, g.table["predicted"] == g.table["true"], g.table["status"] != ""):
        h, w = thumb.shape[:2]
        k = max(1, size // max(h, w))
        img = np.repeat(np.repeat(np.asarray(thumb, dtype=np.uint8), k, axis=0), k, axis=1)
        color = GREEN if right else RED
        img = np.pad(img, ((border, border), (border, border), (0, 0)), constant_values=0)
        img[:border], img[-border:], img[:, :border], img[:, -border:] = color, color, color, color
        outer = AMBER if changed else (255, 255, 255)
        img = np.pad(img, ((border, border), (border, border), (0, 0)), constant_values=0)
        img[:border], img[-border:], img[:, :border], img[:, -border:] = outer, outer, outer, outer
        out.append(img)
    return out


def captions(g: Gallery) -> list[str]:
    """``"7 → 1 (was 7)"``: true → predicted, and the zero-shot class when it changed."""
    t = g.table
    return [f"{y} → {p}" + (f" (was {z})" if s else "")
            for y, p, z, s in zip(t["true"], t["predicted"], t["zero-shot"], t["status"])]


def styled(table: pd.DataFrame):
    """The gallery table with changed rows shaded amber and wrong predictions in red (a pandas Styler)."""
    def row_style(r: pd.Series) -> list[str]:
        bg = "background-color: rgba(255, 170, 0, 0.25)" if r["status"] else ""
        return [bg + ("; color: #d62728" if c == "predicted" and r["predicted"] != r["true"] else "")
                for c in r.index]
    return table.style.apply(row_style, axis=1)


# --------------------------------------------------------------------------------------------
# live ξ (first order)
# --------------------------------------------------------------------------------------------
def xi_linearized(cache: PreviewCache, task1: str, task2: str, alphas1: Sequence[float],
                  alphas2: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ξ(α1, α2) of the linearized model on the preview's points, ``[len(alphas1), len(alphas2)]``, and its two
    terms: on task t's points, how often ``argmax(base + α1 jvp1 + α2 jvp2)`` differs from ``argmax(base +
    α_t jvp_t)`` (SCHEMA.md ``preview``; the disentanglement protocol's definition, with f replaced by its
    tangent at θ0). Pure numpy, one row of the grid at a time.
    """
    for t in (task1, task2):
        if t not in cache.tasks or t not in cache.eval_tasks:
            raise TalosError(f"the preview has no task vector and points of {t!r}; it has {', '.join(cache.tasks)}")
    a1 = np.asarray(alphas1, dtype=np.float32)
    a2 = np.asarray(alphas2, dtype=np.float32)
    terms = []
    for t, own in ((task1, 0), (task2, 1)):
        b = np.asarray(cache.base[t], dtype=np.float32)
        j1 = np.asarray(cache.jvp[(t, task1)], dtype=np.float32)
        j2 = np.asarray(cache.jvp[(t, task2)], dtype=np.float32)
        if len(b) == 0:
            terms.append(np.zeros((len(a1), len(a2))))
            continue
        own_j, own_a = (j1, a1) if own == 0 else (j2, a2)
        single = (b[None] + own_a[:, None, None] * own_j[None]).argmax(-1)  # [A_t, N]
        part = b[None] + a2[:, None, None] * j2[None]  # [A2, N, C], reused for every α1
        xi_t = np.empty((len(a1), len(a2)))
        for i, x1 in enumerate(a1):
            joint = (part + x1 * j1[None]).argmax(-1)  # [A2, N]
            ref = single[i][None] if own == 0 else single
            xi_t[i] = (joint != ref).mean(-1)
        terms.append(xi_t)
    return terms[0] + terms[1], terms[0], terms[1]
