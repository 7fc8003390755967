"""Linearization check (paper App. "fixed_features", Fig. "linear_advantage"; Ortiz-Jimenez et al. 2023).

Compares the single-task accuracy of the fine-tuned model ``f(x, θ0 + τ)`` with that of its post-hoc
linearization around ``θ0`` (paper Eq. 4)::

    f_lin(x, θ0 + τ) = f(x, θ0) + τᵀ∇θ f(x, θ0)

Points on the bisector (equal accuracies) mean fine-tuning stayed in the linear regime. For methods
whose vectors are evaluated linearized anyway (linearized FT, L-LoRA) both columns coincide.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from talos_core.evaluation.context import EvalContext
from talos_core.inference.forward import Mode
from talos_core.vectors import TaskVector

COLUMNS = ["method", "task", "finetuned_acc", "linearized_acc"]


def linearization_table(ctx: EvalContext, vectors: Mapping[str, TaskVector], method: str,
                        modes: Mapping[str, Mode] | Mode = "nonlinear", split: str = "test") -> pd.DataFrame:
    """Table ``method, task, finetuned_acc, linearized_acc`` on ``split``.

    ``finetuned_acc`` uses the method's own evaluation mode; ``linearized_acc`` the first-order
    Taylor model (one JVP pass).
    """
    rows = []
    for task, tv in vectors.items():
        mode = modes if isinstance(modes, str) else modes[task]
        fine = ctx.accuracy(task, split, [(tv, 1.0)], mode)
        lin = fine if mode == "linearized" else ctx.accuracy(task, split, [(tv, 1.0)], "linearized")
        rows.append({"method": method, "task": task, "finetuned_acc": fine, "linearized_acc": lin})
    return pd.DataFrame(rows, columns=COLUMNS)
