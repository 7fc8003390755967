"""Localization: does a task vector change the model only on its own task? One matrix per method,
shared colour scale, diagonal marked in red; parameter-sharing and linear-regime checks below."""

from __future__ import annotations

import streamlit as st

from dashboard import data, figures, readings, ui
from dashboard.plain import figure_text_back
from talos_core.schema import MissingResult, method_label

ctx = ui.context()
st.title("Function localization")
st.caption("Row = task the vector was fine-tuned on, column = task evaluated, value = accuracy of θ0 + τ_row on "
           "the column task ÷ zero-shot accuracy. Localized = blue on the red-outlined diagonal and white (≈ 1) "
           "elsewhere; red off the diagonal = the vector hurts another task.")

methods = ctx.methods("localization")
if not methods:
    ui.stop_on_problem(MissingResult(f"no localization results for {ctx.model} in suite {ctx.suite}"))
chosen = ui.pick_methods("Methods", methods, "methods", default=methods[:3])
if not chosen:
    st.info("Pick at least one method.")
    st.stop()
mats = {m: ui.load("localization", ctx, m) for m in chosen}
lo, hi = figures.shared_range(*[m.matrix for m in mats.values()])
items = list(mats.items())
per_row = min(len(items), figures.matrices_per_row(max(len(mat.tasks) for mat in mats.values())))
for start in range(0, len(items), per_row):  # rows of matrices, each wide enough for its cells' values
    for col, (m, mat) in zip(st.columns(per_row), items[start:start + per_row]):
        with col:
            ui.chart(figures.localization_heatmap(mat.tasks, mat.matrix, zmin=lo, zmax=hi, title=method_label(m)),
                     f"localization_{m}", key=f"loc_{m}")
st.caption(f"Shared colour scale {lo:.2f} – {hi:.2f} across the methods shown.")
with ui.expander("Data", key="loc_data") as shown:
    if shown:
        ui.table(data.localization_table(mats), f"localization_{ctx.suite}_{ctx.model}", key="loc_tbl")


@st.fragment
def cell_examples(mats: dict) -> None:
    """Click a cell (or pick it below): the examples of the column task under the row task's vector."""
    from dashboard import examples_ui, figures_examples
    from talos_core.errors import TalosError

    st.subheader("The examples behind a cell")
    have = {}
    for m in mats:
        try:
            ex = data.get_examples(ctx.root, ctx.name(m))
        except TalosError as exc:
            ui.show_problem(exc)
            continue
        if ex is not None:
            have[m] = ex
    if not have:
        examples_ui.missing_note(", ".join(method_label(m) for m in mats))
        return
    m = ui.pick_method("Method", list(have), "xmethod")
    ex, mat = have[m], mats[m]
    tasks = [t for t in mat.tasks if t in ex.tasks]
    fig = figures_examples.clickable_cells(figures.localization_heatmap(mat.tasks, mat.matrix, zmin=lo, zmax=hi,
                                                    title=f"{method_label(m)}: click a cell"), mat.tasks, mat.matrix)
    event = st.plotly_chart(fig,
                            key=f"chart.loc_pick.{m}", on_select="rerun", selection_mode="points",
                            config={"displaylogo": False})
    selection = event.get("selection") if hasattr(event, "get") else None
    points = list((selection or {}).get("points") or [])
    if points:  # a clicked cell sets the pickers below (created after this, so their state may be set)
        x, y = figure_text_back(points[0].get("x")), figure_text_back(points[0].get("y"))  # the store's names
        if x in tasks and y in tasks:
            st.session_state["xrow"], st.session_state["xcol"] = y, x
    c1, c2 = st.columns(2)
    row = ui.pick("Fine-tuned on (row)", tasks, "xrow", container=c1)
    col = ui.pick("Evaluated on (column)", tasks, "xcol", container=c2)
    if row is None or col is None:
        return
    g = figures_examples.localization_gallery(ex, row, col)
    value = mat.matrix[mat.tasks.index(row)][mat.tasks.index(col)]
    st.caption(f"Cell value {value:.3f} (accuracy of θ0 + τ_{ui.md(row)} on {ui.md(col)} ÷ zero-shot, on the "
               f"whole test split). Below: {ui.md(col)}'s fixed examples; "
               + ("on the diagonal, marked ones are what fine-tuning changed." if row == col else
                  "off the diagonal, every marked example is interference: a prediction the other task's vector "
                  "changed."))
    examples_ui.show(g, "loc_gallery", title=f"{col} under τ_{row}")


cell_examples(mats)


modes = data.available(ctx.idx, "mode", kind="sharing", suite=ctx.suite, model=ctx.model)
if modes:
    st.subheader("Parameter sharing")
    st.caption("Prune (or perturb) the entries a task's mask would *not* train (its bottom-k by TaLoS score) "
               "and measure every task: value = accuracy ÷ unpruned accuracy. If tasks rely on different, non-shared "
               "low-sensitivity weights, the diagonal is low and the rest ≈ 1; what these maps show is read below "
               "each one.")
    cols = st.columns(len(modes))
    for col, mode in zip(cols, modes):
        with col:
            sh = ui.load("sharing", ctx, mode, stop=False)
            if sh is not None:
                frac = sh.extra.get("fraction")
                done = figures.SHARING_DONE.get(mode, mode)
                ui.chart(figures.sharing_heatmap(sh.tasks, sh.matrix, mode=mode,
                                                 title=f"Parameter sharing: {done} bottom "
                                                       + (f"{frac:g}" if frac is not None else "k")),
                         f"sharing_{mode}", key=f"sh_{mode}")
                st.caption(ui.md(readings.sharing_reading(mode, sh.matrix)))

if ctx.has("linearization"):
    st.subheader("Linear regime")
    lin = ui.load("linearization", ctx, stop=False)
    if lin is not None:
        left, right = st.columns([3, 2])
        with left:
            ui.chart(figures.linearization_scatter(lin), "linearization", key="lin")
        with right:
            st.markdown("Points on the diagonal: the fine-tuned model behaves like its first-order Taylor "
                        "expansion around θ0 — the regime in which task arithmetic is provably disentangled. "
                        "TaLoS aims to stay near it by training only low-sensitivity weights.")
            st.caption(ui.md(readings.linear_regime_reading(lin)))
        ui.table(readings.linear_regime_table(lin), "linearization", key="lin_tbl", raw=lin)
