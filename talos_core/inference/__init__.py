"""Inference on the pre-trained model θ0: the layer below fine-tuning, protocols and suites.

* :mod:`~talos_core.inference.runtime` — device choice, the cached pre-trained model carrying a task's
  frozen head, the process-wide memo of zero-shot accuracies;
* :mod:`~talos_core.inference.forward` — predictions of ``θ0 + Σ α τ`` (non-linear, or the linearized model
  through one JVP at θ0, shared with linearized fine-tuning and L-LoRA);
* :mod:`~talos_core.inference.attention` — the one attention context with forward-mode and vmap rules;
* :mod:`~talos_core.inference.precision` — evaluation precision (bf16 autocast where measured faster).

Modules are imported one by one (``from talos_core.inference.forward import predict``); this package
file imports nothing.
"""
