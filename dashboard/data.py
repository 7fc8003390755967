"""Reading a results store for the dashboard (layout: ``talos_core/evaluation/SCHEMA.md``).

Two layers:

* **pure loaders** (``load_*``, :func:`store_index`, :func:`preview_accuracy`, :func:`snap`, ...) that
  take a store folder and a result name and return typed, validated objects, raising a
  :class:`DataProblem` with one sentence for an empty store, a missing result or a corrupt file;
* **cached wrappers** (:func:`get`, :func:`get_preview`, :func:`index`) that key the pure loaders on
  the file's modification time, so a slider move re-renders from memory and a result written by a
  background run shows up on the next rerun.

Example (no Streamlit server needed)::

    >>> import numpy as np
    >>> snap([0.0, 0.05, 0.1], 0.062)
    (0.05, True)
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from talos_core.errors import TalosError

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_STORE = REPO_ROOT / "cached_results"
STORE_ENV = "TALOS_STORE"

#: result kinds and the parts of their names after ``<suite>__<model>`` (SCHEMA.md).
KINDS: dict[str, tuple[str, ...]] = {
    "single": (), "linearization": (), "efficiency": (), "comparison": (),
    "addition": ("method",), "negation": ("method",), "localization": ("method",), "masks": ("method",),
    "preview": ("method",), "sparsity_ablation": ("method",), "mask_iou": ("method",),
    "disentanglement": ("method", "task1", "task2"), "sharing": ("mode",),
}
POSTHOC = {"ties", "dare", "breadcrumbs", "tall_consensus"}
SPARSE_METHODS = {"talos", "lota", "random", "magnitude", "talos-top"}


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------
class DataProblem(TalosError):
    """A problem with the store the page should show as one sentence (``level`` = info or error)."""

    level = "error"


class StoreNotFound(DataProblem):
    level = "error"


class EmptyStore(DataProblem):
    level = "info"


class MissingResult(DataProblem):
    level = "info"


class CorruptResult(DataProblem):
    level = "error"


# --------------------------------------------------------------------------------------------
# store location and discovery
# --------------------------------------------------------------------------------------------
def default_store_path(env: Mapping[str, str] | None = None) -> Path:
    """``$TALOS_STORE`` if set, else ``<repo>/cached_results``.

    >>> default_store_path({"TALOS_STORE": "/tmp/s"})
    PosixPath('/tmp/s')
    """
    env = os.environ if env is None else env
    value = env.get(STORE_ENV, "").strip()
    return Path(value).expanduser() if value else DEFAULT_STORE


def result_name(suite: str, model: str, *parts: str) -> str:
    """``"<suite>__<model>__<part>..."`` with the model/method slugged as in SCHEMA.md.

    >>> result_name("text", "minilm-l6", "talos")
    'text__minilm-l6__talos'
    """
    slug = lambda s: "".join(c if c.isalnum() or c in "._-" else "-" for c in str(s))  # noqa: E731
    return "__".join([suite, slug(model), *[slug(p) for p in parts]])


def parse_result_name(kind: str, name: str) -> dict[str, str | None] | None:
    """Split a result name into its fields; ``None`` if it does not follow SCHEMA.md.

    >>> parse_result_name("disentanglement", "vision__tiny-clip__talos__digits__mnist")["task2"]
    'mnist'
    >>> parse_result_name("mask_iou", "v__m__talos__vs__lota")["vs"]
    'lota'
    """
    parts = name.split("__")
    if kind == "suite":
        return {"suite": name}
    if kind not in KINDS or len(parts) < 2:
        return None
    out: dict[str, str | None] = {"suite": parts[0], "model": parts[1]}
    rest = parts[2:]
    if kind == "mask_iou" and len(rest) == 3 and rest[1] == "vs":
        out.update(method=rest[0], vs=rest[2])
        return out
    fields = KINDS[kind]
    if len(rest) != len(fields):
        return None
    out.update(dict(zip(fields, rest)))
    return out


INDEX_COLUMNS = ["kind", "name", "suite", "model", "method", "task1", "task2", "mode", "vs"]


def check_store(root: str | Path) -> Path:
    """The store folder as a Path; :class:`StoreNotFound` if it does not exist."""
    path = Path(root).expanduser()
    if not path.is_dir():
        raise StoreNotFound(f"store folder {path} does not exist; choose another folder in the sidebar "
                            f"or produce one with the `talos` CLI")
    return path


def store_index(root: str | Path) -> pd.DataFrame:
    """One row per result file: ``kind, name, suite, model, method, task1, task2, mode, vs``.

    Raises :class:`EmptyStore` when the store has no results (e.g. only runs, or a fresh folder).
    Files whose names do not follow SCHEMA.md are ignored.
    """
    path = check_store(root)
    rows = []
    results = path / "results"
    if results.is_dir():
        for kind_dir in sorted(results.iterdir()):
            if not kind_dir.is_dir():
                continue
            kind = kind_dir.name
            for f in sorted(kind_dir.glob("*.json")):
                if f.name.startswith("."):
                    continue
                fields = parse_result_name(kind, f.stem)
                if fields is not None:
                    rows.append({"kind": kind, "name": f.stem, **fields})
    if not rows:
        raise EmptyStore(f"the store {path} has no results yet; run a suite (e.g. `talos suite ...`), "
                         f"launch one from the Run page, or open another store in the sidebar")
    return pd.DataFrame(rows).reindex(columns=INDEX_COLUMNS)


def store_signature(root: str | Path) -> tuple:
    """Cheap fingerprint of the store's result listing (folder mtimes): changes when a result appears."""
    path = Path(root)
    sig: list[tuple[str, int]] = []
    results = path / "results"
    try:
        sig.append(("", results.stat().st_mtime_ns))
        for d in os.scandir(results):
            if d.is_dir():
                sig.append((d.name, d.stat().st_mtime_ns))
    except OSError:
        sig.append(("missing", 0))
    return tuple(sorted(sig))


def available(idx: pd.DataFrame, column: str, **match: Any) -> list[str]:
    """Sorted distinct non-null values of ``column`` among index rows matching ``match``.

    ``match`` values may be a single value or a collection of allowed values.
    """
    sel = idx
    for key, value in match.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple, set, frozenset)):
            sel = sel[sel[key].isin(list(value))]
        else:
            sel = sel[sel[key] == value]
    vals = sel[column].dropna().unique().tolist()
    return sorted(str(v) for v in vals)


def order_methods(methods: Iterable[str]) -> list[str]:
    """Methods in a teaching order: TaLoS first, then full fine-tuning, PEFT, post-hoc, others."""
    pref = ["talos", "nonlinear", "linearized", "llora", "lota", "ties", "tall_consensus", "dare", "breadcrumbs",
            "talos-top", "random", "magnitude"]
    ms = list(dict.fromkeys(methods))
    return sorted(ms, key=lambda m: (pref.index(m) if m in pref else len(pref), m))


# --------------------------------------------------------------------------------------------
# raw payloads
# --------------------------------------------------------------------------------------------
def result_file(root: str | Path, kind: str, name: str) -> Path:
    return Path(root) / "results" / kind / f"{name}.json"


def read_payload(root: str | Path, kind: str, name: str) -> dict:
    """The JSON payload of ``results/<kind>/<name>.json``; :class:`MissingResult` / :class:`CorruptResult`."""
    from talos_core.atomic import read_json

    path = result_file(root, kind, name)
    if not path.exists():
        raise MissingResult(f"the store has no {kind} result {name!r}; it has not been computed for this "
                            f"selection (try another model/method, or compute it from the Run page)")
    try:
        payload = read_json(path)
    except TalosError as exc:
        raise CorruptResult(f"the {kind} result file {path} is corrupt and cannot be read ({exc}); "
                            f"delete it and recompute it") from None
    if not isinstance(payload, dict):
        raise CorruptResult(f"the {kind} result file {path} does not hold a JSON object; delete it and recompute it")
    return payload


def _require(payload: Mapping, keys: Iterable[str], kind: str, name: str) -> None:
    missing = [k for k in keys if k not in payload]
    if missing:
        raise CorruptResult(f"the {kind} result {name!r} lacks field(s) {', '.join(missing)} required by "
                            f"SCHEMA.md; recompute it with the current talos version")


def _table(payload: Mapping, kind: str, name: str, columns: Iterable[str]) -> pd.DataFrame:
    _require(payload, ["records"], kind, name)
    records = payload["records"]
    if not isinstance(records, list):
        raise CorruptResult(f"the {kind} result {name!r} has 'records' that is not a list")
    try:
        df = pd.DataFrame(records, columns=payload.get("columns"))
    except Exception as exc:  # malformed records (mismatched columns, ...)
        raise CorruptResult(f"the {kind} result {name!r} has a malformed table ({exc})") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise CorruptResult(f"the {kind} table {name!r} lacks column(s) {', '.join(missing)} required by SCHEMA.md")
    return df


def _square(payload: Mapping, key: str, n: int, kind: str, name: str) -> np.ndarray:
    try:
        arr = np.asarray(payload[key], dtype=float)
    except (TypeError, ValueError):
        raise CorruptResult(f"the {kind} result {name!r} has a non-numeric {key!r}") from None
    if arr.shape != (n, n):
        raise CorruptResult(f"the {kind} result {name!r} has {key!r} of shape {arr.shape}, expected {n} × {n}")
    return arr


def _num(value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return float("nan")
    return v


# --------------------------------------------------------------------------------------------
# typed results
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Addition:
    """SCHEMA ``addition``: the α curve of θ0 + α Σ_t τ_t, one α shared by all tasks."""

    name: str
    curve: pd.DataFrame  # alpha, split, task, accuracy, normalized_accuracy
    selected_alpha: float
    alpha_grid: np.ndarray
    tasks: list[str]
    summary: dict
    sparsity: float | None
    eval_mode: str | None
    #: the curve as arrays (built once at load, so a slider move is an index lookup):
    #: ``alphas`` sorted grid, ``acc[split]`` / ``norm[split]`` of shape [len(alphas), len(tasks)]
    alphas: np.ndarray = field(default_factory=lambda: np.zeros(0))
    acc: dict = field(default_factory=dict)
    norm: dict = field(default_factory=dict)

    @property
    def grid_step(self) -> float:
        g = np.unique(self.alpha_grid)
        return float(np.min(np.diff(g))) if g.size > 1 else 1.0


@dataclass(frozen=True)
class Negation:
    """SCHEMA ``negation``: θ0 − α τ_target per target; control accuracy must stay ≥ 95 % of zero-shot."""

    name: str
    table: pd.DataFrame  # target, alpha, split, target_acc, control_acc
    control_task: str
    selected: dict[str, float]
    control_zero_shot: dict[str, float]  # split -> acc
    summary: dict
    #: per target: (sorted α grid, {split: target_acc array}, {split: control_acc array}), built at load
    curves: dict = field(default_factory=dict)

    @property
    def targets(self) -> list[str]:
        return list(self.curves)

    def grid(self, target: str) -> np.ndarray:
        return self.curves[target][0]


@dataclass(frozen=True)
class Matrix:
    """A task × task matrix result (``localization``, ``mask_iou``, ``sharing``) plus its extra fields."""

    name: str
    tasks: list[str]
    matrix: np.ndarray
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Preview:
    """SCHEMA ``preview`` arrays: base logits f(x, θ0) and JVPs τ_tᵀ∇f(x, θ0) per eval task."""

    name: str
    tasks: list[str]  # vector tasks
    eval_tasks: list[str]
    labels: dict[str, np.ndarray]
    base: dict[str, np.ndarray]  # eval_task -> [N, C]
    jvp: dict[str, np.ndarray]  # eval_task -> [T, N, C] stacked in `tasks` order (zeros where absent)


def load_addition(root: str | Path, name: str) -> Addition:
    p = read_payload(root, "addition", name)
    _require(p, ["selected_alpha", "alpha_grid"], "addition", name)
    df = _table(p, "addition", name, ["alpha", "split", "task", "accuracy", "normalized_accuracy"])
    if df.empty:
        raise CorruptResult(f"the addition result {name!r} has an empty α curve")
    grid = np.asarray(p.get("alpha_grid") or sorted(df["alpha"].unique()), dtype=float)
    sel = _num(p["selected_alpha"])
    if not math.isfinite(sel):
        raise CorruptResult(f"the addition result {name!r} has a non-numeric selected_alpha {p['selected_alpha']!r}")
    tasks = [str(t) for t in (p.get("tasks") or dict.fromkeys(df["task"].tolist()))]
    sp = p.get("sparsity")
    alphas = np.unique(df["alpha"].to_numpy(dtype=float))
    acc, norm = {}, {}
    for split, sub in df.groupby("split", sort=False):
        for col, out in (("accuracy", acc), ("normalized_accuracy", norm)):
            piv = sub.pivot_table(index="alpha", columns="task", values=col, aggfunc="first")
            out[str(split)] = piv.reindex(index=alphas, columns=tasks).to_numpy(dtype=float)
    return Addition(name, df, sel, grid, tasks, dict(p.get("summary") or {}),
                    None if sp is None else float(sp), p.get("eval_mode"), alphas, acc, norm)


def load_negation(root: str | Path, name: str) -> Negation:
    p = read_payload(root, "negation", name)
    df = _table(p, "negation", name, ["target", "alpha", "split", "target_acc", "control_acc"])
    if df.empty:
        raise CorruptResult(f"the negation result {name!r} has an empty table")
    czs = p.get("control_zero_shot_acc")
    if isinstance(czs, Mapping):
        czs_d = {str(k): _num(v) for k, v in czs.items()}
    elif czs is None:
        czs_d = {}
    else:
        czs_d = {"val": _num(czs), "test": _num(czs)}
    selected = {str(k): _num(v) for k, v in (p.get("selected") or {}).items()}
    curves = {}
    for target, sub in df.groupby("target", sort=False):
        alphas = np.unique(sub["alpha"].to_numpy(dtype=float))
        tacc, cacc = {}, {}
        for split, s in sub.groupby("split", sort=False):
            s = s.drop_duplicates("alpha").set_index("alpha").reindex(alphas)
            tacc[str(split)] = s["target_acc"].to_numpy(dtype=float)
            cacc[str(split)] = s["control_acc"].to_numpy(dtype=float)
        curves[str(target)] = (alphas, tacc, cacc)
    return Negation(name, df, str(p.get("control_task", "control")), selected, czs_d, dict(p.get("summary") or {}),
                    curves)


def load_disentanglement(root: str | Path, name: str) -> dict:
    p = read_payload(root, "disentanglement", name)
    _require(p, ["alphas1", "alphas2", "xi"], "disentanglement", name)
    a1, a2 = np.asarray(p["alphas1"], dtype=float), np.asarray(p["alphas2"], dtype=float)
    try:
        xi = np.asarray(p["xi"], dtype=float)
    except (TypeError, ValueError):
        raise CorruptResult(f"the disentanglement result {name!r} has a non-numeric xi grid") from None
    if xi.shape != (a1.size, a2.size):
        raise CorruptResult(f"the disentanglement result {name!r} has xi of shape {xi.shape}, expected "
                            f"{a1.size} × {a2.size}")
    fields = parse_result_name("disentanglement", name) or {}
    out = dict(p)
    out.update(alphas1=a1, alphas2=a2, xi=xi, task1=p.get("task1", fields.get("task1")),
               task2=p.get("task2", fields.get("task2")), method=p.get("method", fields.get("method")))
    return out


def _load_matrix(kind: str, root: str | Path, name: str) -> Matrix:
    p = read_payload(root, kind, name)
    _require(p, ["tasks", "matrix"], kind, name)
    tasks = [str(t) for t in p["tasks"]]
    mat = _square(p, "matrix", len(tasks), kind, name)
    return Matrix(name, tasks, mat, {k: v for k, v in p.items() if k not in ("tasks", "matrix")})


def load_localization(root: str | Path, name: str) -> Matrix:
    return _load_matrix("localization", root, name)


def load_sharing(root: str | Path, name: str) -> Matrix:
    return _load_matrix("sharing", root, name)


def load_mask_iou(root: str | Path, name: str) -> Matrix | pd.DataFrame:
    """Per-method task × task IoU matrix, or (``<m1>__vs__<m2>``) a ``task, iou`` table."""
    p = read_payload(root, "mask_iou", name)
    if "records" in p:
        return _table(p, "mask_iou", name, ["task", "iou"])
    return _load_matrix("mask_iou", root, name)


TABLE_COLUMNS: dict[str, list[str]] = {
    "single": ["method", "task", "zero_shot_acc", "finetuned_acc", "split"],
    "masks": ["task", "param", "block", "layer_type", "numel", "trainable", "density"],
    "linearization": ["method", "task", "finetuned_acc", "linearized_acc"],
    "efficiency": ["method", "task", "fwd_bwd_s_mean", "opt_s_mean", "peak_memory_mb"],
    "comparison": ["method"],
    "sparsity_ablation": ["sparsity"],
}


def load_table(root: str | Path, kind: str, name: str) -> pd.DataFrame:
    """A tabular result, its SCHEMA columns checked (``single``, ``masks``, ``efficiency``, ...)."""
    if kind not in TABLE_COLUMNS:
        raise TalosError(f"kind {kind!r} is not a table; choose one of: {', '.join(sorted(TABLE_COLUMNS))}")
    return _table(read_payload(root, kind, name), kind, name, TABLE_COLUMNS[kind])


def load_single_extra(root: str | Path, name: str) -> dict:
    """The ``runs`` mapping stored next to the single-task table."""
    return dict(read_payload(root, "single", name).get("runs") or {})


def load_suite(root: str | Path, name: str) -> dict:
    return read_payload(root, "suite", name)


def load_preview(root: str | Path, name: str) -> Preview:
    """Preview meta JSON + its safetensors arrays (numpy, no torch)."""
    from safetensors.numpy import load_file

    p = read_payload(root, "preview", name)
    _require(p, ["tasks", "eval_tasks", "labels"], "preview", name)
    arrays_path = Path(root) / "results" / "preview" / str(p.get("arrays") or f"{name}.safetensors")
    if not arrays_path.exists():
        raise MissingResult(f"the preview arrays file {arrays_path} is missing; recompute the preview")
    try:
        arrays = load_file(str(arrays_path))
    except Exception as exc:
        raise CorruptResult(f"the preview arrays file {arrays_path} is corrupt ({exc}); delete and recompute it") \
            from None
    tasks = [str(t) for t in p["tasks"]]
    eval_tasks = [str(t) for t in p["eval_tasks"]]
    labels, base, jvp = {}, {}, {}
    for e in eval_tasks:
        key = f"base::{e}"
        if key not in arrays or e not in p["labels"]:
            raise CorruptResult(f"the preview {name!r} has no base logits or labels for eval task {e!r}")
        b = arrays[key].astype(np.float32)
        lab = np.asarray(p["labels"][e], dtype=np.int64)
        if b.ndim != 2 or lab.shape != (b.shape[0],):
            raise CorruptResult(f"the preview {name!r} has base logits {b.shape} and {lab.size} labels for {e!r}")
        stack = np.zeros((len(tasks),) + b.shape, dtype=np.float32)
        for i, t in enumerate(tasks):
            j = arrays.get(f"jvp::{e}::{t}")
            if j is not None:
                if j.shape != b.shape:
                    raise CorruptResult(f"the preview {name!r} has jvp::{e}::{t} of shape {j.shape}, base {b.shape}")
                stack[i] = j
        labels[e], base[e], jvp[e] = lab, b, stack
    return Preview(name, tasks, eval_tasks, labels, base, jvp)


LOADERS: dict[str, Callable[[str | Path, str], Any]] = {
    "addition": load_addition, "negation": load_negation, "disentanglement": load_disentanglement,
    "localization": load_localization, "sharing": load_sharing, "mask_iou": load_mask_iou,
    "suite": load_suite, "preview": load_preview,
    **{k: (lambda kind: (lambda root, name: load_table(root, kind, name)))(k) for k in TABLE_COLUMNS},
}


# --------------------------------------------------------------------------------------------
# pure computations used by the pages
# --------------------------------------------------------------------------------------------
def snap(grid: Sequence[float] | np.ndarray, value: float) -> tuple[float, bool]:
    """Nearest grid point to ``value`` and whether it differs from ``value`` (beyond 1e-9).

    >>> snap([0.0, 0.5, 1.0], 0.74)
    (0.5, True)
    >>> snap([0.0, 0.5, 1.0], 1.0)
    (1.0, False)
    """
    g = np.asarray(grid, dtype=float)
    if g.size == 0:
        raise TalosError("cannot snap to an empty α grid")
    x = float(g[np.argmin(np.abs(g - value))])
    return x, abs(x - value) > 1e-9


def average_curve(add: Addition) -> pd.DataFrame:
    """Mean over tasks of accuracy and normalized accuracy per (α, split): ``alpha, split, accuracy,
    normalized_accuracy``."""
    frames = [pd.DataFrame({"alpha": add.alphas, "split": split, "accuracy": np.nanmean(add.acc[split], axis=1),
                            "normalized_accuracy": np.nanmean(add.norm[split], axis=1)})
              for split in add.acc]
    return pd.concat(frames, ignore_index=True)


def _split_key(d: Mapping[str, Any], split: str) -> str:
    return split if split in d else next(iter(d))


def addition_at(add: Addition, alpha: float, split: str = "test") -> tuple[float, pd.DataFrame]:
    """Per-task exact results at the grid α nearest ``alpha``: ``(snapped α, frame task/accuracy/normalized)``."""
    a, _ = snap(add.alphas, alpha)
    i = int(np.argmin(np.abs(add.alphas - a)))
    sk = _split_key(add.acc, split)
    return a, pd.DataFrame({"task": add.tasks, "accuracy": add.acc[sk][i], "normalized_accuracy": add.norm[sk][i]})


def negation_at(neg: Negation, target: str, alpha: float, split: str = "test") -> tuple[float, float, float]:
    """``(snapped α, target_acc, control_acc)`` for negating ``target`` at the grid α nearest ``alpha``."""
    if target not in neg.curves:
        raise MissingResult(f"no negation results for target {target!r}")
    alphas, tacc, cacc = neg.curves[target]
    a, _ = snap(alphas, alpha)
    i = int(np.argmin(np.abs(alphas - a)))
    sk = _split_key(tacc, split)
    return a, float(tacc[sk][i]), float(cacc[sk][i])


def single_reference(single: pd.DataFrame | None, method: str, tasks: Sequence[str],
                     split: str = "test") -> tuple[list[float], list[float]]:
    """``(zero-shot acc, single-task fine-tuned acc)`` per task for ``method`` (post-hoc methods use
    their ``nonlinear`` single-task models). Missing entries are NaN."""
    nan = float("nan")
    if single is None or single.empty:
        return [nan] * len(tasks), [nan] * len(tasks)
    rows = single.to_dict("records")
    if any(r["split"] == split for r in rows):
        rows = [r for r in rows if r["split"] == split]
    methods = {r["method"] for r in rows}
    m = method if method in methods else ("nonlinear" if method in POSTHOC else method)
    zs: dict[str, float] = {}
    ft: dict[str, float] = {}
    for r in rows:
        zs.setdefault(r["task"], _num(r["zero_shot_acc"]))
        if r["method"] == m:
            ft.setdefault(r["task"], _num(r["finetuned_acc"]))
    return [zs.get(t, nan) for t in tasks], [ft.get(t, nan) for t in tasks]


def preview_logits(preview: Preview, eval_task: str, alphas: Mapping[str, float]) -> np.ndarray:
    """Linearized logits ``f(x, θ0) + Σ_t α_t τ_tᵀ∇f(x, θ0)`` for ``eval_task`` (tasks not in ``alphas`` get 0)."""
    if eval_task not in preview.base:
        raise MissingResult(f"the preview has no arrays for eval task {eval_task!r}; it has "
                            f"{', '.join(preview.eval_tasks)}")
    a = np.array([float(alphas.get(t, 0.0)) for t in preview.tasks], dtype=np.float32)
    return preview.base[eval_task] + np.tensordot(a, preview.jvp[eval_task], axes=1)


def preview_accuracy(preview: Preview, alphas: Mapping[str, float],
                     eval_tasks: Sequence[str] | None = None) -> dict[str, float]:
    """Accuracy of the linearized model θ0 + Σ_t α_t τ_t on each eval task (first-order Taylor).

    ``acc_e = mean_x [ argmax_c (base_e + Σ_t α_t jvp_{e,t})(x)_c == y ]``.
    Use negative α for negation (θ0 − α τ).
    """
    out = {}
    for e in eval_tasks or preview.eval_tasks:
        logits = preview_logits(preview, e, alphas)
        out[e] = float(np.mean(np.argmax(logits, axis=1) == preview.labels[e]))
    return out


def xi_region_mean(payload: Mapping[str, Any]) -> float:
    """Mean ξ over the grid points inside the square search region ``[lo, hi]²`` (NaN if none/absent)."""
    region = payload.get("search_region")
    if region is None:
        return float("nan")
    a1, a2 = np.asarray(payload["alphas1"], dtype=float), np.asarray(payload["alphas2"], dtype=float)
    r1 = (a1 >= region[0]) & (a1 <= region[1])
    r2 = (a2 >= region[0]) & (a2 <= region[1])
    inside = np.asarray(payload["xi"], dtype=float)[np.ix_(r1, r2)]
    return float(inside.mean()) if inside.size else float("nan")


def xi_long_table(panels: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """ξ grids as one tidy table ``method, task1, task2, alpha1, alpha2, xi`` (for CSV export)."""
    frames = []
    for p in panels:
        a1, a2 = np.meshgrid(np.asarray(p["alphas1"], dtype=float), np.asarray(p["alphas2"], dtype=float),
                             indexing="ij")
        frames.append(pd.DataFrame({"method": p.get("method"), "task1": p.get("task1"), "task2": p.get("task2"),
                                    "alpha1": a1.ravel(), "alpha2": a2.ravel(),
                                    "xi": np.asarray(p["xi"], dtype=float).ravel()}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def localization_table(mats: Mapping[str, Matrix]) -> pd.DataFrame:
    """Localization matrices as one tidy table ``method, finetuned_on, evaluated_on, ratio``."""
    rows = [{"method": m, "finetuned_on": r, "evaluated_on": c, "ratio": float(mat.matrix[i, j])}
            for m, mat in mats.items() for i, r in enumerate(mat.tasks) for j, c in enumerate(mat.tasks)]
    return pd.DataFrame(rows, columns=["method", "finetuned_on", "evaluated_on", "ratio"])


def masks_with(tables: Mapping[str, pd.DataFrame], column: str = "method") -> pd.DataFrame:
    """Concatenate mask tables keyed by method (or task) into one frame with that key as ``column``."""
    frames = [t.assign(**{column: k}) for k, t in tables.items() if not t.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


# --------------------------------------------------------------------------------------------
# cached wrappers (Streamlit)
# --------------------------------------------------------------------------------------------
def file_stamp(path: Path) -> int:
    """Modification time in ns (``-1`` if missing): part of every cache key."""
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return -1


try:  # Streamlit is always installed for the dashboard, but keep the pure layer importable without it
    import streamlit as st

    _cache_data = st.cache_data(show_spinner=False, max_entries=512)
    _cache_resource = st.cache_resource(show_spinner=False, max_entries=32)
except Exception:  # pragma: no cover
    from functools import lru_cache

    _cache_data = lru_cache(maxsize=512)
    _cache_resource = lru_cache(maxsize=32)


@_cache_data
def _cached_index(root: str, signature: tuple) -> pd.DataFrame:
    return store_index(root)


@_cache_data
def _cached_result(kind: str, root: str, name: str, stamp: int) -> Any:
    return LOADERS[kind](root, name)


@_cache_resource
def _cached_preview(root: str, name: str, stamp: tuple) -> Preview:
    return load_preview(root, name)


def index(root: str | Path) -> pd.DataFrame:
    """Cached :func:`store_index` (recomputed when a result is added or removed)."""
    return _cached_index(str(root), store_signature(root))


def get(kind: str, root: str | Path, name: str) -> Any:
    """Cached typed result ``kind``/``name`` (recomputed when its file changes)."""
    if kind not in LOADERS:
        raise TalosError(f"unknown result kind {kind!r}; choose one of: {', '.join(sorted(LOADERS))}")
    if kind == "preview":
        return get_preview(root, name)
    return _cached_result(kind, str(root), name, file_stamp(result_file(root, kind, name)))


def get_preview(root: str | Path, name: str) -> Preview:
    """Cached preview arrays (shared, read-only: never modify the returned arrays)."""
    meta = result_file(root, "preview", name)
    arrays = meta.with_suffix(".safetensors")
    return _cached_preview(str(root), name, (file_stamp(meta), file_stamp(arrays)))


def try_get(kind: str, root: str | Path, name: str) -> Any | None:
    """Like :func:`get` but ``None`` for a missing result (corrupt files still raise)."""
    try:
        return get(kind, root, name)
    except MissingResult:
        return None
