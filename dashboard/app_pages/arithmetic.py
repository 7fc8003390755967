"""Arithmetic: add and negate task vectors with sliders. Every view says which model it shows: the exact model
(evaluated at the stored α's, snapped to the nearest one) or the first-order (linearized) model, recomputed in the
browser for any α mix, with how far it is from the exact one at the nearest stored point."""

from __future__ import annotations

import numpy as np
import streamlit as st

from dashboard import alpha_range, data, examples_ui, figures, figures_examples, live_component, ui
from dashboard.views import (
    ARITHMETIC_TAB_KEY,
    ARITHMETIC_TABS,
    addition_gap,
    addition_preview,
    addition_view,
    negation_gap,
    negation_view,
)
from talos_core.errors import TalosError
from talos_core.schema import MissingResult, method_label, parse_variant

ctx = ui.context()
st.title("Task arithmetic")
st.caption("Move the sliders. **Exact model**: accuracies stored for the α's the protocol evaluated (the nearest one "
           "is shown). **First-order model**: f(x, θ0) + Σ α_t τ_tᵀ∇f(x, θ0), recomputed in your browser for any α "
           "mix; each view says which one it shows.")

methods = ctx.methods("addition") or ctx.methods("negation")
if not methods:
    ui.stop_on_problem(MissingResult(f"no addition or negation results for {ctx.model} in suite {ctx.suite}"))
method = ui.pick_method("Method", methods, "method", default="talos")
variant = parse_variant(method)
VIEW = f"{ctx.root}|{ctx.suite}|{ctx.model}|{method}"  # the results the sliders belong to

try:
    single = data.try_get("single", ctx.root, ctx.name())
    preview = data.try_get("preview", ctx.root, ctx.name(method))
except TalosError as exc:  # corrupt reference files: say so, keep going without them
    ui.show_problem(exc)
    single, preview = None, None
if preview is None:
    st.info(f"No preview cache for {ui.md(method_label(method))}: the first-order panel is off (the exact model "
            "still shows).")


def _full_range(grids: dict[str, np.ndarray], selected: dict[str, float], prefix: str) -> bool:
    """The "Full searched α range" toggle (``?afull=true``), offered when a grid reaches beyond its teaching range;
    a link whose α's lie beyond it opens the full range."""
    wider = [t for t, g in grids.items() if alpha_range.has_wider_grid(g, [selected.get(t)])]
    if not wider:
        return False
    asked = [float(v) for k, v in st.query_params.items() if k.startswith(prefix) and _number(v)]
    if "afull" not in st.session_state and any(
            alpha_range.outside(asked, *alpha_range.teaching_range(grids[t], [selected.get(t)])) for t in wider):
        st.session_state["afull"] = True
    top = max(float(np.max(g)) for g in grids.values())
    return st.toggle(f"Full searched α range (0–{top:g})", key="afull", bind="query-params",
                     help="Off: the sliders span the teaching range, from 0 to a little beyond the selected α "
                          "(where the accuracies change). On: the whole α grid the protocol searched.")


def _same_alpha() -> bool:
    """The "Same α for all tasks" toggle, kept in the URL as ``?same=false`` by hand: a widget bound to the URL loses
    its value there while the other tab is open (it is not drawn then)."""
    same = st.toggle("Same α for all tasks", value=st.query_params.get("same") != "false", key="same_alpha",
                     help="The paper's protocol uses one α for the sum of all task vectors.")
    if same:
        st.query_params.pop("same", None)
    else:
        st.query_params["same"] = "false"
    return same


def _number(text: object) -> bool:
    try:
        return np.isfinite(float(text))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def _slider(label: str, lo: float, hi: float, value: float, step: float, key: str) -> float:
    """A float slider over ``[lo, hi]``, bound to the URL (``?<key>=α``)."""
    if hi - lo < 1e-12:  # a one-point grid: nothing to slide
        st.caption(f"{ui.md(label)}: only α = {lo:g} was computed.")
        return float(lo)
    value = float(min(max(value, lo), hi))
    return float(st.slider(ui.md(label), float(lo), float(hi), value, float(step), key=key, bind="query-params",
                           format="%.3g"))


def _export(kind: str, alphas: dict[str, float], what: str) -> None:
    """"Export this mix": the edited model at the current sliders as a standard checkpoint in the user's store —
    offered only where it can work (a writable store, and the runs' task vectors in the store shown)."""
    from dashboard.access import ServerConfig
    from dashboard.export import vectors_missing

    try:
        dest = ServerConfig.from_env().writable_store()
    except TalosError as exc:  # read-only mode, or the user's store is the shipped one
        st.caption(f"Export of this mix is off here: {ui.md(ui.for_visitors(str(exc)))}")
        return
    missing = vectors_missing(ctx.root, kind, ctx.name(method))
    if missing:
        st.caption(f"Export of this mix needs the runs' task vectors: {ui.md(missing, at_start=False)}.")
        return
    with st.expander(f"Export this mix: {ui.md(what)}"):
        st.caption(f"Writes the edited model ({ui.md(what)}) with the runs this result evaluated as a checkpoint the "
                   f"model's own library loads (transformers / open_clip / timm), with a model card and checksums, "
                   f"into **{ui.md(dest)}/exports/** (the same as `talos merge`).")
        if st.button("Export this mix", key=f"export_{kind}_{method}"):
            from dashboard.export import plan_mix_export, run_mix_export

            try:
                plan = plan_mix_export(ctx.root, dest, kind, ctx.name(method), alphas)
                with st.spinner("Writing the checkpoint…"):
                    result = run_mix_export(plan)
            except TalosError as exc:
                ui.show_problem(exc)
                return
            if result is None:
                st.info(f"This mix was exported before: {ui.md(plan.folder)}")
            else:
                st.success(f"Wrote {ui.md(plan.folder)} ({len(result.files)} files). Load it with: "
                           f"{ui.md(result.loader)}")


def _remember(alphas: dict[str, float]) -> None:
    """The α's on screen, for the ξ map of the Disentanglement page (it marks them)."""
    st.session_state["_arith_alphas"] = {"root": str(ctx.root), "suite": ctx.suite, "model": ctx.model,
                                         "method": method, "alphas": dict(alphas)}


examples = None
try:
    examples = data.get_examples(ctx.root, ctx.name(method))
except TalosError as exc:  # a corrupt examples result costs the galleries, never the page
    ui.show_problem(exc)


# Each tab's sliders, charts and gallery are one fragment: moving a slider re-runs only that fragment (not the
# page, its method pickers and the other tab), so the preview chart updates without re-drawing the rest.
@st.fragment
def addition_panel(add) -> None:
    c1, c2 = st.columns([2, 3])
    with c1:
        same = _same_alpha()
    with c2:
        full = _full_range({t: add.alpha_grid for t in add.tasks}, {t: add.selected_alpha for t in add.tasks}, "a.")
    lo, hi = alpha_range.slider_range(add.alpha_grid, [add.selected_alpha], full=full)
    step = alpha_range.slider_step(add.grid_step, lo, hi)
    live = live_component.addition_payload(add, preview, single=single, method=method)  # None: Streamlit's sliders
    if live:  # sliders + preview chart in one browser component: a slider move redraws the chart in the browser
        left, right = st.columns(2)
        with right:
            alphas = live_component.addition_sliders(add, live, method=method, same=same, view=VIEW, lo=lo, hi=hi,
                                                     step=step)
    elif same:
        a = _slider("α (all tasks)", lo, hi, add.selected_alpha, step, ui.qkey("a", method))
        alphas = {t: a for t in add.tasks}
    else:
        cols = st.columns(min(4, len(add.tasks)))
        alphas = {}
        for i, t in enumerate(add.tasks):
            with cols[i % len(cols)]:
                alphas[t] = _slider(f"α {t}", lo, hi, add.selected_alpha, step, ui.qkey("a", method, t))
    _remember(alphas)
    if not live:
        left, right = st.columns(2)
    with right:  # drawn first: the chart a slider move must update soonest (Streamlit sends elements in order)
        _, preview_fig = addition_preview(add, alphas, preview=preview, single=single, method=method)
        if preview_fig is not None:
            if live:  # the browser draws it; the figure at the released α is for the export popover
                ui.export_popover(preview_fig, f"addition_preview_{method}", "exp.add_preview")
            else:
                ui.chart(preview_fig, f"addition_preview_{method}", key="add_preview")
            gap = addition_gap(add, preview, alphas)
            if gap:
                st.caption(ui.md(gap))
    view = addition_view(add, alphas, single=single, preview=None, method=method, x_range=None if full else (lo, hi))
    with left:
        ui.chart(view.exact_fig, f"addition_exact_{method}", key="add_exact")
        (st.warning if view.mixed or view.snapped else st.caption)(ui.md(view.note()))
    m1, m2, m3 = st.columns(3)
    m1.metric("selected α (chosen on val)", f"{add.selected_alpha:.3g}")
    if add.summary:
        m2.metric("test abs. accuracy at selected α", f"{100 * float(add.summary.get('abs_acc', np.nan)):.2f}%")
        m3.metric("test normalized accuracy", f"{100 * float(add.summary.get('norm_acc', np.nan)):.2f}%")
    ui.chart(view.curve_fig, f"addition_curve_{method}", key="add_curve")
    st.caption("Exact model, mean over tasks. Grey dotted: the α shown above. Red: the α the paper protocol selects "
               "on the validation split (max mean normalized accuracy).")
    st.subheader("The examples behind the numbers")
    if examples is None:
        examples_ui.missing_note(method_label(method))
    else:
        task = examples_ui.task_picker(examples, [t for t in add.tasks if t in examples.tasks], "xtask")
        if task is not None:
            g = figures_examples.addition_gallery(examples, task, alphas)
            g = examples_ui.exact_on_demand(g, examples, ctx.root, ctx.name(method),
                                            {t: alphas.get(t, 0.0) for t in examples.tasks}, "add_gallery")
            examples_ui.show(g, "add_gallery", title=f"{task} under addition")
    with ui.expander("Data", key="add_data") as shown:
        if shown:
            ui.table(add.curve, f"addition_curve_{method}", key="add_tbl")
    _export("addition", alphas, "θ0 + " + " + ".join(f"{a:.3g}·τ_{t}" for t, a in alphas.items()))


@st.fragment
def negation_panel(neg) -> None:
    st.caption(f"θ0 − α τ_t, each target on its own. Negating a task should make the model forget it (target "
               f"accuracy ↓) while keeping the control task **{ui.md(neg.control_task)}** (≥ 95 % of its zero-shot "
               "accuracy).")
    grids = {t: neg.grid(t) for t in neg.targets}
    full = _full_range(grids, neg.selected, "n.")
    ranges = {}
    for t, g in grids.items():
        lo, hi = alpha_range.slider_range(g, [neg.selected.get(t)], full=full)
        g = np.unique(g)
        ranges[t] = (lo, hi, alpha_range.slider_step(float(np.min(np.diff(g))) if g.size > 1 else 1.0, lo, hi))
    live = live_component.negation_payload(neg, preview, method=method)  # None: Streamlit's sliders
    if live:  # sliders + preview chart in one browser component, as in the addition tab
        left, right = st.columns(2)
        with right:
            alphas = live_component.negation_sliders(neg, live, method=method, view=VIEW, ranges=ranges)
    else:
        cols = st.columns(min(4, len(neg.targets)))
        alphas = {}
        for i, t in enumerate(neg.targets):
            lo, hi, step = ranges[t]
            with cols[i % len(cols)]:
                alphas[t] = _slider(f"α negate {t}", lo, hi, neg.selected.get(t, lo), step, ui.qkey("n", method, t))
        left, right = st.columns(2)
    nview = negation_view(neg, alphas, single=single, preview=preview, method=method)
    with left:
        ui.chart(nview.exact_fig, f"negation_exact_{method}", key="neg_exact")
        (st.warning if nview.exact["snapped"].any() else st.caption)(ui.md(nview.note()))
    with right:
        if nview.preview_fig is not None:
            if live:  # the browser draws it; the figure at the released α's is for the export popover
                ui.export_popover(nview.preview_fig, f"negation_preview_{method}", "exp.neg_preview")
            else:
                ui.chart(nview.preview_fig, f"negation_preview_{method}", key="neg_preview")
            if preview is not None and neg.control_task not in preview.eval_tasks:
                st.caption(f"The preview cache has no points of the control task {ui.md(neg.control_task)}: the "
                           "first-order panel shows the targets only (the exact panel has the control).")
            gap = negation_gap(neg, preview, alphas)
            if gap:
                st.caption(ui.md(gap))
    target = ui.pick("α curve and examples for target", neg.targets, "ntarget")
    lo, hi, _ = ranges[target]
    ui.chart(figures.negation_curve(neg.table, target, selected_alpha=neg.selected.get(target),
                                    current_alpha=alphas.get(target), method=method,
                                    control_zero_shot=neg.control_zero_shot.get("val"),
                                    x_range=None if full else (lo, hi)),
             f"negation_curve_{method}_{target}", key="neg_curve")
    st.subheader("Forgotten and flipped examples")
    if examples is None:
        examples_ui.missing_note(method_label(method))
    elif target in examples.tasks:
        tg, cg = figures_examples.negation_gallery(examples, target, alphas.get(target, 0.0))
        edit = {target: -float(alphas.get(target, 0.0))}
        tg = examples_ui.exact_on_demand(tg, examples, ctx.root, ctx.name(method), edit, "neg_target")
        if cg is not None:
            cg = examples_ui.exact_on_demand(cg, examples, ctx.root, ctx.name(method), edit, "neg_control",
                                             say_why=False)  # the target's gallery said why, for the same edit
        st.caption("Negation should *forget* the target (right at zero-shot → wrong now) and leave the control "
                   "task alone: every marked control example is a flip the 95 % constraint should keep rare.")
        left, right = st.columns(2)
        with left:
            examples_ui.show(tg, "neg_target", title=f"target {target}: θ0 − α τ_{target}")
        if cg is not None:
            with right:
                examples_ui.show(cg, "neg_control", title=f"control {cg.task}")
    with ui.expander("Data", key="neg_data") as shown:
        if shown:
            ui.table(nview.exact.drop(columns=["snapped"]), f"negation_now_{method}", key="neg_now")
            ui.table(neg.table, f"negation_curve_{method}", key="neg_tbl")
    _export("negation", {target: alphas[target]}, f"θ0 − {alphas[target]:.3g}·τ_{target}")


# only the open tab is built (switching tabs reruns the page): a closed tab's charts, galleries and tables would
# otherwise be built and drawn out of sight on every page load; the open tab is in the URL (?tab=Negation)
tab_add, tab_neg = st.tabs(list(ARITHMETIC_TABS), key=ARITHMETIC_TAB_KEY, on_change="rerun", bind="query-params")

for tab, kind, panel in ((tab_add, "addition", addition_panel), (tab_neg, "negation", negation_panel)):
    if not tab.open:
        continue
    with tab:
        result = ui.load(kind, ctx, method, stop=False) if ctx.has(kind, method) else None
        if not ctx.has(kind, method):
            st.info(f"No {kind} results for {ui.md(method_label(method))} in this store.")
        if result is not None:
            panel(result)
            ui.across_stores(kind, ctx, method)

# how the method's hyperparameters were chosen: below the results (the first screen is the sliders and charts)
if variant is not None:
    base, params = variant
    fixed = ", ".join(f"{k} {v:g}" for k, v in params.items())
    st.caption(f"**{ui.md(method_label(method))}** (result id {ui.md(method)}): {ui.md(method_label(base))} with "
               f"fixed {ui.md(fixed)} for every task, a separate row beside the {ui.md(method_label(base))} row (whose "
               "hyperparameters may be chosen per task).")
shown = ui.chosen_hyperparameters(ctx, [method], key="arith", export=False)
if not shown and ctx.methods("selection") and variant is None:
    st.caption(f"No per-task hyperparameter selection for {ui.md(method_label(method))} in this store: its "
               "hyperparameters are fixed for every task.")
