"""Store-supplied text as plain text in Streamlit's Markdown and in Plotly figures (pure: no Streamlit import).

Every string a store supplies (task, method and suite names, suite-record fields, rules, paths, messages
naming them) goes through :func:`md` before it reaches ``st.markdown``/``caption``/``info``/``error``/
``warning``/``success``, a widget label or help, so a crafted store cannot make a viewer's browser load an
image, follow a link or render markup. Option lists of select boxes, tables and ``st.code`` are plain text
already. Figures: every figure function is decorated with :func:`plain_figure`, which passes the strings among
its arguments through :func:`figure_text` (Plotly's own HTML subset: tags, links, entities, LaTeX, placeholders).
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

import numpy as np
import pandas as pd

_MD_ANYWHERE = re.compile(r"([\\`*\[\]<>$~])")
_MD_LINE_START = re.compile(r"^(\s*)([#>+=-]|\d+[.)])")
_AUTOLINK = re.compile(r"(:(?=//)|(?<=www)\.|@)", re.IGNORECASE)
_ZWSP = "\u200b"  # zero-width space: invisible, but no URL or e-mail pattern matches across it


def md(value: Any, *, at_start: bool = True) -> str:
    r"""``value`` (a task, method or suite name, a suite field, a path, a message naming them) as Markdown that
    renders as exactly that text in ``st.markdown``/``caption``/``info``/``error``, widget labels and help.

    A store is data from anyone: a task named ``![x](http://host/leak.png)`` must not make every viewer's
    browser fetch that URL. Backslash-escapes what starts images, links, HTML, code, emphasis, math
    (``[ ] < > ` * ~ $`` and ``\``) and block markers at the start; bare URLs and e-mail addresses (which
    GitHub-flavoured Markdown links after parsing, escapes or not) get a zero-width space after ``:`` of
    ``://``, the ``.`` of ``www.`` and ``@``; newlines become
    spaces; ``at_start=False`` for text placed inside a line (no block-marker escape). Ordinary names
    (``tiny-clip``, ``fashion-mnist``, ``tall_consensus``) come out unchanged.

    >>> md("![x](http://host/leak.png)") == "!\\[x\\](http:\u200b//host/leak.png)"
    True
    >>> md("tiny-clip")
    'tiny-clip'
    """
    text = " ".join(str(value).splitlines())
    text = _MD_ANYWHERE.sub(r"\\\1", text)
    text = _AUTOLINK.sub(lambda m: m.group(1) + _ZWSP, text)
    if not at_start:
        return text
    return _MD_LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), text, count=1)


_NOTATION = [(re.compile(p), r) for p, r in (
    (r"\btheta0\b", "θ0"), (r"\btheta_0\b", "θ0"), (r"\balphas\b", "α's"), (r"\balpha\b", "α"), (r"\btau\b", "τ"),
    (r"\s\*\s", "·"), (r">=", "≥"), (r"<=", "≤"), (r"\.\.\.", "…"),
    (r"(?<=[\d,)])\s+x\s+(?=[\w(])", " × "), (r"(?<=[\w)])\s-\s(?=[\w(])", " − "))]


def notation(text: str) -> str:
    """Text a protocol wrote with ASCII math (a stored rule: ``theta0 - alpha * tau``, ``>= 0.95 x``) in the
    notation every page uses (``θ0 − α·τ``, ``≥ 0.95 ×``); words with hyphens stay as they are.

    >>> notation("curve theta0 - alpha * tau over (0, step, ..., 1, x 1/(1 - k)); >= 0.95 x its task-negation")
    'curve θ0 − α·τ over (0, step, …, 1, × 1/(1 − k)); ≥ 0.95 × its task-negation'
    """
    for pattern, repl in _NOTATION:
        text = pattern.sub(repl, text)
    return text


def plain_data(obj: Any) -> Any:
    r"""``obj`` (a store's JSON: dicts, lists, strings, numbers) with every string, keys included, passed
    through :func:`md` for use inside a Markdown line; other values unchanged.

    >>> plain_data({"tasks": ["digits", "![x](y)"], "steps": 40})
    {'tasks': ['digits', '!\\[x\\](y)'], 'steps': 40}
    """
    if isinstance(obj, str):
        return md(obj, at_start=False)
    if isinstance(obj, Mapping):
        return {(md(k, at_start=False) if isinstance(k, str) else k): plain_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(plain_data(v) for v in obj)
    return obj


# --------------------------------------------------------------------------------------------
# Plotly: store strings as plain text in figures
# --------------------------------------------------------------------------------------------
# Plotly.js renders a subset of HTML in every text it draws (titles, axis and tick labels, legend names, hover
# labels, annotations, colour-bar titles): <a href=…> (http:, https:, mailto: links: a click opens the URL; javascript:
# is dropped), <span style=…>, <b>, <i>, <em>, <s>, <u>, <sub>, <sup>, <br>; it decodes &amp; &lt; &gt; &#NN; and
# &#xNN; into text; a text between $…$ is LaTeX (typeset when MathJax is on the page); %{…} in a hover template is
# a placeholder. Entities are decoded after the tags and placeholders are found, so an escaped character is shown,
# never interpreted (checked in Streamlit's bundled plotly.js, svg_text_utils: convertToTspans, convertEntities).
_FIGURE_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "$": "&#36;"}
_FIGURE_SPECIAL = re.compile(r"[&<>$]|%\{")


def figure_text(value: str) -> str:
    """``value`` (a task, method, suite or model name from a store) as Plotly text that is shown as exactly that
    text: ``& < > $`` become entities and the ``%`` of ``%{`` becomes ``&#37;`` (no tag, link, style, LaTeX or
    hover placeholder can come from a store). Ordinary names come out unchanged.

    >>> figure_text('<a href="http://h/x">t</a>')
    '&lt;a href="http://h/x"&gt;t&lt;/a&gt;'
    >>> figure_text("tiny-clip")
    'tiny-clip'
    """
    if not _FIGURE_SPECIAL.search(value):
        return value
    return _FIGURE_SPECIAL.sub(lambda m: _FIGURE_ESCAPES.get(m.group(0), "&#37;{"), value)


def figure_text_back(value: Any) -> Any:
    """The store string behind a figure's text (a clicked point's ``x``/``y``): the inverse of :func:`figure_text`.

    >>> figure_text_back(figure_text("<b>x</b> & $1 %{y}"))
    '<b>x</b> & $1 %{y}'
    """
    return html.unescape(value) if isinstance(value, str) else value


def _plain_label(value: Any) -> Any:
    return figure_text(value) if isinstance(value, str) else value


def _textual(dtype: Any) -> bool:
    return pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype)


def _plain_series(s: pd.Series) -> pd.Series | None:
    """``s`` with its strings escaped, or None when none needs it."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        cats = s.cat.categories
        if _textual(cats.dtype) and any(isinstance(c, str) and _FIGURE_SPECIAL.search(c) for c in cats):
            return s.cat.rename_categories([_plain_label(c) for c in cats])
        return None
    if _textual(s.dtype) and any(isinstance(v, str) and _FIGURE_SPECIAL.search(v) for v in pd.unique(s)):
        return s.map(_plain_label)
    return None


def _needs_plain_labels(index: pd.Index) -> bool:
    if isinstance(index, pd.MultiIndex):
        return any(_needs_plain_labels(level) for level in index.levels)
    return _textual(index.dtype) and any(isinstance(v, str) and _FIGURE_SPECIAL.search(v) for v in index)


def figure_data(obj: Any) -> Any:
    """``obj`` (a figure function's argument: a string, a list/tuple/dict of them, a DataFrame, a Series, a numpy
    array) with every string in it, labels included, passed through :func:`figure_text`; numbers and other
    objects (a figure, a colour scale) unchanged. Unchanged inputs are returned as they are (no copy)."""
    if isinstance(obj, str):
        return figure_text(obj)
    if isinstance(obj, pd.DataFrame):
        changed = {i: new for i in range(obj.shape[1]) if (new := _plain_series(obj.iloc[:, i])) is not None}
        if not changed and not _needs_plain_labels(obj.index) and not _needs_plain_labels(obj.columns):
            return obj
        out = obj.copy()
        for i, new in changed.items():
            out.isetitem(i, new)
        return out.rename(index=_plain_label, columns=_plain_label)
    if isinstance(obj, pd.Series):
        new = _plain_series(obj)
        out = obj if new is None else new
        return out.rename(index=_plain_label) if _needs_plain_labels(out.index) else out
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in "OUS":
            return np.vectorize(_plain_label, otypes=[object])(obj) if obj.size else obj
        return obj
    if isinstance(obj, Mapping):
        return {figure_data(k): figure_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        return type(obj)(figure_data(v) for v in obj)
    return obj


_IN_FIGURE: ContextVar[bool] = ContextVar("talos_plain_figure", default=False)


def plain_figure(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator of a figure function (``dashboard/figures*.py``, returns a ``go.Figure``): every string among its
    arguments (store-supplied task, method, suite, model names, titles naming them, DataFrame cells and labels)
    reaches Plotly as plain text (:func:`figure_data`); the markup the function itself writes (``<br>`` in hover
    templates, ``<extra>``) stays markup. A figure function called inside another is not escaped twice."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _IN_FIGURE.get():
            return fn(*args, **kwargs)
        token = _IN_FIGURE.set(True)
        try:
            return fn(*(figure_data(a) for a in args), **{k: figure_data(v) for k, v in kwargs.items()})
        finally:
            _IN_FIGURE.reset(token)

    wrapper.plain_figure = True  # type: ignore[attr-defined]
    return wrapper
