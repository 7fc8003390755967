"""The method registry: every method's declaration, in the catalogue's order (the paper's tables, controls last).

:data:`talos_core.schema.METHODS`, the fine-tuning methods (:data:`talos_core.methods.catalogue.FINETUNE_METHODS`),
the post-hoc ones (:data:`talos_core.methods.merging.POSTHOC_METHODS`) and the variant ids' tags
(:data:`talos_core.schema.VARIANT_PARAMS`) are derived from this list. Adding a method is one declaration file
under ``talos_core/methods/`` and one line here. Torch-free: the declarations name their runners as strings.

>>> [d.name for d in DECLARATIONS if d.kind == "posthoc"][:3]
['ties', 'tall_consensus', 'dare']
"""

from __future__ import annotations

from talos_core.methods.breadcrumbs import DECLARATION as BREADCRUMBS
from talos_core.methods.dare import DECLARATION as DARE
from talos_core.methods.declaration import MethodDeclaration
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
