"""``talos docs [--check] [--store DIR] [FILES...]``: rewrite (or check) the generated blocks of Markdown files.

Every ``<!-- talos:KIND ARGS -->`` … ``<!-- /talos:KIND -->`` block (:mod:`talos_core.docblocks`) is replaced by
what the store gives now: ``report SUITE`` the ``talos report`` table, ``claims SUITE...`` the paper's claims.
Without FILES: ``README.md`` and ``docs/*.md`` of the current folder. ``--check`` writes nothing and exits 1 with
one sentence per stale block.

Example::

    talos docs --store cached_results            # after shipping new results
    talos docs --check --store cached_results    # CI: the committed tables are what the store gives
"""

from __future__ import annotations

import argparse
from pathlib import Path

from talos_core.cli.common import add_store_argument
from talos_core.errors import TalosError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("docs", help="rewrite (or --check) the generated results tables of README.md and docs/*.md")
    p.add_argument("files", nargs="*", help="Markdown files (default: README.md and docs/*.md of this folder)")
    add_store_argument(p, viewer=True, help="store the tables are generated from")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 naming each block that differs from what the store gives")
    p.set_defaults(handler=_docs)


def default_files(root: Path = Path(".")) -> list[Path]:
    """``README.md`` and ``docs/*.md`` under ``root`` that exist."""
    return [p for p in (root / "README.md", *sorted((root / "docs").glob("*.md"))) if p.is_file()]


def _markdown(path: Path) -> str:
    """The text of Markdown file ``path``; a file that is not UTF-8 text is one :class:`TalosError`."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TalosError(f"{path} is not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}); give Markdown "
                         f"files saved as UTF-8") from None


def _docs(args: argparse.Namespace) -> int:
    from talos_core.docblocks import find_blocks, rewrite, stale_blocks, store_renderer

    files = [Path(f) for f in args.files] or default_files()
    if not files:
        raise TalosError("no Markdown files given and no README.md or docs/*.md here; pass the files")
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise TalosError(f"no such file: {', '.join(missing)}")
    render, stale, blocks = store_renderer(args.store), 0, 0
    texts = {path: _markdown(path) for path in files}  # every file is read before any is rewritten
    for path, text in texts.items():
        blocks += len(find_blocks(text, str(path)))
        if args.check:
            for block in stale_blocks(text, render, str(path)):
                stale += 1
                print(f"{path}: the generated block '{block.label}' (line {block.line}) differs from what "
                      f"{args.store} gives; run `talos docs --store {args.store} {path}` to rewrite it")
            continue
        new = rewrite(text, render, str(path))
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {path}")
    if args.check and not stale:
        print(f"{blocks} generated block(s) in {len(files)} file(s) match {args.store}")
    return 1 if stale else 0
