"""Per-example predictions on a few fixed test examples per task (SCHEMA.md kind ``examples``).

The dashboard's galleries show the inputs behind the accuracies: for ≤ 24 fixed test examples per task
(:func:`choose_examples`: deterministic, classes taken in turn) this stores the predicted class of

* θ0 (zero-shot),
* θ0 + α Σ_t τ_t at every point α of the addition grid (on each task's examples),
* θ0 − α τ_t at every point of target t's negation grid (on t's and on the control task's examples),
* both grids with the teaching range added: every 0.05 from 0 to 2 (:func:`teaching_alphas`), so a gallery shows the
  exact model wherever a class stops a slider there,
* θ0 + τ_t on every task's examples (the cells of the function-localization matrix),

plus the linearized terms ``f(x, θ0)`` and ``τ_tᵀ∇f(x, θ0)`` of those examples (a preview between grid
points), the true labels, class names and a display form (a text snippet ≤ 120 characters, or a ``uint8``
thumbnail ≤ 48 px for images). Arrays go to ``results/examples/<name>.safetensors``, the rest to the JSON
meta beside it; :func:`talos_core.result_arrays.load_examples` reads them without torch.

Two ways to compute them: the ``examples`` protocol (``talos evaluate examples``, the suite step when a
scale sets ``examples``) resolves runs like the other protocols; :func:`examples_from_store`
(``talos examples --store DIR``) recomputes them afterwards for every method whose ``addition`` and
``negation`` results are stored with their run ids, on exactly those runs and α grids.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from talos_core.errors import TalosError, check_int
from talos_core.result_arrays import EXAMPLES_FORMAT, MAX_EXAMPLES, SNIPPET_CHARS, ExampleSet, examples_key
from talos_core.schema import examples_paths

THUMB_SIDE = 48
"""The longest side of a stored thumbnail (smaller images are kept at their size)."""

TEACHING_ALPHA_MAX = 2.0
TEACHING_ALPHA_STEP = 0.05
"""The teaching range: where a class moves the α sliders (0–2). Exact predictions are stored there every 0.05 besides
the protocol's own grid (:func:`teaching_alphas`), so the galleries stay exact wherever a slider stops in it."""


# --------------------------------------------------------------------------------------------
# choosing and showing examples
# --------------------------------------------------------------------------------------------
def choose_examples(labels: Sequence[int] | np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """``min(n, len(labels))`` positions, sorted: a seeded shuffle, then classes taken in turn (each class's
    examples in shuffled order), so a small gallery shows many classes.

    >>> choose_examples([0, 0, 0, 0, 1, 1], 4, seed=0).tolist()
    [2, 3, 4, 5]
    >>> len(choose_examples([0, 1], 24))
    2
    """
    labels = np.asarray(labels)
    check_int("examples per task", n, low=1, high=MAX_EXAMPLES, numpy=True,
              what=f"an integer from 1 to {MAX_EXAMPLES}")
    order = np.random.default_rng(seed).permutation(len(labels))
    queues = {c: [int(i) for i in order if labels[i] == c] for c in sorted(set(labels.tolist()))}
    picked: list[int] = []
    while len(picked) < min(n, len(labels)):
        for c in list(queues):
            if queues[c] and len(picked) < n:
                picked.append(queues[c].pop(0))
    return np.sort(np.asarray(picked, dtype=np.int64))


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """``text`` with whitespace collapsed, cut to ``limit`` characters (ending in ``…`` when cut).

    >>> snippet("a  b\\n c"), len(snippet("x" * 500))
    ('a b c', 120)
    """
    flat = re.sub(r"\s+", " ", str(text)).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def thumbnails(images: np.ndarray, side: int = THUMB_SIDE) -> np.ndarray:
    """``uint8 [n, h, w, 3]`` thumbnails of grey ``[n, H, W]`` or RGB ``[n, H, W, 3]`` images, the longer side
    at most ``side`` (box filter; never enlarged).

    >>> thumbnails(np.zeros((2, 96, 64), dtype=np.uint8)).shape
    (2, 48, 32, 3)
    """
    from PIL import Image

    arr = np.asarray(images)
    if arr.ndim == 3:
        arr = np.repeat(arr[..., None], 3, axis=-1)
    if arr.ndim != 4 or arr.shape[-1] not in (1, 3):
        raise TalosError(f"image examples must be [n, H, W] or [n, H, W, 3] arrays, got shape {arr.shape}")
    if arr.shape[-1] == 1:
        arr = np.repeat(arr, 3, axis=-1)
    if arr.dtype != np.uint8:
        arr = np.clip(arr, 0, 255).astype(np.uint8)
    h, w = arr.shape[1:3]
    scale = min(1.0, side / max(h, w))
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    if scale == 1.0:
        return np.ascontiguousarray(arr)
    return np.stack([np.asarray(Image.fromarray(a).resize(size, Image.BOX)) for a in arr]).astype(np.uint8)


def teaching_alphas(grid: Sequence[float], hi: float = TEACHING_ALPHA_MAX,
                    step: float = TEACHING_ALPHA_STEP) -> list[float]:
    """``grid`` with the points ``0, step, 2·step, … ≤ hi`` that lie inside it added (sorted, each once): the α's the
    examples are evaluated at exactly. ``hi = 0`` keeps ``grid`` as it is.

    >>> teaching_alphas([0.0, 0.5, 1.0], hi=0.2, step=0.1)
    [0.0, 0.1, 0.2, 0.5, 1.0]
    >>> teaching_alphas([0.0, 5.0], hi=0.0)
    [0.0, 5.0]
    """
    g = sorted({float(a) for a in grid})
    if not g or hi <= 0:
        return g
    top = min(hi, g[-1])
    dense = [round(k * step, 10) for k in range(int(math.floor(top / step + 1e-9)) + 1)]
    return sorted(g + [a for a in dense if a >= g[0] - 1e-12 and not any(abs(a - x) <= 1e-9 for x in g)])


# --------------------------------------------------------------------------------------------
# computing
# --------------------------------------------------------------------------------------------
@dataclass
class ExamplesResult:
    """What :func:`compute_examples` measured: the JSON meta and the arrays of SCHEMA.md ``examples``."""

    meta: dict
    arrays: dict[str, np.ndarray]


def _argmax(logits) -> np.ndarray:
    return np.asarray(logits.argmax(-1)).astype(np.int32)


def compute_examples(ctx, vectors: Mapping, modes: Mapping[str, str], addition_alphas: Sequence[float],
                     negation_alphas: Mapping[str, Sequence[float]], control_task: str | None, *,
                     points: int = MAX_EXAMPLES, seed: int = 0,
                     progress: Callable[[str], None] | None = None) -> ExamplesResult:
    """Predictions of θ0, of task addition over ``addition_alphas``, of each target's negation over
    ``negation_alphas[target]`` (target and ``control_task`` examples) and of every single-task model, on
    :func:`choose_examples` of each task's test split (seed ``seed + k`` for the k-th evaluated task).

    ``ctx`` is an :class:`~talos_core.evaluation.context.EvalContext` over the tasks (and the control task);
    ``modes[t]`` is run t's evaluation mode (addition and negation use the common one). Cost: one forward of
    ≤ ``points`` examples per (α, task) and one JVP per (task, vector).
    """
    from talos_core.vectors import sum_vectors

    tasks = list(vectors)
    if not tasks:
        raise TalosError("per-example predictions need at least one task vector")
    evals = tasks + ([control_task] if control_task and control_task not in tasks else [])
    if control_task in tasks:
        raise TalosError(f"control task {control_task!r} is also a negation target; pick another control task")
    mode_set = {modes[t] for t in tasks}
    if len(mode_set) > 1:
        raise TalosError(f"runs mix evaluation modes {sorted(mode_set)}; evaluate one method at a time")
    mode = mode_set.pop()
    say = progress or (lambda _msg: None)

    parts, meta_idx, labels, classes, modality, snips = {}, {}, {}, {}, {}, {}
    arrays: dict[str, np.ndarray] = {}
    for k, e in enumerate(evals):
        split = ctx.split(e, "test")
        idx = choose_examples(split.labels, points, seed + k)
        part = split.take(idx)
        parts[e] = part
        meta_idx[e], labels[e] = idx.tolist(), np.asarray(part.labels).astype(int).tolist()
        spec = ctx.spec(e)
        classes[e], modality[e] = list(spec.classes), spec.modality
        if spec.modality == "image":
            arrays[examples_key("thumb", e)] = thumbnails(np.asarray(part.inputs))
        else:
            snips[e] = [snippet(x) for x in part.inputs]

    say("zero-shot")
    for e, lg in zip(evals, ctx.logits_many([(e, parts[e]) for e in evals], (), "nonlinear")):
        arrays[examples_key("pred", "zero_shot", e)] = _argmax(lg)
    say("single-task models")
    for t in tasks:
        outs = ctx.logits_many([(e, parts[e]) for e in tasks], [(vectors[t], 1.0)], modes[t])
        for e, lg in zip(tasks, outs):
            arrays[examples_key("pred", "single", t, e)] = _argmax(lg)
    say(f"addition over {len(addition_alphas)} alphas")
    merged = sum_vectors([vectors[t] for t in tasks])
    rows: dict[str, list[np.ndarray]] = {t: [] for t in tasks}
    for a in addition_alphas:
        outs = ctx.logits_many([(t, parts[t]) for t in tasks], [(merged, float(a))] if a else (), mode)
        for t, lg in zip(tasks, outs):
            rows[t].append(_argmax(lg))
    for t in tasks:
        arrays[examples_key("pred", "addition", t)] = np.stack(rows[t]).astype(np.int32)
    say("negation")
    for t in tasks:
        on = [t] + ([control_task] if control_task else [])
        neg: dict[str, list[np.ndarray]] = {e: [] for e in on}
        for a in negation_alphas[t]:
            outs = ctx.logits_many([(e, parts[e]) for e in on], [(vectors[t], -float(a))] if a else (), mode)
            for e, lg in zip(on, outs):
                neg[e].append(_argmax(lg))
        for e in on:
            arrays[examples_key("pred", "negation", t, e)] = np.stack(neg[e]).astype(np.int32)
    say("linearized terms")
    for e in evals:
        base, jvps = ctx.base_and_jvps(e, parts[e], [vectors[t] for t in tasks])
        arrays[examples_key("base", e)] = np.ascontiguousarray(base.numpy(), dtype=np.float32)
        for t, jv in zip(tasks, jvps):
            arrays[examples_key("jvp", e, t)] = np.ascontiguousarray(jv.numpy(), dtype=np.float32)

    meta = {"tasks": tasks, "control_task": control_task, "eval_tasks": evals, "split": "test", "seed": seed,
            "points": points, "n": {e: len(labels[e]) for e in evals}, "indices": meta_idx, "labels": labels,
            "classes": classes, "modality": modality, "snippets": snips,
            "addition_alphas": [float(a) for a in addition_alphas],
            "negation_alphas": {t: [float(a) for a in negation_alphas[t]] for t in tasks}, "eval_mode": mode}
    return ExamplesResult(meta, arrays)


def save_examples(store, name: str, result: ExamplesResult, **extra) -> None:
    """Write the arrays (atomically, first), then the JSON meta, into ``store`` (a :class:`~talos_core.store.Store`)."""
    from safetensors.numpy import save

    from talos_core.atomic import atomic_write_bytes

    _meta_path, arr_path = examples_paths(store.root, name)
    store.ensure()
    arr_path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {k: np.ascontiguousarray(v) for k, v in sorted(result.arrays.items())}
    atomic_write_bytes(arr_path, save(arrays, metadata={"format": EXAMPLES_FORMAT}))
    store.write_result("examples", name, {**result.meta, "arrays": arr_path.name, **extra})


# --------------------------------------------------------------------------------------------
# afterwards, from a store's addition and negation results
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StoredTarget:
    """One method's stored addition + negation results: the runs and α grids to recompute examples on."""

    suite: str
    model: str
    method: str
    runs: dict[str, str]  # {task: run id}
    addition_alphas: list[float]
    negation_alphas: dict[str, list[float]]
    control_task: str | None
    eval_precision: str | None


def stored_targets(store, suites: Sequence[str] | None = None,
                   methods: Sequence[str] | None = None) -> list[StoredTarget]:
    """Every fine-tuning method (variants included, post-hoc merges excluded) whose ``addition`` result records
    its runs, with the negation grids of its ``negation`` result (same name) when there is one."""
    from talos_core.schema import base_method_of, method_info, parse_result_name

    out = []
    for name in store.results("addition"):
        f = parse_result_name("addition", name)
        if f is None or (suites and f["suite"] not in suites) or (methods and f["method"] not in methods):
            continue
        base = base_method_of(f["method"])
        if base is None or method_info(base).kind == "posthoc":
            continue
        add = store.read_result("addition", name)
        runs = add.get("runs")
        if not isinstance(runs, dict) or not runs or "alpha_grid" not in add:
            continue
        neg = store.read_result("negation", name) if name in store.results("negation") else {}
        control = neg.get("control_task")
        grids = neg.get("alpha_grids") or {t: neg.get("alpha_grid") or [] for t in runs}
        suite_meta = store.read_result("suite", f["suite"]) if f["suite"] in store.results("suite") else {}
        out.append(StoredTarget(f["suite"], add.get("model") or f["model"], f["method"], dict(runs),
                                [float(a) for a in add["alpha_grid"]],
                                {t: [float(a) for a in grids.get(t) or []] for t in runs}, control,
                                suite_meta.get("eval_precision")))
    return out


def examples_from_store(store, *, suites: Sequence[str] | None = None, methods: Sequence[str] | None = None,
                        points: int = MAX_EXAMPLES, seed: int = 0, device: str = "auto",
                        log: Callable[[str], None] = print) -> list[tuple[str, str]]:
    """Compute and write SCHEMA.md ``examples`` for every :func:`stored_targets` entry (``talos examples``).

    Each uses the runs its addition result names (their task vectors must be in the store: an exported store
    such as the shipped ``cached_results/`` keeps manifests only) and the stored α grids with the teaching range's
    dense points (:func:`teaching_alphas`), at the suite's evaluation precision. Returns the ``(kind, name)``
    written.
    """
    from talos_core.evaluation.context import EvalContext
    from talos_core.evaluation.request import eval_limits
    from talos_core.evaluation.runs import run_eval_mode
    from talos_core.inference.precision import eval_precision
    from talos_core.schema import result_name

    choose_examples([0], points)  # checks points before any work
    targets = stored_targets(store, suites, methods)
    if not targets:
        raise TalosError(f"store {store.root} has no addition results with run ids"
                         + (f" for suite(s) {', '.join(suites)}" if suites else "")
                         + (f" and method(s) {', '.join(methods)}" if methods else "")
                         + "; run a suite (talos suite) or talos evaluate addition first")
    written = []
    for tg in targets:
        runs = {t: store.get_run(rid) for t, rid in tg.runs.items()}
        vectors = {t: r.task_vector() for t, r in runs.items()}  # a missing task vector is one sentence
        modes = {t: run_eval_mode(r) for t, r in runs.items()}
        lim = eval_limits({}, runs)
        neg = {t: teaching_alphas(tg.negation_alphas.get(t) or []) for t in runs}
        control = tg.control_task if all(neg.values()) else None
        if control is None:
            neg = {t: [0.0] for t in runs}
        with eval_precision(tg.eval_precision):
            ctx = EvalContext.for_model(tg.model, [*runs, *([control] if control else [])], max_val=lim["max_val"],
                                        max_test=lim["max_test"], device=device)
            res = compute_examples(ctx, vectors, modes, teaching_alphas(tg.addition_alphas), neg, control,
                                   points=points, seed=seed)
        name = result_name(tg.suite, tg.model, tg.method)
        save_examples(store, name, res, method=tg.method, model=tg.model, suite=tg.suite, runs=tg.runs,
                      eval_precision=tg.eval_precision)
        log(f"examples {name}: {len(runs)} tasks x {min(res.meta['n'].values())}+ examples, "
            f"{len(tg.addition_alphas)} addition alphas" + (f", control {control}" if control else ""))
        written.append(("examples", name))
    return written


# --------------------------------------------------------------------------------------------
# on demand: the exact model at any α, for one gallery
# --------------------------------------------------------------------------------------------
def vectors_missing(store, ex: ExampleSet) -> str | None:
    """Why the exact model cannot be evaluated on demand for ``ex`` (one sentence), or ``None`` when it can: the
    examples must name their runs and model, and every run must keep its task vector in ``store`` (an exported store
    such as the shipped ``cached_results/`` keeps manifests only)."""
    runs, model = ex.meta.get("runs"), ex.meta.get("model")
    if not isinstance(runs, dict) or not runs or not isinstance(model, str):
        return "these examples do not record the runs and model they were computed with"
    for task, rid in runs.items():
        if not (store.run_path(str(rid)) / "task_vector.safetensors").is_file():
            return (f"the store keeps no task vector of run {rid} ({task}): it holds the runs' manifests only, so "
                    f"only the stored α's are exact")
    return None


def exact_context(store, ex: ExampleSet, *, device: str = "auto"):
    """``(context, vectors, mode)`` for :func:`exact_predictions`: an evaluation context over the examples' tasks with
    the data limits their runs were evaluated with, at the precision they were computed in, and the runs' task
    vectors. Loading the model takes seconds: callers keep it (the dashboard caches it per store and result)."""
    from talos_core.evaluation.context import EvalContext
    from talos_core.evaluation.request import common_mode, eval_limits

    problem = vectors_missing(store, ex)
    if problem:
        raise TalosError(problem)
    runs = {t: store.get_run(str(rid)) for t, rid in ex.meta["runs"].items()}
    lim = eval_limits({}, runs)
    ctx = EvalContext.for_model(ex.meta["model"], ex.eval_tasks, max_val=lim["max_val"], max_test=lim["max_test"],
                                device=device)
    return ctx, {t: r.task_vector() for t, r in runs.items()}, common_mode(runs)


def exact_predictions(ctx, vectors: Mapping, mode: str, ex: ExampleSet, task: str,
                      alphas: Mapping[str, float]) -> np.ndarray:
    """Predictions of the exact edited model ``θ0 + Σ_t α_t τ_t`` (a negated task: a negative α) on ``task``'s fixed
    examples, evaluated now (:func:`exact_context` gives ``ctx``, ``vectors`` and ``mode``). The examples are found
    again by their positions in the test split; a split that no longer gives their labels is one sentence."""
    from talos_core.inference.precision import eval_precision

    idx = np.asarray(ex.meta["indices"][task], dtype=np.int64)
    with eval_precision(ex.meta.get("eval_precision")):
        split = ctx.split(task, "test")
        if len(split.labels) <= int(idx.max(initial=-1)):
            raise TalosError(f"the test split of {task!r} is smaller than when these examples were chosen; "
                             f"recompute them (talos examples)")
        part = split.take(idx)
        if np.asarray(part.labels).astype(int).tolist() != ex.labels(task).tolist():
            raise TalosError(f"the test split of {task!r} no longer holds these examples at their positions; "
                             f"recompute them (talos examples)")
        edits = [(vectors[t], float(a)) for t, a in alphas.items() if t in vectors and float(a) != 0.0]
        (logits,) = ctx.logits_many([(task, part)], edits, mode)
    return _argmax(logits)
