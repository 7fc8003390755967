"""TaLoS Studio dashboard — entry point (``dashboard`` is installed with talos_core: ``pip install -e .``).

    talos dashboard                                     # opens the shipped cached_results
    talos dashboard --store /path/to/store              # or TALOS_STORE=/path/to/store talos dashboard
    streamlit run dashboard/app.py                      # the same, started by hand

Opens instantly on a results store (no GPU, no internet, no training): every figure is read from
``results/`` (SCHEMA.md). The store, suite, model and each page's pickers and sliders live in the URL
query, so a link reproduces a view.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard import data as D
from dashboard import ui
from talos_core import schema
from talos_core.errors import TalosError

# not "pages/": a folder with that name next to app.py switches Streamlit to its legacy multipage mode
PAGES_DIR = Path(__file__).resolve().parent / "app_pages"


def _pages() -> dict[str, list]:
    p = lambda f, title, icon, **kw: st.Page(str(PAGES_DIR / f), title=title, icon=icon, **kw)  # noqa: E731
    return {
        "Understand": [p("learn.py", "Learn", ":material/school:", default=True, url_path="learn")],
        "Explore results": [
            p("arithmetic.py", "Arithmetic", ":material/calculate:", url_path="arithmetic"),
            p("disentanglement.py", "Disentanglement", ":material/grid_on:", url_path="disentanglement"),
            p("localization.py", "Localization", ":material/target:", url_path="localization"),
            p("masks.py", "Masks", ":material/texture:", url_path="masks"),
            p("efficiency.py", "Efficiency & comparison", ":material/speed:", url_path="efficiency"),
        ],
        "Compute": [p("run.py", "Run", ":material/play_circle:", url_path="run")],
    }


def _sidebar_context() -> None:
    """Store / suite / model pickers; puts a :class:`ui.Context` (or the problem) in session state."""
    st.session_state["_ctx"] = None
    st.session_state["_ctx_problem"] = None
    default = str(schema.viewer_store())
    with st.sidebar:
        st.markdown("### Results store")
        text = st.text_input("Store folder", value=default, key="store", bind="query-params",
                             help="A folder written by the `talos` CLI (runs/ and results/). Default: "
                                  "$TALOS_STORE, else the shipped cached_results/ of a source checkout, "
                                  "else ./runs.")
        root = Path((text or default).strip()).expanduser()
        st.session_state["_root"] = root
        try:
            idx = D.index(root)
        except TalosError as exc:
            st.session_state["_ctx_problem"] = exc
            st.caption("No results to show here yet.")
            return
        suites = D.available(idx, "suite", kind=[k for k in schema.KINDS if k != "suite"])
        suite = ui.pick("Suite (task set)", suites, "suite")
        models = D.available(idx, "model", suite=suite)
        model = ui.pick("Model", models, "model")
        if suite is None or model is None:
            st.session_state["_ctx_problem"] = schema.EmptyStore(
                f"the store {root} has no results that follow SCHEMA.md")
            return
        st.session_state["_ctx"] = ui.Context(root=root, idx=idx, suite=suite, model=model)
        info = D.try_get("suite", root, suite) if ((idx["kind"] == "suite") & (idx["name"] == suite)).any() else None
        if isinstance(info, dict):
            parts = [f"Suite **{suite}**: {', '.join(info.get('tasks', []))}"]
            if info.get("control_task"):
                parts.append(f"control {info['control_task']}")
            if info.get("device"):
                precision = info.get("eval_precision")
                parts.append(f"computed on {info['device']}" + (f", {precision} evaluation" if precision else ""))
            st.caption("; ".join(parts))


def main() -> None:
    st.set_page_config(page_title="TaLoS Studio", page_icon=":material/functions:", layout="wide")
    nav = st.navigation(_pages())
    _sidebar_context()
    with st.sidebar:
        st.divider()
        st.caption("TaLoS Studio · task arithmetic with task-localized sparse fine-tuning. "
                   "The URL keeps this view: copy it to share.")
    try:
        nav.run()
    except TalosError as exc:  # a store problem a page did not handle itself: one sentence, no traceback
        ui.show_problem(exc)


main()
