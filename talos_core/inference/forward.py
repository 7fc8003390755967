"""Predictions of an edited model ``θ0 + Σ α_t τ_t``: the one primitive every protocol uses.

``mode="nonlinear"`` edits the weights in place (:func:`talos_core.vectors.apply_vectors`) for the
whole split and restores them bitwise afterwards — no model copies. ``mode="linearized"`` evaluates
the first-order Taylor model ``f(x, θ0) + (Σ α τ)ᵀ ∇θ f(x, θ0)`` with one Jacobian-vector product
(``torch.func.jvp``), as required for linearized fine-tuning and L-LoRA task vectors.
Batches run under ``torch.inference_mode`` (non-linear) and the evaluation precision's autocast
(:mod:`talos_core.inference.precision`: by default bf16 on GPUs, and on AMX CPUs for text encoders).
Every pass checks that its outputs are finite (:func:`check_finite`): the argmax of NaN logits is class 0, so an
accuracy computed from them would be a number that means nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch.func import functional_call, jvp

from talos_core.errors import TalosError
from talos_core.inference import tally
from talos_core.inference.attention import differentiable_attention
from talos_core.inference.precision import autocast as eval_autocast
from talos_core.models.base import Batch, TaskModel, iter_batches
from talos_core.tasks.base import Split, TaskSpec
from talos_core.vectors import TaskVector, apply_vectors, sum_vectors

Mode = Literal["nonlinear", "linearized"]
Terms = Sequence[tuple[TaskVector, float]]


def eval_order(split: Split, model: TaskModel | None = None, task: TaskSpec | None = None) -> np.ndarray:
    """The order in which evaluation visits ``split``: shortest input first for text, else as stored.

    Batches of similar-length texts pad less (each batch pads to its longest member), which makes an
    evaluation pass over mixed-length texts (reviews, fortunes) markedly cheaper. With ``model``, texts
    are ordered by their token counts (:meth:`TaskModel.input_lengths`, what a batch is really padded
    to); without it, or for a model that does not count tokens, by characters. Padding is masked out
    of attention and pooling, so the order changes no prediction; outputs are put back in the split's
    order by :func:`_in_split_order`.

    >>> eval_order(Split(["ccc", "a", "bb"], np.array([0, 1, 2]))).tolist()
    [1, 2, 0]
    """
    inputs = split.inputs
    if not (isinstance(inputs, list) and inputs and all(isinstance(x, str) for x in inputs)):
        return np.arange(len(split))
    lengths = model.input_lengths(inputs, task) if model is not None else None
    if lengths is None:
        lengths = np.fromiter((len(x) for x in inputs), dtype=np.int64, count=len(inputs))
    return np.argsort(np.asarray(lengths), kind="stable")


def _in_split_order(parts: list[torch.Tensor], order: np.ndarray) -> torch.Tensor:
    """Concatenate per-batch outputs produced in ``order`` and put the rows back in split order."""
    out = torch.cat(parts)
    restored = torch.empty_like(out)
    restored[torch.as_tensor(order, dtype=torch.long)] = out
    return restored


def jvp_at_theta0(model: TaskModel, batch: Batch, delta: dict[str, torch.Tensor], *,
                  theta0: dict[str, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(f(x, θ0), J_θ f(x, θ0) · δ)`` from one :func:`torch.func.jvp`: the two terms of the first-order
    Taylor model at ``θ0`` (paper Eq. lin_net_addition), for a dense displacement ``delta``.

    The JVP is taken *at* ``θ0`` (primals) *in the direction* ``δ`` (tangents), so the tangent output is
    exactly linear in ``δ`` and differentiable with respect to it: gradients reach whatever ``δ`` was
    computed from (the live ``θ`` for linearized fine-tuning, the LoRA factors for L-LoRA). Every
    parameter not named in ``delta`` is held at the model's current value.

    ``theta0`` is the expansion point of (at least) every parameter named in ``delta``; by default the
    model's current values, and then names of ``delta`` that are not parameters of the model are
    ignored (evaluation of a vector on a model that lacks some of its tensors). Attention runs under
    :func:`~talos_core.inference.attention.differentiable_attention`.
    """
    params = {n: p.detach() for n, p in model.named_parameters()}
    if theta0 is None:
        point, names = params, [n for n in delta if n in params]
    else:
        missing = [n for n in delta if n not in theta0]
        if missing:
            raise TalosError(f"no expansion point θ0 for parameter(s) {missing[:3]}")
        point, names = theta0, list(delta)
    if not names:
        with torch.inference_mode():
            out = model(**batch)
        return out, torch.zeros_like(out)
    primals = tuple(point[n].detach() for n in names)
    tangents = tuple(delta[n].to(device=point[n].device, dtype=point[n].dtype) for n in names)
    const = {n: v for n, v in params.items() if n not in delta}

    def f(*values: torch.Tensor) -> torch.Tensor:
        return functional_call(model, (dict(zip(names, values)), const), args=(), kwargs=batch, strict=False)

    with differentiable_attention():
        return jvp(f, primals, tangents)


def linearized_logits(model: TaskModel, batch: Batch, delta: dict[str, torch.Tensor], *,
                      theta0: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
    """``f(x, θ0) + J_θ f(x, θ0) · δ``: the first-order Taylor model at ``θ0``, evaluated at ``θ0 + δ``
    (see :func:`jvp_at_theta0` for ``theta0`` and the names of ``delta``).

    >>> lin = torch.nn.Linear(2, 1)
    >>> class M(TaskModel):
    ...     def __init__(self): super().__init__(); self.lin = lin
    ...     def forward(self, x): return torch.tanh(self.lin(x))
    >>> m = M(); th0 = {n: p.detach().clone() for n, p in m.named_parameters()}
    >>> x = {"x": torch.ones(1, 2)}; d = {"lin.bias": torch.ones(1)}
    >>> y1 = linearized_logits(m, x, d, theta0=th0)
    >>> y2 = linearized_logits(m, x, {"lin.bias": 2 * torch.ones(1)}, theta0=th0)
    >>> f0 = m(**x); bool(torch.allclose(y2 - f0, 2 * (y1 - f0)))
    True
    """
    out, dout = jvp_at_theta0(model, batch, delta, theta0=theta0)
    return out + dout


def check_finite(logits: torch.Tensor, model: TaskModel, task: TaskSpec, terms: Terms = (),
                 what: str = "outputs") -> None:
    """One :class:`TalosError` sentence when ``logits`` (``[N, C]``, of ``model`` on ``task`` with ``terms`` applied)
    hold NaN or ±inf: it names the model, the task, the vectors (their runs) and how many examples are affected."""
    bad = ~torch.isfinite(logits).reshape(len(logits), -1).all(dim=1) if len(logits) else torch.zeros(0, dtype=bool)
    if not bool(bad.any()):
        return
    name = getattr(model, "model_name", type(model).__name__)
    applied = [(getattr(tv, "source", None), a) for tv, a in terms]
    vectors = ", ".join(f"{f'run {Path(src).parent.name}' if src else 'a computed vector'} at α {a:g}"
                        for src, a in applied)
    edit = f" with the task vector(s) of {vectors} applied" if applied else " at its pre-trained weights θ0"
    cause = ("the edited weights are out of range (an imported checkpoint far from θ0: talos import reports "
             "‖τ‖/‖θ0‖; or α too large)" if applied else "the model itself is broken")
    raise TalosError(f"model {name!r} gives non-finite {what} (NaN or ±inf) on {int(bad.sum())} of {len(bad)} "
                     f"examples of task {task.name!r}{edit}, so no accuracy is computed from them: {cause}")


def predict_logits(model: TaskModel, task: TaskSpec, split: Split, terms: Terms = (), *,
                   mode: Mode = "nonlinear", batch_size: int = 128) -> torch.Tensor:
    """Logits ``[N, C]`` (float32, CPU) of the edited model on ``split``; the model is left unchanged."""
    return _logits(model, task, split, terms, mode, batch_size, edited=False)


def _logits(model: TaskModel, task: TaskSpec, split: Split, terms: Terms, mode: Mode, batch_size: int, *,
            edited: bool, applied: Terms = ()) -> torch.Tensor:
    """:func:`predict_logits`; ``edited``: the caller has applied an edit already (how the pass is counted), the
    vectors ``applied`` (named if the outputs are not finite)."""
    if model.head_task != task.name:
        raise RuntimeError(f"model carries the head of {model.head_task!r}, not {task.name!r}")
    terms = [(tv, a) for tv, a in terms if a != 0.0]
    outs: list[torch.Tensor] = []
    order = eval_order(split, model, task)
    was_training = model.training
    model.eval()
    try:
        if mode == "nonlinear" or not terms:
            with apply_vectors(model, terms), torch.inference_mode(), eval_autocast(model):
                for batch in iter_batches(model, split, task, batch_size, order):
                    outs.append(model(**batch).float().cpu())
            tally.add("forward" if terms or edited else "forward0", len(split))
        elif mode == "linearized":
            delta = {n: v.to(model.device) for n, v in sum_vectors([tv for tv, _ in terms],
                                                                     [a for _, a in terms]).to_dense().items()}
            with torch.no_grad(), eval_autocast(model):
                for batch in iter_batches(model, split, task, batch_size, order):
                    outs.append(linearized_logits(model, batch, delta).float().cpu())
            tally.add("jvp", len(split))
        else:
            raise ValueError(f"unknown evaluation mode {mode!r}")
    finally:
        model.train(was_training)
    if not outs:
        return torch.zeros(0, task.num_classes)
    logits = _in_split_order(outs, order)
    check_finite(logits, model, task, [*applied, *terms])
    return logits


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


# --------------------------------------------------------------------------------------------
# helpers added for the evaluation protocols (existing functions above are unchanged)
# --------------------------------------------------------------------------------------------
Evaluation = tuple[TaskSpec, Split, dict]
"""One ``(task, split, head)`` to evaluate; ``head`` is the task's frozen head (``model.build_head``)."""


def predict_logits_many(model: TaskModel, evals: Sequence[Evaluation], terms: Terms = (), *,
                        mode: Mode = "nonlinear", batch_size: int = 128) -> list[torch.Tensor]:
    """Logits of ``θ0 + Σ α τ`` on several ``(task, split, head)`` with ONE weight edit.

    The weights are the same for every task, only the frozen head differs, so in ``"nonlinear"``
    mode the vectors are applied in place once (:func:`~talos_core.vectors.apply_vectors`), each
    task's head is swapped in with :meth:`TaskModel.set_head` (a buffer swap) and the weights are
    restored bitwise at the end. ``"linearized"`` mode has no weight edit: each task runs one JVP of
    ``Σ α τ`` (:func:`base_and_jvps`, attention kernels with a forward-mode derivative).
    The model keeps the head of the last evaluated task.

    >>> # logits = predict_logits_many(model, [(spec_a, data_a.test, head_a), (spec_b, data_b.test, head_b)],
    >>> #                              [(tau_a, 0.3), (tau_b, 0.3)])
    """
    terms = [(tv, float(a)) for tv, a in terms if a != 0.0]
    outs: list[torch.Tensor] = []
    if mode == "nonlinear":
        with apply_vectors(model, terms):
            for task, split, head in evals:
                if model.head_task != task.name:
                    model.set_head(head, task.name)
                outs.append(_logits(model, task, split, (), "nonlinear", batch_size, edited=bool(terms),
                                    applied=terms))
    elif mode == "linearized":
        merged = sum_vectors([tv for tv, _ in terms], [a for _, a in terms]) if terms else None
        for task, split, head in evals:
            if model.head_task != task.name:
                model.set_head(head, task.name)
            base, jvps = base_and_jvps(model, task, split, [merged] if merged is not None else [],
                                       batch_size=batch_size)
            outs.append(base + jvps[0] if jvps else base)
    else:
        raise ValueError(f"unknown evaluation mode {mode!r}")
    return outs


def base_and_jvps(model: TaskModel, task: TaskSpec, split: Split, vectors: Sequence[TaskVector], *,
                  batch_size: int = 128) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """``f(x, θ0)`` and, per vector, ``τᵀ∇θ f(x, θ0)`` on ``split`` (float32, CPU, ``[N, C]`` each).

    These are the two terms of the linearized model (paper Eq. lin_net_addition):
    ``f_lin(x, θ0 + Σ α_t τ_t) = f(x, θ0) + Σ α_t τ_tᵀ∇θ f(x, θ0)``, so once they are known the
    linearized logits for ANY coefficients are ``base + Σ α_t jvp_t`` with no further forward pass.
    The model must carry ``task``'s head and is left unchanged.
    """
    if model.head_task != task.name:
        raise RuntimeError(f"model carries the head of {model.head_task!r}, not {task.name!r}")
    deltas = [{n: v.to(model.device) for n, v in tv.to_dense().items()} for tv in vectors]
    base_parts: list[torch.Tensor] = []
    jvp_parts: list[list[torch.Tensor]] = [[] for _ in vectors]
    order = eval_order(split, model, task)
    was_training = model.training
    model.eval()
    try:
        for batch in iter_batches(model, split, task, batch_size, order):
            with torch.inference_mode(), eval_autocast(model):
                base_parts.append(model(**batch).float().cpu())
            with torch.no_grad(), differentiable_attention(), eval_autocast(model):
                for i, delta in enumerate(deltas):
                    jvp_parts[i].append(_jvp_only(model, batch, delta).float().cpu())
    finally:
        model.train(was_training)
    tally.add("base", len(split))
    tally.add("jvp", len(split) * len(vectors))
    if not base_parts:
        empty = torch.zeros(0, task.num_classes)
        return empty, [empty.clone() for _ in vectors]
    base = _in_split_order(base_parts, order)
    check_finite(base, model, task)
    jvps = [_in_split_order(p, order) for p in jvp_parts]
    for tv, jv in zip(vectors, jvps):
        check_finite(jv, model, task, [(tv, 1.0)], what="linearized outputs")
    return base, jvps


def _jvp_only(model: TaskModel, batch: Batch, delta: dict[str, torch.Tensor]) -> torch.Tensor:
    """``δᵀ∇θ f(x, θ0)`` (the tangent output of one :func:`torch.func.jvp`)."""
    return jvp_at_theta0(model, batch, delta)[1]
