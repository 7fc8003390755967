"""Result names in the store (see ``SCHEMA.md``): ``<suite>__<model>__<method>[__...]``.

>>> result_name("default", "clip:ViT-B-32:openai", "talos")
'default__clip-ViT-B-32-openai__talos'
"""

from __future__ import annotations

import re

from talos_core.errors import TalosError

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def slug(text: str) -> str:
    """Replace anything not ``[A-Za-z0-9._-]`` by ``-``.

    >>> slug("hf-encoder:org/model")
    'hf-encoder-org-model'
    """
    return _UNSAFE.sub("-", str(text))


def check_suite(suite: str) -> str:
    """A suite name must be non-empty, made of ``[A-Za-z0-9._-]`` and contain no ``__``."""
    if not isinstance(suite, str) or not suite or _UNSAFE.search(suite) or "__" in suite:
        raise TalosError(f"suite name must be non-empty letters, digits, '.', '_' or '-' without '__', "
                         f"got {suite!r}")
    return suite


def result_name(suite: str, model: str, *parts: str) -> str:
    """``<suite>__<slug(model)>__<slug(part)>...``."""
    return "__".join([check_suite(suite), slug(model), *(slug(p) for p in parts)])
