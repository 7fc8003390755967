"""Store-supplied text as plain text in Streamlit's Markdown (pure: no Streamlit import).

Every string a store supplies (task, method and suite names, suite-record fields, rules, paths, messages
naming them) goes through :func:`md` before it reaches ``st.markdown``/``caption``/``info``/``error``/
``warning``/``success``, a widget label or help, so a crafted store cannot make a viewer's browser load an
image, follow a link or render markup. Option lists of select boxes, tables and ``st.code`` are plain text
already.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

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
