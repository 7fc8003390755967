"""The attention kernels that ``torch.func`` transforms can go through: one context for every caller.

Forward-mode AD (``torch.func.jvp``: linearized evaluation, linearized fine-tuning, L-LoRA) and
``torch.func.vmap`` over per-example gradients (Fisher scores for TaLoS calibration,
:mod:`talos_core.fisher`) both need attention written with differentiable, batchable operations.
The fused kernels — ``nn.MultiheadAttention``'s native fast path (used by open_clip in eval mode) and
the flash / memory-efficient ``scaled_dot_product_attention`` backends — have no forward-mode AD rule,
and on CPU the fused SDPA kernel has no vmap batching rule (it falls back to a per-example loop).
:func:`differentiable_attention` selects the math SDPA backend and turns the MHA fast path off.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def differentiable_attention() -> Iterator[None]:
    """Math ``scaled_dot_product_attention`` backend and no MHA fast path inside the block.

    The previous fast-path setting is restored on exit (the SDPA backend choice is scoped by
    :func:`torch.nn.attention.sdpa_kernel`).

    >>> with differentiable_attention():
    ...     torch.backends.mha.get_fastpath_enabled()
    False
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    previous = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with sdpa_kernel(SDPBackend.MATH):
            yield
    finally:
        torch.backends.mha.set_fastpath_enabled(previous)
