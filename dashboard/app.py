"""TaLoS Studio dashboard — entry point (``dashboard`` is installed with talos_core: ``pip install -e .``).

    talos dashboard                                     # opens the shipped cached_results, on 127.0.0.1
    talos dashboard --store /path/to/store              # or TALOS_STORE=/path/to/store talos dashboard
    talos dashboard --host 0.0.0.0 --read-only          # a workshop: reachable by others, computes nothing
    streamlit run dashboard/app.py                      # the same, started by hand

Opens instantly on a results store (no GPU, no internet, no training): every figure is read from
``results/`` (SCHEMA.md). The store, suite, model and each page's pickers and sliders live in the URL
query, so a link reproduces a view. The stores a visitor may pick, whether the Run page exists and its
caps are the server's policy (:mod:`dashboard.access`); store-supplied text is shown as plain text
(:func:`dashboard.ui.md`).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard import data, merged, ui
from dashboard.access import ServerConfig, StoreRefused
from talos_core import schema
from talos_core.errors import TalosError

# not "pages/": a folder with that name next to app.py switches Streamlit to its legacy multipage mode
PAGES_DIR = Path(__file__).resolve().parent / "app_pages"


def _pages(read_only: bool = False) -> dict[str, list]:
    """The navigation; read-only mode has no Run page (nothing can be computed or written). Learn is the root page
    (``/``); ``/learn``, its name like every other page's, shows it too (a hidden entry: the same page under that
    path, with the link's query) instead of Streamlit's "Page not found"."""
    p = lambda f, title, icon, **kw: st.Page(str(PAGES_DIR / f), title=title, icon=icon, **kw)  # noqa: E731
    return {
        "Understand": [p("learn.py", "Learn", ":material/school:", default=True, url_path="start"),
                       p("learn.py", "Learn", ":material/school:", url_path="learn", visibility="hidden"),
                       p("lesson.py", "Lesson (projector)", ":material/co_present:", url_path="lesson")],
        "Explore results": [
            p("arithmetic.py", "Arithmetic", ":material/calculate:", url_path="arithmetic"),
            p("disentanglement.py", "Disentanglement", ":material/grid_on:", url_path="disentanglement"),
            p("localization.py", "Localization", ":material/target:", url_path="localization"),
            p("masks.py", "Masks", ":material/texture:", url_path="masks"),
            p("efficiency.py", "Efficiency & comparison", ":material/speed:", url_path="efficiency"),
        ],
        **({} if read_only else {"Compute": [p("run.py", "Run", ":material/play_circle:", url_path="run")]}),
    }


def _suites_of(path: Path) -> list[str]:
    """The suites a store holds results of ([] for a store without results or one that cannot be read)."""
    try:
        idx = data.index(path)
    except (TalosError, OSError):
        return []
    return data.available(idx, "suite", kind=[k for k in schema.KINDS if k != "suite"])


def _has(path: Path, suite: str, model: str) -> bool:
    try:
        idx = data.index(path)
    except (TalosError, OSError):
        return False
    return bool(data.available(idx, "kind", suite=suite, model=model))


def _pick_store(cfg: ServerConfig) -> Path | str | None:
    """The sidebar's store picker: one of the server's stores (:meth:`ServerConfig.stores`), kept in the URL
    as ``?store=<folder>``, or all of them side by side (``?store=all``, :mod:`dashboard.merged`; offered when
    more than one store holds results, the default then unless ``--store`` named one; with one, ``?store=all``
    shows the default store). A ``?store=`` naming anything else is refused with one sentence (the same whether the
    folder exists or not), nothing is read or created there, and ``None`` is returned."""
    stores = cfg.stores()
    choices = {c.key: c for c in stores}
    several = sum(1 for c in stores if _suites_of(c.path)) > 1
    keys = list(choices) + ([merged.ALL_STORES] if several else [])  # the side-by-side view last
    query = st.query_params.get("store")
    picked = st.session_state.get("store")
    refused = None
    if query is not None and query != picked:  # a link (or a hand-edited URL) names the store
        if query == merged.ALL_STORES:  # a link to the side-by-side view: with one store holding results, that one
            st.session_state["store"] = merged.ALL_STORES if several else cfg.default_choice().key
        else:
            try:
                st.session_state["store"] = cfg.resolve(query).key
            except StoreRefused as exc:
                refused = exc
                st.session_state["store"] = None
    elif picked not in keys:
        st.session_state["store"] = (merged.ALL_STORES if several and not cfg.store_given
                                     else cfg.default_choice().key)

    def _follow() -> None:
        if st.session_state.get("store") is not None:
            st.query_params["store"] = st.session_state["store"]

    key = st.selectbox("Store", keys, index=None, key="store", on_change=_follow,
                       placeholder="Choose a store",
                       format_func=lambda k: merged.ALL_STORES_LABEL if k == merged.ALL_STORES else choices[k].label,
                       help="The stores this server shows: the shipped results, your own store (where the Run "
                            "page writes) and stores under the folders it was started with (--store-root); "
                            "or all of them at once, suites labelled by where they come from.")
    if refused is not None:  # shown once, by the page (ui.context), as one sentence
        st.session_state["_ctx_problem"] = refused
        return None
    if key is None or key not in keys:
        st.session_state["_ctx_problem"] = StoreRefused("no store is selected; choose one in the sidebar")
        return None
    if st.query_params.get("store") != key:
        st.query_params["store"] = key
    if key == merged.ALL_STORES:
        st.caption("Showing every store of this server: each suite says where it comes from; tables show the rows "
                   "of every store holding the same suite and model.")
        return merged.ALL_STORES
    chosen = choices[key]
    what = "your own store" if cfg.read_only and chosen.kind == "user" else chosen.description
    st.caption(f"Showing {ui.md(what)}.")
    return choices[key].path


def _pick_suite(cfg: ServerConfig, root: Path | str) -> tuple[Path, str | None, str, tuple]:
    """The suite picker: this store's suites, or (all stores side by side) every store's suites labelled by
    origin. Returns the store folder the suite is read from, the suite, its origin label and the other stores
    to compare with (filled in once the model is known: the stores list)."""
    if root != merged.ALL_STORES:
        idx = data.index(root)
        return Path(root), ui.pick("Suite (task set)", data.available(idx, "suite", kind=[
            k for k in schema.KINDS if k != "suite"]), "suite"), "", ()
    stores = cfg.stores()
    entries = merged.suite_entries(stores, _suites_of)
    label = ui.pick("Suite (task set)", [e.label for e in entries], "suite",
                    help="Every store's suites: · shipped = the shipped results, · yours = your own store.")
    entry = merged.entry_by_label(entries, label)
    if entry is None:
        raise schema.EmptyStore("no store of this server holds results that follow SCHEMA.md")
    return entry.store.path, entry.suite, entry.origin, tuple(stores)


def _sidebar_context() -> None:
    """Store / suite / model pickers; puts a :class:`ui.Context` (or the problem) in session state."""
    st.session_state["_ctx"] = None
    st.session_state["_ctx_problem"] = None
    with st.sidebar:
        st.markdown("### Results store")
        cfg = _config()
        picked = _pick_store(cfg)
        if picked is None:
            st.session_state["_root"] = None
            return
        try:
            root, suite, origin, stores = _pick_suite(cfg, picked)
            idx = data.index(root)
        except TalosError as exc:
            st.session_state["_root"] = None if picked == merged.ALL_STORES else picked
            st.session_state["_ctx_problem"] = exc
            st.caption("No results to show here yet.")
            return
        st.session_state["_root"] = root
        models = data.available(idx, "model", suite=suite)
        model = ui.pick("Model", models, "model")
        if suite is None or model is None:
            st.session_state["_ctx_problem"] = schema.EmptyStore(
                f"the store {root} has no results that follow SCHEMA.md")
            return
        names = merged.origins(stores)
        others = tuple((names[c.path], c.path) for c in merged.stores_with(stores, suite, model, _has)
                       if c.path != root)
        st.session_state["_ctx"] = ui.Context(root=root, idx=idx, suite=suite, model=model, origin=origin,
                                              others=others)
        if others:
            st.caption(f"Also in {ui.md(', '.join(o for o, _ in others))}: suite {ui.md(suite)} with model "
                       f"{ui.md(model)}; the comparison tables show both.")
        info, problem = data.suite_record(root, suite)
        if problem:
            st.warning(ui.md(problem))
        if isinstance(info, dict):  # store-supplied fields: plain text (ui.md)
            tasks = info.get("tasks") if isinstance(info.get("tasks"), list) else []
            parts = [f"Suite **{ui.md(suite)}**: {ui.md(', '.join(map(str, tasks)))}"]
            if info.get("control_task"):
                parts.append(f"control {ui.md(info['control_task'])}")
            if info.get("device"):
                precision = info.get("eval_precision")
                parts.append(f"computed on {ui.md(info['device'])}"
                             + (f", {ui.md(precision)} evaluation" if precision else ""))
            st.caption("; ".join(parts))


def _config() -> ServerConfig:
    """The server's policy (:mod:`dashboard.access`), read from the environment ``talos dashboard`` sets."""
    return ServerConfig.from_env()


def main() -> None:
    st.set_page_config(page_title="TaLoS Studio", page_icon=":material/functions:", layout="wide")
    try:
        cfg = _config()
    except TalosError as exc:  # a bad cap in the environment: one sentence
        ui.stop_on_problem(exc)
    nav = st.navigation(_pages(cfg.read_only))
    _sidebar_context()
    with st.sidebar:
        st.divider()
        if cfg.read_only:
            st.caption(":material/lock: Read-only mode: this server shows results and computes nothing.")
        st.caption("TaLoS Studio · task arithmetic with task-localized sparse fine-tuning. "
                   "The URL keeps this view: copy it to share.")
    try:
        nav.run()
    except TalosError as exc:  # a store problem a page did not handle itself: one sentence, no traceback
        ui.show_problem(exc)


main()
