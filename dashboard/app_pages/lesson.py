"""Lesson: a guided sequence for a workshop on a projector (1280×720), one idea per screen.

Each step shows the idea and a question for the room; the next click reveals the answer, the chart and the examples
behind it. The → / ← keys (and PageDown / PageUp, what presentation clickers send) walk forward and back; the URL
keeps the position (``?step=3&reveal=1``) and the α's (``alpha``, ``nalpha``), so a link or a reload opens the same
screen. The content, every number read from the store, is :mod:`dashboard.lesson`.
"""

from __future__ import annotations

import streamlit as st

from dashboard import data, examples_ui, figures_examples, lesson_keys, protocol, ui
from dashboard import lesson as L
from talos_core.errors import TalosError
from talos_core.schema import MissingResult, method_label

st.set_page_config(initial_sidebar_state="collapsed")  # the projector needs the width; the sidebar is one click away

#: large type for the room; the title row and the chart start high on the screen; the keyboard component takes no
#: room
CSS = """<style>
[data-testid="stMainBlockContainer"] { padding: 3.9rem 1.6rem 1rem 1.6rem; max-width: none; }
[data-testid="stMainBlockContainer"] h1 { font-size: 2.05rem; padding: 0.2rem 0 0 0; line-height: 1.25; }
.st-key-lesson_text p, .st-key-lesson_text li { font-size: 1.3rem; line-height: 1.42; }
.st-key-lesson_text [data-testid="stAlert"] p { font-size: 1.32rem; line-height: 1.42; }
.st-key-lesson_text .st-key-lesson_answer p { font-size: 1.22rem; line-height: 1.38; }
.st-key-lesson_examples p { font-size: 1.05rem; }
.st-key-lesson_examples [data-testid="stImageCaption"] { font-size: 0.95rem; }
.st-key-lesson_examples table td, .st-key-lesson_examples table th { font-size: 1.0rem; padding: 0.2rem 0.4rem; }
.st-key-lesson_keys { display: none; }
</style>"""

ctx = ui.context()
st.html(CSS)

step, revealed = L.parse_position(st.query_params.get("step"), st.query_params.get("reveal"))
if (st.query_params.get("step"), st.query_params.get("reveal")) != (str(step), "1" if revealed else "0"):
    st.query_params["step"], st.query_params["reveal"] = str(step), "1" if revealed else "0"


def _go(delta: int) -> None:
    """A click forward or back, from the position the URL holds now (the callback runs before the rerun)."""
    s, r = L.parse_position(st.query_params.get("step"), st.query_params.get("reveal"))
    s, r = L.move(s, r, delta)
    st.query_params["step"], st.query_params["reveal"] = str(s), "1" if r else "0"


def _jump() -> None:
    """The step picker: open the chosen step's question."""
    picked = st.session_state.get("lesson_steps")
    if picked is not None:
        st.query_params["step"], st.query_params["reveal"] = str(picked), "0"


def _set_alpha(param: str, key: str) -> None:
    st.query_params[param] = L.num(st.session_state[key])


# the layout first (containers are filled below, the settings before the screen that depends on them)
head, body, nav, foot = st.container(), st.container(), st.container(), st.container()

with foot:
    settings = st.expander("Lesson settings: methods and task pair", icon=":material/tune:")
methods = L.methods_of(ctx.idx, ctx.suite, ctx.model)
if not methods:
    ui.stop_on_problem(MissingResult(f"the lesson needs addition results; this store has none for {ctx.model} in "
                                     f"suite {ctx.suite}"))
with settings:
    c1, c2, c3 = st.columns(3)
    first = ui.pick_method("Steps 1–4 use", methods, "lfirst", default="nonlinear", container=c1)
    method = ui.pick_method("Steps 5–6 introduce", methods, "lmethod", default="talos", container=c2)
    pairs = L.pairs_of(ctx.idx, ctx.suite, ctx.model, first, data.suite_record(ctx.root, ctx.suite)[0])
    pair_text = ui.pick("Task pair (steps 4 and 6)", [f"{a} + {b}" for a, b in pairs], "lpair", container=c3)
    st.caption("The lesson reads the sidebar's store, suite and model (open the sidebar with the arrow at the top "
               "left). Keys: → or PageDown = forward (answer, then next step), ← or PageUp = back.")

word = "stage" if ui.block_word(ctx.model).startswith("stage") else "block"


def _flags() -> list:
    """The audit's flags on this suite (none where the suite record cannot be read: the sidebar says why)."""
    try:
        return data.audit_flags(ctx.root, ctx.suite)
    except TalosError:
        return []


def _get(kind: str, name: str):
    if kind == "examples":
        return data.get_examples(ctx.root, name)
    return data.try_get(kind, ctx.root, name)


try:
    lesson = L.load_lesson(ctx.idx, _get, ctx.suite, ctx.model, method=method, first=first,
                           pair=tuple(pair_text.split(" + ")) if pair_text else None, block_word=word,
                           flags=_flags())
    scr = L.screen(lesson, step, reveal=revealed, alpha=st.query_params.get("alpha"),
                   nalpha=st.query_params.get("nalpha"))
except TalosError as exc:
    ui.stop_on_problem(exc)

with head:
    left, right = st.columns([8, 4], vertical_alignment="center")
    left.title(f"{step} / {L.N_STEPS} · {ui.md(scr.title, at_start=False)}")
    with right:
        b1, b2 = st.columns([2, 3])
        b1.button("← Back", key="lesson_back", on_click=_go, args=(-1,), disabled=(step, revealed) == (1, False),
                  width="stretch")
        forward = "Show the answer →" if not revealed else ("Next step →" if step < L.N_STEPS else "The end")
        b2.button(forward, key="lesson_next", on_click=_go, args=(+1,), type="primary",
                  disabled=(step, revealed) == (L.N_STEPS, True), width="stretch")
    lesson_keys.mount(forward="lesson_next", back="lesson_back")


def _gallery(title: str, g, *, limit: int, width: int) -> None:
    """One gallery on the projector: a line, then the examples whose prediction changed first (thumbnails, or a
    short table of snippets)."""
    source = L.gallery_source(g)
    st.markdown(f"**{ui.md(title)}**: {ui.md(L.gallery_line(g))}")
    if source != L.EXACT:
        st.badge(source, color="orange", help=L.SOURCE_WORDS[source])
        st.caption(ui.md(g.note))
    shown = L.changed_first(g, limit)
    if g.modality == "image" and shown.thumbnails is not None:
        st.image(figures_examples.tiles(shown), caption=figures_examples.captions(shown), width=width,
                 output_format="PNG")
    else:
        rows = shown.table.assign(input=shown.table["input"].str.slice(0, 90))
        st.table(rows[["input", "true", "zero-shot", "predicted"]].rename(
            columns={"zero-shot": "before", "predicted": "after"}).set_index("input"))


def _examples(galleries: list, note: str) -> None:
    """The examples behind the screen: those whose prediction changed first, one row of thumbnails or a few
    snippets per gallery (two image galleries side by side, text ones one above the other); all of them one click
    away."""
    if not galleries:
        if note:
            st.caption(note)
        return
    images = all(g.modality == "image" and g.thumbnails is not None for _, g in galleries)
    if images:
        for col, (title, g) in zip(st.columns(len(galleries)), galleries):
            with col:
                _gallery(title, g, limit=10 if len(galleries) == 1 else 4, width=64 if len(galleries) == 1 else 76)
        st.caption("Green frame = right, red = wrong, amber = the prediction changed (caption: true → predicted, "
                   "was: before). Changed examples first.")
    else:
        for title, g in galleries:
            _gallery(title, g, limit=3 if len(galleries) == 1 else 2, width=64)
        st.caption("Before = the pre-trained model θ0; changed examples first.")
    with ui.expander("All the examples", key=f"lesson_allex_{step}") as shown_all:
        if shown_all:
            for i, (title, g) in enumerate(galleries):
                examples_ui.show(g, f"lesson_ex_{step}_{i}", title=title)


with body:
    left, right = st.columns([5, 7], gap="large")
    with left.container(key="lesson_text"):
        if scr.missing:
            st.info(scr.missing)
        if not revealed:
            for line in scr.idea:
                st.markdown(line)
            st.info(f"**Question for the room.** {scr.question}", icon=":material/forum:")
        else:
            st.markdown(f"*{scr.question}*")
            with st.container(key="lesson_answer"):
                st.success("\n\n".join(scr.answer) if scr.answer else "—", icon=":material/lightbulb:")
        if scr.control is not None:  # the live part: the answer, the chart and the examples follow this α
            key = f"lesson_{scr.control.param}"
            st.session_state[key] = scr.control.value
            st.select_slider(ui.md(scr.control.label), scr.control.options, key=key, format_func=L.num,
                             on_change=_set_alpha, args=(scr.control.param, key))
    with right:
        if scr.figure is not None:
            ui.chart(scr.figure, f"lesson_{scr.key}", key=f"lesson_{scr.key}", export=False)
        if revealed:
            with st.container(key="lesson_examples"):
                _examples(scr.galleries, scr.examples_note)

with nav:
    st.divider()
    st.session_state["lesson_steps"] = step
    st.pills("Steps", list(range(1, L.N_STEPS + 1)), key="lesson_steps", on_change=_jump,
             label_visibility="collapsed", format_func=lambda n: f"{n} · {L.STEPS[n - 1][0]}")

with foot, ui.expander("The numbers on this screen, and how they were made", key="lesson_protocol",
                       icon=":material/rule:") as shown:
    if shown:
        if scr.table is not None:
            ui.table(scr.table, f"lesson_{ctx.suite}_{scr.key}", key="lesson_tbl")
        record = lesson.suite_record
        summary = protocol.protocol_summary(record, test_examples=data.example_counts(ctx.root, ctx.name()),
                                            **L.protocol_inputs(lesson))
        st.markdown(f"**Protocol:** {summary.headline}")
        st.markdown(summary.markdown())
        st.caption(f"Suite {ui.md(ctx.suite)}, model {ui.md(ctx.model)}; steps 1–4 follow "
                   f"{ui.md(method_label(lesson.first))}, steps 5–6 {ui.md(method_label(lesson.method))}. "
                   + ui.md(L.SOURCE_WORDS[L.EXACT]).capitalize() + ".")
