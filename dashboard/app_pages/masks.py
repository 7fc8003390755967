"""Masks: where sparse methods train (blocks × layer types), side by side, and how masks overlap."""

from __future__ import annotations

import streamlit as st

from dashboard import data, figures, ui
from talos_core.evaluation.maskstats import mask_warnings
from talos_core.schema import MissingResult, base_method_of, method_info, method_label

ctx = ui.context()
st.title("Masks: which weights are trainable?")
_block = ui.block_word(ctx.model)
st.caption(f"A mask marks the entries a sparse method may change. Colour = fraction of trainable entries "
           f"in each {_block} (x) and layer type (y).")

methods = ctx.methods("masks")
if not methods:
    ui.stop_on_problem(MissingResult(f"no mask statistics for {ctx.model} in suite {ctx.suite} "
                                       "(only sparse methods have masks)"))

compare = st.radio("Compare", ["two methods", "two tasks"], horizontal=True, key="mcompare", bind="query-params")
c1, c2, c3 = st.columns(3)
if compare == "two methods":
    m1 = ui.pick_method("Method A", methods, "method", default="talos", container=c1)
    m2 = ui.pick_method("Method B", methods, "method2", default=(methods[1] if len(methods) > 1 else methods[0]),
                        container=c2)
    t1 = ui.pick("Task", sorted(ui.load("masks", ctx, m1)["task"].unique()), "task", container=c3)
    panels = [(m1, t1), (m2, t1)]
else:
    m1 = ui.pick_method("Method", methods, "method", default="talos", container=c1)
    tasks = sorted(ui.load("masks", ctx, m1)["task"].unique())
    t1 = ui.pick("Task A", tasks, "task", container=c2)
    t2 = ui.pick("Task B", tasks, "task2", default=(tasks[1] if len(tasks) > 1 else tasks[0]), container=c3)
    panels = [(m1, t1), (m1, t2)]

tables = {}
for m, t in panels:
    df = ui.load("masks", ctx, m)
    sub = df[df["task"] == t]
    if sub.empty:
        st.info(ui.md(f"{method_label(m)} has no mask for task {t}."))
        st.stop()
    tables[(m, t)] = sub

tops = {k: float(figures.mask_density_grid(t).max().max()) for k, t in tables.items()}
# one colour scale makes equal colours equal densities; but a method training 10 % of a cell beside one training all
# of it is then uniformly dark: far-apart maxima (over 4×) get a colour scale each unless the URL asks for one
apart = max(tops.values()) > 4 * max(min(tops.values()), 1e-12)
scale = st.radio("Colour scale", ["one for both", "each its own"], index=1 if apart else 0, horizontal=True,
                 key="mscale", bind="query-params")
own = scale == "each its own"
cols = st.columns(2)
for col, ((m, t), sub) in zip(cols, tables.items()):
    with col:
        ui.chart(figures.mask_density_heatmap(sub, zmax=tops[(m, t)] if own else max(tops.values()),
                                              title=f"{method_label(m)} · {t}"),
                 f"mask_heatmap_{m}_{t}", key=f"mh_{m}_{t}")
        diag = data.mask_diagnostics(ctx.root, ctx.name(m))
        row = diag[diag["task"] == t]
        if row.empty and not method_info(base_method_of(m)).sparse:
            st.caption(f"{method_label(m)} has no mask: the picture shows its task vector's non-zero entries.")
        elif row.empty:
            st.caption("No mask diagnostics recorded for this run (a result written before they existed).")
        else:
            d = row.iloc[0].to_dict()
            d = {k: (None if isinstance(v, float) and v != v else v) for k, v in d.items()}
            parts = [f"**moved in training** {d['moved']:.1%}" if d["moved"] is not None else None,
                     f"**zero sensitivity** {d['zero_sensitivity']:.1%}" if d["zero_sensitivity"] is not None
                     else None,
                     f"**tied at the last threshold** {d['tied']:.1%}" if d["tied"] is not None else None]
            st.caption(" · ".join(p for p in parts if p) + " of the mask's entries")
            for warning in mask_warnings(d):
                st.warning(warning[0].upper() + warning[1:] + ".")
st.caption(("Each heatmap has its own colour scale (its colour bar): "
            + ", ".join(f"{ui.md(method_label(m))} · {ui.md(t)} up to {tops[(m, t)]:.2f}" for m, t in tables)
            + "; compare colours within a heatmap, values between them. " if own
            else "Both heatmaps share one colour scale. ")
           + "Under each: the fraction of the mask's entries that training "
           "changed (entries that cannot learn are not trainable capacity), that have exactly zero sensitivity on "
           "the calibration data, and that tied at the last calibration round's threshold.")

series = {f"{method_label(m)} · {t}": sub for (m, t), sub in tables.items()}
combined = data.masks_with(series, column="series")
colors = ({name: figures.method_color(m) for name, (m, _) in zip(series, tables)} if compare == "two methods" else None)
by = st.radio("Bars by", ["block", "layer_type"], horizontal=True, key="mby", bind="query-params",
              format_func=lambda v: v.replace("_", " "))
ui.chart(figures.mask_density_bars(combined, group="series", by=by, colors=colors,
                             title=f"Trainable fraction per {by.replace('_', ' ')}"),
         "mask_bars", key="mbars")

st.subheader("Overlap between masks")
left, right = st.columns(2)
with left:
    if ctx.has("mask_iou", m1):
        iou = ui.load("mask_iou", ctx, m1, stop=False)
        if isinstance(iou, data.Matrix):
            ui.chart(figures.mask_iou_heatmap(iou.tasks, iou.matrix, title=f"{method_label(m1)}: IoU between tasks"),
                     f"mask_iou_{m1}", key="miou")
            if m1 in ctx.methods("selection"):
                st.caption(f"{ui.md(method_label(m1))} chose its sparsity per task, so these masks differ in size, "
                           "which alone lowers their overlap; a fixed-sparsity row (k = …) compares like with like.")
    else:
        st.info(ui.md(f"No task × task mask IoU for {method_label(m1)}."))
with right:
    pairs = ctx.idx[(ctx.idx["kind"] == "mask_iou") & ctx.idx["vs"].notna() & (ctx.idx["suite"] == ctx.suite)
                    & (ctx.idx["model"] == ctx.model)]
    if not pairs.empty:
        names = [f"{r.method} vs {r.vs}" for r in pairs.itertuples()]
        versus = {f"{r.method} vs {r.vs}": f"{method_label(r.method)} vs {method_label(r.vs)}"
                  for r in pairs.itertuples()}
        choice = ui.pick("Cross-method IoU", names, "mvs", format_func=versus.get)
        row = pairs.iloc[names.index(choice)]
        tbl = ui.load("mask_iou", ctx, row["method"], "vs", row["vs"], stop=False)
        if tbl is not None and not isinstance(tbl, data.Matrix):
            ui.chart(figures.cross_method_iou_bars(tbl, [row["method"], row["vs"]]), "mask_iou_cross", key="mcross")
    else:
        st.info("No cross-method mask IoU in this store.")

with ui.expander("Data", key="mdata") as shown:
    if shown:
        full = data.masks_with({m: ui.load("masks", ctx, m) for m in {m for m, _ in panels}})
        ui.table(full, f"masks_{ctx.suite}_{ctx.model}", key="mtbl")
