"""Suites: the paper's comparison, reproduced end to end on models that run offline, into one store.

A :class:`SuiteSpec` is data: a model, the tasks, the control task for negation, the fine-tuning
methods, the post-hoc methods (applied to ``nonlinear`` vectors), the ξ task pairs, the TaLoS
sparsity ablation, and per-*scale* sizes (``full`` = the documented run; ``mini`` = the down-scaled
run that CI checks for determinism and that can be produced in minutes on a laptop).
``talos suite text --store cached_results`` runs everything and writes every result the dashboard
reads (see ``talos_core/evaluation/SCHEMA.md``).

A suite run is a table of :class:`Step` s (:func:`suite_steps`), each one evaluation protocol of
:mod:`talos_core.evaluation.protocols` (post-hoc methods and the sparsity ablation included), executed
in order by :func:`run_suite`, which records the time of every step and can resume an interrupted run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

import pandas as pd

from talos_core.atomic import json_ready
from talos_core.errors import TalosError, check_seed, unknown
from talos_core.store import Store


@dataclass(frozen=True)
class Scale:
    """Sizes of one suite scale (FinetuneRequest overrides + analysis sizes)."""

    steps: int
    max_train: int | None  # None: the whole split (the paper suites)
    max_val: int | None
    max_test: int | None
    calib_samples: int
    batch_size: int
    alpha_step: float = 0.05
    xi_grid: int = 20
    xi_points: int = 2048
    preview_points: int = 512
    sharing_samples: int = 128
    posthoc_points: int | None = 4  # grid points per post-hoc method (evenly spread over the paper's grid); None: all
    ablation: tuple[float, ...] = (0.5, 0.9, 0.95, 0.99)
    lr: float | None = None  # every fine-tuning method's learning rate, as the paper (None: the model's default)
    # per-method learning rates (method, lr); methods not listed use ``lr``. The shipped suites use one rate
    # for all methods (``lr``); post-hoc methods use ``nonlinear``'s runs, the ablation ``talos``'s.
    lr_by_method: tuple[tuple[str, float], ...] = ()
    # labelled learning-rate rows (method, lr): the method's fixed variant (e.g. ``talos-k0.9``) fine-tuned at
    # ``lr`` with the method's own step budget — single, addition, negation — as ``talos-k0.9-lr0.001``
    lr_rows: tuple[tuple[str, float], ...] = ()
    # precision of evaluation forward passes (talos_core.inference.precision): "auto" = bf16 on GPUs and, for
    # text encoders, on AMX CPUs, fp32 elsewhere; "fp32" where shipped results must reproduce on any CPU
    # (training is always fp32 on CPU)
    eval_precision: str = "auto"
    # training precision (FinetuneRequest.train_precision): None = $TALOS_TRAIN_PRECISION, else auto (bf16 on GPUs,
    # fp32 on CPUs; bf16 on AMX CPUs only for families measured faster: none so far, bench/RESULTS.md)
    train_precision: str | None = None
    # per-example predictions of this many fixed test examples per task (the dashboard's galleries; at most 24),
    # one ``examples`` step per method after its preview; 0 = no such step (and no trace in the suite record)
    examples: int = 0

    # --- the paper's protocol (issue 13; docs/protocol.md); all off by default ---
    # learning-curve step: every method trains each task to ``curve_steps`` with validation accuracy every
    # ``curve_every`` steps; its step budget is then :func:`~talos_core.evaluation.learning_curve.choose_budget`
    # of its curves (tolerance ``curve_tolerance``), used instead of ``steps`` by every later step
    curve_steps: int | None = None
    curve_every: int = 25
    curve_tolerance: float = 0.01
    # per-task selection by validation task negation: (method, param, candidate values); the method's main rows
    # then use the chosen run per task (selection protocol, talos_core.evaluation.selection)
    selection: tuple[tuple[str, str, tuple], ...] = ()
    # fixed-hyperparameter rows kept beside the selected ones: (method, param, value) -> result id e.g.
    # ``talos-k0.9`` (single, efficiency, masks, addition, negation); the TaLoS/LoTA mask comparison, the
    # mask pictures and the sharing step use them when present
    variants: tuple[tuple[str, str, float], ...] = ()
    # learning rate re-checked at the step budget (issue 13): per fine-tuning method an ``lr check`` step right
    # after its learning curve fine-tunes each of ``lr_check_tasks`` (empty: the first ξ pair) at each of these
    # learning rates (the method's own among them) with the overrides of its other rows — the fixed ``variants``
    # value where it has one — and compares mean validation accuracy (talos_core.evaluation.lr_check); the run
    # at the method's own lr is the suite's own run. It reports only: no other step changes. () = no check
    lr_check: tuple[float, ...] = ()
    lr_check_tasks: tuple[str, ...] = ()

    # --- fine-tuning settings the paper suites pin (issue 18); None/0 = the model's default (FinetuneRequest) ---
    weight_decay: float | None = None
    warmup_steps: int | None = None
    grad_clip: float | None = None
    schedule: str | None = None  # cosine / constant (talos_core.training.SCHEDULES)
    micro_batch_size: int | None = None  # gradient accumulation: the batch goes through in chunks of this many
    eval_every: int | None = None  # validation accuracy every N steps (with early stopping)
    batching: str | None = None  # FinetuneRequest.batching: "length" groups text batches by length (None: random)
    early_stopping_patience: int = 0
    # (model architecture, micro-batch size) where a model needs smaller micro-batches than ``micro_batch_size``
    # (memory only: the gradient is the whole batch's either way)
    micro_batch_by_model: tuple[tuple[str, int], ...] = ()

    def finetune_settings(self, model: str | None = None) -> dict:
        """The fine-tuning overrides among the fields above that are set (none for the shipped suites)."""
        out = {k: getattr(self, k) for k in ("weight_decay", "warmup_steps", "grad_clip", "schedule",
                                             "micro_batch_size", "eval_every", "batching")
               if getattr(self, k) is not None}
        if self.early_stopping_patience:
            out["early_stopping_patience"] = self.early_stopping_patience
        if model is not None and self.micro_batch_by_model:
            from talos_core.plan_costs import arch

            found = dict(self.micro_batch_by_model).get(arch(model))
            if found is not None:
                out["micro_batch_size"] = found
        return out

    def settings_dict(self) -> dict:
        """``asdict(self)`` without the issue-17/18 fields left at their defaults (a suite record's fingerprint
        stays what it was for the suites that do not use them, so their stored runs still resume)."""
        out = asdict(self)
        for k, default in (("weight_decay", None), ("warmup_steps", None), ("grad_clip", None), ("schedule", None),
                           ("micro_batch_size", None), ("eval_every", None), ("early_stopping_patience", 0),
                           ("micro_batch_by_model", ()), ("examples", 0), ("lr_rows", ()),
                           ("batching", None)):
            if out[k] == default:
                out.pop(k)
        # the lr check only adds its own steps and changes no other step: it stays out of the fingerprint, so a
        # partial run recorded before the check existed resumes (``--resume``) and runs just the check steps
        out.pop("lr_check")
        out.pop("lr_check_tasks")
        return out

    def lr_for(self, method: str) -> float | None:
        return dict(self.lr_by_method).get(method, self.lr)

    def selection_for(self, method: str) -> tuple[str, tuple] | None:
        """``(param, values)`` selected per task for ``method``, or ``None``."""
        for m, param, values in self.selection:
            if m == method:
                return param, tuple(values)
        return None

    def variant_for(self, method: str) -> tuple[str, float] | None:
        for m, param, value in self.variants:
            if m == method:
                return param, value
        return None


@dataclass(frozen=True)
class SuiteSpec:
    name: str
    model: str
    tasks: tuple[str, ...]
    control_task: str
    methods: tuple[str, ...]
    posthoc: tuple[str, ...]
    xi_pairs: tuple[tuple[str, str], ...]
    scales: dict[str, Scale] = field(default_factory=dict)
    description: str = ""
    # other models ``talos suite NAME --model`` may run it with (named ones; plus ``<prefix>...`` patterns for the
    # prefixes in ``model_patterns``, e.g. ``clip:``); empty: only ``model`` (see :func:`with_model`)
    models: tuple[str, ...] = ()
    model_patterns: tuple[str, ...] = ()


SUITES: dict[str, SuiteSpec] = {}


def register_suite(spec: SuiteSpec) -> SuiteSpec:
    SUITES[spec.name] = spec
    return spec


# One learning rate per suite for every fine-tuning method, as the paper (vision 1e-5, NLP 1e-4 for all methods):
# the rate chosen on validation for the dense baseline, non-linear FT, as the paper inherits its rate from the
# full fine-tuning protocol. Text: MiniLM's 1e-4 (tweets + wordnet-verbs, mini scale: non-linear FT .583 at 1e-4,
# .510 at 1e-3, mean val accuracy). Vision: 1e-4 (EfficientNet-Lite0, 80 steps: 0.94 / 0.95 val acc on MNIST /
# digits, about what 1e-3 reaches, with a smaller step that edits compose better — at 1e-3 negating the MNIST vector
# at α 0.25 dropped the control task from 0.72 to 0.39). Sparse and low-rank methods once had 1e-3 (10× the dense
# rate: their vectors came out 3–4× the dense norm, against the paper's premise of low-norm sparse vectors); that
# choice stays as a labelled row (``lr_rows``: ``talos-k0.9-lr0.001``), at TaLoS's own budget.
_SUITE_LR = 1e-4
_LR_ROWS = (("talos", 1e-3),)

# The paper's protocol (issue 13, docs/protocol.md): per-task selection by validation task negation
# (App. "Hyperparameter selection") over at least the issue's grids, and the fixed-0.9 rows kept beside them
# (the sparsity ablation and the mask pictures use them). Methods a suite does not run are skipped.
_SPARSITIES = (0.5, 0.8, 0.9, 0.95, 0.99)
_PAPER_SELECTION = (("talos", "sparsity", _SPARSITIES), ("lota", "sparsity", _SPARSITIES),
                    ("llora", "rank", (8, 16, 64)))
_PAPER_VARIANTS = (("talos", "sparsity", 0.9), ("lota", "sparsity", 0.9))
# the learning rates re-checked at the learning-curve budget: the two the original choice compared (above); text on
# its tasks (tweets, wordnet-verbs: the first ξ pair), vision on MNIST and digits
_LR_CHECK = (1e-4, 1e-3)

# post-hoc methods: the paper's baselines, then later merges (issue 32: TSV-Merge, Iso-C, Iso-CTS, LiNeS), which the
# paper suites leave out (the paper's protocol compares the four baselines only)
_LATER_POSTHOC = ("tsv", "iso_c", "iso_cts", "lines")
_POSTHOC = ("ties", "dare", "breadcrumbs", "tall_consensus", *_LATER_POSTHOC)

register_suite(SuiteSpec(
    "text", "minilm-l6",
    ("tweets", "wordnet-nouns", "wordnet-verbs", "drug-reviews", "fortune-topics"), "fortune-langs",
    ("talos", "nonlinear", "linearized", "llora", "lota"), _POSTHOC,
    (("tweets", "wordnet-verbs"), ("wordnet-nouns", "fortune-topics")),
    {
        "full": Scale(steps=1000, max_train=20000, max_val=200, max_test=1000, calib_samples=128, batch_size=32,
                      alpha_step=0.05, xi_grid=20, xi_points=512, preview_points=256, sharing_samples=64,
                      lr=_SUITE_LR, lr_rows=_LR_ROWS, batching="length", curve_steps=1000, curve_every=50,
                      curve_tolerance=0.01,
                      selection=_PAPER_SELECTION, variants=_PAPER_VARIANTS, examples=24, lr_check=_LR_CHECK),
        "mini": Scale(steps=40, max_train=640, max_val=48, max_test=96, calib_samples=32, batch_size=16,
                      alpha_step=0.25, xi_grid=6, xi_points=24, preview_points=48, sharing_samples=16,
                      posthoc_points=3, ablation=(0.5, 0.9, 0.95, 0.99), lr=_SUITE_LR),
    },
    "all-MiniLM-L6-v2 (real weights) on 5 real offline text tasks + a language-id control task"))

register_suite(SuiteSpec(
    "vision", "efficientnet-lite0",
    ("mnist", "digits", "animal-shapes"), "fashion-mnist",
    ("talos", "nonlinear", "linearized", "lota"), _POSTHOC,
    (("mnist", "digits"), ("mnist", "animal-shapes")),
    {
        "full": Scale(steps=600, max_train=20000, max_val=200, max_test=1000, calib_samples=128, batch_size=32,
                      alpha_step=0.05, xi_grid=20, xi_points=512, preview_points=256, sharing_samples=64,
                      lr=_SUITE_LR, lr_rows=_LR_ROWS, eval_precision="fp32", curve_steps=2000, curve_every=50,
                      curve_tolerance=0.01, selection=_PAPER_SELECTION, variants=_PAPER_VARIANTS, examples=24,
                      lr_check=_LR_CHECK, lr_check_tasks=("mnist", "digits")),
        "mini": Scale(steps=80, max_train=2560, max_val=64, max_test=200, calib_samples=32, batch_size=32,
                      alpha_step=0.05, xi_grid=6, xi_points=32, preview_points=64, sharing_samples=16,
                      posthoc_points=2, ablation=(0.5, 0.9, 0.99), lr=_SUITE_LR, eval_precision="fp32"),
    },
    "EfficientNet-Lite0 (real ImageNet weights) on MNIST, sklearn digits and Animal-Shape silhouettes; "
    "Fashion-MNIST as the control task (L-LoRA does not apply: the CNN has no attention)"))

# a seconds-long suite over the tiny random-init models: used by tests (determinism, completeness)
register_suite(SuiteSpec(
    "tiny", "tiny-text", ("drug-reviews", "fortune-topics", "wordnet-verbs"), "fortune-langs",
    ("talos", "nonlinear"), ("ties", *_LATER_POSTHOC), (("drug-reviews", "fortune-topics"),),
    {"mini": Scale(steps=4, max_train=64, max_val=16, max_test=24, calib_samples=8, batch_size=8, alpha_step=0.5,
                   xi_grid=3, xi_points=8, preview_points=8, sharing_samples=8, posthoc_points=1,
                   ablation=(0.5,), lr=1e-3, eval_precision="fp32"),
     # the paper's protocol in seconds (tests): learning curves, per-task selection, the fixed-0.9 row
     "paper": Scale(steps=4, max_train=64, max_val=16, max_test=24, calib_samples=8, batch_size=8, alpha_step=0.5,
                    xi_grid=3, xi_points=8, preview_points=8, sharing_samples=8, posthoc_points=1, ablation=(0.5, 0.9),
                    lr=1e-3, eval_precision="fp32", curve_steps=6, curve_every=2, curve_tolerance=0.01,
                    selection=(("talos", "sparsity", (0.5, 0.9)),), variants=(("talos", "sparsity", 0.9),),
                    lr_check=(1e-4, 1e-3))},
    "tiny random-init text encoder (tests only)"))


# The paper's own settings (issue 18; docs/scale-out.md), App. "Implementation Details" of the paper and the
# official code (shared/notes/official-code.md; the NLP trainer is the TIES-Merging one, configs/t5_*.json): vision —
# the 8 tasks, ImageNet as control, 2,000 iterations, batch 128, AdamW lr 1e-5, weight decay 0.1, cosine with 200
# warm-up steps, clipping 1.0; NLP — the 7 tasks, RTE as control, lr 1e-4, effective batch 1,024 by gradient
# accumulation (256 × 4, the official t5-base config; t5-large 64 × 16, as its config), constant lr (its scheduler is
# null), no clipping, no weight decay, max length 128 (the T5 loader's), at most 75,000 steps with validation every
# 100 steps and early stopping after 5 evaluations without improvement. Both: bf16 on GPU (train and evaluation
# precision "auto"), the 21-point α grid, ξ on a 20 × 20 grid over 2,048 test points per task, full data sets, and
# hyperparameters chosen per task by validation task negation over the paper's grids (sparsity {0.1, …, 0.9, 0.95,
# 0.99} for TaLoS and LoTA, rank {512, …, 8} for L-LoRA; the post-hoc methods' whole grids). The iteration counts are
# fixed: no learning-curve step.
_PAPER_K = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
_PAPER_RANKS = (512, 256, 128, 64, 32, 16, 8)
_PAPER_GRIDS = (("talos", "sparsity", _PAPER_K), ("lota", "sparsity", _PAPER_K), ("llora", "rank", _PAPER_RANKS))
_PAPER_METHODS = ("talos", "nonlinear", "linearized", "llora", "lota")
_PAPER_POSTHOC = ("ties", "dare", "breadcrumbs", "tall_consensus")
_PAPER_VISION_TASKS = ("cars", "dtd", "eurosat", "gtsrb", "mnist", "resisc45", "sun397", "svhn")
_PAPER_NLP_TASKS = ("qasc", "wikiqa", "quartz", "paws", "story_cloze", "winogrande", "wsc")
_PAPER_COMMON = dict(max_train=None, max_val=None, max_test=None, alpha_step=0.05, xi_grid=20, xi_points=2048,
                     preview_points=512, sharing_samples=128, posthoc_points=None, ablation=_PAPER_K,
                     selection=_PAPER_GRIDS, variants=_PAPER_VARIANTS)

# ξ pairs: the paper's text does not name the two pairs of its Figure (it follows Ortiz-Jiménez et al. for vision and
# a criterion like Tang et al.'s for NLP); these are our choice — pass other pairs by editing the spec
register_suite(SuiteSpec(
    "paper-vision", "clip-vit-b-32", _PAPER_VISION_TASKS, "imagenet", _PAPER_METHODS, _PAPER_POSTHOC,
    (("eurosat", "svhn"), ("dtd", "gtsrb")),
    {"full": Scale(steps=2000, batch_size=128, calib_samples=1280, lr=1e-5, weight_decay=0.1, warmup_steps=200,
                   grad_clip=1.0, schedule="cosine", **_PAPER_COMMON)},
    "the paper's vision benchmark: CLIP (open_clip, OpenAI weights) on its 8 tasks, ImageNet as control",
    models=("clip-vit-b-16", "clip-vit-l-14"), model_patterns=("clip:",)))

register_suite(SuiteSpec(
    "paper-nlp", "t5-base", _PAPER_NLP_TASKS, "rte", _PAPER_METHODS, _PAPER_POSTHOC,
    (("paws", "qasc"), ("wikiqa", "winogrande")),
    {"full": Scale(steps=75000, batch_size=1024, micro_batch_size=256, calib_samples=32, lr=1e-4, weight_decay=0.0,
                   warmup_steps=0, grad_clip=0.0, schedule="constant", eval_every=100, early_stopping_patience=5,
                   micro_batch_by_model=(("t5-large", 64),), **_PAPER_COMMON)},
    "the paper's NLP benchmark: T5 on its 7 tasks (rank classification), RTE as control",
    models=("t5-small", "t5-large"), model_patterns=("t5:",)))


def get_suite(name: str) -> SuiteSpec:
    if name not in SUITES:
        raise unknown("suite", name, SUITES)
    return SUITES[name]


def with_model(spec: SuiteSpec, model: str | None) -> SuiteSpec:
    """``spec`` run with ``model`` (``talos suite NAME --model``): its own model, one of its ``models``, or a
    pattern with one of its ``model_patterns`` prefixes; anything else is one :class:`TalosError` sentence.

    >>> with_model(get_suite("paper-vision"), "clip-vit-l-14").model
    'clip-vit-l-14'
    """
    from dataclasses import replace

    if model is None or model == spec.model:
        return spec
    allowed = [spec.model, *spec.models]
    if model in spec.models or any(model.startswith(p) and len(model) > len(p) for p in spec.model_patterns):
        from talos_core.models import get_model_spec

        get_model_spec(model)  # a malformed pattern is one sentence too
        return replace(spec, model=model)
    patterns = [f"{p}<{'arch>:<tag' if p == 'clip:' else 'id'}>" for p in spec.model_patterns]
    if len(allowed) == 1 and not patterns:
        raise TalosError(f"suite {spec.name!r} runs only model {spec.model!r}, not {model!r}; suites with a "
                         f"--model choice: {', '.join(n for n, s in SUITES.items() if s.models or s.model_patterns)}")
    raise TalosError(f"suite {spec.name!r} has no model {model!r}; choose among: {', '.join(allowed + patterns)}")


STAGES = ("all", "train")
"""What ``talos suite --stage`` runs: every step, or only the fine-tuning ones (see :func:`run_suite`)."""


def default_scale(name: str) -> str:
    """The scale a suite runs at when none is asked for: ``full`` (the documented one), else its first scale.

    >>> default_scale("text"), default_scale("tiny")
    ('full', 'mini')
    """
    scales = list(get_suite(name).scales)
    return "full" if "full" in scales else scales[0]


def run_suite(name: str, store: Store | str, *, scale: str = "full", seed: int = 0, device: str = "auto",
              methods: Sequence[str] | None = None, posthoc: Sequence[str] | None = None,
              log: Callable[[str], None] = print, progress: bool = False, resume: bool = False,
              eval_precision: str | None = None, train_precision: str | None = None, stage: str = "all",
              model: str | None = None, executor: str = "local", address: str | None = None,
              gpus_per_task: float | None = None, cpus_per_task: float = 1.0, jobs: int | None = None,
              checkpoint_every: int = 0) -> dict:
    """Run every fine-tuning method, post-hoc method and analysis of suite ``name`` into ``store``.

    Evaluation runs at the scale's ``eval_precision`` (``eval_precision`` overrides it; see
    :mod:`talos_core.inference.precision`); the precision it resolved to is part of the suite record.
    Fine-tuning uses the scale's ``train_precision`` (``train_precision`` overrides it), which is part of
    every run's request.

    The suite's record (``results/suite/<name>.json``) is rewritten after every step with
    ``complete: false`` and the steps done so far; ``resume=True`` (``talos suite ... --resume``)
    skips the steps an interrupted run with the *same* settings already finished (runs are reused
    from the store in any case). ``wall_time_s`` is the sum of all step times over all sessions.

    ``stage="train"`` runs only the steps that fine-tune (learning curves, selections, the first
    ``single`` of every row) and writes no suite record: several such processes, one per method
    (``methods=[m]``), can share one store and one GPU; the suite run afterwards (``stage="all"``)
    finds every run and only evaluates. Results several of them update are written under
    :meth:`~talos_core.store.Store.locked`.

    ``executor="ray"`` runs the steps as Ray tasks on the Ray instance at ``address`` (see
    :mod:`talos_core.executors`: dependencies, resources, retries, the shared-filesystem requirement);
    ``"processes"`` runs the same units on ``jobs`` worker processes of this machine (no Ray); ``"local"``
    (default) runs them in order in this process. Each can resume the others' runs.

    ``checkpoint_every=N`` (``--checkpoint-every``) makes every fine-tuning run save a resumable checkpoint every N
    steps (``store.checkpoint_dir(run_id)``): a suite cut off mid-run continues that run from its last checkpoint
    instead of from step 0, with the same task vector. It changes no run id, result or fingerprint.
    """
    from talos_core.executors import preflight

    preflight(executor, address, gpus_per_task, cpus_per_task, jobs)
    check_seed(seed)
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int) or checkpoint_every < 0:
        raise TalosError(f"checkpoint_every must be a whole number of steps ≥ 0 (0: no checkpoints), got "
                         f"{checkpoint_every!r}")
    if stage not in STAGES:
        raise unknown("suite stage", stage, STAGES)
    from talos_core.inference.precision import check_precision
    from talos_core.inference.precision import eval_precision as precision_block

    spec = with_model(get_suite(name), model)  # ``model``: talos suite NAME --model (see with_model)
    if scale not in spec.scales:
        raise unknown(f"scale of suite {name!r}", scale, spec.scales)
    precision = check_precision(eval_precision or spec.scales[scale].eval_precision)
    if train_precision is not None:
        from dataclasses import replace

        check_precision(train_precision, "training precision")
        pinned = replace(spec.scales[scale], train_precision=train_precision)
        spec = replace(spec, scales={**spec.scales, scale: pinned})
    with precision_block(precision):
        return _run_suite(spec, scale, store, seed=seed, device=device, methods=methods, posthoc=posthoc, log=log,
                          progress=progress, resume=resume, stage=stage, checkpoint_every=checkpoint_every,
                          executor=dict(executor=executor, address=address, gpus_per_task=gpus_per_task,
                                        cpus_per_task=cpus_per_task, jobs=jobs))


Resolved = Callable[[Store], Any]
"""A value computed from the store when its step runs (budgets and choices of earlier steps)."""


@dataclass(frozen=True)
class Step:
    """One step of a suite run: ``evaluate(store, protocol, model, tasks, method, settings=..., overrides=...,
    task_overrides=..., result_method=...)``.

    ``label`` names the step in the suite record (``step_times_s``) and is what ``--resume`` skips;
    ``always`` steps run even then (the comparison gathers every stored result). ``overrides`` and
    ``task_overrides`` may be functions of the store, called when the step runs: under the paper's
    protocol they read the step budget of the learning-curve step and the per-task choices of the
    selection step, which earlier steps of the same suite wrote.
    """

    label: str
    protocol: str
    method: str
    tasks: tuple[str, ...]
    settings: Any  # a protocol's settings, or a function of the store returning them
    overrides: Mapping[str, Any] | Resolved
    always: bool = False
    task_overrides: Mapping[str, Mapping[str, Any]] | Resolved | None = None
    result_method: str | None = None
    trains: bool = False  # fine-tunes the runs later steps use (``--stage train`` runs only these)
    uses: tuple[str, ...] = ()  # other fine-tuning methods whose runs it reads (talos_core.executors.step_graph)
    # later steps of its method wait for it (a ``trains`` step whose runs or results they read); False: the lr
    # check, which only reports (the runs later steps share with it are found or trained by them as usual)
    feeds: bool = True

    def resolve(self, store: Store) -> tuple[Any, dict, dict | None]:
        """``(settings, overrides, task_overrides)`` for this run of the step."""
        tov = _resolved(self.task_overrides, store)
        return (_resolved(self.settings, store), dict(_resolved(self.overrides, store)),
                None if tov is None else dict(tov))


    def run(self, store: Store, model: str, suite: str, *, progress: bool = False) -> Any:
        """Resolve the step against ``store`` and evaluate it (its protocol writes its results)."""
        from talos_core.evaluation.protocols import evaluate

        settings, ov, per_task = self.resolve(store)
        return evaluate(store, self.protocol, model, self.tasks, self.method, suite=suite, settings=settings,
                        overrides=ov, task_overrides=per_task, result_method=self.result_method, progress=progress)


def _resolved(value: Any, store: Store) -> Any:
    """``value(store)`` for a :data:`Resolved` function (settings dataclasses are not callable), else ``value``."""
    return value(store) if callable(value) else value


def curve_budget(store: Store, suite: str, model: str, method: str) -> int:
    """The step budget the suite's learning-curve step chose for ``method`` (``results/learning_curve``)."""
    from talos_core.schema import result_name

    name = result_name(suite, model, method)
    if name not in store.results("learning_curve"):
        raise TalosError(f"store {store.root} has no learning curve {name!r} to take {method!r}'s step budget from; "
                         f"run the suite's learning-curve step first")
    budget = store.read_result("learning_curve", name).get("budget")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise TalosError(f"the learning curve {name!r} in {store.root} has no valid budget ({budget!r}); recompute it")
    return budget


def lr_check_tasks(spec: SuiteSpec, scale: str) -> tuple[str, ...]:
    """The tasks of the scale's lr check: its ``lr_check_tasks``, else the suite's first ξ pair (else its first two
    tasks); ``()`` without a check. A task the suite does not run is one :class:`TalosError` sentence.

    >>> lr_check_tasks(get_suite("text"), "full"), lr_check_tasks(get_suite("text"), "mini")
    (('tweets', 'wordnet-verbs'), ())
    """
    sc = spec.scales[scale]
    if not sc.lr_check:
        return ()
    chosen = tuple(sc.lr_check_tasks) or (tuple(spec.xi_pairs[0]) if spec.xi_pairs else tuple(spec.tasks[:2]))
    for t in chosen:
        if t not in spec.tasks:
            raise TalosError(f"lr-check task {t!r} of suite {spec.name!r} is not one of its tasks; choose among: "
                             f"{', '.join(spec.tasks)}")
    if len(set(chosen)) != len(chosen):
        raise TalosError(f"lr-check task {next(t for t in chosen if chosen.count(t) > 1)!r} of suite "
                         f"{spec.name!r} is listed twice")
    return chosen


def suite_steps(spec: SuiteSpec, scale: str, ft_methods: Sequence[str], ph_methods: Sequence[str], *, seed: int,
                device: str, checkpoint_every: int = 0) -> list[Step]:
    """The steps of suite ``spec`` at ``scale`` for these fine-tuning and post-hoc methods, in order.

    Every fine-tuning method gets single, efficiency, masks, addition, negation, localization,
    linearization, preview and one disentanglement grid per ξ pair; then TaLoS vs LoTA masks (when
    both run), sharing on TaLoS's Fisher, the post-hoc methods on the ``nonlinear`` runs, the TaLoS
    sparsity ablation and the comparison table.

    Under the paper's protocol (a scale with ``curve_steps``, ``selection``, ``variants``), each method
    first gets its learning-curve step (its budget replaces ``steps`` from then on), its lr check (a scale with
    ``lr_check``: the method's runs at each learning rate, the fixed variant's where it has one, so the run at its
    own lr is that row's run) and, when it has a selected hyperparameter, its selection step (its main rows use
    the chosen run per task); each ``variants`` entry adds a fixed-hyperparameter row (e.g. ``talos-k0.9``) after
    its method's steps.
    """
    from talos_core.evaluation.ablation import AblationSettings
    from talos_core.evaluation.learning_curve import LearningCurveSettings
    from talos_core.evaluation.lr_check import LrCheckSettings
    from talos_core.evaluation.posthoc import PosthocSettings
    from talos_core.evaluation.protocols import (
        AdditionSettings,
        DisentanglementSettings,
        EvalSettings,
        ExamplesSettings,
        MaskSettings,
        NegationSettings,
        NoSettings,
        PreviewSettings,
        SharingSettings,
    )
    from talos_core.evaluation.selection import SelectionSettings, selected_overrides
    from talos_core.methods.posthoc import BASE_METHOD
    from talos_core.schema import variant_id

    sc = spec.scales[scale]
    tasks, control = tuple(spec.tasks), spec.control_task
    base = {"steps": sc.steps, "max_train": sc.max_train, "max_val": sc.max_val, "max_test": sc.max_test,
            "calib_samples": sc.calib_samples, "batch_size": sc.batch_size, "seed": seed, "device": device}
    if checkpoint_every:  # like ``device``: how the runs are made, not what they are (no run id includes it)
        base["checkpoint_every"] = int(checkpoint_every)
    if sc.train_precision is not None:
        base["train_precision"] = sc.train_precision
    base.update(sc.finetune_settings(spec.model))  # the paper suites' pinned settings (none for the shipped ones)

    def fixed(method: str) -> dict:
        lr = sc.lr_for(method)
        if lr is None and sc.lr_check:  # the model's default lr, named: with the lr check's other-lr runs in the
            from talos_core.evaluation.lr_check import own_lr  # store, a request without lr would find one of
            lr = own_lr(spec.model, tasks[0], method, base)  # them as compatible (evaluation.runs.find_run)
        return {**base, "lr": lr} if lr is not None else dict(base)

    def overrides(method: str, extra: Mapping[str, Any] | None = None) -> Mapping[str, Any] | Resolved:
        """The method's fine-tuning overrides: fixed, or (learning curves) with the budget read when the step runs."""
        if sc.curve_steps is None:
            return {**fixed(method), **(extra or {})}
        return lambda store: {**fixed(method), "steps": curve_budget(store, spec.name, spec.model, method),
                              **(extra or {})}

    def chosen(method: str) -> Resolved | None:
        if sc.selection_for(method) is None:
            return None
        return lambda store: selected_overrides(store, spec.name, spec.model, method, tasks)

    def variant(method: str) -> tuple[str, dict] | None:
        found = sc.variant_for(method) if method in ft_methods else None
        if found is None:
            return None
        param, value = found
        return variant_id(method, **{param: value}), {param: value}

    check_tasks = lr_check_tasks(spec, scale)
    steps = []
    for m in ft_methods:
        if sc.curve_steps is not None:
            steps.append(Step(f"{m}: learning curve", "learning-curve", m, tasks,
                              LearningCurveSettings(eval_every=sc.curve_every, steps=sc.curve_steps,
                                                    tolerance=sc.curve_tolerance), fixed(m), trains=True))
        if sc.lr_check:  # the runs of its other rows (the fixed variant's where it has one) at each lr
            var = variant(m)
            steps.append(Step(f"{m}: lr check", "lr-check", m, check_tasks,
                              LrCheckSettings(values=tuple(sc.lr_check), row=var[0] if var else None),
                              overrides(m, var[1] if var else None), trains=True, feeds=False))
        sel = sc.selection_for(m)
        if sel is not None:
            steps.append(Step(f"{m}: selection ({sel[0]})", "selection", m, tasks,
                              SelectionSettings(param=sel[0], values=sel[1], control_task=control,
                                                alpha_step=sc.alpha_step), overrides(m), trains=True))
        per_task = chosen(m)
        steps += [Step(f"{m}: {what}", protocol, m, tasks, settings, overrides(m), task_overrides=per_task,
                       trains=protocol == "single")
                  for what, protocol, settings in (
            ("fine-tune + single", "single", EvalSettings()),
            ("efficiency", "efficiency", NoSettings()),
            ("masks", "masks", MaskSettings()),
            ("addition", "addition", AdditionSettings(alpha_step=sc.alpha_step)),
            ("negation", "negation", NegationSettings(control_task=control, alpha_step=sc.alpha_step)),
            ("localization", "localization", EvalSettings()),
            ("linearization", "linearization", EvalSettings()),
            ("preview", "preview", PreviewSettings(points=sc.preview_points, seed=seed)),
        )]
        if sc.examples:
            steps.append(Step(f"{m}: examples", "examples", m, tasks,
                              ExamplesSettings(points=sc.examples, seed=seed, control_task=control,
                                               alpha_step=sc.alpha_step), overrides(m), task_overrides=per_task))
        steps += [Step(f"{m}: disentanglement {a}/{b}", "disentanglement", m, (a, b),
                       DisentanglementSettings(grid=sc.xi_grid, points=sc.xi_points, seed=seed,
                                               alpha_step=sc.alpha_step), overrides(m), task_overrides=per_task)
                  for a, b in spec.xi_pairs]
        var = variant(m)
        if var is not None:
            vid, extra = var
            steps += [Step(f"{vid}: {what}", protocol, m, tasks, settings, overrides(m, extra), result_method=vid,
                           trains=protocol == "single")
                      for what, protocol, settings in (
                ("single", "single", EvalSettings()),
                ("efficiency", "efficiency", NoSettings()),
                ("masks", "masks", MaskSettings()),
                ("addition", "addition", AdditionSettings(alpha_step=sc.alpha_step)),
                ("negation", "negation", NegationSettings(control_task=control, alpha_step=sc.alpha_step)),
            )]
        for row_method, row_lr in sc.lr_rows:  # the labelled per-method learning-rate rows
            if row_method != m:
                continue
            extra = {**(var[1] if var is not None else {}), "lr": row_lr}
            rid = variant_id(m, **extra)
            steps += [Step(f"{rid}: {what}", protocol, m, tasks, settings, overrides(m, extra), result_method=rid,
                           trains=protocol == "single")
                      for what, protocol, settings in (
                ("single", "single", EvalSettings()),
                ("addition", "addition", AdditionSettings(alpha_step=sc.alpha_step)),
                ("negation", "negation", NegationSettings(control_task=control, alpha_step=sc.alpha_step)),
            )]
    if "talos" in ft_methods and "lota" in ft_methods:  # TaLoS vs LoTA masks (both are fine-tuned by now)
        talos_var, lota_var = variant("talos"), variant("lota")
        if talos_var is not None and lota_var is not None:  # the fixed-hyperparameter rows: masks of equal sparsity
            lota_ov = overrides("lota", lota_var[1])
            compare = lambda store: MaskSettings(compare_method="lota",  # noqa: E731
                                                 compare_overrides=_resolved(lota_ov, store),
                                                 compare_label=lota_var[0])
            steps.append(Step("talos vs lota masks", "masks", "talos", tasks, compare,
                              overrides("talos", talos_var[1]), result_method=talos_var[0], uses=("lota",)))
        elif sc.curve_steps is None and not sc.selection:
            steps.append(Step("talos vs lota masks", "masks", "talos", tasks,
                              MaskSettings(compare_method="lota", compare_overrides=overrides("lota")),
                              overrides("talos"), uses=("lota",)))
    talos_var = variant("talos")
    sharing_ov = overrides("talos", talos_var[1] if talos_var else None)
    steps += [Step(f"sharing ({mode})", "sharing", "talos", tasks,
                   SharingSettings(mode=mode, samples=sc.sharing_samples, seed=seed), sharing_ov)
              for mode in ("prune", "perturb")]
    if BASE_METHOD in ft_methods:  # post-hoc methods merge its runs
        steps += [Step(f"{ph}: post-hoc addition + negation", "posthoc", ph, tasks,
                       PosthocSettings(control_task=control, alpha_step=sc.alpha_step, max_points=sc.posthoc_points),
                       overrides(BASE_METHOD))
                  for ph in ph_methods]
    if "talos" in ft_methods and sc.ablation:
        steps.append(Step("talos sparsity ablation", "sparsity-ablation", "talos", tasks,
                          AblationSettings(sparsities=tuple(sc.ablation), control_task=control,
                                           alpha_step=sc.alpha_step), overrides("talos")))
    steps.append(Step("comparison", "comparison", "talos", tasks, NoSettings(), {}, always=True))
    return steps


def _run_suite(spec: SuiteSpec, scale: str, store: Store | str, *, seed: int, device: str,
               methods: Sequence[str] | None, posthoc: Sequence[str] | None, log: Callable[[str], None],
               progress: bool, resume: bool, stage: str = "all", executor: dict | None = None,
               checkpoint_every: int = 0) -> dict:
    import torch

    from talos_core import executors as X
    from talos_core.inference.precision import current_precision, resolve_precision
    from talos_core.inference.runtime import resolve_device
    from talos_core.models import get_model_spec

    name = spec.name
    sc = spec.scales[scale]
    store = Store(store) if not isinstance(store, Store) else store
    store.check_folder()
    t_start = time.perf_counter()
    ft_methods = list(methods) if methods else list(spec.methods)
    ph_methods = list(spec.posthoc) if posthoc is None else list(posthoc)
    for m in ft_methods:
        if m not in spec.methods:
            raise unknown(f"method of suite {name!r}", m, spec.methods)
    for m in ph_methods:
        if m not in spec.posthoc:
            raise unknown(f"post-hoc method of suite {name!r}", m, spec.posthoc)
    steps = suite_steps(spec, scale, ft_methods, ph_methods, seed=seed, device=device,
                        checkpoint_every=checkpoint_every)
    store.ensure()  # after every check: a bad suite request writes nothing
    run = dict(executor or {})
    kind = X.check_executor(run.pop("executor", "local"))
    table = partial(suite_steps, spec, scale, tuple(ft_methods), tuple(ph_methods), seed=seed, device=device,
                    checkpoint_every=checkpoint_every)
    job = X.SuiteJob(name, scale, spec.model, table, str(store.root.resolve()),
                     precision=current_precision(), threads=torch.get_num_threads(),
                     env={k: v for k, v in os.environ.items() if k.startswith("TALOS_")})
    if stage == "train":
        if kind != "local":
            return _train_stage_parallel(job, kind, [st for st in steps if st.trains], log=log, progress=progress,
                                         **run)
        return _train_stage(spec, scale, store, [st for st in steps if st.trains], log=log, progress=progress)

    requested = current_precision()
    precision = resolve_precision(resolve_device(device), family=get_model_spec(spec.model).family)
    fingerprint = json_ready({"model": spec.model, "tasks": list(spec.tasks), "control_task": spec.control_task,
                             "methods": ft_methods, "posthoc": ph_methods, "xi_pairs": spec.xi_pairs, "scale": scale,
                             "scale_settings": sc.settings_dict(), "seed": seed, "eval_precision": precision})
    command = (f"talos suite {name} --scale {scale} --seed {seed} --store {store.root}"
               + (f" --model {spec.model}" if spec.model != get_suite(name).model else "")
               + (f" --methods {','.join(ft_methods)}" if methods else "")
               + (f" --posthoc {','.join(ph_methods)}" if posthoc is not None else "")
               + (f" --eval-precision {requested}" if requested != sc.eval_precision else "")
               + (f" --train-precision {sc.train_precision}"
                  if sc.train_precision != get_suite(name).scales[scale].train_precision else ""))
    log(f"[{name}/{scale}] evaluation precision: {precision}"
        + (f" ({requested})" if requested != precision else ""))
    done: dict[str, float] = {}
    sessions: list[dict] = []
    if resume and name in store.results("suite"):
        old = store.read_result("suite", name)
        if {k: old.get(k) for k in fingerprint} == fingerprint and not old.get("complete", True):
            done = dict(old.get("step_times_s") or {})
            sessions = list(old.get("sessions") or [])
            log(f"[{name}/{scale}] resuming: {len(done)} steps already done")
        elif old.get("complete", True) is False:
            log(f"[{name}/{scale}] not resuming: the stored partial run has other settings")
    timings: dict[str, float] = dict(done)
    session = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "device": str(resolve_device(device)),
               "torch_threads": torch.get_num_threads(), "eval_precision": precision, "steps_run": []}
    sessions.append(session)

    def write_meta(complete: bool) -> dict:
        meta = {**fingerprint, "command": command, "complete": complete, **({"failed": failed} if failed else {}),
                "wall_time_s": float(sum(timings.values())), "step_times_s": _in_order(timings, order),
                "sessions": sessions,
                "device": session["device"], "torch_threads": session["torch_threads"],
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        store.write_result("suite", name, meta)
        return meta

    if kind != "local":
        session["executor"] = kind
        if run.get("address"):
            session["address"] = run["address"]
    todo = [st for st in steps if not (st.label in done and not st.always)]
    failed: dict[str, str] = {}

    def changed(label: str) -> None:  # a step changed state: the record follows (per-step states in the session)
        state = display.states[label]
        if state["state"] == "done" and label in by_label:
            timings[label] = state["seconds"]
            session["steps_run"].append(label)
        elif state["state"] in ("failed", "blocked"):
            failed[label] = state.get("error", "")
        write_meta(complete=False)

    order = [st.label for st in steps]
    by_label = set(order)
    display = X.Progress(f"[{name}/{scale}]", [st.label for st in steps], log=log)
    session["steps"] = display.states
    for st in steps:
        if st not in todo:
            display.skip(st.label, done[st.label])
    display.on_change = changed
    if kind == "ray":
        X.run_ray(job, todo, display, progress=progress, **run)
    elif kind == "processes":
        X.run_processes(job, todo, display, progress=progress, **run)
    else:
        X.run_local(job, todo, store, display, progress=progress)
    session["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    session["wall_time_s"] = time.perf_counter() - t_start
    meta = write_meta(complete=not failed)
    for line in display.summary() if kind != "local" or failed else ():
        log(line)
    if failed:
        raise TalosError(f"suite {name!r}: {len(failed)} step{'s' if len(failed) != 1 else ''} did not finish "
                         f"({'; '.join(f'{k}: {v}' for k, v in failed.items())}); the suite record "
                         f"{store.result_path('suite', name)} lists them; fix the cause and rerun with --resume")
    log(f"[{name}/{scale}] finished in {meta['wall_time_s'] / 60:.1f} min")
    return meta


def _train_stage(spec: SuiteSpec, scale: str, store: Store, steps: Sequence[Step], *, log: Callable[[str], None],
                 progress: bool) -> dict:
    """``talos suite --stage train``: the fine-tuning steps only, no suite record (see :func:`run_suite`).

    Several processes started with the same command share the work: each fine-tunes the runs of a step that no
    other process is fine-tuning (:func:`talos_core.executors.fine_tune_parts`) before running the step."""
    from talos_core.executors import fine_tune_parts

    times: dict[str, float] = {}
    for st in steps:
        t0 = time.perf_counter()
        log(f"[{spec.name}/{scale}] {st.label} (train stage) ...")
        fine_tune_parts(st, store, spec.model, progress=progress, log=log)
        st.run(store, spec.model, spec.name, progress=progress)
        times[st.label] = time.perf_counter() - t0
        log(f"[{spec.name}/{scale}] {st.label} done in {times[st.label]:.1f}s")
    return {"stage": "train", "step_times_s": times, "wall_time_s": float(sum(times.values()))}


def _in_order(times: dict[str, float], order: Sequence[str]) -> dict[str, float]:
    """``times`` with the step table's labels first, in table order (executors finish steps in any order)."""
    return {**{lab: times[lab] for lab in order if lab in times}, **times}


def _train_stage_parallel(job, kind: str, steps: Sequence[Step], *, log: Callable[[str], None], progress: bool,
                          **run: Any) -> dict:
    """``talos suite --stage train --executor ray|processes``: the fine-tuning steps (each run its own task), no
    suite record."""
    from talos_core.executors import Progress, run_processes, run_ray

    display = Progress(f"[{job.suite}/{job.scale}]", [st.label for st in steps], log=log)
    times = (run_ray if kind == "ray" else run_processes)(job, steps, display, progress=progress, **run)
    for line in display.summary():
        log(line)
    if display.failures():
        raise TalosError(f"suite {job.suite!r} train stage: {len(display.failures())} step(s) did not finish "
                         f"({'; '.join(f'{k}: {v}' for k, v in display.failures().items())})")
    return {"stage": "train", "step_times_s": times, "wall_time_s": float(sum(times.values()))}


def report_markdown(store: Store | str, suite: str) -> str:
    """What ``talos report`` prints: :func:`results_markdown` and, where the store has them, the learning rates
    re-checked at the step budget (one line per method; ``docs/results.md`` carries it, ``talos docs``)."""
    from talos_core.evaluation.lr_check import report_lines

    store = Store(store) if not isinstance(store, Store) else store
    try:
        text = results_markdown(store, suite)
    except KeyError as exc:
        raise TalosError(f"suite {suite!r} in {store.root} lacks {exc}") from None
    model = store.read_result("suite", suite).get("model") if suite in store.results("suite") else None
    checks = report_lines(store, suite, model) if model else []
    if checks:  # a store without lr checks prints nothing more
        text += ("\n\nLearning rate re-checked at the step budget (mean validation accuracy; the suite keeps its lr):\n"
                 + "\n".join(f"- {line}" for line in checks))
    return text


def markdown_text(value: Any) -> str:
    """A name read from a store, safe inside a Markdown table row and a code span: ``|`` escaped, line breaks
    and backticks replaced (a store is data, never markup).

    >>> print(markdown_text("a|b`c"))
    a\\|b'c
    """
    return " ".join(str(value).replace("\\", "\\\\").replace("|", "\\|").replace("`", "'").split())


def results_markdown(store: Store | str, suite: str) -> str:
    """The results table of ``suite`` (docs/results.md) (from the store's ``comparison`` result).

    Accuracies are percentages; where the comparison carries a mean's 95% bootstrap interval over test
    examples (``<column>_lo``, ``<column>_hi``) the cell reads ``45.00 [41.2, 48.9]``, else ``45.00``.
    """
    from talos_core.schema import result_name

    store = Store(store) if not isinstance(store, Store) else store
    if suite not in store.results("suite"):
        raise TalosError(f"no results of suite {suite!r} in {store.root}; pass --store or set $TALOS_STORE to the "
                         f"store that holds them")
    meta = store.read_result("suite", suite)
    table = store.read_table("comparison", result_name(suite, meta["model"]))
    pct = lambda v: "–" if v is None or pd.isna(v) else f"{100 * float(v):.2f}"  # noqa: E731

    def acc(r: dict, col: str) -> str:
        lo, hi = r.get(f"{col}_lo"), r.get(f"{col}_hi")
        if pct(r.get(col)) == "–" or lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
            return pct(r.get(col))
        return f"{pct(r.get(col))} [{100 * float(lo):.1f}, {100 * float(hi):.1f}]"

    num = lambda v, f: "–" if v is None or pd.isna(v) else format(float(v), f)  # noqa: E731
    md = markdown_text
    lines = [f"**{suite}** — `{md(meta['model'])}` on {', '.join(map(md, meta['tasks']))} (control: "
             f"{md(meta['control_task'])}); scale `{md(meta['scale'])}`, seed {meta['seed']}, "
             f"{meta['wall_time_s'] / 60:.1f} min on {md(meta['device'])}",
             "", "| method | add. abs | add. norm | neg. target ↓ | neg. control | single-task | zero-shot "
             "| time/step (s) | peak memory (MiB) |",
             "|---|---|---|---|---|---|---|---|---|"]
    order = [*meta["methods"], *meta.get("posthoc", [])]
    rank = {m: i for i, m in enumerate(order)}
    records = sorted(table.to_dict(orient="records"), key=lambda r: (rank.get(r["method"], len(rank)), r["method"]))
    for r in records:
        lines.append(f"| {md(r['method'])} | {acc(r, 'addition_abs')} | {acc(r, 'addition_norm')} | "
                     f"{acc(r, 'negation_target')} | {acc(r, 'negation_control')} | "
                     f"{acc(r, 'single_task_acc')} | {acc(r, 'zero_shot_acc')} | "
                     f"{num(r.get('time_per_step_s'), '.3f')} | {num(r.get('peak_memory_mb'), '.0f')} |")
    if any(c.endswith("_lo") and table[c].notna().any() for c in table.columns):
        lines += ["", "Accuracies in %; [lo, hi] = 95% bootstrap interval over test examples (1,000 resamples "
                      "within each task)."]
    return "\n".join(lines)
