"""Generated blocks in Markdown documents: the text between two markers is the output of a command on a store.

A block is

    <!-- talos:report vision -->
    ...what `talos report vision` prints...
    <!-- /talos:report -->

``<!-- talos:KIND ARGS... -->`` opens it and ``<!-- /talos:KIND -->`` closes it; everything between is replaced.
Kinds (:data:`KINDS`): ``report SUITE`` (:func:`talos_core.suites.report_markdown`, the ``talos report`` table),
``claims SUITE...`` (:func:`talos_core.evaluation.claims.claims_markdown`, the paper's claims with verdicts) and
``alpha-rule SUITE`` (:func:`talos_core.evaluation.claims.alpha_rule_markdown`, claim (a) under each α-grid rule),
``audit-checks`` (:func:`talos_core.evaluation.audit.checks_markdown`, the audit's checks) and ``audit-counts
SUITE...`` (:func:`talos_core.evaluation.audit.counts_markdown`, its flags per check and suite).
:func:`rewrite` and :func:`stale_blocks` are pure (a ``render(kind, args)`` callable gives each block's text);
:func:`store_renderer` binds them to a store; ``talos docs [--check]`` (:mod:`talos_core.cli.docs`) runs them over
files.

>>> text = "a\\n<!-- talos:report x -->\\nold\\n<!-- /talos:report -->\\nb\\n"
>>> print(rewrite(text, lambda kind, args: f"new {kind} {' '.join(args)}"), end="")
a
<!-- talos:report x -->
new report x
<!-- /talos:report -->
b
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from talos_core.errors import TalosError

#: block kinds and how many arguments each takes (min, max; None: any number)
KINDS: dict[str, tuple[int, int | None]] = {"report": (1, 1), "claims": (1, None), "alpha-rule": (1, 1),
                                            "audit-checks": (0, 0), "audit-counts": (1, None)}

Render = Callable[[str, tuple[str, ...]], str]

_OPEN = re.compile(r"<!--\s*talos:([\w-]+)((?:\s+[^\s>]+)*?)\s*-->")
_CLOSE = re.compile(r"<!--\s*/talos:([\w-]+)\s*-->")


@dataclass(frozen=True)
class Block:
    """One generated block: its kind and arguments, the 1-based line of its opening marker, the text between
    the markers (``body``) and the character span of that text in the document (``start``, ``end``)."""

    kind: str
    args: tuple[str, ...]
    line: int
    body: str
    start: int
    end: int

    @property
    def label(self) -> str:
        return " ".join((self.kind, *self.args))


def find_blocks(text: str, source: str = "the document") -> list[Block]:
    """The generated blocks of ``text`` in order. An unknown kind, a wrong number of arguments, a marker that is
    not closed (or closed by another kind), a nested block or a stray closing marker is one :class:`TalosError`
    naming ``source`` and the line."""
    blocks, pos = [], 0
    while True:
        opened, closed = _OPEN.search(text, pos), _CLOSE.search(text, pos)
        if closed is not None and (opened is None or closed.start() < opened.start()):
            raise TalosError(f"{source}, line {_line(text, closed.start())}: a closing marker "
                             f"<!-- /talos:{closed.group(1)} --> without its opening marker")
        if opened is None:
            return blocks
        kind, args, line = opened.group(1), tuple(opened.group(2).split()), _line(text, opened.start())
        if kind not in KINDS:
            raise TalosError(f"{source}, line {line}: unknown generated block kind {kind!r} "
                             f"(known: {', '.join(KINDS)})")
        low, high = KINDS[kind]
        if len(args) < low or (high is not None and len(args) > high):
            raise TalosError(f"{source}, line {line}: the {kind} block takes "
                             f"{low if low == high else f'at least {low}'} argument(s), got {len(args)}")
        closed = _CLOSE.search(text, opened.end())
        inner = _OPEN.search(text, opened.end())
        if closed is None or closed.group(1) != kind or (inner is not None and inner.start() < closed.start()):
            raise TalosError(f"{source}, line {line}: the {kind} block is not closed by <!-- /talos:{kind} --> "
                             "before the next marker")
        blocks.append(Block(kind, args, line, text[opened.end():closed.start()], opened.end(), closed.start()))
        pos = closed.end()


def _line(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _framed(rendered: str) -> str:
    """The text between the markers: the rendered text on its own lines."""
    return "\n" + rendered.strip("\n") + "\n"


def rewrite(text: str, render: Render, source: str = "the document") -> str:
    """``text`` with every generated block's body replaced by ``render(kind, args)`` (the rest unchanged)."""
    out, pos = [], 0
    for block in find_blocks(text, source):
        out += [text[pos:block.start], _framed(render(block.kind, block.args))]
        pos = block.end
    return "".join(out) + text[pos:]


def stale_blocks(text: str, render: Render, source: str = "the document") -> list[Block]:
    """The generated blocks of ``text`` whose body differs from what ``render`` gives now."""
    return [b for b in find_blocks(text, source) if b.body != _framed(render(b.kind, b.args))]


def store_renderer(store: str | Path) -> Render:
    """``render(kind, args)`` on ``store``, each distinct block computed once."""
    cache: dict[tuple[str, tuple[str, ...]], str] = {}

    def render(kind: str, args: tuple[str, ...]) -> str:
        if (kind, args) not in cache:
            if kind == "report":
                from talos_core.suites import report_markdown

                cache[kind, args] = report_markdown(store, args[0])
            elif kind == "claims":
                from talos_core.evaluation.claims import claims_markdown

                cache[kind, args] = claims_markdown(store, args)
            elif kind == "alpha-rule":
                from talos_core.evaluation.claims import alpha_rule_markdown

                cache[kind, args] = alpha_rule_markdown(store, args[0])
            elif kind == "audit-checks":
                from talos_core.evaluation.audit import checks_markdown

                cache[kind, args] = checks_markdown()
            elif kind == "audit-counts":
                from talos_core.evaluation.audit import counts_markdown

                cache[kind, args] = counts_markdown(store, args)
            else:
                raise TalosError(f"unknown generated block kind {kind!r} (known: {', '.join(KINDS)})")
        return cache[kind, args]

    return render
