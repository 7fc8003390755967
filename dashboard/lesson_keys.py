"""The lesson page's keyboard (:mod:`dashboard.app_pages.lesson`): → / PageDown press its forward button, ← / PageUp
its back button, as a presentation clicker expects. A ``st.components.v2`` component with its JavaScript inline
(``dashboard/lesson_keys.js``): no iframe, nothing fetched, so it works offline and in read-only mode. It only clicks
the page's own buttons, so a key does exactly what a click does (the URL, the callbacks, the disabled ends)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard.live_component import in_app_test

_JS = Path(__file__).with_name("lesson_keys.js").read_text(encoding="utf-8")
_component = st.components.v2.component("talos_lesson_keys", js=_JS, isolate_styles=False)  # no shadow root


def mount(forward: str, back: str) -> None:
    """Listen for the lesson's keys; ``forward`` / ``back`` are the keys of the page's two buttons (components are
    not rendered under ``AppTest``: there the buttons alone)."""
    if in_app_test():
        return
    _component(key="lesson_keys", data={"buttons": {"forward": forward, "back": back}})
