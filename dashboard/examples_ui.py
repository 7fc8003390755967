"""Streamlit rendering of the example galleries (the pure parts are :mod:`dashboard.figures_examples`)."""

from __future__ import annotations

import streamlit as st

from dashboard import figures_examples, ui
from dashboard.plain import md
from talos_core.schema import ExampleSet


def missing_note(method: str) -> None:
    """What to run when a store has no per-example predictions for ``method``."""
    st.caption(f"No per-example predictions for {md(method)} in this store: compute them with "
               "`talos examples --store <store>` (needs the runs' task vectors) to see the examples behind "
               "these numbers.")


def show(g: figures_examples.Gallery, key: str, *, title: str | None = None) -> None:
    """One task's gallery: a summary line, then thumbnails (images) or a table (texts), changed ones marked."""
    if title:
        st.markdown(f"**{md(title)}** — {md(figures_examples.summary(g))}")
    else:
        st.markdown(md(figures_examples.summary(g)))
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
