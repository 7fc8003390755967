"""``imported``: runs whose task vector ``θ_ft − θ0`` comes from a checkpoint fine-tuned elsewhere.

They are written by ``talos import`` (:mod:`talos_core.importing`), never fine-tuned here: the catalogue marks
the method ``trains=False``, so the protocols find its runs in the store like any other method's and refuse to
fine-tune a missing one. Its one option, ``label``, is the method label recorded at import (``--method-label``):
``--option label=NAME`` picks the runs of one source when a store holds several.
"""

from __future__ import annotations

from talos_core.errors import TalosError
from talos_core.runners.base import MethodContext, MethodOutput

IMPORTED = "imported"
LABEL_OPTION = "label"


def refuse(ctx: MethodContext) -> MethodOutput:
    raise TalosError(f"method {IMPORTED!r} does not fine-tune: its runs are checkpoints brought in with talos import "
                     f"--model MODEL --task {ctx.task.name} PATH")


