"""TaLoS and its ablation controls: fine-tune only the entries of a sparse mask (paper Sec. 3, Algorithm 1).

* ``talos`` — calibrate the mask on validation examples (:func:`talos_core.masks.calibrate_talos`:
  the least-sensitive entries by the diagonal Fisher, R rounds), then fine-tune only those entries;
* ``talos-top`` — the same calibration keeping the *most* sensitive entries (the paper's ablation);
* ``random`` / ``magnitude`` — a uniformly random mask, or bottom-k by ``|θ0|``, at the same sparsity.

Their declarations (flags, hyperparameters) are in :mod:`talos_core.methods.finetuning`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from talos_core.masks import CalibrationConfig, Mask, calibrate_talos, calibration_split, magnitude_mask, random_mask
from talos_core.runners.base import MethodContext, MethodOutput, official_dense_names, train_with_plan


def _run_talos(ctx: MethodContext, select: str = "bottom") -> MethodOutput:
    cfg = ctx.calibration()
    if cfg.select != select:
        cfg = CalibrationConfig(**{**cfg.to_dict(), "select": select})
    calib = calibration_split(ctx.data.val, cfg.samples, cfg.seed)
    log: list[dict] = []
    diagnostics: dict = {}
    t0 = time.perf_counter()
    mask = calibrate_talos(ctx.model, calib, ctx.task, cfg, progress=ctx.progress, log=log, diagnostics=diagnostics)
    elapsed = time.perf_counter() - t0
    out = train_with_plan(ctx, mask, dense_names=official_dense_names(ctx), extra_timings={"calibration_s": elapsed})
    out.info["calibration_log"] = log
    out.info["mask_zero_sensitivity"] = diagnostics["zero_sensitivity"]
    out.info["calibration_samples"] = len(calib)
    return out


def _run_fixed_mask(builder: Callable[[MethodContext, float], Mask]) -> Callable[[MethodContext], MethodOutput]:
    def run(ctx: MethodContext) -> MethodOutput:
        t0 = time.perf_counter()
        mask = builder(ctx, 1.0 - ctx.sparsity)
        return train_with_plan(ctx, mask, extra_timings={"calibration_s": time.perf_counter() - t0})

    return run


def run_talos(ctx: MethodContext) -> MethodOutput:
    """TaLoS: train only the least-sensitive entries (bottom-k diagonal Fisher, R rounds)."""
    return _run_talos(ctx, "bottom")


def run_talos_top(ctx: MethodContext) -> MethodOutput:
    """The ablation: TaLoS calibration, but train the most sensitive entries (top-k)."""
    return _run_talos(ctx, "top")


run_random = _run_fixed_mask(lambda ctx, d: random_mask(ctx.model, d, ctx.seed))
"""Control: a uniformly random mask at the same sparsity."""

run_magnitude = _run_fixed_mask(lambda ctx, d: magnitude_mask(ctx.model, d))
"""Control: bottom-k by ``|θ0|`` at the same sparsity."""
