"""Suite specs: what a suite is, as data, and the registered suites.

A :class:`SuiteSpec` is data: a model, the tasks, the control task for negation, the fine-tuning
methods, the post-hoc methods (applied to ``nonlinear`` vectors), the ξ task pairs, the TaLoS
sparsity ablation, and per-*scale* sizes (:class:`Scale`; ``full`` = the documented run; ``mini`` = the down-scaled
run that CI checks for determinism and that can be produced in minutes on a laptop). :data:`SUITES` holds the
registered suites; :func:`get_suite`, :func:`with_model` (``talos suite NAME --model``) and :func:`default_scale`
read it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from talos_core.errors import TalosError, unknown
from talos_core.methods.declaration import ALPHA_STEP
from talos_core.methods.finetuning import RANK, SPARSITY


@dataclass(frozen=True)
class Scale:
    """Sizes of one suite scale (FinetuneRequest overrides + analysis sizes)."""

    steps: int
    max_train: int | None  # None: the whole split (the paper suites)
    max_val: int | None
    max_test: int | None
    calib_samples: int
    batch_size: int
    alpha_step: float = ALPHA_STEP
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

    # --- the paper's protocol (docs/protocol.md); all off by default, so older suites keep their records ---
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
    # learning rate re-checked at the step budget (a rate chosen on short runs may not hold there): per fine-tuning
    # method an ``lr check`` step right after its learning curve fine-tunes each of ``lr_check_tasks`` (empty: the
    # first ξ pair) at each of these learning rates (the method's own among them) with the overrides of its other
    # rows — the fixed ``variants`` value where it has one — and compares mean validation accuracy
    # (talos_core.evaluation.lr_check); the run at the method's own lr is the suite's own run. It reports only, no
    # other step changes, unless ``lr_choose`` (below) makes it choose the rate. () = no check
    lr_check: tuple[float, ...] = ()
    lr_check_tasks: tuple[str, ...] = ()
    # early stopping of the runs trained at the learning-curve budget (selection candidates, the rows, the lr check):
    # validation accuracy every ``curve_every`` steps, stop after this many evaluations without improvement and keep
    # the best evaluation's weights (the paper's NLP protocol: patience 5); the learning curves always run to
    # ``curve_steps``. 0 = every budgeted run trains its whole budget
    budget_patience: int = 0
    # the lr check CHOOSES each method's learning rate (one rule, the same candidates and tuning effort for every
    # method): every later step of the method trains at the rate its check found best on validation
    # (talos_core.suites.steps.checked_lr); needs ``lr_check``. False: the check reports on ``lr``
    lr_choose: bool = False
    # methods kept as a labelled row at the rate the dense baseline's (``nonlinear``'s) check chose, where that differs
    # from their own choice: the method's fixed variant (e.g. ``talos-k0.9-lr0.0001``; single, addition, negation).
    # Needs ``lr_choose``; replaces ``lr_rows`` there
    one_rate_rows: tuple[str, ...] = ()
    # α searches: the grid rule (talos_core.evaluation.runs.GRID_RULES; "union": sparse methods search the unit grid
    # and its 1/(1 − k) stretch together) and how far a choice at a grid's last point extends the grid (a multiple of
    # its largest value; 0: not at all; talos_core.evaluation.arithmetic.extend_search)
    alpha_rule: str = "paper"
    alpha_extend: float = 0.0

    # --- fine-tuning settings the paper suites pin; None/0 = the model's default (FinetuneRequest) ---
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
            from talos_core.suites.costs import arch

            found = dict(self.micro_batch_by_model).get(arch(model))
            if found is not None:
                out["micro_batch_size"] = found
        return out

    def settings_dict(self) -> dict:
        """``asdict(self)`` without the later fields left at their defaults (a suite record's fingerprint
        stays what it was for the suites that do not use them, so their stored runs still resume)."""
        out = asdict(self)
        for k, default in (("weight_decay", None), ("warmup_steps", None), ("grad_clip", None), ("schedule", None),
                           ("micro_batch_size", None), ("eval_every", None), ("early_stopping_patience", 0),
                           ("budget_patience", 0),
                           ("micro_batch_by_model", ()), ("examples", 0), ("lr_rows", ()),
                           ("batching", None), ("lr_choose", False), ("one_rate_rows", ()), ("alpha_rule", "paper"),
                           ("alpha_extend", 0.0)):
            if out[k] == default:
                out.pop(k)
        # a check that reports only adds its own steps and changes no other step: it stays out of the fingerprint,
        # so a partial run recorded before the check existed resumes (``--resume``) and runs just the check steps;
        # one that chooses sets every method's learning rate, so it is part of the fingerprint
        if not self.lr_choose:
            out.pop("lr_check")
            out.pop("lr_check_tasks")
        return out

    def lr_for(self, method: str) -> float | None:
        return dict(self.lr_by_method).get(method, self.lr)

    @property
    def lr_chosen(self) -> bool:
        """Whether each method's learning rate is the one its lr check chooses (``lr_choose`` with a check)."""
        return bool(self.lr_choose and self.lr_check)

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


# The `mini` scales: one learning rate per suite for every fine-tuning method, as the paper (vision 1e-5, NLP 1e-4):
# the rate chosen on validation for the dense baseline, non-linear FT, as the paper inherits its rate from the
# full fine-tuning protocol. Text: MiniLM's 1e-4 (tweets + wordnet-verbs, mini scale: non-linear FT .583 at 1e-4,
# .510 at 1e-3, mean val accuracy). Vision: 1e-4 (EfficientNet-Lite0, 80 steps: 0.94 / 0.95 val acc on MNIST /
# digits, about what 1e-3 reaches, with a smaller step that edits compose better — at 1e-3 negating the MNIST vector
# at α 0.25 dropped the control task from 0.72 to 0.39). The `full` scales choose each method's rate instead
# (``lr_choose``, below): at their budgets the check preferred 1e-3 for every vision method, the dense one included.
_SUITE_LR = 1e-4

# The paper's protocol (docs/protocol.md): per-task selection by validation task negation
# (App. "Hyperparameter selection") over the declared grids, and the fixed-0.9 rows kept beside them
# (the sparsity ablation and the mask pictures use them). Methods a suite does not run are skipped.
_SPARSITIES = tuple(SPARSITY.grid)
_PAPER_SELECTION = (("talos", "sparsity", _SPARSITIES), ("lota", "sparsity", _SPARSITIES),
                    ("llora", "rank", tuple(RANK.grid)))
_PAPER_VARIANTS = (("talos", "sparsity", SPARSITY.default), ("lota", "sparsity", SPARSITY.default))
# the learning rates re-checked at the learning-curve budget: the two the original choice compared (above); text on
# its tasks (tweets, wordnet-verbs: the first ξ pair), vision on MNIST and digits
_LR_CHECK = (1e-4, 1e-3)

# The `full` scales' converged protocol (docs/protocol.md): the learning curve IS the run — every fine-tuning run
# (selection candidates, rows, variants, lr check) trains up to ``steps`` with validation accuracy every 50 steps, stops
# after 5 evaluations without improvement and keeps the best evaluation's weights (the paper's NLP early stopping), so
# its manifest records the curve it converged on; vision's maximum is the paper's 2,000 iterations, text's 2,000 too
# (its 1,000-step curves were still rising for TaLoS and L-LoRA). Each method's learning rate is the one its lr check
# chooses from the same two candidates on validation; TaLoS at the dense baseline's rate stays as a labelled row. α
# searches use the unit grid together with its 1/(1 − k) stretch and extend a grid whose last point is chosen (up to
# 4× its largest value). 500 validation examples per task where the data has them, so the 95 % control constraint is
# not decided by one or two examples.
_CONVERGED = dict(steps=2000, max_val=500, eval_every=50, early_stopping_patience=5, lr_check=_LR_CHECK,
                  lr_choose=True, one_rate_rows=("talos",), alpha_rule="union", alpha_extend=4.0)

# post-hoc methods: the paper's baselines, then later merges (TSV-Merge, Iso-C, Iso-CTS, LiNeS), which the
# paper suites leave out (the paper's protocol compares the four baselines only)
_LATER_POSTHOC = ("tsv", "iso_c", "iso_cts", "lines")
_POSTHOC = ("ties", "dare", "breadcrumbs", "tall_consensus", *_LATER_POSTHOC)

register_suite(SuiteSpec(
    "text", "minilm-l6",
    ("tweets", "wordnet-nouns", "wordnet-verbs", "drug-reviews", "fortune-topics"), "fortune-langs",
    ("talos", "nonlinear", "linearized", "llora", "lota"), _POSTHOC,
    (("tweets", "wordnet-verbs"), ("wordnet-nouns", "fortune-topics")),
    {
        # 400 test examples and 128 ξ points per task: the shipping floors, which halve the evaluation of a CPU run
        # (--plan on the 2-core EPYC, with token-order evaluation: 56 → 27 CPU-hours); fp32 evaluation on every
        # device, so a run resumed on another machine (an AMX CPU, a GPU) keeps its fingerprint
        "full": Scale(max_train=20000, max_test=400, calib_samples=128, batch_size=32,
                      alpha_step=ALPHA_STEP, xi_grid=20, xi_points=128, preview_points=256, sharing_samples=64,
                      batching="length", eval_precision="fp32",
                      selection=_PAPER_SELECTION, variants=_PAPER_VARIANTS, examples=24, **_CONVERGED),
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
        "full": Scale(max_train=20000, max_test=1000, calib_samples=128, batch_size=32,
                      alpha_step=ALPHA_STEP, xi_grid=20, xi_points=512, preview_points=256, sharing_samples=64,
                      eval_precision="fp32", selection=_PAPER_SELECTION, variants=_PAPER_VARIANTS, examples=24,
                      lr_check_tasks=("mnist", "digits"), **_CONVERGED),
        "mini": Scale(steps=80, max_train=2560, max_val=64, max_test=200, calib_samples=32, batch_size=32,
                      alpha_step=ALPHA_STEP, xi_grid=6, xi_points=32, preview_points=64, sharing_samples=16,
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
     # the `full` scales' converged protocol in seconds (tests): runs to a maximum with validation every 2 steps and
     # early stopping, the lr chosen by each method's check, per-task selection, the fixed-0.9 row and TaLoS at the
     # dense baseline's rate, the union α grid with extension
     "paper": Scale(steps=8, max_train=64, max_val=16, max_test=24, calib_samples=8, batch_size=8, alpha_step=0.5,
                    xi_grid=3, xi_points=8, preview_points=8, sharing_samples=8, posthoc_points=1, ablation=(0.5, 0.9),
                    eval_precision="fp32", eval_every=2, early_stopping_patience=2,
                    selection=(("talos", "sparsity", (0.5, 0.9)),), variants=(("talos", "sparsity", SPARSITY.default),),
                    lr_check=(1e-3, 3e-2), lr_choose=True, one_rate_rows=("talos",), alpha_rule="union",
                    alpha_extend=4.0)},
    "tiny random-init text encoder (tests only)"))


# The paper's own settings (docs/scale-out.md), App. "Implementation Details" of the paper and the
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
_PAPER_COMMON = dict(max_train=None, max_val=None, max_test=None, alpha_step=ALPHA_STEP, xi_grid=20, xi_points=2048,
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


def default_scale(name: str) -> str:
    """The scale a suite runs at when none is asked for: ``full`` (the documented one), else its first scale.

    >>> default_scale("text"), default_scale("tiny")
    ('full', 'mini')
    """
    scales = list(get_suite(name).scales)
    return "full" if "full" in scales else scales[0]
