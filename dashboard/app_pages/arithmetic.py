"""Arithmetic: add and negate task vectors with sliders; exact cached results (snapped to the α grid)
next to the live linearized preview for any α mix."""

from __future__ import annotations

import numpy as np
import streamlit as st

from dashboard import data, examples_ui, figures_examples, live_component, ui
from dashboard.views import ARITHMETIC_TAB_KEY, ARITHMETIC_TABS, addition_preview, addition_view, negation_view
from talos_core.errors import TalosError
from talos_core.schema import MissingResult, method_label, parse_variant

ctx = ui.context()
st.title("Task arithmetic")
st.caption("Move the sliders: the left chart reads the exact results computed on the α grid "
           "(paper protocol), the right one recomputes the first-order (linearized) model "
           "f(x, θ0) + Σ α_t τ_tᵀ∇f(x, θ0) from cached logits, for any α mix, in milliseconds.")

methods = ctx.methods("addition") or ctx.methods("negation")
if not methods:
    ui.stop_on_problem(MissingResult(f"no addition or negation results for {ctx.model} in suite {ctx.suite}"))
method = ui.pick_method("Method", methods, "method", default="talos")
variant = parse_variant(method)
if variant is not None:
    base, params = variant
    fixed = ", ".join(f"{k} {v:g}" for k, v in params.items())
    st.caption(f"**{ui.md(method_label(method))}** (result id {ui.md(method)}): {ui.md(method_label(base))} with "
               f"fixed {ui.md(fixed)} for every task, a separate row beside the {ui.md(method_label(base))} row (whose "
               "hyperparameters may be chosen per task).")
# above the results, its candidates figure without an export popover (the results' charts own the first one)
shown = ui.chosen_hyperparameters(ctx, [method], key="arith", export=False)
if not shown and ctx.methods("selection") and variant is None:
    st.caption(f"No per-task hyperparameter selection for {ui.md(method_label(method))} in this store: its "
               "hyperparameters are fixed for every task.")

try:
    single = data.try_get("single", ctx.root, ctx.name())
    preview = data.try_get("preview", ctx.root, ctx.name(method))
except TalosError as exc:  # corrupt reference files: say so, keep going without them
    ui.show_problem(exc)
    single, preview = None, None
if preview is None:
    st.info(f"No preview cache for {ui.md(method_label(method))}: the live linearized panel is off (exact results "
            "still work).")


def _slider(label: str, lo: float, hi: float, value: float, step: float, key: str) -> float:
    """A float slider over the α grid's range, bound to the URL (``?<key>=α``)."""
    if hi - lo < 1e-12:  # a one-point grid: nothing to slide
        st.caption(f"{ui.md(label)}: only α = {lo:g} was computed.")
        return float(lo)
    value = float(min(max(value, lo), hi))
    return float(st.slider(ui.md(label), float(lo), float(hi), value, float(step), key=key, bind="query-params",
                           format="%.3g"))


def _export(kind: str, alphas: dict[str, float], what: str) -> None:
    """"Export this mix": the edited model at the current sliders as a standard checkpoint in the user's store."""
    from dashboard.access import ServerConfig

    try:
        dest = ServerConfig.from_env().writable_store()
    except TalosError as exc:  # read-only mode, or the user's store is the shipped one
        st.caption(f"Export of this mix is off here: {ui.md(exc)}")
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


examples = None
try:
    examples = data.get_examples(ctx.root, ctx.name(method))
except TalosError as exc:  # a corrupt examples result costs the galleries, never the page
    ui.show_problem(exc)


# Each tab's sliders, charts and gallery are one fragment: moving a slider re-runs only that fragment (not the
# page, its method pickers and the other tab), so the preview chart updates without re-drawing the rest.
@st.fragment
def addition_panel(add) -> None:
    lo, hi = float(np.min(add.alpha_grid)), float(np.max(add.alpha_grid))
    step = add.grid_step / 5
    same = st.toggle("Same α for all tasks", value=True, key="same", bind="query-params",
                     help="The paper's protocol uses one α for the sum of all task vectors.")
    live = live_component.addition_payload(add, preview, single=single, method=method)  # None: Streamlit's sliders
    if live:  # sliders + preview chart in one browser component: a slider move redraws the chart in the browser
        left, right = st.columns(2)
        with right:
            alphas = live_component.addition_sliders(add, live, method=method, same=same)
    elif same:
        a = _slider("α (all tasks)", lo, hi, add.selected_alpha, step, ui.qkey("a", method))
        alphas = {t: a for t in add.tasks}
    else:
        cols = st.columns(min(4, len(add.tasks)))
        alphas = {}
        for i, t in enumerate(add.tasks):
            with cols[i % len(cols)]:
                alphas[t] = _slider(f"α {t}", lo, hi, add.selected_alpha, step, ui.qkey("a", method, t))
    if not live:
        left, right = st.columns(2)
    with right:  # drawn first: the chart a slider move must update soonest (Streamlit sends elements in order)
        _, preview_fig = addition_preview(add, alphas, preview=preview, single=single, method=method)
        if preview_fig is not None:
            if live:  # the browser draws it; the figure at the released α is for the export popover
                ui.export_popover(preview_fig, f"addition_preview_{method}", "exp.add_preview")
            else:
                ui.chart(preview_fig, f"addition_preview_{method}", key="add_preview")
            st.caption("Linearized preview: exact for linearized methods, a first-order approximation "
                       "for the others (it ignores curvature, which is what causes interference).")
    view = addition_view(add, alphas, single=single, preview=None, method=method)
    with left:
        ui.chart(view.exact_fig, f"addition_exact_{method}", key="add_exact")
        (st.warning if view.mixed or view.snapped else st.caption)(ui.md(view.note()))
    m1, m2, m3 = st.columns(3)
    m1.metric("selected α (chosen on val)", f"{add.selected_alpha:.3g}")
    if add.summary:
        m2.metric("test abs. accuracy at selected α", f"{100 * float(add.summary.get('abs_acc', np.nan)):.2f}%")
        m3.metric("test normalized accuracy", f"{100 * float(add.summary.get('norm_acc', np.nan)):.2f}%")
    ui.chart(view.curve_fig, f"addition_curve_{method}", key="add_curve")
    st.caption("Grey dotted: the α shown on the left. Red: the α the paper protocol selects on the "
               "validation split (max mean normalized accuracy).")
    st.subheader("The examples behind the numbers")
    if examples is None:
        examples_ui.missing_note(method_label(method))
    else:
        task = examples_ui.task_picker(examples, [t for t in add.tasks if t in examples.tasks], "xtask")
        if task is not None:
            examples_ui.show(figures_examples.addition_gallery(examples, task, alphas), "add_gallery",
                             title=f"{task} under addition")
    with ui.expander("Data", key="add_data") as shown:
        if shown:
            ui.table(add.curve, f"addition_curve_{method}", key="add_tbl")
    _export("addition", alphas, "θ0 + " + " + ".join(f"{a:.3g}·τ_{t}" for t, a in alphas.items()))


@st.fragment
def negation_panel(neg) -> None:
    st.caption(f"Negating a task should make the model forget it (target accuracy ↓) while keeping "
               f"the control task **{ui.md(neg.control_task)}** (≥ 95 % of its zero-shot accuracy).")
    live = live_component.negation_payload(neg, preview, method=method)  # None: Streamlit's sliders
    if live:  # sliders + preview chart in one browser component, as in the addition tab
        left, right = st.columns(2)
        with right:
            alphas = live_component.negation_sliders(neg, live, method=method)
    else:
        cols = st.columns(min(4, len(neg.targets)))
        alphas = {}
        for i, t in enumerate(neg.targets):
            g = neg.grid(t)
            with cols[i % len(cols)]:
                step = (float(np.min(np.diff(g))) if g.size > 1 else 1.0) / 5
                alphas[t] = _slider(f"α negate {t}", float(g.min()), float(g.max()),
                                    neg.selected.get(t, float(g.min())), step, ui.qkey("n", method, t))
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
    from dashboard import figures

    target = ui.pick("α curve and examples for target", neg.targets, "ntarget")
    ui.chart(figures.negation_curve(neg.table, target, selected_alpha=neg.selected.get(target),
                                    current_alpha=alphas.get(target), method=method,
                                    control_zero_shot=neg.control_zero_shot.get("val")),
             f"negation_curve_{method}_{target}", key="neg_curve")
    st.subheader("Forgotten and flipped examples")
    if examples is None:
        examples_ui.missing_note(method_label(method))
    elif target in examples.tasks:
        tg, cg = figures_examples.negation_gallery(examples, target, alphas.get(target, 0.0))
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
# otherwise be built and drawn out of sight on every page load
tab_add, tab_neg = st.tabs(list(ARITHMETIC_TABS), key=ARITHMETIC_TAB_KEY, on_change="rerun")

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
