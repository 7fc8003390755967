"""The method registry: every method's declaration, in the catalogue's order (the paper's tables, controls last).

:data:`talos_core.schema.METHODS`, the fine-tuning methods (:data:`talos_core.runners.catalogue.FINETUNE_METHODS`),
the post-hoc ones (:data:`talos_core.methods.merging.POSTHOC_METHODS`) and the variant ids' tags
(:data:`talos_core.schema.VARIANT_PARAMS`) are derived from this list. Adding a method is one declaration file
under ``talos_core/methods/`` and one line here. Torch-free: the declarations name their runners as strings.

>>> [d.name for d in DECLARATIONS if d.kind == "posthoc"][:3]
['ties', 'tall_consensus', 'dare']
"""

from __future__ import annotations

from talos_core.errors import TalosError, unknown
from talos_core.methods.breadcrumbs import DECLARATION as BREADCRUMBS
from talos_core.methods.dare import DECLARATION as DARE
from talos_core.methods.declaration import MethodDeclaration, MethodKind
from talos_core.methods.della import DECLARATION as DELLA
from talos_core.methods.finetuning import (
    IMPORTED,
    LINEARIZED,
    LLORA,
    LOTA,
    MAGNITUDE,
    NONLINEAR,
    RANDOM,
    TALOS,
    TALOS_TOP,
)
from talos_core.methods.iso import ISO_C, ISO_CTS
from talos_core.methods.lines import DECLARATION as LINES
from talos_core.methods.tall import DECLARATION as TALL
from talos_core.methods.ties import DECLARATION as TIES
from talos_core.methods.tsv import DECLARATION as TSV

DECLARATIONS: tuple[MethodDeclaration, ...] = (
    NONLINEAR, LINEARIZED,
    TIES, TALL, DARE, BREADCRUMBS, TSV, ISO_C, ISO_CTS, LINES, DELLA,
    LLORA, LOTA, TALOS,
    RANDOM, MAGNITUDE, TALOS_TOP,
    IMPORTED,
)
"""Every fine-tuning and post-hoc method, in the paper's table order (controls last)."""

METHODS: dict[str, MethodDeclaration] = {d.name: d for d in DECLARATIONS}
"""The declarations by name, in the registry's order (the store's format re-exports it:
:data:`talos_core.schema.METHODS`)."""


def method_info(name: str, kind: MethodKind | None = None) -> MethodDeclaration:
    """The declaration of ``name``; an unknown name, or one of another ``kind`` than asked for, is one
    :class:`TalosError`.

    >>> method_info("ties", "posthoc").label
    'TIES-Merging'
    """
    if name not in METHODS:
        raise unknown("method", name, METHODS)
    info = METHODS[name]
    if kind is not None and info.kind != kind:
        what = {"finetune": "fine-tuning", "posthoc": "post-hoc"}
        raise TalosError(f"method {name!r} is a {what[info.kind]} method in the catalogue, not {what[kind]}")
    return info
