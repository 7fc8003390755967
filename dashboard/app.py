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
from dashboard.access import ServerConfig, StoreChoice, StoreRefused
from dashboard.live_component import LIVE_VALUES
from talos_core import schema
from talos_core.errors import TalosError

FAVICON = "🧮"
SMOKE_TEST = "smoke test (random-init model: its numbers mean nothing)"
PAGES_DIR = ui.PAGES_DIR


def _pages(read_only: bool = False) -> dict[str, list]:
    """The navigation; read-only mode lists no Run page (nothing can be computed or written: ``/run`` only says so).
    Learn is the root page (``/``); ``/learn``, its name like every other page's, and ``/start`` show it too (hidden
    entries: the same page under those paths, with the link's query) instead of Streamlit's "Page not found"."""
    p = lambda f, title, icon, **kw: st.Page(str(PAGES_DIR / f), title=title, icon=icon, **kw)  # noqa: E731
    hidden = {"visibility": "hidden"}
    return {
        "Understand": [p("learn.py", "Learn", ":material/school:", default=True, url_path="home"),
                       p("learn.py", "Learn", ":material/school:", url_path="learn", **hidden),
                       p("learn.py", "Learn", ":material/school:", url_path="start", **hidden),
                       p("lesson.py", "Lesson (projector)", ":material/co_present:", url_path="lesson")],
        "Explore results": [
            p("arithmetic.py", "Arithmetic", ":material/calculate:", url_path="arithmetic"),
            p("disentanglement.py", "Disentanglement", ":material/grid_on:", url_path="disentanglement"),
            p("localization.py", "Localization", ":material/target:", url_path="localization"),
            p("masks.py", "Masks", ":material/texture:", url_path="masks"),
            p("efficiency.py", "Efficiency & comparison", ":material/speed:", url_path="efficiency"),
        ],
        # read-only: /run stays a page (a link to it says why nothing runs here) but leaves the navigation
        "Compute": [p("run.py", "Run", ":material/play_circle:", url_path="run", **(hidden if read_only else {}))],
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
                       format_func=lambda k: (merged.ALL_STORES_LABEL if k == merged.ALL_STORES
                                              else store_label(choices[k], cfg.read_only)),
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
    st.caption(f"Showing {ui.md(store_description(choices[key], cfg.read_only))}.")
    return choices[key].path


def store_label(choice: StoreChoice, read_only: bool) -> str:
    """How the store picker names a store: with its folder for whoever runs the server, without any server path
    for the visitors of a read-only (classroom) server."""
    if not read_only:
        return choice.label
    return {"shipped": "Shipped results (read-only)", "user": "This server's own store"}.get(choice.kind,
                                                                                            choice.path.name)


def store_description(choice: StoreChoice, read_only: bool) -> str:
    """The sentence under the store picker (no server path in read-only mode)."""
    if not read_only:
        return choice.description
    return {"shipped": choice.description, "user": "this server's own store"}.get(choice.kind,
                                                                                   "a store of this server")


def _suite_text(idx, suite: str) -> str:
    """A suite as the picker shows it: its name, and for a smoke-test suite (every model random-init) what it is."""
    models = data.available(idx, "model", suite=suite)
    if models and all(ui.random_init(m) for m in models):
        return f"{suite} — {SMOKE_TEST}"
    return suite


def _pick_suite(cfg: ServerConfig, root: Path | str) -> tuple[Path, str | None, str, tuple]:
    """The suite picker: this store's suites, or (all stores side by side) every store's suites labelled by
    origin. Returns the store folder the suite is read from, the suite, its origin label and the other stores
    to compare with (filled in once the model is known: the stores list)."""
    if root != merged.ALL_STORES:
        idx = data.index(root)
        suites = data.available(idx, "suite", kind=[k for k in schema.KINDS if k != "suite"])
        texts = {s: _suite_text(idx, s) for s in suites}
        suites = sorted(suites, key=lambda s: texts[s] != s)  # smoke-test suites last (stable: by name otherwise)
        return Path(root), ui.pick("Suite (task set)", suites, "suite", format_func=texts.get), "", ()
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
        _forget_alphas_of_another_view((str(root), suite, model))
        if ui.random_init(model):
            st.caption(f":material/warning: Model {ui.md(model)} is random-init: a {SMOKE_TEST}; it shows that "
                       "the pipeline runs, not what task arithmetic does.")
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


def _forget_alphas_of_another_view(view: tuple[str, str, str]) -> None:
    """After a switch of store, suite or model in the sidebar, the α's in the URL (``?a.…``, ``?n.…``) and the
    sliders' remembered values belong to the previous results: drop them, so the sliders open at the new results'
    selected α on their own range (a link that names store, suite, model and α's keeps its α's: no switch)."""
    before = st.session_state.get("_view")
    st.session_state["_view"] = view
    if before is None or before == view:
        return
    for k in [k for k in st.query_params if k.startswith(("a.", "n."))]:
        del st.query_params[k]
    for k in [k for k in st.session_state if str(k).startswith((LIVE_VALUES, "a.", "n."))]:
        del st.session_state[k]


def _config() -> ServerConfig:
    """The server's policy (:mod:`dashboard.access`), read from the environment ``talos dashboard`` sets."""
    return ServerConfig.from_env()


def main() -> None:
    # an emoji favicon is drawn in the browser (a data: URL); a ":material/…:" one is fetched from fonts.gstatic.com,
    # which a room without internet answers with an error on every page
    st.set_page_config(page_title="TaLoS Studio", page_icon=FAVICON, layout="wide")
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
