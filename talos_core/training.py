"""(Sparse) fine-tuning of a :class:`TaskModel` on a task, producing a task vector.

What is trainable is a *plan*: ``{name: None}`` for a tensor trained densely, ``{name: bool mask}``
for a tensor of which only the ``True`` entries are trained; tensors missing from the plan are
frozen with ``requires_grad=False`` (no weight gradient is computed for them at all).

:class:`MaskedAdamW` is AdamW (decoupled weight decay, bias correction) whose state holds only the
trainable entries: dense tensors keep dense moments; partly trainable tensors keep compact moments
indexed by the flat positions of their ``True`` entries and are updated with ``index_add_`` — so
off-mask entries are never touched, weight decay included, and the task vector is exactly zero
there. Gradient clipping uses the norm of the trainable entries' gradients.

The loop: cross-entropy on the frozen head's logits, cosine schedule with linear warm-up, gradient
clipping, bf16 autocast where the training precision says so (fp32 master weights, see below), a
tqdm progress bar, per-step timings (forward+backward and optimizer step, separately), resumable
checkpoints (safetensors + JSON) every N steps, and optionally a learning curve (validation accuracy
every ``eval_every`` steps, :func:`validation_accuracy`). Dropout is disabled (the model stays in eval
mode), so every method — including the linearized ones, evaluated through a Jacobian-vector product —
shares one deterministic forward.

Training precision (``TrainConfig.precision``, resolved by
:func:`talos_core.inference.precision.resolve_train_precision`): ``"bf16"`` runs the forward and backward
under ``torch.autocast(dtype=bfloat16)``; parameters stay fp32 (the master weights), the optimizer reads
their gradients as fp32 and keeps its moments in fp32, so only the products are rounded. ``"auto"`` is
bf16 on CUDA and fp32 on CPUs (bf16 on AMX CPUs only for families measured faster).
"""

from __future__ import annotations

import json
import math
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from talos_core.atomic import atomic_save_safetensors, atomic_write_json, load_safetensors, read_json
from talos_core.batching import (  # noqa: F401 - batch_indices and grouped_batch_indices re-exported
    POOL_BATCHES,
    GroupedBatches,
    batch_indices,
    grouped_batch_indices,
    micro_batches,
)
from talos_core.errors import TalosError, check_int, check_range
from talos_core.hardware import machine_timings
from talos_core.memory import peak_memory_mb, reset_peak_memory
from talos_core.models.base import TaskModel
from talos_core.tasks.base import Split, TaskSpec
from talos_core.vectors import TaskVector, restore_entries

Plan = dict[str, "torch.Tensor | None"]

#: PyTorch's fused AdamW kernel (CPU and CUDA since 2.4); dense tensors use it when present
_HAS_FUSED_ADAMW = hasattr(torch, "_fused_adamw_")


@dataclass(frozen=True)
class TrainConfig:
    """Fine-tuning hyperparameters (paper vision defaults: lr 1e-5, wd 0.1, batch 128, 2,000 steps,
    200 warm-up steps, clip 1.0)."""

    steps: int = 2000
    batch_size: int = 128
    lr: float = 1e-5
    weight_decay: float = 0.1
    warmup_steps: int = 200
    grad_clip: float = 1.0
    seed: int = 0
    precision: str = "auto"  # auto/fp32/bf16 (see the module docstring); auto = bf16 autocast on GPU, fp32 on CPU
    checkpoint_every: int = 0  # 0 = no checkpoints
    eval_every: int = 0  # validation accuracy every N steps and at the last (a learning curve); 0 = off
    # --- opt-in (defaults = the behaviour before they existed; left out of run ids at their defaults) ---
    # gradient accumulation: each step's ``batch_size`` examples go through forward+backward in chunks of this
    # many, their gradients summed with weights chunk/batch — the gradient of the whole batch, in less memory
    # (0 = the whole batch at once)
    micro_batch_size: int = 0
    # early stopping on validation accuracy (needs ``eval_every`` and a validation split): stop after this many
    # evaluations in a row without a new best, and return the best evaluation's weights (0 = off)
    early_stopping_patience: int = 0
    schedule: str = "cosine"  # learning-rate schedule after the warm-up: cosine decay to 0, or constant
    # how each step's examples are drawn (BATCHINGS): "random" (seeded epoch permutations) or "length" (the same
    # examples per epoch, grouped by input length so a batch pads less: :func:`grouped_batch_indices`)
    batching: str = "random"

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size"):
            check_int(name, getattr(self, name), low=1)
        for name in ("warmup_steps", "checkpoint_every", "eval_every", "micro_batch_size", "early_stopping_patience"):
            check_int(name, getattr(self, name), low=0)
        check_range("lr", self.lr, 0.0, 1.0, low_open=True, high_open=False)
        check_range("weight_decay", self.weight_decay, 0.0, math.inf)
        check_range("grad_clip", self.grad_clip, 0.0, math.inf)
        if self.precision not in ("auto", "fp32", "bf16"):
            raise TalosError(f"precision must be auto, fp32 or bf16, got {self.precision!r}")
        if self.schedule not in SCHEDULES:
            raise TalosError(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if self.batching not in BATCHINGS:
            raise TalosError(f"batching must be one of {', '.join(BATCHINGS)}, got {self.batching!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    def identity_dict(self) -> dict:
        """:meth:`to_dict` without the opt-in fields left at their defaults (so run ids and checkpoint keys of
        configurations that do not use them are what they were before the fields existed); ``micro_batch_size``
        is always left out (it changes memory, not the gradient)."""
        out = self.to_dict()
        out.pop("micro_batch_size")
        for name, default in (("early_stopping_patience", 0), ("schedule", "cosine"), ("batching", "random")):
            if out[name] == default:
                out.pop(name)
        return out


SCHEDULES = ("cosine", "constant")
"""Learning-rate schedules after the linear warm-up (:attr:`TrainConfig.schedule`)."""
BATCHINGS = ("random", "length")
"""How a step's examples are drawn (:attr:`TrainConfig.batching`)."""


def cosine_lr(step: int, config: TrainConfig) -> float:
    """Learning rate at ``step`` (0-based): linear warm-up to ``lr``, then cosine decay to 0 (or, with
    ``schedule="constant"``, ``lr`` from then on).

    >>> c = TrainConfig(steps=10, warmup_steps=2, lr=1.0)
    >>> [round(cosine_lr(s, c), 3) for s in (0, 1, 2, 9)]
    [0.5, 1.0, 1.0, 0.038]
    >>> cosine_lr(9, TrainConfig(steps=10, warmup_steps=2, lr=1.0, schedule="constant"))
    1.0
    """
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    if config.schedule == "constant":
        return config.lr
    span = max(config.steps - config.warmup_steps, 1)
    progress = (step - config.warmup_steps) / span
    return config.lr * 0.5 * (1.0 + math.cos(math.pi * progress))


class MaskedAdamW:
    """AdamW over the trainable entries of a plan only (see module docstring)."""

    def __init__(self, params: dict[str, torch.nn.Parameter], plan: Plan, *, lr: float,
                 weight_decay: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        self.lr, self.weight_decay, self.betas, self.eps = lr, weight_decay, betas, eps
        self.step_count = 0
        self.dense: dict[str, torch.nn.Parameter] = {}
        self.sparse: dict[str, tuple[torch.nn.Parameter, torch.Tensor]] = {}
        for name, mask in plan.items():
            p = params[name]
            if mask is None:
                self.dense[name] = p
            else:
                idx = torch.nonzero(mask.reshape(-1).to(p.device)).view(-1)
                self.sparse[name] = (p, idx)
        self.exp_avg: dict[str, torch.Tensor] = {}
        self.exp_avg_sq: dict[str, torch.Tensor] = {}
        for n, p in self.dense.items():
            self.exp_avg[n] = torch.zeros_like(p, dtype=torch.float32)
            self.exp_avg_sq[n] = torch.zeros_like(p, dtype=torch.float32)
        for n, (p, idx) in self.sparse.items():
            self.exp_avg[n] = torch.zeros(idx.numel(), device=p.device, dtype=torch.float32)
            self.exp_avg_sq[n] = torch.zeros(idx.numel(), device=p.device, dtype=torch.float32)

    def names(self) -> list[str]:
        return list(self.dense) + list(self.sparse)

    def _grads(self) -> dict[str, torch.Tensor]:
        out = {}
        for n, p in self.dense.items():
            out[n] = p.grad.float() if p.grad is not None else torch.zeros_like(self.exp_avg[n])
        for n, (p, idx) in self.sparse.items():
            out[n] = (p.grad.reshape(-1).index_select(0, idx).float() if p.grad is not None
                      else torch.zeros_like(self.exp_avg[n]))
        return out

    @torch.no_grad()
    def step(self, grad_clip: float = 0.0) -> float:
        """One AdamW step; returns the pre-clipping gradient norm of the trainable entries.

        Dense tensors go through PyTorch's fused AdamW kernel (one pass over parameter, gradient and
        both moments, where the build has it for the device; ``foreach`` ops otherwise); partly
        trainable tensors through the same kernel on their gathered compact entries, written back
        with ``index_copy_``, so off-mask entries are never read or written.
        """
        grads = self._grads()
        names = list(grads)
        if not names:
            return 0.0
        gl = [grads[n] for n in names]
        norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(gl)))
        if grad_clip > 0:
            coef = (grad_clip / (norm + 1e-6)).clamp(max=1.0)
            torch._foreach_mul_(gl, coef)
        self.step_count += 1
        dense = [n for n in names if n in self.dense]
        sparse = [n for n in names if n in self.sparse]
        if dense:
            self._dense_update(dense, grads)
        if sparse:
            self._sparse_update(sparse, grads)
        return float(norm)

    def _fusable(self, tensors: list[torch.Tensor], grads: list[torch.Tensor]) -> bool:
        """Whether PyTorch's fused AdamW kernel applies: float32, contiguous, one CPU/CUDA device."""
        if not _HAS_FUSED_ADAMW or not tensors:
            return False
        devices = {t.device for t in tensors}
        if len(devices) != 1 or next(iter(devices)).type not in ("cpu", "cuda"):
            return False
        return all(t.dtype == torch.float32 and g.dtype == torch.float32 and t.is_contiguous() and g.is_contiguous()
                   for t, g in zip(tensors, grads))

    def _fused(self, values: list[torch.Tensor], gl: list[torch.Tensor], m: list[torch.Tensor],
               v: list[torch.Tensor]) -> None:
        """One fused AdamW pass over ``values`` (updated in place) and their moments."""
        b1, b2 = self.betas
        steps = [torch.tensor(float(self.step_count), device=values[0].device) for _ in values]
        torch._fused_adamw_(values, gl, m, v, [], steps, lr=self.lr, beta1=b1, beta2=b2,
                            weight_decay=self.weight_decay, eps=self.eps, amsgrad=False, maximize=False)

    def _dense_update(self, names: list[str], grads: dict[str, torch.Tensor]) -> None:
        """AdamW on fully trainable tensors:
        ``p ← p(1 − lr·wd) − lr/(1−β1ᵗ) · m / (√(v/(1−β2ᵗ)) + ε)``."""
        params = [self.dense[n] for n in names]
        gl = [grads[n] for n in names]
        m = [self.exp_avg[n] for n in names]
        v = [self.exp_avg_sq[n] for n in names]
        if self._fusable(params, gl):
            self._fused([p.data for p in params], gl, m, v)
            return
        updates = self._adam_directions(gl, m, v)
        step_size = self.lr / (1.0 - self.betas[0] ** self.step_count)
        if self.weight_decay:
            torch._foreach_mul_(params, 1.0 - self.lr * self.weight_decay)
        for p, upd in zip(params, updates):
            p.add_(upd.to(p.dtype), alpha=-step_size)

    def _sparse_update(self, names: list[str], grads: dict[str, torch.Tensor]) -> None:
        """The same AdamW update on the compact trainable entries of partly trainable tensors.

        The entries are gathered (``index_select``), updated — by the fused kernel where it applies —
        and written back with ``index_copy_``: off-mask entries are never read or written.
        """
        gl = [grads[n] for n in names]
        m = [self.exp_avg[n] for n in names]
        v = [self.exp_avg_sq[n] for n in names]
        targets = [self.sparse[n] for n in names]
        if self._fusable([p for p, _ in targets], gl):
            values = [p.view(-1).index_select(0, idx) for p, idx in targets]
            self._fused(values, gl, m, v)
            for (p, idx), value in zip(targets, values):
                p.view(-1).index_copy_(0, idx, value)
            return
        updates = self._adam_directions(gl, m, v)
        torch._foreach_mul_(updates, -self.lr / (1.0 - self.betas[0] ** self.step_count))
        for (p, idx), delta in zip(targets, updates):
            flat = p.view(-1)
            if self.weight_decay:
                delta.add_(flat.index_select(0, idx).float(), alpha=-self.lr * self.weight_decay)
            flat.index_add_(0, idx, delta.to(p.dtype))

    def _adam_directions(self, gl: list[torch.Tensor], m: list[torch.Tensor], v: list[torch.Tensor]) -> list:
        """Update the moments in place and return ``m / (√(v / (1 − β2ᵗ)) + ε)`` per tensor."""
        b1, b2 = self.betas
        torch._foreach_lerp_(m, gl, 1.0 - b1)
        torch._foreach_mul_(v, b2)
        torch._foreach_addcmul_(v, gl, gl, value=1.0 - b2)
        denom = torch._foreach_sqrt(v)
        torch._foreach_div_(denom, math.sqrt(1.0 - b2 ** self.step_count))
        torch._foreach_add_(denom, self.eps)
        return torch._foreach_div(m, denom)

    def zero_grad(self) -> None:
        for p in self.dense.values():
            p.grad = None
        for p, _ in self.sparse.values():
            p.grad = None

    def state_tensors(self) -> dict[str, torch.Tensor]:
        out = {}
        for n in self.names():
            out[f"{n}::exp_avg"] = self.exp_avg[n]
            out[f"{n}::exp_avg_sq"] = self.exp_avg_sq[n]
        return out

    def load_state_tensors(self, tensors: dict[str, torch.Tensor], step_count: int) -> None:
        for n in self.names():
            self.exp_avg[n].copy_(tensors[f"{n}::exp_avg"])
            self.exp_avg_sq[n].copy_(tensors[f"{n}::exp_avg_sq"])
        self.step_count = step_count


def plan_from_mask(mask: dict[str, torch.Tensor], dense_names: tuple[str, ...] | list[str] = ()) -> Plan:
    """Turn a boolean mask into a plan: all-True tensors train densely, all-False ones are frozen."""
    plan: Plan = {}
    for n, m in mask.items():
        count = int(m.sum())
        if count == m.numel():
            plan[n] = None
        elif count > 0:
            plan[n] = m
    for n in dense_names:
        plan[n] = None
    return plan


@dataclass
class TrainResult:
    """The task vector, the per-step history, timings, the learning curve (``[{"step", "val_acc"}]``, empty
    without ``eval_every``) and the resolved training precision (``"fp32"`` or ``"bf16"``)."""

    vector: TaskVector
    history: list[dict] = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    curve: list[dict] = field(default_factory=list)
    precision: str = "fp32"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


LossFn = Callable[[TaskModel, dict], torch.Tensor]


def default_logits(model: TaskModel, batch: dict) -> torch.Tensor:
    return model(**batch)


def validation_accuracy(model: TaskModel, split: Split, task: TaskSpec, logits_fn: LossFn = default_logits, *,
                        batch_size: int = 32) -> float:
    """Top-1 accuracy on ``split`` of the model *being trained*, through the same ``logits_fn`` training uses
    (so linearized FT and L-LoRA are evaluated as their linearized models, at the current ``θ``/factors).

    Runs in eval mode under ``no_grad`` and in the evaluation precision
    (:func:`talos_core.inference.precision.autocast`), in the evaluation order (texts by token count, which
    pads less and changes no prediction); the grad mode, the train/eval mode and every parameter are as
    before afterwards — nothing is written, so the trained vector is the same with or without it.
    """
    from talos_core.inference import tally
    from talos_core.inference.forward import eval_order
    from talos_core.inference.precision import autocast
    from talos_core.models.base import iter_batches

    if len(split) == 0:
        return float("nan")
    order = eval_order(split, model, task)
    labels = torch.as_tensor(np.asarray(split.labels)[order])
    was_training = model.training
    model.eval()
    preds = []
    try:
        with torch.no_grad(), autocast(model):
            for batch in iter_batches(model, split, task, batch_size, order):
                preds.append(logits_fn(model, batch).float().argmax(-1).cpu())
    finally:
        model.train(was_training)
    linear = logits_fn is not default_logits or getattr(model, "linearized", False)
    tally.add("jvp" if linear else "forward", len(split))
    return float((torch.cat(preds) == labels).float().mean())


def repeated_blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's repeated blocks: the members of every ``nn.ModuleList`` holding two or more modules
    of one class (transformer layers), outermost lists only.

    >>> from torch import nn
    >>> net = nn.Sequential(nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)]), nn.ReLU())
    >>> len(repeated_blocks(net))
    2
    """
    blocks: list[torch.nn.Module] = []
    inside: list[str] = []
    for name, module in model.named_modules():
        if any(name.startswith(prefix) for prefix in inside):
            continue
        if isinstance(module, torch.nn.ModuleList) and len(module) >= 2 and len({type(m) for m in module}) == 1:
            blocks.extend(module)
            inside.append(f"{name}." if name else "")
    return blocks


@contextmanager
def activation_checkpointing(blocks: list[torch.nn.Module]) -> Iterator[None]:
    """While active, each block's forward keeps only its inputs for the backward and recomputes its
    activations there (``torch.utils.checkpoint``, non-reentrant): activation memory of a stack of
    ``L`` blocks drops from ``L`` blocks' worth to one, for one more forward per step. Gradients are
    unchanged (the recomputation is the same computation; the model runs in eval mode, no dropout).
    Calls without grad mode run the plain forward.
    """
    from torch.utils.checkpoint import checkpoint

    patched = []
    try:
        for block in blocks:
            def run(*args, _forward=block.forward, **kwargs):
                if not torch.is_grad_enabled():
                    return _forward(*args, **kwargs)
                return checkpoint(_forward, *args, use_reentrant=False, **kwargs)

            block.forward = run
            patched.append(block)
        yield
    finally:
        for block in patched:
            del block.forward  # back to the class's forward


def _forward_backward(model: TaskModel, batch: dict, labels: torch.Tensor, logits_fn: LossFn, device: torch.device,
                      use_bf16: bool, blocks: list, opt: MaskedAdamW, weight: float = 1.0) -> tuple:
    """Cross-entropy forward and backward of one step (or, with ``weight`` < 1, of one micro-batch of it: the
    gradient of ``weight × loss`` is added to the parameters' gradients); returns ``(logits, loss, blocks)``.

    A block whose forward is not a pure function of its inputs (e.g. one that updates a cache)
    cannot be recomputed: ``torch.utils.checkpoint`` detects the mismatch, and the step is redone
    without checkpointing, which then stays off (the returned ``blocks`` is empty). (Only the first
    micro-batch of a step can hit this: the mismatch is found on the first recomputation.)
    """
    from torch.utils.checkpoint import CheckpointError

    while True:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16), activation_checkpointing(blocks):
            logits = logits_fn(model, batch)
        loss = F.cross_entropy(logits.float(), labels)
        try:
            (loss if weight == 1.0 else loss * weight).backward()
            return logits, loss, blocks
        except CheckpointError:
            if not blocks:
                raise
            opt.zero_grad()
            blocks = []


class EarlyStopping:
    """Early stopping on validation accuracy: the best evaluation so far (its step, accuracy and the trainable
    entries' values, :func:`_snapshot`) and the number of evaluations since it. An evaluation improves when its
    accuracy is strictly higher than the best one's."""

    def __init__(self, patience: int) -> None:
        self.patience = patience
        self.best_acc = -math.inf
        self.best_step = 0
        self.bad = 0
        self.best: dict | None = None

    def update(self, step: int, acc: float, params: dict, plan: Plan) -> bool:
        """Record the evaluation after ``step``; returns whether training should stop now."""
        if acc > self.best_acc:
            self.best_acc, self.best_step, self.bad = acc, step, 0
            self.best = _snapshot(params, plan)
        else:
            self.bad += 1
        return self.bad >= self.patience

    def state(self) -> dict:
        return {"best_acc": self.best_acc if self.best is not None else None, "best_step": self.best_step,
                "bad": self.bad}


def finetune(model: TaskModel, train: Split, task: TaskSpec, plan: Plan, config: TrainConfig, *,
             progress: bool = True, checkpoint_dir: Path | None = None,
             on_step: Callable[[int, dict], None] | None = None,
             logits_fn: LossFn = default_logits, checkpoint_activations: bool = False,
             val: Split | None = None, eval_batch_size: int | None = None) -> TrainResult:
    """Fine-tune the entries in ``plan`` on ``train``; return ``τ = θ* − θ0`` and the history.

    The model's weights are changed in place during training and restored to exactly ``θ0`` at the
    end (apply the returned vector to get ``θ*``). ``logits_fn`` lets other methods (linearized
    fine-tuning) supply their own forward. ``checkpoint_activations`` trades one extra forward per
    step for activation memory (:func:`activation_checkpointing` over :func:`repeated_blocks`); the
    task vector is the same (blocks that cannot be recomputed turn it off, see :func:`_forward_backward`).

    With ``config.eval_every > 0`` and a ``val`` split, :func:`validation_accuracy` (same ``logits_fn``)
    is measured after every ``eval_every``-th step and after the last one: the result's ``curve``
    (also kept in checkpoints, so a resumed run continues it). ``eval_batch_size`` defaults to 32 on CPU
    and 128 on accelerators. The training precision is ``config.precision`` resolved for the model's
    family and device (:func:`talos_core.inference.precision.resolve_train_precision`).

    ``config.micro_batch_size`` accumulates each step's gradient over micro-batches (the gradient of the
    whole batch, :func:`micro_batches`); ``config.early_stopping_patience`` (with ``eval_every`` and ``val``)
    stops after that many evaluations without a new best and returns the best evaluation's vector
    (:class:`EarlyStopping`; ``timings`` then record ``steps_run``, ``best_step`` and ``best_val_acc``).
    """
    from talos_core.inference.precision import resolve_train_precision

    params = _checked_params(model, train, task, plan)
    device = model.device
    theta0 = _snapshot(params, plan)
    try:
        for n, p in params.items():
            p.requires_grad_(n in plan)
        opt = MaskedAdamW(params, plan, lr=config.lr, weight_decay=config.weight_decay)
        precision = resolve_train_precision(device, config.precision, family=getattr(model, "family", None))
        use_bf16 = precision == "bf16"
        eval_every = config.eval_every if val is not None else 0
        early = EarlyStopping(config.early_stopping_patience) if eval_every and config.early_stopping_patience else None
        resumed = (_maybe_resume(checkpoint_dir, config, params, opt, device, eval_every, early)
                   if checkpoint_dir is not None else Resumed())
        start_step, history, curve = resumed.step, list(resumed.history), list(resumed.curve)  # appended to below
        if eval_batch_size is None:
            eval_batch_size = 32 if device.type == "cpu" else 128
        model.eval()  # no dropout: see module docstring
        steps = range(start_step, start_step if resumed.finished else config.steps)
        bar = _progress_bar(config.steps, start_step, task.name) if progress else None
        fb_times, opt_times = list(resumed.fb_times), list(resumed.opt_times)  # the resumed steps' times first
        blocks = repeated_blocks(model) if checkpoint_activations else []
        memory_kind = reset_peak_memory(device)
        grouped = _grouped_batches(model, train, task, config) if config.batching == "length" else None
        for step in steps:
            idx = (batch_indices(step, len(train), config.batch_size, config.seed) if grouped is None
                   else grouped.indices(step))
            opt.lr = cosine_lr(step, config)
            step_loss, acc, fb, blocks = _step_gradients(model, train, task, idx, config, logits_fn, use_bf16,
                                                         blocks, opt)
            t1 = time.perf_counter()
            gnorm = opt.step(config.grad_clip)
            opt.zero_grad()
            _sync(device)
            fb_times.append(fb)
            opt_times.append(time.perf_counter() - t1)
            record = {"step": step + 1, "loss": step_loss, "acc": acc, "lr": opt.lr, "grad_norm": gnorm}
            history.append(record)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{record['loss']:.3f}")
            stop = False
            if eval_every and ((step + 1) % eval_every == 0 or step + 1 == config.steps):
                record["val_acc"] = validation_accuracy(model, val, task, logits_fn, batch_size=eval_batch_size)
                curve.append({"step": step + 1, "val_acc": record["val_acc"]})
                stop = early is not None and early.update(step + 1, record["val_acc"], params, plan)
            if on_step is not None:
                on_step(step + 1, record)
            if stop:
                break
            if checkpoint_dir is not None and config.checkpoint_every and (step + 1) % config.checkpoint_every == 0 \
                    and step + 1 < config.steps:
                _save_checkpoint(checkpoint_dir, config, step + 1, params, opt, history, curve, device, early,
                                 (fb_times, opt_times))
        if bar is not None:
            bar.close()
        if checkpoint_dir is not None and config.checkpoint_every and not resumed.finished:
            # the finished state too: a process stopped while the run is evaluated and written (minutes on a CPU)
            # resumes here instead of training again; the store removes the folder when it commits the run
            _save_checkpoint(checkpoint_dir, config, len(history), params, opt, history, curve, device, early,
                             (fb_times, opt_times), finished=True)
        if early is not None and early.best is not None:
            _restore(params, early.best)  # the best evaluation's weights: θ* of an early-stopped run
        vector = _task_vector(params, theta0, plan)
        _back_to_theta0(params, theta0)
        timings = _timings(fb_times, opt_times, device, memory_kind, opt, plan, early, len(history))
        return TrainResult(vector, history, timings, curve, precision)
    except BaseException:
        # a run that fails or is interrupted (an error, Ctrl-C, a worker stopped) leaves the model at θ0 as it
        # found it: the process-wide cached model (inference.runtime.prepared_model) stays the pre-trained one
        # for the next run of the same process (a retried task, the next suite step, the dashboard's Run page)
        _back_to_theta0(params, theta0)
        raise


def _checked_params(model: TaskModel, train: Split, task: TaskSpec, plan: Plan) -> dict[str, torch.nn.Parameter]:
    """The model's parameters by name, once ``train`` has examples and ``plan`` names only those parameters."""
    if len(train) == 0:
        raise TalosError(f"task {task.name!r} has an empty training split")
    params = dict(model.named_parameters())
    unknown_names = [n for n in plan if n not in params]
    if unknown_names:
        raise TalosError(f"plan names parameters the model does not have: {unknown_names[:3]}")
    return params


def _progress_bar(total: int, initial: int, task: str) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=f"fine-tune {task}", leave=False)


def _grouped_batches(model: TaskModel, train: Split, task: TaskSpec, config: TrainConfig) -> GroupedBatches:
    """Length-grouped batches of ``train`` (``config.batching == "length"``); inputs without lengths are an error."""
    lengths = model.input_lengths(train.inputs, task)
    if lengths is None:
        raise TalosError(f"length-grouped batching needs inputs of varying length; model "
                         f"{getattr(model, 'model_name', type(model).__name__)} takes fixed-size inputs "
                         f"(use batching 'random')")
    return GroupedBatches(lengths, config.batch_size, config.seed)


def _step_gradients(model: TaskModel, train: Split, task: TaskSpec, idx: np.ndarray, config: TrainConfig,
                    logits_fn: LossFn, use_bf16: bool, blocks: list, opt: MaskedAdamW
                    ) -> tuple[float, float, float, list]:
    """One step's gradient over its examples ``idx`` (in micro-batches, :func:`micro_batches`): the step's loss and
    accuracy, the seconds of forward + backward, and the blocks still checkpointed."""
    device = model.device
    chunks = micro_batches(idx, config.micro_batch_size)
    loss_sum, correct, fb = 0.0, 0, 0.0
    for chunk in chunks:
        part = train.take(chunk)
        batch = {k: v.to(device) for k, v in model.prepare(part.inputs, task).items()}
        labels = torch.as_tensor(part.labels, device=device)
        _sync(device)
        t0 = time.perf_counter()
        logits, loss, blocks = _forward_backward(model, batch, labels, logits_fn, device, use_bf16, blocks, opt,
                                                 weight=1.0 if len(chunks) == 1 else len(chunk) / len(idx))
        _sync(device)
        fb += time.perf_counter() - t0
        if len(chunks) == 1:
            return loss.item(), float((logits.argmax(-1) == labels).float().mean()), fb, blocks
        correct += int((logits.argmax(-1) == labels).sum())
        loss_sum += loss.item() * len(chunk)
    return loss_sum / len(idx), correct / len(idx), fb, blocks


def _timings(fb_times: list[float], opt_times: list[float], device: torch.device, memory_kind: str,
             opt: MaskedAdamW, plan: Plan, early: EarlyStopping | None, steps_run: int) -> dict:
    """A run's timings: forward + backward and optimizer seconds per step, peak memory, trainable entries, and where
    an early-stopped run stopped and which evaluation's weights its vector holds."""
    out = {
        "fwd_bwd_s_mean": float(np.mean(fb_times)) if fb_times else 0.0,
        "fwd_bwd_s_std": float(np.std(fb_times)) if fb_times else 0.0,
        "opt_s_mean": float(np.mean(opt_times)) if opt_times else 0.0,
        "opt_s_std": float(np.std(opt_times)) if opt_times else 0.0,
        "train_s": float(np.sum(fb_times) + np.sum(opt_times)),
        "peak_memory_mb": peak_memory_mb(device),
        "peak_memory_kind": memory_kind,
        "trainable_entries": int(sum(opt.exp_avg[n].numel() for n in opt.names())),
        "trainable_tensors": len(plan),
        **machine_timings(device),  # where it was timed: a time per step compares only with the same machine's
    }
    if early is not None:
        out.update({"steps_run": steps_run, "best_step": early.best_step,
                    "best_val_acc": early.best_acc if early.best is not None else None})
    return out


def _snapshot(params: dict, plan: Plan) -> dict[str, tuple[torch.Tensor | None, torch.Tensor]]:
    """``θ0`` of what training may change: whole tensors for dense entries of the plan, only the
    trainable entries ``(flat indices, values)`` of partly trainable ones (the optimizer never writes
    anywhere else, so that is all there is to restore)."""
    out = {}
    for n, mask in plan.items():
        p = params[n].detach()
        if mask is None:
            out[n] = (None, p.clone())
        else:
            idx = torch.nonzero(mask.reshape(-1).to(p.device)).view(-1)
            out[n] = (idx, p.reshape(-1).index_select(0, idx))
    return out


def _back_to_theta0(params: dict, theta0: dict) -> None:
    """Leave the model as training found it: no parameter requires a gradient, every trained entry is θ0 again."""
    for p in params.values():
        p.requires_grad_(False)
    _restore(params, theta0)


def _restore(params: dict, theta0: dict) -> None:
    """Put back exactly the ``θ0`` values recorded by :func:`_snapshot`."""
    for n, (idx, value) in theta0.items():
        restore_entries(params[n], idx, value)


def _task_vector(params: dict, theta0: dict, plan: Plan) -> TaskVector:
    """``τ = θ* − θ0``: dense deltas for dense entries, values at the trainable flat indices otherwise."""
    values, indices, shapes = {}, {}, {}
    for n, (idx, value) in theta0.items():
        p = params[n].detach()
        shapes[n] = tuple(p.shape)
        if idx is None:
            values[n], indices[n] = (p - value).float().cpu(), None
        else:
            values[n] = (p.reshape(-1).index_select(0, idx) - value).float().cpu()
            indices[n] = idx.cpu()
    return TaskVector.from_entries(values, indices, shapes)


def _config_key(config: TrainConfig, device: torch.device) -> str:
    """What a checkpoint must share with the run resuming it: the config without ``checkpoint_every`` and
    ``eval_every`` (neither changes the trajectory), the precision as run ids record it (so checkpoints
    written before precisions could be chosen, with ``"auto"``, still resume)."""
    from talos_core.inference.precision import hashed_train_precision

    key = {k: v for k, v in config.identity_dict().items() if k not in ("checkpoint_every", "eval_every")}
    key["precision"] = hashed_train_precision(device, config.precision)
    return json.dumps(key, sort_keys=True)


class Resumed(NamedTuple):
    """What a checkpoint gives a run: the step it reached, its history and curve, whether training had finished
    there (the last step, or an early stop: only the task vector is left to compute) and the measured seconds of
    each step's forward/backward and optimizer update (empty from checkpoints written without them)."""

    step: int = 0
    history: tuple | list = ()
    curve: tuple | list = ()
    finished: bool = False
    fb_times: tuple | list = ()
    opt_times: tuple | list = ()


def _save_checkpoint(folder: Path, config: TrainConfig, step: int, params: dict, opt: MaskedAdamW,
                     history: list[dict], curve: list[dict], device: torch.device,
                     early: EarlyStopping | None = None, times: tuple[list, list] = ([], []), *,
                     finished: bool = False) -> None:
    tensors = {f"{n}::param": params[n].detach().contiguous() for n in opt.names()}
    tensors.update(opt.state_tensors())
    meta = {"step": step, "config": _config_key(config, device), "history": history, "curve": curve,
            "finished": finished, "fb_times": list(times[0]), "opt_times": list(times[1])}
    if early is not None:  # the best evaluation so far (its entries, as _snapshot keeps them) and the count since
        meta["early_stopping"] = {**early.state(), "has_best": early.best is not None}
        for n, (idx, value) in (early.best or {}).items():
            tensors[f"{n}::best"] = value.contiguous()
            if idx is not None:
                tensors[f"{n}::best_idx"] = idx.contiguous()
    folder.mkdir(parents=True, exist_ok=True)
    atomic_save_safetensors(tensors, folder / "checkpoint.safetensors", {"step": str(step)})
    atomic_write_json(folder / "checkpoint.json", meta)


def _maybe_resume(folder: Path, config: TrainConfig, params: dict, opt: MaskedAdamW, device: torch.device,
                  eval_every: int = 0, early: EarlyStopping | None = None) -> Resumed:
    """:class:`Resumed` from a compatible checkpoint in ``folder`` (its tensors loaded), else a start from step 0.

    With ``eval_every`` the checkpoint must hold the curve's points up to its step at that interval (one
    written without them, or at another interval, cannot be completed: training starts over)."""
    meta_path, tensor_path = folder / "checkpoint.json", folder / "checkpoint.safetensors"
    if not (meta_path.exists() and tensor_path.exists()):
        return Resumed()
    try:
        return _resume_from(meta_path, tensor_path, config, params, opt, device, eval_every, early)
    except (TalosError, ValueError, KeyError, TypeError, RuntimeError, AttributeError) as exc:
        # a damaged checkpoint must not block the run on every retry: it is discarded and training starts over
        for f in (meta_path, tensor_path):
            f.unlink(missing_ok=True)
        detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        warnings.warn(f"discarded the unreadable checkpoint in {folder} ({detail}); training starts from step 0",
                      stacklevel=2)
        return Resumed()


def _resume_from(meta_path: Path, tensor_path: Path, config: TrainConfig, params: dict, opt: MaskedAdamW,
                 device: torch.device, eval_every: int, early: EarlyStopping | None = None) -> Resumed:
    """:func:`_maybe_resume` on files that exist; a damaged file raises (the caller discards it)."""
    meta = read_json(meta_path)
    if not isinstance(meta, dict):
        raise TalosError(f"corrupt checkpoint {meta_path}: expected a JSON object")
    if meta.get("config") != _config_key(config, device):
        return Resumed()  # a different configuration: start over
    tensors, st_meta = load_safetensors(tensor_path)
    if st_meta.get("step") != str(meta["step"]):
        return Resumed()
    step = int(meta["step"])
    finished = meta.get("finished") is True
    # the curve's points up to the step: every eval_every-th, and the last step's when training finished there
    want_steps = set(range(eval_every, step + 1, eval_every)) | ({step} if finished else set()) if eval_every else set()
    curve = [c for c in meta.get("curve", []) if c.get("step") in want_steps]
    if {c["step"] for c in curve} != want_steps:
        return Resumed()
    history = list(meta.get("history", []))
    want = {f"{n}::{part}": tuple(ref.shape) for n in opt.names()
            for part, ref in (("param", params[n]), ("exp_avg", opt.exp_avg[n]), ("exp_avg_sq", opt.exp_avg_sq[n]))}
    bad = [k for k, shape in want.items() if k not in tensors or tuple(tensors[k].shape) != shape
           or not bool(torch.isfinite(tensors[k]).all())]
    if bad:  # checked before anything is copied: θ and the optimizer are untouched when the file is refused
        raise TalosError(f"corrupt checkpoint {tensor_path}: tensor {bad[0]!r} is missing, misshapen or not finite")
    if early is not None:
        state = meta.get("early_stopping")
        if not isinstance(state, dict):
            return Resumed()  # written without early stopping: its best evaluation is unknown, start over
        if state.get("has_best"):
            best = {}
            for n in opt.names():
                if f"{n}::best" not in tensors:
                    raise TalosError(f"corrupt checkpoint {tensor_path}: the best weights of {n!r} are missing")
                best[n] = (tensors.get(f"{n}::best_idx"), tensors[f"{n}::best"])
            early.best = {n: (None if i is None else i.to(device), v.to(device)) for n, (i, v) in best.items()}
        early.best_acc = -math.inf if state.get("best_acc") is None else float(state["best_acc"])
        early.best_step, early.bad = int(state.get("best_step", 0)), int(state.get("bad", 0))
    stopped_early = early is not None and early.bad >= early.patience
    if finished and step != config.steps and not stopped_early:
        raise TalosError(f"it says training finished at step {step} of {config.steps} without stopping early")
    if not 0 < step <= config.steps or len(history) != step or history[-1].get("step") != step:
        raise TalosError(f"its step {step} does not fit its history of {len(history)} steps and the run's "
                         f"{config.steps}")
    with torch.no_grad():
        for n in opt.names():
            params[n].copy_(tensors[f"{n}::param"])
    opt.load_state_tensors(tensors, step)
    fb, op = meta.get("fb_times"), meta.get("opt_times")
    timed = isinstance(fb, list) and isinstance(op, list) and len(fb) == len(op) == step
    return Resumed(step, history, curve, finished, fb if timed else [], op if timed else [])
