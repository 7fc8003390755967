"""Streamlit rendering of the example galleries (the pure parts are :mod:`dashboard.figures_examples`)."""

from __future__ import annotations

import streamlit as st

from dashboard import figures_examples, ui
from dashboard.plain import md
from talos_core.errors import TalosError
from talos_core.result_arrays import ExampleSet


def missing_note(method: str) -> None:
    """What to run when a store has no per-example predictions for ``method``."""
    st.caption(f"No per-example predictions for {md(method)} in this store: compute them with "
               "`talos examples --store <store>` (needs the runs' task vectors) to see the examples behind "
               "these numbers.")


def show(g: figures_examples.Gallery, key: str, *, title: str | None = None) -> None:
    """One task's gallery: a heading naming the model shown (exact or first-order, :attr:`Gallery.model`) and a
    summary, the note saying where its predictions come from, then thumbnails (images) or a table (texts), changed
    ones marked."""
    head = f"**{md(title)}** · {md(g.model)}" if title else md(g.model)
    st.markdown(f"{head} — {md(figures_examples.summary(g))}")
    (st.caption if g.source == "exact" else st.info)(md(g.note))
    if g.modality == "image" and g.thumbnails is not None:
        st.image(figures_examples.tiles(g), caption=figures_examples.captions(g), width=76, output_format="PNG")
        st.caption("Frame: green = right, red = wrong; amber outer frame = prediction changed from zero-shot. "
                   "Caption: true → predicted (was: the zero-shot prediction).")
        with ui.expander("As a table", key=f"{key}.astable") as shown:
            if shown:
                ui.table(figures_examples.styled(g.table.drop(columns=["input"])), f"examples_{g.task}",
                         key=f"{key}.tbl", raw=g.table)
    else:  # the snippets shown last, so the labels and the status stay in view in the half-width negation columns
        ui.table(figures_examples.styled(g.table), f"examples_{g.task}", key=f"{key}.tbl", raw=g.table,
                 column_order=[c for c in g.table.columns if c != "input"] + ["input"])
        st.caption("Amber rows: the prediction changed from zero-shot (forgotten = was right, learned = now "
                   "right, changed = another wrong class). Red: a wrong prediction.")


def task_picker(ex: ExampleSet, tasks: list[str], key: str, label: str = "Examples of task") -> str | None:
    have = [t for t in tasks if t in ex.eval_tasks]
    return ui.pick(label, have, key) if have else None


def exact_on_demand(g: figures_examples.Gallery, ex: ExampleSet, root, name: str, alphas: dict[str, float],
                    key: str, *, say_why: bool = True) -> figures_examples.Gallery:
    """``g``, or — when it is not the exact model and the store keeps the runs' task vectors — a button that
    evaluates the exact model at ``alphas`` (task → α; a negated task: a negative α) on ``g``'s examples, and then the
    exact gallery. Off (a sentence, unless ``say_why`` is False: a second gallery of the same edit) in read-only mode
    and where the store keeps manifests only."""
    if g.source == "exact":
        return g
    from dashboard.access import ServerConfig
    from talos_core.evaluation.examples import vectors_missing
    from talos_core.store import Store

    done_key = f"_exact.{name}.{g.task}.{sorted(alphas.items())}"
    got = st.session_state.get(done_key)
    if got is not None:
        return figures_examples.exact_gallery(ex, g.task, got, list(alphas.values()))
    problem = vectors_missing(Store(root), ex)
    if problem is None and ServerConfig.from_env().read_only:
        problem = "this server runs in read-only mode and computes nothing"
    if problem:
        if say_why:
            st.caption(f"The exact model at these α's cannot be evaluated here: {md(problem, at_start=False)}.")
        return g
    if st.button(f"Evaluate the exact model at {md(g.asked)} on these {len(g.table)} examples", key=f"{key}.exact",
                 icon=":material/model_training:"):
        from dashboard.data import exact_predictions

        try:
            with st.spinner("Evaluating the exact model (the first time loads the model: seconds)…"):
                st.session_state[done_key] = exact_predictions(root, name, ex, g.task, alphas)
        except TalosError as exc:
            ui.show_problem(exc)
            return g
        return figures_examples.exact_gallery(ex, g.task, st.session_state[done_key], list(alphas.values()))
    return g
