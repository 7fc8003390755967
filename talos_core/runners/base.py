"""What every fine-tuning method is made of: its context, its output, its registry entry.

A :class:`FinetuneMethod` turns a :class:`MethodContext` (model at θ0 with the task head, data,
configs) into a :class:`MethodOutput` (task vector, optional mask, timings). Its flags — ``sparse``,
``calibrates``, ``eval_mode``, label and family — are not stored on the entry: they are read from the
method catalogue :data:`talos_core.schema.METHODS`, the one place they are written. Methods that differ
only in *which* entries they train share :func:`train_with_plan`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from talos_core.errors import TalosError
from talos_core.masks import CalibrationConfig, Mask
from talos_core.methods.finetuning import SPARSITY
from talos_core.models.base import TaskModel
from talos_core.schema import EvalMode, MethodInfo, method_info
from talos_core.tasks.base import TaskData, TaskSpec
from talos_core.training import LossFn, TrainConfig, default_logits, finetune, plan_from_mask
from talos_core.vectors import TaskVector


@dataclass
class MethodContext:
    """The inputs of one fine-tuning run.

    ``sparsity`` is the fraction of maskable entries a sparse method leaves frozen (its mask keeps
    ``⌊(1 − sparsity) · m⌋`` entries); ``seed`` seeds its random choices. ``calib_config`` holds the
    calibration settings of methods that calibrate (``None`` for the others); when given, its
    ``sparsity`` and ``seed`` must be the context's own.
    """

    model: TaskModel
    task: TaskSpec
    data: TaskData
    train_config: TrainConfig
    sparsity: float
    seed: int
    calib_config: CalibrationConfig | None = None
    options: dict = field(default_factory=dict)  # method-specific (e.g. LoRA rank)
    progress: bool = True
    checkpoint_dir: Path | None = None
    on_step: Callable[[int, dict], None] | None = None

    def __post_init__(self) -> None:
        SPARSITY.check(self.sparsity)
        cfg = self.calib_config
        if cfg is not None and (cfg.sparsity, cfg.seed) != (self.sparsity, self.seed):
            raise TalosError(f"the calibration config's sparsity/seed ({cfg.sparsity}, {cfg.seed}) differ from the "
                             f"run's ({self.sparsity}, {self.seed})")

    def calibration(self) -> CalibrationConfig:
        """The calibration settings; a method that calibrates cannot run without them."""
        if self.calib_config is None:
            raise TalosError("this method calibrates its mask and needs a calibration config (calib_config)")
        return self.calib_config


@dataclass
class MethodOutput:
    """A method's result: the task vector, its mask (sparse methods), the training history and timings,
    method-specific ``info``, and the learning curve (``[{"step", "val_acc"}]`` on ``ctx.data.val`` when
    ``train_config.eval_every > 0``, else empty)."""

    vector: TaskVector
    mask: Mask | None = None
    history: list[dict] = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    curve: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class FinetuneMethod:
    """A fine-tuning method: its catalogue ``name``, a one-line ``description`` and the ``run`` function.

    The flags come from the catalogue entry (:attr:`info`); a name without a fine-tuning entry there is
    rejected when the method is defined.
    """

    name: str
    description: str
    run: Callable[[MethodContext], MethodOutput] = field(repr=False, compare=False)
    options: tuple[str, ...] = ()  # the method-specific option keys it accepts (--option KEY=VALUE)
    # checks the options against the loaded model (e.g. an L-LoRA rank), before anything is written
    check_options: Callable[[TaskModel, dict], object] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        method_info(self.name, "finetune")  # a catalogue entry of this kind

    @property
    def info(self) -> MethodInfo:
        return method_info(self.name)

    @property
    def label(self) -> str:
        """Display name, as in the paper's tables."""
        return self.info.label

    @property
    def family(self) -> str:
        """Family, as the paper's tables group methods (:data:`talos_core.schema.FAMILIES`)."""
        return self.info.family

    @property
    def sparse(self) -> bool:
        """Trains the entries of a mask at ``sparsity`` (α grid extended by 1/(1 − sparsity))."""
        return self.info.sparse

    @property
    def calibrates(self) -> bool:
        """Computes its mask from data; its calibration settings are part of the run's identity."""
        return self.info.calibrates

    @property
    def trains(self) -> bool:
        """Fine-tunes its runs (``False`` for ``imported``: its runs come only from ``talos import``)."""
        return self.info.trains

    @property
    def eval_mode(self) -> EvalMode:
        """How its task vectors are evaluated (``"linearized"``: the first-order Taylor model)."""
        return self.info.eval_mode


def train_with_plan(ctx: MethodContext, mask: Mask | None, *, dense_names: list[str] | None = None,
                    logits_fn: LossFn = default_logits, extra_timings: dict | None = None) -> MethodOutput:
    """Fine-tune the entries of ``mask`` (``None`` = every parameter, densely).

    With ``ctx.train_config.eval_every > 0`` the learning curve is measured on ``ctx.data.val`` through
    ``logits_fn`` — the model being trained as it is trained (linearized FT: its linearized model).
    """
    if mask is None:
        plan = {n: None for n, _ in ctx.model.named_parameters()}
    else:
        plan = plan_from_mask(mask, dense_names or [])
    result = finetune(ctx.model, ctx.data.train, ctx.task, plan, ctx.train_config, progress=ctx.progress,
                      checkpoint_dir=ctx.checkpoint_dir, on_step=ctx.on_step, logits_fn=logits_fn,
                      val=ctx.data.val if ctx.train_config.eval_every else None)
    timings = {**(extra_timings or {}), **result.timings}
    return MethodOutput(result.vector, mask, result.history, timings, curve=result.curve)


def official_dense_names(ctx: MethodContext) -> list[str]:
    """Parameters trained densely beside a calibrated mask: CLIP's class/positional embeddings and final
    projection under ``param_set="official"`` (as the official code does), none under ``"paper"``."""
    if ctx.calibration().param_set == "official" and hasattr(ctx.model, "official_dense_names"):
        return ctx.model.official_dense_names()
    return []
