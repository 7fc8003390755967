"""The Run page's uploads: a CSV (text task) or a zip of an image folder (image task), saved in the user's store;
and a fine-tuned checkpoint file, saved there too and imported as a run (:func:`import_upload`, ``talos import``).

An upload is saved under ``<store>/uploads/<first 16 hex digits of its SHA-256>/`` and nowhere else, then
named as a file task (:mod:`talos_core.tasks.files`): ``csv:<that folder>/<file name>`` or
``images:<that folder>/<image folder>``. The same bytes uploaded twice land in the same folder. The upload
is checked by resolving that task (classes, columns, readable images); a bad upload is one sentence and its
folder is removed again, so nothing of it stays.

Caps (:class:`UploadLimits`, the style of :class:`dashboard.jobs.JobLimits`): the upload's size, and for a
zip the number of files and their total unpacked size. Zips are unpacked member by member into a staging
folder that is renamed into place only when complete: absolute names, ``..`` parts and links are refused
(no path leaves the folder), ``__MACOSX/`` and hidden files are skipped, and the bytes actually written are
counted against the cap whatever the zip's headers claim (no zip bomb).

    >>> UploadLimits.from_env({"TALOS_DASHBOARD_MAX_UPLOAD_MB": "5"}).max_upload_mb
    5
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import stat
import uuid
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from dashboard.limits import ints_from_env
from talos_core.atomic import atomic_write_bytes
from talos_core.errors import TalosError

UPLOADS_DIR = "uploads"
MAX_UPLOAD_MB_ENV = "TALOS_DASHBOARD_MAX_UPLOAD_MB"
MAX_UNPACKED_MB_ENV = "TALOS_DASHBOARD_MAX_UNPACKED_MB"
MAX_FILES_ENV = "TALOS_DASHBOARD_MAX_UPLOAD_FILES"
TEXT_SUFFIXES = (".csv", ".tsv")
UPLOAD_TYPES = ("csv", "tsv", "zip")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class UploadLimits:
    """Caps on the Run page's uploads: ``max_upload_mb`` per uploaded file, ``max_unpacked_mb`` and
    ``max_files`` for what a zip unpacks to; set with ``TALOS_DASHBOARD_MAX_UPLOAD_MB``,
    ``TALOS_DASHBOARD_MAX_UNPACKED_MB``, ``TALOS_DASHBOARD_MAX_UPLOAD_FILES`` (positive integers)."""

    max_upload_mb: int = 50
    max_unpacked_mb: int = 200
    max_files: int = 20000

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> UploadLimits:
        return cls(**ints_from_env((("max_upload_mb", MAX_UPLOAD_MB_ENV), ("max_unpacked_mb", MAX_UNPACKED_MB_ENV),
                                    ("max_files", MAX_FILES_ENV)), minimum=1, rule="a positive integer", env=env))


def safe_name(filename: str) -> str:
    """The base name of an uploaded file, reduced to ``[A-Za-z0-9._-]`` (never empty, never hidden).

    >>> safe_name("../../etc/my reviews (1).CSV"), safe_name("..")
    ('my_reviews_1_.CSV', 'upload')
    """
    base = PurePosixPath(str(filename).replace("\\", "/")).name
    base = _SAFE.sub("_", base).lstrip(".")
    return base or "upload"


def _member_path(name: str) -> PurePosixPath | None:
    """A zip member's relative path, ``None`` for what is skipped; unsafe names raise."""
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if not parts:
        return None
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) or ".." in parts:
        raise TalosError(f"the zip holds {name!r}, a path outside its folder; zip the image folder itself")
    if any(p.startswith(".") or p == "__MACOSX" for p in parts):
        return None
    return PurePosixPath(*parts)


def _unpack(data: bytes, dest: Path, limits: UploadLimits, shown: str) -> None:
    """Unpack the zip ``data`` into the new folder ``dest`` within the caps."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError):
        raise TalosError(f"{shown!r} is not a zip file; upload a .zip of an image folder or a .csv file") from None
    cap = limits.max_unpacked_mb * 1024 * 1024
    written = 0
    files = 0
    with archive:
        members = archive.infolist()
        for info in members:
            rel = _member_path(info.filename)
            if rel is None or info.is_dir():
                continue
            if stat.S_ISLNK(info.external_attr >> 16):
                raise TalosError(f"the zip holds the link {info.filename!r}; links are not unpacked, zip the files")
            if info.flag_bits & 0x1:
                raise TalosError(f"the zip holds the encrypted file {info.filename!r}; upload an unencrypted zip")
            files += 1
            if files > limits.max_files:
                raise TalosError(f"the zip holds more than {limits.max_files:,} files, the cap of this dashboard "
                                 f"server; upload fewer images")
            if written + info.file_size > cap:
                raise TalosError(f"the zip unpacks to more than {limits.max_unpacked_mb} MB, the cap of this "
                                 f"dashboard server; upload fewer or smaller images")
            target = dest.joinpath(*rel.parts)
            if not target.resolve().is_relative_to(dest.resolve()):
                raise TalosError(f"the zip holds {info.filename!r}, a path outside its folder")
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with archive.open(info) as src, open(target, "xb") as out:
                    while chunk := src.read(_CHUNK):
                        written += len(chunk)
                        if written > cap:  # headers can lie about sizes: count what is really written
                            raise TalosError(f"the zip unpacks to more than {limits.max_unpacked_mb} MB, the cap "
                                             f"of this dashboard server; upload fewer or smaller images")
                        out.write(chunk)
            except FileExistsError:
                raise TalosError(f"the zip holds {info.filename!r} twice") from None
            except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, NotImplementedError,
                    RuntimeError) as e:
                raise TalosError(f"the zip member {info.filename!r} could not be unpacked ({e})") from None
    if files == 0:
        raise TalosError(f"{shown!r} holds no files; zip a folder with one sub-folder of images per class")


def _image_root(folder: Path) -> Path:
    """The folder of class folders inside an unpacked zip: descend through lone wrapper folders."""
    while True:
        entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
        dirs = [p for p in entries if p.is_dir()]
        if len(dirs) == 1 and len(entries) == 1 and dirs[0].name not in ("train", "test"):
            folder = dirs[0]
        else:
            return folder


def _checked(filename: str, data: bytes, limits: UploadLimits, types: tuple[str, ...], what: str) -> str:
    """The upload's safe name after checking its suffix (one of ``types``), size (the cap) and that it is not empty."""
    shown = safe_name(filename)
    if Path(shown).suffix.lower().lstrip(".") not in types:
        raise TalosError(f"{shown!r} is {what}; upload a {', '.join('.' + t for t in types)} file")
    if len(data) > limits.max_upload_mb * 1024 * 1024:
        raise TalosError(f"{shown!r} is {len(data) / 2**20:.1f} MB, above the upload cap of this dashboard server "
                         f"({limits.max_upload_mb} MB)")
    if not data:
        raise TalosError(f"{shown!r} is empty")
    return shown


def _folder(store: str | Path, data: bytes) -> Path:
    """The upload's own folder: ``<store>/uploads/<first 16 hex digits of its SHA-256>``."""
    return Path(store) / UPLOADS_DIR / hashlib.sha256(data).hexdigest()[:16]


def _write(folder: Path, shown: str, data: bytes) -> Path:
    """``folder/shown`` holding ``data`` (written atomically unless the same upload is there already)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / shown
    if not target.exists():
        atomic_write_bytes(target, data)
    return target


def save_upload(store: str | Path, filename: str, data: bytes, *, limits: UploadLimits | None = None,
                options: Mapping[str, str] | None = None) -> str:
    """Save an uploaded CSV or zip into ``store``'s ``uploads/`` and return its checked task name.

    ``options`` are the CSV task's options (``text``, ``label``, ``sep``; empty values ignored). The name
    returned is canonical, with the content hash (:func:`talos_core.tasks.files.resolve_file_task`).
    Every problem is one :class:`TalosError` sentence and leaves nothing behind.
    """
    from urllib.parse import urlencode

    from talos_core.tasks import get_task

    limits = limits or UploadLimits()
    shown = _checked(filename, data, limits, UPLOAD_TYPES, "neither a CSV file nor a zip of an image folder")
    suffix = Path(shown).suffix.lower()
    uploads = Path(store) / UPLOADS_DIR
    folder = _folder(store, data)
    created = not folder.exists()
    try:
        if suffix in TEXT_SUFFIXES:
            target = _write(folder, shown, data)
            query = urlencode(sorted((k, v) for k, v in (options or {}).items() if v))
            task = f"csv:{target}" + (f"?{query}" if query else "")
        else:
            if created:
                uploads.mkdir(parents=True, exist_ok=True)
                staging = uploads / f".staging-{uuid.uuid4().hex}"
                staging.mkdir()
                try:
                    _unpack(data, staging / "images", limits, shown)
                    try:
                        os.replace(staging, folder)
                    except OSError:
                        if not folder.is_dir():  # else another session unpacked the same zip meanwhile
                            raise
                finally:
                    shutil.rmtree(staging, ignore_errors=True)
            task = f"images:{_image_root(folder / 'images')}"
        return get_task(task).name
    except TalosError:
        if created:
            shutil.rmtree(folder, ignore_errors=True)
        raise


CHECKPOINT_TYPES = ("safetensors", "pt", "pth", "bin", "ckpt")


def import_upload(store: str | Path, filename: str, data: bytes, *, model: str, task: str, label: str | None = None,
                  limits: UploadLimits | None = None):
    """Save an uploaded checkpoint file (a state dict: ``.safetensors``, or ``.pt``/``.pth``/``.bin``/``.ckpt`` read
    with ``torch.load(weights_only=True)``) under ``store``'s ``uploads/`` and import it as a run of method
    ``imported`` of ``model`` on ``task`` (:func:`talos_core.importing.import_checkpoint`; ``label`` ``None``: from
    the file's name). Returns the :class:`~talos_core.importing.ImportResult`. A bad upload or checkpoint is one
    :class:`TalosError` sentence and leaves nothing behind (neither the saved file nor a run)."""
    from talos_core.importing import ImportRequest, default_label, import_checkpoint
    from talos_core.store import Store

    shown = _checked(filename, data, limits or UploadLimits(), CHECKPOINT_TYPES, "not a checkpoint file")
    label = label if label is not None else default_label(shown)
    store_ = Store(store)
    store_.check_folder()
    folder = _folder(store, data)
    created = not folder.exists()
    try:
        path = _write(folder, shown, data)
        return import_checkpoint(ImportRequest(model, task, str(path), label), store_)
    except BaseException:
        if created:
            shutil.rmtree(folder, ignore_errors=True)
        raise
