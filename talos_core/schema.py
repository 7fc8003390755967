"""The store's format in one torch-free module: result kinds, names and paths, readers, method catalogue.

Engine and dashboard both import this module (and nothing heavier) to agree on what a store holds:

* **names**: :func:`slug`, :func:`check_suite`, :func:`result_name` and :func:`parse_result_name`;
* **result kinds**: :data:`KINDS` (:class:`ResultKind`: the parts of a result's name, its table's
  columns, its required fields);
* **paths**: :func:`result_path` (``results/<kind>/<name>.json``), :func:`preview_paths` (plus the
  ``.safetensors`` sibling of a preview), :func:`iter_results`;
* **readers**: :func:`read_result` (one JSON result, :class:`MissingResult` / :class:`CorruptResult`
  with one sentence naming the file); the preview and examples arrays are read by
  :mod:`talos_core.result_arrays` (numpy only);
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

import itertools
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from talos_core.errors import TalosError, check_number, is_int, is_number, unknown
from talos_core.methods.declaration import EvalMode as EvalMode  # re-exported: the layers read it here
from talos_core.methods.declaration import MethodDeclaration
from talos_core.methods.registry import DECLARATIONS
from talos_core.methods.registry import METHODS as METHODS  # re-exported: every method, in the paper's table order
from talos_core.methods.registry import method_info as method_info  # re-exported: the catalogue entry of a name

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
               optional_fields=("ci95", "examples", "reference_examples", "bootstrap", "search")),
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
                        "calibration_s", "train_s", "peak_memory_mb", "peak_memory_kind", "trainable_entries"),
               optional_columns=("machine",)),
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
            and all(a <= b for a, b in itertools.pairwise(v)), nullable=False)
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
    fixed-sparsity TaLoS row kept as its own labelled row next to the per-task selected one, so the paper's
    fixed-0.9 setting stays comparable. Result names use it as their ``<method>`` part.

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
