"""The Streamlit-protocol load client of ``bench/bench_load.py --client ws``: finding the α control in a
run's deltas (the in-browser preview component, or a ``st.slider``), moving it one step at a time, and a short
end-to-end run against a real ``--read-only`` server."""

from __future__ import annotations

import json

import pytest
from streamlit.proto.Element_pb2 import Element

from bench.st_client import EXACT, PREVIEW, AlphaControl, alpha_control
from dashboard import live_preview as LP


def _slider(label: str, wid: str, value: float, lo=0.0, hi=1.0, step=0.25) -> Element:
    el = Element()
    el.slider.id, el.slider.label = wid, label
    el.slider.min, el.slider.max, el.slider.step = lo, hi, step
    el.slider.default.append(value)
    return el


def test_alpha_control_is_the_first_alpha_slider_with_its_fragment():
    other = Element()
    other.markdown.body = "α is not a slider"
    found = alpha_control([("", other), ("", _slider("Steps", "s", 1.0)), ("frag", _slider("α (all tasks)", "a", 0.5)),
                           ("frag", _slider("α negate x", "n", 0.0))])
    assert found == AlphaControl("a", 0.0, 1.0, 0.25, 0.5, "frag")
    assert alpha_control([("", other)]) is None
    state = found.state(0.75)
    assert state.id == "a" and list(state.double_array_value.data) == [0.75]


def _component(specs, values, name="talos_live_preview", wid="$$ID-abc-live.add.talos.same") -> Element:
    """A component element as ``dashboard/live_component.py`` draws it (data: :func:`LP.render_data`)."""
    el = Element()
    el.bidi_component.id, el.bidi_component.component_name = wid, name
    payload = {"key": "k0", "eval": [{"task": "a"}]}
    el.bidi_component.json = json.dumps(LP.render_data(specs, values, payload, include_payload=False))
    return el


def test_alpha_control_finds_the_live_preview_components_first_alpha_slider():
    specs = LP.addition_sliders(["a", "b"], 0.0, 2.0, 0.5, 1.0, same=False, key="a.talos")
    values = {specs[0].id: 1.5, specs[1].id: 0.5}
    other = Element()
    other.markdown.body = "α is not a control"
    found = alpha_control([("", other), ("", _component(specs, values, name="other_component")),
                           ("frag", _component(specs, values)), ("frag", _slider("α (all tasks)", "s", 0.5))])
    assert found == AlphaControl("$$ID-abc-live.add.talos.same", 0.0, 2.0, 0.5, 1.5, "frag", "component",
                                 "a.talos.a", {"a.talos.b": 0.5}, EXACT, 1.0)
    # what the frontend's setStateValue('values', {...}) sends: the component's whole state as one JSON string
    state = found.state(2.0)
    assert state.id == found.widget_id and state.WhichOneof("value") == "json_value"
    assert json.loads(state.json_value) == {"values": {"a.talos.a": 2.0, "a.talos.b": 0.5}}
    # a st.slider before the component is found first (the page's fallback path)
    assert alpha_control([("", _slider("α (all tasks)", "s", 0.5)), ("frag", _component(specs, values))]).kind == \
        "slider"
    assert alpha_control([("", _slider("α (all tasks)", "s", 0.5))]).chart == PREVIEW


def test_a_component_move_took_effect_when_the_url_holds_the_new_value():
    c = AlphaControl("w", 0.0, 2.0, 0.5, 1.5, "f", "component", "a.talos", {}, EXACT, 1.0)
    assert c.in_url("store=x&a.talos=1.5") and not c.in_url("store=x&a.talos=1") and not c.in_url("store=x")
    c.value = 1.0  # at its default the key leaves the URL
    assert c.in_url("store=x") and not c.in_url("a.talos=1.5")
    assert AlphaControl("s", 0.0, 1.0, 0.25, 0.5, "").in_url("")  # a st.slider: its preview title is checked


def test_moves_bounce_between_the_ends_one_step_at_a_time():
    c = AlphaControl("a", 0.0, 1.0, 0.25, 0.5, "")
    seen, direction = [], 1
    for _ in range(6):
        value, direction = c.next_value(direction)
        c.value = value
        seen.append(value)
    assert seen == [0.75, 1.0, 0.75, 0.5, 0.25, 0.0]
    c = AlphaControl("a", 0.0, 1.0, 0.1, 0.0, "")  # on the step grid, written as the browser writes it
    direction = 1
    for _ in range(27):  # up to 1, down to 0, up to 0.7: no drift (0.7, not 0.7000000000000001)
        c.value, direction = c.next_value(direction)
    assert c.value == 0.7


@pytest.mark.slow
def test_ws_load_run_against_a_real_server():
    pytest.importorskip("websockets")
    pytest.importorskip("psutil")
    from bench.bench_load import run, table

    r = run(2, 4.0, client="ws", ramp=0.5, move_timeout=30.0)
    assert r["sessions_loaded"] == 2 and r["moves"] >= 2, (r["errors"], r["error_samples"])
    assert r["controls"] == [f"component → {EXACT}…"], r  # the in-browser preview component, timed to the exact chart
    assert r["errors_total"] == 0, r["error_samples"]
    assert r["preview_p50_ms"] > 0 and r["rss_peak_mb"] >= r["rss_before_mb"]
    assert "| ws | 2 |" in table([r])


def test_the_server_skips_streamlits_full_gc_after_every_run():
    """~100 ms of the busy core per slider move (bench/RESULTS.md, load): `talos dashboard` turns it off, and so does
    the repository's .streamlit/config.toml for `streamlit run dashboard/app.py`."""
    from pathlib import Path

    import tomllib

    from talos_core.cli.dashboard import streamlit_command

    cmd = streamlit_command(Path("app.py"), port=8501)
    assert cmd[cmd.index("--runner.postScriptGC") + 1] == "false"
    root = Path(__file__).resolve().parent.parent
    assert tomllib.loads((root / ".streamlit" / "config.toml").read_text())["runner"]["postScriptGC"] is False


def test_the_served_dashboard_does_not_watch_its_sources():
    """Streamlit's source watcher walks all of sys.modules when a new session's first run imports something and polls
    the files it watches: ~17 % of the busy core under 30 sessions, page loads 7.7 → 2.1 s (bench/RESULTS.md, load).
    `talos dashboard` turns it off; `streamlit run dashboard/app.py` (developing the app) keeps it."""
    from pathlib import Path

    from talos_core.cli.dashboard import streamlit_command

    cmd = streamlit_command(Path("app.py"), port=8501)
    assert cmd[cmd.index("--server.fileWatcherType") + 1] == "none"


def test_no_page_needs_streamlits_magic():
    """`talos dashboard` (and the repository's .streamlit/config.toml) turn Streamlit's magic off: a page's source is
    then compiled as it is, without the rewrite that shows bare expressions, which was most of the compile a first
    visit to an idle server pays. Nothing changes for the pages: none has a bare expression magic would show."""
    import ast
    from pathlib import Path

    import tomllib
    from streamlit.runtime.scriptrunner import magic

    from talos_core.cli.dashboard import streamlit_command

    cmd = streamlit_command(Path("app.py"), port=8501)
    assert cmd[cmd.index("--runner.magicEnabled") + 1] == "false"
    root = Path(__file__).resolve().parent.parent
    assert tomllib.loads((root / ".streamlit" / "config.toml").read_text())["runner"]["magicEnabled"] is False
    for script in [root / "dashboard" / "app.py", *sorted((root / "dashboard" / "app_pages").glob("*.py"))]:
        tree = magic.add_magic(script.read_text(), str(script))
        shown = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "transparent_write"]
        assert not shown, f"{script.name} shows a bare expression through magic (line {shown[0].lineno})"


def test_the_served_dashboard_shows_a_visitors_toolbar():
    """`talos dashboard` shows visitors no developer's "Deploy" button (Streamlit's toolbar on a local server)."""
    from pathlib import Path

    from talos_core.cli.dashboard import streamlit_command

    cmd = streamlit_command(Path("app.py"), port=8501)
    assert cmd[cmd.index("--client.toolbarMode") + 1] == "viewer"
