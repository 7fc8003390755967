"""The lesson mode: its plan of steps (:mod:`dashboard.lesson`, pure) on the shipped store, the synthetic store and
stores that lack results, and its page through ``AppTest`` (read-only, as a workshop server runs it)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from dashboard_fixtures import REPO
from streamlit.testing.v1 import AppTest

from dashboard import data
from dashboard import lesson as L
from talos_core.errors import TalosError
from talos_core.schema import MissingResult

SHIPPED = REPO / "cached_results"
SHIPPED_SUITES = {"vision": "efficientnet-lite0", "text": "minilm-l6"}
APP = str(REPO / "dashboard" / "app.py")


def _lesson(root, suite: str, model: str, **kw) -> L.Lesson:
    """The lesson as the page loads it: with the audit's flags of the suite, unless ``flags`` is given."""
    if "flags" not in kw:
        from talos_core.evaluation.audit import audit_suite

        kw["flags"] = audit_suite(root, suite) if (Path(root) / "results" / "suite" / f"{suite}.json").is_file() else ()
    return L.load_lesson(data.store_index(root), L.store_getter(root), suite, model, **kw)


@pytest.fixture(scope="module", params=sorted(SHIPPED_SUITES))
def shipped(request) -> L.Lesson:
    return _lesson(SHIPPED, request.param, SHIPPED_SUITES[request.param])


# --------------------------------------------------------------------------------------------
# position in the lesson
# --------------------------------------------------------------------------------------------
def test_forward_walks_every_question_and_answer_then_stops():
    pos, seen = (1, False), [(1, False)]
    for _ in range(2 * L.N_STEPS + 2):  # two presses past the end
        pos = L.move(*pos, +1)
        seen.append(pos)
    assert seen[: 2 * L.N_STEPS] == [(s, r) for s in range(1, L.N_STEPS + 1) for r in (False, True)]
    assert seen[-3:] == [(L.N_STEPS, True)] * 3
    back = (L.N_STEPS, True)
    for _ in range(2 * L.N_STEPS + 2):
        back = L.move(*back, -1)
    assert back == (1, False)


@pytest.mark.parametrize("step, reveal, want", [("4", "1", (4, True)), ("4", "true", (4, True)), ("0", "0", (1, False)),
                                                ("99", None, (L.N_STEPS, False)), ("two", "yes", (1, True)),
                                                (None, None, (1, False))])
def test_a_url_position_is_read_or_replaced_by_a_valid_one(step, reveal, want):
    assert L.parse_position(step, reveal) == want


def test_an_unknown_step_is_one_sentence(shipped):
    with pytest.raises(TalosError, match="steps 1 to 6, not 7"):
        L.screen(shipped, 7)


# --------------------------------------------------------------------------------------------
# the shipped store: every screen, its numbers read from the store
# --------------------------------------------------------------------------------------------
def test_the_shipped_lesson_follows_standard_fine_tuning_then_talos(shipped):
    record = data.load_suite(SHIPPED, shipped.suite)
    assert (shipped.first, shipped.method, shipped.baseline) == ("nonlinear", "talos", "nonlinear")
    assert (shipped.task1, shipped.task2) == tuple(record["xi_pairs"][0]), "the suite's first declared ξ pair"
    assert shipped.control == record["control_task"]
    assert set(shipped.examples) == {"nonlinear", "talos"} and shipped.masks is not None


@pytest.mark.parametrize("number", range(1, L.N_STEPS + 1))
def test_every_shipped_screen_has_a_question_an_answer_a_labelled_chart_and_examples(shipped, number):
    question = L.screen(shipped, number)
    answer = L.screen(shipped, number, reveal=True)
    assert question.missing is None and answer.missing is None
    assert question.idea and question.question and not question.answer
    assert question.figure.layout.title.text.startswith(("Exact · ", "Stored")), "the question's chart too"
    assert answer.answer and answer.question == question.question
    title = answer.figure.layout.title.text
    assert title.startswith(("Exact · ", "Stored mask · ")), f"every chart says what it shows: {title!r}"
    assert answer.galleries, "the examples behind the answer"
    assert all(L.gallery_source(g) == L.EXACT for _, g in answer.galleries), "at the default α, exact predictions"
    assert answer.table is not None and not answer.table.empty


def test_the_addition_answer_reads_the_store(shipped):
    add = shipped.addition["nonlinear"]
    a, exact = data.addition_at(add, add.selected_alpha)
    s = L.screen(shipped, 2, reveal=True)
    assert s.control.value == add.selected_alpha and s.control.param == "alpha"
    assert f"it keeps **{L.pct(np.mean(exact['normalized_accuracy']))}**" in s.answer[0]
    assert f"α = {L.num(a)}" in s.figure.layout.title.text
    assert list(s.figure.data[0].y) == pytest.approx(exact["accuracy"].tolist())


def test_another_alpha_is_snapped_to_the_grid_and_everything_follows_it(shipped):
    add = shipped.addition["nonlinear"]
    want = float(add.alphas[3])
    s = L.screen(shipped, 2, reveal=True, alpha=str(want + 0.2 * (add.alphas[4] - add.alphas[3])))
    assert s.control.value == want
    assert f"α = {L.num(want)}" in s.figure.layout.title.text and f"At α = {L.num(want)}" in s.answer[0]
    (_, g), = s.galleries
    assert L.gallery_source(g) == L.EXACT and g.alpha == pytest.approx(want)
    xi = L.screen(shipped, 4, reveal=True, alpha=str(want))
    marker = next(t for t in xi.figure.data if t.type == "scatter")
    assert (marker.x[0], marker.y[0]) == (want, want), "the ξ map marks the addition step's α"
    assert L.screen(shipped, 2, reveal=True, alpha="not a number").control.value == add.selected_alpha


def test_the_negation_answer_reads_the_store(shipped):
    neg = shipped.negation["nonlinear"]
    target = shipped.task1
    _a, tacc, cacc = data.negation_at(neg, target, neg.selected[target])
    s = L.screen(shipped, 3, reveal=True)
    assert s.control.param == "nalpha" and s.control.value == neg.selected[target]
    assert f"→ {L.pct(tacc)}" in s.answer[0]
    kept = cacc / neg.control_zero_shot["test"]
    assert f"it keeps **{L.pct(kept)}**" in s.answer[1]
    assert ("kept)" if kept >= 0.95 else "not kept at this α)") in s.answer[1]
    assert [g.task for _, g in s.galleries] == [target, shipped.control]


def test_the_interference_answer_reads_the_stored_map(shipped):
    payload = shipped.xi["nonlinear"]
    a = shipped.addition["nonlinear"].selected_alpha
    xi, p1, _ = L.xi_at(payload, a, a)
    s = L.screen(shipped, 4, reveal=True)
    assert f"ξ = **{xi:.2f}**" in s.answer[0] and f"α = {L.num(p1)}" in s.answer[0]
    (_, g), = s.galleries
    assert f"changes **{g.changed} of {len(g.table)} {shipped.task2}**" in s.answer[-1]


def test_the_mask_answer_reads_the_stored_mask(shipped):
    facts = L.mask_facts(shipped.masks, shipped.task1)
    s = L.screen(shipped, 5)
    assert f"**{L.pct(facts['fraction'], 1)}**" in s.question
    assert s.figure.data[0].type == "bar", "the question shows how much is trained; the map comes with the answer"
    assert s.figure.data[0].text[list(s.figure.data[0].x).index(shipped.task1)] == L.pct(facts["fraction"], 1)
    s = L.screen(shipped, 5, reveal=True)
    assert f"{facts['trainable']:,} of {facts['total']:,} weights" in s.answer[0]
    assert L.LAYER_WORDS[facts["top_type"]] in s.answer[0]
    assert "layernorm" not in s.figure.data[0].y or L.LAYER_WORDS["layernorm"] in s.figure.layout.yaxis.ticktext


def test_the_sparsity_answer_says_what_the_store_says_either_way(shipped):
    comp = shipped.comparison.set_index("method")
    s = L.screen(shipped, 6, reveal=True)
    text = " ".join(s.answer)
    tm, tb = comp.loc["talos", "time_per_step_s"], comp.loc["nonlinear", "time_per_step_s"]
    assert f"{tm:.2f} s vs {tb:.2f} s" in text
    assert ("faster" if tm < tb else "slower") in text, "a slower sparse method is called slower"
    from talos_core.evaluation.audit import audit_suite

    disturbed = {f.row for f in audit_suite(SHIPPED, shipped.suite) if f.check == "timing-disturbed"}
    assert ("step time disturbed" in text) == bool(disturbed & {"talos", "nonlinear"}), "a doubted timing says so"
    # absolute accuracy, never normalized (it rewards a method that learned little: the audit's norm-* checks)
    am, ab = comp.loc["talos", "addition_abs"], comp.loc["nonlinear", "addition_abs"]
    overlap = (comp.loc["talos", "addition_abs_lo"] <= comp.loc["nonlinear", "addition_abs_hi"]
               and comp.loc["nonlinear", "addition_abs_lo"] <= comp.loc["talos", "addition_abs_hi"])
    verdict = "no clear difference" if overlap else ("TaLoS is higher" if am > ab else "TaLoS is lower")
    assert f"{L.pct(am)} vs {L.pct(ab)} test accuracy" in text and verdict in text
    assert "normalized" not in text
    assert [t.name for t in s.figure.data] == ["Non-linear FT", "TaLoS"]


def test_the_sparsity_answer_says_what_the_audit_doubts(shipped):
    """The comparison screen names the audit's flags on the numbers it compares (both shipped suites carry some)."""
    from talos_core.evaluation.audit import audit_suite

    flags = audit_suite(SHIPPED, shipped.suite)
    words = L.audit_words(flags, ["talos", "nonlinear"], [c for c, _ in L.COMPARED])
    assert words, "the shipped suites' compared rows carry flags"
    text = " ".join(L.screen(shipped, 6, reveal=True).answer)
    assert "**Careful**: the audit flags these numbers" in text
    from talos_core.schema import method_label

    for row, titles in words.items():
        assert f"{len(titles)} on {method_label(row)}" in text
    assert next(iter(words.values()))[0] in text
    clean = _lesson(SHIPPED, shipped.suite, shipped.model, flags=())
    assert "Careful" not in " ".join(L.screen(clean, 6, reveal=True).answer)


def test_no_screen_text_carries_a_number_the_store_does_not_hold(shipped):
    """Every percentage the vision and text lessons say differs between the suites: none is written into the code."""
    other = _lesson(SHIPPED, *next((s, m) for s, m in SHIPPED_SUITES.items() if s != shipped.suite))
    for number in range(1, L.N_STEPS + 1):
        mine = L.screen(shipped, number, reveal=True)
        theirs = L.screen(other, number, reveal=True)
        assert " ".join(mine.answer) != " ".join(theirs.answer)


# --------------------------------------------------------------------------------------------
# smaller stores
# --------------------------------------------------------------------------------------------
def test_the_synthetic_store_gives_every_screen(fixture_store):
    from dashboard_fixtures import MODEL, SUITE

    lesson = _lesson(fixture_store, SUITE, MODEL)
    assert (lesson.first, lesson.method) == ("nonlinear", "talos")
    for number in range(1, L.N_STEPS + 1):
        s = L.screen(lesson, number, reveal=True)
        assert s.missing is None and s.figure is not None and s.answer, number


def _partial_store(src, dst, keep: set[str]):
    """A copy of ``src`` holding only the result kinds in ``keep``."""
    for kind_dir in (src / "results").iterdir():
        if kind_dir.name in keep:
            shutil.copytree(kind_dir, dst / "results" / kind_dir.name)
    return dst


def test_a_store_with_only_single_task_and_addition_results_says_what_each_screen_lacks(fixture_store, tmp_path):
    from dashboard_fixtures import MODEL, SUITE

    root = _partial_store(fixture_store, tmp_path / "s", {"single", "addition"})
    lesson = _lesson(root, SUITE, MODEL)
    for number in (1, 2):
        assert L.screen(lesson, number, reveal=True).missing is None
    for number in (3, 4, 5, 6):
        s = L.screen(lesson, number, reveal=True)
        assert s.missing and s.figure is None, number
    assert "No negation results" in L.screen(lesson, 3).missing
    assert L.screen(lesson, 1, reveal=True).examples_note.startswith("No per-example predictions")


def test_a_broken_examples_file_costs_the_galleries_not_the_lesson(fixture_store, tmp_path):
    from dashboard_fixtures import MODEL, SUITE

    root = shutil.copytree(fixture_store, tmp_path / "s")
    (root / "results" / "examples" / f"{SUITE}__{MODEL}__nonlinear.json").write_text("{not json")
    lesson = _lesson(root, SUITE, MODEL)
    s = L.screen(lesson, 1, reveal=True)
    assert s.figure is not None and not s.galleries
    assert s.examples_note.startswith("No examples: ") and "nonlinear" in s.examples_note
    assert L.screen(lesson, 5, reveal=True).galleries, "the other method's examples still show"


def test_a_lesson_of_one_method_has_nothing_to_compare(fixture_store):
    from dashboard_fixtures import MODEL, SUITE

    lesson = _lesson(fixture_store, SUITE, MODEL, first="talos", method="talos")
    assert lesson.baseline is None
    assert "one method only" in L.screen(lesson, 6, reveal=True).missing


def test_a_store_without_the_lesson_s_results_is_one_sentence(fixture_store, tmp_path):
    from dashboard_fixtures import MODEL, SUITE

    with pytest.raises(MissingResult, match="needs addition results"):
        _lesson(_partial_store(fixture_store, tmp_path / "a", {"single"}), SUITE, MODEL)
    with pytest.raises(MissingResult, match="needs single-task results"):
        _lesson(_partial_store(fixture_store, tmp_path / "b", {"addition"}), SUITE, MODEL)
    with pytest.raises(MissingResult, match="no addition results for 'lota'"):
        _lesson(fixture_store, SUITE, MODEL, method="lota")


def test_a_gallery_off_the_grid_is_labelled_first_order(fixture_store):
    from dashboard_fixtures import MODEL, SUITE

    from dashboard import figures_examples

    lesson = _lesson(fixture_store, SUITE, MODEL)
    ex = lesson.examples["nonlinear"]
    grid = ex.meta["addition_alphas"]
    between = figures_examples.addition_gallery(ex, lesson.task1, {t: (grid[1] + grid[2]) / 2 for t in ex.tasks})
    assert L.gallery_source(between) == L.FIRST_ORDER
    assert L.FIRST_ORDER in L.SOURCE_WORDS[L.FIRST_ORDER]


def test_changed_examples_come_first(fixture_store):
    from dashboard_fixtures import MODEL, SUITE

    g = L.screen(_lesson(fixture_store, SUITE, MODEL), 3, reveal=True).galleries[0][1]
    shown = L.changed_first(g, 5)
    assert len(shown.table) == 5 and len(shown.thumbnails) == 5
    flags = (shown.table["status"] != "").tolist()
    assert flags == sorted(flags, reverse=True), "changed ones first"
    assert re.fullmatch(r"\d+ of \d+ changed · \d+ right \(before: \d+\)", L.gallery_line(g))


# --------------------------------------------------------------------------------------------
# the page (AppTest), read-only
# --------------------------------------------------------------------------------------------
def _open(monkeypatch, store, query: dict) -> AppTest:
    monkeypatch.setenv("TALOS_STORE", str(store))
    monkeypatch.setenv("TALOS_DASHBOARD_READ_ONLY", "1")
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    at.switch_page("app_pages/lesson.py")
    at.run()
    _ok(at)
    return at


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _query(at: AppTest, key: str) -> str | None:
    """A query parameter of the app (a list when the test set it, a string when the app did)."""
    v = at.query_params.get(key)
    return v[0] if isinstance(v, list) else v


def _chart_titles(at: AppTest) -> list[str]:
    import json

    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]


def test_the_page_opens_at_the_url_s_step_and_walks_with_its_buttons(monkeypatch, fixture_store):
    at = _open(monkeypatch, fixture_store, {"step": "3", "reveal": "1"})
    assert at.title[0].value == f"3 / {L.N_STEPS} · Negate a task vector: forget a task"
    assert at.success and _chart_titles(at)[0].startswith("Exact · θ0 −")
    at.button(key="lesson_next").click().run()
    _ok(at)
    assert (_query(at, "step"), _query(at, "reveal")) == ("4", "0")
    assert at.info[0].value.startswith("**Question for the room.**") and not at.success
    at.button(key="lesson_back").click().run()
    at.button(key="lesson_back").click().run()
    assert (_query(at, "step"), _query(at, "reveal")) == ("3", "0")
    at.session_state["lesson_protocol"] = True  # open "The numbers on this screen, and how they were made"
    at.run()
    _ok(at)
    assert any(m.value.startswith("**Protocol:**") for m in at.markdown)
    assert at.dataframe, "the numbers behind the screen, as a table"
    at.button_group(key="lesson_steps").set_value(6).run()
    _ok(at)
    assert at.title[0].value.startswith("6 / 6 · ") and _query(at, "step") == "6"


def test_the_alpha_slider_moves_the_url_the_chart_and_the_answer(monkeypatch, fixture_store):
    at = _open(monkeypatch, fixture_store, {"step": "2", "reveal": "1"})
    slider = at.select_slider(key="lesson_alpha")
    new = slider.options[2]
    slider.set_value(float(new)).run()
    _ok(at)
    assert _query(at, "alpha") == L.num(new)
    assert f"α = {new}" in _chart_titles(at)[0]
    at.button(key="lesson_next").click().run()
    at.button(key="lesson_next").click().run()
    at.button(key="lesson_next").click().run()  # 4 with its answer: the ξ map marks the same α
    assert at.title[0].value.startswith("4 / 6") and at.select_slider(key="lesson_alpha").value == float(new)


def test_the_whole_shipped_lesson_runs_read_only(monkeypatch):
    for suite in SHIPPED_SUITES:
        at = _open(monkeypatch, SHIPPED, {"suite": suite})
        assert at.title[0].value.startswith("1 / 6")
        for number in range(1, L.N_STEPS + 1):
            for revealed in (False, True):
                assert (_query(at, "step"), _query(at, "reveal")) == (str(number), "1" if revealed else "0")
                assert at.title[0].value.startswith(f"{number} / 6"), at.title[0].value
                if revealed:
                    assert at.success and _chart_titles(at), (suite, number)
                if (number, revealed) != (L.N_STEPS, True):
                    at.button(key="lesson_next").click().run()
                    _ok(at)
        assert at.button(key="lesson_next").disabled


def test_store_names_reach_the_lesson_as_plain_text(monkeypatch, fixture_store, tmp_path):
    """A crafted store (task and method names that are HTML, LaTeX, placeholders): every screen shows them as text."""
    import html
    import json

    from test_plain_figures import HTML_METHOD, LINK_TASK, LIVE_TAG, _strings, html_store

    store = html_store(fixture_store, tmp_path / "html")
    shown = []
    for number in range(1, L.N_STEPS + 1):
        at = _open(monkeypatch, store, {"step": str(number), "reveal": "1", "lfirst": HTML_METHOD,
                                        "lpair": f"{LINK_TASK} + fashion-mnist"})
        texts = [t for c in at.get("plotly_chart") for t in _strings(json.loads(c.proto.spec))]
        assert not sorted({t for t in texts if LIVE_TAG.search(t)}), number
        md = [e.value for kind in ("markdown", "success", "info", "title", "caption") for e in at.get(kind)]
        raw = [m for m in md if re.search(r"(?<!\\)<a href", m)]
        assert not raw, (number, raw)
        shown.append(html.unescape(" ".join(texts)) + " ".join(md))
    assert any(LINK_TASK in s for s in shown), "the crafted task name is shown, reading the same"
