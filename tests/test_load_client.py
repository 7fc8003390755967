"""The Streamlit-protocol load client of ``bench/bench_load.py --client ws`` (issue 15): finding the α slider in a
run's deltas, moving it one step at a time, and a short end-to-end run against a real ``--read-only`` server."""

from __future__ import annotations

import pytest
from streamlit.proto.Element_pb2 import Element

from bench.st_client import AlphaControl, alpha_control


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


def test_moves_bounce_between_the_ends_one_step_at_a_time():
    c = AlphaControl("a", 0.0, 1.0, 0.25, 0.5, "")
    seen, direction = [], 1
    for _ in range(6):
        value, direction = c.next_value(direction)
        c.value = value
        seen.append(value)
    assert seen == [0.75, 1.0, 0.75, 0.5, 0.25, 0.0]


@pytest.mark.slow
def test_ws_load_run_against_a_real_server():
    pytest.importorskip("websockets")
    pytest.importorskip("psutil")
    from bench.bench_load import run, table

    r = run(2, 4.0, client="ws", ramp=0.5, move_timeout=30.0)
    assert r["sessions_loaded"] == 2 and r["moves"] >= 2, r
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
