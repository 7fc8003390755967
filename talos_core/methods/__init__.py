"""Methods, as data: one declaration per method (:mod:`talos_core.methods.declaration`), listed in the registry
:data:`talos_core.methods.registry.DECLARATIONS` from which the catalogue :data:`talos_core.schema.METHODS` is
derived.

The fine-tuning methods turn a :class:`~talos_core.methods.base.MethodContext` into a
:class:`~talos_core.methods.base.MethodOutput`; they are declared in :mod:`talos_core.methods.finetuning` and run by
:mod:`talos_core.methods.talos` (TaLoS and the mask controls), :mod:`talos_core.methods.baselines` (full
fine-tuning, L-LoRA, LoTA) and :mod:`talos_core.methods.imported` (checkpoints fine-tuned elsewhere, ``talos
import``; never trains). Each post-hoc merge is one file (:mod:`talos_core.methods.ties`, ``dare``, ``breadcrumbs``,
``tall``, ``tsv``, ``iso``, ``lines``, ``della``) over the tensor functions of :mod:`talos_core.methods.taskvec`,
:mod:`~talos_core.methods.sparsify` and :mod:`~talos_core.methods.spectral`; :mod:`talos_core.methods.merging` is
their registry view.

This package imports nothing when it is imported — the catalogue (torch-free) imports the declarations below it —
so :data:`FINETUNE_METHODS`, :func:`get_method` and :func:`method_table` (from
:mod:`talos_core.methods.catalogue`) are loaded on first use.
"""

from __future__ import annotations

from typing import Any

_CATALOGUE_NAMES = ("FINETUNE_METHODS", "METHOD_TABLE_COLUMNS", "get_method", "method_table")


def __getattr__(name: str) -> Any:
    if name in _CATALOGUE_NAMES:
        from talos_core.methods import catalogue

        return getattr(catalogue, name)
    raise AttributeError(f"module 'talos_core.methods' has no attribute {name!r}")
