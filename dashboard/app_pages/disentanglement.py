"""Disentanglement: ξ(α₁, α₂) heatmaps for a task pair, methods side by side on one colour scale."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from dashboard import data, figures, ui
from talos_core.schema import MissingResult, method_label

ctx = ui.context()
st.title("Weight disentanglement")
st.caption("ξ(α₁, α₂) = Σ_t E_x[pred(θ0 + α_t τ_t; x) ≠ pred(θ0 + α₁τ₁ + α₂τ₂; x)] adds up, over the two tasks, "
           "the fraction of a task's test predictions that adding the other task's vector changes: from 0 (none "
           "changes: dark, no interference) to 2 (every prediction of both tasks changes). Red box = the α range "
           "searched for task addition. Click a cell of the larger map to open Arithmetic at its α's; the α's set "
           "there are marked here (×).")

rows = ctx.idx[(ctx.idx["kind"] == "disentanglement") & (ctx.idx["suite"] == ctx.suite)
               & (ctx.idx["model"] == ctx.model)]
if rows.empty:
    ui.stop_on_problem(MissingResult(f"no disentanglement results for {ctx.model} in suite {ctx.suite}"))
pairs = sorted({f"{r.task1} + {r.task2}" for r in rows.itertuples()})
c1, c2 = st.columns([1, 2])
pair = ui.pick("Task pair", pairs, "pair", container=c1)
t1, t2 = pair.split(" + ")
have = data.order_methods(rows[(rows["task1"] == t1) & (rows["task2"] == t2)]["method"].tolist())
chosen = ui.pick_methods("Methods", have, "methods", container=c2)
if not chosen:
    st.info("Pick at least one method.")
    st.stop()

panels = [ui.load("disentanglement", ctx, m, t1, t2) for m in chosen]
zmax = figures.shared_range(*[p["xi"] for p in panels])[1]
ui.chart(figures.xi_side_by_side(panels, zmax=zmax, title=f"ξ for {t1} + {t2} — exact model, shared colour scale "
                                                          f"(0 to {zmax:.2f})"),
         f"xi_{t1}_{t2}", key="xi_side")


def arithmetic_mark() -> tuple[float, float, str] | None:
    """The α's the Arithmetic page shows for this store, suite and model, when they set both tasks of the pair."""
    shown = st.session_state.get("_arith_alphas")
    if not shown or (shown["root"], shown["suite"], shown["model"]) != (str(ctx.root), ctx.suite, ctx.model):
        return None
    a = shown["alphas"]
    if t1 not in a or t2 not in a:
        return None
    return a[t1], a[t2], f"Arithmetic α ({method_label(shown['method'])}): ({a[t1]:.3g}, {a[t2]:.3g})"


def open_arithmetic(method: str, a1: float, a2: float) -> None:
    """Open the Arithmetic page at θ0 + α₁τ₁ + α₂τ₂ (per-task sliders; the suite's other tasks at 0) for ``method``,
    in this store, suite and model; a cell outside the addition sliders' span is one sentence instead."""
    from dashboard import alpha_range
    from talos_core.schema import slug

    if not ctx.has("addition", method):
        st.info(f"No addition results for {ui.md(method_label(method))}: the Arithmetic page cannot show this cell.")
        return
    add = data.get("addition", ctx.root, ctx.name(method))
    lo, hi = float(np.min(add.alpha_grid)), float(np.max(add.alpha_grid))
    if alpha_range.outside([a1, a2], lo, hi):
        st.info(f"α = ({a1:.3g}, {a2:.3g}) lies outside the α's of task addition ({lo:g} to {hi:g}); pick a cell "
                "inside them to open it on the Arithmetic page.")
        return
    query = {k: st.query_params[k] for k in ("store", "suite", "model") if k in st.query_params}
    query.update({"method": method, "same": "false", "tab": "Addition"})
    query.update({f"{ui.qkey('a', method)}.{slug(t)}": f"{ {t1: a1, t2: a2}.get(t, 0.0):.12g}"
                  for t in add.tasks})
    if alpha_range.outside([a1, a2], *alpha_range.teaching_range(add.alpha_grid, [add.selected_alpha])):
        query["afull"] = "true"
    st.switch_page(ui.PAGES_DIR / "arithmetic.py", query_params=query)


focus = ui.pick_method("Look closer at", chosen, "focus")
p = panels[chosen.index(focus)]
left, right = st.columns([3, 2])
with left:
    one = figures.xi_heatmap(p["alphas1"], p["alphas2"], p["xi"], task1=t1, task2=t2,
                             search_region=p.get("search_region"), zmax=zmax, mark=arithmetic_mark(), clickable=True,
                             title=f"{method_label(focus)}: ξ({t1}, {t2})")
    event = st.plotly_chart(one, key=f"chart.xi_one.{ui.qkey(focus, t1, t2)}", on_select="rerun",
                            selection_mode="points", config={"displaylogo": False})
    ui.export_popover(one, f"xi_{focus}_{t1}_{t2}", "exp.xi_one")
    clicked = [q for q in ((event.get("selection") or {}).get("points") or []) if q.get("curve_number") == 1]
    if clicked:
        open_arithmetic(focus, float(clicked[0]["y"]), float(clicked[0]["x"]))
with right:
    region = data.shared_region(panels)
    label = f"[{region[0]:g}, {region[1]:g}]²" if region else "the shared square"
    st.markdown(f"**Interference compared on equal ground** (lower = more disentangled): mean ξ over {label}, the α "
                "square every method shown searched, and ξ at each method's own chosen addition α")

    def chosen_alpha(method: str) -> float:
        from talos_core.errors import TalosError

        try:
            result = data.try_get("addition", ctx.root, ctx.name(method))
        except TalosError:  # a damaged addition result: no chosen α to show here (the Arithmetic page says why)
            return float("nan")
        return float(result.selected_alpha) if result is not None else float("nan")

    alphas = [chosen_alpha(q["method"]) for q in panels]
    st.dataframe(pd.DataFrame({
        "method": [method_label(q["method"]) for q in panels],
        f"mean ξ on {label}": [data.xi_region_mean(q, region) if region else float("nan") for q in panels],
        "chosen addition α": alphas,
        "ξ at (α, α)": [data.xi_at(q, a) for q, a in zip(panels, alphas)],
        "own search region": [f"[{q['search_region'][0]:g}, {q['search_region'][1]:g}]" if q.get("search_region")
                              else "–" for q in panels]}), hide_index=True)
    ppt = p.get("points_per_task", "?")
    ppt = min(ppt.values()) if isinstance(ppt, dict) and ppt else ppt
    st.caption(f"Points per task: {ui.md(ppt)}. Sparse methods search a wider α range "
               "(× 1/(1 − sparsity)) because their vectors are smaller; the box is clipped to the grid.")


@st.fragment
def live_xi(p: dict, method: str) -> None:
    """The focused method's ξ of its first-order model at any resolution, from the preview cache."""
    import time

    from dashboard import figures_examples
    from talos_core.errors import TalosError

    st.subheader("Live ξ of the first-order model, at any resolution")
    try:
        cache = data.try_get("preview", ctx.root, ctx.name(method))
    except TalosError as exc:
        ui.show_problem(exc)
        return
    if cache is None or not all(t in cache.tasks and t in cache.eval_tasks for t in (t1, t2)):
        st.info(f"No preview cache with {ui.md(t1)} and {ui.md(t2)} for {ui.md(method_label(method))}: the live map "
                "is off (the exact grid above still works).")
        return
    a1, a2 = np.asarray(p["alphas1"], dtype=float), np.asarray(p["alphas2"], dtype=float)
    res = st.slider("Resolution (α values per axis)", 5, 100, 50, 5, key="xires", bind="query-params")
    g1, g2 = np.linspace(a1.min(), a1.max(), res), np.linspace(a2.min(), a2.max(), res)
    t0 = time.perf_counter()
    xi, _, _ = figures_examples.xi_linearized(cache, t1, t2, g1, g2)
    ms = (time.perf_counter() - t0) * 1000
    left, right = st.columns(2)
    with left:
        ui.chart(figures.xi_heatmap(a1, a2, p["xi"], task1=t1, task2=t2, search_region=p.get("search_region"),
                                    zmax=zmax, mark=arithmetic_mark(),
                                    title=f"Exact model: ξ on the stored {len(a1)}×{len(a2)} grid"),
                 f"xi_exact_{method}_{t1}_{t2}", key="xi_exact_grid")
    with right:
        ui.chart(figures.xi_heatmap(g1, g2, xi, task1=t1, task2=t2, search_region=p.get("search_region"),
                                    zmax=max(zmax, float(np.nanmax(xi)) if xi.size else zmax), mark=arithmetic_mark(),
                                    title=f"First-order model: live ξ, {res}×{res} (computed in {ms:.0f} ms)"),
                 f"xi_live_{method}_{t1}_{t2}", key="xi_live")
    n = min(len(cache.labels[t1]), len(cache.labels[t2]))
    st.caption(ui.md(figures_examples.FIRST_ORDER) + f" Computed from the preview cache ({n}+ test points per task; "
               f"the exact grid uses {ui.md(p.get('points_per_task', '?'))}), with no model call.")


live_xi(p, focus)


with ui.expander("Data", key="xi_data") as shown:
    if shown:
        ui.table(data.xi_long_table(panels), f"xi_{t1}_{t2}", key="xi_tbl", show=False)
