"""Efficiency & comparison: time per step (forward+backward / optimizer), peak memory, calibration time;
the method comparison table; the sparsity ablation; published reference numbers (labelled)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import audit_view, data, figures, merged, protocol, ui
from talos_core.errors import TalosError
from talos_core.schema import method_label

ctx = ui.context()
st.title("Efficiency & comparison")


def audit_panel(flags: list, rows: list[str]) -> None:
    """Every audit flag of this suite with what was found and why it matters (the badges' footnotes)."""
    if not flags:
        st.success("Audit: no flags on this suite's results (`talos audit` runs the same checks).")
        return
    counts = audit_view.counts_line(flags)
    with st.expander(f"Audit: {len(flags)} flags — {counts}", expanded=True):
        st.caption("Each flag says why a number should not be read at face value: the data behind it are in "
                   "'found'. A claim resting on a flagged number is inconclusive (docs/audit.md).")
        st.dataframe(audit_view.panel_rows(flags, rows, label=method_label), hide_index=True,
                     column_config={"found": st.column_config.TextColumn(width="large"),
                                    "why it matters": st.column_config.TextColumn(width="large")})


def _ordered(comp: pd.DataFrame) -> pd.DataFrame:
    """Rows in the catalogue's method order."""
    return comp.set_index("method").loc[data.order_methods(comp["method"].astype(str))].reset_index()


if ctx.has("efficiency"):
    eff = ui.load("efficiency", ctx, stop=False)
    if eff is not None and not eff.empty:
        methods = data.order_methods(eff["method"].astype(str).unique())
        chosen = ui.pick_methods("Methods", methods, "methods")
        sub = eff[eff["method"].isin(chosen)]
        if sub.empty:
            st.info("Pick at least one method.")
        else:
            if note := figures.machines_note(sub, label=method_label):
                st.warning(note)
            ui.chart(figures.efficiency_bars(sub), f"efficiency_{ctx.suite}_{ctx.model}", key="eff")
            kind = figures.memory_kinds(sub)
            st.caption("Time per training step, the mean over all steps of all tasks (hatched = optimizer step); "
                       "whiskers: the 95 % interval of the mean (1.96 standard errors). The standard deviation of the "
                       "steps is in the Data table: a few slow steps (a pause of the machine) make it larger than "
                       "the mean itself, so it is no error bar. Peak memory is the largest over tasks"
                       + (f" ({ui.md(kind)}). " if kind else ". ")
                       + "Calibration = TaLoS/LoTA mask calibration before training (— = none).")
            with ui.expander("Data", key="eff_data") as shown:
                if shown:
                    ui.table(figures.efficiency_summary(sub), f"efficiency_summary_{ctx.model}", key="eff_sum")
                    ui.table(sub, f"efficiency_{ctx.suite}_{ctx.model}", key="eff_tbl")
else:
    st.info("No efficiency measurements in this store for this suite/model.")

st.subheader("Training budget: learning curves")
curve_methods = ctx.methods("learning_curve")
curves = [c for c in (ui.load("learning_curve", ctx, m, stop=False) for m in curve_methods) if c is not None]
if curves:
    shown = ui.pick_methods("Methods", [c.method for c in curves], "lcmethods")
    tasks = list(dict.fromkeys(t for c in curves for t in c.tasks))
    c1, c2 = st.columns([1, 3])
    which = ui.pick("Task", ["all tasks", *tasks], "lctask", container=c1)
    picked = [c for c in curves if c.method in shown]
    if not picked:
        st.info("Pick at least one method.")
    else:
        table = pd.concat([c.table for c in picked], ignore_index=True)
        zero_shot = {t: z for c in picked for t, z in c.zero_shot.items()}
        fig = figures.learning_curves(table, budgets={c.method: c.budget for c in picked},
                                plateaus={c.method: c.plateau for c in picked}, zero_shot=zero_shot,
                                tasks=None if which == "all tasks" else [which])
        ui.chart(fig, f"learning_curves_{ctx.suite}_{ctx.model}", key="lc")
        st.markdown(protocol.budget_sentence(picked))
        note = protocol.curves_note(data.suite_record(ctx.root, ctx.suite)[0], picked)
        if note:
            st.warning(note)
        st.caption("Lines: validation accuracy of the model being trained, every few steps (linearized FT and "
                   "L-LoRA through their linearized models). Vertical line: the step budget chosen from the curves; "
                   "open diamonds: where each task's curve plateaus; grey dotted: zero-shot validation accuracy.")
        with ui.expander("Data", key="lc_data") as shown:
            if shown:
                ui.table(table, f"learning_curves_{ctx.suite}_{ctx.model}", key="lc_tbl")
else:
    st.info(protocol.no_curves_sentence(data.suite_record(ctx.root, ctx.suite)[0]))
checks = [c for c in (ui.load("lr_check", ctx, m, stop=False) for m in ctx.methods("lr_check")) if c is not None]
if checks:  # the learning rate re-checked at the budget (stores without lr_check results show nothing here)
    st.markdown(protocol.lr_check_sentence(checks))
    ui.table(protocol.lr_check_table(checks), f"lr_check_{ctx.suite}_{ctx.model}", key="lrc")

st.subheader("Method comparison (" + (f"{ui.md(ctx.origin)} and {ui.md(', '.join(o for o, _ in ctx.others))}"
                                      if ctx.others else "this store") + ")")
if ctx.has("comparison"):
    comp = merged.merge_tables({o: _ordered(t) for o, t in ui.side_by_side("comparison", ctx).items()}) \
        if ctx.others else ui.load("comparison", ctx, stop=False)
    if comp is not None:
        comp = comp if ctx.others else _ordered(comp)
        try:
            flags, audit_problem = data.audit_flags(ctx.root, ctx.suite), None
        except TalosError as exc:  # a corrupt suite record: the sidebar already says so in one sentence
            flags, audit_problem = [], str(exc)
        rows = [str(m) for m in comp["method"]]
        # one store's flags number its own rows; a table merged from several stores shows them in the panel only
        badges = {} if ctx.others else audit_view.cell_badges(flags, rows, audit_view.AUDITED_COLUMNS)
        flagged = (set(), set()) if ctx.others else audit_view.not_best(flags, rows, audit_view.AUDITED_COLUMNS)
        shown_table = figures.comparison_table(comp, badges=badges, not_best=flagged)
        st.table(shown_table.styler())
        if ctx.others:
            st.caption("Rows of every store holding this suite and model: the store column says which.")
        st.caption("Accuracies on test at the α selected on validation"
                   + ("; [lo, hi] = 95 % bootstrap interval over test examples (1,000 resamples within each task). "
                      "Bold: a best whose interval lies clear of every other row's (lowest for the negation target); "
                      "where the intervals overlap no row is marked, and columns without intervals (time, memory) "
                      "are not marked" if figures.has_intervals(comp)
                      else "; this store records no intervals, so no best is marked")
                   + ". A number the audit flags is never marked best, nor is a normalized accuracy above 100 % or "
                     "one the unedited model reaches"
                   + (f"; {audit_view.BADGE}n: audit flag n on that number (panel below)." if badges else "."))
        ui.table(comp, f"comparison_{ctx.suite}_{ctx.model}", key="comp", show=False)
        if audit_problem:
            st.caption(f"Audit not run: {ui.md(audit_problem)}")
        else:
            audit_panel(flags, rows)
        if not ctx.others and not audit_problem:
            with ui.expander("What each row chose (on validation) and how long its runs trained", "eff.choices") \
                    as shown:
                if shown:
                    st.caption("Learning rate, per-task sparsity or rank (or a post-hoc merge's point), the addition α "
                               "with the grid it was chosen on, each negation's α, and the best step / steps run of "
                               "the runs behind the row — as `talos report` prints them.")
                    choices = data.row_choices(ctx.root, ctx.suite)
                    st.table(choices.set_index("method"))  # static: its cells wrap, none cut off
                    ui.table(choices, f"choices_{ctx.suite}_{ctx.model}", key="eff.choices.table", show=False)
else:
    st.info("No comparison table in this store for this suite/model.")
ui.chosen_hyperparameters(ctx, key="eff")

ablations = ctx.methods("sparsity_ablation")
if ablations:
    st.subheader("Sparsity ablation")
    m = ui.pick_method("Method", ablations, "amethod")
    tbl = ui.load("sparsity_ablation", ctx, m, stop=False)
    if tbl is not None:
        ui.chart(figures.sparsity_curve(tbl, method=m, title=f"{method_label(m)}: metrics vs sparsity"),
                 f"sparsity_{m}", key="abl")
        ui.table(tbl, f"sparsity_ablation_{m}", key="abl_tbl", show=False)

ui.published_reference("Published reference (paper Table 1, ViT-B/32) — not measured here", figures.PUBLISHED_SOURCE,
                       key="pub")
