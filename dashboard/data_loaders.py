"""The dashboard's pure loaders of a results store (no Streamlit), only through :mod:`talos_core.schema`: the store's
index (:func:`store_index`, :func:`available`), and one typed, validated loader per result kind (:data:`LOADERS`),
each raising a :class:`~talos_core.schema.StoreProblem` with one sentence for an empty store, a missing result or a
corrupt file. :mod:`dashboard.data` re-exports them beside its cached wrappers.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from talos_core import result_arrays, schema
from talos_core.errors import TalosError
from talos_core.schema import CorruptResult, EmptyStore, StoreNotFound

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
    step budget chosen from the curves (where they flatten;
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
