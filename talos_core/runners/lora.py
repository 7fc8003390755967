"""L-LoRA (Tang et al., 2023): low-rank adapters on the attention Q and V projections, trained in the
linearized regime, as a *functional* delta on the model's own weight tensors.

For every Q or V projection ``W ∈ R^{rows × in}`` (a whole ``nn.Linear`` weight, or a row block of a
fused ``in_proj_weight = [W_q; W_k; W_v]``) the adapter holds ``A ∈ R^{r × in}`` and ``B ∈ R^{rows × r}``
and contributes the dense update ``ΔW = s · B A`` with ``s = lora_alpha / r`` (default ``lora_alpha = r``,
so ``s = 1``). The update of a parameter tensor is assembled row block by row block, with zeros on the
rows that are not adapted (the K block of a fused projection), and the model is evaluated as the
first-order Taylor expansion at ``θ0``::

    f_lin(x) = f(x, θ0) + J_θ f(x, θ0) · Δθ(A, B)

(a Jacobian-vector product; :func:`talos_core.inference.forward.linearized_logits`). Only ``A`` and ``B``
are trained; ``θ`` itself is never modified. The task vector is ``Δθ(A*, B*)``: dense on the adapted
tensors, exactly zero on K rows and on every other parameter, rank ``≤ r`` per projection. It is
evaluated with ``eval_mode="linearized"``.

Targets, found by module structure so every family is covered uniformly:

* modules with a fused ``in_proj_weight`` of shape ``[3d, d]`` (``nn.MultiheadAttention``, open_clip):
  rows ``[0, d)`` are Q, ``[2d, 3d)`` are V;
* ``nn.MultiheadAttention`` without a fused weight: ``q_proj_weight`` and ``v_proj_weight``;
* ``nn.Linear`` modules named ``query``/``value`` (HF BERT ``attention.self``), ``q``/``v`` (T5
  ``SelfAttention`` and ``EncDecAttention``) or ``q_proj``/``v_proj`` (most other HF models).

Initialization follows LoRA: ``B = 0`` and ``A ~ U(−1/√in, 1/√in)`` (PyTorch's ``kaiming_uniform_``
with ``a = √5``, as in ``peft``), drawn from a generator seeded with the run seed.

>>> import torch.nn as nn
>>> mha = nn.Module(); mha.attn = nn.MultiheadAttention(8, 2)
>>> [(t.param, t.blocks) for t in lora_targets(mha)]
[('attn.in_proj_weight', (('q', 0, 8), ('v', 16, 24)))]
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from torch import nn

from talos_core.errors import TalosError, check_int, check_number
from talos_core.inference.forward import linearized_logits
from talos_core.runners.base import MethodContext, MethodOutput
from talos_core.training import finetune
from talos_core.vectors import TaskVector

#: names of ``nn.Linear`` modules that are attention query / value projections
QUERY_NAMES = ("query", "q", "q_proj")
VALUE_NAMES = ("value", "v", "v_proj")
DEFAULT_RANK = 16


@dataclass(frozen=True)
class LoraTarget:
    """One adapted parameter tensor: ``param`` of ``shape``; ``blocks`` = ``(label, row_start, row_stop)``
    row ranges that each get their own ``(A, B)`` pair (label ``q`` or ``v``)."""

    param: str
    shape: tuple[int, int]
    blocks: tuple[tuple[str, int, int], ...]

    @property
    def in_features(self) -> int:
        return self.shape[1]


def lora_targets(model: nn.Module) -> list[LoraTarget]:
    """The Q/V projection weights of ``model`` (see the module docstring), in parameter order."""
    params = dict(model.named_parameters())
    found: dict[str, LoraTarget] = {}
    for mod_name, module in model.named_modules():
        prefix = f"{mod_name}." if mod_name else ""
        fused = getattr(module, "in_proj_weight", None)
        if isinstance(fused, nn.Parameter) and fused.dim() == 2 and fused.shape[0] == 3 * fused.shape[1]:
            d = fused.shape[1]
            name = prefix + "in_proj_weight"
            found[name] = LoraTarget(name, tuple(fused.shape), (("q", 0, d), ("v", 2 * d, 3 * d)))
            continue
        if isinstance(module, nn.MultiheadAttention):
            for label, attr in (("q", "q_proj_weight"), ("v", "v_proj_weight")):
                w = getattr(module, attr, None)
                if isinstance(w, nn.Parameter):
                    found[prefix + attr] = LoraTarget(prefix + attr, tuple(w.shape), ((label, 0, w.shape[0]),))
            continue
        if isinstance(module, nn.Linear) and mod_name:
            leaf = mod_name.rsplit(".", 1)[-1]
            label = "q" if leaf in QUERY_NAMES else "v" if leaf in VALUE_NAMES else None
            if label is not None:
                name = prefix + "weight"
                found[name] = LoraTarget(name, tuple(module.weight.shape), ((label, 0, module.weight.shape[0]),))
    order = {n: i for i, n in enumerate(params)}
    return sorted((t for t in found.values() if t.param in order), key=lambda t: order[t.param])


def check_rank(rank: object, targets: list[LoraTarget]) -> int:
    """Validate a LoRA rank: a positive integer no larger than the smallest adapted block dimension."""
    check_int("LoRA rank", rank, low=1)
    limit = min(min(stop - start, t.in_features) for t in targets for _, start, stop in t.blocks)
    if rank > limit:
        raise TalosError(f"LoRA rank {rank} exceeds {limit}, the smallest Q/V projection dimension of this "
                         f"model; choose a rank in [1, {limit}]")
    return rank


class LoraAdapter(nn.Module):
    """The trainable LoRA factors of a model, outside the model (``θ`` is never touched).

    Parameters are named ``A.<i>`` / ``B.<i>`` with ``i`` the index in :attr:`blocks`; calling the
    adapter with a batch returns the linearized logits ``f(x, θ0) + J f(x, θ0) · Δθ(A, B)`` of the base
    model, so it can be passed to :func:`talos_core.training.finetune` as the model being trained.
    """

    linearized = True  # each forward is one JVP at θ0 (how its validation passes are counted)

    def __init__(self, base: nn.Module, targets: list[LoraTarget], rank: int, alpha: float, seed: int) -> None:
        super().__init__()
        if not targets:
            raise TalosError("the model has no attention Q/V projections to put LoRA adapters on")
        self._base = [base]  # a list: keep the base model out of this module's parameters
        self.targets = list(targets)
        self.rank, self.alpha = int(rank), float(alpha)
        self.scale = self.alpha / self.rank
        self.blocks: list[tuple[LoraTarget, str, int, int]] = [
            (t, label, start, stop) for t in self.targets for label, start, stop in t.blocks]
        device = next(base.parameters()).device
        g = torch.Generator().manual_seed(int(seed))
        self.A = nn.ParameterList()
        self.B = nn.ParameterList()
        for t, _, start, stop in self.blocks:
            bound = 1.0 / math.sqrt(t.in_features)  # kaiming_uniform_(a=√5) on an [r, in] matrix
            a = (torch.rand(self.rank, t.in_features, generator=g) * 2.0 - 1.0) * bound
            self.A.append(nn.Parameter(a.to(device)))
            self.B.append(nn.Parameter(torch.zeros(stop - start, self.rank, device=device)))

    # --- the interface finetune() needs -----------------------------------------------------
    @property
    def base(self) -> nn.Module:
        return self._base[0]

    @property
    def device(self) -> torch.device:
        return self.A[0].device

    @property
    def family(self) -> str | None:
        """The base model's family (training and evaluation precision are chosen per family)."""
        return getattr(self.base, "family", None)

    def prepare(self, inputs, task=None):
        return self.base.prepare(inputs, task)

    def input_lengths(self, inputs, task=None):
        """The base model's tokens per input (length-grouped batching batches by them)."""
        return self.base.input_lengths(inputs, task)

    def forward(self, **batch: torch.Tensor) -> torch.Tensor:
        # θ0 = the base model's own (never modified) weights; the JVP is taken in the direction Δθ(A, B)
        return linearized_logits(self.base, batch, self.delta())

    # --- the update -------------------------------------------------------------------------
    def delta(self, factors: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None) -> dict[str, torch.Tensor]:
        """``{param: ΔW}``: per target, ``s · B A`` on each adapted row block, zeros on the other rows.

        ``factors`` = ``(As, Bs)`` overrides the adapter's own parameters (used to build the final
        vector from trained values). Differentiable with respect to the factors.
        """
        As, Bs = factors if factors is not None else (list(self.A), list(self.B))
        out: dict[str, torch.Tensor] = {}
        i = 0
        for t in self.targets:
            pieces, row = [], 0
            ref = As[i]
            for _, start, stop in t.blocks:
                if start > row:
                    pieces.append(ref.new_zeros(start - row, t.in_features))
                pieces.append(self.scale * (Bs[i] @ As[i]))
                row, i = stop, i + 1
            if row < t.shape[0]:
                pieces.append(ref.new_zeros(t.shape[0] - row, t.in_features))
            out[t.param] = torch.cat(pieces, dim=0) if len(pieces) > 1 else pieces[0]
        return out

    def describe(self) -> list[str]:
        """``param[label rows a:b]`` for every adapted block (for run manifests)."""
        return [f"{t.param}[{label} rows {a}:{b}]" for t, label, a, b in self.blocks]


def _option_rank_alpha(options: dict, targets: list[LoraTarget]) -> tuple[int, float]:
    allowed = {"rank", "lora_alpha"}
    extra = sorted(set(options) - allowed)
    if extra:
        raise TalosError(f"unknown llora option(s) {extra}; llora accepts: {', '.join(sorted(allowed))}")
    rank = check_rank(options.get("rank", DEFAULT_RANK), targets)
    return rank, check_number("lora_alpha", options.get("lora_alpha", rank), low=0, low_open=True)


def check_llora_options(model: nn.Module, options: dict) -> tuple[int, float]:
    """The rank and ``lora_alpha`` of ``options`` on ``model`` (one sentence when they do not fit it)."""
    targets = lora_targets(model)
    if not targets:
        raise TalosError(f"model {type(model).__name__} has no attention Q/V projections for L-LoRA")
    return _option_rank_alpha(options, targets)


def run_llora(ctx: MethodContext) -> MethodOutput:
    """Train L-LoRA factors on ``ctx``'s task and return the merged update as a task vector.

    Options: ``rank`` (default 16; the paper sweeps 512 → 8) and ``lora_alpha`` (default = rank,
    i.e. scale 1). Timings, history, checkpoints and the learning curve come from
    :func:`talos_core.training.finetune` run on the adapter; ``trainable_entries`` counts the LoRA factor entries.
    """
    targets = lora_targets(ctx.model)
    rank, alpha = check_llora_options(ctx.model, dict(ctx.options))
    adapter = LoraAdapter(ctx.model, targets, rank, alpha, ctx.train_config.seed)
    init_A = [a.detach().clone() for a in adapter.A]
    plan = {n: None for n, _ in adapter.named_parameters()}
    t0 = time.perf_counter()
    was_training = ctx.model.training
    ctx.model.eval()  # finetune() only switches the adapter; the base model's dropout must be off too
    try:
        # the learning curve (eval_every) evaluates the adapter itself: the linearized model at the current factors
        result = finetune(adapter, ctx.data.train, ctx.task, plan, ctx.train_config, progress=ctx.progress,
                          checkpoint_dir=ctx.checkpoint_dir, on_step=ctx.on_step,
                          val=ctx.data.val if ctx.train_config.eval_every else None)
    finally:
        ctx.model.train(was_training)
    # finetune restores the factors to their initial values; rebuild the trained ones from its vector
    trained_A = [a0 + result.vector.dense(f"A.{i}").to(a0) for i, a0 in enumerate(init_A)]
    trained_B = [result.vector.dense(f"B.{i}").to(a0) for i, a0 in enumerate(init_A)]
    with torch.no_grad():
        delta = adapter.delta((trained_A, trained_B))
    vector = TaskVector.from_dense({n: d.float().cpu() for n, d in delta.items()})
    info = {"rank": rank, "lora_alpha": alpha, "scale": adapter.scale, "targets": adapter.describe(),
            "adapter_entries": int(sum(p.numel() for p in adapter.parameters())),
            "adapter_wall_s": time.perf_counter() - t0}
    return MethodOutput(vector, None, result.history, dict(result.timings), info, curve=result.curve)
