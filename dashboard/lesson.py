"""The lesson mode's content as pure functions (no Streamlit): six screens for a workshop, every number read from a
results store.

A lesson is a path through the store's results for one suite and model (:func:`load_lesson`): the standard
fine-tuning vectors (``nonlinear``, "the usual way") for the first four ideas, the sparse method (TaLoS) for the last
two. :func:`screen` turns it into one screen of the projector: a title, the idea in a few short sentences, a question
for the room, the answer (computed from the store, shown after the reveal), the chart, the examples behind it and the
table of numbers. Every chart in the lesson reads stored, exact results; a gallery says when its predictions are the
first-order model's instead (:data:`EXACT`, :data:`FIRST_ORDER`).

The position in the lesson is a step (1–6) and whether its answer is shown; :func:`move` walks through them as a
presentation clicker does (reveal, then the next step).

The lesson's model (steps, :class:`Lesson`, :class:`Screen`, the words for numbers) is ``lesson_core``; the six
screens' content is ``lesson_screens``. This module adds the examples as a projector shows them and re-exports the
public names of both (a function is patched for a test in its own module, not here).

>>> move(1, False, +1, 6), move(1, True, +1, 6), move(2, False, -1, 6), move(6, True, +1, 6)
((1, True), (2, False), (1, True), (6, True))
>>> pct(0.7234), points(0.723 - 0.652)
('72\xa0%', '+7 points')
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dashboard.figures_examples import Gallery
from dashboard.lesson_core import (
    CHART_FONT,
    CHART_HEIGHT,
    EXACT,
    FIRST_ORDER,
    LAYER_WORDS,
    MAP_HEIGHT,
    N_STEPS,
    SOURCE_WORDS,
    STEPS,
    AlphaControl,
    Getter,
    Lesson,
    Screen,
    addition_alpha,
    load_lesson,
    methods_of,
    move,
    negation_alpha,
    negation_target,
    num,
    pairs_of,
    parse_position,
    pct,
    points,
    projector,
    snap_alpha,
    store_getter,
)
from dashboard.lesson_screens import (
    COMPARED,
    audit_words,
    comparison_bars,
    mask_facts,
    screen,
    task_bars,
    xi_at,
    xi_marked,
)

__all__ = ["AlphaControl", "CHART_FONT", "CHART_HEIGHT", "COMPARED", "EXACT", "FIRST_ORDER", "Getter", "LAYER_WORDS",
           "Lesson", "MAP_HEIGHT", "N_STEPS", "SOURCE_WORDS", "STEPS", "Screen", "addition_alpha", "audit_words",
           "changed_first", "comparison_bars", "gallery_line", "gallery_source", "load_lesson", "mask_facts",
           "methods_of", "move", "negation_alpha", "negation_target", "num", "pairs_of", "parse_position", "pct",
           "points", "projector", "protocol_inputs", "screen", "snap_alpha", "store_getter", "task_bars", "xi_at",
           "xi_marked"]


# --------------------------------------------------------------------------------------------
# the examples on a projector
# --------------------------------------------------------------------------------------------
def changed_first(g: Gallery, limit: int) -> Gallery:
    """``g`` with at most ``limit`` examples, those whose prediction changed first (the ones the screen is about),
    then the others in stored order."""
    order = np.argsort((g.table["status"] == "").to_numpy(), kind="stable")[:limit]
    thumbs = None if g.thumbnails is None else g.thumbnails[order]
    pred = None if g.predicted is None else g.predicted[order]
    return Gallery(g.task, g.modality, g.table.iloc[order].reset_index(drop=True), g.source, g.alpha, g.note, pred,
                   thumbs)


def gallery_line(g: Gallery) -> str:
    """A gallery in one short line: ``"16 of 24 changed · 9 right (before: 19)"``."""
    t = g.table
    right, before = int((t["predicted"] == t["true"]).sum()), int((t["zero-shot"] == t["true"]).sum())
    return f"{g.changed} of {len(t)} changed · {right} right (before: {before})"


def gallery_source(g: Gallery) -> str:
    """:data:`EXACT` or :data:`FIRST_ORDER` (a linearized or nearest-grid-point gallery is not the exact model at
    the asked α)."""
    return EXACT if g.source == "exact" else FIRST_ORDER


def protocol_inputs(lesson: Lesson) -> dict[str, Any]:
    """The keyword arguments of :func:`dashboard.protocol.protocol_summary` for what the lesson shows."""
    return {"alpha_grids": {m: list(a.alpha_grid) for m, a in lesson.addition.items()},
            "xi": [{"alphas1": list(p["alphas1"]), "alphas2": list(p["alphas2"]),
                    "points_per_task": p.get("points_per_task")} for p in lesson.xi.values()],
            "methods": list(dict.fromkeys([lesson.first, lesson.method]))}
