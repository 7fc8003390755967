"""The fine-tuning baselines the paper compares against, selected with the same ``--method`` switch.

* ``nonlinear`` — standard full fine-tuning of every parameter of ``θ`` (Ilharco et al., 2023).
* ``linearized`` — Linearized FT (Ortiz-Jiménez et al., 2023): train the first-order Taylor model
  ``f_lin(x, θ) = f(x, θ0) + (θ − θ0)ᵀ ∇θ f(x, θ0)`` (one Jacobian-vector product per batch,
  :func:`talos_core.inference.forward.linearized_logits`). Every parameter of ``θ`` is trained,
  exactly the set non-linear FT trains (embeddings included), so the two full fine-tuning methods
  differ only in the model they train.
  The task vector ``θ* − θ0`` is evaluated on the linearized model (``eval_mode="linearized"``).
* ``llora`` — L-LoRA (Tang et al., 2023): LoRA on attention Q and V, trained linearized; see
  :mod:`talos_core.runners.lora`. Options ``rank`` (16) and ``lora_alpha`` (= rank).
* ``lota`` — Lottery Ticket Adaptation (Panda et al., 2024): a short dense fine-tune of the maskable
  parameters ("calibration"), mask = the ``k = ⌊(1 − sparsity) · m⌋`` entries with the largest
  ``|Δθ|`` (one global top-k over all ``m`` maskable entries, exact ``k``), restart from ``θ0`` and
  fine-tune only the masked entries; every other entry is frozen (the official code's 0.1× learning
  rate on non-selected entries is a bug and is not reproduced). Options: ``calib_steps`` (default:
  the number of TaLoS calibration iterations, ``rounds × ⌈n_calib / calib_batch_size⌉``) and
  ``calib_data`` (``"val"``, default: the TaLoS calibration examples drawn from the validation split,
  as the paper's appendix prescribes for LoTA; or ``"train"``).

TaLoS and the simple controls ``random``, ``magnitude`` and ``talos-top`` are in
:mod:`talos_core.runners.talos`. Every method's flags, label and family are in the catalogue
:data:`talos_core.schema.METHODS`, derived from their declarations in :mod:`talos_core.methods.finetuning`.
"""

from __future__ import annotations

import math
import time

import torch

from talos_core.errors import TalosError, check_int
from talos_core.inference.forward import linearized_logits
from talos_core.masks import CalibrationConfig, Mask, calibration_split, keep_lowest
from talos_core.models.base import Batch, TaskModel
from talos_core.runners.base import MethodContext, MethodOutput, official_dense_names, train_with_plan
from talos_core.training import LossFn, TrainConfig, finetune


# --------------------------------------------------------------------------------------------
# linearization
# --------------------------------------------------------------------------------------------
def linearized_training_logits(theta0: dict[str, torch.Tensor]) -> LossFn:
    """A ``logits_fn`` for :func:`~talos_core.training.finetune`: the live parameters ``θ`` act as
    ``θ0 + δ`` with ``δ = θ − θ0`` for every name in ``theta0`` (a detached copy saved before training),
    and the logits are ``f(x, θ0) + J f(x, θ0) · (θ − θ0)``
    (:func:`~talos_core.inference.forward.linearized_logits`)."""

    def logits(model: TaskModel, batch: Batch) -> torch.Tensor:
        params = dict(model.named_parameters())
        delta = {n: params[n] - theta0[n] for n in theta0}
        return linearized_logits(model, batch, delta, theta0=theta0)

    return logits


def _no_options(ctx: MethodContext, method: str) -> None:
    if ctx.options:
        raise TalosError(f"method {method!r} takes no options, got {sorted(ctx.options)}")


def run_linearized(ctx: MethodContext) -> MethodOutput:
    _no_options(ctx, "linearized")
    theta0 = {n: p.detach().clone() for n, p in ctx.model.named_parameters()}
    out = train_with_plan(ctx, None, logits_fn=linearized_training_logits(theta0))
    out.info["trained"] = "all parameters of θ (as non-linear FT), through f(x, θ0) + J f(x, θ0)·(θ − θ0)"
    return out


# --------------------------------------------------------------------------------------------
# LoTA
# --------------------------------------------------------------------------------------------
LOTA_OPTIONS = ("calib_steps", "calib_data")


def lota_calibration_steps(calib: CalibrationConfig, n_calib: int) -> int:
    """Default LoTA calibration length: the number of TaLoS calibration iterations,
    ``rounds × ⌈n_calib / batch_size⌉`` (paper appendix: matched to TaLoS's calibration rounds).

    >>> lota_calibration_steps(CalibrationConfig(rounds=4, batch_size=32), 1280)
    160
    """
    if n_calib < 1:
        raise TalosError(f"LoTA calibration needs at least one example, got {n_calib}")
    return calib.rounds * math.ceil(n_calib / calib.batch_size)


def lota_mask(deltas: dict[str, torch.Tensor], density: float) -> Mask:
    """Top-k ``|Δθ|`` over all entries of ``deltas`` together, ``k = ⌊density · m⌋`` exactly
    (ties broken by position, via :func:`~talos_core.masks.keep_lowest` on ``−|Δθ|``).

    >>> lota_mask({"w": torch.tensor([0.1, -3.0, 2.0, 0.0])}, 0.5)["w"].tolist()
    [False, True, True, False]
    """
    if not 0.0 <= density <= 1.0:
        raise TalosError(f"density must be in [0, 1], got {density!r}")
    eligible = {n: torch.ones_like(d, dtype=torch.bool) for n, d in deltas.items()}
    total = sum(d.numel() for d in deltas.values())
    return keep_lowest({n: -d.abs() for n, d in deltas.items()}, eligible, int(math.floor(density * total)))


def check_lota_options(model: object, options: dict) -> tuple[int | None, str]:
    """LoTA's ``calib_steps`` and ``calib_data`` (one sentence when they are not allowed; ``model`` is unused)."""
    extra = sorted(set(options) - set(LOTA_OPTIONS))
    if extra:
        raise TalosError(f"unknown lota option(s) {extra}; lota accepts: {', '.join(LOTA_OPTIONS)}")
    steps = check_int("lota calib_steps", options.get("calib_steps"), low=1, optional=True)
    data = options.get("calib_data", "val")
    if data not in ("val", "train"):
        raise TalosError(f"lota calib_data must be 'val' or 'train', got {data!r}")
    return steps, data


def _calibration_train_config(config: TrainConfig, steps: int) -> TrainConfig:
    """The fine-tuning config with ``steps`` steps, warm-up scaled by the same fraction, no checkpoints and no
    learning curve (the curve is the sparse fine-tune's)."""
    warmup = min(int(config.warmup_steps * steps / config.steps), max(steps - 1, 0))
    return TrainConfig(**{**config.to_dict(), "steps": steps, "warmup_steps": warmup, "checkpoint_every": 0,
                          "eval_every": 0})


def run_lota(ctx: MethodContext) -> MethodOutput:
    steps_opt, data_opt = check_lota_options(ctx.model, dict(ctx.options))
    cfg = ctx.calibration()
    t0 = time.perf_counter()
    if data_opt == "val":
        if len(ctx.data.val) == 0:
            raise TalosError(f"LoTA calibrates on the validation split, which is empty for task {ctx.task.name!r}; "
                             "give the task validation examples or pass --option calib_data=train")
        calib = calibration_split(ctx.data.val, cfg.samples, cfg.seed)
    else:
        calib = ctx.data.train
    steps = steps_opt or lota_calibration_steps(cfg, len(calib))
    names = ctx.model.maskable_names()
    if not names:
        raise TalosError(f"model {type(ctx.model).__name__} has no maskable parameters for LoTA")
    dense_extra = official_dense_names(ctx)
    plan = {n: None for n in [*names, *dense_extra]}
    # dense calibration fine-tune; finetune() puts the model back to exactly θ0 when it returns
    calib_run = finetune(ctx.model, calib, ctx.task, plan, _calibration_train_config(ctx.train_config, steps),
                         progress=ctx.progress)
    deltas = {n: calib_run.vector.dense(n) for n in names}
    mask = lota_mask(deltas, 1.0 - ctx.sparsity)
    elapsed = time.perf_counter() - t0
    out = train_with_plan(ctx, mask, dense_names=dense_extra, extra_timings={"calibration_s": elapsed})
    every = max(1, len(calib_run.history) // 50)
    out.info.update({
        "calibration_steps": steps, "calibration_data": data_opt, "calibration_samples": len(calib),
        "calibration_final_loss": calib_run.history[-1]["loss"] if calib_run.history else None,
        "calibration_log": [{"step": h["step"], "loss": h["loss"]} for h in calib_run.history[::every]],
    })
    return out


def run_nonlinear(ctx: MethodContext) -> MethodOutput:
    """Standard full fine-tuning of every parameter of θ."""
    return train_with_plan(ctx, None)
