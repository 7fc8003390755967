"""Finding (or fine-tuning) the runs a protocol evaluates.

For each task the run is, in order of preference:

1. the run of the exact request ``FinetuneRequest(model, task, method, **overrides)`` (same run id);
2. otherwise the newest run in the store with the same model, task and method whose recorded request
   agrees with every given override (and, for sparse methods, the same sparsity);
3. otherwise it is fine-tuned now with :func:`talos_core.pipeline.run_finetune` (unless ``train=False``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

from talos_core.errors import TalosError
from talos_core.store import Run, Store

#: request fields that do not change what a run is
_IRRELEVANT = {"device", "checkpoint_every", "eval_batch_size", "options", "eval_every"}


def build_request(model: str, task: str, method: str, overrides: Mapping[str, Any] | None = None):
    """A validated :class:`~talos_core.pipeline.FinetuneRequest`; unknown override names are an error."""
    from talos_core.pipeline import FinetuneRequest

    overrides = dict(overrides or {})
    allowed = {f.name for f in fields(FinetuneRequest)} - {"model", "task", "method"}
    bad = sorted(k for k in overrides if k not in allowed)
    if bad:
        raise TalosError(f"unknown fine-tuning setting {bad[0]!r}; choose among: {', '.join(sorted(allowed))}")
    if "options" in overrides and isinstance(overrides["options"], dict):
        overrides["options"] = tuple(sorted(overrides["options"].items()))
    req = FinetuneRequest(model=model, task=task, method=method, **overrides)
    req.validate()
    return req


def _matches(run: Run, req, overrides: Mapping[str, Any]) -> bool:
    from talos_core.methods import get_method

    recorded = run.manifest.request
    for key, value in overrides.items():
        if key in _IRRELEVANT:
            continue
        if recorded.get(key) != value:
            return False
    if get_method(req.method).sparse and run.manifest.sparsity != req.sparsity:
        return False
    if dict(req.options) and run.manifest.config.get("options") != dict(req.options):
        return False
    return True


def find_run(store: Store, model: str, task: str, method: str,
             overrides: Mapping[str, Any] | None = None) -> Run | None:
    """The run for this request already in ``store`` (exact id first, then newest compatible), or ``None``."""
    req = build_request(model, task, method, overrides)
    rid = req.run_id()
    if store.has_run(rid):
        return store.get_run(rid)
    cands = [r for r in store.find_runs(model=model, task=task, method=method) if _matches(r, req, overrides or {})]
    if not cands:
        return None
    return max(cands, key=lambda r: (r.manifest.created or "", r.id))


def resolve_runs(store: Store, model: str, tasks: Sequence[str], method: str, *,
                 overrides: Mapping[str, Any] | None = None, train: bool = True,
                 progress: bool = False, force: bool = False) -> dict[str, Run]:
    """``{task: run}`` for every task, fine-tuning the missing ones (``train=True``; all with ``force``)."""
    from talos_core.pipeline import run_finetune

    out: dict[str, Run] = {}
    for task in tasks:
        run = None if force else find_run(store, model, task, method, overrides)
        if force:
            run = run_finetune(build_request(model, task, method, overrides), store, force=True, progress=progress)
        elif run is None:
            if not train:
                raise TalosError(f"store {store.root} has no {method!r} run of {model!r} on {task!r}; "
                                 f"fine-tune it first (talos finetune) or allow training")
            run = run_finetune(build_request(model, task, method, overrides), store, progress=progress)
        out[task] = run
    return out


def run_eval_mode(run: Run) -> str:
    """``"nonlinear"`` or ``"linearized"``: how this run's task vector must be evaluated."""
    mode = run.manifest.eval_mode
    if mode not in ("nonlinear", "linearized"):
        raise TalosError(f"run {run.id} has unknown eval_mode {mode!r}")
    return mode


def run_alpha_grid(runs: Mapping[str, Run], step: float = 0.05) -> tuple[list[float], float | None]:
    """The α grid for these runs (extended by 1/(1 − sparsity) for sparse methods) and the sparsity."""
    from talos_core.evaluation.arithmetic import alpha_grid

    sparse = {r.manifest.sparse_method for r in runs.values()}
    sparsities = {r.manifest.sparsity for r in runs.values()}
    if len(sparse) > 1 or len(sparsities) > 1:
        raise TalosError(f"runs disagree on sparsity ({sorted(map(str, sparsities))}); evaluate them separately")
    is_sparse, sparsity = sparse.pop(), sparsities.pop()
    return alpha_grid(sparsity, sparse=is_sparse and sparsity is not None, step=step), sparsity
