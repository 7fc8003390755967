"""Atomic file primitives: every artifact of a store is written here (JSON and safetensors only).

A file is written to a unique temporary name in its own folder, flushed, fsynced and renamed into
place, so a reader never sees half a file and two writers never share a temporary file. This module
sits at the bottom of the package: it imports nothing of ``talos_core`` but :mod:`talos_core.errors`, and
torch only inside the safetensors functions (so the torch-free :mod:`talos_core.schema` can read JSON here).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from talos_core.errors import TalosError

if TYPE_CHECKING:
    import torch


def _tmp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_path(path)
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if exc.filename is not None:
            raise
        # a failed write or fsync (a full disk, a quota) names no file: the error names the one being written
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
    finally:
        tmp.unlink(missing_ok=True)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def json_ready(value: Any) -> Any:
    """``value`` as a JSON round trip gives it back: mappings → dicts with string keys and tuples → lists,
    recursively; numpy / torch scalars and arrays → numbers and lists, paths → strings; anything else JSON cannot
    hold → its ``str``. Settings compared with what was read back from a store (suite fingerprints, result
    overrides) go through it.

    >>> json_ready({"a": (1, 2), 3: {"b": Path("x")}})
    {'a': [1, 2], '3': {'b': 'x'}}
    """
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    try:
        return json_ready(_json_default(value))
    except TypeError:
        return str(value)


def atomic_write_json(path: Path, payload: Any) -> None:
    """Write ``payload`` as JSON atomically (NaN/inf become null)."""
    text = json.dumps(_clean(payload), indent=1, sort_keys=False, default=_json_default)
    atomic_write_bytes(Path(path), text.encode())


def _clean(obj: Any) -> Any:
    import math

    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


#: how deeply a store's JSON may nest: its files nest 6 levels at most; much deeper nesting is damage, and every
#: reader that walks it recursively (the parser itself, repr, pandas) would crash on it
MAX_JSON_DEPTH = 64
#: the largest JSON file read (a store's largest, a suite record, is under 1 MiB)
MAX_JSON_BYTES = 256 << 20


class _Refused(ValueError):
    """What the JSON decoder's hooks raise: a value standard JSON, or a store, does not have."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _Refused(f"it has the key {twice[:60]!r} twice in one object (which one counts is not defined)")
    return out


def _constant(name: str) -> float:
    raise _Refused(f"it holds {name}, which is not JSON (a non-finite number is written as null)")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Refused(f"it holds the number {text[:40]}, beyond the range of a float")
    return value


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys, parse_constant=_constant, parse_float=_finite)


def _deeper_than(value: Any, left: int) -> bool:
    """Whether ``value`` nests lists and objects more than ``left`` levels (stops as soon as it does)."""
    if type(value) is dict:
        value = value.values()
    elif type(value) is not list:
        return False
    if left == 0:
        return True
    return any((type(v) is dict or type(v) is list) and _deeper_than(v, left - 1) for v in value)


def _too_deep(source: str | Path) -> TalosError:
    return TalosError(f"corrupt JSON file {source}: it nests lists or objects more than {MAX_JSON_DEPTH} levels deep "
                      f"(a store's files nest a few)")


def loads_json(text: str | bytes, source: str | Path) -> Any:
    """Parse the JSON ``text`` read from ``source``; anything that is not plain, unambiguous JSON of a sane shape is
    one :class:`TalosError` naming ``source``: a syntax error, text that is not UTF-8, ``NaN``/``Infinity`` or a
    number beyond a float, a key repeated in one object, nesting deeper than :data:`MAX_JSON_DEPTH`.

    >>> loads_json('{"a": [1, 2.5]}', "x.json")
    {'a': [1, 2.5]}
    >>> loads_json('{"a": 1, "a": 2}', "x.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    talos_core.errors.TalosError: corrupt JSON file x.json: it has the key 'a' twice in one object ...
    """
    try:
        value = _DECODER.decode(text.decode("utf-8") if isinstance(text, bytes) else text)
    except (_Refused, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TalosError(f"corrupt JSON file {source}: {exc}") from None
    except RecursionError:  # deeper than the parser's own limit
        raise _too_deep(source) from None
    if _deeper_than(value, MAX_JSON_DEPTH):
        raise _too_deep(source)
    return value


def read_json(path: Path) -> Any:
    """The JSON value in ``path`` (:func:`loads_json`); a missing, unreadable, oversized or corrupt file, or one that
    is not a regular file (a folder, a named pipe that would block the reader), is one :class:`TalosError` naming
    it."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise TalosError(f"missing file {path}") from None
    if not stat.S_ISREG(info.st_mode):
        raise TalosError(f"{path} is not a regular file (a folder, a device or a named pipe); a JSON file of a store "
                         f"is a plain file")
    if info.st_size > MAX_JSON_BYTES:
        raise TalosError(f"JSON file {path} is {info.st_size / 2**20:.0f} MiB, larger than any file of a store "
                         f"(at most {MAX_JSON_BYTES >> 20} MiB are read); it is not one")
    return loads_json(path.read_bytes(), path)


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes (read in 1 MiB blocks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def canonical_safetensors(data: bytes) -> bytes:
    """The same safetensors file with its JSON header written in one canonical form: keys sorted (the
    ``__metadata__`` entries included), no spaces, padded with spaces to a multiple of 8 bytes as the format
    asks. The ``safetensors`` writer keeps the metadata in a hash map, so its key order (and with it the file's
    bytes and checksum) varies from process to process; the tensor bytes and their offsets (relative to the
    end of the header) are left as they are, so every reader sees the same tensors and metadata.

    >>> from safetensors.torch import save
    >>> import torch
    >>> a = canonical_safetensors(save({"x": torch.ones(2)}, metadata={"b": "1", "a": "2"}))
    >>> a == canonical_safetensors(save({"x": torch.ones(2)}, metadata={"a": "2", "b": "1"}))
    True
    """
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data[8 + n:]


def atomic_save_safetensors(tensors: dict[str, torch.Tensor], path: Path,
                            metadata: dict[str, str] | None = None) -> None:
    """Write tensors (and string metadata) as safetensors, atomically, in canonical form
    (:func:`canonical_safetensors`): identical tensors and metadata give identical bytes."""
    from safetensors.torch import save

    data = save({k: v.detach().cpu().contiguous() for k, v in tensors.items()},
                metadata=dict(sorted(metadata.items())) if metadata else None)
    atomic_write_bytes(Path(path), canonical_safetensors(data))


def load_safetensors(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Load tensors and metadata; a missing or corrupt file becomes one clear :class:`TalosError`."""
    from safetensors import safe_open

    path = Path(path)
    if not path.exists():
        raise TalosError(f"missing file {path}")
    try:
        with safe_open(str(path), framework="pt") as fh:
            meta = fh.metadata() or {}
            tensors = {k: fh.get_tensor(k) for k in fh.keys()}  # noqa: SIM118 - safe_open has keys() but no __iter__
    except Exception as exc:  # safetensors raises its own error types for bad headers
        raise TalosError(f"corrupt safetensors file {path}: {exc}") from None
    return tensors, meta
