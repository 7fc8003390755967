"""Sparse masks and TaLoS mask calibration (paper Sec. 3.1–3.2, Algorithm 1, App. "Mask Calibration").

A :class:`Mask` maps parameter names to boolean tensors: ``True`` = trainable entry. Only the
model's maskable parameters (:meth:`TaskModel.maskable_names`) appear in it; every other parameter
is frozen (or, in the ``"official"`` parameter set, trained densely — see :class:`CalibrationConfig`).

Calibration (:func:`calibrate_talos`):

* score ``s_j = Σ_i [∂/∂θ_j log p_θ(ŷ_i | x_i)]²`` with ``ŷ_i ~ p_θ(·|x_i)`` sampled once per input
  — the diagonal Fisher of Eq. (diag_fim) up to the constant 1/N, from the per-example gradient
  engine :func:`talos_core.fisher.fisher_scores` (chunks of examples at once, never one backward per
  sample); only tensors that still have an eligible entry are differentiated in each round;
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
import time
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
import torch

from talos_core.errors import TalosError, check_range
from talos_core.fisher import fisher_scores
from talos_core.models.base import TaskModel
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
        # the k-th smallest eligible score by selection (O(m), not a full sort): everything below it
        # is kept, and entries equal to it fill the remaining places in positional order — exactly
        # the first k of a stable sort, so the choice is deterministic
        threshold = torch.kthvalue(masked, k).values
        keep = masked < threshold
        room = k - int(keep.sum())
        if room > 0:
            ties = torch.nonzero((masked == threshold) & flat_elig).view(-1)[:room]
            keep[ties] = True
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

    The model must carry ``task``'s head and the pre-trained weights; it is not modified. ``log``
    receives one record per round: target and reached density, the number of tensors scored (those
    with an eligible entry left), and the seconds spent scoring and selecting.
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
        t0 = time.perf_counter()
        override = None
        if r > 0 and config.soft_mask_value != 1.0:
            soft = config.soft_mask_value
            override = {n: torch.where(eligible[n], params[n], params[n] * soft) for n in names}
        # only tensors with an eligible entry need scores; fully excluded ones keep a zero score,
        # which keep_lowest never reads (their entries are not eligible)
        active = [n for n in names if bool(eligible[n].any())]
        scores = fisher_scores(model, calib, task, active, generator=generator,
                               batch_size=config.batch_size, chunk_size=config.chunk_size,
                               target=config.target, param_override=override)
        for n in names:
            if n not in scores:
                scores[n] = torch.zeros(params[n].shape, dtype=torch.float32, device=params[n].device)
        if model.device.type == "cuda":
            torch.cuda.synchronize(model.device)
        t1 = time.perf_counter()
        if config.select == "top":
            scores = {n: -s for n, s in scores.items()}
        k = int(math.floor(densities[r] * total))
        eligible = keep_lowest(scores, eligible, k)
        if log is not None:
            log.append({"round": r + 1, "target_density": densities[r], "kept": k,
                        "density": mask_density(eligible), "scored_tensors": len(active),
                        "scores_s": t1 - t0, "select_s": time.perf_counter() - t1})
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
