"""Finding (or fine-tuning) the runs a protocol evaluates.

For each task the run is, in order of preference:

1. the run of the exact request ``FinetuneRequest.from_flat(model, task, method, **overrides)`` (same run id);
2. otherwise the newest run in the store with the same model, task and method whose recorded request
   agrees with every given override (and, for sparse methods, the same sparsity; always the same method
   options, e.g. the L-LoRA rank);
3. otherwise it is fine-tuned now with :func:`talos_core.pipeline.run_finetune` (unless ``train=False``).

A run whose manifest is here without its weights (exported as JSON, ``talos export`` without ``--artifacts``) is
not found: it cannot be evaluated, so ``run_finetune`` trains it again (and records whether the new task vector
is the one the manifest describes).

Runs of ``imported`` (checkpoints brought in with ``talos import``) are never fine-tuned here: one is found by
model, task and its ``label`` option alone (any label when none is given, an error when several labels
compete), and a missing one is one sentence saying how to import it.

``task_overrides`` (``{task: {...}}``, e.g. the per-task choices of a ``selection`` result,
:func:`talos_core.evaluation.selection.selected_overrides`) are merged over ``overrides`` for their task
(:func:`merge_overrides`), so a method can be evaluated with a different run per task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from talos_core.errors import TalosError
from talos_core.methods.declaration import ALPHA_STEP
from talos_core.store import Run, Store

#: request fields that do not change what a run is
_IRRELEVANT = {"device", "checkpoint_every", "eval_batch_size", "options", "eval_every"}


def _options_dict(options: Any) -> dict:
    if options is None:
        return {}
    if isinstance(options, Mapping):
        return dict(options)
    try:
        return dict(options)
    except (TypeError, ValueError):
        raise TalosError(f"options must be a mapping or (key, value) pairs, got {options!r}") from None


def merge_overrides(base: Mapping[str, Any] | None, extra: Mapping[str, Any] | None) -> dict:
    """``extra`` over ``base``; method ``options`` are merged key by key (a dict in the result).

    >>> merge_overrides({"steps": 5, "options": (("rank", 16), ("lora_alpha", 8))}, {"options": {"rank": 8}})
    {'steps': 5, 'options': {'rank': 8, 'lora_alpha': 8}}
    >>> merge_overrides({"steps": 5, "sparsity": 0.9}, {"sparsity": 0.5})
    {'steps': 5, 'sparsity': 0.5}
    """
    out = dict(base or {})
    for key, value in (extra or {}).items():
        out[key] = {**_options_dict(out.get("options")), **_options_dict(value)} if key == "options" else value
    return out


def build_request(model: str, task: str, method: str, overrides: Mapping[str, Any] | None = None):
    """A validated :class:`~talos_core.pipeline.FinetuneRequest`; unknown override names are an error."""
    from talos_core.pipeline import FinetuneRequest, request_fields

    overrides = request_fields(overrides or {})
    allowed = set(FinetuneRequest.flat_names()) - {"model", "task", "method"}
    bad = sorted(k for k in overrides if k not in allowed)
    if bad:
        raise TalosError(f"unknown fine-tuning setting {bad[0]!r}; choose among: {', '.join(sorted(allowed))}")
    if "options" in overrides and isinstance(overrides["options"], dict):
        overrides["options"] = tuple(sorted(overrides["options"].items()))
    req = FinetuneRequest.from_flat(model=model, task=task, method=method, **overrides)
    req.validate()
    return req


def _matches(run: Run, req, overrides: Mapping[str, Any]) -> bool:
    from talos_core.pipeline import STORED_KEYS
    from talos_core.runners import get_method

    method = get_method(req.method)
    recorded_options = run.manifest.config.get("options") or {}
    if not method.trains:  # an imported run: its label alone identifies it (any label when none is given)
        return all(str(recorded_options.get(k)) == str(v) for k, v in req.options)
    recorded = run.manifest.request
    for key, value in overrides.items():
        if key in _IRRELEVANT:
            continue
        if recorded.get(STORED_KEYS.get(key, key)) != value:
            return False
    if method.sparse and run.manifest.sparsity != req.sparsity:
        return False
    return recorded_options == dict(req.options)  # not, e.g., another L-LoRA rank


def find_run(store: Store, model: str, task: str, method: str,
             overrides: Mapping[str, Any] | None = None, *, weights: bool = True) -> Run | None:
    """The run for this request already in ``store`` (exact id first, then newest compatible), or ``None``.
    With ``weights`` (the default) a run of a method that fine-tunes counts only with its task vector here (a
    manifest alone cannot be evaluated: it is trained again); ``weights=False`` finds such a manifest too."""
    from talos_core.runners import get_method

    req = build_request(model, task, method, overrides)
    rid = req.run_id()
    usable = (lambda r: r.has_weights) if weights and get_method(method).trains else (lambda r: True)
    if store.has_run(rid) and usable(run := store.get_run(rid)):
        return _complete(run)
    cands = [r for r in store.find_runs(model=model, task=task, method=method) if _matches(r, req, overrides or {})
             and usable(r)]
    if not cands:
        prefix = rid.rsplit("__", 1)[0] + "__"  # <model>__<task>__<method>__: a corrupt run of this kind is named
        corrupt = [problem for name, problem in store.corrupt_runs() if name.startswith(prefix)]
        if corrupt:
            raise TalosError(corrupt[0])
        return None
    labels = sorted({str((r.manifest.config.get("options") or {}).get("label")) for r in cands})
    if len(labels) > 1:  # imported runs of several sources: which one is not ours to guess
        raise TalosError(f"store {store.root} holds {method!r} runs of {model!r} on {task!r} with {len(labels)} "
                         f"labels ({', '.join(labels)}); pick one with --option label=NAME")
    if len(cands) > 1 and not get_method(method).trains:  # one label, several checkpoints: equally not ours to guess
        raise TalosError(f"store {store.root} holds {len(cands)} {method!r} runs of {model!r} on {task!r} labelled "
                         f"{labels[0]!r} ({', '.join(r.id for r in cands)}), from different checkpoints; delete all "
                         f"but one, or import them again under labels of their own")
    return _complete(max(cands, key=lambda r: (r.manifest.created or "", r.id)))


def _complete(run: Run) -> Run:
    run.require_artifacts()  # a run missing its mask (or another recorded artifact) is never used as it is
    return run


def resolve_runs(store: Store, model: str, tasks: Sequence[str], method: str, *,
                 overrides: Mapping[str, Any] | None = None, train: bool = True,
                 progress: bool = False, force: bool = False,
                 task_overrides: Mapping[str, Mapping[str, Any]] | None = None,
                 weights: bool = True) -> dict[str, Run]:
    """``{task: run}`` for every task, fine-tuning the missing ones (``train=True``; all with ``force``).

    ``task_overrides[task]`` is merged over ``overrides`` for that task (:func:`merge_overrides`). ``weights=False``
    (a step that reads only the runs' manifests, such as their timings) takes a run kept as its manifest alone
    (exported as JSON, or trained on another machine) as it is, instead of training it again.
    """
    from talos_core.pipeline import not_trained, run_finetune
    from talos_core.runners import get_method

    trains = get_method(method).trains
    force = force and trains  # runs that are never fine-tuned here (imported) are only ever found
    base = overrides
    out: dict[str, Run] = {}
    for task in tasks:
        overrides = merge_overrides(base, task_overrides[task]) if task_overrides and task in task_overrides \
            else base
        run = None if force else find_run(store, model, task, method, overrides, weights=weights)
        if force:
            run = run_finetune(build_request(model, task, method, overrides), store, force=True, progress=progress)
        elif run is None:
            if not trains:
                label = _options_dict((overrides or {}).get("options")).get("label")
                raise not_trained(method, model, task, store, label)
            if not train:
                kept = find_run(store, model, task, method, overrides, weights=False)
                if kept is not None:
                    raise TalosError(f"run {kept.id} in {store.root} is a manifest without its weights (exported "
                                     f"as JSON, like cached_results/); allow training to train it again")
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


def run_sparsity(run: Run) -> float | None:
    """The sparsity that scales a run's α grid: its manifest's for sparse methods, else ``None``."""
    return run.manifest.sparsity if run.manifest.sparse_method else None


ALPHA_RULES = ("paper", "unit")
"""The α grids the ``alpha-rule`` protocol compares: ``paper`` (the paper's App. "Tuning of α":
``{0, step, …, 1}``, × ``1/(1 − k)`` for sparse methods) and ``unit`` (``{0, step, …, 1}`` for every
method, as the official code at HEAD searches; an ablation of the protocol)."""

GRID_RULES = (*ALPHA_RULES, "union")
"""Every α-grid rule a search accepts: :data:`ALPHA_RULES` and ``union`` — for sparse methods the union of the
two (the unit grid's resolution near 0 and the stretched grid's reach: no choice at the first non-zero point of a
grid stepping by ``step / (1 − k)``), for dense methods the unit grid (the ``full`` scales' rule)."""


def check_alpha_rule(value: object) -> str:
    """``value`` when it names an α-grid rule of :data:`GRID_RULES`, else one :class:`TalosError` sentence."""
    if value not in GRID_RULES:
        raise TalosError(f"alpha rule must be one of {', '.join(GRID_RULES)}, got {value!r}")
    return str(value)


def run_alpha_grid(runs: Mapping[str, Run], step: float = ALPHA_STEP,
                   rule: str = "paper") -> tuple[list[float], float | None]:
    """The α grid for these runs and their common sparsity (``None`` when mixed or not sparse).

    Paper App. "Tuning of α": ``{0, step, …, 1}``, × ``1/(1 − k)`` for sparse methods, where ``k`` is the
    sparsity of the task vector. ONE α scales every vector (``α_1 = … = α_T``); when the runs' sparsities
    differ (per-task selection), the grid is the union of the tasks' own grids — it reaches
    ``1/(1 − k_max)`` like the widest of them and keeps each task's resolution near 0 (a single grid
    ``{0, step, …, 1} / (1 − k_max)`` would step by 5 for k_max = 0.99, skipping every useful α of a
    k = 0.5 vector). Runs of sparse and dense methods cannot be mixed. ``rule="unit"``: ``{0, step, …, 1}``
    whatever the sparsity (:data:`ALPHA_RULES`); ``rule="union"``: for sparse runs the union of both
    (:data:`GRID_RULES`). The common sparsity is still returned.
    """
    check_alpha_rule(rule)
    sparse = {r.manifest.sparse_method for r in runs.values()}
    if len(sparse) > 1:
        raise TalosError("runs mix sparse and dense methods; evaluate one method at a time")
    sparsities = sorted({run_sparsity(r) for r in runs.values()}, key=lambda k: -1.0 if k is None else k)
    grids = [_rule_grid(k, step, rule) for k in sparsities]
    if len(grids) == 1:
        return grids[0], sparsities[0]
    return sorted({a for g in grids for a in g}), None


def _rule_grid(sparsity: float | None, step: float, rule: str) -> list[float]:
    """One run's α grid under ``rule`` (:data:`GRID_RULES`).

    >>> _rule_grid(0.9, 0.25, "union")
    [0.0, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]
    """
    from talos_core.evaluation.arithmetic import alpha_grid

    if sparsity is None or rule == "unit":
        return alpha_grid(step=step)
    stretched = alpha_grid(sparsity, sparse=True, step=step)
    return stretched if rule == "paper" else sorted({*alpha_grid(step=step), *stretched})


def task_alpha_grids(runs: Mapping[str, Run], step: float = ALPHA_STEP, rule: str = "paper") -> dict[str, list[float]]:
    """Each task's own α grid (paper App. "Tuning of α"; task negation chooses α per target on it)."""
    return {t: run_alpha_grid({t: r}, step, rule)[0] for t, r in runs.items()}


def run_sparsities(runs: Mapping[str, Run]) -> dict[str, float | None]:
    """``{task: sparsity}`` of sparse methods' runs (``None`` for dense ones)."""
    return {t: run_sparsity(r) for t, r in runs.items()}
