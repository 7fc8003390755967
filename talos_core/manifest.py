"""A run's manifest (``runs/<run_id>/manifest.json``): its format, its fields and their rules, and the run id.

:class:`RunManifest` is what a fine-tuning run records (what was trained, how, what it measured, the SHA-256 of
its artifacts); :func:`manifest_problem` checks its numbers and artifact names; :func:`run_id` is the id its
model, task, method and config give. The store (:mod:`talos_core.store`) reads and writes manifests in run
folders and re-exports these names. This module imports no torch.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from talos_core import schema
from talos_core.atomic import file_sha256, read_json
from talos_core.errors import TalosError, is_strict_instance

#: the manifest format runs are written in: it records the SHA-256 of every artifact (``artifacts``), required
RUN_FORMAT = "talos-run/2"
#: the older manifest format: written before checksums existed (``artifacts`` absent or present). Such a manifest
#: still describes its run, but an artifact it records no checksum of is never read: fine-tune the run again, or
#: record the checksums of a trusted store's files (:func:`talos_core.store.record_checksums`). A manifest without
#: ``format`` is of the current one
LEGACY_RUN_FORMAT = "talos-run/1"
#: what an artifact's name must be: a safetensors file in the run's folder (no path: ``../x`` would lead outside)
_ARTIFACT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.safetensors")


def artifact_checksums(folder: Path) -> dict[str, str]:
    """``{file name: SHA-256}`` of the artifacts (``*.safetensors``) of a staged run folder, for
    ``RunManifest.artifacts``."""
    return {f.name: file_sha256(f) for f in sorted(Path(folder).iterdir()) if f.suffix == ".safetensors"}


def run_id(model: str, task: str, method: str, config: dict) -> str:
    """Deterministic id: readable prefix + hash of the full configuration.

    >>> run_id("tiny-clip", "digits", "talos", {"a": 1})[:26]
    'tiny-clip__digits__talos__'
    """
    from talos_core.tasks.files import task_label  # file tasks: kind-<file name>-<content hash>, not the path

    digest = hashlib.sha1(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return f"{schema.slug(model)}__{schema.slug(task_label(task))}__{schema.slug(method)}__{digest}"


@dataclass(frozen=True, kw_only=True)
class RunManifest:
    """A run's ``manifest.json``: what was fine-tuned, how, and what it measured.

    :func:`talos_core.pipeline.run_finetune` writes :meth:`to_dict` (the field order is the file's key
    order); :meth:`read` parses one back. ``model``, ``task`` and ``method`` are required; a missing
    or ``null`` optional field takes its default (``eval_mode`` ``"nonlinear"``, empty objects).
    ``config`` is the resolved configuration the run id hashes, ``request`` the
    :class:`~talos_core.pipeline.FinetuneRequest` fields (without ``options``), ``metrics`` the run's own
    evaluation (accuracies, mask density, ...), ``timings`` its per-iteration costs, ``train_precision`` the
    resolved training precision (``"fp32"``/``"bf16"``; absent from runs written before it was recorded, which
    trained in fp32 on CPU and bf16 autocast on CUDA), ``curve`` the learning curve (validation accuracy of
    the model being trained every ``eval_every`` steps, when the request asked for one) and ``artifacts`` the
    SHA-256 (hex) of each artifact file by name (``{"task_vector.safetensors": ..., "mask.safetensors": ...}``),
    checked whenever the run reads one (:meth:`talos_core.store.Run.artifact`); ``null`` for a file whose checksum
    was never recorded (a run of the older format whose files were not kept,
    :func:`talos_core.store.record_checksums`). A manifest of the current format (:data:`RUN_FORMAT`) must name its
    task vector and, for a sparse method, its mask in ``artifacts``: without them it is corrupt. Only manifests of
    the older format :data:`LEGACY_RUN_FORMAT`, written before checksums were recorded, may lack ``artifacts``.
    Whatever the format, an artifact whose SHA-256 the manifest does not record is never read
    (:meth:`talos_core.store.Run.artifact`): the manifest describes the run, its weights must be trained again.
    ``artifacts`` is not part of ``config``, so it does not change the run id. The numbers are checked too
    (:func:`manifest_problem`: accuracies in [0, 1], counts ≥ 0, ...), and a store reads a manifest
    only in the folder its model, task, method and config name (:func:`talos_core.store.read_run`).
    """

    format: str = RUN_FORMAT
    run_id: str | None = None
    model: str
    task: str
    method: str
    family: str | None = None
    sparsity: float | None = None  # None for methods that do not train a sparse subset
    seed: int | None = None
    eval_mode: str = "nonlinear"  # how the task vector is evaluated: "nonlinear" or "linearized"
    sparse_method: bool = False  # α grid extended by 1/(1 − sparsity)
    config: dict[str, Any] = field(default_factory=dict)
    request: dict[str, Any] = field(default_factory=dict)
    data_sizes: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    history: list[dict] = field(default_factory=list)
    device: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    created: str | None = None
    artifacts: dict[str, str | None] | None = None  # SHA-256 per artifact file (None: talos-run/1; null: not recorded)
    train_precision: str | None = None  # the resolved training precision, "fp32" or "bf16" (None: older runs)
    curve: list[dict] | None = None  # learning curve [{"step", "val_acc"}] ([]: not asked for; None: older runs)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``manifest.json`` (keys in field order). The fields added after the format was
        fixed (``train_precision``, ``curve``, ``artifacts``) are left out when ``None`` — absent from the file it
        was read from — so a manifest written before them reads back to the same object; new runs write them."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if not (f.name in _LATER_FIELDS and getattr(self, f.name) is None)}

    @classmethod
    def from_dict(cls, data: Any, source: str | Path) -> RunManifest:
        """Parse a manifest object read from ``source``; a missing or mistyped field is one :class:`TalosError`.

        >>> RunManifest.from_dict({"format": LEGACY_RUN_FORMAT, "model": "m", "task": "t", "method": "talos",
        ...                        "eval_mode": None}, "x").eval_mode
        'nonlinear'
        """
        if not isinstance(data, Mapping):
            raise TalosError(f"run manifest {source} is corrupt: expected a JSON object, got {type(data).__name__}")
        values = {}
        current = data.get("format", RUN_FORMAT) == RUN_FORMAT  # every field is written: none may be missing
        for f in fields(cls):
            value = data.get(f.name)
            if value is None and current and f.name not in _NULLABLE and not (
                    f.name in _NULLABLE_UNTRAINED and not _trains(data.get("method"))):
                raise TalosError(f"run manifest {source} is incomplete: it has no {f.name!r} (its format "
                                 f"{RUN_FORMAT!r} always does); fine-tune the run again (talos finetune --force)")
            if value is None:
                if f.name in _REQUIRED:
                    raise TalosError(f"run manifest {source} is incomplete: it has no {f.name!r}")
                continue
            kinds = _KINDS[f.name]
            if not is_strict_instance(value, kinds):
                raise TalosError(f"run manifest {source} is corrupt: {f.name!r} must be {_KIND_NAMES[kinds]}, "
                                 f"got {type(value).__name__}")
            values[f.name] = value
        manifest = cls(**values)
        problem = manifest_problem(manifest)
        if problem:
            raise TalosError(f"run manifest {source} is corrupt: {problem}; the file was edited or damaged, fine-tune "
                             f"the run again (talos finetune --force)")
        return manifest

    @classmethod
    def read(cls, path: Path) -> RunManifest:
        """Read and parse ``path`` (a missing, corrupt or incomplete file is one :class:`TalosError`)."""
        return cls.from_dict(read_json(path), path)


_REQUIRED = ("model", "task", "method")
#: fields a current-format manifest may leave ``null`` (``format``: absent means the current one)
_NULLABLE = ("format", "sparsity")
#: a run of a method the catalogue marks ``trains=False`` (``imported``: ``talos import``) trained nothing here: it
#: has no seed and no training precision
_NULLABLE_UNTRAINED = ("seed", "train_precision")


def _trains(method: Any) -> bool:
    """Whether the catalogue's method ``method`` fine-tunes here (an unknown or missing name counts as one that
    does: its manifest must then be complete)."""
    info = schema.METHODS.get(method) if isinstance(method, str) else None
    return info is None or info.trains


#: fields appended after ``talos-run/1`` was fixed: absent from older manifests (``None``), omitted then
_LATER_FIELDS = ("train_precision", "curve", "artifacts")
_KINDS: dict[str, tuple[type, ...]] = {
    "format": (str,), "run_id": (str,), "model": (str,), "task": (str,), "method": (str,), "family": (str,),
    "sparsity": (int, float), "seed": (int,), "eval_mode": (str,), "sparse_method": (bool,), "config": (dict,),
    "request": (dict,), "data_sizes": (dict,), "metrics": (dict,), "timings": (dict,), "info": (dict,),
    "history": (list,), "device": (str,), "versions": (dict,), "created": (str,), "train_precision": (str,),
    "curve": (list,), "artifacts": (dict,)}
_KIND_NAMES = {(str,): "a string", (int, float): "a number", (int,): "an integer", (bool,): "true or false",
               (dict,): "an object", (list,): "a list"}
_SHA256 = schema.Rule("a SHA-256 in hex (or null: not recorded)", lambda v: isinstance(v, str) and len(v) == 64
                      and all(c in "0123456789abcdef" for c in v))


_PRECISION = schema.Rule("fp32 or bf16", lambda v: v in ("fp32", "bf16"), nullable=False)


def _metric_rule(key: str) -> schema.Rule | None:
    if key == "eval_precision":
        return _PRECISION
    if key.endswith("_acc") or key in ("mask_density", "mask_moved", "mask_zero_sensitivity"):
        return schema.ACCURACY
    if key.endswith(("_numel", "_nnz", "_entries", "_tensors")) or key in ("step", "steps"):
        return schema.COUNT
    if key.endswith(("_s", "_mb", "_norm")) or key.startswith(("fwd_bwd_s", "opt_s")):
        return schema.NON_NEGATIVE
    return None


def manifest_problem(m: RunManifest) -> str | None:
    """The first field of ``m`` that breaks its rules, as a phrase, or ``None``: the format is known, the current
    format records its artifacts' SHA-256 (task vector, and mask for sparse methods), sparsity in [0, 1), seed
    and data sizes ≥ 0, and the numbers of ``metrics``, ``timings`` and ``curve`` in their ranges (accuracies in
    [0, 1], counts ≥ 0, seconds and MiB ≥ 0)."""
    if m.format not in (RUN_FORMAT, LEGACY_RUN_FORMAT):
        return f"'format' is {m.format!r}, not {RUN_FORMAT!r} (or the older {LEGACY_RUN_FORMAT!r})"
    if m.format == RUN_FORMAT:
        sparse = m.sparse_method or (m.method in schema.METHODS and schema.METHODS[m.method].sparse)
        need = ["task_vector.safetensors"] + (["mask.safetensors"] if sparse else [])
        missing = [n for n in need if n not in (m.artifacts or {})]
        if missing:
            return f"it records no SHA-256 of {missing[0]} (its format {RUN_FORMAT!r} always does)"
        if sparse and m.sparsity is None:
            return f"it records no sparsity, which a {m.method!r} run has"
    odd = [k for k in (m.artifacts or {}) if not _ARTIFACT_NAME.fullmatch(k)]
    if odd:
        return f"its artifacts name {odd[0][:80]!r}, which is not a .safetensors file of the run's folder"
    values: list[tuple[str, Any, schema.Rule | None]] = [
        ("sparsity", m.sparsity, schema.SPARSITY), ("seed", m.seed, schema.COUNT),
        *((f"artifacts.{k}", v, _SHA256) for k, v in (m.artifacts or {}).items()),
        *((f"data_sizes.{k}", v, schema.COUNT) for k, v in m.data_sizes.items()),
        *((f"{part}.{k}", v, _metric_rule(k)) for part in ("metrics", "timings")
          for k, v in getattr(m, part).items()),
        *((f"curve.{k}", v, _metric_rule(k)) for point in (m.curve or []) if isinstance(point, dict)
          for k, v in point.items())]
    for key, value, rule in values:
        if rule is not None and not rule.check(value):
            return f"{key} = {value!r}, which must be {rule.what}"
    return None
