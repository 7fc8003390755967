"""Sparse masks and TaLoS mask calibration (paper Sec. 3.1–3.2, Algorithm 1, App. "Mask Calibration").

A :class:`Mask` maps parameter names to boolean tensors: ``True`` = trainable entry. Only the
model's maskable parameters (:meth:`TaskModel.maskable_names`) appear in it; every other parameter
is frozen (or, in the ``"official"`` parameter set, trained densely — see :class:`CalibrationConfig`).

Calibration (:func:`calibrate_talos`):

* score ``s_j = Σ_i [∂/∂θ_j log p_θ(ŷ_i | x_i)]²`` with ``ŷ_i ~ p_θ(·|x_i)`` sampled once per input
  — the diagonal Fisher of Eq. (diag_fim) up to the constant 1/N. Per-sample gradients come from
  ``torch.func.vmap(grad(...))`` in chunks, never one backward per sample;
* ``R`` rounds; after round ``r`` the kept density is ``(1 − sparsity)^(r/R)``; scores reset every round;
* one global threshold over all maskable entries: the ``k = ⌊density_r · m⌋`` lowest-scoring entries
  *still eligible* stay trainable (bottom-k, least sensitive); ties are broken by position so exactly
  ``k`` entries are kept; an entry excluded once never comes back;
* soft mask against layer collapse: from round 2 on, excluded entries are multiplied by
  ``soft_mask_value`` (paper 0.01, official code 0.1) in the forward pass used for scoring; fine-tuning
  afterwards starts from the exact pre-trained weights.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from talos_core.errors import TalosError, check_range
from talos_core.models.base import Batch, TaskModel
from talos_core.tasks.base import Split, TaskSpec

Mask = dict[str, torch.Tensor]


# --------------------------------------------------------------------------------------------
# mask helpers
# --------------------------------------------------------------------------------------------
def full_mask(model: TaskModel) -> Mask:
    """All maskable entries trainable."""
    params = dict(model.named_parameters())
    return {n: torch.ones_like(params[n], dtype=torch.bool) for n in model.maskable_names()}


def mask_density(mask: Mask) -> float:
    """Fraction of ``True`` entries over all entries of the mask.

    >>> mask_density({"a": torch.tensor([True, False, False, False])})
    0.25
    """
    total = sum(m.numel() for m in mask.values())
    return float(sum(int(m.sum()) for m in mask.values()) / max(total, 1))


def keep_lowest(scores: dict[str, torch.Tensor], eligible: Mask, k: int) -> Mask:
    """Keep exactly ``k`` eligible entries with the lowest scores (ties broken by position).

    Entries that are not eligible are never kept, whatever their score.

    >>> s = {"w": torch.tensor([3.0, 1.0, 1.0, 0.5])}
    >>> keep_lowest(s, {"w": torch.tensor([True, True, True, False])}, 2)["w"].tolist()
    [False, True, True, False]
    """
    names = list(eligible)
    flat_scores = torch.cat([scores[n].detach().reshape(-1).float().cpu() for n in names])
    flat_elig = torch.cat([eligible[n].reshape(-1).cpu() for n in names])
    n_elig = int(flat_elig.sum())
    if k > n_elig:
        raise ValueError(f"cannot keep {k} entries, only {n_elig} are eligible")
    keep = torch.zeros_like(flat_elig)
    if k > 0:
        masked = torch.where(flat_elig, flat_scores, torch.full_like(flat_scores, math.inf))
        # stable sort: equal scores keep positional order, so the choice is deterministic
        order = torch.sort(masked, stable=True).indices[:k]
        keep[order] = True
    out: Mask = {}
    offset = 0
    for n in names:
        numel = eligible[n].numel()
        out[n] = keep[offset:offset + numel].view_as(eligible[n]).to(eligible[n].device)
        offset += numel
    return out


def round_densities(sparsity: float, rounds: int) -> list[float]:
    """Kept density after each round: ``(1 − sparsity)^(r/R)``, r = 1..R.

    >>> [round(d, 3) for d in round_densities(0.9, 4)]
    [0.562, 0.316, 0.178, 0.1]
    """
    return [(1.0 - sparsity) ** (r / rounds) for r in range(1, rounds + 1)]


# --------------------------------------------------------------------------------------------
# per-sample Fisher scores
# --------------------------------------------------------------------------------------------
def _slice(batch: Batch, start: int, stop: int) -> Batch:
    return {k: v[start:stop] for k, v in batch.items()}


def _batches(model: TaskModel, split: Split, task: TaskSpec, batch_size: int) -> Iterator[Batch]:
    for start in range(0, len(split), batch_size):
        part = split.take(np.arange(start, min(start + batch_size, len(split))))
        yield {k: v.to(model.device) for k, v in model.prepare(part.inputs, task).items()}


def _sdpa_context(device: torch.device):
    """On CPU, the math attention kernel has vmap batching rules (the fused one falls back to a loop)."""
    from contextlib import nullcontext

    if device.type != "cpu":
        return nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(SDPBackend.MATH)


def fisher_scores(model: TaskModel, split: Split, task: TaskSpec, names: list[str], *,
                  generator: torch.Generator, batch_size: int = 32, chunk_size: int = 16,
                  target: Literal["logprob", "logit"] = "logprob",
                  param_override: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """``s = Σ_i (∇_θ f(x_i, ŷ_i))²`` over ``split`` for the parameters ``names`` (Eq. diag_fim × N).

    ``f`` is ``log p(ŷ|x)`` (``target="logprob"``, the paper) or the raw sampled logit
    (``"logit"``, the official vision code). ``ŷ_i`` is sampled from ``softmax(logits)`` of the same
    model using ``generator``. ``param_override`` replaces parameter values in the forward (the soft
    mask); gradients are taken with respect to those effective values.
    """
    params = {n: p.detach() for n, p in model.named_parameters()}
    if param_override:
        params.update(param_override)
    diff = {n: params[n] for n in names}
    const = {n: v for n, v in params.items() if n not in diff}
    scores = {n: torch.zeros_like(v, dtype=torch.float32) for n, v in diff.items()}

    def f_single(p_diff: dict[str, torch.Tensor], sample: Batch, y: torch.Tensor) -> torch.Tensor:
        one = {k: v.unsqueeze(0) for k, v in sample.items()}
        logits = functional_call(model, (p_diff, const), args=(), kwargs=one, strict=False)
        if target == "logprob":
            logits = torch.log_softmax(logits.float(), dim=-1)
        return logits.gather(-1, y.view(1, 1)).sum()

    per_sample = vmap(grad(f_single), in_dims=(None, 0, 0))
    was_training = model.training
    model.eval()
    try:
        for batch in _batches(model, split, task, batch_size):
            with torch.no_grad():
                logits = functional_call(model, params, args=(), kwargs=batch, strict=False).float()
                probs = torch.softmax(logits, dim=-1).cpu()
            y_hat = torch.multinomial(probs, 1, generator=generator).view(-1).to(model.device)
            n = y_hat.shape[0]
            for start in range(0, n, chunk_size):
                stop = min(start + chunk_size, n)
                with _sdpa_context(model.device):
                    grads = per_sample(diff, _slice(batch, start, stop), y_hat[start:stop])
                for name, g in grads.items():
                    scores[name] += g.float().pow(2).sum(0)
    finally:
        model.train(was_training)
    return scores


def fisher_scores_loop(model: TaskModel, split: Split, task: TaskSpec, names: list[str], *,
                       generator: torch.Generator, batch_size: int = 32,
                       target: Literal["logprob", "logit"] = "logprob") -> dict[str, torch.Tensor]:
    """Reference implementation: one forward+backward per sample (as the official code does).

    Same sampling order as :func:`fisher_scores`, so with equal generators both return the same
    scores up to float rounding. Used by tests and by the calibration benchmark.
    """
    params = dict(model.named_parameters())
    scores = {n: torch.zeros_like(params[n], dtype=torch.float32) for n in names}
    flags = {n: p.requires_grad for n, p in params.items()}
    was_training = model.training
    model.eval()
    try:
        for n, p in params.items():
            p.requires_grad_(n in scores)
        for batch in _batches(model, split, task, batch_size):
            with torch.no_grad():
                probs = torch.softmax(model(**batch).float(), dim=-1).cpu()
            y_hat = torch.multinomial(probs, 1, generator=generator).view(-1)
            for i in range(y_hat.shape[0]):
                out = model(**_slice(batch, i, i + 1)).float()
                if target == "logprob":
                    out = torch.log_softmax(out, dim=-1)
                value = out[0, int(y_hat[i])]
                grads = torch.autograd.grad(value, [params[n] for n in names], allow_unused=True)
                for n, g in zip(names, grads):
                    if g is not None:
                        scores[n] += g.float().pow(2)
    finally:
        for n, p in params.items():
            p.requires_grad_(flags[n])
        model.train(was_training)
    return scores


# --------------------------------------------------------------------------------------------
# TaLoS calibration
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CalibrationConfig:
    """Hyperparameters of TaLoS mask calibration (defaults: the paper).

    ``samples`` is the number of calibration examples drawn from the validation split each round
    (paper, vision: 10 iterations × batch 128 per round; NLP: 32 examples). ``select="top"`` keeps
    the *most* sensitive entries instead (the paper's ablation). ``param_set="official"`` also trains
    CLIP's class/positional embeddings and final projection densely, as the official code does.
    """

    sparsity: float = 0.9
    rounds: int = 4
    soft_mask_value: float = 0.01
    samples: int = 1280
    batch_size: int = 32
    chunk_size: int = 16
    target: Literal["logprob", "logit"] = "logprob"
    select: Literal["bottom", "top"] = "bottom"
    param_set: Literal["paper", "official"] = "paper"
    seed: int = 0

    def __post_init__(self) -> None:
        check_range("sparsity", self.sparsity, 0.0, 1.0)
        check_range("soft_mask_value", self.soft_mask_value, 0.0, 1.0, high_open=False)
        for name in ("rounds", "samples", "batch_size", "chunk_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise TalosError(f"{name} must be a positive integer, got {value!r}")
        if self.target not in ("logprob", "logit"):
            raise TalosError(f"target must be 'logprob' or 'logit', got {self.target!r}")
        if self.select not in ("bottom", "top"):
            raise TalosError(f"select must be 'bottom' or 'top', got {self.select!r}")
        if self.param_set not in ("paper", "official"):
            raise TalosError(f"param_set must be 'paper' or 'official', got {self.param_set!r}")

    def to_dict(self) -> dict:
        return asdict(self)


def calibration_split(split: Split, samples: int, seed: int) -> Split:
    """Deterministic subset of ``samples`` examples (all of them when the split is smaller)."""
    if len(split) == 0:
        raise TalosError("the calibration split is empty; the task needs validation examples")
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(split))[: min(samples, len(split))]
    return split.take(np.sort(idx))


def calibrate_talos(model: TaskModel, calib: Split, task: TaskSpec, config: CalibrationConfig,
                    *, progress: bool = False, log: list | None = None) -> Mask:
    """Run Algorithm 1's calibration loop and return the final boolean mask (True = trainable).

    The model must carry ``task``'s head and the pre-trained weights; it is not modified.
    """
    names = model.maskable_names()
    if not names:
        raise TalosError(f"model {getattr(model, 'model_name', '?')} has no maskable parameters")
    params = {n: p.detach() for n, p in model.named_parameters()}
    eligible: Mask = {n: torch.ones_like(params[n], dtype=torch.bool) for n in names}
    total = sum(m.numel() for m in eligible.values())
    generator = torch.Generator().manual_seed(config.seed)
    densities = round_densities(config.sparsity, config.rounds)
    rounds = range(len(densities))
    if progress:
        from tqdm.auto import tqdm

        rounds = tqdm(rounds, desc="calibration rounds", leave=False)
    for r in rounds:
        override = None
        if r > 0 and config.soft_mask_value != 1.0:
            soft = config.soft_mask_value
            override = {n: torch.where(eligible[n], params[n], params[n] * soft) for n in names}
        scores = fisher_scores(model, calib, task, names, generator=generator,
                               batch_size=config.batch_size, chunk_size=config.chunk_size,
                               target=config.target, param_override=override)
        if config.select == "top":
            scores = {n: -s for n, s in scores.items()}
        k = int(math.floor(densities[r] * total))
        eligible = keep_lowest(scores, eligible, k)
        if log is not None:
            log.append({"round": r + 1, "target_density": densities[r], "kept": k,
                        "density": mask_density(eligible)})
    return eligible


def random_mask(model: TaskModel, density: float, seed: int) -> Mask:
    """Uniformly random mask with exactly ``⌊density · m⌋`` trainable entries (ablation control)."""
    names = model.maskable_names()
    params = dict(model.named_parameters())
    g = torch.Generator().manual_seed(seed)
    scores = {n: torch.rand(params[n].shape, generator=g) for n in names}
    eligible = {n: torch.ones_like(params[n], dtype=torch.bool) for n in names}
    total = sum(m.numel() for m in eligible.values())
    return keep_lowest(scores, eligible, int(math.floor(density * total)))


def magnitude_mask(model: TaskModel, density: float) -> Mask:
    """Bottom-k by ``|θ0|``: the smallest pre-trained weights are trainable (ablation control)."""
    names = model.maskable_names()
    params = dict(model.named_parameters())
    scores = {n: params[n].detach().abs() for n in names}
    eligible = {n: torch.ones_like(params[n], dtype=torch.bool) for n in names}
    total = sum(m.numel() for m in eligible.values())
    return keep_lowest(scores, eligible, int(math.floor(density * total)))
