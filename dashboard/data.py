"""Reading a results store for the dashboard, only through :mod:`talos_core.schema` (its code twin of
``talos_core/evaluation/SCHEMA.md``: result kinds and names, paths, the JSON and preview readers).

Two layers:

* **pure loaders** (``load_*``, :func:`store_index`, :func:`snap`, ...) that take a store folder and a
  result name and return typed, validated objects, raising a :class:`~talos_core.schema.StoreProblem`
  with one sentence for an empty store, a missing result or a corrupt file;
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

from talos_core import result_arrays, schema
from talos_core.errors import TalosError
from talos_core.result_arrays import PreviewCache
from talos_core.schema import CorruptResult, EmptyStore, MissingResult, StoreNotFound

# --------------------------------------------------------------------------------------------
# store discovery
# --------------------------------------------------------------------------------------------
INDEX_COLUMNS = ["kind", "name", *schema.NAME_FIELDS]


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
    Files whose kinds or names do not follow SCHEMA.md are ignored.
    """
    path = check_store(root)
    rows = [{"kind": kind, "name": name, **fields} for kind, name, fields in schema.iter_results(path)]
    if not rows:
        raise EmptyStore(f"the store {path} has no results yet; run a suite (e.g. `talos suite ...`), "
                         f"launch one from the Run page, or open another store in the sidebar")
    return pd.DataFrame(rows).reindex(columns=INDEX_COLUMNS)


def store_signature(root: str | Path) -> tuple:
    """Cheap fingerprint of the store's result listing (folder mtimes): changes when a result appears."""
    path = Path(root)
    sig: list[tuple[str, int]] = []
    results = schema.results_dir(path)
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
    """Methods in a teaching order: TaLoS first, then full fine-tuning, PEFT, post-hoc, others (variant ids
    such as ``talos-k0.9`` among the others, by name)."""
    pref = ["talos", "nonlinear", "linearized", "llora", "lota", "ties", "tall_consensus", "dare", "breadcrumbs",
            "tsv", "iso_c", "iso_cts", "lines", "talos-top", "random", "magnitude"]
    ms = list(dict.fromkeys(methods))
    return sorted(ms, key=lambda m: (pref.index(m) if m in pref else len(pref), m))


# --------------------------------------------------------------------------------------------
# payloads (read by talos_core.schema.read_result: MissingResult / CorruptResult naming the file)
# --------------------------------------------------------------------------------------------
def _table(payload: Mapping, kind: str, name: str, columns: Iterable[str]) -> pd.DataFrame:
    schema.require_fields(payload, kind, name, ["records"])
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


def _read_kind_table(root: str | Path, kind: str, name: str, empty: str | None = None) -> tuple[dict, pd.DataFrame]:
    """A result's payload (required fields checked) and its table (SCHEMA columns checked); ``empty``: the
    problem to report when the table has no rows (``None``: an empty table is fine)."""
    p = schema.read_result(root, kind, name)
    schema.require_fields(p, kind, name)
    df = _table(p, kind, name, schema.KINDS[kind].columns)
    if empty is not None and df.empty:
        raise CorruptResult(f"the {kind} result {name!r} {empty}")
    return p, df


def load_addition(root: str | Path, name: str) -> Addition:
    p, df = _read_kind_table(root, "addition", name, empty="has an empty α curve")
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
    p, df = _read_kind_table(root, "negation", name, empty="has an empty table")
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
    p = schema.read_result(root, "disentanglement", name)
    schema.require_fields(p, "disentanglement", name)
    a1, a2 = np.asarray(p["alphas1"], dtype=float), np.asarray(p["alphas2"], dtype=float)
    try:
        xi = np.asarray(p["xi"], dtype=float)
    except (TypeError, ValueError):
        raise CorruptResult(f"the disentanglement result {name!r} has a non-numeric xi grid") from None
    if xi.shape != (a1.size, a2.size):
        raise CorruptResult(f"the disentanglement result {name!r} has xi of shape {xi.shape}, expected "
                            f"{a1.size} × {a2.size}")
    fields = schema.parse_result_name("disentanglement", name) or {}
    out = dict(p)
    out.update(alphas1=a1, alphas2=a2, xi=xi, task1=p.get("task1", fields.get("task1")),
               task2=p.get("task2", fields.get("task2")), method=p.get("method", fields.get("method")))
    return out


def _load_matrix(kind: str, root: str | Path, name: str) -> Matrix:
    p = schema.read_result(root, kind, name)
    schema.require_fields(p, kind, name)
    tasks = [str(t) for t in p["tasks"]]
    mat = _square(p, "matrix", len(tasks), kind, name)
    return Matrix(name, tasks, mat, {k: v for k, v in p.items() if k not in ("tasks", "matrix")})


def load_localization(root: str | Path, name: str) -> Matrix:
    return _load_matrix("localization", root, name)


def load_sharing(root: str | Path, name: str) -> Matrix:
    return _load_matrix("sharing", root, name)


def load_mask_iou(root: str | Path, name: str) -> Matrix | pd.DataFrame:
    """Per-method task × task IoU matrix, or (``<m1>__vs__<m2>``) a ``task, iou`` table."""
    p = schema.read_result(root, "mask_iou", name)
    if "records" in p:
        return _table(p, "mask_iou", name, schema.KINDS["mask_iou"].pair_columns)
    return _load_matrix("mask_iou", root, name)


def load_table(root: str | Path, kind: str, name: str) -> pd.DataFrame:
    """A tabular result, its SCHEMA columns checked (``single``, ``masks``, ``efficiency``, ...)."""
    info = schema.kind_info(kind)
    if not info.table:
        raise TalosError(f"kind {kind!r} is not a table; choose one of: "
                         f"{', '.join(sorted(k for k, i in schema.KINDS.items() if i.table))}")
    return _table(schema.read_result(root, kind, name), kind, name, info.columns)


def load_single_extra(root: str | Path, name: str) -> dict:
    """The ``runs`` mapping stored next to the single-task table."""
    return dict(schema.read_result(root, "single", name).get("runs") or {})


def load_suite(root: str | Path, name: str) -> dict:
    return schema.read_result(root, "suite", name)


def _meta(payload: Mapping) -> dict:
    """A payload's fields besides its table (``columns``, ``records``)."""
    return {k: v for k, v in payload.items() if k not in ("columns", "records")}


def _int_or_none(value: Any) -> int | None:
    v = _num(value)
    return int(v) if math.isfinite(v) else None


@dataclass(frozen=True)
class LearningCurve:
    """SCHEMA ``learning_curve``: validation accuracy vs training step of one method on each task, and the
    step budget chosen from the curves (issue 13, "budget set by convergence";
    :mod:`talos_core.evaluation.learning_curve`)."""

    name: str
    method: str
    table: pd.DataFrame  # method, task, step, val_acc
    budget: int | None
    rule: str
    tolerance: float | None
    eval_every: int | None
    steps: int | None  # the largest step trained (the curves' end)
    plateau: dict[str, int]  # task -> step where its curve plateaus (absent in results written before it)
    zero_shot: dict[str, float]  # task -> zero-shot validation accuracy (absent in older results)
    meta: dict = field(default_factory=dict)

    @property
    def tasks(self) -> list[str]:
        return list(dict.fromkeys(self.table["task"].astype(str)))


def load_learning_curve(root: str | Path, name: str) -> LearningCurve:
    p, df = _read_kind_table(root, "learning_curve", name, empty="has no points")
    df = df.assign(task=df["task"].astype(str), step=pd.to_numeric(df["step"], errors="coerce"),
                   val_acc=pd.to_numeric(df["val_acc"], errors="coerce"))
    if df["step"].isna().any():
        raise CorruptResult(f"the learning_curve result {name!r} has a non-numeric step")
    fields = schema.parse_result_name("learning_curve", name) or {}
    method = str(p.get("method") or fields.get("method") or df["method"].iloc[0])
    plateau = {str(t): int(v) for t, v in (p.get("plateau") or {}).items() if _int_or_none(v) is not None}
    zs = {str(t): _num(v) for t, v in (p.get("zero_shot") or {}).items() if v is not None}
    tol = _num(p.get("tolerance"))
    order = {t: i for i, t in enumerate(dict.fromkeys(df["task"]))}  # tasks as stored, each curve by step
    df = df.assign(_o=df["task"].map(order)).sort_values(["_o", "step"], kind="mergesort").drop(columns="_o")
    return LearningCurve(name, method, df.reset_index(drop=True),
                         _int_or_none(p.get("budget")), str(p.get("rule") or ""), tol if math.isfinite(tol) else None,
                         _int_or_none(p.get("eval_every")), _int_or_none(p.get("steps")), plateau, zs, _meta(p))


@dataclass(frozen=True)
class Selection:
    """SCHEMA ``selection``: one hyperparameter of one method chosen per task by validation task negation
    (paper App. "Hyperparameter selection"; :mod:`talos_core.evaluation.selection`)."""

    name: str
    method: str  # the result id the selection is stored under (``talos``, or a variant id)
    param: str  # sparsity, rank or lr
    table: pd.DataFrame  # task, value, best_alpha, target_val_acc, control_val_acc, score, single_val_acc, chosen
    choices: dict[str, Any]  # task -> chosen value
    values: list
    rule: str
    control_task: str | None
    keep: float | None
    meta: dict = field(default_factory=dict)

    @property
    def tasks(self) -> list[str]:
        return list(self.choices) or list(dict.fromkeys(self.table["task"].astype(str)))

    def curves(self) -> pd.DataFrame:
        """Every candidate's validation negation curve ``task, value, alpha, target_val_acc, control_val_acc``
        (empty when the result does not store them)."""
        cols = ["task", "value", "alpha", "target_val_acc", "control_val_acc"]
        rows = self.meta.get("curves")
        if not isinstance(rows, list) or not rows:
            return pd.DataFrame(columns=cols)
        try:
            return pd.DataFrame(rows).reindex(columns=cols)
        except Exception:  # malformed: show the rest of the result without them
            return pd.DataFrame(columns=cols)


def load_selection(root: str | Path, name: str) -> Selection:
    p, df = _read_kind_table(root, "selection", name)
    param = str(p["param"])
    raw = p["choices"]
    if not isinstance(raw, Mapping):
        raise CorruptResult(f"the selection result {name!r} has 'choices' that is not a mapping task -> choice")
    choices = {str(t): (c.get(param) if isinstance(c, Mapping) else c) for t, c in raw.items()}
    fields = schema.parse_result_name("selection", name) or {}
    keep = _num(p.get("keep"))
    return Selection(name, str(p.get("method") or fields.get("method")), param,
                     df.assign(task=df["task"].astype(str), chosen=df["chosen"].astype(bool)), choices,
                     list(p.get("values") or []), str(p.get("rule") or ""), p.get("control_task"),
                     keep if math.isfinite(keep) else None, _meta(p))


@dataclass(frozen=True)
class LrCheck:
    """SCHEMA ``lr_check``: one method's learning rate re-checked at the step budget — validation accuracy per task
    and candidate lr, the mean per lr, the best and whether it is the suite's own
    (:mod:`talos_core.evaluation.lr_check`)."""

    name: str
    method: str
    table: pd.DataFrame  # task, lr, val_acc, run_id, steps
    suite_lr: float
    best_lr: float
    agrees: bool
    means: dict[float, float]  # lr -> mean validation accuracy over the check's tasks (candidates' order)
    budget: int | None
    rule: str
    row: str  # the result id whose runs the suite's own lr reuses (``talos-k0.9``, or the method)
    meta: dict = field(default_factory=dict)

    @property
    def tasks(self) -> list[str]:
        return list(dict.fromkeys(self.table["task"].astype(str)))


def load_lr_check(root: str | Path, name: str) -> LrCheck:
    p, df = _read_kind_table(root, "lr_check", name, empty="has no runs")
    df = df.assign(task=df["task"].astype(str), lr=pd.to_numeric(df["lr"], errors="coerce"),
                   val_acc=pd.to_numeric(df["val_acc"], errors="coerce"))
    suite_lr, best_lr = _num(p["suite_lr"]), _num(p["best_lr"])
    if not (math.isfinite(suite_lr) and math.isfinite(best_lr)) or df["lr"].isna().any():
        raise CorruptResult(f"the lr_check result {name!r} has a non-numeric learning rate")
    means = {}
    for rec in p["means"] if isinstance(p["means"], list) else []:
        lr, m = _num(rec.get("lr")) if isinstance(rec, Mapping) else float("nan"), \
            _num(rec.get("val_acc")) if isinstance(rec, Mapping) else float("nan")
        if not math.isfinite(lr):
            raise CorruptResult(f"the lr_check result {name!r} has a malformed 'means' entry {rec!r}")
        means[lr] = m
    if not means:
        raise CorruptResult(f"the lr_check result {name!r} has no mean per learning rate")
    fields = schema.parse_result_name("lr_check", name) or {}
    method = str(p.get("method") or fields.get("method"))
    budget = p.get("budget")
    return LrCheck(name, method, df.reset_index(drop=True), suite_lr, best_lr, bool(p["agrees"]), means,
                   _int_or_none(budget) if not isinstance(budget, list) else None, str(p.get("rule") or ""),
                   str(p.get("row") or method), _meta(p))


def _table_loader(kind: str) -> Callable[[str | Path, str], pd.DataFrame]:
    return lambda root, name: load_table(root, kind, name)


LOADERS: dict[str, Callable[[str | Path, str], Any]] = {
    **{k: _table_loader(k) for k, info in schema.KINDS.items() if info.table},
    "addition": load_addition, "negation": load_negation, "disentanglement": load_disentanglement,
    "localization": load_localization, "sharing": load_sharing, "mask_iou": load_mask_iou,
    "suite": load_suite, "preview": result_arrays.load_preview, "learning_curve": load_learning_curve,
    "selection": load_selection, "lr_check": load_lr_check,
}
"""The typed loader of every result kind (tables without a loader of their own: :func:`load_table`)."""


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
    the single-task models of the method they merge, ``nonlinear``). Missing entries are NaN."""
    nan = float("nan")
    if single is None or single.empty:
        return [nan] * len(tasks), [nan] * len(tasks)
    cols = ("split", "method", "task", "zero_shot_acc", "finetuned_acc")  # only these: to_dict("records") of the
    rows = [dict(zip(cols, vals)) for vals in zip(*(single[c].tolist() for c in cols))]  # frame cost ~10x more
    if any(r["split"] == split for r in rows):
        rows = [r for r in rows if r["split"] == split]
    methods = {r["method"] for r in rows}
    info = schema.METHODS.get(method)
    m = method if method in methods or info is None or not info.posthoc else info.base_method
    zs: dict[str, float] = {}
    ft: dict[str, float] = {}
    for r in rows:
        zs.setdefault(r["task"], _num(r["zero_shot_acc"]))
        if r["method"] == m:
            ft.setdefault(r["task"], _num(r["finetuned_acc"]))
    return [zs.get(t, nan) for t in tasks], [ft.get(t, nan) for t in tasks]


def count_test_examples(payload: Mapping[str, Any] | None) -> dict[str, int]:
    """``{task: number of test examples}`` from a ``single`` result's ``examples`` (per method and task, a
    string of 0/1 per test example; absent in stores written before it): the largest count seen per task."""
    out: dict[str, int] = {}
    examples = (payload or {}).get("examples")
    if not isinstance(examples, Mapping):
        return out
    for per_task in examples.values():
        if not isinstance(per_task, Mapping):
            continue
        for task, bits in per_task.items():
            if isinstance(bits, Mapping):
                n = max((len(v) for v in bits.values() if isinstance(v, str)), default=0)
                if n:
                    out[str(task)] = max(out.get(str(task), 0), n)
    return out


def format_choice(param: str, value: Any) -> str:
    """A chosen hyperparameter as shown in tables: sparsity and learning rate with ``%g``, rank as an integer.

    >>> format_choice("sparsity", 0.95), format_choice("rank", 16.0), format_choice("lr", 0.0001)
    ('0.95', '16', '0.0001')
    >>> format_choice("lr", None)
    '—'
    """
    v = _num(value)
    if not math.isfinite(v):
        return "—" if value is None or isinstance(value, (int, float)) else str(value)
    if param == "rank" and float(v).is_integer():
        return str(int(v))
    return f"{v:g}"


def chosen_hyperparameters(selections: Iterable[Selection], tasks: Sequence[str] | None = None) -> pd.DataFrame:
    """The per-task choices of stored selections as one table: a row per task, a column per selection
    named ``<method label> · <param>`` (e.g. ``TaLoS · sparsity``, ``L-LoRA · rank``; variant ids get their
    readable label, :func:`talos_core.schema.method_label`), cells :func:`format_choice`. ``tasks`` fixes the
    rows (default: every task of any selection, in order of appearance); a task without a choice shows ``—``.

    >>> sel = Selection("s", "talos", "sparsity", pd.DataFrame(), {"a": 0.9, "b": 0.5}, [0.5, 0.9], "", None, None)
    >>> chosen_hyperparameters([sel]).to_dict("records")
    [{'task': 'a', 'TaLoS · sparsity': '0.9'}, {'task': 'b', 'TaLoS · sparsity': '0.5'}]
    """
    sels = list(selections)
    rows = list(tasks) if tasks is not None else list(dict.fromkeys(t for s in sels for t in s.tasks))
    out = pd.DataFrame({"task": rows})
    for s in sels:
        col = f"{schema.method_label(s.method)} · {s.param}"
        out[col] = [format_choice(s.param, s.choices.get(t)) if t in s.choices else "—" for t in rows]
    return out


def selection_candidates(sel: Selection) -> pd.DataFrame:
    """Every candidate of a selection as a readable table: ``task, <param>, score (val negation target acc),
    at α, control val acc, single-task val acc, chosen`` (✓ on the chosen row of each task)."""
    t = sel.table
    return pd.DataFrame({
        "task": t["task"].astype(str),
        sel.param: [format_choice(sel.param, v) for v in t["value"]],
        "score (val target acc)": pd.to_numeric(t["score"], errors="coerce"),
        "at α": pd.to_numeric(t["best_alpha"], errors="coerce"),
        "control val acc": pd.to_numeric(t["control_val_acc"], errors="coerce"),
        "single-task val acc": pd.to_numeric(t["single_val_acc"], errors="coerce"),
        "chosen": ["✓" if c else "" for c in t["chosen"]],
    })


def xi_region_mean(payload: Mapping[str, Any], region: Sequence[float] | None = None) -> float:
    """Mean ξ over the grid points inside the square ``[lo, hi]²`` of ``region`` (default: the payload's own
    ``search_region``); NaN if none/absent."""
    region = payload.get("search_region") if region is None else region
    if region is None:
        return float("nan")
    a1, a2 = np.asarray(payload["alphas1"], dtype=float), np.asarray(payload["alphas2"], dtype=float)
    r1 = (a1 >= region[0]) & (a1 <= region[1])
    r2 = (a2 >= region[0]) & (a2 <= region[1])
    inside = np.asarray(payload["xi"], dtype=float)[np.ix_(r1, r2)]
    return float(inside.mean()) if inside.size else float("nan")


def shared_region(panels: Sequence[Mapping[str, Any]]) -> tuple[float, float] | None:
    """The α square every panel's method searched: the intersection of their ``search_region`` s (None when a panel
    has none or they do not overlap). Comparing mean ξ over one shared square keeps a method with a wider search
    range (a sparse one, × 1/(1 − k)) from being judged on a larger, more distant region.

    >>> shared_region([{"search_region": [0, 10]}, {"search_region": [0, 1]}])
    (0.0, 1.0)
    """
    regions = [p.get("search_region") for p in panels]
    if not regions or any(r is None for r in regions):
        return None
    lo, hi = max(float(r[0]) for r in regions), min(float(r[1]) for r in regions)
    return (lo, hi) if lo <= hi else None


def xi_at(payload: Mapping[str, Any], alpha: float) -> float:
    """ξ at the grid point nearest to (α, α), NaN when α lies outside the grid (more than one grid step away)."""
    a1, a2 = np.asarray(payload["alphas1"], dtype=float), np.asarray(payload["alphas2"], dtype=float)
    if not (np.isfinite(alpha) and a1.size and a2.size):
        return float("nan")
    i, j = int(np.abs(a1 - alpha).argmin()), int(np.abs(a2 - alpha).argmin())
    step1 = float(np.diff(a1).max()) if a1.size > 1 else 0.0
    step2 = float(np.diff(a2).max()) if a2.size > 1 else 0.0
    if abs(a1[i] - alpha) > step1 or abs(a2[j] - alpha) > step2:
        return float("nan")
    return float(np.asarray(payload["xi"], dtype=float)[i, j])


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
def _cached_preview(root: str, name: str, stamp: tuple) -> PreviewCache:
    return result_arrays.load_preview(root, name)


@_cache_data
def _cached_audit(root: str, suite: str, signature: tuple) -> tuple:
    from talos_core.evaluation.audit import audit_suite

    return tuple(audit_suite(root, suite))


def audit_flags(root: str | Path, suite: str) -> list:
    """Cached audit flags of ``suite`` (:func:`talos_core.evaluation.audit.audit_suite`; recomputed when a result is
    added or replaced); empty for a suite the store has no record of."""
    if not schema.result_path(root, "suite", suite).is_file():
        return []
    return list(_cached_audit(str(root), suite, store_signature(root)))


def index(root: str | Path) -> pd.DataFrame:
    """Cached :func:`store_index` (recomputed when a result is added or removed)."""
    return _cached_index(str(root), store_signature(root))


def get(kind: str, root: str | Path, name: str) -> Any:
    """Cached typed result ``kind``/``name`` (recomputed when its file changes)."""
    if kind not in LOADERS:
        raise TalosError(f"unknown result kind {kind!r}; choose one of: {', '.join(sorted(LOADERS))}")
    if kind == "preview":
        return get_preview(root, name)
    return _cached_result(kind, str(root), name, file_stamp(schema.result_path(root, kind, name)))


def get_preview(root: str | Path, name: str) -> PreviewCache:
    """Cached preview arrays (shared, read-only: never modify the returned arrays)."""
    meta, arrays = schema.preview_paths(root, name)
    return _cached_preview(str(root), name, (file_stamp(meta), file_stamp(arrays)))


@_cache_resource
def _cached_examples(root: str, name: str, stamp: tuple) -> result_arrays.ExampleSet:
    return result_arrays.load_examples(root, name)


def get_examples(root: str | Path, name: str) -> result_arrays.ExampleSet | None:
    """Cached per-example predictions (SCHEMA.md ``examples``; shared, read-only), ``None`` when not computed
    (a corrupt result raises)."""
    meta, arrays = schema.examples_paths(root, name)
    if not meta.is_file():
        return None
    return _cached_examples(str(root), name, (file_stamp(meta), file_stamp(arrays)))


@_cache_data
def _cached_test_examples(root: str, name: str, stamp: int) -> dict[str, int]:
    return count_test_examples(schema.read_result(root, "single", name))


def example_counts(root: str | Path, name: str) -> dict[str, int]:
    """Cached ``{task: number of test examples}`` of the single-task result ``name`` (empty when it records no
    per-example correctness; :func:`count_test_examples`)."""
    return _cached_test_examples(str(root), name, file_stamp(schema.result_path(root, "single", name)))


@_cache_data
def _cached_mask_diagnostics(root: str, name: str, stamp: int) -> pd.DataFrame:
    rows = schema.read_result(root, "masks", name).get("diagnostics") or []
    cols = ["task", "run_id", "moved", "zero_sensitivity", "tied"]
    if not isinstance(rows, list) or not all(isinstance(r, Mapping) for r in rows):
        raise CorruptResult(f"the masks result {name!r} has malformed 'diagnostics' (a list of records expected)")
    df = pd.DataFrame([{c: r.get(c) for c in cols} for r in rows], columns=cols)
    for c in ("moved", "zero_sensitivity", "tied"):
        df[c] = pd.to_numeric(df[c], errors="coerce")
        if ((df[c] < 0) | (df[c] > 1)).any():
            raise CorruptResult(f"the masks result {name!r} has a '{c}' diagnostic outside [0, 1]")
    return df


def mask_diagnostics(root: str | Path, name: str) -> pd.DataFrame:
    """The per-task mask diagnostics of the masks result ``name`` (SCHEMA.md ``masks``: ``task, run_id, moved,
    zero_sensitivity, tied``; empty for a result written before they were recorded)."""
    return _cached_mask_diagnostics(str(root), name, file_stamp(schema.result_path(root, "masks", name)))


def try_get(kind: str, root: str | Path, name: str) -> Any | None:
    """Like :func:`get` but ``None`` for a missing result (corrupt files still raise)."""
    try:
        return get(kind, root, name)
    except MissingResult:
        return None


def suite_record(root: str | Path, name: str) -> tuple[dict | None, str | None]:
    """``(record, problem)``: the suite record ``name`` (``None`` when missing or unreadable) and, for an
    unreadable one, its one-sentence problem — a corrupt record costs its description, never the pages."""
    try:
        record = try_get("suite", root, name)
    except CorruptResult as exc:
        return None, str(exc)
    return (record if isinstance(record, dict) else None), None


@_cache_resource
def _exact_context(root: str, name: str, stamp: tuple) -> tuple:
    """The evaluation context, task vectors and mode of the examples ``name`` (a model load: kept per process)."""
    from talos_core.evaluation.examples import exact_context
    from talos_core.store import Store

    ex = get_examples(root, name)
    if ex is None:
        raise MissingResult(f"no per-example predictions {name!r} in {root}")
    return exact_context(Store(root), ex, device="cpu")


def exact_predictions(root: str | Path, name: str, ex: result_arrays.ExampleSet, task: str,
                      alphas: Mapping[str, float]) -> np.ndarray:
    """The exact model's predictions on ``task``'s fixed examples at ``alphas`` (task → α; a negated task: a negative
    α), evaluated now from the runs' task vectors (:func:`talos_core.evaluation.examples.exact_predictions`)."""
    from talos_core.evaluation.examples import exact_predictions as predict

    meta, arrays = schema.examples_paths(root, name)
    ctx, vectors, mode = _exact_context(str(root), name, (file_stamp(meta), file_stamp(arrays)))
    return predict(ctx, vectors, mode, ex, task, alphas)
