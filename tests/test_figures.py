"""Every figure function of dashboard/figures.py on the synthetic store: the figure shows the data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from dashboard_fixtures import MODEL, SUITE, TASKS

from dashboard import data as D
from dashboard import figures as F
from dashboard import figures_core
from talos_core.errors import TalosError

figures_core.VALIDATE = True  # check every figure against plotly's schema in tests


def _name(*parts):
    return "__".join([SUITE, MODEL, *parts])


@pytest.fixture(scope="module")
def masks(fixture_store):
    return D.load_table(fixture_store, "masks", _name("talos"))


def test_method_colors_are_stable_and_distinct():
    assert F.method_color("talos") == F.METHOD_COLORS["talos"]
    assert F.method_color("brand-new") == F.method_color("brand-new")
    known = [F.method_color(m) for m in ("talos", "nonlinear", "linearized", "llora", "lota", "ties", "dare",
                                         "breadcrumbs", "tall_consensus", "tsv", "iso_c", "iso_cts", "lines")]
    assert len(set(known)) == len(known)
    assert F.MARK_COLOR not in known  # red is reserved for marks


def test_mask_density_grid_and_heatmap(masks):
    sub = masks[masks["task"] == TASKS[0]]
    grid = F.mask_density_grid(sub)
    # cell = Σ trainable / Σ numel
    row = sub[(sub["block"] == 1) & (sub["layer_type"] == "mlp_in")]
    assert grid.loc["mlp_in", "1"] == pytest.approx(row["trainable"].sum() / row["numel"].sum())
    assert list(grid.columns) == ["outside", "0", "1"]
    assert grid.index[0] == "embedding"
    fig = F.mask_density_heatmap(sub, zmax=0.9)
    hm = fig.data[0]
    np.testing.assert_allclose(np.asarray(hm.z, dtype=float), grid.to_numpy(), equal_nan=True)
    assert hm.zmax == 0.9 and hm.zmin == 0.0
    assert list(hm.y) == [F.layer_label(t) for t in grid.index]  # the names a person reads
    assert "attention output" in list(hm.y) and "no block" in list(hm.x)


def test_mask_density_bars_one_series_per_group(masks):
    both = D.masks_with({"talos": masks, "lota": masks.assign(trainable=masks["trainable"] // 2)})
    fig = F.mask_density_bars(both[both["task"] == TASKS[0]], group="method", by="block")
    assert [t.name for t in fig.data] == ["TaLoS", "LoTA"]
    assert fig.data[0].marker.color == F.method_color("talos")
    assert fig.data[1].y[1] < fig.data[0].y[1]
    fig2 = F.mask_density_bars(masks, group="task", by="layer_type", colors={TASKS[0]: "#000000"})
    assert len(fig2.data) == len(TASKS) and fig2.data[0].marker.color == "#000000"
    assert next(iter(fig2.data[0].x)) == "embedding"
    with pytest.raises(TalosError, match="by must be"):
        F.mask_density_bars(masks, by="tensor")


def test_mask_iou_heatmap_and_cross_method(fixture_store):
    iou = D.load_mask_iou(fixture_store, _name("talos"))
    fig = F.mask_iou_heatmap(iou.tasks, iou.matrix)
    np.testing.assert_allclose(np.asarray(fig.data[0].z), iou.matrix)
    tbl = D.load_mask_iou(fixture_store, _name("talos", "vs", "lota"))
    fig = F.cross_method_iou_bars(tbl, ["talos", "lota"])
    assert list(fig.data[0].y) == tbl["iou"].tolist()
    with pytest.raises(TalosError, match="does not match"):
        F.mask_iou_heatmap(["a"], [[1, 0], [0, 1]])


def test_xi_heatmap_region_box_is_red_and_clipped(fixture_store):
    p = D.load_disentanglement(fixture_store, _name("talos", TASKS[0], TASKS[1]))
    fig = F.xi_heatmap(p["alphas1"], p["alphas2"], p["xi"], task1=TASKS[0], task2=TASKS[1],
                       search_region=p["search_region"], zmax=2.0)
    hm = fig.data[0]
    np.testing.assert_allclose(np.asarray(hm.z), p["xi"])
    assert list(hm.x) == p["alphas2"].tolist() and list(hm.y) == p["alphas1"].tolist()
    assert hm.zmax == 2.0 and hm.zmin == 0.0
    (box,) = fig.layout.shapes
    assert box.line.color == F.MARK_COLOR
    # region [0, 10] clipped to the [-3, 3] grid
    assert (box.x0, box.x1, box.y0, box.y1) == (0.0, 3.0, 0.0, 3.0)
    assert len(F.xi_heatmap([0, 1], [0, 1], [[0, 0], [0, 0]], search_region=[5, 6]).layout.shapes) == 0
    with pytest.raises(TalosError, match="grid is"):
        F.xi_heatmap([0, 1], [0, 1, 2], [[0, 0], [0, 0]])


def test_xi_side_by_side_shares_one_colour_scale(fixture_store):
    panels = [D.load_disentanglement(fixture_store, _name(m, TASKS[0], TASKS[1])) for m in ("talos", "nonlinear")]
    fig = F.xi_side_by_side(panels)
    assert len(fig.data) == 2
    assert all(t.coloraxis == "coloraxis" for t in fig.data)
    expected = max(float(np.max(p["xi"])) for p in panels)
    assert fig.layout.coloraxis.cmax == pytest.approx(expected)
    assert fig.layout.coloraxis.cmin == 0.0
    assert len(fig.layout.shapes) == 2
    assert {s.xref for s in fig.layout.shapes} == {"x", "x2"}
    np.testing.assert_allclose(np.asarray(fig.data[1].z), panels[1]["xi"])
    assert F.xi_side_by_side(panels, zmax=5.0).layout.coloraxis.cmax == 5.0


def test_localization_heatmap_marks_diagonal_in_red(fixture_store):
    mats = [D.load_localization(fixture_store, _name(m)) for m in ("talos", "nonlinear")]
    lo, hi = F.shared_range(*[m.matrix for m in mats])
    assert lo == pytest.approx(min(m.matrix.min() for m in mats))
    assert hi == pytest.approx(max(m.matrix.max() for m in mats))
    fig = F.localization_heatmap(mats[0].tasks, mats[0].matrix, zmin=lo, zmax=hi)
    hm = fig.data[0]
    np.testing.assert_allclose(np.asarray(hm.z), mats[0].matrix)
    assert (hm.zmin, hm.zmax) == (lo, hi)
    shapes = fig.layout.shapes
    assert len(shapes) == len(TASKS)
    assert all(s.line.color == F.MARK_COLOR for s in shapes)
    assert [(s.x0 + s.x1) / 2 for s in shapes] == [0.0, 1.0, 2.0]
    assert [(s.y0 + s.y1) / 2 for s in shapes] == [0.0, 1.0, 2.0]
    assert fig.layout.yaxis.autorange == "reversed"  # row 0 on top


def test_sharing_heatmap(fixture_store):
    sh = D.load_sharing(fixture_store, _name("prune"))
    fig = F.sharing_heatmap(sh.tasks, sh.matrix, mode="prune")
    np.testing.assert_allclose(np.asarray(fig.data[0].z), sh.matrix)
    assert len(fig.layout.shapes) == len(sh.tasks)


def test_arithmetic_bars_with_reference_markers():
    fig = F.arithmetic_bars(list(TASKS), [0.5, 0.6, 0.7], zero_shot=[0.1, 0.2, 0.3],
                            single_task=[0.9, 0.95, 0.8], method="talos")
    bars, zs, st, mean = fig.data
    assert list(bars.y) == [0.5, 0.6, 0.7] and list(bars.x) == list(TASKS)
    assert bars.marker.color == F.method_color("talos")
    assert zs.name == "zero-shot" and list(zs.y) == [0.1, 0.2, 0.3]
    assert st.name == "single-task fine-tuned" and list(st.y) == [0.9, 0.95, 0.8]
    # the values at the bars' feet, the mean named in the legend: nothing written where the markers are
    assert bars.insidetextanchor == "start" and bars.textposition == "inside"
    assert list(bars.text) == ["0.50", "0.60", "0.70"]
    assert mean.name == "mean 0.600" and mean.line.dash == "dash" and not fig.layout.annotations
    assert fig.layout.shapes[0].y0 == pytest.approx(0.6)
    with pytest.raises(TalosError, match="accuracies for"):
        F.arithmetic_bars(["a"], [0.1, 0.2])


def test_alpha_curve_marks_selected_alpha(fixture_store):
    add = D.load_addition(fixture_store, _name("talos"))
    curve = D.average_curve(add)
    fig = F.alpha_curve(curve, selected_alpha=add.selected_alpha, current_alpha=2.0, method="talos")
    lines = {t.name: t for t in fig.data}
    star = f"selected α = {add.selected_alpha:g} (on val)"
    assert set(lines) == {"val", "test", star, "shown α = 2"}  # both α's named in the legend, none in the plot
    assert not fig.layout.annotations
    assert list(lines[star].x) == [add.selected_alpha]
    assert lines[star].marker.color == F.MARK_COLOR
    val = curve[curve["split"] == "val"].set_index("alpha")["normalized_accuracy"]
    assert lines[star].y[0] == pytest.approx(val.loc[add.selected_alpha])
    ranged = F.alpha_curve(curve, selected_alpha=add.selected_alpha, x_range=(0.0, 2.0))
    assert ranged.layout.xaxis.range[0] < 0 < 2 < ranged.layout.xaxis.range[1] < 2.1
    xs = sorted(s.x0 for s in fig.layout.shapes)
    assert xs == sorted([add.selected_alpha, 2.0])
    red = [s for s in fig.layout.shapes if s.line.color == F.MARK_COLOR]
    assert len(red) == 1 and red[0].x0 == add.selected_alpha


def test_negation_figures(fixture_store):
    neg = D.load_negation(fixture_store, _name("talos"))
    t = neg.targets[0]
    fig = F.negation_bars([t], [0.1], [0.58], control_task=neg.control_task, control_zero_shot=0.6)
    assert list(fig.data[0].y) == [0.1] and list(fig.data[1].y) == [0.58]
    assert fig.layout.shapes[0].y0 == pytest.approx(0.57)  # 95 % of zero-shot control, named in the legend
    assert fig.data[-1].name == "95% of zero-shot control" and not fig.layout.annotations
    assert fig.data[0].insidetextanchor == fig.data[1].insidetextanchor == "start"
    fig = F.negation_curve(neg.table, t, selected_alpha=neg.selected[t], current_alpha=1.0)
    assert any(s.x0 == neg.selected[t] and s.line.color == F.MARK_COLOR for s in fig.layout.shapes)
    with pytest.raises(TalosError, match="no negation results"):
        F.negation_curve(neg.table, "nope")


def test_efficiency_bars(fixture_store):
    eff = D.load_table(fixture_store, "efficiency", _name())
    summ = F.efficiency_summary(eff)
    assert list(summ["method"]) == ["nonlinear", "talos"]
    fig = F.efficiency_bars(eff)
    names = [t.name for t in fig.data]
    assert names == ["forward + backward", "optimizer step", "peak memory", "calibration", "forward + backward",
                     "optimizer step (hatched)"]
    # the legend: two grey entries in their own row between the figure title and the panels' titles
    assert [t.name for t in fig.data if t.showlegend is not False] == names[4:]
    assert {t.marker.color for t in fig.data[4:]} == {"#9a9a9a"} and all(list(t.y) == [0] for t in fig.data[4:])
    assert fig.layout.legend.yref == "container" and fig.layout.legend.yanchor == "top"
    legend_top_px = (1 - fig.layout.legend.y) * fig.layout.height
    assert fig.layout.title.y > fig.layout.legend.y and legend_top_px + 24 < fig.layout.margin.t - 20
    fwd = fig.data[0]
    np.testing.assert_allclose(list(fwd.y), (summ["fwd_bwd_s_mean"] * 1000).tolist())
    assert list(fwd.marker.color) == [F.method_color("nonlinear"), F.method_color("talos")]
    assert fig.layout.barmode == "stack"
    np.testing.assert_allclose(list(fig.data[2].y), summ["peak_memory_mb"].tolist())


def test_efficiency_summary_aggregates_like_the_comparison_table():
    """Peak memory is the largest over tasks and step times are pooled over all iterations of all tasks,
    as in the comparison table beside the chart (reports.efficiency_summary), not plain means."""
    from talos_core.evaluation.reports import efficiency_summary as pooled

    eff = pd.DataFrame({"method": ["talos", "talos"], "task": ["a", "b"], "steps": [10, 30],
                        "fwd_bwd_s_mean": [1.0, 2.0], "fwd_bwd_s_std": [0.0, 0.0], "opt_s_mean": [0.1, 0.1],
                        "opt_s_std": [0.0, 0.0], "calibration_s": [4.0, 6.0], "peak_memory_mb": [100.0, 300.0]})
    summ = F.efficiency_summary(eff)
    ref = pooled(eff)["talos"]
    assert summ.loc[0, "peak_memory_mb"] == 300.0 == ref["peak_memory_mb"]
    assert summ.loc[0, "fwd_bwd_s_mean"] == pytest.approx(1.75) == ref["fwd_bwd_s_mean"]
    assert summ.loc[0, "fwd_bwd_s_std"] == pytest.approx(ref["fwd_bwd_s_std"]) and ref["fwd_bwd_s_std"] > 0
    assert summ.loc[0, "calibration_s"] == 5.0


def test_comparison_table_marks_only_bests_the_intervals_separate(fixture_store):
    comp = D.load_table(fixture_store, "comparison", _name())
    best = F.best_per_column(comp)
    assert comp.loc[best["addition_norm"], "addition_norm"] == comp["addition_norm"].max()
    assert comp.loc[best["negation_target"], "negation_target"] == comp["negation_target"].min()
    assert comp.loc[best["time_per_step_s"], "method"] == "talos"
    table = F.comparison_table(comp)  # no intervals stored: nothing is separated, nothing marked
    assert table.best == {} and "font-weight: bold" not in table.styler().to_html()
    assert table.cells.columns[0] == "Method" and table.cells["Method"].tolist() == ["Non-linear FT", "TaLoS"]
    assert not any("_" in c for c in table.cells.columns)
    apart = comp.assign(addition_norm_lo=comp["addition_norm"] - 0.001, addition_norm_hi=comp["addition_norm"] + 0.001,
                        addition_abs_lo=comp["addition_abs"] - 0.5, addition_abs_hi=comp["addition_abs"] + 0.5)
    table = F.comparison_table(apart)  # narrow intervals separate the normalized accuracies, wide ones do not
    assert table.best == {"Addition: normalized accuracy (%)": int(best["addition_norm"])}
    assert "font-weight: bold" in table.styler().to_html()


def test_comparison_cells_show_the_interval_beside_each_mean():
    """Pure builder of the comparison table shown on the Efficiency page: "45.00% [41.2, 48.9]" where the
    table has a mean's interval, the mean alone where it has none (stores written before intervals)."""
    df = pd.DataFrame({"method": ["talos", "ties"], "addition_abs": [0.45, 0.5], "addition_abs_lo": [0.412, None],
                       "addition_abs_hi": [0.489, None], "negation_target": [0.2, float("nan")],
                       "negation_target_lo": [0.15, 0.1], "negation_target_hi": [0.25, 0.3],
                       "time_per_step_s": [0.0125, None], "peak_memory_mb": [900.0, None]})
    cells = F.comparison_cells(df)
    assert list(cells.columns) == ["method", "addition_abs", "negation_target", "time_per_step_s", "peak_memory_mb"]
    assert cells.loc[0].tolist() == ["talos", "45.00% [41.2, 48.9]", "20.00% [15.0, 25.0]", "12.5 ms", "900 MB"]
    assert cells.loc[1].tolist() == ["ties", "50.00%", "—", "—", "—"]  # no interval / no mean
    assert F.has_intervals(df)
    plain = df.drop(columns=[c for c in df.columns if c.endswith(("_lo", "_hi"))])
    assert not F.has_intervals(plain)
    assert F.comparison_cells(plain).loc[0, "addition_abs"] == "45.00%"
    table = F.comparison_table(df)  # headers carry the units, cells the numbers
    assert table.cells.loc[0, "Addition: absolute accuracy (%)"] == "45.00 [41.2, 48.9]"
    assert table.cells.loc[0, "Time per step (ms)"] == "12.5"
    assert F.best_per_column(df)["addition_abs"] == 1 and table.best == {}  # ties has no interval: not separated


def test_sparsity_and_linearization_figures(fixture_store):
    tbl = D.load_table(fixture_store, "sparsity_ablation", _name("talos"))
    fig = F.sparsity_curve(tbl, method="talos")
    assert list(fig.data[0].x) == sorted(tbl["sparsity"])
    lin = D.load_table(fixture_store, "linearization", _name())
    fig = F.linearization_scatter(lin)
    assert len(fig.data) == 2


def test_published_numbers_are_labelled():
    t = F.published_addition_table()
    assert (t["source"].str.contains("published")).all()
    assert t.set_index("method").loc["talos", "addition_abs"] == pytest.approx(0.7967)
    fig = F.published_addition_bars()
    assert "PUBLISHED" in fig.layout.title.text
    assert all("published" in tr.name for tr in fig.data)


def test_bad_inputs_raise_talos_error():
    with pytest.raises(TalosError, match="2-D"):
        F.localization_heatmap(["a"], [1.0])
    with pytest.raises(TalosError, match="missing columns"):
        F.mask_density_grid(pd.DataFrame({"block": [0]}))
    with pytest.raises(TalosError, match="at least one panel"):
        F.xi_side_by_side([])


def test_localization_colour_scale_is_white_at_one():
    fig = F.localization_heatmap(["a", "b"], [[2.0, 0.9], [0.95, 3.0]], zmin=0.5, zmax=3.0)
    scale = [list(c) for c in fig.data[0].colorscale]
    white = [c for c in scale if c[1] == "#f7f7f7"]
    assert white and white[0][0] == pytest.approx((1.0 - 0.5) / (3.0 - 0.5))
    assert scale[-1][1] == "#2166ac"  # above 1 (better than zero-shot) is blue


def test_efficiency_bars_say_when_peak_memory_is_not_one_measure(fixture_store):
    """A GPU's allocated memory beside a CPU process's resident set: the memory panel names both kinds instead of
    the first method's (which labelled a CPU's RSS as GPU memory on a store timed on both)."""
    eff = D.load_table(fixture_store, "efficiency", _name()).assign(peak_memory_kind="peak_rss_since_reset")
    one = F.efficiency_bars(eff)
    assert "peak memory (MB, peak RSS)" in [a.text for a in one.layout.annotations]
    eff.loc[eff["method"] == "talos", "peak_memory_kind"] = "cuda_max_memory_allocated"
    titles = [a.text for a in F.efficiency_bars(eff).layout.annotations]
    assert "peak memory (MB, kinds differ)" in titles
    assert F.memory_kinds(eff) == "not one measure: peak RSS / GPU, max. allocated"  # the page's caption
