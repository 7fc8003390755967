"""How many examples this process has pushed through a model, by kind of pass: the measured side of the
evaluation cost that ``talos suite --plan`` estimates (:mod:`talos_core.suites.workload`).

Kinds (:data:`KINDS`):

* ``forward`` — one example through a forward pass of an edited model ``θ0 + Σ α τ`` (in place), or of
  the model being trained (its validation accuracy);
* ``forward0`` — one example through θ0 itself, in a plain prediction (zero-shot accuracies, mostly memoized
  per process, so how many a step runs depends on what ran before it in the same process);
* ``base`` — one example's ``f(x, θ0)`` in :func:`~talos_core.inference.forward.base_and_jvps`;
* ``jvp`` — one example through one Jacobian-vector product at θ0 (its primal output comes with it:
  a linearized prediction, or one vector's term of ``base_and_jvps``);
* ``grad`` — one example's gradient in a Fisher calibration round (:func:`talos_core.fisher.fisher_scores`);
* ``cached`` — one example of an edited model's forward pass served by the logits cache instead
  (:mod:`talos_core.inference.cache`: the same edit evaluated on the same split earlier in the suite run).

Training steps are not counted here (the plan prices them per iteration). Counting costs one integer
addition per batch; the counts only grow, so a caller takes the difference of two :func:`snapshot` s:

>>> before = snapshot(); add("forward", 32); add("jvp", 8)
>>> since(before)
{'forward': 32, 'forward0': 0, 'base': 0, 'jvp': 8, 'grad': 0, 'cached': 0}
"""

from __future__ import annotations

KINDS = ("forward", "forward0", "base", "jvp", "grad", "cached")

_counts = dict.fromkeys(KINDS, 0)


def add(kind: str, n: int) -> None:
    """Count ``n`` examples of pass ``kind``."""
    _counts[kind] += int(n)


def snapshot() -> dict[str, int]:
    """The process's counts so far (a copy)."""
    return dict(_counts)


def since(before: dict[str, int]) -> dict[str, int]:
    """The counts added after ``before`` (a :func:`snapshot`)."""
    return {k: _counts[k] - before.get(k, 0) for k in KINDS}
