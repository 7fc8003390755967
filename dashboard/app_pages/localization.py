"""Localization: does a task vector change the model only on its own task? One matrix per method,
shared colour scale, diagonal marked in red; parameter-sharing and linear-regime checks below."""

from __future__ import annotations

import streamlit as st

from dashboard import data as D
from dashboard import figures as F
from dashboard import ui
from talos_core.schema import MissingResult, method_label

ctx = ui.context()
st.title("Function localization")
st.caption("Row = task the vector was fine-tuned on, column = task evaluated, value = accuracy of θ0 + τ_row on "
           "the column task ÷ zero-shot accuracy. Localized = blue on the red-outlined diagonal and white (≈ 1) "
           "elsewhere; red off the diagonal = the vector hurts another task.")

methods = ctx.methods("localization")
if not methods:
    ui.stop_on_problem(MissingResult(f"no localization results for {ctx.model} in suite {ctx.suite}"))
chosen = ui.pick_many("Methods", methods, "methods", default=methods[:3])
if not chosen:
    st.info("Pick at least one method.")
    st.stop()
mats = {m: ui.load("localization", ctx, m) for m in chosen}
lo, hi = F.shared_range(*[m.matrix for m in mats.values()])
cols = st.columns(min(3, len(mats)))
for i, (m, mat) in enumerate(mats.items()):
    with cols[i % len(cols)]:
        ui.chart(F.localization_heatmap(mat.tasks, mat.matrix, zmin=lo, zmax=hi, title=method_label(m)),
                 f"localization_{m}", key=f"loc_{m}")
st.caption(f"Shared colour scale {lo:.2f} – {hi:.2f} across the methods shown.")
with st.expander("Data"):
    ui.table(D.localization_table(mats), f"localization_{ctx.suite}_{ctx.model}", key="loc_tbl")

modes = D.available(ctx.idx, "mode", kind="sharing", suite=ctx.suite, model=ctx.model)
if modes:
    st.subheader("Parameter sharing")
    st.caption("Prune (or perturb) the entries a task's mask would *not* train (its bottom-k by TaLoS score) "
               "and measure every task: value = accuracy ÷ unpruned accuracy. A low diagonal with ≈ 1 "
               "elsewhere means tasks rely on different, non-shared low-sensitivity weights.")
    cols = st.columns(len(modes))
    for col, mode in zip(cols, modes):
        with col:
            sh = ui.load("sharing", ctx, mode, stop=False)
            if sh is not None:
                frac = sh.extra.get("fraction")
                ui.chart(F.sharing_heatmap(sh.tasks, sh.matrix, mode=mode,
                                           title=f"{mode}" + (f" (fraction {frac:g})" if frac is not None else "")),
                         f"sharing_{mode}", key=f"sh_{mode}")

if ctx.has("linearization"):
    st.subheader("Linear regime")
    lin = ui.load("linearization", ctx, stop=False)
    if lin is not None:
        left, right = st.columns([3, 2])
        with left:
            ui.chart(F.linearization_scatter(lin), "linearization", key="lin")
        with right:
            st.markdown("Points on the diagonal: the fine-tuned model behaves like its first-order Taylor "
                        "expansion around θ0 — the regime in which task arithmetic is provably "
                        "disentangled. TaLoS stays there by training only low-sensitivity weights.")
            ui.table(lin, "linearization", key="lin_tbl")
