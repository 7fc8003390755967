"""Function localization matrix (paper Fig. "heatmaps_alignment"; Eq. func_loc_constraint in practice).

Row t is the model fine-tuned on task t, ``θ0 + τ_t``; column t′ is its accuracy on task t′ divided by
the pre-trained model's accuracy on t′::

    L[t, t′] = Acc[f(D_t′, θ0 + τ_t)] / Acc[f(D_t′, θ0)]

Off-diagonal entries near 1 mean ``τ_t`` leaves other tasks' behaviour untouched (its function is
localized on ``D_t``); the diagonal is the single-task gain over zero-shot. Each evaluated task uses its
own frozen head; a row costs one in-place edit and one pass per column (heads swapped).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from talos_core.errors import TalosError
from talos_core.evaluation.context import EvalContext
from talos_core.inference.forward import Mode
from talos_core.vectors import TaskVector


@dataclass
class LocalizationResult:
    tasks: list[str]  # columns (evaluated tasks)
    rows: list[str]  # fine-tuned tasks (= tasks unless eval_tasks was given)
    accuracy: np.ndarray  # [rows = fine-tuned on, cols = evaluated on]
    zero_shot: np.ndarray  # per column
    split: str = "test"

    @property
    def matrix(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.zero_shot[None, :] > 0, self.accuracy / self.zero_shot[None, :], np.nan)

    def payload(self, **extra) -> dict:
        """The SCHEMA.md payload of ``localization/<suite>__<model>__<method>``."""
        return {"tasks": self.tasks, "row_tasks": self.rows, "matrix": self.matrix.tolist(),
                "accuracy": self.accuracy.tolist(),
                "zero_shot": self.zero_shot.tolist(), "split": self.split, **extra}


def function_localization(ctx: EvalContext, vectors: Mapping[str, TaskVector],
                          modes: Mapping[str, Mode] | Mode = "nonlinear", *,
                          eval_tasks: Sequence[str] | None = None, split: str = "test") -> LocalizationResult:
    """Accuracy of every ``θ0 + τ_t`` on every task, normalized by zero-shot accuracy per column.

    With ``eval_tasks`` (default: the vectors' tasks) the columns can include tasks without a vector.
    """
    rows = list(vectors)
    cols = list(eval_tasks) if eval_tasks is not None else rows
    if not rows:
        raise TalosError("function localization needs at least one task vector")
    acc = np.zeros((len(rows), len(cols)))
    for i, t in enumerate(rows):
        mode = modes if isinstance(modes, str) else modes[t]
        acc[i] = ctx.accuracies([(c, split) for c in cols], [(vectors[t], 1.0)], mode)
    zs = np.array([ctx.zero_shot(c, split) for c in cols])
    return LocalizationResult(cols, rows, acc, zs, split)
