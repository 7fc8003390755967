"""The fine-tuning methods by name (:data:`FINETUNE_METHODS`) and the method table of ``talos methods``, built from
the method registry (:data:`talos_core.methods.registry.DECLARATIONS`).

>>> sorted(m for m in FINETUNE_METHODS if m.startswith("talos"))
['talos', 'talos-top']
>>> [str(v) for v in method_table().set_index("name").loc["lota", ["kind", "sparse", "calibrates"]]]
['finetune', 'True', 'True']
"""

from __future__ import annotations

from talos_core.errors import unknown
from talos_core.methods.declaration import MethodDeclaration, resolve
from talos_core.methods.merging import POSTHOC_METHODS
from talos_core.runners.base import FinetuneMethod
from talos_core.schema import METHODS


def _entry(declaration: MethodDeclaration) -> FinetuneMethod:
    check = declaration.option_check
    return FinetuneMethod(declaration.name, declaration.description, declaration.resolve("runner"),
                          options=declaration.option_keys, check_options=resolve(check) if check else None)


FINETUNE_METHODS: dict[str, FinetuneMethod] = {name: _entry(d) for name, d in METHODS.items() if d.kind == "finetune"}
"""Every fine-tuning method by name, in the catalogue's (the paper's table) order."""


def get_method(name: str) -> FinetuneMethod:
    """The fine-tuning method ``name``; an unknown name is one :class:`TalosError` listing the choices."""
    if name not in FINETUNE_METHODS:
        raise unknown("method", name, FINETUNE_METHODS)
    return FINETUNE_METHODS[name]


METHOD_TABLE_COLUMNS = ["name", "label", "family", "kind", "sparse", "calibrates", "eval_mode", "options",
                        "description"]


def method_table() -> pandas.DataFrame:  # noqa: F821 - pandas is imported lazily
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
