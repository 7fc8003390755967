"""The results store: a folder of runs and analysis results (JSON + safetensors only).

Layout::

    <store>/
      store.json                         # {"format": "talos-store/1"}
      runs/<run_id>/manifest.json        # RunManifest: config, seed, versions, metrics, timings, history
      runs/<run_id>/mask.safetensors     # boolean mask (sparse methods)
      runs/<run_id>/task_vector.safetensors
      results/<kind>/<name>.json         # tidy tables and grids written by talos_core.evaluation

Every file is written to a temporary name in the same folder and renamed into place, and a run
folder is assembled under ``runs/.tmp-<run id>-<pid>-*`` and renamed when complete, so a reader (the
dashboard, another workshop participant) never sees a half-written artifact, and two writers never share a
temporary file; staging folders of writers that died (their pid is gone, or older than an hour) are removed
the next time a run is staged. Two processes fine-tuning the same run take turns (:meth:`Store.run_lock`): the
second finds the first's run and reuses it.

Artifacts cannot silently lie: a run's manifest records the SHA-256 of each artifact
(``RunManifest.artifacts``), checked when the artifact is read (:meth:`Run.task_vector`, :meth:`Run.mask`), and an
artifact whose checksum the manifest does not record is never read (:meth:`Run.artifact`; a manifest relabelled
as the older format must not let edited weights through); a task vector with non-finite or out-of-range entries
is refused when loaded; a sparse method's run without its mask is an error; :meth:`Store.corrupt_runs` lists the
run folders whose manifest cannot be read, and :func:`record_checksums` records the checksums of a trusted older
store's files (``talos runs --record-checksums``).

Results that several processes update in place (the per-model ``single``, ``linearization`` and
``efficiency`` tables, one row group per method) are read, merged and written under :meth:`Store.locked`,
an exclusive lock between processes (``<store>/.locks/``), so that processes fine-tuning different methods
into one store (``talos suite --stage train``) never lose each other's rows.
The manifest's format (its fields and their rules, the run id) is :mod:`talos_core.manifest`, re-exported here.
``cached_results/`` in the repository is a store too.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from talos_core import schema
from talos_core.atomic import (
    atomic_save_safetensors,
    atomic_write_bytes,
    atomic_write_json,
    file_sha256,
    load_safetensors,
    loads_json,
    read_json,
)
from talos_core.errors import TalosError
from talos_core.manifest import (  # noqa: F401 - re-exported: callers import the manifest's names from the store
    LEGACY_RUN_FORMAT,
    RUN_FORMAT,
    RunManifest,
    artifact_checksums,
    manifest_problem,
    run_id,
)

STORE_FORMAT = "talos-store/1"


# --------------------------------------------------------------------------------------------
# mask artifacts
# --------------------------------------------------------------------------------------------
def save_mask(mask: dict[str, torch.Tensor], path: Path) -> None:
    atomic_save_safetensors({n: m.to(torch.bool) for n, m in mask.items()}, path, {"format": "talos-mask/1"})


def load_mask(path: Path) -> dict[str, torch.Tensor]:
    tensors, meta = load_safetensors(path)
    if meta.get("format") != "talos-mask/1":
        raise TalosError(f"{path} is not a TaLoS mask file")
    return {n: t.to(torch.bool) for n, t in tensors.items()}


# --------------------------------------------------------------------------------------------
# runs
# --------------------------------------------------------------------------------------------
def versions() -> dict[str, str]:
    import numpy

    import talos_core

    out = {"talos_core": talos_core.__version__, "torch": torch.__version__, "numpy": numpy.__version__,
           "python": platform.python_version()}
    for mod in ("transformers", "open_clip"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:
            pass
    return out


def read_run(path: Path) -> Run:
    """The run in folder ``path``: its manifest read and parsed (:meth:`RunManifest.read`), and in the folder its
    model, task, method and config name (the run id; a manifest edited or copied into another run's folder is
    corrupt)."""
    if path.is_symlink() or path.resolve().parent != path.parent.resolve():
        raise TalosError(f"run folder {path} is a link to {path.resolve()}, outside its store's runs/ folder; a store "
                         f"reads only the runs it holds (copy the run in, or remove the link)")
    manifest = RunManifest.read(path / "manifest.json")
    want = run_id(manifest.model, manifest.task, manifest.method, manifest.config)
    if want != path.name or manifest.run_id not in (None, path.name):
        raise TalosError(f"run manifest {path / 'manifest.json'} is corrupt: its model, task, method and config give "
                         f"the run id {want!r} (its run_id says {manifest.run_id!r}), not its folder's name "
                         f"{path.name!r}; the file was edited or moved, fine-tune the run again")
    return Run(path, manifest)


@dataclass
class Run:
    """A finished run in a store."""

    path: Path
    manifest: RunManifest

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def sparse(self) -> bool:
        """A sparse method's run (catalogue :data:`talos_core.schema.METHODS`; the manifest's ``sparse_method``
        for a method the catalogue does not know): it must have a mask."""
        info = schema.METHODS.get(self.manifest.method)
        return info.sparse if info is not None else self.manifest.sparse_method

    @property
    def has_weights(self) -> bool:
        """Whether any of the run's artifacts is here (task vector, mask, or another its manifest records). A
        manifest exported without its weights (``cached_results/``, or a store carried between machines as JSON,
        ``talos export``) has none: it describes the run but cannot be evaluated, and
        :func:`talos_core.pipeline.run_finetune` trains such a run again when a step needs it. A run with only
        some of them is damaged, not kept without weights (:meth:`require_artifacts` names the missing file)."""
        return any((self.path / name).is_file() for name in self.artifact_names())

    def artifact_names(self) -> list[str]:
        """The artifact files the run has when whole: its task vector, every artifact its manifest records and,
        for a sparse method, its mask (sorted)."""
        return sorted({"task_vector.safetensors", *(self.manifest.artifacts or {}),
                       *(["mask.safetensors"] if self.sparse else [])})

    def artifact(self, name: str) -> Path:
        """The path of artifact ``name`` after checking it: present, and unchanged since the manifest recorded its
        SHA-256. A missing or altered file, or one whose SHA-256 the manifest does not record, is one
        :class:`TalosError` naming it."""
        path = self.path / name
        if not path.is_file():
            raise TalosError(f"run {self.id} has no {name} (missing file {path}); fine-tune it again "
                             f"(talos finetune --force)")
        want = self._recorded(name)
        if file_sha256(path) != want:
            raise TalosError(f"{path} does not match the SHA-256 its run manifest records: the file was altered "
                             f"or damaged; fine-tune the run again (talos finetune --force)")
        return path

    def _recorded(self, name: str) -> str:
        """The SHA-256 the manifest records for artifact ``name``; one :class:`TalosError` when it records none."""
        want = (self.manifest.artifacts or {}).get(name)
        if want is None:
            store = self.path.parent.parent
            raise TalosError(f"{self.path / name} cannot be checked: run {self.id}'s manifest (format "
                             f"{self.manifest.format}) records no SHA-256 of it, so it is not used (it may have been "
                             f"altered); fine-tune the run again (talos finetune --force) or, if you trust the files "
                             f"of this store as they are, record their checksums: talos runs --store {store} "
                             f"--record-checksums")
        return want

    def require_artifacts(self) -> None:
        """A run with any of its artifacts here must have all of them: its task vector, every artifact its manifest
        records and, for a sparse method, its mask (:meth:`artifact`'s sentence for the first missing one), each
        with the SHA-256 its manifest records; a manifest exported without its weights (``cached_results/``) has
        none of them and passes. Checks that the files exist and that their checksums are recorded, without reading
        them."""
        names = self.artifact_names()
        here = [(self.path / name).is_file() for name in names]
        if any(here) and not all(here):
            self.artifact(names[here.index(False)])
        for name, present in zip(names, here):
            if present:
                self._recorded(name)

    def verify(self) -> list[str]:
        """One sentence per artifact that fails its checks (missing, altered, unreadable, inconsistent or
        non-finite entries; a mask that does not cover the task vector's entries): each is read as the commands
        read it. ``[]`` when all pass, and for a run kept without its weights (a manifest alone: nothing to read)."""
        if not self.has_weights:
            return []
        problems, read = [], {}
        for name, load in (("vector", self.task_vector), ("mask", self.mask)):
            try:
                read[name] = load()
            except TalosError as exc:
                problems.append(str(exc))
        if read.get("mask") is not None and "vector" in read:
            problem = _mask_vector_problem(read["mask"], read["vector"])
            if problem:
                problems.append(f"{self.path / 'mask.safetensors'} does not fit the run's task vector: {problem}; "
                                f"fine-tune the run again (talos finetune --force)")
        return problems

    def task_vector(self):
        from talos_core.vectors import TaskVector

        path = self.artifact("task_vector.safetensors")
        vector = TaskVector.load(path)
        m = self.manifest.metrics
        norm, nnz = m.get("vector_norm"), m.get("vector_nnz")
        # the manifest's own measurements of the vector: a file whose checksum was recorded after it was altered
        # (talos runs --record-checksums on a store that was not as trusted as it seemed) still contradicts them
        if (nnz is not None and vector.nnz() != nnz) or (norm is not None and not math.isclose(
                vector.norm(), norm, rel_tol=1e-4, abs_tol=1e-12)):
            raise TalosError(f"{path} has {vector.nnz()} non-zero entries of norm {vector.norm():.6g}, but the run's "
                             f"manifest records {nnz} of norm {norm if norm is None else format(norm, '.6g')}: the "
                             f"file was altered or damaged; fine-tune the run again (talos finetune --force)")
        return vector

    def mask(self) -> dict[str, torch.Tensor] | None:
        """The run's mask; ``None`` for a method without one, and for a run exported without its weights (a
        manifest only, as in ``cached_results/``: no task vector either). A sparse method's run that has its task
        vector must have its mask: a missing one is an error, never replaced by the task vector's support."""
        p = self.path / "mask.safetensors"
        if not p.exists() and (not self.sparse or not (self.path / "task_vector.safetensors").exists()):
            return None
        mask = load_mask(self.artifact("mask.safetensors"))
        numel = sum(t.numel() for t in mask.values())
        density = sum(int(t.sum()) for t in mask.values()) / max(numel, 1)
        m = self.manifest.metrics  # a value that is absent or null (not measured) is not compared
        want_numel = numel if m.get("maskable_numel") is None else m["maskable_numel"]
        want_density = density if m.get("mask_density") is None else m["mask_density"]
        if want_numel != numel or abs(want_density - density) > 1e-9:
            raise TalosError(f"{p} has {numel} entries at density {density:.6g}, but the run's manifest records "
                             f"{want_numel} at {want_density:.6g}: the file was altered or damaged; fine-tune the run "
                             f"again (talos finetune --force)")
        return mask


def _mask_vector_problem(mask: dict[str, torch.Tensor], vector) -> str | None:
    """Why ``mask`` cannot be the mask ``vector`` was trained under (a tensor it lacks or of another shape, an entry
    the vector changes that the mask freezes), or ``None``."""
    for name in vector.names():
        if name not in mask:
            return f"it has no entry {name!r}"
        if tuple(mask[name].shape) != tuple(vector.shapes[name]):
            return f"its {name!r} has shape {tuple(mask[name].shape)}, the vector's {tuple(vector.shapes[name])}"
        if bool(((vector.dense(name) != 0) & ~mask[name]).any()):
            return f"the vector changes entries of {name!r} that it freezes"
    return None


#: the scalar metrics talos_core.pipeline records, in its order (the mask ones for runs with a mask)
RUN_METRICS = ("zero_shot_test_acc", "zero_shot_val_acc", "finetuned_test_acc", "finetuned_val_acc", "eval_precision",
               "vector_nnz", "vector_norm", "theta_numel", "mask_density", "maskable_numel", "mask_moved",
               "mask_zero_sensitivity")


def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (a process of another user counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True


class Store:
    """A results store rooted at ``root`` (created on first write)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    # ----- runs -----------------------------------------------------------------------------
    def ensure(self) -> None:
        """Create the store's folder and marker; a store that is a file or cannot be written is one
        :class:`TalosError`."""
        self.check_folder()
        try:
            (self.root / "runs").mkdir(parents=True, exist_ok=True)
            marker = self.root / "store.json"
            if not marker.exists():
                atomic_write_json(marker, {"format": STORE_FORMAT})
        except OSError as exc:
            raise TalosError(f"cannot write the store {self.root}: {exc.strerror or exc}; pass --store with a "
                             f"folder you can write") from None

    def run_path(self, rid: str) -> Path:
        return self.root / "runs" / rid

    def has_run(self, rid: str) -> bool:
        return (self.run_path(rid) / "manifest.json").exists()

    def get_run(self, rid: str) -> Run:
        path = self.run_path(rid)
        if not (path / "manifest.json").exists():
            raise TalosError(f"no run {rid!r} in store {self.root}")
        return read_run(path)

    def runs(self) -> Iterator[Run]:
        folder = self.root / "runs"
        if not folder.is_dir():
            return
        for path in sorted(folder.iterdir()):
            if path.name.startswith(".") or not (path / "manifest.json").exists():
                continue
            try:
                yield read_run(path)
            except TalosError:
                continue  # a corrupt or incomplete run is skipped here; corrupt_runs() lists it

    def corrupt_runs(self) -> list[tuple[str, str]]:
        """``(run folder name, one sentence)`` for every run folder that :meth:`runs` skips because its manifest
        is missing, unreadable or incomplete (staging ``.tmp-*`` folders are not runs and are left out)."""
        folder = self.root / "runs"
        if not folder.is_dir():
            return []
        out = []
        for path in sorted(folder.iterdir()):
            if path.name.startswith(".") or not path.is_dir():
                continue
            if not (path / "manifest.json").exists():
                out.append((path.name, f"run folder {path} has no manifest.json"))
                continue
            try:
                read_run(path)
            except TalosError as exc:
                out.append((path.name, str(exc)))
        return out

    def check_folder(self, *, write: bool = True) -> None:
        """The store must be a folder (or not exist yet) and, with ``write``, writable: else one :class:`TalosError`
        naming it. Writes nothing (call before any slow work)."""
        root = self.root
        if root.exists() and not root.is_dir():
            raise TalosError(f"store {root} is a file; --store must name a folder (existing or new)")
        if not write:
            return
        probe = root
        while not probe.exists():
            probe = probe.parent
        if not probe.is_dir():
            raise TalosError(f"store {root} cannot be created: {probe} is a file, not a folder")
        if not os.access(probe, os.W_OK | os.X_OK):
            raise TalosError(f"store {root} is not writable ({probe} is read-only); pass --store with a folder you "
                             f"can write")
        for sub in ("runs", "results", "checkpoints", "store.json"):
            p = root / sub
            if sub != "store.json" and p.exists() and not p.is_dir():
                raise TalosError(f"store {root} is damaged: {p} is a file, not a folder")

    def run_lock(self, rid: str):
        """Exclusive lock on fine-tuning run ``rid`` between processes (:meth:`locked` on ``run/<rid>``)."""
        return self.locked("run", rid)

    def find_runs(self, *, model: str | None = None, task: str | None = None,
                  method: str | None = None) -> list[Run]:
        """The runs of ``method`` on ``model`` and ``task`` (``None``: any)."""
        want = {"model": model, "task": task, "method": method}
        return [r for r in self.runs() if all(v is None or getattr(r.manifest, k) == v for k, v in want.items())]

    def run_table(self) -> pd.DataFrame:
        """One row per run: its identity and its scalar metrics, those the pipeline records first, in its order (a
        column even where no manifest has the value — a damaged one, or a run without a mask: shown as missing,
        never dropped)."""
        rows = []
        for r in self.runs():
            m = r.manifest
            rows.append({"run_id": r.id, "model": m.model, "task": m.task, "method": m.method,
                         "sparsity": m.sparsity, "seed": m.seed,
                         **{f"metric.{k}": m.metrics.get(k) for k in RUN_METRICS},
                         **{f"metric.{k}": v for k, v in m.metrics.items() if not isinstance(v, (dict, list))}})
        return pd.DataFrame(rows)

    def staging(self, rid: str) -> Path:
        """A fresh private folder to assemble run ``rid`` in (see :meth:`commit`), named
        ``.tmp-<rid>-<pid>-<random>``; stale staging folders are cleaned first (:meth:`clean_stale`)."""
        self.ensure()
        self.clean_stale()
        path = self.root / "runs" / f".tmp-{rid}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        path.mkdir(parents=True)
        return path

    def clean_stale(self, max_age_s: float = 3600.0) -> list[str]:
        """Remove the ``runs/.tmp-*`` staging and ``runs/.old-*`` trash folders left by writers that died: those
        whose writer pid (in the name) is no longer running on this machine, and any older than ``max_age_s``
        (a staging folder lives for the seconds it takes to write a run's files). Returns the names removed."""
        folder = self.root / "runs"
        if not folder.is_dir():
            return []
        removed = []
        now = time.time()
        for path in folder.iterdir():
            if not path.is_dir() or not path.name.startswith((".tmp-", ".old-")):
                continue
            try:
                age = now - path.stat().st_mtime
            except OSError:
                continue
            stale = age > max_age_s
            if not stale and path.name.startswith(".tmp-"):
                pid = path.name.rsplit("-", 2)[-2] if path.name.count("-") >= 2 else ""
                stale = pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid))
            if stale:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path.name)
        return removed

    def checkpoint_dir(self, rid: str) -> Path:
        """Stable folder for a run's resumable checkpoints (survives a crash; removed on commit)."""
        path = self.root / "checkpoints" / rid
        path.mkdir(parents=True, exist_ok=True)
        return path

    def progress_path(self, kind: str, name: str) -> Path:
        """Where a long evaluation keeps its partial progress towards result ``kind/name`` (the finished rows of a
        ξ grid), so an interrupted one goes on where it stopped; removed once the result is written."""
        return self.root / "checkpoints" / "results" / kind / f"{name}.json"

    def kept_work(self) -> list[dict[str, Any]]:
        """What interrupted runs left for ``--resume`` to continue: ``{"kind": "run", "name": run id, "kept": "step
        N"}`` per run checkpoint, ``{"kind": result kind, "name": result name, "kept": "K parts"}`` per long
        evaluation's progress file (:meth:`progress_path`). Unreadable files say so; nothing is changed."""
        root = self.root / "checkpoints"
        out: list[dict[str, Any]] = []
        if not root.is_dir():
            return out
        for folder in sorted(p for p in root.iterdir() if p.is_dir() and p.name != "results"):
            meta = folder / "checkpoint.json"
            if not meta.exists():
                continue
            try:
                kept = f"step {int(read_json(meta)['step'])}"
            except (TalosError, KeyError, TypeError, ValueError):
                kept = "unreadable (it will be discarded)"
            out.append({"kind": "run", "name": folder.name, "kept": kept})
        for path in sorted((root / "results").glob("*/*.json")):
            try:
                parts = read_json(path).get("parts")
            except (TalosError, AttributeError):
                parts = None
            kept = f"{len(parts)} finished parts" if isinstance(parts, dict) else "unreadable (it will be discarded)"
            out.append({"kind": path.parent.name, "name": path.stem, "kept": kept})
        return out

    def commit(self, staging: Path, rid: str) -> Run:
        """Atomically publish a staged run folder (replacing an older run with the same id)."""
        target = self.run_path(rid)
        if not (staging / "manifest.json").exists():
            raise TalosError(f"staged run {staging} has no manifest.json")
        if target.exists():
            trash = target.with_name(f".old-{rid}-{uuid.uuid4().hex[:6]}")
            os.replace(target, trash)
            os.replace(staging, target)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(staging, target)
        shutil.rmtree(self.root / "checkpoints" / rid, ignore_errors=True)
        return read_run(target)

    # ----- results --------------------------------------------------------------------------
    def result_path(self, kind: str, name: str) -> Path:
        return schema.result_path(self.root, kind, name)

    @contextmanager
    def locked(self, kind: str, name: str) -> Iterator[None]:
        """Hold an exclusive lock on result ``kind/name`` between processes (``fcntl.flock`` on
        ``<store>/.locks/<kind>__<name>.lock``; released when the block ends or the process dies), for a
        read-merge-write of a result other processes may update at the same time. Where ``fcntl`` does not
        exist (Windows) the block runs unlocked."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            yield
            return
        folder = self.root / ".locks"
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / f"{kind}__{name}.lock", "a+b") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def lock_held(self, kind: str, name: str) -> bool:
        """Whether another process holds :meth:`locked` ``kind/name`` now (a probe that does not wait; ``False``
        where ``fcntl`` does not exist). A lock this process holds through another open file counts as held."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return False
        path = self.root / ".locks" / f"{kind}__{name}.lock"
        if not path.exists():
            return False
        with open(path, "a+b") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            return False

    def write_result(self, kind: str, name: str, payload: dict) -> Path:
        self.ensure()
        path = self.result_path(kind, name)
        atomic_write_json(path, payload)
        return path

    def read_result(self, kind: str, name: str) -> dict:
        """Result ``kind/name`` read and checked by :func:`talos_core.schema.read_result` (types and ranges of its
        values: a missing, garbled or edited file is one sentence naming it)."""
        return schema.read_result(self.root, kind, name)

    def results(self, kind: str) -> list[str]:
        folder = schema.results_dir(self.root) / kind
        if not folder.is_dir():
            return []
        return sorted(p.stem for p in folder.glob("*.json") if not p.name.startswith("."))

    def write_table(self, kind: str, name: str, table: pd.DataFrame, **extra: Any) -> Path:
        """Store a tidy table as ``{"columns": [...], "records": [...], **extra}``."""
        records = json.loads(table.to_json(orient="records"))
        return self.write_result(kind, name, {"columns": list(table.columns), "records": records, **extra})

    def read_table(self, kind: str, name: str) -> pd.DataFrame:
        payload = self.read_result(kind, name)
        if "records" not in payload:
            raise TalosError(f"result {kind}/{name} in {self.root} is not a table")
        return pd.DataFrame(payload["records"], columns=payload.get("columns"))


def result_suite(path: Path, data: bytes) -> tuple[str, str] | None:
    """``(suite, model)`` of a result file written by a suite, else ``None`` (results of single commands).

    Suite results carry both fields; a suite's own record (``results/suite/<name>.json``) is named after it.

    >>> result_suite(Path("results/addition/x.json"), b'{"suite": "vision", "model": "m"}')
    ('vision', 'm')
    >>> result_suite(Path("results/suite/text.json"), b'{"model": "minilm-l6"}')
    ('text', 'minilm-l6')
    >>> result_suite(Path("results/addition/x.json"), b'{"model": "m"}') is None
    True
    """
    if path.suffix != ".json":
        return None
    try:
        d = loads_json(data, path)
    except TalosError:
        return None
    if not isinstance(d, dict) or not isinstance(d.get("model"), str):
        return None
    suite = path.stem if path.parent.name == "suite" else d.get("suite")
    return (suite, d["model"]) if isinstance(suite, str) else None


def _referenced(run_id: str, result_texts: list[bytes]) -> bool:
    """Whether some result file (its raw JSON) names the run ``run_id``."""
    return any(run_id.encode() in t for t in result_texts)


def export_store(source: str | Path, dest: str | Path, *, artifacts: bool = False,
                 referenced_only: bool = False, replace: bool = False) -> dict[str, int]:
    """Copy a store's results (and run manifests) into ``dest``, merging with what is there.

    With ``artifacts=False`` the runs' safetensors (task vectors, masks, checkpoints) stay behind: the
    dashboard needs only ``results/`` and the manifests, and dense vectors do not belong in git. Files
    are copied atomically one by one, so a dashboard reading ``dest`` never sees a partial file.
    ``referenced_only=True`` copies only the runs whose id appears in some result (e.g. leaves out
    runs of an earlier setting that no result uses any more).

    ``replace=True`` re-ships suites: every result in ``dest`` of a (suite, model) that ``source`` has results
    of is removed first (a merge would keep the old run's files that the new run no longer writes), and
    afterwards every run in ``dest`` that no result there refers to (manifests, and artifacts if any).
    Results of other suites and of single commands are kept. Counted as ``removed_results`` /
    ``removed_runs``.
    """
    src, dst = Path(source), Path(dest)
    if not (src / "store.json").exists() and not (src / "results").is_dir():
        raise TalosError(f"{src} is not a results store (no store.json or results/ folder)")
    if dst.resolve().is_relative_to(src.resolve()):  # its runs/ and results/ would become a damaged run of the source
        raise TalosError(f"the destination {dst} lies inside the source store {src}; give a folder outside it")
    counts = {"results": 0, "manifests": 0, "artifacts": 0}
    Store(dst).ensure()
    files = sorted(p for p in (src / "results").rglob("*") if p.is_file() and not p.name.startswith("."))
    if replace:
        shipped = {k for p in files if (k := result_suite(p.relative_to(src), p.read_bytes())) is not None}
        counts["removed_results"] = counts["removed_runs"] = 0
        for old in sorted((dst / "results").rglob("*.json")):
            if old.is_file() and result_suite(old.relative_to(dst), old.read_bytes()) in shipped:
                old.unlink()
                counts["removed_results"] += 1
    texts: list[bytes] = []
    for path in files:
        data = path.read_bytes()
        atomic_write_bytes(dst / path.relative_to(src), data)
        counts["results"] += 1
        if path.suffix == ".json":
            texts.append(data)
    for run in Store(src).runs():
        if referenced_only and not _referenced(run.id, texts):
            continue
        for f in sorted(run.path.iterdir()):
            if f.name == "manifest.json":
                counts["manifests"] += 1
            elif artifacts and f.suffix == ".safetensors":
                counts["artifacts"] += 1
            else:
                continue
            atomic_write_bytes(dst / "runs" / run.id / f.name, f.read_bytes())
    if replace:
        kept = [p.read_bytes() for p in (dst / "results").rglob("*.json") if p.is_file()]
        for folder in sorted((dst / "runs").iterdir()) if (dst / "runs").is_dir() else []:
            if folder.is_dir() and not _referenced(folder.name, kept):
                shutil.rmtree(folder)
                counts["removed_runs"] += 1
    return counts


def record_checksums(store: Store) -> list[tuple[str, str]]:
    """Record in each run manifest of ``store`` the SHA-256 it lacks (the older format's manifests, and ``null``
    entries): an artifact file that is here is hashed as it is now — trusted, so run this only on a store whose files
    you trust — and one that is not is recorded as ``null`` (never read). The manifest notes what was done in
    ``info["checksums_recorded"]`` (when, the format it had, the files hashed) and takes the current format
    :data:`RUN_FORMAT` when it has every field that format has (else it keeps its own). Returns ``(run id, one
    phrase)`` per manifest rewritten; manifests that record every checksum are left as they are."""
    done = []
    for run in list(store.runs()):
        m, path = run.manifest, run.path / "manifest.json"
        recorded = dict(m.artifacts or {})
        todo = [n for n in run.artifact_names() if recorded.get(n) is None
                and (n not in recorded or (run.path / n).is_file())]
        if not todo and m.artifacts is not None:
            continue
        with store.run_lock(run.id):
            hashed = [n for n in todo if (run.path / n).is_file()]
            recorded.update({n: file_sha256(run.path / n) if n in hashed else None for n in todo})
            note = {"on": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "from_format": m.format, "hashed": hashed}
            data = {**m.to_dict(), "artifacts": recorded, "info": {**m.info, "checksums_recorded": note}}
            try:
                RunManifest.from_dict({**data, "format": RUN_FORMAT}, path)
                data["format"] = RUN_FORMAT
            except TalosError:
                pass  # written without a field the current format has: it keeps its own format
            atomic_write_json(path, data)
        done.append((run.id, f"{len(hashed)} file(s) hashed as they are now, {len(todo) - len(hashed)} recorded as "
                             f"not kept (format {data['format']})"))
    return done


def discard_unused(root: str | Path) -> bool:
    """Remove the store folder ``root`` if it holds nothing but what creating a store and taking locks leave (its
    ``store.json``, lock files, empty folders): a command that created the store and was then refused leaves nothing
    behind. Returns whether it was removed; a store with anything else in it is left as it is."""
    root = Path(root)
    if not root.is_dir():
        return False
    store = Store(root)
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if path.is_symlink() or (path.is_file() and rel.as_posix() != "store.json" and not (
                rel.parts[0] == ".locks" and path.suffix == ".lock")):
            return False
        if rel.parts[0] == ".locks" and path.suffix == ".lock" and store.lock_held(*path.stem.split("__", 1)):
            return False  # another process is at work in the new store (fine-tuning into it)
    shutil.rmtree(root, ignore_errors=True)
    return True
