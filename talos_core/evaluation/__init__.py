"""Evaluation: task-arithmetic protocols and analyses, written into a store per ``SCHEMA.md``.

It sits above the inference layer (:mod:`talos_core.inference`: forward passes, JVPs, precision) and
the fine-tuning pipeline (:mod:`talos_core.pipeline`, which never imports it). Modules (imported
lazily, so ``import talos_core.evaluation.preview`` stays light):

* :mod:`~talos_core.evaluation.context` — :class:`EvalContext`: one model, heads, data, one-edit helpers;
* :mod:`~talos_core.evaluation.runs` — finding (or fine-tuning) the runs a protocol evaluates;
* :mod:`~talos_core.evaluation.arithmetic` — single-task, task addition, task negation;
* :mod:`~talos_core.evaluation.disentanglement` — ξ(α1, α2) grids;
* :mod:`~talos_core.evaluation.localization` — function localization matrix;
* :mod:`~talos_core.evaluation.maskstats` — layer-type classifier, mask density tables, mask IoU;
* :mod:`~talos_core.evaluation.sharing` — pruning / perturbing low-sensitivity entries;
* :mod:`~talos_core.evaluation.linearization` — fine-tuned vs post-hoc linearized accuracy;
* :mod:`~talos_core.evaluation.preview` — linearized preview cache + numpy :func:`preview_accuracy`;
* :mod:`~talos_core.evaluation.reports` — efficiency and comparison tables;
* :mod:`~talos_core.evaluation.stats` — bootstrap intervals over test examples (numpy only);
* :mod:`~talos_core.evaluation.request` — :class:`EvalRequest` / :class:`EvalOutcome`, per-model table upserts;
* :mod:`~talos_core.evaluation.posthoc` — the ``posthoc`` protocol (post-hoc methods, hyperparameters on val);
* :mod:`~talos_core.evaluation.ablation` — the ``sparsity-ablation`` protocol;
* :mod:`~talos_core.evaluation.alpha_rule` — the ``alpha-rule`` protocol (addition and negation under both α grids);
* :mod:`~talos_core.evaluation.selection` — the ``selection`` protocol (per-task hyperparameters by validation
  task negation) and :func:`selected_overrides`;
* :mod:`~talos_core.evaluation.protocols` — the protocol registry and :func:`evaluate`, used by
  ``talos evaluate`` and the suites.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "evaluate": "protocols", "PROTOCOLS": "protocols", "Protocol": "protocols", "get_protocol": "protocols",
    "EvalOutcome": "request", "EvalRequest": "request",
    "EvalContext": "context",
    "alpha_grid": "arithmetic", "task_addition": "arithmetic", "task_negation": "arithmetic",
    "single_task_table": "arithmetic", "single_task_result": "arithmetic", "finetuned_accuracies": "arithmetic",
    "bootstrap_ci": "stats",
    "disentanglement_error": "disentanglement", "disentanglement_alphas": "disentanglement",
    "function_localization": "localization",
    "layer_info": "maskstats", "classify_layer": "maskstats", "mask_table": "maskstats", "mask_iou": "maskstats",
    "mask_iou_matrix": "maskstats", "cross_method_iou": "maskstats",
    "sharing_matrix": "sharing", "low_sensitivity_mask": "sharing",
    "linearization_table": "linearization",
    "build_preview": "preview", "save_preview": "preview",
    "efficiency_table": "reports", "comparison_table": "reports",
    "select_by_negation": "selection", "selected_overrides": "selection",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"talos_core.evaluation.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'talos_core.evaluation' has no attribute {name!r}")
