"""``talos import``: a checkpoint fine-tuned elsewhere → a run of method ``imported`` with ``τ = θ_ft − θ0``.

The run's task vector is the checkpoint's weights minus the registered base model's pre-trained weights θ0, over
every parameter of θ (the backbone the studio fine-tunes; frozen heads are not part of it), so every protocol and
dashboard page treats it like a run fine-tuned here. Method ``imported`` (:mod:`talos_core.runners.imported`) never
trains; its option ``label`` (``--method-label``, default from the file name) is recorded in the manifest.

Formats (:func:`read_checkpoint`): a ``transformers`` model folder (``save_pretrained``: ``model.safetensors``,
sharded ``model.safetensors.index.json``, or ``pytorch_model.bin``), an open_clip export (``open_clip_model.
safetensors``), or one state dict file — ``.safetensors``, or ``.pt``/``.pth``/``.bin``/``.ckpt`` read with
``torch.load(weights_only=True)`` (a training checkpoint that wraps it under ``state_dict``/``model`` is unwrapped).
A pickled model object is never unpickled: it gets one sentence on how to save its state dict instead.

Layouts (:func:`checkpoint_vector`): the state dict's keys are matched to the parameters of the model family's
backbone (:data:`BACKBONES`) after any common prefix (``visual.`` of a whole open_clip model, ``bert.`` of a
``BertFor…`` model, ``module.`` of DataParallel); a ``transformers`` CLIP vision tower is first renamed onto
open_clip's by the explicit mapping of :mod:`talos_core.models.convert` (its activation, ``quick_gelu`` for
OpenAI's weights, is compared with the base model's and a difference reported). Keys outside the backbone (a text
tower, a classifier) are left out and reported.

Checks, each one sentence and nothing written: a checkpoint of another architecture (no key matches, or the first
key whose shape differs), parameters missing or keys unexpected (counted, the first ones listed), tensors that are
not floating point, non-finite values, and a checkpoint identical to θ0 (an empty task vector). Dtype conversions
(e.g. float16 → float32) are reported, as are the keys left out and a checkpoint far from θ0 (‖τ‖/‖θ0‖ above
:data:`FAR_FROM_THETA0`: fine-tuned from another base?).

The run id hashes the checkpoint's SHA-256, the model, the task and the label: importing the same file again
finds the run already there. The run is published like a fine-tuned one (validate → lock → re-check → stage →
commit; :meth:`talos_core.store.Store.commit`).
"""

from __future__ import annotations

import csv
import hashlib
import math
import pickle
import re
import shutil
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from talos_core.atomic import atomic_write_json, file_sha256, load_safetensors, read_json
from talos_core.errors import TalosError
from talos_core.models.base import TaskModel
from talos_core.runners.imported import IMPORTED, LABEL_OPTION
from talos_core.schema import slug
from talos_core.store import Run, RunManifest, Store, artifact_checksums, run_id, versions
from talos_core.vectors import TaskVector

#: the module of each family whose state dict is its library's checkpoint (our parameter names start with it)
BACKBONES = {"clip": "visual.", "text-encoder": "encoder.", "cnn": "backbone.", "t5": "t5."}
#: what each family's checkpoints are, for messages
LAYOUTS = {"clip": "open_clip", "text-encoder": "transformers", "cnn": "timm", "t5": "transformers"}
SAFETENSORS_SUFFIXES = (".safetensors",)
TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")
#: the checkpoint files of a model folder, in the order they are looked for (an index names a sharded checkpoint)
FOLDER_FILES = ("model.safetensors.index.json", "model.safetensors", "open_clip_model.safetensors",
                "pytorch_model.bin.index.json", "pytorch_model.bin", "open_clip_pytorch_model.bin")
#: where training checkpoints keep the state dict inside a torch.save'd dict
_WRAPPERS = ("state_dict", "model_state_dict", "model", "module", "weights")
#: file names that say nothing about the checkpoint: the default label is the folder's name then
_GENERIC = {"model", "pytorch_model", "open_clip_model", "open_clip_pytorch_model", "checkpoint", "weights",
            "state_dict", "last", "best", "final"}
#: ‖τ‖/‖θ0‖ above which the import notes that the checkpoint may come from another base (independent weights: ≈ 1.4)
FAR_FROM_THETA0 = 0.5
MAX_LABEL = 64
_LABEL = re.compile(r"^[A-Za-z0-9._-]+$")
_SHOWN = 5  # keys listed in a message


def _listed(names: Sequence[str]) -> str:
    more = f", … ({len(names) - _SHOWN} more)" if len(names) > _SHOWN else ""
    return ", ".join(names[:_SHOWN]) + more


def _accepted() -> str:
    return ("a transformers model folder (save_pretrained), a .safetensors file, or a state dict saved with "
            "torch.save (" + ", ".join(TORCH_SUFFIXES) + ")")


# --------------------------------------------------------------------------------------------
# the request
# --------------------------------------------------------------------------------------------
def default_label(path: str | Path) -> str:
    """The method label of a checkpoint when none is given: its file or folder name, or the folder's name for a
    generic file name, reduced to ``[A-Za-z0-9._-]`` (≤ 64 characters).

    >>> default_label("/ckpt/clip-vit-base-patch32_sun397"), default_label("/ckpt/sun397/model.safetensors")
    ('clip-vit-base-patch32_sun397', 'sun397')
    """
    p = Path(str(path).rstrip("/\\") or ".")
    name = p.name if p.suffix.lower() not in (*SAFETENSORS_SUFFIXES, *TORCH_SUFFIXES) else p.stem
    if name.lower() in _GENERIC and p.parent.name:
        name = p.parent.name
    return slug(name).strip(".-")[:MAX_LABEL] or "checkpoint"


def check_label(label: str) -> str:
    if not isinstance(label, str) or not _LABEL.match(label) or len(label) > MAX_LABEL:
        raise TalosError(f"method label must be 1 to {MAX_LABEL} letters, digits, '.', '_' or '-', got {label!r}")
    return label


@dataclass(frozen=True)
class ImportRequest:
    """Import the checkpoint at ``path`` as a run of ``model`` (a registered base) on ``task``; ``label`` is the
    method label (``None``: :func:`default_label`)."""

    model: str
    task: str
    path: str
    label: str | None = None

    def checked(self) -> ImportRequest:
        """The request with its task named canonically and its label resolved, after checking model, task, label
        and that the path exists (one :class:`TalosError` each; nothing read yet)."""
        from talos_core.pipeline import check_model_task
        from talos_core.tasks.files import canonical_task

        for name in ("model", "task", "path"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise TalosError(f"{name} must be a non-empty string, got {value!r}")
        task = canonical_task(self.task)
        check_model_task(self.model, task)
        label = check_label(self.label if self.label is not None else default_label(self.path))
        if not Path(self.path).exists():
            raise TalosError(f"checkpoint {self.path} does not exist; give {_accepted()}")
        return replace(self, task=task, label=label)

    def config(self, sha256: str) -> dict[str, Any]:
        """What the run id hashes: the checkpoint's SHA-256, the model, the task and the label."""
        return {"model": self.model, "task": self.task, "method": IMPORTED, "sha256": sha256,
                "options": {LABEL_OPTION: self.label}}

    def run_id(self, sha256: str) -> str:
        return run_id(self.model, self.task, IMPORTED, self.config(sha256))


# --------------------------------------------------------------------------------------------
# reading a checkpoint
# --------------------------------------------------------------------------------------------
@dataclass
class Checkpoint:
    """A checkpoint's tensors by key, the files they came from, their SHA-256 (one file's, or of the
    ``name sha256`` lines of a folder's files) and a transformers ``config.json`` (``{}`` when there is none)."""

    path: Path
    files: list[Path]
    tensors: dict[str, torch.Tensor]
    sha256: str
    config: dict = field(default_factory=dict)


def _folder_files(folder: Path) -> list[Path]:
    for name in FOLDER_FILES:
        p = folder / name
        if not p.is_file():
            continue
        if not name.endswith(".index.json"):
            return [p]
        index = read_json(p)
        weight_map = index.get("weight_map") if isinstance(index, Mapping) else None
        if not isinstance(weight_map, Mapping) or not weight_map:
            raise TalosError(f"{p} is not a checkpoint index (it has no weight_map)")
        shards = sorted({str(v) for v in weight_map.values()})
        missing = [s for s in shards if not (folder / s).is_file() or Path(s).name != s]
        if missing:
            raise TalosError(f"{p} names the shard {missing[0]!r}, which is not a file in {folder}")
        return [folder / s for s in shards]
    found = sorted(p for p in folder.glob("*.safetensors") if p.is_file())
    if len(found) == 1:
        return found
    raise TalosError(f"folder {folder} holds no checkpoint file: expected one of {', '.join(FOLDER_FILES)} "
                     f"(a transformers save_pretrained folder or an open_clip export)")


def _is_state(obj: Any) -> bool:
    return isinstance(obj, Mapping) and bool(obj) and all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items())


def _torch_state(path: Path) -> dict[str, torch.Tensor]:
    """A state dict saved with ``torch.save``, read with ``weights_only=True`` (never unpickling objects)."""
    with open(path, "rb") as fh:
        head = fh.read(8)
    # torch.save writes a zip archive (or, before PyTorch 1.6, a pickle stream); anything else is no torch file, and
    # the unpickler's refusal of it must not be described as a pickled object
    if not head.startswith(b"PK\x03\x04") and not (len(head) > 1 and head[0] == 0x80 and 2 <= head[1] <= 5):
        what = "text" if head and all(32 <= b < 127 or b in (9, 10, 13) for b in head) else "binary data"
        raise TalosError(f"{path} is not a file written by torch.save (it starts with {what}, {head[:8]!r}); give "
                         f"{_accepted()}")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise TalosError(f"{path} holds a pickled Python object (e.g. a whole model saved with torch.save(model)), "
                         f"which is not unpickled because that can run any code; in a session you trust, load it and "
                         f"save its weights: torch.save(model.state_dict(), 'weights.pt') or safetensors.torch."
                         f"save_file(model.state_dict(), 'model.safetensors')") from None
    except Exception as exc:  # not a torch file, truncated, ...
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise TalosError(f"{path} could not be read as a torch state dict ({first}); give {_accepted()}") from None
    if not _is_state(obj) and isinstance(obj, Mapping):
        obj = next((obj[k] for k in _WRAPPERS if _is_state(obj.get(k))), obj)
    if not _is_state(obj):
        what = f"a {type(obj).__name__}" + (f" with keys {_listed([str(k) for k in obj])}"
                                           if isinstance(obj, Mapping) else "")
        raise TalosError(f"{path} holds {what}, not a state dict (parameter names → tensors); save "
                         f"model.state_dict() instead")
    return dict(obj)


def _read_file(path: Path) -> dict[str, torch.Tensor]:
    suffix = path.suffix.lower()
    if suffix in SAFETENSORS_SUFFIXES:
        return load_safetensors(path)[0]
    if suffix in TORCH_SUFFIXES:
        return _torch_state(path)
    raise TalosError(f"{path} is neither a .safetensors file nor a torch state dict ({', '.join(TORCH_SUFFIXES)}); "
                     f"give {_accepted()}")


def read_checkpoint(path: str | Path) -> Checkpoint:
    """Read the checkpoint at ``path`` (a folder or a file; see the module docstring)."""
    path = Path(path)
    if not path.exists():
        raise TalosError(f"checkpoint {path} does not exist; give {_accepted()}")
    if not path.is_dir() and not path.is_file():  # a named pipe or a device would block the reader
        raise TalosError(f"checkpoint {path} is neither a file nor a folder (a named pipe or a device); give "
                         f"{_accepted()}")
    files = _folder_files(path) if path.is_dir() else [path]
    tensors: dict[str, torch.Tensor] = {}
    for f in files:
        part = _read_file(f)
        twice = sorted(set(part) & set(tensors))
        if twice:
            raise TalosError(f"checkpoint {path} holds {twice[0]!r} in two files; give one consistent checkpoint")
        tensors.update(part)
    if not tensors:
        raise TalosError(f"checkpoint {path} holds no tensors")
    sums = [(f.name, file_sha256(f)) for f in files]
    sha = sums[0][1] if len(sums) == 1 else hashlib.sha256(
        "".join(f"{h}  {n}\n" for n, h in sums).encode()).hexdigest()
    config = read_json(path / "config.json") if path.is_dir() and (path / "config.json").is_file() else {}
    return Checkpoint(path, files, tensors, sha, config if isinstance(config, dict) else {})


# --------------------------------------------------------------------------------------------
# mapping a checkpoint onto the base model: θ_ft by our parameter names, checks, τ
# --------------------------------------------------------------------------------------------
def _best_prefix(keys: Iterable[str], names: set[str]) -> str | None:
    """The prefix ``p`` for which the most keys are ``p + name`` (ties: the shortest); ``None`` if no key is."""
    votes: Counter[str] = Counter()
    for key in keys:
        start = 0
        while True:
            if key[start:] in names:
                votes[key[:start]] += 1
            dot = key.find(".", start)
            if dot < 0:
                break
            start = dot + 1
    if not votes:
        return None
    top = max(votes.values())
    return min((p for p, n in votes.items() if n == top), key=len)


def _hidden_act(config: Mapping) -> str | None:
    vision = config.get("vision_config")
    act = (vision or {}).get("hidden_act") if isinstance(vision, Mapping) else None
    return act or config.get("hidden_act")


@dataclass
class ImportedVector:
    """``τ = θ_ft − θ0`` of a checkpoint, how its keys were read (``layout``) and what was reported (``notes``)."""

    vector: TaskVector
    layout: str
    notes: list[str]
    changed: int  # entries of θ that differ from θ0
    numel: int  # entries of θ


def checkpoint_vector(model: TaskModel, ckpt: Checkpoint, model_name: str) -> ImportedVector:
    """Map ``ckpt`` onto ``model`` (at θ0) and return ``τ = θ_ft − θ0``; every check is one :class:`TalosError`."""
    from talos_core.models import convert

    family = model.family
    prefix = BACKBONES.get(family)
    if prefix is None:
        raise TalosError(f"talos import cannot read checkpoints of model family {family!r}; families it reads: "
                         f"{', '.join(sorted(BACKBONES))}")
    shown = str(ckpt.path)
    params = dict(model.named_parameters())
    names = {n[len(prefix):]: n for n in params if n.startswith(prefix)}
    backbone = getattr(model, prefix.rstrip("."))
    buffers = set(backbone.state_dict()) - set(dict(backbone.named_parameters()))
    pooler = getattr(model, "_pooler", {}).get("module")  # a sentence encoder's unused projection, not part of θ
    if pooler is not None:
        buffers |= {f"pooler.{k}" for k in pooler.state_dict()}
    state, outside, optional = dict(ckpt.tensors), [], set()
    layout = LAYOUTS[family]
    notes: list[str] = []
    if family == "clip" and convert.hf_clip_vision_prefix(state) is not None:
        state, outside = convert.hf_clip_vision_to_open_clip(state)
        layout = "transformers CLIP vision tower"
        if "proj" not in state:
            optional.add("proj")
            notes.append("the checkpoint has no visual projection (a CLIPVisionModel): visual.proj stays at θ0")
        act, ours = _hidden_act(ckpt.config), convert.open_clip_activation(model.visual)
        if act and ours and act != ours:  # τ is exact in weight space; the function evaluated here is the base's
            notes.append(f"the checkpoint was fine-tuned with activation {act} (its config.json) but {model_name!r} "
                         f"evaluates with {ours}: τ = θ_ft − θ0 is exact, its accuracies here are those of the "
                         f"{ours} model (as for every run of {model_name!r})")
    else:
        buffers |= {"embeddings.position_ids"}  # saved by older transformers versions; not a weight
    found = _best_prefix(state, set(names))
    if found is None:
        raise TalosError(f"{shown} is not a checkpoint of {model_name!r} ({family}): none of its {len(state)} keys "
                         f"names one of its parameters (its first key is {next(iter(state))!r}, the first parameter of "
                         f"{model_name!r} is {next(iter(names.values()))!r}); pick the base model it was fine-tuned "
                         f"from")
    for rel, name in names.items():
        value = state.get(found + rel)
        if value is not None and tuple(value.shape) != tuple(params[name].shape):
            raise TalosError(f"{shown} is a checkpoint of another architecture: {found + rel!r} has shape "
                             f"{tuple(value.shape)} where the parameter {name!r} of {model_name!r} has "
                             f"{tuple(params[name].shape)}")
    missing = [found + r for r in names if found + r not in state and r not in optional]
    unexpected = [k for k in state if k.startswith(found) and k[len(found):] not in names
                  and k[len(found):] not in buffers]
    outside += [k for k in state if not k.startswith(found)]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"{len(missing)} of its {len(names)} parameters are missing ({_listed(missing)})")
        if unexpected:
            parts.append(f"{len(unexpected)} keys are not its parameters ({_listed(unexpected)})")
        raise TalosError(f"{shown} does not fit {model_name!r}: {' and '.join(parts)}; import a complete checkpoint of "
                         f"the base model's architecture")
    if outside:
        notes.append(f"left out {len(outside)} keys outside the fine-tuned backbone ({_listed(sorted(outside))})")
    if found:
        notes.append(f"read the backbone under the prefix {found!r}")
    converted: Counter[tuple[str, str]] = Counter()
    deltas: dict[str, torch.Tensor] = {}
    for rel, name in names.items():
        theta0 = params[name].detach()
        if rel in optional and found + rel not in state:
            deltas[name] = torch.zeros_like(theta0, device="cpu")
            continue
        value = state[found + rel]
        if not value.is_floating_point():
            raise TalosError(f"{shown} stores {found + rel!r} as {value.dtype}, not floating point (a quantized "
                             f"checkpoint?); import the unquantized weights")
        if not bool(torch.isfinite(value).all()):
            raise TalosError(f"{shown} holds non-finite values (NaN or inf) in {found + rel!r}; nothing was imported")
        if value.dtype != theta0.dtype:
            converted[(str(value.dtype).replace("torch.", ""), str(theta0.dtype).replace("torch.", ""))] += 1
        deltas[name] = value.to(theta0.dtype).cpu() - theta0.cpu()
    for (src, dst), n in sorted(converted.items()):
        notes.append(f"converted {n} tensors from {src} to {dst} (the base model's dtype); entries the fine-tuning "
                     f"left unchanged differ from θ0 by the rounding")
    changed = sum(int((d != 0).sum()) for d in deltas.values())
    if changed == 0:
        raise TalosError(f"{shown} equals the pre-trained weights θ0 of {model_name!r} exactly: its task vector is "
                         f"empty; import the fine-tuned checkpoint, not the base model")
    numel = sum(d.numel() for d in deltas.values())
    ratio = math.sqrt(sum(float(d.double().pow(2).sum()) for d in deltas.values())
                      / max(sum(float(p.detach().double().pow(2).sum()) for p in params.values()), 1e-30))
    if ratio > FAR_FROM_THETA0:
        notes.append(f"the checkpoint is far from θ0 (‖τ‖/‖θ0‖ = {ratio:.2f}; fine-tuning usually moves the weights "
                     f"by a few percent): check that it was fine-tuned from {model_name!r}")
    return ImportedVector(TaskVector.from_dense(deltas), layout, notes, changed, numel)


# --------------------------------------------------------------------------------------------
# publishing
# --------------------------------------------------------------------------------------------
@dataclass
class ImportResult:
    """The imported (or already present: ``reused``) run and what the import reported."""

    run: Run
    notes: list[str]
    reused: bool = False


def _publish(req: ImportRequest, ckpt: Checkpoint, imp: ImportedVector, store: Store, rid: str,
             family: str) -> Run:
    staging = store.staging(rid)
    try:
        imp.vector.save(staging / "task_vector.safetensors")
        manifest = RunManifest(
            run_id=rid, model=req.model, task=req.task, method=IMPORTED, family=family, sparsity=None, seed=None,
            eval_mode="nonlinear", sparse_method=False, config=req.config(ckpt.sha256),
            request={"model": req.model, "task": req.task, "method": IMPORTED, "label": req.label},
            metrics={"vector_nnz": imp.vector.nnz(), "vector_norm": imp.vector.norm(), "theta_numel": imp.numel},
            info={"label": req.label, "source": str(ckpt.path.resolve()), "files": [f.name for f in ckpt.files],
                  "sha256": ckpt.sha256, "layout": imp.layout, "notes": imp.notes},
            data_sizes={}, timings={}, history=[], device="cpu",  # θ_ft − θ0 is computed on the CPU
            versions=versions(), created=time.strftime("%Y-%m-%dT%H:%M:%S%z"), curve=[],
            artifacts=artifact_checksums(staging))
        atomic_write_json(staging / "manifest.json", manifest.to_dict())
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return store.commit(staging, rid)


def import_checkpoint(req: ImportRequest, store: Store, *, force: bool = False,
                      model: TaskModel | None = None) -> ImportResult:
    """Import ``req`` into ``store`` (see the module docstring) and return its run. ``model``: ``req.model`` already
    loaded at θ0 (else loaded here). The same checkpoint, model, task and label give the same run id: it is
    returned as it is (``reused``) unless ``force``."""
    from talos_core.models import get_model_spec, load_model

    req = req.checked()
    store.check_folder()
    ckpt = read_checkpoint(req.path)
    rid = req.run_id(ckpt.sha256)
    if store.has_run(rid) and not force:
        return ImportResult(store.get_run(rid), [], reused=True)
    check_label_free(store, req, rid)
    model = model if model is not None else load_model(req.model)
    imp = checkpoint_vector(model, ckpt, req.model)
    family = get_model_spec(req.model).family
    store.ensure()
    with store.run_lock(rid):
        if store.has_run(rid) and not force:
            return ImportResult(store.get_run(rid), imp.notes, reused=True)
        check_label_free(store, req, rid)
        run = _publish(req, ckpt, imp, store, rid, family)
    return ImportResult(run, imp.notes)


def check_label_free(store: Store, req: ImportRequest, rid: str) -> None:
    """The label names one checkpoint: a store holding an imported run of ``req``'s model and task under the same
    label from another checkpoint (another run id) is one :class:`TalosError` (the protocols pick imported runs by
    label, and would use one of the two without saying which)."""
    for other in store.find_runs(model=req.model, task=req.task, method=IMPORTED):
        if other.id != rid and other.manifest.info.get("label") == req.label:
            raise TalosError(f"store {store.root} already holds an imported run of {req.model!r} on {req.task!r} "
                             f"labelled {req.label!r} from another checkpoint ({other.manifest.info.get('source')}, "
                             f"run {other.id}); give this checkpoint another --method-label, or delete {other.path} "
                             f"first")


def check_import(req: ImportRequest, *, model: TaskModel | None = None) -> ImportRequest:
    """Every check of :func:`import_checkpoint` without writing anything; returns the checked request."""
    from talos_core.models import load_model

    req = req.checked()
    ckpt = read_checkpoint(req.path)
    checkpoint_vector(model if model is not None else load_model(req.model), ckpt, req.model)
    return req


def import_many(reqs: Sequence[ImportRequest], store: Store, *, force: bool = False) -> list[ImportResult]:
    """Import several checkpoints; every one is checked (read and mapped) before the first is written, so one bad
    entry leaves the store as it was. Each base model is loaded once."""
    from talos_core.models import load_model

    store.check_folder()
    models: dict[str, TaskModel] = {}

    def model_of(name: str) -> TaskModel:
        if name not in models:
            models[name] = load_model(name)
        return models[name]

    labelled: dict[tuple[str, str, str], tuple[int, str]] = {}
    for i, req in enumerate(reqs if len(reqs) > 1 else (), 1):  # one import checks everything before it writes
        try:
            checked = check_import(req, model=model_of(req.checked().model))
            sha = read_checkpoint(checked.path).sha256
            check_label_free(store, checked, checked.run_id(sha))
        except TalosError as exc:
            raise TalosError(f"entry {i} ({req.path}): {exc}") from None
        key = (checked.model, checked.task, checked.label)
        if labelled.setdefault(key, (i, sha))[1] != sha:
            raise TalosError(f"entries {labelled[key][0]} and {i} ({req.path}) are two checkpoints of {req.model!r} on "
                             f"{checked.task!r} with the same label {checked.label!r}; give each its own label")
    return [import_checkpoint(req, store, force=force, model=model_of(req.model)) for req in reqs]


# --------------------------------------------------------------------------------------------
# a manifest of many checkpoints
# --------------------------------------------------------------------------------------------
MANIFEST_FIELDS = ("model", "task", "path", "label")


def read_import_manifest(path: str | Path) -> list[ImportRequest]:
    """The imports listed in ``path``: a JSON list of ``{"model", "task", "path", "label"?}`` objects, or a CSV
    with those columns. Relative paths are relative to the manifest's folder."""
    path = Path(path)
    if not path.is_file():
        raise TalosError(f"import manifest {path} is not a file; give a .json or .csv file listing model, task, path "
                         f"(and optionally label) per checkpoint")
    if path.suffix.lower() == ".json":
        rows = read_json(path)
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise TalosError(f"import manifest {path} must hold a JSON list of objects with keys "
                             f"{', '.join(MANIFEST_FIELDS)}")
    elif path.suffix.lower() == ".csv":
        try:
            with open(path, newline="", encoding="utf-8") as fh:
                rows = [dict(r) for r in csv.DictReader(fh)]
        except (UnicodeDecodeError, csv.Error) as exc:
            raise TalosError(f"import manifest {path} is not a readable CSV file ({exc})") from None
    else:
        raise TalosError(f"import manifest {path} must be a .json or .csv file, got {path.suffix or 'no suffix'!r}")
    if not rows:
        raise TalosError(f"import manifest {path} lists no checkpoints")
    out = []
    for i, row in enumerate(rows, 1):
        bad = sorted(k for k in row if k not in MANIFEST_FIELDS)
        lacking = [k for k in ("model", "task", "path") if not row.get(k)]
        if bad or lacking:
            what = f"has the unknown key {bad[0]!r}" if bad else f"has no {lacking[0]!r}"
            raise TalosError(f"entry {i} of import manifest {path} {what}; each entry gives model, task, path and "
                             f"optionally label")
        ckpt = Path(str(row["path"])).expanduser()
        ckpt = ckpt if ckpt.is_absolute() else path.parent / ckpt
        out.append(ImportRequest(str(row["model"]), str(row["task"]), str(ckpt), row.get("label") or None))
    return out
