"""Fine-tuning methods, registered as data.

Each :class:`FinetuneMethod` turns a :class:`MethodContext` (model at θ0 with the task head, data,
configs) into a :class:`MethodOutput` (task vector, optional mask, timings). Methods that differ
only in *which* entries they train share :func:`train_with_plan`. ``eval_mode`` says how the task
vector must be evaluated (``"linearized"`` for linearized FT and L-LoRA).

>>> sorted(m for m in FINETUNE_METHODS if m.startswith("talos"))
['talos', 'talos-top']
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from talos_core.errors import unknown
from talos_core.masks import (CalibrationConfig, Mask, calibrate_talos, calibration_split, magnitude_mask,
                              random_mask)
from talos_core.models.base import TaskModel
from talos_core.tasks.base import TaskData, TaskSpec
from talos_core.training import LossFn, TrainConfig, default_logits, finetune, plan_from_mask
from talos_core.vectors import TaskVector


@dataclass
class MethodContext:
    model: TaskModel
    task: TaskSpec
    data: TaskData
    train_config: TrainConfig
    calib_config: CalibrationConfig
    options: dict = field(default_factory=dict)  # method-specific (e.g. LoRA rank)
    progress: bool = True
    checkpoint_dir: Path | None = None
    on_step: Callable[[int, dict], None] | None = None


@dataclass
class MethodOutput:
    vector: TaskVector
    mask: Mask | None = None
    history: list[dict] = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)


@dataclass(frozen=True)
class FinetuneMethod:
    name: str
    description: str
    run: Callable[[MethodContext], MethodOutput] = field(repr=False, compare=False)
    sparse: bool = False  # α grid extended by 1/(1 − sparsity)
    eval_mode: Literal["nonlinear", "linearized"] = "nonlinear"
    uses_sparsity: bool = False


FINETUNE_METHODS: dict[str, FinetuneMethod] = {}


def register_method(method: FinetuneMethod) -> FinetuneMethod:
    FINETUNE_METHODS[method.name] = method
    return method


def get_method(name: str) -> FinetuneMethod:
    if name not in FINETUNE_METHODS:
        raise unknown("method", name, FINETUNE_METHODS)
    return FINETUNE_METHODS[name]


def train_with_plan(ctx: MethodContext, mask: Mask | None, *, dense_names: list[str] | None = None,
                    logits_fn: LossFn = default_logits, extra_timings: dict | None = None) -> MethodOutput:
    """Fine-tune the entries of ``mask`` (``None`` = every parameter, densely)."""
    if mask is None:
        plan = {n: None for n, _ in ctx.model.named_parameters()}
    else:
        plan = plan_from_mask(mask, dense_names or [])
    result = finetune(ctx.model, ctx.data.train, ctx.task, plan, ctx.train_config, progress=ctx.progress,
                      checkpoint_dir=ctx.checkpoint_dir, on_step=ctx.on_step, logits_fn=logits_fn)
    timings = {**(extra_timings or {}), **result.timings}
    return MethodOutput(result.vector, mask, result.history, timings)


def _dense_extra(ctx: MethodContext) -> list[str]:
    if ctx.calib_config.param_set == "official" and hasattr(ctx.model, "official_dense_names"):
        return ctx.model.official_dense_names()
    return []


def _run_talos(ctx: MethodContext, select: str = "bottom") -> MethodOutput:
    cfg = ctx.calib_config if ctx.calib_config.select == select else \
        CalibrationConfig(**{**ctx.calib_config.to_dict(), "select": select})
    calib = calibration_split(ctx.data.val, cfg.samples, cfg.seed)
    log: list[dict] = []
    t0 = time.perf_counter()
    mask = calibrate_talos(ctx.model, calib, ctx.task, cfg, progress=ctx.progress, log=log)
    elapsed = time.perf_counter() - t0
    out = train_with_plan(ctx, mask, dense_names=_dense_extra(ctx), extra_timings={"calibration_s": elapsed})
    out.info["calibration_log"] = log
    out.info["calibration_samples"] = len(calib)
    return out


def _run_fixed_mask(builder: Callable[[MethodContext, float], Mask]) -> Callable[[MethodContext], MethodOutput]:
    def run(ctx: MethodContext) -> MethodOutput:
        t0 = time.perf_counter()
        mask = builder(ctx, 1.0 - ctx.calib_config.sparsity)
        return train_with_plan(ctx, mask, extra_timings={"calibration_s": time.perf_counter() - t0})

    return run


register_method(FinetuneMethod(
    "talos", "TaLoS: train only the least-sensitive entries (bottom-k diagonal Fisher, R rounds)",
    _run_talos, sparse=True, uses_sparsity=True))
register_method(FinetuneMethod(
    "talos-top", "Ablation: TaLoS calibration but train the MOST sensitive entries (top-k)",
    lambda ctx: _run_talos(ctx, "top"), sparse=True, uses_sparsity=True))
register_method(FinetuneMethod(
    "nonlinear", "Standard full fine-tuning of every parameter of θ (Ilharco et al.)",
    lambda ctx: train_with_plan(ctx, None)))
register_method(FinetuneMethod(
    "random", "Control: uniformly random mask at the same sparsity",
    _run_fixed_mask(lambda ctx, d: random_mask(ctx.model, d, ctx.calib_config.seed)), sparse=True,
    uses_sparsity=True))
register_method(FinetuneMethod(
    "magnitude", "Control: bottom-k by |θ0| mask at the same sparsity",
    _run_fixed_mask(lambda ctx, d: magnitude_mask(ctx.model, d)), sparse=True, uses_sparsity=True))


def _register_optional() -> None:
    """Methods in their own modules (baselines) register themselves on import."""
    import importlib

    for module in ("talos_core.methods.baselines",):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise


_register_optional()
