"""Evaluation precision: fp32, or bf16 autocast where the hardware multiplies bf16 natively.

Every evaluation forward pass (predictions, zero-shot accuracies, the JVPs of linearized models and
of the preview cache) runs under :func:`autocast`. Which precision it uses is, in order:

1. the innermost :func:`eval_precision` block (``talos ... --eval-precision``, a suite's ``Scale``);
2. the environment variable ``TALOS_EVAL_PRECISION`` (the tests pin ``fp32`` this way);
3. ``"auto"``.

``"auto"`` resolves to bf16 on CUDA, and on CPUs with AMX bf16 tiles (Intel Sapphire Rapids and
later) for the model families in :data:`CPU_BF16_FAMILIES`, whose evaluation measured faster there;
to fp32 everywhere else. Measured on this project's 2-core Xeon (``bench/bench_eval_grid``): a
MiniLM-sized linear layer 5.5x faster in bf16, a MiniLM evaluation pass 2.9x and its JVP pass
2.2x — but a CLIP ViT-B/32 pass 0.69x (*slower*: under autocast ``nn.MultiheadAttention`` leaves
its fused path and bf16 products on its non-contiguous inputs copy), and without AMX bf16 products
are emulated and slower than fp32 (1.6x with AVX512-BF16, 12x with AVX2). Training is not affected
(it has its own ``TrainConfig.precision``). Weights stay fp32 — task vectors are applied to the
fp32 weights and autocast rounds the edited weights per product — and logits are returned as fp32.

bf16 changes a few borderline predictions (on MiniLM: 1 of 576 test predictions, JVP tangents
within 1 % of their range), so results are reproducible for a given resolved precision; every
suite record, run manifest and per-model table says which one was used.

>>> with eval_precision("fp32"):
...     resolve_precision("cpu", family="text-encoder")
'fp32'
>>> resolve_precision("cpu", "bf16")
'bf16'
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch

from talos_core.errors import TalosError

PRECISIONS = ("auto", "fp32", "bf16")
ENV_VAR = "TALOS_EVAL_PRECISION"
#: model families (``TaskModel.family``) that ``auto`` evaluates in bf16 on AMX CPUs (measured faster)
CPU_BF16_FAMILIES = frozenset({"text-encoder"})

_CURRENT: ContextVar[str | None] = ContextVar("talos_eval_precision", default=None)


def check_precision(precision: str) -> str:
    """``precision`` if it is one of :data:`PRECISIONS`, else a :class:`TalosError` naming the choices."""
    if precision not in PRECISIONS:
        raise TalosError(f"evaluation precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


def current_precision() -> str:
    """The requested precision (``auto``/``fp32``/``bf16``) before resolution against a device."""
    chosen = _CURRENT.get()
    if chosen is not None:
        return chosen
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        if env not in PRECISIONS:
            raise TalosError(f"{ENV_VAR} must be one of {', '.join(PRECISIONS)}, got {env!r}")
        return env
    return "auto"


def native_bf16(device: "str | torch.device") -> bool:
    """Whether ``device`` multiplies bf16 matrices natively (CUDA, or a CPU with AMX bf16 tiles)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return True
    if dev.type != "cpu":
        return False
    probe = getattr(torch.cpu, "_is_amx_tile_supported", None)
    try:
        return bool(probe()) if probe is not None else False
    except Exception:  # an older torch or an exotic build: assume no AMX
        return False


def resolve_precision(device: "str | torch.device", precision: str | None = None, *,
                      family: str | None = None) -> str:
    """``"fp32"`` or ``"bf16"``: what evaluating a ``family`` model on ``device`` uses (``precision`` or the
    current one; ``auto`` on a CPU needs AMX and a family in :data:`CPU_BF16_FAMILIES`)."""
    p = check_precision(precision if precision is not None else current_precision())
    if p != "auto":
        return p
    dev = torch.device(device)
    if dev.type == "cuda":
        return "bf16"
    return "bf16" if family in CPU_BF16_FAMILIES and native_bf16(dev) else "fp32"


def model_precision(model) -> str:
    """:func:`resolve_precision` for a loaded :class:`~talos_core.models.base.TaskModel`."""
    return resolve_precision(model.device, family=getattr(model, "family", None))


@contextmanager
def eval_precision(precision: str | None) -> Iterator[str]:
    """Evaluate in ``precision`` inside the block (``None``: leave the current setting)."""
    if precision is None:
        yield current_precision()
        return
    token = _CURRENT.set(check_precision(precision))
    try:
        yield precision
    finally:
        _CURRENT.reset(token)


def autocast(model) -> torch.autocast:
    """The autocast context of the current precision for ``model`` (a ``TaskModel``; disabled for fp32)."""
    return torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=model_precision(model) == "bf16")


__all__ = ["PRECISIONS", "ENV_VAR", "CPU_BF16_FAMILIES", "check_precision", "current_precision", "native_bf16",
           "resolve_precision", "model_precision", "eval_precision", "autocast"]
