"""Sentences that read a chart's own numbers (pure: no Streamlit), so a caption says what the figure beside it shows
instead of what the method should ideally do — and says so when the two differ.

>>> import numpy as np
>>> sharing_reading("prune", np.array([[0.5, 0.97], [0.96, 0.6]]))[:55]
'prune: diagonal mean 0.55, elsewhere 0.96 — lower on th'
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from talos_core.schema import method_label

#: the linear-regime table's columns as a person reads them
LINEAR_COLUMNS = {"method": "Method", "task": "Task", "finetuned_acc": "Fine-tuned accuracy",
                  "linearized_acc": "Linearized accuracy", "gap": "Gap (fine-tuned − linearized)"}


def linear_regime_table(table: pd.DataFrame) -> pd.DataFrame:
    """The ``linearization`` table for reading: method labels, the gap fine-tuned − linearized accuracy per row,
    readable headers.

    >>> linear_regime_table(pd.DataFrame({"method": ["talos"], "task": ["a"], "finetuned_acc": [0.9],
    ...                                   "linearized_acc": [0.8]})).columns.tolist()
    ['Method', 'Task', 'Fine-tuned accuracy', 'Linearized accuracy', 'Gap (fine-tuned − linearized)']
    """
    out = table[["method", "task", "finetuned_acc", "linearized_acc"]].copy()
    out["gap"] = pd.to_numeric(out["finetuned_acc"], errors="coerce") - pd.to_numeric(out["linearized_acc"],
                                                                                       errors="coerce")
    out["method"] = [method_label(str(m)) for m in out["method"]]
    return out.round(3).rename(columns=LINEAR_COLUMNS)


def linear_regime_reading(table: pd.DataFrame) -> str:
    """What the linear-regime scatter shows: each method's mean gap between fine-tuned and linearized accuracy (0 =
    on the diagonal), smallest first, and whether the points sit on the diagonal or below it.

    >>> linear_regime_reading(pd.DataFrame({"method": ["talos", "nonlinear"], "task": ["a", "a"],
    ...                                     "finetuned_acc": [0.9, 0.9], "linearized_acc": [0.85, 0.5]}))[:92]
    'Mean gap, fine-tuned − linearized accuracy: TaLoS mean gap 0.05, Non-linear FT mean gap 0.40'
    """
    gaps = (pd.to_numeric(table["finetuned_acc"], errors="coerce")
            - pd.to_numeric(table["linearized_acc"], errors="coerce")).groupby(table["method"], sort=False).mean()
    gaps = gaps.dropna().sort_values()
    if gaps.empty:
        return "No method has both accuracies here."
    parts = ", ".join(f"{method_label(str(m))} mean gap {g:.2f}" for m, g in gaps.items())
    below = "below the diagonal (the linearized model is less accurate)" if (gaps > 0.02).any() else \
        "on the diagonal"
    return (f"Mean gap, fine-tuned − linearized accuracy: {parts}. Points {below}; the smaller a method's gap, the "
            "closer its fine-tuning stays to the linear regime in which task arithmetic is provably disentangled.")


def sharing_reading(mode: str, matrix: Sequence[Sequence[float]]) -> str:
    """What a parameter-sharing map shows: its diagonal and off-diagonal means and whether the diagonal is lower (a
    task's own low-sensitivity entries matter to it and not to the others) — or not, which the sentence says."""
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] < 2:
        return f"{mode}: too few tasks to compare the diagonal with the rest."
    diag, off = float(np.nanmean(np.diag(m))), float(np.nanmean(m[~np.eye(len(m), dtype=bool)]))
    if diag < off - 0.02:
        verdict = ("lower on the diagonal: removing a task's own low-sensitivity entries costs that task more than "
                   "the others")
    else:
        verdict = ("not lower on the diagonal: here removing a task's low-sensitivity entries costs that task no "
                   "more than the others, unlike the ideal")
    return f"{mode}: diagonal mean {diag:.2f}, elsewhere {off:.2f} — {verdict}."
