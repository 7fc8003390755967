"""TaLoS and its ablation controls: fine-tune only the entries of a sparse mask (paper Sec. 3, Algorithm 1).

* ``talos`` — calibrate the mask on validation examples (:func:`talos_core.masks.calibrate_talos`:
  the least-sensitive entries by the diagonal Fisher, R rounds), then fine-tune only those entries;
* ``talos-top`` — the same calibration keeping the *most* sensitive entries (the paper's ablation);
* ``random`` / ``magnitude`` — a uniformly random mask, or bottom-k by ``|θ0|``, at the same sparsity.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from talos_core.masks import CalibrationConfig, Mask, calibrate_talos, calibration_split, magnitude_mask, random_mask
from talos_core.methods.base import FinetuneMethod, MethodContext, MethodOutput, official_dense_names, train_with_plan


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


TALOS_METHODS: tuple[FinetuneMethod, ...] = (
    FinetuneMethod("talos", "TaLoS: train only the least-sensitive entries (bottom-k diagonal Fisher, R rounds)",
                   _run_talos),
    FinetuneMethod("talos-top", "Ablation: TaLoS calibration but train the MOST sensitive entries (top-k)",
                   lambda ctx: _run_talos(ctx, "top")),
)
"""TaLoS (bottom-k) and its top-k ablation."""

MASK_CONTROLS: tuple[FinetuneMethod, ...] = (
    FinetuneMethod("random", "Control: uniformly random mask at the same sparsity",
                   _run_fixed_mask(lambda ctx, d: random_mask(ctx.model, d, ctx.seed))),
    FinetuneMethod("magnitude", "Control: bottom-k by |θ0| mask at the same sparsity",
                   _run_fixed_mask(lambda ctx, d: magnitude_mask(ctx.model, d))),
)
"""Masks chosen without calibration, at the same sparsity (ablation controls)."""
