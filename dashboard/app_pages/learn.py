"""Learn: the ideas behind task arithmetic and TaLoS, each next to a live figure from the loaded store."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import streamlit as st

from dashboard import data, figures, protocol, ui
from dashboard.views import addition_view, negation_view
from talos_core.errors import TalosError
from talos_core.schema import MissingResult, method_label, parse_result_name

ctx = ui.context()
st.title("Learn: task arithmetic, disentanglement, localization")

known = set()
for kind in ("addition", "negation", "disentanglement", "localization", "masks"):
    known |= set(ctx.methods(kind))
methods = data.order_methods(known)
if not methods:
    ui.stop_on_problem(MissingResult(f"no per-method results for {ctx.model} in suite {ctx.suite}"))
c1, c2 = st.columns(2)
method = ui.pick_method("Method", methods, "method", default="talos", container=c1)
others = [m for m in methods if m != method]
baseline = (ui.pick_method("Compare with", others, "baseline", default="nonlinear", container=c2)
            if others else None)
single = data.try_get("single", ctx.root, ctx.name()) if ctx.has("single") else None


@st.cache_data(show_spinner=False, max_entries=64)
def _protocol(_ctx: ui.Context, root: str, suite: str, model: str, listing: tuple) -> protocol.ProtocolSummary:
    """What the store records about the protocol behind its results (suite record + stored results). It reads
    every result of the suite and model: computed once for all sessions, again when the store's listing changes
    (``listing``: :func:`dashboard.data.store_signature`)."""
    ctx = _ctx

    def metas(kind: str) -> dict:
        out = {}
        for m in ctx.methods(kind):
            try:
                out[m] = data.get(kind, ctx.root, ctx.name(m)).meta
            except TalosError:
                continue
        return out

    grids = {}
    for m in ctx.methods("addition"):
        try:
            grids[m] = list(data.get("addition", ctx.root, ctx.name(m)).alpha_grid)
        except TalosError:
            continue
    xi = []
    for name in data.available(ctx.idx, "name", kind="disentanglement", suite=ctx.suite, model=ctx.model):
        try:
            p = data.get("disentanglement", ctx.root, name)
        except TalosError:
            continue
        xi.append({"alphas1": list(p["alphas1"]), "alphas2": list(p["alphas2"]),
                   "points_per_task": p.get("points_per_task")})
    try:
        suite = data.suite_record(ctx.root, ctx.suite)[0]
        examples = data.example_counts(ctx.root, ctx.name()) if ctx.has("single") else {}
    except TalosError:
        suite, examples = None, {}
    known = set()
    for kind in ("addition", "negation", "single", "comparison"):
        known |= set(ctx.methods(kind))
    return protocol.protocol_summary(suite if isinstance(suite, dict) else None,
                                     learning_curves=metas("learning_curve"), selections=metas("selection"),
                                     alpha_grids=grids, xi=xi, test_examples=examples, methods=sorted(known))


summary = _protocol(ctx, str(ctx.root), ctx.suite, ctx.model, data.store_signature(ctx.root))
with st.expander(f"How these results were produced: {summary.headline}", icon=":material/rule:"):
    st.markdown(summary.markdown())  # store-supplied values are escaped inside protocol_summary
    st.caption(f"Read from the store's suite record and results (suite {ui.md(ctx.suite)}, model {ui.md(ctx.model)}).")


def section(title: str, text: str, draw: Callable[[], None], *, wide: bool = False) -> None:
    """A heading, a short explanation and its live figure (side by side, or text above a wide figure)."""
    st.subheader(title)
    if wide:
        st.markdown(text)
        right = st.container()
    else:
        left, right = st.columns([2, 3], vertical_alignment="center")
        left.markdown(text)
    with right:
        try:
            draw()
        except TalosError as exc:
            ui.show_problem(exc)


def _task_vectors() -> None:
    if single is None:
        raise MissingResult("single-task results are not in this store")
    df = single[(single["method"] == method) & (single["split"] == "test")]
    if df.empty:
        raise MissingResult(f"no single-task results for {method_label(method)}")
    tasks = df["task"].tolist()
    zs, ft = data.single_reference(single, method, tasks)
    ui.chart(figures.arithmetic_bars(tasks, ft, method=method, name=f"{method_label(method)} fine-tuned",
                               zero_shot=zs, title="Exact model, each task vector alone: θ0 + τ_t (test accuracy)"),
             "learn_task_vectors", key="l_tv")


section("1 · Task vectors", r"""
Fine-tune the pre-trained weights $\theta_0$ on task $t$ to get $\theta_t$. The **task vector** is the
difference $\tau_t = \theta_t - \theta_0$: everything the model learned about $t$, as an edit.

The bars are the accuracy of $\theta_0 + \tau_t$ on its own task; the grey dashes are the
**zero-shot** model $\theta_0$. TaLoS trains only a sparse set of weights (those with the *smallest*
gradient sensitivity across tasks), so its $\tau_t$ is mostly zeros.
""", _task_vectors)


def _addition() -> None:
    add = data.get("addition", ctx.root, ctx.name(method))
    view = addition_view(add, {t: add.selected_alpha for t in add.tasks}, single=single, method=method)
    ui.chart(view.exact_fig, "learn_addition", key="l_add")


section("2 · Task addition", r"""
Add all task vectors with one scaling coefficient $\alpha$: $\theta = \theta_0 + \alpha\sum_t \tau_t$.
One model, many tasks — *if* the vectors do not interfere. $\alpha$ is chosen on the validation split
(max. mean **normalized** accuracy = accuracy ÷ the single-task model's accuracy, black diamonds).
Play with $\alpha$ per task on the **Arithmetic** page.
""", _addition)


def _negation() -> None:
    neg = data.get("negation", ctx.root, ctx.name(method))
    view = negation_view(neg, neg.selected, single=single, method=method)
    ui.chart(view.exact_fig, "learn_negation", key="l_neg")


section("3 · Task negation", r"""
Subtract a task vector, $\theta = \theta_0 - \alpha\tau_t$, to make the model **forget** task $t$
(target accuracy drops) while a **control** task is kept (its accuracy must stay above the red
dotted line: 95 % of zero-shot).
""", _negation)


def _xi() -> None:
    pairs = data.available(ctx.idx, "name", kind="disentanglement", suite=ctx.suite, model=ctx.model, method=method)
    if not pairs:
        raise MissingResult(f"no disentanglement results for {method_label(method)}")
    f = parse_result_name("disentanglement", pairs[0])
    panels = [data.get("disentanglement", ctx.root, ctx.name(m, f["task1"], f["task2"]))
              for m in [method, baseline] if m and ctx.has("disentanglement", m, f["task1"], f["task2"])]
    ui.chart(figures.xi_side_by_side(panels, title=f"ξ for {f['task1']} + {f['task2']}: exact model, same colour "
                                                   "scale"),
             "learn_xi", key="l_xi")


section("4 · Weight disentanglement", r"""
Addition works when each task vector only changes the model **on its own task**. The disentanglement
error $\xi(\alpha_1,\alpha_2)$ adds up, over the two tasks $t$, the fraction of task $t$'s inputs on which
$\theta_0+\alpha_1\tau_1+\alpha_2\tau_2$ predicts differently from $\theta_0+\alpha_t\tau_t$: from 0 (no prediction
changes) to 2 (every prediction of both tasks changes). **Dark = disentangled.** The red box is the α range searched
for addition: that is where it must be dark.
""", _xi, wide=True)


def _localization() -> None:
    mats = [(m, data.get("localization", ctx.root, ctx.name(m))) for m in [method, baseline]
            if m and ctx.has("localization", m)]
    if not mats:
        raise MissingResult(f"no localization results for {method_label(method)}")
    lo, hi = figures.shared_range(*[m.matrix for _, m in mats])
    cols = st.columns(len(mats))
    for col, (m, mat) in zip(cols, mats):
        with col:
            ui.chart(figures.localization_heatmap(mat.tasks, mat.matrix, zmin=lo, zmax=hi, title=method_label(m)),
                     f"learn_localization_{m}", key=f"l_loc_{m}")


section("5 · Function localization", r"""
Row = the task a vector was trained on, column = the task evaluated, value = accuracy ÷ zero-shot
accuracy. A **localized** vector is blue on the red-outlined diagonal (its task improves) and white (≈ 1) elsewhere
(other tasks are left alone) — that is exactly what makes addition and negation work.
""", _localization, wide=True)


def _masks() -> None:
    if not ctx.has("masks", method):
        raise MissingResult(f"{method_label(method)} has no masks (dense methods train every weight)")
    masks = data.get("masks", ctx.root, ctx.name(method))
    task = masks["task"].iloc[0]
    ui.chart(figures.mask_density_heatmap(masks[masks["task"] == task],
                                    title=f"{method_label(method)} mask for {task}: trainable fraction"),
             "learn_mask", key="l_mask")


section("6 · Where does TaLoS train?", r"""
TaLoS calibrates a mask before training: it keeps trainable the weights whose gradients are
**consistently small** on the task's data, which barely change the pre-trained function on other
inputs. The heatmap shows the fraction of trainable weights per """ + ui.block_word(ctx.model) + r""" and layer type
(details on the **Masks** page).
""", _masks)

ui.published_reference("Published reference numbers (paper, not measured here)",
                       figures.PUBLISHED_SOURCE + ". These are the paper's numbers for a much larger model and "
                       "8 vision tasks; the results above come from the loaded store.", key="l_pub")

if single is not None:
    zs = single[single["split"] == "test"].drop_duplicates("task")["zero_shot_acc"]
    st.caption(f"Store: {ui.md(ui.for_visitors(str(ctx.root)))} · suite {ui.md(ctx.suite)} · model {ui.md(ctx.model)} "
               "· mean zero-shot "
               "test accuracy "
               f"{float(np.mean(zs)):.3f}")
