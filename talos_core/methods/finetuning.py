"""The fine-tuning methods' declarations: full fine-tuning, the parameter-efficient methods, TaLoS and its
ablation controls, and imported checkpoints, with their hyperparameters.

Their runners are in :mod:`talos_core.runners.baselines` (full fine-tuning, L-LoRA, LoTA),
:mod:`talos_core.runners.talos` (TaLoS and the mask controls) and :mod:`talos_core.runners.imported`, named here as
``"module:function"``: a runner needs the training stack, which reads the catalogue this module feeds, so it is
imported only when the method runs (:meth:`~talos_core.methods.declaration.MethodDeclaration.resolve`).

>>> SPARSITY.default, TALOS.param("sparsity") is SPARSITY
(0.9, True)
>>> SPARSITY.check(1.0)
Traceback (most recent call last):
...
talos_core.errors.TalosError: sparsity must be in [0, 1), got 1.0
"""

from __future__ import annotations

from talos_core.methods.declaration import MethodDeclaration, Param

SPARSITY = Param(
    "sparsity", float, 0.9, low=0.0, high=1.0, grid=(0.5, 0.8, 0.9, 0.95, 0.99), tag="k",
    doc="fraction of maskable entries a sparse method leaves frozen (0 = density 1: every entry trains); the "
        "paper's default 0.9, and the values per-task selection searches")
"""The sparsity of TaLoS and every sparse method (the one place its default and range are written)."""

RANK = Param("rank", int, 16, low=1, grid=(8, 16, 64), tag="r",
             doc="L-LoRA's LoRA rank (option rank; lora_alpha defaults to it)")

# TaLoS calibration (paper Algorithm 1), also LoTA's calibration examples; ``None`` takes the model's default
CALIBRATION: tuple[Param, ...] = (
    Param("rounds", int, 4, low=1, high=100, doc="calibration rounds (the paper's 4)"),
    Param("calib_samples", int, None, low=1, doc="calibration examples drawn from the validation split"),
    Param("soft_mask_value", float, None, low=0.0, high=1.0, high_open=False,
          doc="the soft mask of frozen entries while scoring (the paper's 0.01)"),
    Param("score_target", str, "logprob", choices=("logprob", "logit"), doc="what the Fisher scores differentiate"),
    Param("param_set", str, "paper", choices=("paper", "official"),
          doc="official: also train CLIP's embeddings and projection densely, as the official code"),
    Param("zero_scores", str, "exclude", choices=("exclude", "rank"),
          doc="entries with zero sensitivity: excluded (cannot learn) or ranked like any score"),
    Param("calibration_ties", str, "keep", choices=("keep", "random"),
          doc="entries tied at a round's threshold: keep all (Algorithm 1) or exactly k, seeded"),
)
"""TaLoS's calibration settings (:class:`talos_core.masks.CalibrationConfig`)."""

_T = "talos_core.runners.talos:"
_B = "talos_core.runners.baselines:"

NONLINEAR = MethodDeclaration(
    "nonlinear", "Non-linear FT", "full fine-tuning", runner=_B + "run_nonlinear",
    description="Standard full fine-tuning of every parameter of θ (Ilharco et al.)",
    reference="Ilharco et al., Editing Models with Task Arithmetic, ICLR 2023")
LINEARIZED = MethodDeclaration(
    "linearized", "Linearized FT", "full fine-tuning", eval_mode="linearized", runner=_B + "run_linearized",
    description="Linearized FT: train f(x,θ0) + (θ−θ0)ᵀ∇f(x,θ0) via a JVP (Ortiz-Jiménez et al.)",
    reference="Ortiz-Jiménez et al., Task Arithmetic in the Tangent Space, NeurIPS 2023")
LLORA = MethodDeclaration(
    "llora", "L-LoRA", "parameter-efficient", eval_mode="linearized", params=(RANK,),
    runner="talos_core.runners.lora:run_llora", option_keys=("rank", "lora_alpha"),
    option_check="talos_core.runners.lora:check_llora_options",
    description="L-LoRA: linearized LoRA on attention Q and V (option rank=16, lora_alpha=rank)",
    reference="Tang et al., Parameter-Efficient Multi-Task Model Fusion with Partial Linearization, ICLR 2024")
LOTA = MethodDeclaration(
    "lota", "LoTA", "parameter-efficient", sparse=True, calibrates=True, params=(SPARSITY, *CALIBRATION),
    runner=_B + "run_lota", option_keys=("calib_steps", "calib_data"), option_check=_B + "check_lota_options",
    description="LoTA: short dense calibration, top-k |Δθ| mask, restart from θ0, sparse FT (Panda et al.)",
    reference="Panda et al., Lottery Ticket Adaptation, 2024 (github.com/kiddyboots216/lottery-ticket-adaptation)")
TALOS = MethodDeclaration(
    "talos", "TaLoS", "parameter-efficient", sparse=True, calibrates=True, params=(SPARSITY, *CALIBRATION),
    studied=True, mask_rival="lota", runner=_T + "run_talos",
    description="TaLoS: train only the least-sensitive entries (bottom-k diagonal Fisher, R rounds)",
    reference="Iurada et al., Efficient Model Editing with Task-Localized Sparse Fine-tuning, ICLR 2025 "
              "(github.com/iurada/talos-task-arithmetic)")
RANDOM = MethodDeclaration(
    "random", "Random mask", "ablation", sparse=True, params=(SPARSITY,), runner=_T + "run_random",
    description="Control: uniformly random mask at the same sparsity")
MAGNITUDE = MethodDeclaration(
    "magnitude", "Magnitude mask", "ablation", sparse=True, params=(SPARSITY,), runner=_T + "run_magnitude",
    description="Control: bottom-k by |θ0| mask at the same sparsity")
TALOS_TOP = MethodDeclaration(
    "talos-top", "TaLoS top-k", "ablation", sparse=True, calibrates=True, params=(SPARSITY, *CALIBRATION),
    runner=_T + "run_talos_top",
    description="Ablation: TaLoS calibration but train the MOST sensitive entries (top-k)")
IMPORTED = MethodDeclaration(
    "imported", "Imported", "imported", trains=False, runner="talos_core.runners.imported:refuse",
    option_keys=("label",),
    description="a checkpoint fine-tuned elsewhere, brought in with talos import (τ = θ_ft − θ0; option label "
                "picks one source)")
