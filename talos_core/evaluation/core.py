"""Predictions of an edited model ``θ0 + Σ α_t τ_t``: the one primitive every protocol uses.

``mode="nonlinear"`` edits the weights in place (:func:`talos_core.vectors.apply_vectors`) for the
whole split and restores them bitwise afterwards — no model copies. ``mode="linearized"`` evaluates
the first-order Taylor model ``f(x, θ0) + (Σ α τ)ᵀ ∇θ f(x, θ0)`` with one Jacobian-vector product
(``torch.func.jvp``), as required for linearized fine-tuning and L-LoRA task vectors.
Batches run under ``torch.inference_mode`` (non-linear) and bf16 autocast on GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch
from torch.func import functional_call, jvp

from talos_core.models.base import Batch, TaskModel
from talos_core.tasks.base import Split, TaskSpec
from talos_core.vectors import TaskVector, apply_vectors, sum_vectors

Mode = Literal["nonlinear", "linearized"]
Terms = Sequence[tuple[TaskVector, float]]


def iter_batches(model: TaskModel, split: Split, task: TaskSpec, batch_size: int):
    for start in range(0, len(split), batch_size):
        part = split.take(np.arange(start, min(start + batch_size, len(split))))
        yield {k: v.to(model.device) for k, v in model.prepare(part.inputs, task).items()}


def _autocast(model: TaskModel):
    dev = model.device.type
    return torch.autocast(dev, dtype=torch.bfloat16, enabled=dev == "cuda")


def linearized_logits(model: TaskModel, batch: Batch, delta: dict[str, torch.Tensor]) -> torch.Tensor:
    """``f(x, θ0) + δᵀ∇θ f(x, θ0)`` for a dense ``delta`` over some parameters (others fixed)."""
    params = {n: p.detach() for n, p in model.named_parameters()}
    names = [n for n in delta if n in params]
    primals = tuple(params[n] for n in names)
    tangents = tuple(delta[n].to(device=params[n].device, dtype=params[n].dtype) for n in names)
    const = {n: v for n, v in params.items() if n not in delta}

    def f(*values: torch.Tensor) -> torch.Tensor:
        return functional_call(model, (dict(zip(names, values)), const), args=(), kwargs=batch, strict=False)

    out, dout = jvp(f, primals, tangents)
    return out + dout


def predict_logits(model: TaskModel, task: TaskSpec, split: Split, terms: Terms = (), *,
                   mode: Mode = "nonlinear", batch_size: int = 128) -> torch.Tensor:
    """Logits ``[N, C]`` (float32, CPU) of the edited model on ``split``; the model is left unchanged."""
    if model.head_task != task.name:
        raise RuntimeError(f"model carries the head of {model.head_task!r}, not {task.name!r}")
    terms = [(tv, a) for tv, a in terms if a != 0.0]
    outs: list[torch.Tensor] = []
    was_training = model.training
    model.eval()
    try:
        if mode == "nonlinear" or not terms:
            with apply_vectors(model, terms), torch.inference_mode(), _autocast(model):
                for batch in iter_batches(model, split, task, batch_size):
                    outs.append(model(**batch).float().cpu())
        elif mode == "linearized":
            delta = {n: v.to(model.device) for n, v in sum_vectors([tv for tv, _ in terms],
                                                                     [a for _, a in terms]).to_dense().items()}
            with torch.no_grad():
                for batch in iter_batches(model, split, task, batch_size):
                    outs.append(linearized_logits(model, batch, delta).float().cpu())
        else:
            raise ValueError(f"unknown evaluation mode {mode!r}")
    finally:
        model.train(was_training)
    if not outs:
        return torch.zeros(0, task.num_classes)
    return torch.cat(outs)


def predict(model: TaskModel, task: TaskSpec, split: Split, terms: Terms = (), *, mode: Mode = "nonlinear",
            batch_size: int = 128) -> np.ndarray:
    """Predicted class indices of the edited model."""
    return predict_logits(model, task, split, terms, mode=mode, batch_size=batch_size).argmax(-1).numpy()


def accuracy(model: TaskModel, task: TaskSpec, split: Split, terms: Terms = (), *, mode: Mode = "nonlinear",
             batch_size: int = 128) -> float:
    """Top-1 accuracy in [0, 1] of ``θ0 + Σ α τ`` on ``split``."""
    if len(split) == 0:
        return float("nan")
    preds = predict(model, task, split, terms, mode=mode, batch_size=batch_size)
    return float((preds == np.asarray(split.labels)).mean())
