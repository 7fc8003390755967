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
  *still eligible* stay trainable (bottom-k, least sensitive); an entry excluded once never comes back;
* entries whose score is exactly zero on the calibration data (``zero_scores``): the output does not
  depend on them there (dead ReLU channels of a CNN: a third of EfficientNet-Lite0's entries on MNIST),
  so training them learns nothing — the paper's η = 0 case (Sec. 3.3: "when only parameters with exactly
  zero influence are fine-tuned … no learning has occurred"). ``"exclude"`` (default) takes them out of
  the eligible set for good; ``"rank"`` ranks them like any other score (the official code), where they
  fill the bottom-k first;
* ties at the threshold (``ties``): ``"keep"`` (default) keeps every eligible entry whose score equals
  the threshold, as Algorithm 1 (``c_j ← 0`` only where ``s_j − ŝ_p > 0``) and the official code do — the
  mask can then be larger than ``k``; ``"random"`` keeps exactly ``k``, the tied entries drawn by a seeded
  key of each entry's name and index. Neither depends on the order of the parameters (an earlier version
  broke ties by position, so with many zero scores the mask was a prefix of the parameter list);
* the calibration log records, per round, the zero-score entries, the entries tied at the threshold and
  the density reached;
* soft mask against layer collapse: from round 2 on, excluded entries are multiplied by
  ``soft_mask_value`` (paper 0.01, official code 0.1) in the forward pass used for scoring; fine-tuning
  afterwards starts from the exact pre-trained weights.
"""

from __future__ import annotations

import math
import time
import zlib
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
import torch

from talos_core.errors import TalosError, check_int, check_range
from talos_core.fisher import fisher_scores
from talos_core.methods.finetuning import SPARSITY
from talos_core.models.base import TaskModel
from talos_core.tasks.base import Split, TaskSpec

Mask = dict[str, torch.Tensor]


# --------------------------------------------------------------------------------------------
# mask helpers
# --------------------------------------------------------------------------------------------
def mask_density(mask: Mask) -> float:
    """Fraction of ``True`` entries over all entries of the mask.

    >>> mask_density({"a": torch.tensor([True, False, False, False])})
    0.25
    """
    total = sum(m.numel() for m in mask.values())
    return float(sum(int(m.sum()) for m in mask.values()) / max(total, 1))


TIE_RULES = ("keep", "random")
"""How :func:`select_lowest` treats eligible entries whose score equals the threshold (see the module doc)."""
ZERO_RULES = ("exclude", "rank")
"""How calibration treats entries with exactly zero sensitivity (see the module doc)."""


@dataclass(frozen=True)
class Selection:
    """What :func:`select_lowest` kept: the mask, the threshold score (the k-th lowest eligible one; ``nan``
    when ``k = 0``), how many eligible entries scored exactly the threshold, and how many were kept."""

    mask: Mask
    threshold: float
    tied: int
    kept: int


def _tie_keys(name: str, numel: int, seed: int) -> torch.Tensor:
    """A seeded random key per entry of tensor ``name``: a function of the name, the entry and the seed only,
    so a random tie-break does not depend on the order the parameters are listed in."""
    g = torch.Generator().manual_seed((zlib.crc32(name.encode()) + 1_000_003 * int(seed)) % (2**63 - 1))
    return torch.rand(numel, generator=g)


def select_lowest(scores: dict[str, torch.Tensor], eligible: Mask, k: int, *,
                  ties: Literal["keep", "random"] = "random", seed: int = 0) -> Selection:
    """The eligible entries with the ``k`` lowest scores; entries that are not eligible are never kept.

    Ties at the threshold: ``ties="keep"`` keeps all of them (at least ``k`` entries, Algorithm 1's rule);
    ``"random"`` keeps exactly ``k``, choosing among the tied entries by a seeded key of each entry's
    name and index (never by position).

    >>> s = {"w": torch.tensor([3.0, 1.0, 1.0, 0.5])}
    >>> sel = select_lowest(s, {"w": torch.tensor([True, True, True, True])}, 2, ties="keep")
    >>> sel.mask["w"].tolist(), sel.tied, sel.kept
    ([False, True, True, True], 2, 3)
    >>> int(select_lowest(s, {"w": torch.tensor([True, True, True, True])}, 2).mask["w"].sum())
    2
    """
    if ties not in TIE_RULES:
        raise TalosError(f"ties must be one of {', '.join(TIE_RULES)}, got {ties!r}")
    names = list(eligible)
    flat_scores = torch.cat([scores[n].detach().reshape(-1).double().cpu() for n in names])
    flat_elig = torch.cat([eligible[n].reshape(-1).cpu() for n in names])
    n_elig = int(flat_elig.sum())
    if k > n_elig:
        raise ValueError(f"cannot keep {k} entries, only {n_elig} are eligible")
    keep = torch.zeros_like(flat_elig)
    threshold, tied = math.nan, 0
    if k > 0:
        masked = torch.where(flat_elig, flat_scores, torch.full_like(flat_scores, math.inf))
        # the k-th smallest eligible score by selection (O(m), not a full sort): everything below it is kept
        thr = torch.kthvalue(masked, k).values
        keep = masked < thr
        at = (masked == thr) & flat_elig
        threshold, tied = float(thr), int(at.sum())
        room = k - int(keep.sum())
        if ties == "keep":
            keep |= at
        elif room > 0:
            idx = torch.nonzero(at).view(-1)
            keys = torch.empty(idx.numel())
            offset = 0
            for n in names:  # each tied entry's key depends on its tensor's name and its index in it
                numel = eligible[n].numel()
                inside = (idx >= offset) & (idx < offset + numel)
                if bool(inside.any()):
                    keys[inside] = _tie_keys(n, numel, seed)[idx[inside] - offset]
                offset += numel
            keep[idx[torch.topk(keys, room, largest=False).indices]] = True
    out: Mask = {}
    offset = 0
    for n in names:
        numel = eligible[n].numel()
        out[n] = keep[offset:offset + numel].view_as(eligible[n]).to(eligible[n].device)
        offset += numel
    return Selection(out, threshold, tied, int(keep.sum()))


def mask_moved(mask: Mask, vector: dict[str, torch.Tensor]) -> float:
    """Fraction of the mask's trainable entries that training moved (non-zero in the task vector): entries
    that cannot learn are not trainable capacity. ``1.0`` for an empty mask.

    >>> mask_moved({"w": torch.tensor([True, True, False, True])}, {"w": torch.tensor([0.5, 0.0, 0.0, -1.0])})
    0.6666666666666666
    """
    kept = sum(int(m.sum()) for m in mask.values())
    if not kept:
        return 1.0
    moved = sum(int(((vector[n].detach().cpu() != 0) & m.cpu()).sum()) for n, m in mask.items() if n in vector)
    return moved / kept


def keep_lowest(scores: dict[str, torch.Tensor], eligible: Mask, k: int, *, seed: int = 0) -> Mask:
    """Exactly ``k`` eligible entries with the lowest scores, ties drawn by a seeded key (never by position):
    :func:`select_lowest` with ``ties="random"``.

    >>> s = {"w": torch.tensor([3.0, 1.0, 1.0, 0.5])}
    >>> keep_lowest(s, {"w": torch.tensor([True, True, True, False])}, 2)["w"].tolist()
    [False, True, True, False]
    """
    return select_lowest(scores, eligible, k, ties="random", seed=seed).mask


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
    ``zero_scores`` — entries with exactly zero sensitivity: ``"exclude"`` (default: they cannot learn,
    the paper's η = 0 case) or ``"rank"`` (ranked like any score, as the official code). ``ties`` — entries
    tied at a round's threshold: ``"keep"`` all (default: Algorithm 1 and the official code) or ``"random"``
    (exactly ``k``, seeded). See the module doc.
    """

    sparsity: float = SPARSITY.default
    rounds: int = 4
    soft_mask_value: float = 0.01
    samples: int = 1280
    batch_size: int = 32
    chunk_size: int = 16
    target: Literal["logprob", "logit"] = "logprob"
    select: Literal["bottom", "top"] = "bottom"
    param_set: Literal["paper", "official"] = "paper"
    seed: int = 0
    zero_scores: Literal["exclude", "rank"] = "exclude"
    ties: Literal["keep", "random"] = "keep"

    def __post_init__(self) -> None:
        SPARSITY.check(self.sparsity)
        check_range("soft_mask_value", self.soft_mask_value, 0.0, 1.0, high_open=False)
        for name in ("rounds", "samples", "batch_size", "chunk_size"):
            check_int(name, getattr(self, name), low=1)
        if self.target not in ("logprob", "logit"):
            raise TalosError(f"target must be 'logprob' or 'logit', got {self.target!r}")
        if self.select not in ("bottom", "top"):
            raise TalosError(f"select must be 'bottom' or 'top', got {self.select!r}")
        if self.param_set not in ("paper", "official"):
            raise TalosError(f"param_set must be 'paper' or 'official', got {self.param_set!r}")
        if self.zero_scores not in ZERO_RULES:
            raise TalosError(f"zero_scores must be one of {', '.join(ZERO_RULES)}, got {self.zero_scores!r}")
        if self.ties not in TIE_RULES:
            raise TalosError(f"ties must be one of {', '.join(TIE_RULES)}, got {self.ties!r}")

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
                    *, progress: bool = False, log: list | None = None, diagnostics: dict | None = None) -> Mask:
    """Run Algorithm 1's calibration loop and return the final boolean mask (True = trainable).

    The model must carry ``task``'s head and the pre-trained weights; it is not modified. ``log``
    receives one record per round: target and reached density, the target count ``kept`` and the count
    ``selected``, the eligible entries with a zero score (``zero_scores``; ``excluded_zero`` of them left
    out under ``zero_scores="exclude"``), the entries tied at the threshold (``tied``) and the threshold,
    the number of tensors scored (those with an eligible entry left), and the seconds spent scoring and
    selecting. ``diagnostics`` receives ``zero_sensitivity``: the fraction of the final mask's entries whose
    score at θ0 (round 1, no soft mask) is exactly zero.
    """
    names = model.maskable_names()
    if not names:
        raise TalosError(f"model {getattr(model, 'model_name', '?')} has no maskable parameters")
    params = {n: p.detach() for n, p in model.named_parameters()}
    eligible: Mask = {n: torch.ones_like(params[n], dtype=torch.bool) for n in names}
    total = sum(m.numel() for m in eligible.values())
    generator = torch.Generator().manual_seed(config.seed)
    densities = round_densities(config.sparsity, config.rounds)
    zero_at_theta0: Mask = {}
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
        # which the selection never reads (their entries are not eligible)
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
        zero = {n: (scores[n] == 0) & eligible[n] for n in names}
        if r == 0:
            zero_at_theta0 = {n: z.cpu() for n, z in zero.items()}
        n_zero = int(sum(int(z.sum()) for z in zero.values()))
        if config.zero_scores == "exclude" and n_zero:
            eligible = {n: eligible[n] & ~zero[n] for n in names}
        if config.select == "top":
            scores = {n: -s for n, s in scores.items()}
        k = int(math.floor(densities[r] * total))
        # fewer eligible entries than the round keeps (zero scores excluded): all of them stay
        n_elig = int(sum(int(e.sum()) for e in eligible.values()))
        if k > 0 and n_elig == 0:
            raise TalosError(f"calibration round {r + 1}: no eligible entry has a non-zero sensitivity (the model's "
                             f"output no longer depends on them under the soft mask {config.soft_mask_value}); use "
                             f"soft_mask_value 1 (BatchNorm models) or zero_scores 'rank'")
        sel = select_lowest(scores, eligible, min(k, n_elig), ties=config.ties, seed=config.seed)
        eligible = sel.mask
        if log is not None:
            log.append({"round": r + 1, "target_density": densities[r], "kept": k, "selected": sel.kept,
                        "density": sel.kept / max(total, 1), "zero_scores": n_zero,
                        "excluded_zero": n_zero if config.zero_scores == "exclude" else 0,
                        "tied": sel.tied, "threshold": sel.threshold if math.isfinite(sel.threshold) else None,
                        "scored_tensors": len(active), "scores_s": t1 - t0,
                        "select_s": time.perf_counter() - t1})
    if diagnostics is not None:
        kept = sum(int(m.sum()) for m in eligible.values())
        dead = sum(int((eligible[n].cpu() & zero_at_theta0[n]).sum()) for n in names)
        diagnostics["zero_sensitivity"] = dead / kept if kept else 0.0
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
