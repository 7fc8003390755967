"""Reading a results store for the dashboard, only through :mod:`talos_core.schema` (its code twin of
``talos_core/evaluation/SCHEMA.md``: result kinds and names, paths, the JSON and preview readers).

Two layers:

* **pure loaders** (``load_*``, :func:`store_index`, :func:`snap`, ...) that take a store folder and a
  result name and return typed, validated objects, raising a :class:`~talos_core.schema.StoreProblem`
  with one sentence for an empty store, a missing result or a corrupt file (``data_loaders``), and the pure
  computations the pages make from them (``data_derived``); this module re-exports both (a function is patched
  for a test in its own module, not here);
* **cached wrappers** (:func:`get`, :func:`get_preview`, :func:`index`) that key the pure loaders on
  the file's modification time, so a slider move re-renders from memory and a result written by a
  background run shows up on the next rerun.

Example (no Streamlit server needed)::

    >>> import numpy as np
    >>> snap([0.0, 0.05, 0.1], 0.062)
    (0.05, True)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dashboard.data_derived import (
    addition_at,
    average_curve,
    chosen_hyperparameters,
    count_test_examples,
    format_choice,
    localization_table,
    masks_with,
    negation_at,
    selection_candidates,
    shared_region,
    single_reference,
    snap,
    xi_at,
    xi_long_table,
    xi_region_mean,
)
from dashboard.data_loaders import (
    INDEX_COLUMNS,
    LOADERS,
    Addition,
    LearningCurve,
    LrCheck,
    Matrix,
    Negation,
    Selection,
    available,
    check_store,
    load_addition,
    load_disentanglement,
    load_learning_curve,
    load_localization,
    load_lr_check,
    load_mask_iou,
    load_negation,
    load_selection,
    load_sharing,
    load_suite,
    load_table,
    order_methods,
    store_index,
    store_signature,
)
from talos_core import result_arrays, schema
from talos_core.errors import TalosError
from talos_core.result_arrays import PreviewCache
from talos_core.schema import CorruptResult, MissingResult

__all__ = ["Addition", "INDEX_COLUMNS", "LOADERS", "LearningCurve", "LrCheck", "Matrix", "Negation", "Selection",
           "addition_at", "audit_flags", "available", "average_curve", "check_store", "chosen_hyperparameters",
           "count_test_examples", "exact_predictions", "example_counts", "file_stamp", "format_choice", "get",
           "get_examples", "get_preview", "index", "load_addition", "load_disentanglement", "load_learning_curve",
           "load_localization", "load_lr_check", "load_mask_iou", "load_negation", "load_selection", "load_sharing",
           "load_suite", "load_table", "localization_table", "mask_diagnostics", "masks_with",
           "negation_at", "order_methods", "selection_candidates", "shared_region", "single_reference", "snap",
           "store_index", "store_signature", "suite_record", "try_get", "xi_at", "xi_long_table", "xi_region_mean"]


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


@_cache_data
def _cached_choices(root: str, suite: str, signature: tuple) -> pd.DataFrame:
    from talos_core.suites.report import choices_table

    return choices_table(root, suite)


def row_choices(root: str | Path, suite: str) -> pd.DataFrame:
    """Cached "what each row chose" of ``suite`` (:func:`talos_core.suites.report.choices_table`, as ``talos report``
    prints it; recomputed when a result changes); empty for a suite the store has no record of."""
    from talos_core.suites.report import CHOICE_COLUMNS

    if not schema.result_path(root, "suite", suite).is_file():
        return pd.DataFrame(columns=list(CHOICE_COLUMNS))
    return _cached_choices(str(root), suite, store_signature(root))


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
