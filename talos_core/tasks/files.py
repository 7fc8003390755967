"""Tasks from the user's own data: ``csv:PATH``, ``images:DIR`` and ``hf:ID``.

A *file task* is named by a spec string wherever a task name is accepted (``talos finetune --task``,
``talos evaluate --tasks``, the dashboard's Run page)::

    csv:reviews.csv                          text and label columns detected
    csv:reviews.csv?text=review&label=stars  columns named (also sep=; for other delimiters)
    images:photos/                           one sub-folder per class (torchvision ImageFolder layout)
    hf:imdb?split=train&test_split=test      datasets.load_dataset("imdb"); also config=, text=, label=,
                                             image=, revision=

Options are URL-query style (``?key=value&key=value``), so a spec stays one word on a command line and in a
comma-separated task list. Resolving a spec (:func:`resolve_file_task`) reads the data once, takes the class
names from it, and names the task canonically: the absolute path, the options sorted, and ``#`` + the first
12 hex digits of a SHA-256 of the content (file bytes for ``csv:``/``images:``, the loaded examples for
``hf:``), e.g. ``csv:/data/reviews.csv?label=stars&text=review#3f2a9c01b7de``. That name is what runs,
run ids and results record, so a changed file gets new runs and never reuses stale ones; a canonical name
whose content has changed since is refused with one sentence.

Splits, as for registered tasks: a source with a test split keeps it (``images:`` with ``train/`` and
``test/`` sub-folders, an ``hf:`` data set's ``test`` split), otherwise a fixed 20% hold-out
(:func:`~talos_core.tasks.splits.holdout_fraction`) is the test split; validation is the usual fixed 10% of
train (:func:`talos_core.tasks.load_task`). Text: empty texts and unlabelled rows are dropped and repeated
texts kept once (as for the offline text tasks, so no text is in both train and test). Classes: the distinct
labels sorted (numerically when all are integers), a ``ClassLabel``'s own names for ``hf:``, the sorted
sub-folder names for ``images:``. The zero-shot head is built from the class names with generic templates
(:data:`TEXT_TEMPLATES`, :data:`IMAGE_TEMPLATES`).

Every problem with the data is one :class:`~talos_core.errors.TalosError` sentence (missing path or column,
one class only, an empty or unreadable file, a folder without images), raised before anything is written.

>>> parse_spec("csv:data.csv?label=stars&text=review")[0::2]
('csv', {'label': 'stars', 'text': 'review'})
>>> is_file_task("csv:x.csv"), is_file_task("digits")
(True, False)
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

import numpy as np

from talos_core.errors import TalosError
from talos_core.tasks.base import Split, TaskSpec
from talos_core.tasks.splits import holdout_fraction

KINDS = ("csv", "images", "hf")
OPTIONS: dict[str, tuple[str, ...]] = {
    "csv": ("text", "label", "sep"),
    "images": (),
    "hf": ("config", "split", "test_split", "text", "label", "image", "revision"),
}
"""The options each kind of spec takes."""

HASH_DIGITS = 12
MAX_CLASSES = 10_000
"""The most classes a task may have (ten times ImageNet's 1,000): every example is scored against every class, so a
task with a class per row (100,000 classes) needs tens of GB for its logits alone."""
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
"""What torchvision's ImageFolder reads; other files in a class folder are ignored, as there."""
TEXT_COLUMNS = ("text", "sentence", "review", "content", "comment", "document", "body", "tweet", "question")
LABEL_COLUMNS = ("label", "labels", "class", "category", "target", "sentiment", "stars", "rating")
TEXT_TEMPLATES = ("{}", "This text is about {}.", "The label of this text is {}.", "A text labelled {}.")
IMAGE_TEMPLATES = ("a photo of a {}.", "a photo of the {}.", "a bad photo of a {}.", "a close-up photo of a {}.",
                   "a low resolution photo of a {}.")
_HASH_RE = re.compile(rf"^[0-9a-f]{{{HASH_DIGITS}}}$")


def is_file_task(name: object) -> bool:
    """Whether ``name`` is a file-task spec (``csv:``, ``images:`` or ``hf:`` prefix)."""
    return isinstance(name, str) and name.partition(":")[0] in KINDS and ":" in name


def parse_spec(text: str) -> tuple[str, str, dict[str, str], str | None]:
    """``(kind, location, options, content hash or None)`` of a spec; bad syntax → :class:`TalosError`.

    >>> parse_spec("images:/data/pets#0123456789ab")
    ('images', '/data/pets', {}, '0123456789ab')
    >>> parse_spec("csv:x.csv?colour=red")
    Traceback (most recent call last):
    ...
    talos_core.errors.TalosError: task 'csv:x.csv?colour=red': unknown option 'colour'; csv: tasks take text, label, sep
    """
    kind, _, rest = text.partition(":")
    if kind not in KINDS:
        raise TalosError(f"task {text!r}: a file task starts with one of {', '.join(k + ':' for k in KINDS)}")
    digest = None
    head, sep, tail = rest.rpartition("#")
    if sep and _HASH_RE.match(tail):
        rest, digest = head, tail
    location, _, query = rest.partition("?")
    if not location:
        raise TalosError(f"task {text!r}: nothing after {kind + ':'!r}; write {kind}:"
                         f"{'PATH' if kind == 'csv' else 'DIR' if kind == 'images' else 'DATASET_ID'}")
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise TalosError(f"task {text!r}: options must be written ?key=value&key=value") from None
    options: dict[str, str] = {}
    for key, value in pairs:
        if key not in OPTIONS[kind]:
            allowed = ", ".join(OPTIONS[kind]) or "no options"
            raise TalosError(f"task {text!r}: unknown option {key!r}; {kind}: tasks take {allowed}")
        if key in options:
            raise TalosError(f"task {text!r}: option {key!r} is given twice")
        if not value:
            raise TalosError(f"task {text!r}: option {key!r} has no value")
        options[key] = value
    return kind, location, options, digest


def _local(kind: str, location: str) -> str:
    """The location in canonical form: an absolute path for local files, the hub id otherwise."""
    if kind == "hf" and not Path(location).expanduser().exists():
        return location
    return str(Path(location).expanduser().resolve())


def canonical_spec(kind: str, location: str, options: dict[str, str], digest: str | None = None) -> str:
    """``kind:location?sorted options#digest``.

    >>> canonical_spec("csv", "/a.csv", {"text": "t", "label": "l"}, "0123456789ab")
    'csv:/a.csv?label=l&text=t#0123456789ab'
    """
    query = urlencode(sorted(options.items()))
    return f"{kind}:{location}" + (f"?{query}" if query else "") + (f"#{digest}" if digest else "")


def task_label(name: str) -> str:
    """A short readable label of a task name: file tasks become ``kind-<file or folder name>-<hash>``.

    >>> task_label("csv:/data/my reviews.csv?text=r#0123456789ab"), task_label("digits")
    ('csv-my reviews-0123456789ab', 'digits')
    """
    if not is_file_task(name):
        return name
    kind, location, _, digest = parse_spec(name)
    stem = re.sub("_+", "_", Path(location.rstrip("/")).stem or location)  # no "__" (the run id's separator)
    return "-".join(p for p in (kind, stem, digest) if p)


# --- reading ---------------------------------------------------------------------------------------

def _fail(spec: str, message: str) -> TalosError:
    return TalosError(f"task {spec!r}: {message}")


def _sort_classes(values: Iterable[str]) -> tuple[str, ...]:
    """Distinct values sorted, numerically when all are integers.

    >>> _sort_classes(["10", "2", "1", "2"]), _sort_classes(["b", "a"])
    (('1', '2', '10'), ('a', 'b'))
    """
    distinct = set(values)
    try:
        return tuple(sorted(distinct, key=int))
    except ValueError:
        return tuple(sorted(distinct))


def _pick_column(spec: str, columns: Sequence[str], given: str | None, known: Sequence[str], what: str,
                 option: str, where: str) -> str | None:
    if given is not None:
        if given not in columns:
            raise _fail(spec, f"{where} has no column {given!r}; its columns: {', '.join(map(str, columns))}")
        return given
    lower = {str(c).lower(): c for c in columns}
    for name in known:
        if name in lower:
            return lower[name]
    return None


def _text_labels(spec: str, texts: Sequence[Any], labels: Sequence[Any], where: str, label_column: str,
                 classes: tuple[str, ...] | None = None) -> tuple[list[str], list[str], tuple[str, ...]]:
    """Clean ``(texts, label strings, classes)``: unlabelled rows and empty texts dropped, repeats kept once."""
    pairs = [(" ".join(str(t).split()), str(lab).strip()) for t, lab in zip(texts, labels)
             if t is not None and lab is not None]
    seen: set[str] = set()
    kept = [(t, lab) for t, lab in pairs if t and lab and not (t in seen or seen.add(t))]
    found = _sort_classes(lab for _, lab in kept)
    classes = classes or found
    if len(found) < 2:
        only = f" ({found[0]!r})" if found else ""
        raise _fail(spec, f"{where} has {len(found)} class{'' if len(found) == 1 else 'es'}{only} in column "
                          f"{label_column!r}; a task needs at least two")
    if len(kept) < 3:
        raise _fail(spec, f"{where} has {len(kept)} usable rows; a task needs at least 3 (train, validation, test)")
    return [t for t, _ in kept], [lab for _, lab in kept], classes


def _encode(labels: Sequence[str], classes: Sequence[str]) -> np.ndarray:
    index = {c: i for i, c in enumerate(classes)}
    return np.fromiter((index[lab] for lab in labels), dtype=np.int64, count=len(labels))


def _read_csv(spec: str, path: Path, options: dict[str, str]):
    import pandas as pd

    if not path.exists():
        raise _fail(spec, f"{str(path)!r} does not exist")
    if not path.is_file():
        raise _fail(spec, f"{str(path)!r} is not a file (csv: takes one CSV file; images: takes a folder)")
    raw = path.read_bytes()
    if not raw.strip():
        raise _fail(spec, f"{str(path)!r} is empty")
    if b"\x00" in raw[:65536]:
        raise _fail(spec, f"{str(path)!r} is not a CSV file (it holds binary data)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _fail(spec, f"{str(path)!r} is not UTF-8 text; save the CSV file as UTF-8") from None
    sep = options.get("sep") or ("\t" if path.suffix.lower() in (".tsv", ".tab") else ",")
    try:
        table = pd.read_csv(io.StringIO(text), sep=sep, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise _fail(spec, f"{str(path)!r} could not be read as CSV ({first})") from None
    return table, raw


def _columns(spec: str, table, options: dict[str, str], where: str) -> tuple[str, str]:
    """The text and label columns: named by the options, else detected by name, else the only two columns."""
    columns = [str(c) for c in table.columns]
    label = _pick_column(spec, columns, options.get("label"), LABEL_COLUMNS, "label", "label", where)
    text = _pick_column(spec, columns, options.get("text"), TEXT_COLUMNS, "text", "text", where)
    if (text is None or label is None) and len(columns) == 2:
        if label is None and text is not None:
            label = next(c for c in columns if c != text)
        elif text is None and label is not None:
            text = next(c for c in columns if c != label)
    if text is None or label is None:
        what = "text" if text is None else "label"
        raise _fail(spec, f"could not tell which column of {where} holds the {what} (columns: "
                          f"{', '.join(columns)}); name the columns with ?text=COLUMN&label=COLUMN")
    if text == label:
        raise _fail(spec, f"the text and label columns are both {text!r}; name two different columns")
    return text, label


def _load_csv(spec: str, location: str, options: dict[str, str]) -> tuple[Split, Split, tuple[str, ...], str, str]:
    path = Path(location)
    table, raw = _read_csv(spec, path, options)
    where = repr(path.name)
    text_col, label_col = _columns(spec, table, options, where)
    texts, labels, classes = _text_labels(spec, table[text_col].tolist(), table[label_col].tolist(), where,
                                          label_col)
    train, test = holdout_fraction(Split(texts, _encode(labels, classes)))
    description = (f"{len(texts)} texts of {path.name} (text column {text_col!r}, label column {label_col!r}); "
                   f"20% fixed hold-out test")
    return train, test, classes, hashlib.sha256(raw).hexdigest(), description


# --- images ----------------------------------------------------------------------------------------

def _skip(name: str) -> bool:
    return name.startswith(".") or name == "__MACOSX"


def _class_folders(spec: str, root: Path) -> list[Path]:
    folders = sorted((p for p in root.iterdir() if p.is_dir() and not _skip(p.name)), key=lambda p: p.name)
    if not folders:
        raise _fail(spec, f"{str(root)!r} has no class sub-folders; put the images of each class in "
                          f"{root.name}/<class name>/")
    return folders


def _image_files(folder: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not _skip(d))
        out += [Path(dirpath) / f for f in sorted(filenames)
                if not _skip(f) and f.lower().endswith(IMAGE_EXTENSIONS)]
    return out


def _image_listing(spec: str, root: Path) -> list[tuple[str, list[Path]]]:
    """``[(class name, image files)]`` of an ImageFolder-layout folder."""
    listing = []
    for folder in _class_folders(spec, root):
        files = _image_files(folder)
        if not files:
            raise _fail(spec, f"class folder {folder.name!r} in {str(root)!r} has no images "
                              f"({', '.join(IMAGE_EXTENSIONS)})")
        listing.append((folder.name, files))
    return listing


def _read_image(spec: str, path: Path, root: Path) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    from talos_core.tasks.paper import to_rgb_array

    try:
        with Image.open(path) as image:
            image.load()
            return to_rgb_array(image)
    except (OSError, UnidentifiedImageError, ValueError, Image.DecompressionBombError, SyntaxError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise _fail(spec, f"image {str(path.relative_to(root))!r} could not be read ({first}); remove or "
                          f"replace it") from None


def _image_split(spec: str, listing: list[tuple[str, list[Path]]], classes: Sequence[str], root: Path,
                 digest: Any) -> Split:
    from talos_core.tasks.paper import stack_if_uniform

    index = {c: i for i, c in enumerate(classes)}
    images, labels = [], []
    for name, files in listing:
        for f in files:
            data = f.read_bytes()
            digest.update(f"{f.relative_to(root).as_posix()}\0{len(data)}\0".encode())
            digest.update(hashlib.sha256(data).digest())
            images.append(_read_image(spec, f, root))
            labels.append(index[name])
    return Split(stack_if_uniform(images), np.asarray(labels, dtype=np.int64))


def _load_images(spec: str, location: str, options: dict[str, str]
                 ) -> tuple[Split, Split, tuple[str, ...], str, str]:
    root = Path(location)
    if not root.exists():
        raise _fail(spec, f"{str(root)!r} does not exist")
    if not root.is_dir():
        raise _fail(spec, f"{str(root)!r} is not a folder (images: takes a folder with one sub-folder per class)")
    digest = hashlib.sha256()
    if (root / "train").is_dir() and (root / "test").is_dir():
        train_listing = _image_listing(spec, root / "train")
        test_listing = _image_listing(spec, root / "test")
        classes = tuple(name for name, _ in train_listing)
        extra = sorted({name for name, _ in test_listing} - set(classes))
        if extra:
            raise _fail(spec, f"test/ has class folder {extra[0]!r} that train/ lacks; train/ has: "
                              f"{', '.join(classes)}")
        layout = "train/ and test/ folders"
    else:
        train_listing, test_listing = _image_listing(spec, root), []
        classes = tuple(name for name, _ in train_listing)
        layout = "20% fixed hold-out test"
    if len(classes) < 2:
        raise _fail(spec, f"{str(root)!r} has one class folder ({classes[0]!r}); a task needs at least two")
    train = _image_split(spec, train_listing, classes, root, digest)
    if test_listing:
        test = _image_split(spec, test_listing, classes, root, digest)
    else:
        if len(train) < 3:
            raise _fail(spec, f"{str(root)!r} has {len(train)} images; a task needs at least 3 "
                              f"(train, validation, test)")
        train, test = holdout_fraction(train)
    description = f"{len(train) + len(test)} images in {len(classes)} class folders of {root.name}/ ({layout})"
    return train, test, classes, digest.hexdigest(), description


# --- Hugging Face datasets -------------------------------------------------------------------------

def _hub_failure(spec: str, hf_id: str, exc: BaseException) -> TalosError:
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    reason = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return _fail(spec, f"the Hugging Face dataset {hf_id!r} could not be loaded ({reason}); without network "
                       f"access only data sets already in the local Hugging Face cache load, so download it once "
                       f"online or use csv:PATH or images:DIR for local files")


def _hf_splits(spec: str, location: str, options: dict[str, str]) -> tuple[Any, str, str | None]:
    """``(the loaded DatasetDict, the training split's name, the test split's name or None)``."""
    try:
        import datasets
    except ImportError:
        raise _fail(spec, "hf: tasks need the Python package 'datasets'; install it with: pip install datasets") \
            from None
    try:
        loaded = datasets.load_dataset(location, options.get("config"), revision=options.get("revision"))
    except Exception as e:  # network, offline mode, authentication, missing data set or config
        raise _hub_failure(spec, location, e) from None
    if not isinstance(loaded, datasets.DatasetDict):
        raise _fail(spec, f"the Hugging Face dataset {location!r} did not load as named splits")
    train_name = options.get("split", "train")
    if train_name not in loaded:
        raise _fail(spec, f"the dataset has no split {train_name!r}; its splits: {', '.join(loaded)} "
                          f"(choose with ?split=NAME)")
    test_name = options.get("test_split")
    if test_name is not None and test_name not in loaded:
        raise _fail(spec, f"the dataset has no split {test_name!r}; its splits: {', '.join(loaded)}")
    if test_name is None and "test" in loaded and train_name != "test":
        test_name = "test"
    return loaded, train_name, test_name


def _hf_label_strings(ds: Any, label_col: str, names: tuple[str, ...] | None) -> list[Any]:
    """The labels of ``ds`` as written (a ClassLabel's index as its name; -1, unlabelled, as ``None``)."""
    values = ds[label_col]
    if names is None:
        return values
    return [names[v] if v is not None and 0 <= v < len(names) else None for v in values]


def _hf_images(spec: str, train_ds: Any, test_ds: Any | None, image_col: str, label_col: str,
               names: tuple[str, ...] | None, where: str, digest: Any) -> tuple[Split, Split | None, tuple[str, ...]]:
    """The image splits of a Hugging Face dataset (labels encoded), and its classes; ``digest`` takes the pixels."""
    from talos_core.tasks.paper import stack_if_uniform, to_rgb_array

    def split_of(ds) -> Split:
        labs = _hf_label_strings(ds, label_col, names)
        keep = [i for i, lab in enumerate(labs) if lab is not None and str(lab).strip()]
        images = [to_rgb_array(ds[i][image_col]) for i in keep]
        for im in images:
            digest.update(im.tobytes())
        return Split(stack_if_uniform(images), np.asarray([str(labs[i]).strip() for i in keep]))

    raw_train = split_of(train_ds)
    raw_test = split_of(test_ds) if test_ds is not None else None
    classes = names or _sort_classes(list(raw_train.labels) + list(raw_test.labels if raw_test else []))
    if len(set(raw_train.labels)) < 2:
        raise _fail(spec, f"{where} has fewer than two classes in column {label_col!r}; a task needs at least two")
    encode = {c: i for i, c in enumerate(classes)}

    def as_split(s: Split) -> Split:
        return Split(s.inputs, np.asarray([encode[lab] for lab in s.labels], dtype=np.int64))

    return as_split(raw_train), as_split(raw_test) if raw_test is not None else None, classes


def _hf_texts(spec: str, train_ds: Any, test_ds: Any | None, options: dict[str, str], label_col: str,
              names: tuple[str, ...] | None, where: str, digest: Any) -> tuple[Split, Split | None, tuple[str, ...]]:
    """The text splits of a Hugging Face dataset (labels encoded; test texts also in training left out), and its
    classes; ``digest`` takes the labelled texts."""
    features = train_ds.features
    columns = list(features)
    text_col = _pick_column(spec, columns, options.get("text"), TEXT_COLUMNS, "text", "text", where)
    if text_col is None:
        strings = [c for c in columns if c != label_col and getattr(features[c], "dtype", None) == "string"]
        if len(strings) != 1:
            raise _fail(spec, f"could not tell which column of {where} holds the text (columns: "
                              f"{', '.join(columns)}); name it with ?text=COLUMN")
        text_col = strings[0]
    texts, labels, _found = _text_labels(spec, train_ds[text_col], _hf_label_strings(train_ds, label_col, names),
                                        where, label_col)
    test_texts: list[str] = []
    test_labels: list[str] = []
    if test_ds is not None:
        pairs = [(" ".join(str(t).split()), str(lab).strip()) for t, lab in
                 zip(test_ds[text_col], _hf_label_strings(test_ds, label_col, names))
                 if t is not None and lab is not None]
        train_set = set(texts)
        pairs = [(t, lab) for t, lab in pairs if t and lab and t not in train_set]
        test_texts, test_labels = [t for t, _ in pairs], [lab for _, lab in pairs]
    classes = names or _sort_classes(labels + test_labels)
    for t, lab in zip(texts + test_texts, labels + test_labels):
        digest.update(f"{lab}\0{t}\n".encode())
    test = Split(test_texts, _encode(test_labels, classes)) if test_ds is not None else None
    return Split(texts, _encode(labels, classes)), test, classes


def _load_hf(spec: str, location: str, options: dict[str, str]) -> tuple[Split, Split, tuple[str, ...], str, str]:
    loaded, train_name, test_name = _hf_splits(spec, location, options)
    import datasets  # _hf_splits has checked it is installed

    train_ds = loaded[train_name]
    test_ds = loaded[test_name] if test_name else None
    features = train_ds.features
    columns = list(features)
    where = f"split {train_name!r} of {location!r}"
    label_col = _pick_column(spec, columns, options.get("label"), LABEL_COLUMNS, "label", "label", where)
    if label_col is None:
        raise _fail(spec, f"could not tell which column of {where} holds the label (columns: {', '.join(columns)}); "
                          f"name it with ?label=COLUMN")
    image_col = _pick_column(spec, columns, options.get("image"), ("image", "img", "picture", "photo"), "image",
                             "image", where)
    if options.get("image") is None and image_col is not None \
            and not isinstance(features[image_col], datasets.Image):
        image_col = None
    label_feature = features[label_col]
    names = tuple(label_feature.names) if isinstance(label_feature, datasets.ClassLabel) else None
    digest = hashlib.sha256()
    if image_col is not None:
        train, test, classes = _hf_images(spec, train_ds, test_ds, image_col, label_col, names, where, digest)
        kind = "images"
    else:
        train, test, classes = _hf_texts(spec, train_ds, test_ds, options, label_col, names, where, digest)
        kind = "texts"
    digest.update("\0".join(classes).encode())
    if test is None or len(test) == 0:
        train, test = holdout_fraction(train)
        layout = "20% fixed hold-out test"
    else:
        layout = f"test split {test_name!r}"
    description = (f"{len(train) + len(test)} {kind} of the Hugging Face dataset {location} "
                   f"(split {train_name!r}, label column {label_col!r}; {layout})")
    return train, test, classes, digest.hexdigest(), description


def canonical_task(name: str) -> str:
    """``name`` itself for a registered task; a file task's canonical name (with its content hash).

    >>> canonical_task("digits")
    'digits'
    """
    return resolve_file_task(name).name if is_file_task(name) else name


# --- resolution ------------------------------------------------------------------------------------

_LOADERS: dict[str, Callable[[str, str, dict[str, str]], tuple[Split, Split, tuple[str, ...], str, str]]] = {
    "csv": _load_csv, "images": _load_images, "hf": _load_hf}


def _signature(kind: str, location: str) -> tuple | None:
    """What changes when the file(s) change (size and modification time); ``None``: no cheap check (hub)."""
    path = Path(location)
    try:
        if kind == "csv":
            st = path.stat()
            return (st.st_size, st.st_mtime_ns)
        if kind == "images":
            out = []
            for dirpath, dirnames, filenames in os.walk(path):
                dirnames.sort()
                for f in sorted(filenames):
                    st = (Path(dirpath) / f).stat()
                    out.append((dirpath, f, st.st_size, st.st_mtime_ns))
            return tuple(out)
    except OSError:
        return ("missing",)
    return None


class _Data:
    """The loader of a resolved file task: hands over the splits read at resolution (once), then re-reads."""

    def __init__(self, name: str, train: Split, test: Split) -> None:
        self.name = name
        self.splits: tuple[Split, Split] | None = (train, test)

    def __call__(self) -> tuple[Split, Split]:
        splits, self.splits = self.splits, None
        if splits is None:
            _RESOLVED.pop(_key(self.name), None)
            spec = resolve_file_task(self.name)
            return spec.loader()
        return splits


def release_data(spec: TaskSpec) -> None:
    """Drop the examples a resolved file task holds until its first load (a process that only needs the class
    names, such as the dashboard's Run page, calls this; a later :func:`~talos_core.tasks.load_task` reads the
    files again)."""
    if isinstance(spec.loader, _Data):
        spec.loader.splits = None


_RESOLVED: dict[str, tuple[tuple | None, TaskSpec]] = {}
"""Resolved specs by canonical name without the hash, with the file signature they were read at."""


def _key(name: str) -> str:
    kind, location, options, _ = parse_spec(name)
    return canonical_spec(kind, _local(kind, location), options)


def resolve_file_task(text: str) -> TaskSpec:
    """The :class:`TaskSpec` of a file-task spec, its ``name`` canonical with the content hash.

    Reading happens once per process for unchanged files (size and modification time); a spec carrying a
    hash that the current content no longer has is refused.
    """
    kind, location, options, want = parse_spec(text)
    location = _local(kind, location)
    key = canonical_spec(kind, location, options)
    signature = _signature(kind, location)
    cached = _RESOLVED.get(key)
    if cached is not None and (kind == "hf" or (cached[0] is not None and cached[0] == signature)):
        spec = cached[1]
    else:
        train, test, classes, content, description = _LOADERS[kind](text, location, options)
        if len(classes) > MAX_CLASSES:
            raise _fail(text, f"it has {len(classes):,} classes, more than the {MAX_CLASSES:,} a task may have "
                              f"(every example is scored against every class): the label column should hold a few "
                              f"labels, not one per row")
        name = canonical_spec(kind, location, options, content[:HASH_DIGITS])
        modality = "image" if isinstance(train.inputs, np.ndarray) or (
            train.inputs and not isinstance(train.inputs[0], str)) else "text"
        spec = TaskSpec(name=name, modality=modality, classes=tuple(classes),
                        templates=IMAGE_TEMPLATES if modality == "image" else TEXT_TEMPLATES,
                        description=description, loader=_Data(name, train, test),
                        source="huggingface" if kind == "hf" else "file",
                        hf_id=location if kind == "hf" else None)
        _RESOLVED[key] = (signature, spec)
    if want is not None and not spec.name.endswith("#" + want):
        have = spec.name.rpartition("#")[2]
        raise TalosError(f"task {text!r}: the data changed since this task was named (content hash now {have}, "
                         f"was {want}); use {canonical_spec(kind, location, options)} for the current data")
    return spec
