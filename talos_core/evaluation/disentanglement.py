"""Weight disentanglement error ξ(α1, α2) (Ortiz-Jimenez et al. 2023; paper Fig. "weight_disentangle",
App. "Disentanglement error heatmaps")::

    ξ(α1, α2) = Σ_{t∈{1,2}} E_{x∈D_t} [ pred(θ0 + α_t τ_t; x) ≠ pred(θ0 + α1 τ1 + α2 τ2; x) ]

computed on a grid (paper: 20 × 20 equispaced values on [-3, 3]², 2,048 random test points per task).
ξ = 0 means adding the other task's vector never changes a prediction on this task's data.

Cost: the single-vector predictions ``pred(θ0 + α_t τ_t)`` on ``D_t`` are computed ONCE per α_t
(``len(alphas1) + len(alphas2)`` passes) and reused across the grid; each grid point is one in-place
edit (``apply_vectors``) and one pass per task (heads swapped, no model copy). In linearized mode
everything follows from ``f(x, θ0)`` and two JVPs per task: no pass per grid point at all.

Resumable: with a :class:`~talos_core.evaluation.progress.Progress` (the ``disentanglement`` protocol gives it
one), the non-linear grid saves each finished row, and an interrupted grid computes only the rows it lacks: a
20 × 20 grid of MiniLM over 2 × 512 texts is hours on a laptop CPU.

Note: ξ(α1, 0) is generally NOT 0 — its task-1 term vanishes, but its task-2 term measures how much
``α1 τ1`` changes predictions on ``D_2`` (interference). ξ(0, 0) = 0 always.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from talos_core.errors import TalosError, check_int, check_range
from talos_core.evaluation.context import EvalContext, subset
from talos_core.evaluation.progress import Progress
from talos_core.inference.forward import Mode
from talos_core.tasks.base import Split
from talos_core.vectors import TaskVector

DEFAULT_GRID = 20
DEFAULT_RANGE = 3.0
DEFAULT_POINTS = 2048


def disentanglement_alphas(grid: int = DEFAULT_GRID, radius: float = DEFAULT_RANGE) -> list[float]:
    """``grid`` equispaced values on ``[-radius, radius]`` (paper: 20 on [-3, 3]; 0 is on it for odd ``grid``).

    >>> disentanglement_alphas(3, 1.0)
    [-1.0, 0.0, 1.0]
    """
    check_int("grid", grid, low=1)
    check_range("range", float(radius), 0.0, float("inf"), low_open=True)
    if grid == 1:
        return [0.0]
    return [float(round(v, 10)) for v in np.linspace(-radius, radius, grid)]


@dataclass
class DisentanglementResult:
    task1: str
    task2: str
    alphas1: list[float]
    alphas2: list[float]
    xi: np.ndarray  # [len(alphas1), len(alphas2)]
    xi_task1: np.ndarray  # the t = 1 term of the sum
    xi_task2: np.ndarray  # the t = 2 term
    points_per_task: dict[str, int]
    eval_mode: str = "nonlinear"

    def payload(self, *, model: str, method: str, search_region: Sequence[float]) -> dict:
        """The SCHEMA.md payload of ``disentanglement/<suite>__<model>__<method>__<t1>__<t2>``."""
        return {"task1": self.task1, "task2": self.task2, "alphas1": self.alphas1, "alphas2": self.alphas2,
                "xi": self.xi.tolist(), "search_region": [float(v) for v in search_region],
                "points_per_task": int(min(self.points_per_task.values())), "method": method, "model": model,
                "xi_task1": self.xi_task1.tolist(), "xi_task2": self.xi_task2.tolist(),
                "points": self.points_per_task, "eval_mode": self.eval_mode}


def disentanglement_error(ctx: EvalContext, task1: str, task2: str, tau1: TaskVector, tau2: TaskVector, *,
                          alphas1: Sequence[float], alphas2: Sequence[float] | None = None,
                          points: int = DEFAULT_POINTS, seed: int = 0, mode: Mode = "nonlinear",
                          progress: bool = False, resume: Progress | None = None) -> DisentanglementResult:
    """ξ(α1, α2) on the grid ``alphas1 × alphas2`` over ``points`` random test examples per task.

    ``resume``: where the non-linear grid keeps its finished rows (parts ``"row <i>"``); the caller clears it once
    the result is stored. The linearized grid needs no progress file (two JVPs per task, then algebra).

    >>> # res = disentanglement_error(ctx, "tweets", "drug-reviews", tau1, tau2,
    >>> #                             alphas1=disentanglement_alphas(20, 3.0), points=2048)
    >>> # res.xi.shape  -> (20, 20)
    """
    if task1 == task2:
        raise TalosError(f"disentanglement needs two different tasks, got {task1!r} twice")
    alphas1 = [float(a) for a in alphas1]
    alphas2 = alphas1 if alphas2 is None else [float(a) for a in alphas2]
    if not alphas1 or not alphas2:
        raise TalosError("the disentanglement grid is empty")
    d1 = subset(ctx.split(task1, "test"), points, seed)
    d2 = subset(ctx.split(task2, "test"), points, seed + 1)
    if mode == "linearized":
        xi1, xi2 = _grid_linearized(ctx, task1, task2, d1, d2, tau1, tau2, alphas1, alphas2)
    elif mode == "nonlinear":
        xi1, xi2 = _grid_nonlinear(ctx, task1, task2, d1, d2, tau1, tau2, alphas1, alphas2, progress, resume)
    else:
        raise TalosError(f"evaluation mode must be 'nonlinear' or 'linearized', got {mode!r}")
    return DisentanglementResult(task1, task2, alphas1, alphas2, xi1 + xi2, xi1, xi2,
                                 {task1: len(d1), task2: len(d2)}, mode)


def _grid_nonlinear(ctx: EvalContext, task1: str, task2: str, d1: Split, d2: Split, tau1: TaskVector,
                    tau2: TaskVector, alphas1: list[float], alphas2: list[float],
                    progress: bool, resume: Progress | None = None) -> tuple[np.ndarray, np.ndarray]:
    xi1 = np.zeros((len(alphas1), len(alphas2)))
    xi2 = np.zeros_like(xi1)
    saved = resume.done() if resume is not None else {}
    todo = []
    for i in range(len(alphas1)):
        row = saved.get(f"row {i}")
        if isinstance(row, dict) and len(row.get("xi_task1") or ()) == len(row.get("xi_task2") or ()) == len(alphas2):
            xi1[i], xi2[i] = row["xi_task1"], row["xi_task2"]
        else:
            todo.append(i)
    if not todo:
        return xi1, xi2
    # single-vector predictions, computed once per α and reused across the grid
    needed1 = dict.fromkeys(alphas1[i] for i in todo)
    single1 = {a: ctx.logits(task1, d1, [(tau1, a)]).argmax(-1).numpy() for a in needed1}
    single2 = {a: ctx.logits(task2, d2, [(tau2, a)]).argmax(-1).numpy() for a in dict.fromkeys(alphas2)}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=xi1.size, initial=(len(alphas1) - len(todo)) * len(alphas2), desc="disentanglement grid",
                   leave=False)
    for i in todo:
        for j, a2 in enumerate(alphas2):
            a1 = alphas1[i]
            out1, out2 = ctx.logits_many([(task1, d1), (task2, d2)], [(tau1, a1), (tau2, a2)])
            xi1[i, j] = float((out1.argmax(-1).numpy() != single1[a1]).mean())
            xi2[i, j] = float((out2.argmax(-1).numpy() != single2[a2]).mean())
            if bar is not None:
                bar.update(1)
        if resume is not None:
            resume.put(f"row {i}", {"xi_task1": xi1[i].tolist(), "xi_task2": xi2[i].tolist()})
    if bar is not None:
        bar.close()
    return xi1, xi2


def _grid_linearized(ctx: EvalContext, task1: str, task2: str, d1: Split, d2: Split, tau1: TaskVector,
                     tau2: TaskVector, alphas1: list[float], alphas2: list[float]) -> tuple[np.ndarray, np.ndarray]:
    b1, (j11, j12) = ctx.base_and_jvps(task1, d1, [tau1, tau2])
    b2, (j21, j22) = ctx.base_and_jvps(task2, d2, [tau1, tau2])
    b1, j11, j12, b2, j21, j22 = (t.numpy().astype(np.float64) for t in (b1, j11, j12, b2, j21, j22))
    xi1 = np.zeros((len(alphas1), len(alphas2)))
    xi2 = np.zeros_like(xi1)
    s1 = {a: (b1 + a * j11).argmax(-1) for a in alphas1}
    s2 = {a: (b2 + a * j22).argmax(-1) for a in alphas2}
    for i, a1 in enumerate(alphas1):
        for j, a2 in enumerate(alphas2):
            xi1[i, j] = float(((b1 + a1 * j11 + a2 * j12).argmax(-1) != s1[a1]).mean())
            xi2[i, j] = float(((b2 + a1 * j21 + a2 * j22).argmax(-1) != s2[a2]).mean())
    return xi1, xi2
