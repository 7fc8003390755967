"""Streamlit helpers shared by the pages: store context, problem messages, pickers bound to the URL,
figure/table export. Pages stay thin: read data (``dashboard.data``), build figures
(``dashboard.figures``), call :func:`chart`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard import data
from dashboard.plain import md, notation
from talos_core.errors import TalosError
from talos_core.schema import EmptyStore, method_label, result_name, slug

CHROME_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
#: the pages' scripts (not "pages/": a folder with that name next to app.py switches Streamlit to its legacy
#: multipage mode); links between pages (st.page_link, st.switch_page) name them
PAGES_DIR = Path(__file__).resolve().parent / "app_pages"


@dataclass(frozen=True)
class Context:
    """What every page needs: the store folder, its result index, the selected suite and model; in the view of
    all stores side by side (:mod:`dashboard.merged`) also this store's origin label (``shipped``, ``yours``) and
    the other stores holding the same suite and model, as ``(origin, folder)`` pairs."""

    root: Path
    idx: pd.DataFrame
    suite: str
    model: str
    origin: str = ""
    others: tuple[tuple[str, Path], ...] = ()

    def name(self, *parts: str) -> str:
        return result_name(self.suite, self.model, *parts)

    def methods(self, kind: str) -> list[str]:
        return data.order_methods(data.available(self.idx, "method", kind=kind, suite=self.suite, model=self.model))

    def has(self, kind: str, *parts: str) -> bool:
        name = self.name(*parts)
        return bool(((self.idx["kind"] == kind) & (self.idx["name"] == name)).any())


def random_init(model: str) -> bool:
    """Whether ``model`` is one of the registry's random-init models (``tiny-*``: smoke tests whose numbers mean
    nothing); an unknown model is not.

    >>> random_init("tiny-text"), random_init("minilm-l6"), random_init("no-such-model")
    (True, False, False)
    """
    from talos_core.models import get_model_spec

    try:
        return get_model_spec(model).weights == "random"
    except TalosError:
        return False


def block_word(model: str) -> str:
    """What one column of a mask heatmap is for ``model``: a stage of a CNN, else a transformer block.

    >>> block_word("efficientnet-lite0"), block_word("minilm-l6"), block_word("no-such-model")
    ('stage of the CNN', 'transformer block', 'transformer block')
    """
    from talos_core.models import get_model_spec

    try:
        family = get_model_spec(model).family
    except TalosError:
        family = None
    return "stage of the CNN" if family == "cnn" else "transformer block"


# --------------------------------------------------------------------------------------------
# problems
# --------------------------------------------------------------------------------------------

def show_problem(exc: BaseException) -> None:
    """One sentence, never a traceback: info for "not computed yet", error for broken files. The sentence
    names store files and values, so it is shown as plain text (:func:`md`)."""
    level = getattr(exc, "level", "error")
    (st.info if level == "info" else st.error)(md(for_visitors(str(exc))))


def for_visitors(text: str) -> str:
    """``text`` as a visitor of a read-only (classroom) server may read it: the server's folders (its stores and
    store roots, the checkout) replaced by what the store picker calls them; unchanged for whoever runs the server."""
    from dashboard.access import ServerConfig

    try:
        cfg = ServerConfig.from_env()
    except TalosError:
        return text
    if not cfg.read_only:
        return text
    names = {str(c.path): ("the shipped results" if c.kind == "shipped" else f"the store {c.path.name}")
             for c in cfg.stores()}
    names.update({str(r): "a store folder of this server" for r in cfg.roots})
    if cfg.shipped is not None:
        names.setdefault(str(cfg.shipped.parent), "the dashboard's folder")
    for path in sorted(names, key=len, reverse=True):  # the longest first: a store inside a root keeps its name
        text = text.replace(path, names[path])
    return text


def stop_on_problem(exc: BaseException) -> None:
    show_problem(exc)
    st.stop()


def load(kind: str, ctx: Context, *parts: str, stop: bool = True) -> Any | None:
    """Cached result ``kind`` for the current suite/model; on a problem show it and stop (or return None)."""
    try:
        return data.get(kind, ctx.root, ctx.name(*parts))
    except TalosError as exc:
        if stop:
            stop_on_problem(exc)
        show_problem(exc)
        return None


def side_by_side(kind: str, ctx: Context, *parts: str) -> dict[str, Any]:
    """Result ``kind`` of this suite/model from this store and from every other store holding the same suite and
    model (:attr:`Context.others`), as ``{origin: result}`` in display order; a store where it is missing or
    broken is left out (this store's own problem is shown, the others' are not)."""
    out: dict[str, Any] = {}
    for origin, root in ((ctx.origin, ctx.root), *ctx.others):
        try:
            out[origin] = data.get(kind, root, ctx.name(*parts))
        except TalosError as exc:
            if root == ctx.root:
                show_problem(exc)
    return out


def across_stores(kind: str, ctx: Context, method: str) -> None:
    """Under the Arithmetic panels, when other stores hold this suite and model (:attr:`Context.others`): the
    ``kind`` (addition / negation) summary of ``method`` in each, one row per store (:mod:`dashboard.merged`)."""
    if not ctx.others:
        return
    from dashboard import merged

    table = merged.arithmetic_rows(kind, side_by_side(kind, ctx, method), method)
    if table is not None and len(table) > 1:
        st.subheader(f"{kind.capitalize()} across stores")
        st.dataframe(table, hide_index=True)
        st.caption("The same suite, model and method in every store holding them, at each store's selected α "
                   "(test split).")


def context(*, required: bool = True) -> Context | None:
    """The context set by ``app.py``; if the store is unusable, show why and stop (when ``required``)."""
    ctx = st.session_state.get("_ctx")
    problem = st.session_state.get("_ctx_problem")
    if ctx is None:
        if not required:
            return None
        show_problem(problem or EmptyStore("no store is selected; choose a store folder in the sidebar"))
        st.stop()
    return ctx


# --------------------------------------------------------------------------------------------
# pickers (bound to the URL so a link reproduces the view)
# --------------------------------------------------------------------------------------------
def shown_as(options: Sequence[str], format_func: Callable[[str], str] | None) -> Callable[[str], str]:
    """How a picker shows its options: ``format_func``'s text, made unique (a text two options share gets the
    option in brackets), or the options as they are."""
    if format_func is None:
        return str
    texts = {o: str(format_func(o)) for o in options}
    count = Counter(texts.values())
    texts = {o: t if count[t] == 1 else f"{t} ({o})" for o, t in texts.items()}
    return lambda o: texts.get(o, str(o))


def _adopt_query(key: str, options: Sequence[str], text: Callable[[str], str], *, many: bool = False) -> None:
    """A link that names options themselves where the picker shows other texts (``?method=talos`` for the option
    ``talos`` shown as "TaLoS": links written before pickers showed labels) opens that option: set as the widget's
    state before it is created (Streamlit drops the unknown text from the URL; the next change writes the shown
    text there)."""
    if key in st.session_state or key not in st.query_params:
        return
    values = st.query_params.get_all(key)
    if not values or any(v in {text(o) for o in options} for v in values):
        return
    named = [v for v in values if v in options]
    if named and len(named) == len(values):
        st.session_state[key] = named if many else named[0]


def pick(label: str, options: Sequence[str], key: str, *, default: str | None = None, container: Any = None,
         help: str | None = None, format_func: Callable[[str], str] | None = None) -> str | None:
    """A selectbox whose value lives in the URL query (``?<key>=<shown text>``), showing ``format_func(option)``
    (:func:`shown_as`); returns the option itself. Streamlit writes the *shown* text into the URL; a link naming the
    option itself opens it too (:func:`_adopt_query`)."""
    options = list(options)
    if not options:
        return None
    where = container or st
    index = options.index(default) if default in options else 0
    if key in st.session_state and st.session_state[key] not in options:
        # the options changed under the widget (another store or suite): set the value, so the browser's widget
        # shows it too (a deleted value left the old option on screen while the page used the new one)
        st.session_state[key] = options[index]
        index = 0  # the value comes from the state now (a default beside it would be a Streamlit warning)
    text = shown_as(options, format_func)
    _adopt_query(key, options, text)
    return where.selectbox(label, options, index=index, key=key, bind="query-params", help=help, format_func=text)


def pick_many(label: str, options: Sequence[str], key: str, *, default: Sequence[str] | None = None,
              container: Any = None, max_selections: int | None = None,
              format_func: Callable[[str], str] | None = None) -> list[str]:
    """A multiselect bound to the URL query (repeated ``?<key>=a&<key>=b``, the shown texts), showing
    ``format_func(option)`` as :func:`pick` does; returns the options themselves."""
    options = list(options)
    default = [d for d in (default if default is not None else options) if d in options]
    if key in st.session_state:
        kept = [v for v in st.session_state[key] if v in options]
        if kept != list(st.session_state[key]):
            st.session_state[key] = kept
    text = shown_as(options, format_func)
    _adopt_query(key, options, text, many=True)
    where = container or st
    return list(where.multiselect(label, options, default=default, key=key, bind="query-params",
                                  max_selections=max_selections, format_func=text))


def pick_method(label: str, methods: Sequence[str], key: str, **kw: Any) -> str | None:
    """:func:`pick` over method names, shown with the catalogue's labels (``talos`` → "TaLoS",
    ``talos-k0.9`` → "TaLoS (k = 0.9)": :func:`talos_core.schema.method_label`), as the figures name them."""
    return pick(label, methods, key, format_func=method_label, **kw)


def pick_methods(label: str, methods: Sequence[str], key: str, **kw: Any) -> list[str]:
    """:func:`pick_many` over method names, shown with the catalogue's labels (:func:`pick_method`)."""
    return pick_many(label, methods, key, format_func=method_label, **kw)


def qkey(*parts: str) -> str:
    """A URL-safe widget key from parts (``qkey("a", "talos", "digits")`` → ``"a.talos.digits"``)."""
    return ".".join(slug(p) for p in parts)


# --------------------------------------------------------------------------------------------
# export
# --------------------------------------------------------------------------------------------
def ensure_browser_path() -> str | None:
    """Point kaleido at a local Chrome/Chromium (``BROWSER_PATH``); ``None`` if none is installed."""
    if os.environ.get("BROWSER_PATH") and Path(os.environ["BROWSER_PATH"]).exists():
        return os.environ["BROWSER_PATH"]
    for cand in CHROME_CANDIDATES:
        if Path(cand).exists():
            os.environ["BROWSER_PATH"] = cand
            return cand
    found = shutil.which("chromium") or shutil.which("google-chrome")
    if found:
        os.environ["BROWSER_PATH"] = found
    return found


def figure_bytes(fig: go.Figure, fmt: str) -> bytes:
    """``fig`` as PNG/SVG (kaleido + a local Chrome) or standalone HTML (always works, offline).

    Raises :class:`TalosError` with the reason when a static image cannot be produced.
    """
    from dashboard.figures import export_ready

    fig = export_ready(fig)
    if fmt == "html":
        return fig.to_html(include_plotlyjs=True, full_html=True).encode()
    if fmt not in ("png", "svg"):
        raise TalosError(f"export format must be png, svg or html, got {fmt!r}")
    ensure_browser_path()
    try:
        return fig.to_image(format=fmt, width=1100, height=fig.layout.height or 500, scale=2 if fmt == "png" else 1)
    except Exception as exc:  # kaleido missing, no Chrome, Chrome failed to start...
        raise TalosError(f"{fmt.upper()} export needs kaleido and a Chrome/Chromium browser "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no details'}); "
                         f"use the HTML export instead") from None


def _fig_key(fig: go.Figure, name: str) -> str:
    return hashlib.sha1((name + fig.to_json()).encode()).hexdigest()[:12]


@st.fragment
def _export_panel(fig: go.Figure, name: str, key: str) -> None:
    """PNG/SVG rendered on demand (kaleido starts a headless Chrome: seconds), HTML always available."""
    store_key = f"_img.{key}"
    fkey = _fig_key(fig, name)
    for fmt in ("png", "svg"):
        got = st.session_state.get(store_key + fmt)
        if got and got[0] == fkey and not isinstance(got[1], Exception):
            st.download_button(f"⬇ {md(name)}.{fmt}", got[1], file_name=f"{name}.{fmt}",
                               mime="image/png" if fmt == "png" else "image/svg+xml", key=f"{key}.d{fmt}",
                               on_click="ignore")
            continue
        if st.button(f"Render {fmt.upper()}", key=f"{key}.r{fmt}"):
            with st.spinner(f"Rendering {fmt.upper()}…"):
                try:
                    st.session_state[store_key + fmt] = (fkey, figure_bytes(fig, fmt))
                except TalosError as exc:
                    st.session_state[store_key + fmt] = (fkey, exc)
            st.rerun(scope="fragment")
        if got and got[0] == fkey and isinstance(got[1], Exception):
            st.warning(md(got[1]))
    st.download_button("⬇ HTML (interactive, offline)", lambda: figure_bytes(fig, "html"), file_name=f"{name}.html",
                       mime="text/html", key=f"{key}.dhtml", on_click="ignore")


def export_popover(fig: go.Figure, name: str, key: str) -> None:
    """The "Export figure" popover (PNG/SVG via kaleido, fallback HTML). Its panel is built only once the popover is
    opened (a rerun): Streamlit would otherwise build and draw every chart's buttons, and serialize every figure a
    second time (:func:`_fig_key`), on each page load, for popovers nobody opened."""
    pop = st.popover("Export figure", icon=":material/download:", key=f"{key}.open", on_change="rerun")
    if pop.open:
        with pop:
            _export_panel(fig, name, key)


def published_reference(label: str, note: str, *, key: str) -> None:
    """The paper's published numbers (Table 1), chart and table, in an expander built once opened (:func:`expander`):
    labelled as published, never mixed with the store's results."""
    from dashboard import figures

    with expander(label, f"{key}.open") as shown:
        if shown:
            st.caption(note)
            chart(figures.published_addition_bars(), "published_table1_vitb32", key=key)
            table(figures.published_addition_table(), "published_table1_vitb32", key=f"{key}_tbl")


def chart(fig: go.Figure, name: str, *, key: str | None = None, export: bool = True) -> None:
    """``st.plotly_chart`` plus an "Export" popover (:func:`export_popover`)."""
    key = key or name
    st.plotly_chart(fig, key=f"chart.{key}", config={"displaylogo": False})
    if export:
        export_popover(fig, name, f"exp.{key}")


@contextmanager
def expander(label: str, key: str, **kwargs: Any) -> Iterator[bool]:
    """``with expander(label, key) as shown:`` an ``st.expander`` whose content the caller builds only ``if shown``
    (the expander is open; opening it reruns the page or fragment). Streamlit otherwise builds a closed expander's
    charts and tables and draws them out of sight on every page load: for tables ("Data"), reference figures and
    other content a first view does not show."""
    box = st.expander(label, key=key, on_change="rerun", **kwargs)
    with box:
        yield bool(box.open)


def table(df: pd.DataFrame | Any, name: str, *, key: str | None = None, show: bool = True,
          raw: pd.DataFrame | None = None, column_order: Sequence[str] | None = None) -> None:
    """Show a table (DataFrame or Styler) and a CSV download button of its raw data; ``column_order``: the
    displayed columns' order (as ``st.dataframe``'s; the CSV keeps the data's order)."""
    raw_df = raw if raw is not None else (df.data if hasattr(df, "data") and not isinstance(df, pd.DataFrame) else df)
    if show:
        st.dataframe(df, hide_index=True, column_order=column_order)
    st.download_button(f"⬇ {md(name)}.csv", raw_df.to_csv(index=False).encode(), file_name=f"{name}.csv",
                       mime="text/csv", key=f"csv.{key or name}", on_click="ignore")


# --------------------------------------------------------------------------------------------
# blocks shared by pages: chosen hyperparameters (selection results)
# --------------------------------------------------------------------------------------------
def selections(ctx: Context, methods: Sequence[str] | None = None) -> list[data.Selection]:
    """The stored selection results of the current suite/model (of ``methods`` when given), in teaching
    order; a corrupt one is shown as a message and skipped."""
    out = []
    for m in ctx.methods("selection"):
        if methods is not None and m not in methods:
            continue
        sel = load("selection", ctx, m, stop=False)
        if sel is not None:
            out.append(sel)
    return out


def chosen_hyperparameters(ctx: Context, methods: Sequence[str] | None = None, *, key: str,
                           export: bool = True) -> bool:
    """"Chosen hyperparameters" beside results: per task the value each method's selection chose (a table,
    rows tasks), and in an expander every candidate's validation negation score (figure + table; ``export``:
    with the figure's export popover). Returns whether anything was shown (``False`` when the store has no
    selection for ``methods``)."""
    from dashboard import figures

    sels = selections(ctx, methods)
    if not sels:
        return False
    st.markdown("**Chosen hyperparameters** (per task, on the validation split)")
    left, right = st.columns([2, 3])
    with left:
        table(data.chosen_hyperparameters(sels), f"chosen_hyperparameters_{ctx.suite}_{ctx.model}",
              key=f"{key}.chosen")
    rules = {s.rule for s in sels if s.rule}
    right.caption("Each value was chosen by validation task negation (paper App. \"Hyperparameter selection\"): "
                  + ("; ".join(md(notation(r), at_start=False) for r in sorted(map(str, rules))) if rules
                     else "lowest target accuracy with the control task kept")
                  + ".")
    with expander("Selection candidates (value → validation negation score)", f"{key}.candidates") as shown:
        if shown:
            by_id = {s.method: s for s in sels}
            m = pick_method("Selection of", list(by_id), f"{key}.sel") if len(by_id) > 1 else next(iter(by_id))
            sel = by_id[m]
            chart(figures.selection_scores(sel.table, param=sel.param, method=m), f"selection_{m}",
                  key=f"{key}.selfig", export=export)
            table(data.selection_candidates(sel), f"selection_{ctx.suite}_{ctx.model}_{m}", key=f"{key}.seltbl")
    return True
