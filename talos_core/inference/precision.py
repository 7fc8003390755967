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
are emulated and slower than fp32 (1.6x with AVX512-BF16, 12x with AVX2). Training has its own rule
(below). Weights stay fp32 — task vectors are applied to the
fp32 weights and autocast rounds the edited weights per product — and logits are returned as fp32.

bf16 changes a few borderline predictions (on MiniLM: 1 of 576 test predictions, JVP tangents
within 1 % of their range), so results are reproducible for a given resolved precision; every
suite record, run manifest and per-model table says which one was used.

>>> with eval_precision("fp32"):
...     resolve_precision("cpu", family="text-encoder")
'fp32'
>>> resolve_precision("cpu", "bf16")
'bf16'

**Training precision** follows the same kind of rule (:func:`resolve_train_precision`): the requested
precision is, innermost first, an explicit setting (``FinetuneRequest.train_precision``, ``talos ...
--train-precision``, a suite ``Scale.train_precision``), the environment variable
``TALOS_TRAIN_PRECISION``, else ``"auto"``. ``"auto"`` trains in bf16 autocast on CUDA (as before),
and on CPUs with native bf16 (:func:`native_bf16`: AMX) only for the families in
:data:`CPU_TRAIN_BF16_FAMILIES`, where bf16 *training* was measured faster; fp32 everywhere else.
bf16 training is autocast with fp32 master weights: parameters, gradients' accumulation into the
optimizer and the AdamW moments stay fp32 (:class:`talos_core.training.MaskedAdamW`), only the
products inside the forward and backward run in bf16. Run manifests record the resolved training
precision (``train_precision``); see :meth:`talos_core.pipeline.FinetuneRequest.config_dict` for how it
enters the run id.

>>> resolve_train_precision("cpu", "bf16"), resolve_train_precision("cuda", "auto")
('bf16', 'bf16')
>>> hashed_train_precision("cpu", "fp32"), hashed_train_precision("cpu", "bf16")
('auto', 'bf16')
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
TRAIN_ENV_VAR = "TALOS_TRAIN_PRECISION"
#: model families that ``auto`` *trains* in bf16 autocast on CPUs with native bf16 (AMX). Empty: a family
#: enters only once ``bench/bench_train_precision.py`` measured bf16 training faster, at no loss of validation
#: accuracy, on an AMX CPU. So far it ran only on a CPU without AMX (AVX2 only, bf16 emulated): MiniLM steps
#: 15-20x slower in bf16, validation accuracy the same within 1 point (bench/RESULTS.md "Training precision").
CPU_TRAIN_BF16_FAMILIES: frozenset[str] = frozenset()

_CURRENT: ContextVar[str | None] = ContextVar("talos_eval_precision", default=None)


def check_precision(precision: str, what: str = "evaluation precision") -> str:
    """``precision`` if it is one of :data:`PRECISIONS`, else a :class:`TalosError` naming the choices."""
    if precision not in PRECISIONS:
        raise TalosError(f"{what} must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


def _env_precision(var: str) -> str:
    """The precision the environment variable ``var`` asks for (``"auto"`` when unset); one sentence if invalid."""
    env = os.environ.get(var, "").strip()
    if env and env not in PRECISIONS:
        raise TalosError(f"{var} must be one of {', '.join(PRECISIONS)}, got {env!r}")
    return env or "auto"


def current_precision() -> str:
    """The requested precision (``auto``/``fp32``/``bf16``) before resolution against a device."""
    chosen = _CURRENT.get()
    if chosen is not None:
        return chosen
    return _env_precision(ENV_VAR)


def native_bf16(device: str | torch.device) -> bool:
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


def _resolve(device: str | torch.device, requested: str, cpu_family_measured_faster: bool) -> str:
    """The one ``auto`` rule of evaluation and training: bf16 on CUDA; on a CPU bf16 only with native bf16
    (AMX) and a model family measured faster there; fp32 otherwise. Explicit requests pass through."""
    if requested != "auto":
        return requested
    dev = torch.device(device)
    if dev.type == "cuda":
        return "bf16"
    return "bf16" if cpu_family_measured_faster and native_bf16(dev) else "fp32"


def resolve_precision(device: str | torch.device, precision: str | None = None, *,
                      family: str | None = None) -> str:
    """``"fp32"`` or ``"bf16"``: what evaluating a ``family`` model on ``device`` uses (``precision`` or the
    current one; ``auto`` on a CPU needs AMX and a family in :data:`CPU_BF16_FAMILIES`)."""
    p = check_precision(precision if precision is not None else current_precision())
    return _resolve(device, p, family in CPU_BF16_FAMILIES)


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


# --------------------------------------------------------------------------------------------
# training precision
# --------------------------------------------------------------------------------------------
def requested_train_precision(precision: str | None = None) -> str:
    """The requested training precision (``auto``/``fp32``/``bf16``): ``precision`` when given, else
    ``$TALOS_TRAIN_PRECISION``, else ``"auto"``."""
    if precision is not None:
        return check_precision(precision, "training precision")
    return _env_precision(TRAIN_ENV_VAR)


def resolve_train_precision(device: str | torch.device, precision: str | None = None, *,
                            family: str | None = None) -> str:
    """``"fp32"`` or ``"bf16"``: what fine-tuning a ``family`` model on ``device`` uses (``precision``, else
    :func:`requested_train_precision`; ``auto`` = bf16 on CUDA, and on a CPU only with native bf16 and a
    family in :data:`CPU_TRAIN_BF16_FAMILIES`)."""
    return _resolve(device, requested_train_precision(precision), family in CPU_TRAIN_BF16_FAMILIES)


def legacy_train_precision(device: str | torch.device) -> str:
    """What training precision ``"auto"`` meant before the rule above: bf16 on CUDA, fp32 elsewhere."""
    return "bf16" if torch.device(device).type == "cuda" else "fp32"


def hashed_train_precision(device: str | torch.device, resolved: str) -> str:
    """The training precision as a run's identity records it: ``"auto"`` when ``resolved`` is what ``auto``
    meant before training precision could be chosen (:func:`legacy_train_precision`; every earlier run id
    hashed ``"auto"``, so those ids stay valid), else ``resolved`` itself."""
    resolved = check_precision(resolved, "training precision")
    if resolved == "auto":
        return "auto"
    return "auto" if resolved == legacy_train_precision(device) else resolved


__all__ = ["PRECISIONS", "ENV_VAR", "CPU_BF16_FAMILIES", "check_precision", "current_precision", "native_bf16",
           "resolve_precision", "model_precision", "eval_precision", "autocast", "TRAIN_ENV_VAR",
           "CPU_TRAIN_BF16_FAMILIES", "requested_train_precision", "resolve_train_precision", "legacy_train_precision",
           "hashed_train_precision"]
