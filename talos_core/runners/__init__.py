"""Runners: how each fine-tuning method trains. A method is declared in :mod:`talos_core.methods.finetuning`
(data: its hyperparameters, flags and label); the declaration names its runner here as ``"module:function"``:
:mod:`talos_core.runners.talos` (TaLoS and the mask controls), :mod:`talos_core.runners.baselines` (full and
linearized fine-tuning, LoTA), :mod:`talos_core.runners.lora` (L-LoRA) and :mod:`talos_core.runners.imported`
(checkpoints fine-tuned elsewhere: never trains). :mod:`talos_core.runners.base` is the interface a runner meets
(:class:`~talos_core.runners.base.MethodContext` in, :class:`~talos_core.runners.base.MethodOutput` out) and
:mod:`talos_core.runners.catalogue` the methods by name (:func:`get_method`).

The runners sit above the training loop and the masks, which they drive; the declarations sit below the store's
format, which lists them.
"""

from talos_core.runners.catalogue import FINETUNE_METHODS, METHOD_TABLE_COLUMNS, get_method, method_table

__all__ = ["FINETUNE_METHODS", "METHOD_TABLE_COLUMNS", "get_method", "method_table"]
