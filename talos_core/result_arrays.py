"""Results stored as a meta JSON plus a safetensors arrays file, read with numpy only (no torch):

* the **linearized preview** (SCHEMA.md kind ``preview``, paper Eq. lin_net_addition): :class:`PreviewCache`,
  :func:`load_preview`, :func:`preview_logits`, :func:`preview_accuracy`;
* the **per-example predictions** (kind ``examples``): :class:`ExampleSet`, :func:`load_examples`.

Their names, paths and JSON reader are :mod:`talos_core.schema`'s (:func:`~talos_core.schema.preview_paths`,
:func:`~talos_core.schema.read_result`); this module adds the arrays. Importing it never imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from talos_core.errors import TalosError
from talos_core.schema import CorruptResult, examples_paths, preview_paths, read_result, require_fields

# --------------------------------------------------------------------------------------------
# the linearized preview (paper Eq. lin_net_addition), numpy only
# --------------------------------------------------------------------------------------------
PREVIEW_FORMAT = "talos-preview/1"
"""``format`` in a preview's safetensors metadata."""


def array_key_base(eval_task: str) -> str:
    """Key of ``f(x, θ0)`` on ``eval_task`` in a preview's arrays (``[N, C]`` logits)."""
    return f"base::{eval_task}"


def array_key_jvp(eval_task: str, vector_task: str) -> str:
    """Key of ``τ_tᵀ∇θ f(x, θ0)`` for vector ``vector_task`` on ``eval_task`` (``[N, C]``)."""
    return f"jvp::{eval_task}::{vector_task}"


@dataclass
class PreviewCache:
    """Cached ``f(x, θ0)`` and ``τ_tᵀ∇f(x, θ0)`` logits; ``jvp[(eval_task, vector_task)]``.

    For the linearized model ``f_lin(x, θ0 + Σ_t α_t τ_t) = f(x, θ0) + Σ_t α_t · τ_tᵀ∇θ f(x, θ0)``, so
    every α mix is a weighted sum of these arrays (:func:`preview_logits`).

    >>> cache = PreviewCache(tasks=["a"], eval_tasks=["a"], labels={"a": np.array([0, 1])},
    ...                      base={"a": np.array([[1.0, 0.0], [1.0, 0.0]])},
    ...                      jvp={("a", "a"): np.array([[0.0, 0.0], [-2.0, 2.0]])})
    >>> preview_accuracy(cache, {"a": 0.0}), preview_accuracy(cache, {"a": 1.0})
    ({'a': 0.5}, {'a': 1.0})
    """

    tasks: list[str]  # task vectors (the α's)
    eval_tasks: list[str]
    labels: dict[str, np.ndarray]
    base: dict[str, np.ndarray]
    jvp: dict[tuple[str, str], np.ndarray]
    meta: dict = field(default_factory=dict)
    _stacks: dict = field(default_factory=dict, repr=False)

    def stack(self, eval_task: str) -> np.ndarray:
        """``[T, N, C]`` jvps of every vector on ``eval_task`` (built once, then reused)."""
        if eval_task not in self._stacks:
            self._stacks[eval_task] = np.stack([self.jvp[(eval_task, t)] for t in self.tasks]) if self.tasks \
                else np.zeros((0, *self.base[eval_task].shape), dtype=self.base[eval_task].dtype)
        return self._stacks[eval_task]


def _check_alphas(cache: PreviewCache, alphas: Mapping[str, float]) -> np.ndarray:
    unknown_tasks = [t for t in alphas if t not in cache.tasks]
    if unknown_tasks:
        raise TalosError(f"no cached task vector for {unknown_tasks[0]!r}; choose among: {', '.join(cache.tasks)}")
    return np.array([float(alphas.get(t, 0.0)) for t in cache.tasks], dtype=np.float32)


def preview_logits(cache: PreviewCache, alphas: Mapping[str, float], eval_task: str) -> np.ndarray:
    """``base + Σ_t α_t jvp_t`` on ``eval_task`` (tasks missing from ``alphas`` get α = 0).

    Summed elementwise in a fixed order, ``base + (((α_1 jvp_1) + α_2 jvp_2) + …)`` with every product and sum
    rounded to the arrays' dtype (α in float32), never through BLAS (whose blocking and FMA use differ between
    machines): the same logits bit for bit on every machine and in the dashboard's in-browser preview
    (``dashboard/live_preview.js``), so both count the same correct predictions.
    """
    a = _check_alphas(cache, alphas)
    if eval_task not in cache.base:
        raise TalosError(f"no cached evaluation task {eval_task!r}; choose among: {', '.join(cache.eval_tasks)}")
    base = cache.base[eval_task]
    total = None
    for t, alpha in zip(cache.tasks, a):
        term = alpha * cache.jvp[(eval_task, t)]
        total = term if total is None else total + term
    return base.copy() if total is None else base + total


def preview_accuracy(cache: PreviewCache, alphas: Mapping[str, float],
                     eval_tasks: Sequence[str] | None = None) -> dict[str, float]:
    """Accuracy of the linearized ``θ0 + Σ α_t τ_t`` on each cached evaluation task (pure numpy).

    ``acc_e = mean_x [argmax_c (base_e + Σ_t α_t jvp_{e,t})(x)_c == y]``; use negative α for negation.
    """
    out = {}
    for e in (eval_tasks if eval_tasks is not None else cache.eval_tasks):
        logits = preview_logits(cache, alphas, e)
        labels = cache.labels[e]
        out[e] = float((logits.argmax(-1) == labels).mean()) if len(labels) else float("nan")
    return out


def _str_list(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _load_arrays(arr_path: Path, kind: str) -> dict:
    """The tensors of a result's safetensors arrays file; a damaged file is one :class:`CorruptResult` sentence."""
    from safetensors.numpy import load_file

    try:
        return load_file(str(arr_path))
    except Exception as exc:  # safetensors raises its own error types for bad headers
        raise CorruptResult(f"the {kind} arrays file {arr_path} is corrupt ({exc}); delete and recompute it") from None


def _arrays_file(root: str | Path, meta_path: Path, meta: Mapping, default: Path, what: str, name: str) -> Path:
    """The arrays file a ``preview`` / ``examples`` meta names: a file in the meta's folder, inside the store."""
    arrays_name = meta.get("arrays", default.name)
    if not isinstance(arrays_name, str) or arrays_name in ("", ".", "..") or "/" in arrays_name \
            or "\\" in arrays_name:
        raise CorruptResult(f"the {what} meta file {meta_path} names arrays {arrays_name!r}, which is not a file "
                            f"in its folder {meta_path.parent}; recompute the {what}")
    arr_path = meta_path.with_name(arrays_name)
    try:  # a symlink (or a symlinked folder) must not lead a crafted store's arrays outside the store
        inside = arr_path.resolve().is_relative_to(Path(root).resolve())
    except (OSError, RuntimeError):
        inside = False
    if not inside:
        raise CorruptResult(f"the {what} meta file {meta_path} names arrays {arrays_name!r}, which leads outside "
                            f"the store {root}; recompute the {what}")
    if not arr_path.is_file():
        raise CorruptResult(f"the {what} {name!r} is incomplete: its arrays file {arr_path} is missing; "
                            f"recompute the {what}")
    return arr_path


def load_preview(root: str | Path, name: str) -> PreviewCache:
    """Read the preview ``name`` (meta JSON + safetensors arrays; numpy only, no torch).

    The one reader of SCHEMA.md's ``preview`` kind. A missing meta file is :class:`MissingResult`; a
    meta or arrays file that is garbled or incomplete (an array, a label list or a field missing, shapes
    that disagree, an ``arrays`` name outside the preview folder, or one whose real path, symlinks
    followed, lies outside the store) is :class:`CorruptResult`, one sentence naming the file. Nothing is filled in.
    """

    meta_path, default_arrays = preview_paths(root, name)
    meta = read_result(root, "preview", name)
    require_fields(meta, "preview", name)
    tasks, evals = _str_list(meta["tasks"]), _str_list(meta["eval_tasks"])
    if tasks is None or evals is None or not isinstance(meta["labels"], dict):
        raise CorruptResult(f"the preview meta file {meta_path} has malformed tasks, eval_tasks or labels "
                            f"(lists of task names and a mapping expected); recompute the preview")
    arr_path = _arrays_file(root, meta_path, meta, default_arrays, "preview", name)
    arrays = _load_arrays(arr_path, "preview")
    base, jvp, labels = {}, {}, {}
    for e in evals:
        need = [array_key_base(e), *(array_key_jvp(e, t) for t in tasks)]
        lacking = [k for k in need if k not in arrays]
        if lacking:
            raise CorruptResult(f"the preview arrays file {arr_path} lacks {len(lacking)} array(s) "
                                f"(first {lacking[0]!r}); it is incomplete, recompute the preview")
        b = arrays[array_key_base(e)]
        try:
            lab = np.asarray(meta["labels"][e], dtype=np.int64)
        except (KeyError, TypeError, ValueError):
            raise CorruptResult(f"the preview meta file {meta_path} has no integer labels for {e!r}; "
                                f"recompute the preview") from None
        if b.ndim != 2 or lab.shape != (b.shape[0],):
            raise CorruptResult(f"the preview {name!r} has {lab.size} labels in {meta_path} but base logits of "
                                f"shape {b.shape} in {arr_path} for {e!r}; recompute the preview")
        for t in tasks:
            j = arrays[array_key_jvp(e, t)]
            if j.shape != b.shape:
                raise CorruptResult(f"the preview arrays file {arr_path} has {array_key_jvp(e, t)} of shape "
                                    f"{j.shape}, base {b.shape}; recompute the preview")
            jvp[(e, t)] = j
        base[e], labels[e] = b, lab
    return PreviewCache(tasks, evals, labels, base, jvp, meta)


# --------------------------------------------------------------------------------------------
# per-example predictions (SCHEMA.md kind ``examples``), numpy only
# --------------------------------------------------------------------------------------------
EXAMPLES_FORMAT = "talos-examples/1"
"""``format`` in an ``examples`` result's safetensors metadata."""

MAX_EXAMPLES = 24
"""The most fixed examples per task an ``examples`` result holds."""

SNIPPET_CHARS = 120
"""The longest text snippet an ``examples`` result stores for a text example."""


def examples_key(*parts: str) -> str:
    """Key of one array of an ``examples`` result: ``"::".join(parts)``.

    >>> examples_key("pred", "negation", "mnist", "fashion-mnist")
    'pred::negation::mnist::fashion-mnist'
    """
    return "::".join(parts)


@dataclass
class ExampleSet:
    """Per-example predictions of one method on ≤ :data:`MAX_EXAMPLES` fixed test examples per task.

    ``arrays`` holds (SCHEMA.md ``examples``): ``pred::zero_shot::<e>`` ``[n]`` (θ0), ``pred::addition::<t>``
    ``[A, n]`` (θ0 + α_i Σ τ at ``addition_alphas[i]``), ``pred::negation::<target>::<e>`` ``[A_t, n]``
    (θ0 − α_i τ_target on the target and the control task at ``negation_alphas[target][i]``),
    ``pred::single::<t>::<e>`` ``[n]`` (θ0 + τ_t: the localization cell (t, e)), ``base::<e>`` and
    ``jvp::<e>::<t>`` ``[n, C]`` (the linearized terms, as in the preview) and ``thumb::<e>`` ``uint8 [n, h, w, 3]``
    (image tasks). Predictions are class indices into ``classes[e]``.

    >>> ex = ExampleSet(meta={"tasks": ["a"], "eval_tasks": ["a"], "control_task": None,
    ...                       "labels": {"a": [0, 1]}, "addition_alphas": [0.0, 1.0], "negation_alphas": {"a": [0.0]}},
    ...                 arrays={"pred::addition::a": np.array([[0, 0], [0, 1]]),
    ...                         "base::a": np.array([[1., 0.], [1., 0.]]), "jvp::a::a": np.array([[0, 0], [-2., 2]])})
    >>> ex.addition_at("a", 0.9)
    (array([0, 1]), 1.0)
    >>> ex.linearized("a", {"a": 0.2}).tolist(), ex.linearized("a", {"a": 0.4}).tolist()
    ([0, 0], [0, 1])
    """

    meta: dict
    arrays: dict[str, np.ndarray]

    @property
    def tasks(self) -> list[str]:
        return list(self.meta["tasks"])

    @property
    def eval_tasks(self) -> list[str]:
        return list(self.meta["eval_tasks"])

    @property
    def control_task(self) -> str | None:
        return self.meta.get("control_task")

    def labels(self, task: str) -> np.ndarray:
        return np.asarray(self.meta["labels"][task], dtype=np.int64)

    def classes(self, task: str) -> list[str]:
        return list((self.meta.get("classes") or {}).get(task) or [])

    def modality(self, task: str) -> str:
        return (self.meta.get("modality") or {}).get(task, "text")

    def snippets(self, task: str) -> list[str]:
        return list((self.meta.get("snippets") or {}).get(task) or [])

    def thumbnails(self, task: str) -> np.ndarray | None:
        return self.arrays.get(examples_key("thumb", task))

    def zero_shot(self, task: str) -> np.ndarray:
        return self.arrays[examples_key("pred", "zero_shot", task)]

    def single(self, vector_task: str, task: str) -> np.ndarray | None:
        """Predictions of θ0 + τ_{vector_task} on ``task`` (``None`` when not stored)."""
        return self.arrays.get(examples_key("pred", "single", vector_task, task))

    def addition_at(self, task: str, alpha: float) -> tuple[np.ndarray, float]:
        """Predictions on ``task`` at the addition grid point nearest ``alpha``, and that grid point."""
        grid = np.asarray(self.meta["addition_alphas"], dtype=float)
        i = int(np.argmin(np.abs(grid - float(alpha))))
        return self.arrays[examples_key("pred", "addition", task)][i], float(grid[i])

    def negation_at(self, target: str, task: str, alpha: float) -> tuple[np.ndarray, float]:
        """Predictions on ``task`` (the target or the control task) under θ0 − α τ_target at the grid point
        of the target's negation grid nearest ``alpha`` (α ≥ 0), and that grid point."""
        grid = np.asarray(self.meta["negation_alphas"][target], dtype=float)
        i = int(np.argmin(np.abs(grid - float(alpha))))
        return self.arrays[examples_key("pred", "negation", target, task)][i], float(grid[i])

    def has_linearized(self, task: str) -> bool:
        return examples_key("base", task) in self.arrays and all(
            examples_key("jvp", task, t) in self.arrays for t in self.tasks)

    def linearized(self, task: str, alphas: Mapping[str, float]) -> np.ndarray:
        """Predictions of the linearized model ``f(x, θ0) + Σ_t α_t τ_tᵀ∇f(x, θ0)`` on ``task``'s examples."""
        logits = np.array(self.arrays[examples_key("base", task)], dtype=np.float64)
        for t, a in alphas.items():
            if a:
                logits = logits + float(a) * self.arrays[examples_key("jvp", task, t)]
        return logits.argmax(-1)


def load_examples(root: str | Path, name: str) -> ExampleSet:
    """Read the ``examples`` result ``name`` (meta JSON + safetensors arrays; numpy only, no torch).

    The one reader of SCHEMA.md's ``examples`` kind. A missing meta file is :class:`MissingResult`; a meta or
    arrays file that is garbled or incomplete (a field or a prediction array missing, shapes that disagree with
    the labels or the α grids, an ``arrays`` name outside the folder) is :class:`CorruptResult`, one sentence
    naming the file.
    """

    meta_path, default_arrays = examples_paths(root, name)
    meta = read_result(root, "examples", name)
    require_fields(meta, "examples", name)
    tasks, evals = _str_list(meta["tasks"]), _str_list(meta["eval_tasks"])
    if tasks is None or evals is None or not all(isinstance(meta[k], dict) for k in
                                                   ("labels", "indices", "classes", "negation_alphas")):
        raise CorruptResult(f"the examples meta file {meta_path} has malformed tasks, eval_tasks, labels, indices, "
                            f"classes or negation_alphas; recompute it (talos examples)")
    arr_path = _arrays_file(root, meta_path, meta, default_arrays, "examples", name)
    arrays = _load_arrays(arr_path, "examples")
    try:
        n = {e: len(meta["labels"][e]) for e in evals}
        add_len = len(meta["addition_alphas"])
        neg_len = {t: len(meta["negation_alphas"][t]) for t in tasks}
    except (KeyError, TypeError):
        raise CorruptResult(f"the examples meta file {meta_path} lacks labels or alpha grids of its tasks; "
                            f"recompute it (talos examples)") from None
    want = {examples_key("pred", "zero_shot", e): (n[e],) for e in evals}
    want.update({examples_key("pred", "addition", t): (add_len, n[t]) for t in tasks})
    control = meta.get("control_task")
    for t in tasks:
        for e in ([t, control] if control else [t]):
            want[examples_key("pred", "negation", t, e)] = (neg_len[t], n[e])
    for key, shape in want.items():
        if key not in arrays:
            raise CorruptResult(f"the examples arrays file {arr_path} lacks {key!r}; it is incomplete, recompute it")
        if tuple(arrays[key].shape) != shape:
            raise CorruptResult(f"the examples arrays file {arr_path} has {key} of shape {tuple(arrays[key].shape)}, "
                                f"expected {shape} (labels and alpha grids in {meta_path}); recompute it")
    return ExampleSet(meta, arrays)
