"""Fine-tuning methods, as data: :data:`FINETUNE_METHODS` assembled from an explicit list.

Each :class:`~talos_core.methods.base.FinetuneMethod` turns a
:class:`~talos_core.methods.base.MethodContext` into a :class:`~talos_core.methods.base.MethodOutput`;
its flags (``sparse``, ``calibrates``, ``eval_mode``), label and family come from the method catalogue
:data:`talos_core.schema.METHODS`. The methods live in :mod:`talos_core.methods.talos` (TaLoS and the
mask controls), :mod:`talos_core.methods.baselines` (full fine-tuning, L-LoRA, LoTA) and
:mod:`talos_core.methods.imported` (checkpoints fine-tuned elsewhere, ``talos import``; never trains); the
post-hoc methods are in :mod:`talos_core.methods.merging`.

>>> sorted(m for m in FINETUNE_METHODS if m.startswith("talos"))
['talos', 'talos-top']
>>> [str(v) for v in method_table().set_index("name").loc["lota", ["kind", "sparse", "calibrates"]]]
['finetune', 'True', 'True']
"""

from __future__ import annotations

from talos_core.errors import unknown
from talos_core.methods.base import FinetuneMethod
from talos_core.methods.baselines import BASELINE_METHODS
from talos_core.methods.imported import IMPORTED_METHOD
from talos_core.methods.merging import POSTHOC_METHODS
from talos_core.methods.talos import MASK_CONTROLS, TALOS_METHODS
from talos_core.schema import METHODS

_ENTRIES = {m.name: m for m in (*TALOS_METHODS, *MASK_CONTROLS, *BASELINE_METHODS, IMPORTED_METHOD)}

FINETUNE_METHODS: dict[str, FinetuneMethod] = {name: _ENTRIES[name] for name in METHODS if name in _ENTRIES}
"""Every fine-tuning method by name, in the catalogue's (the paper's table) order."""


def get_method(name: str) -> FinetuneMethod:
    """The fine-tuning method ``name``; an unknown name is one :class:`TalosError` listing the choices."""
    if name not in FINETUNE_METHODS:
        raise unknown("method", name, FINETUNE_METHODS)
    return FINETUNE_METHODS[name]


METHOD_TABLE_COLUMNS = ["name", "label", "family", "kind", "sparse", "calibrates", "eval_mode", "options",
                        "description"]


def method_table() -> "pandas.DataFrame":  # noqa: F821 - pandas is imported lazily
    """One row per fine-tuning and post-hoc method, in catalogue order (for ``talos methods``)."""
    import pandas as pd

    rows = []
    for name, info in METHODS.items():
        entry = FINETUNE_METHODS.get(name) if info.kind == "finetune" else POSTHOC_METHODS.get(name)
        if entry is None:
            continue  # catalogued but not implemented here
        options = entry.options if info.kind == "posthoc" else {}  # labelled conventions, the authors' first
        rows.append({"name": name, "label": info.label, "family": info.family, "kind": info.kind,
                     "sparse": info.sparse, "calibrates": info.calibrates, "eval_mode": info.eval_mode,
                     "options": " ".join(f"{k}={'|'.join(map(str, v))}" for k, v in options.items()) or "-",
                     "description": entry.description})
    return pd.DataFrame(rows, columns=METHOD_TABLE_COLUMNS)
