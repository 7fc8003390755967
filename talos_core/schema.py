"""The store's format in one torch-free module: result kinds, names and paths, readers, method catalogue.

Engine and dashboard both import this module (and nothing heavier) to agree on what a store holds:

* **names**: :func:`slug`, :func:`check_suite`, :func:`result_name` and :func:`parse_result_name`;
* **result kinds**: :data:`KINDS` (:class:`ResultKind`: the parts of a result's name, its table's
  columns, its required fields);
* **paths**: :func:`result_path` (``results/<kind>/<name>.json``), :func:`preview_paths` (plus the
  ``.safetensors`` sibling of a preview), :func:`iter_results`;
* **readers**: :func:`read_result` (one JSON result, :class:`MissingResult` / :class:`CorruptResult`
  with one sentence naming the file) and the linearized preview (:class:`PreviewCache`,
  :func:`load_preview`, :func:`preview_logits`, :func:`preview_accuracy`; numpy only);
* **where stores are**: :func:`default_store` (commands that write), :func:`viewer_store` (the viewers);
* **the method catalogue**: :data:`METHODS` (:class:`MethodInfo`), :func:`method_label`, :func:`method_family`;
  variant ids (a method with fixed hyperparameters as its own row): :func:`variant_id`, :func:`parse_variant`,
  :func:`base_method_of`.

``talos_core/evaluation/SCHEMA.md`` describes the same layout for people; this module is its code twin,
and ``tests/test_schema.py`` keeps the two in step. Importing it never imports torch (nor pandas).

>>> result_name("default", "clip:ViT-B-32:openai", "talos")
'default__clip-ViT-B-32-openai__talos'
>>> parse_result_name("disentanglement", "vision__tiny-clip__talos__digits__mnist")["task2"]
'mnist'
>>> method_info("lota").calibrates, method_info("ties").kind
(True, 'posthoc')
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from talos_core.errors import TalosError, check_number, is_int, is_number, unknown
from talos_core.methods.declaration import EvalMode as EvalMode  # re-exported: the layers read it here
from talos_core.methods.declaration import MethodDeclaration, MethodKind
from talos_core.methods.registry import DECLARATIONS

# --------------------------------------------------------------------------------------------
# names
# --------------------------------------------------------------------------------------------
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
SEP = "__"
"""Separator of the parts of a result name."""


def slug(text: str) -> str:
    """Replace anything not ``[A-Za-z0-9._-]`` (ASCII only) by ``-``.

    >>> slug("hf-encoder:org/model"), slug("café")
    ('hf-encoder-org-model', 'caf-')
    """
    return _UNSAFE.sub("-", str(text))


def check_suite(suite: str) -> str:
    """A suite name must be non-empty, made of ``[A-Za-z0-9._-]`` and contain no ``__``."""
    if not isinstance(suite, str) or not suite or _UNSAFE.search(suite) or SEP in suite:
        raise TalosError(f"suite name must be non-empty letters, digits, '.', '_' or '-' without '__', "
                         f"got {suite!r}")
    return suite


def result_name(suite: str, model: str, *parts: str) -> str:
    """``<suite>__<slug(model)>__<slug(part)>...``."""
    return SEP.join([check_suite(suite), slug(model), *(slug(p) for p in parts)])


# --------------------------------------------------------------------------------------------
# result kinds
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ResultKind:
    """One kind of result file ``results/<name>/<result name>.json`` (a row of SCHEMA.md's table).

    ``parts``: the fields of a result name after ``<suite>`` (``("model", "method")`` for
    ``<suite>__<model>__<method>``). ``columns``: the columns of its table, for kinds whose payload is a
    table ``{"columns": [...], "records": [...], ...}`` (writers may add more, readers may rely on these).
    ``fields``: other top-level keys every payload has. ``pair_columns``: ``mask_iou`` only: its results
    may also be named ``<suite>__<model>__<method>__vs__<method2>``, a table with these columns.
    ``optional_columns`` / ``optional_fields``: columns and keys that current writers add but results
    written before them lack (per-example test correctness and 95% bootstrap intervals); readers must
    accept their absence (a missing interval column reads as NaN: :func:`interval_columns`).
    """

    name: str
    parts: tuple[str, ...]
    columns: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()
    pair_columns: tuple[str, ...] = ()
    optional_columns: tuple[str, ...] = ()
    optional_fields: tuple[str, ...] = ()

    @property
    def table(self) -> bool:
        return bool(self.columns)


PAIR = "vs"
"""The literal part between the two methods of a cross-method ``mask_iou`` name."""

INTERVAL_SUFFIXES: tuple[str, str] = ("_lo", "_hi")
"""Suffixes of the columns holding a mean's 95% bootstrap interval (``addition_abs_lo``, ``addition_abs_hi``)."""


def interval_columns(*metrics: str) -> tuple[str, ...]:
    """``<metric>_lo, <metric>_hi`` for each metric, in order.

    >>> interval_columns("addition_abs")
    ('addition_abs_lo', 'addition_abs_hi')
    """
    return tuple(f"{m}{sfx}" for m in metrics for sfx in INTERVAL_SUFFIXES)


COMPARISON_MEANS: tuple[str, ...] = ("addition_abs", "addition_norm", "negation_target", "negation_control",
                                     "single_task_acc", "zero_shot_acc")
"""The comparison table's accuracy means, each with an interval (:func:`interval_columns`)."""

KINDS: dict[str, ResultKind] = {k.name: k for k in (
    ResultKind("single", ("model",), columns=("method", "task", "zero_shot_acc", "finetuned_acc", "split"),
               optional_fields=("examples",)),
    ResultKind("addition", ("model", "method"), columns=("alpha", "split", "task", "accuracy", "normalized_accuracy"),
               fields=("selected_alpha", "alpha_grid"),
               optional_fields=("ci95", "examples", "reference_examples", "bootstrap")),
    ResultKind("negation", ("model", "method"), columns=("target", "alpha", "split", "target_acc", "control_acc"),
               optional_fields=("ci95", "examples", "bootstrap")),
    ResultKind("disentanglement", ("model", "method", "task1", "task2"), fields=("alphas1", "alphas2", "xi")),
    ResultKind("localization", ("model", "method"), fields=("tasks", "matrix")),
    ResultKind("masks", ("model", "method"),
               columns=("task", "param", "block", "layer_type", "numel", "trainable", "density"),
               optional_fields=("diagnostics",)),
    ResultKind("mask_iou", ("model", "method"), fields=("tasks", "matrix"), pair_columns=("task", "iou")),
    ResultKind("sharing", ("model", "mode"), fields=("tasks", "matrix")),
    ResultKind("linearization", ("model",), columns=("method", "task", "finetuned_acc", "linearized_acc")),
    ResultKind("preview", ("model", "method"), fields=("tasks", "eval_tasks", "labels")),
    ResultKind("examples", ("model", "method"),
               fields=("tasks", "control_task", "eval_tasks", "indices", "labels", "classes", "modality",
                       "addition_alphas", "negation_alphas")),
    ResultKind("efficiency", ("model",),
               columns=("method", "task", "fwd_bwd_s_mean", "fwd_bwd_s_std", "opt_s_mean", "opt_s_std",
                        "calibration_s", "train_s", "peak_memory_mb", "peak_memory_kind", "trainable_entries")),
    ResultKind("comparison", ("model",),
               columns=("method", "addition_abs", "addition_norm", "negation_target", "negation_control",
                        "single_task_acc", "zero_shot_acc", "time_per_step_s", "peak_memory_mb"),
               optional_columns=interval_columns(*COMPARISON_MEANS)),
    ResultKind("sparsity_ablation", ("model", "method"),
               columns=("sparsity", "addition_abs", "addition_norm", "negation_target", "negation_control",
                        "single_task_acc"),
               optional_columns=interval_columns(*COMPARISON_MEANS[:5]), optional_fields=("examples", "bootstrap")),
    ResultKind("alpha_rule", ("model", "method"),
               columns=("rule", "alpha_max", "addition_alpha", "addition_abs", "addition_norm", "negation_target",
                        "negation_control"),
               fields=("negation_alphas", "runs")),
    ResultKind("selection", ("model", "method"),
               columns=("task", "value", "best_alpha", "target_val_acc", "control_val_acc", "score",
                        "single_val_acc", "chosen", "run_id"),
               fields=("param", "values", "choices", "overrides", "runs", "rule")),
    ResultKind("learning_curve", ("model", "method"), columns=("method", "task", "step", "val_acc"),
               fields=("budget", "rule")),
    ResultKind("lr_check", ("model", "method"), columns=("task", "lr", "val_acc", "run_id", "steps"),
               fields=("suite_lr", "best_lr", "agrees", "means", "rule", "budget")),
    ResultKind("suite", ()),
)}
"""Every result kind of a store, in SCHEMA.md's order."""

NAME_FIELDS: tuple[str, ...] = ("suite", "model", "method", "task1", "task2", "mode", "vs")
"""Every field a result name can have (the keys :func:`parse_result_name` may return)."""


def kind_info(kind: str) -> ResultKind:
    """The entry of ``kind``; an unknown kind is one :class:`TalosError` listing the choices."""
    if kind not in KINDS:
        raise unknown("result kind", kind, KINDS)
    return KINDS[kind]


def parse_result_name(kind: str, name: str) -> dict[str, str] | None:
    """Split a result name into its fields; ``None`` if it does not follow SCHEMA.md.

    >>> parse_result_name("addition", "text__minilm-l6__talos")
    {'suite': 'text', 'model': 'minilm-l6', 'method': 'talos'}
    >>> parse_result_name("mask_iou", "v__m__talos__vs__lota")["vs"]
    'lota'
    >>> parse_result_name("addition", "text__minilm-l6") is None
    True
    """
    info = KINDS.get(kind)
    parts = name.split(SEP)
    if info is None or not all(parts):
        return None
    suite, rest = parts[0], parts[1:]
    if info.pair_columns and len(rest) == len(info.parts) + 2 and rest[-2] == PAIR:
        return {"suite": suite, **dict(zip(info.parts, rest)), PAIR: rest[-1]}
    if len(rest) != len(info.parts):
        return None
    return {"suite": suite, **dict(zip(info.parts, rest))}


# --------------------------------------------------------------------------------------------
# paths
# --------------------------------------------------------------------------------------------
RESULTS_DIR = "results"


def results_dir(root: str | Path) -> Path:
    """``<store>/results``."""
    return Path(root) / RESULTS_DIR


def result_path(root: str | Path, kind: str, name: str) -> Path:
    """``<store>/results/<kind>/<name>.json``.

    >>> result_path("s", "addition", "text__m__talos").as_posix()
    's/results/addition/text__m__talos.json'
    """
    return results_dir(root) / kind / f"{name}.json"


def preview_paths(root: str | Path, name: str) -> tuple[Path, Path]:
    """A preview's JSON meta ``results/preview/<name>.json`` and its arrays, the ``.safetensors`` sibling."""
    meta = result_path(root, "preview", name)
    return meta, meta.with_suffix(".safetensors")


def examples_paths(root: str | Path, name: str) -> tuple[Path, Path]:
    """Per-example predictions' JSON meta ``results/examples/<name>.json`` and their ``.safetensors`` sibling."""
    meta = result_path(root, "examples", name)
    return meta, meta.with_suffix(".safetensors")


def iter_results(root: str | Path) -> Iterator[tuple[str, str, dict[str, str]]]:
    """``(kind, name, fields)`` of every result file in the store, sorted by kind then name.

    Files of unknown kinds, hidden files (temporary files of a writer) and names that do not follow
    SCHEMA.md are skipped.
    """
    folder = results_dir(root)
    if not folder.is_dir():
        return
    for kind_dir in sorted(folder.iterdir()):
        if kind_dir.name not in KINDS or not kind_dir.is_dir():
            continue
        for f in sorted(kind_dir.glob("*.json")):
            if f.name.startswith("."):
                continue
            fields = parse_result_name(kind_dir.name, f.stem)
            if fields is not None:
                yield kind_dir.name, f.stem, fields


# --------------------------------------------------------------------------------------------
# reading results
# --------------------------------------------------------------------------------------------
class StoreProblem(TalosError):
    """A problem with a store, as one sentence; ``level`` says how a viewer shows it (info or error)."""

    level = "error"


class StoreNotFound(StoreProblem):
    level = "error"


class EmptyStore(StoreProblem):
    level = "info"


class MissingResult(StoreProblem):
    """The result has not been computed (its file does not exist)."""

    level = "info"


class CorruptResult(StoreProblem):
    """The result's file exists but cannot be used (garbled, incomplete, or not following SCHEMA.md)."""

    level = "error"


def read_result(root: str | Path, kind: str, name: str) -> dict:
    """The JSON object in ``results/<kind>/<name>.json``.

    Raises :class:`MissingResult` when the file does not exist and :class:`CorruptResult` when it is not a
    JSON object; both name the file.
    """
    from talos_core.atomic import read_json

    path = result_path(root, kind, name)
    if not path.exists():
        raise MissingResult(f"the store has no {kind} result {name!r} ({path} does not exist); it has not been "
                            f"computed for this selection")
    try:
        payload = read_json(path)
    except TalosError as exc:
        raise CorruptResult(f"the {kind} result file {path} is corrupt and cannot be read ({exc}); "
                            f"delete it and recompute it") from None
    if not isinstance(payload, dict):
        raise CorruptResult(f"the {kind} result file {path} does not hold a JSON object; delete it and recompute it")
    problem = value_problem(kind, payload) or name_problem(kind, name, payload)
    if problem:
        raise CorruptResult(f"the {kind} result file {path} has {problem}; it was edited or damaged: delete it and "
                            f"recompute it")
    return payload


def name_problem(kind: str, name: str, payload: Mapping) -> str | None:
    """Where a result's own fields contradict its file name, as a phrase, else ``None``: a ``model``, ``suite``,
    ``method``, ... field (when the payload has one) must be the name's part of that field (a file copied over
    another's would otherwise be shown under the other's suite and model).

    >>> name_problem("comparison", "vision__efficientnet-lite0", {"model": "minilm-l6", "suite": "text"})
    "its suite field 'text', where its file name says 'vision'"
    """
    for key, part in (parse_result_name(kind, name) or {}).items():
        value = payload.get(key)
        if value is not None and not (isinstance(value, str) and slug(value) == part):
            return f"its {key} field {_shown(value)}, where its file name says {part!r}"
    return None


# --------------------------------------------------------------------------------------------
# values: the types and ranges of a result's numbers (checked by read_result, so no reader shows a wrong number)
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """What a value must be (``what``, for the sentence) and its test; ``null`` (not measured) passes when
    ``nullable``."""

    what: str
    ok: Callable[[Any], bool]
    nullable: bool = True

    def check(self, value: Any) -> bool:
        return (value is None and self.nullable) or self.ok(value)


def _nested(cell: Rule, depth: int) -> Callable[[Any], bool]:
    if depth == 0:
        return cell.check
    inner = _nested(cell, depth - 1)
    return lambda v: isinstance(v, list) and all(inner(x) for x in v)


ACCURACY = Rule("an accuracy in [0, 1]", lambda v: is_number(v) and 0 <= v <= 1)
NON_NEGATIVE = Rule("a finite number ≥ 0", lambda v: is_number(v) and v >= 0)
COUNT = Rule("a whole number ≥ 0", lambda v: is_int(v) and v >= 0)
FINITE = Rule("a finite number", is_number)
SPARSITY = Rule("a sparsity in [0, 1)", lambda v: is_number(v) and 0 <= v < 1)
TEXT = Rule("a string", lambda v: isinstance(v, str), nullable=False)
GRID = Rule("a sorted list of finite numbers", lambda v: isinstance(v, list) and all(map(is_number, v))
            and all(a <= b for a, b in zip(v, v[1:])), nullable=False)
NAMES = Rule("a list of strings", lambda v: isinstance(v, list) and all(isinstance(t, str) for t in v),
             nullable=False)
ACCURACY_MATRIX = Rule("a matrix of accuracies in [0, 1]", _nested(ACCURACY, 2), nullable=False)
RATIO_MATRIX = Rule("a matrix of finite numbers ≥ 0", _nested(NON_NEGATIVE, 2), nullable=False)


def required(rule: Rule) -> Rule:
    """``rule`` without ``null``."""
    return Rule(rule.what, rule.ok, nullable=False)


def per_key(rule: Rule) -> Rule:
    """An object whose every value follows ``rule`` (``{task: ...}``)."""
    return Rule(f"an object of {rule.what.removeprefix('a ').removeprefix('an ')}s",
                lambda v: isinstance(v, dict) and all(rule.check(x) for x in v.values()), nullable=False)


_ACCURACY_COLUMNS = ("accuracy", "zero_shot_acc", "finetuned_acc", "target_acc", "control_acc", "linearized_acc",
                     "val_acc", "target_val_acc", "control_val_acc", "single_val_acc", "addition_abs",
                     "negation_target", "negation_control", "single_task_acc", "density", "iou")
_RATIO_COLUMNS = ("normalized_accuracy", "addition_norm", "time_per_step_s", "peak_memory_mb", "fwd_bwd_s_mean",
                  "fwd_bwd_s_std", "opt_s_mean", "opt_s_std", "calibration_s", "train_s", "lr")
COLUMN_RULES: dict[str, Rule] = {
    **{c: ACCURACY for c in _ACCURACY_COLUMNS}, **{c: NON_NEGATIVE for c in _RATIO_COLUMNS},
    **{c: COUNT for c in ("numel", "trainable", "trainable_entries", "steps", "step")},
    **{c: FINITE for c in ("alpha", "best_alpha", "score", "value")}, "sparsity": SPARSITY,
    **{c: TEXT for c in ("method", "task", "split", "target", "param", "layer_type")}}
"""The rule of every table column with one (by name, in every kind; an interval column ``<m>_lo``/``<m>_hi``
follows ``<m>``'s); other columns are not checked."""

IDENTITY_COLUMNS = ("method", "task", "target", "param")
"""Columns that say what a row is about: a table that has one needs it in every row (a row without its method would
be shown under another name, or as ``nan``)."""

INTERVAL = Rule("an interval [low, high] of finite numbers, low ≤ high", lambda v: isinstance(v, list) and len(v) == 2
                and all(map(is_number, v)) and v[0] <= v[1], nullable=False)
FIELD_RULES: dict[str, dict[str, Rule]] = {
    "addition": {"selected_alpha": required(FINITE), "alpha_grid": GRID,
                 "sparsity": SPARSITY, "ci95": per_key(INTERVAL)},
    "negation": {"alpha_grid": GRID, "selected": per_key(FINITE), "threshold": ACCURACY, "ci95": per_key(INTERVAL),
                 "control_val_n": COUNT},
    "disentanglement": {"alphas1": GRID, "alphas2": GRID, "xi": RATIO_MATRIX},
    "localization": {"matrix": RATIO_MATRIX, "accuracy": ACCURACY_MATRIX},
    "mask_iou": {"matrix": ACCURACY_MATRIX},
    "sharing": {"matrix": RATIO_MATRIX, "accuracy": ACCURACY_MATRIX, "fraction": ACCURACY},
    "examples": {"addition_alphas": GRID, "negation_alphas": per_key(GRID)},
    "learning_curve": {"budget": COUNT, "zero_shot": per_key(ACCURACY)},
    "lr_check": {"budget": COUNT, "suite_lr": NON_NEGATIVE, "best_lr": NON_NEGATIVE},
    "suite": {"wall_time_s": required(NON_NEGATIVE), "seed": required(COUNT), "model": TEXT, "scale": TEXT,
              "control_task": TEXT, "device": TEXT, **{k: NAMES for k in ("tasks", "methods", "posthoc")}},
}
"""The rules of top-level fields (a field that is absent is left to :func:`require_fields`)."""

ROW_KEYS: dict[str, tuple[str, ...]] = {
    "single": ("method", "task", "split"), "addition": ("alpha", "split", "task"),
    "negation": ("target", "alpha", "split"), "masks": ("task", "param"), "mask_iou": ("task",),
    "linearization": ("method", "task"), "efficiency": ("method", "task"), "comparison": ("method",),
    "sparsity_ablation": ("sparsity",), "alpha_rule": ("rule",), "selection": ("task", "value"),
    "learning_curve": ("method", "task", "step"), "lr_check": ("task", "lr")}
"""The columns that say which row of a table kind is which: no two rows of one table share all of them (a repeated
row would be shown twice, or counted twice in a mean)."""


def value_problem(kind: str, payload: Mapping) -> str | None:
    """The first value of ``payload`` (a ``kind`` result) that breaks :data:`FIELD_RULES` or :data:`COLUMN_RULES`,
    as a phrase (``"addition_abs = '0.5' in row 3 of its table, which must be an accuracy in [0, 1]"``), or
    ``None``.

    >>> value_problem("comparison", {"records": [{"method": "talos", "addition_abs": 7.5}]})
    'addition_abs = 7.5 in row 1 of its table, which must be an accuracy in [0, 1]'
    """
    for key, rule in FIELD_RULES.get(kind, {}).items():
        if key in payload and not rule.check(payload[key]):
            return f"{key} = {_shown(payload[key])}, which must be {rule.what}"
    if "columns" in payload and not NAMES.check(payload["columns"]):
        return f"columns = {_shown(payload['columns'])}, which must be {NAMES.what}"
    if "records" not in payload:
        return _summary_outside_interval(payload)
    records = payload["records"]
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        return "'records' that is not a list of objects"
    identity = [c for c in IDENTITY_COLUMNS if c in (payload.get("columns") or ())]
    for i, row in enumerate(records, 1):
        for col in identity:
            if row.get(col) is None:
                return f"row {i} of its table without its {col}"
        for col, value in row.items():
            rule = COLUMN_RULES.get(col) or COLUMN_RULES.get(col.removesuffix("_lo").removesuffix("_hi"))
            if rule is not None and not rule.check(value):
                return f"{col} = {_shown(value)} in row {i} of its table, which must be {rule.what}"
        problem = _interval_problem(row)
        if problem:
            return f"{problem} in row {i} of its table"
    return _repeated_row(kind, records) or _summary_outside_interval(payload)


def _interval_problem(row: Mapping) -> str | None:
    """A value outside its own 95% interval (``<m>`` and ``<m>_lo``/``<m>_hi``, each measured), or an interval whose
    low end is above its high end, as a phrase; ``None`` when they agree."""
    low_sfx, high_sfx = INTERVAL_SUFFIXES
    for col, low in row.items():
        if not col.endswith(low_sfx) or not is_number(low):
            continue
        metric = col.removesuffix(low_sfx)
        high, value = row.get(metric + high_sfx), row.get(metric)
        if is_number(high) and low > high:
            return f"the interval {metric} [{low!r}, {high!r}], whose low end is above its high end"
        if is_number(high) and is_number(value) and not low - 1e-9 <= value <= high + 1e-9:
            return f"{metric} = {value!r} outside its own interval [{low!r}, {high!r}]"
    return None


def _repeated_row(kind: str, records: Sequence[Mapping]) -> str | None:
    key = ROW_KEYS.get(kind, ())
    if not key or not all(c in r for r in records for c in key):
        return None
    seen: dict[tuple, int] = {}
    for i, row in enumerate(records, 1):
        ident = tuple(repr(row[c]) for c in key)
        if ident in seen:
            which = ", ".join(f"{c} {_shown(row[c])}" for c in key)
            return f"row {i} of its table repeating row {seen[ident]} ({which})"
        seen[ident] = i
    return None


def _summary_outside_interval(payload: Mapping) -> str | None:
    """A summary mean outside its own ``ci95`` interval (addition, negation results)."""
    summary, intervals = payload.get("summary"), payload.get("ci95")
    if not isinstance(summary, Mapping) or not isinstance(intervals, Mapping):
        return None
    for key, pair in intervals.items():
        value = summary.get(key)
        if not INTERVAL.check(pair) or not is_number(value):
            continue
        low, high = pair
        if not low - 1e-9 <= value <= high + 1e-9:
            return f"summary {key} = {value!r} outside its own interval ci95 [{low!r}, {high!r}]"
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def require_fields(payload: Mapping, kind: str, name: str, keys: Sequence[str] | None = None) -> None:
    """:class:`CorruptResult` unless ``payload`` has ``keys`` (default: the kind's required fields)."""
    keys = kind_info(kind).fields if keys is None else keys
    missing = [k for k in keys if k not in payload]
    if missing:
        raise CorruptResult(f"the {kind} result {name!r} lacks field(s) {', '.join(missing)} required by "
                            f"SCHEMA.md; recompute it with the current talos version")


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


# --------------------------------------------------------------------------------------------
# where stores are
# --------------------------------------------------------------------------------------------
STORE_ENV = "TALOS_STORE"
USER_STORE = "runs"
"""The user's own store, relative to the working directory."""


def _env_store(env: Mapping[str, str] | None) -> Path | None:
    env = os.environ if env is None else env
    value = env.get(STORE_ENV, "").strip()
    return Path(value).expanduser() if value else None


def default_store(env: Mapping[str, str] | None = None) -> Path:
    """The store a command that computes uses without ``--store``: ``$TALOS_STORE`` if set, else ``./runs``.

    The rule of ``talos finetune``, ``runs``, ``evaluate`` and ``suite``; the viewers (``talos dashboard``,
    ``talos report``) open :func:`viewer_store` instead.

    >>> default_store({"TALOS_STORE": "/tmp/s"}), default_store({})
    (PosixPath('/tmp/s'), PosixPath('runs'))
    """
    return _env_store(env) or Path(USER_STORE)


def shipped_store() -> Path | None:
    """The shipped results ``cached_results/`` of a source checkout (``None`` where there is none,
    e.g. when talos_core is installed from a wheel)."""
    path = Path(__file__).resolve().parent.parent / "cached_results"
    return path if path.is_dir() else None


def viewer_store(env: Mapping[str, str] | None = None) -> Path:
    """The store a viewer (``talos dashboard``, ``talos report``) opens without ``--store``:
    ``$TALOS_STORE`` if set, else the shipped results (:func:`shipped_store`), else ``./runs``.

    >>> viewer_store({"TALOS_STORE": "/tmp/s"})
    PosixPath('/tmp/s')
    """
    return _env_store(env) or shipped_store() or Path(USER_STORE)


# --------------------------------------------------------------------------------------------
# the method catalogue
# --------------------------------------------------------------------------------------------
FAMILIES: tuple[str, ...] = ("full fine-tuning", "post-hoc", "parameter-efficient", "ablation", "imported")
"""Method families in the order of the paper's tables (paper Sec. 5: (i) full fine-tuning, (ii) post-hoc
methods on non-linear FT vectors, (iii) parameter-efficient fine-tuning, where the paper also places
TaLoS; plus our ablation controls, and the checkpoints fine-tuned elsewhere and brought in with
``talos import``, last)."""


MethodInfo = MethodDeclaration
"""What every layer needs to know about a method, without running it: its declaration
(:class:`~talos_core.methods.declaration.MethodDeclaration`)."""

METHODS: dict[str, MethodInfo] = {d.name: d for d in DECLARATIONS}
"""Every fine-tuning and post-hoc method, in the paper's table order (controls last), from the method registry
(:data:`talos_core.methods.registry.DECLARATIONS`)."""


def method_info(name: str, kind: MethodKind | None = None) -> MethodInfo:
    """The catalogue entry of ``name``; an unknown name, or one of another ``kind`` than asked for, is one
    :class:`TalosError`."""
    if name not in METHODS:
        raise unknown("method", name, METHODS)
    info = METHODS[name]
    if kind is not None and info.kind != kind:
        what = {"finetune": "fine-tuning", "posthoc": "post-hoc"}
        raise TalosError(f"method {name!r} is a {what[info.kind]} method in the catalogue, not {what[kind]}")
    return info


def method_label(name: str) -> str:
    """Display name as in the paper's tables (``"talos"`` → ``"TaLoS"``), variants (:func:`variant_id`) with
    their fixed hyperparameters; unknown names are returned as given.

    >>> method_label("tall_consensus"), method_label("talos-k0.9"), method_label("my-method")
    ('TALL Mask / Consensus', 'TaLoS (k = 0.9)', 'my-method')
    """
    info = METHODS.get(name)
    if info is not None:
        return info.label
    parsed = parse_variant(name)
    if parsed is None:
        return name
    base, params = parsed
    return f"{METHODS[base].label} ({', '.join(f'{VARIANT_SYMBOLS[k]} = {v:g}' for k, v in params.items())})"


def method_family(name: str) -> str:
    """The family of a fine-tuning or post-hoc method or of a variant of one (see :data:`FAMILIES`).

    >>> method_family("linearized"), method_family("llora-r64")
    ('full fine-tuning', 'parameter-efficient')
    """
    return method_info(base_method_of(name) or name).family


# --------------------------------------------------------------------------------------------
# method variants: a method with fixed hyperparameters, reported as its own row
# --------------------------------------------------------------------------------------------
_TRAINING_TAGS: dict[str, str] = {"lr": "lr"}  # a training setting every method has, not a method's hyperparameter

_METHOD_TAGS: dict[str, str] = {p.name: p.tag for d in DECLARATIONS for p in d.params if p.tag}

VARIANT_PARAMS: dict[str, str] = {**dict(sorted(_METHOD_TAGS.items(), key=lambda item: item[1])), **_TRAINING_TAGS}
"""Hyperparameters a variant id may fix, and their tag in the id (``talos-k0.9``, ``llora-r16``, ``talos-lr0.001``):
the tagged parameters of the declarations, and the learning rate."""

VARIANT_SYMBOLS: dict[str, str] = dict(VARIANT_PARAMS)
"""How a variant's label names each hyperparameter (``TaLoS (k = 0.9)``)."""

#: option values of the later post-hoc merges that results stored before the option existed were computed with
#: (the options' defaults then changed to their authors' code): a stored result whose hyperparameters lack an
#: option reads as this value, so re-merging it reproduces the stored numbers (:func:`stored_hyperparameters`)
POSTHOC_LEGACY_OPTIONS: dict[str, dict[str, Any]] = {
    "iso_c": {"nonmatrix": "sum"}, "iso_cts": {"nonmatrix": "sum"}, "lines": {"nonblock": "nearest"}}


def stored_hyperparameters(method: str, hyperparameters: Mapping[str, Any]) -> dict[str, Any]:
    """A stored post-hoc result's hyperparameters as they were merged with: every labelled option it lacks at its
    :data:`POSTHOC_LEGACY_OPTIONS` value (results written since record every option).

    >>> stored_hyperparameters("iso_c", {}), stored_hyperparameters("iso_c", {"nonmatrix": "mean"})
    ({'nonmatrix': 'sum'}, {'nonmatrix': 'mean'})
    """
    return {**POSTHOC_LEGACY_OPTIONS.get(method, {}), **dict(hyperparameters)}


_VARIANT_PART = re.compile(rf"^({'|'.join(VARIANT_PARAMS.values())})([0-9]+(?:\.[0-9]+)?)$")


def _num_text(value: float) -> str:
    """Positional notation, no exponent (so no ``-`` inside a part): ``1e-05`` → ``0.00001``."""
    from decimal import Decimal

    if isinstance(value, int):
        return str(value)
    text = format(Decimal(repr(float(value))), "f")
    return text[:-2] if text.endswith(".0") else text


def variant_id(method: str, **params: float) -> str:
    """The result id of ``method`` with fixed hyperparameters (one of :data:`VARIANT_PARAMS`), e.g. the
    fixed-sparsity TaLoS row next to the per-task selected one (issue 13: "the fixed-0.9 TaLoS row stays
    available as a separate, labelled row"). Result names use it as their ``<method>`` part.

    >>> variant_id("talos", sparsity=0.9), variant_id("llora", rank=16), variant_id("talos", sparsity=0.9, lr=1e-3)
    ('talos-k0.9', 'llora-r16', 'talos-k0.9-lr0.001')
    >>> base_method_of("talos-k0.9"), base_method_of("talos-top-k0.5"), base_method_of("talos")
    ('talos', 'talos-top', 'talos')
    """
    method_info(method)
    if not params:
        raise TalosError(f"a variant of {method!r} fixes at least one of {', '.join(VARIANT_PARAMS)}")
    parts = [method]
    for key, value in params.items():
        if key not in VARIANT_PARAMS:
            raise unknown("variant hyperparameter", key, VARIANT_PARAMS)
        check_number(f"variant {key}", value, low=0, what="a non-negative finite number")
        parts.append(f"{VARIANT_PARAMS[key]}{_num_text(value)}")
    return "-".join(parts)


def parse_variant(name: str) -> tuple[str, dict[str, float]] | None:
    """``(method, {param: value})`` of a variant id (:func:`variant_id`), ``None`` for anything else
    (catalogue methods included).

    >>> parse_variant("llora-r64"), parse_variant("talos"), parse_variant("talos-x1")
    (('llora', {'rank': 64}), None, None)
    """
    if not isinstance(name, str) or name in METHODS:
        return None
    by_tag = {tag: key for key, tag in VARIANT_PARAMS.items()}
    for base in sorted(METHODS, key=len, reverse=True):  # "talos-top-k0.5" is a variant of talos-top
        if not name.startswith(base + "-"):
            continue
        params: dict[str, float] = {}
        for part in name[len(base) + 1:].split("-"):
            m = _VARIANT_PART.match(part)
            if m is None or by_tag[m.group(1)] in params:
                params = {}
                break
            value = float(m.group(2))
            params[by_tag[m.group(1)]] = int(value) if by_tag[m.group(1)] == "rank" and value.is_integer() else value
        if params:
            return base, params
    return None


def base_method_of(name: str) -> str | None:
    """The catalogue method a result id stands for: itself for a catalogue method, the method of a
    variant id (:func:`variant_id`), ``None`` for anything else."""
    if name in METHODS:
        return name
    parsed = parse_variant(name)
    return parsed[0] if parsed else None
