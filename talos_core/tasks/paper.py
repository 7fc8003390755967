"""The paper's benchmarks, loaded from the Hugging Face hub (``source="huggingface"``).

Vision (CLIP): ``cars``, ``dtd``, ``eurosat``, ``gtsrb``, ``resisc45``, ``sun397``, ``svhn`` and the
negation control ``imagenet``. The paper's eighth vision task, MNIST, is the offline ``mnist`` task
(same data), so it is not registered twice. Class names are the CLIP zero-shot names in the label
order of the data sets (:mod:`talos_core.tasks._classnames`), templates are the standard CLIP /
task-vectors prompts.

NLP (T5, rank classification over fixed label strings): ``qasc``, ``wikiqa``, ``quartz``, ``paws``,
``story_cloze``, ``winogrande``, ``wsc`` and the control ``rte``. Multiple-choice questions are
written out in the input text and the class names are the label strings the model scores: letters
``A``..``H`` (QASC), ``A``/``B`` (QuaRTz), ``1``/``2`` (WinoGrande, Story Cloze), ``yes``/``no``
(PAWS, WikiQA, WSC, RTE). The spec's ``input_template`` holds the instruction; the loader builds
the rest of the input.

Where a source's test split has no labels (QASC, WinoGrande, SuperGLUE) its validation split is the
test split. Story Cloze has no training split and needs a manual download: set
``TALOS_STORY_CLOZE_DIR`` to the folder holding the Spring 2016 validation and test CSV files; the
validation set then trains and the test set tests.

Images arrive as PIL images of varying size. They are converted to RGB ``uint8`` arrays and, when the
shorter side exceeds 256 pixels, downscaled to a shorter side of 256 (aspect ratio kept). A split
whose images then all share one shape is a ``(N, H, W, 3)`` array, otherwise a ``list`` of
``(H_i, W_i, 3)`` arrays. ImageNet is streamed and capped (20,000 training and 10,000 validation
images, drawn with the fixed split seed).

Without hub access every loader raises :class:`~talos_core.errors.TalosError`:

>>> import datasets
>>> def offline(*args, **kwargs):
...     raise ConnectionError("no network")
>>> real, datasets.load_dataset = datasets.load_dataset, offline
>>> try:
...     PAPER_BY_NAME["rte"].loader()
... except TalosError as e:
...     print(str(e)[:95])
task 'rte' needs the Hugging Face dataset 'aps/super_glue', which could not be loaded: Connecti
>>> datasets.load_dataset = real
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import talos_core.tasks._classnames as names
from talos_core.errors import TalosError
from talos_core.tasks.base import Split, TaskSpec
from talos_core.tasks.offline import OFFLINE_TASKS
from talos_core.tasks.splits import SPLIT_SEED

MAX_SHORT_SIDE = 256
STREAM_SHUFFLE_BUFFER = 10_000
Row = dict[str, Any]
Formatter = Callable[[Row], tuple[str, int] | None]


# --- fetching -------------------------------------------------------------------------------------

def _offline_names() -> str:
    return ", ".join(sorted(s.name for s in OFFLINE_TASKS))


def hub_error(task: str, hf_id: str, reason: object) -> TalosError:
    """The error raised when a paper task cannot reach its data.

    >>> str(hub_error("dtd", "tanganke/dtd", "offline"))[:60]
    "task 'dtd' needs the Hugging Face dataset 'tanganke/dtd', wh"
    """
    if isinstance(reason, BaseException):
        first = (str(reason).strip().splitlines() or [""])[0]
        reason = f"{type(reason).__name__}: {first}" if first else type(reason).__name__
    short = str(reason) if len(str(reason)) <= 200 else str(reason)[:197] + "..."
    return TalosError(f"task {task!r} needs the Hugging Face dataset {hf_id!r}, which could not be loaded: "
                      f"{short}; offline tasks: {_offline_names()}")


@dataclass(frozen=True)
class HubSplit:
    """One split of a hub data set: ``load_dataset(hf_id, config, split=split)``.

    ``limit`` streams the split instead and keeps ``limit`` rows after a seeded shuffle (for data
    sets too large to download whole). ``data_files`` loads local files with a generic builder
    (``hf_id`` is then the builder name, e.g. ``"csv"``).
    """

    hf_id: str
    split: str
    config: str | None = None
    limit: int | None = None
    data_files: dict[str, str] | None = None

    def rows(self) -> Iterable[Row]:
        import datasets  # looked up at call time, so tests can replace datasets.load_dataset

        if self.data_files is not None:
            return datasets.load_dataset(self.hf_id, data_files=self.data_files, split=self.split)
        if self.limit is None:
            return datasets.load_dataset(self.hf_id, self.config, split=self.split)
        stream = datasets.load_dataset(self.hf_id, self.config, split=self.split, streaming=True)
        return stream.shuffle(seed=SPLIT_SEED, buffer_size=STREAM_SHUFFLE_BUFFER).take(self.limit)


def fetch(task: str, hf_id: str, build: Callable[[], Split]) -> Split:
    """Run ``build`` and turn any failure of the hub or of ``datasets`` into :func:`hub_error`."""
    try:
        return build()
    except TalosError:
        raise
    except Exception as e:  # network, authentication, missing files, schema changes ...
        raise hub_error(task, hf_id, e) from None


# --- vision ---------------------------------------------------------------------------------------

def to_rgb_array(image: Any, max_short_side: int = MAX_SHORT_SIDE) -> np.ndarray:
    """A PIL image (or array) as an RGB ``uint8`` array, downscaled to ``max_short_side`` if larger.

    >>> from PIL import Image
    >>> to_rgb_array(Image.new("L", (600, 300))).shape
    (256, 512, 3)
    """
    from PIL import Image

    if not isinstance(image, Image.Image):
        image = Image.fromarray(np.asarray(image))
    image = image.convert("RGB")
    w, h = image.size
    if min(w, h) > max_short_side:
        scale = max_short_side / min(w, h)
        image = image.resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.Resampling.BICUBIC)
    return np.array(image, dtype=np.uint8)  # a writable copy (asarray of a PIL image is read-only)


def stack_if_uniform(images: list[np.ndarray]) -> np.ndarray | list[np.ndarray]:
    """One ``(N, H, W, C)`` array if all images share a shape, else the list itself.

    >>> stack_if_uniform([np.zeros((2, 2, 3), np.uint8)] * 3).shape
    (3, 2, 2, 3)
    >>> type(stack_if_uniform([np.zeros((2, 2, 3), np.uint8), np.zeros((3, 2, 3), np.uint8)]))
    <class 'list'>
    """
    if images and all(im.shape == images[0].shape for im in images):
        return np.stack(images)
    return images


def _check_class_count(task: str, rows: Any, label_key: str, expected: int) -> None:
    """Fail early if the data set's ClassLabel has a different number of classes than the spec."""
    features = getattr(rows, "features", None) or {}
    feature = features.get(label_key) if hasattr(features, "get") else None
    found = getattr(feature, "num_classes", None)
    if found is not None and found != expected:
        raise TalosError(f"task {task!r}: the data set has {found} classes but the task defines {expected}")


@dataclass(frozen=True)
class HubImageLoader:
    """Loader of an image classification task from the hub: ``image`` / ``label`` columns."""

    task: str
    num_classes: int
    train: HubSplit
    test: HubSplit
    image_key: str = "image"
    label_key: str = "label"

    def _split(self, source: HubSplit) -> Split:
        def build() -> Split:
            rows = source.rows()
            _check_class_count(self.task, rows, self.label_key, self.num_classes)
            images, labels = [], []
            for row in rows:
                label = int(row[self.label_key])
                if 0 <= label < self.num_classes:  # unlabelled rows carry -1
                    images.append(to_rgb_array(row[self.image_key]))
                    labels.append(label)
            return Split(stack_if_uniform(images), np.asarray(labels, dtype=np.int64))

        return fetch(self.task, source.hf_id, build)

    def __call__(self) -> tuple[Split, Split]:
        return self._split(self.train), self._split(self.test)


def _vision(name: str, hf_id: str, classes: tuple[str, ...], templates: tuple[str, ...], description: str,
            *, config: str | None = None, train: str = "train", test: str = "test",
            train_limit: int | None = None, test_limit: int | None = None, control: bool = False) -> TaskSpec:
    loader = HubImageLoader(name, len(classes), HubSplit(hf_id, train, config, train_limit),
                            HubSplit(hf_id, test, config, test_limit))
    return TaskSpec(name=name, modality="image", classes=classes, templates=templates, description=description,
                    loader=loader, source="huggingface", hf_id=hf_id, control=control)


VISION_TASKS: tuple[TaskSpec, ...] = (
    _vision("cars", "tanganke/stanford_cars", names.CARS,
            ("a photo of a {}.", "a photo of the {}.", "a photo of my {}.", "i love my {}!",
             "a photo of my dirty {}.", "a photo of my clean {}.", "a photo of my new {}.",
             "a photo of my old {}."),
            "Stanford Cars: 196 car models (make, model, year)."),
    _vision("dtd", "tanganke/dtd", names.DTD,
            ("a photo of a {} texture.", "a photo of a {} pattern.", "a photo of a {} thing.",
             "a photo of a {} object.", "a photo of the {} texture.", "a photo of the {} pattern."),
            "Describable Textures Dataset: 47 texture categories."),
    _vision("eurosat", "tanganke/eurosat", names.EUROSAT,
            ("a centered satellite photo of {}.", "a centered satellite photo of a {}.",
             "a centered satellite photo of the {}."),
            "EuroSAT: 10 land-use classes in Sentinel-2 satellite images."),
    _vision("gtsrb", "tanganke/gtsrb", names.GTSRB,
            ('a zoomed in photo of a "{}" traffic sign.', 'a centered photo of a "{}" traffic sign.',
             'a close up photo of a "{}" traffic sign.'),
            "German Traffic Sign Recognition Benchmark: 43 sign types."),
    _vision("resisc45", "tanganke/resisc45", names.RESISC45,
            ("satellite imagery of {}.", "aerial imagery of {}.", "satellite photo of {}.",
             "aerial photo of {}.", "satellite view of {}.", "aerial view of {}."),
            "RESISC45: 45 remote-sensing scene classes."),
    _vision("sun397", "tanganke/sun397", names.SUN397,
            ("a photo of a {}.", "a photo of the {}."),
            "SUN397: 397 scene categories."),
    _vision("svhn", "ufldl-stanford/svhn", names.SVHN,
            ('a photo of the number: "{}".', 'a photo of the house number {}.', 'a street sign showing the digit {}.'),
            "Street View House Numbers (cropped digits): 10 classes.", config="cropped_digits"),
    _vision("imagenet", "ILSVRC/imagenet-1k", names.IMAGENET,
            ("itap of a {}.", "a bad photo of the {}.", "a origami {}.", "a photo of the large {}.",
             "a {} in a video game.", "art of the {}.", "a photo of the small {}."),
            "ImageNet-1k (gated on the hub; 20k train / 10k val streamed); control task for negation.",
            test="validation", train_limit=20_000, test_limit=10_000, control=True),
)


# --- NLP ------------------------------------------------------------------------------------------

LETTERS = tuple("ABCDEFGH")
YES_NO = ("yes", "no")
NO_YES = ("no", "yes")
ONE_TWO = ("1", "2")


def choices_text(labels: Iterable[str], texts: Iterable[str]) -> str:
    """Write answer options into the input.

    >>> choices_text(["A", "B"], ["red", "blue"])
    '(A) red (B) blue'
    """
    return " ".join(f"({label}) {text}" for label, text in zip(labels, texts))


def _index(value: Any, classes: tuple[str, ...]) -> int | None:
    """Position of ``str(value)`` in ``classes``; ``None`` for unlabelled rows (``""``, ``-1``)."""
    value = str(value).strip()
    return classes.index(value) if value in classes else None


def _binary(value: Any) -> int | None:
    """A 0/1 label as is; ``None`` for unlabelled rows (-1)."""
    return int(value) if int(value) in (0, 1) else None


def format_qasc(row: Row) -> tuple[str, int] | None:
    """QASC: two facts, a question and eight lettered choices -> the letter of the answer.

    >>> row = {"fact1": "f1", "fact2": "f2", "question": "q?", "answerKey": "B",
    ...        "choices": {"label": ["A", "B"], "text": ["x", "y"]}}
    >>> format_qasc(row)
    ('fact 1: f1 fact 2: f2 question: q? choices: (A) x (B) y', 1)
    """
    label = _index(row["answerKey"], LETTERS)
    choices = choices_text(row["choices"]["label"], row["choices"]["text"])
    text = f"fact 1: {row['fact1']} fact 2: {row['fact2']} question: {row['question']} choices: {choices}"
    return None if label is None else (text, label)


def format_quartz(row: Row) -> tuple[str, int] | None:
    """QuaRTz: a paragraph, a question and two choices -> ``A`` or ``B``."""
    label = _index(row["answerKey"], ("A", "B"))
    choices = choices_text(row["choices"]["label"], row["choices"]["text"])
    text = f"paragraph: {row['para']} question: {row['question']} choices: {choices}"
    return None if label is None else (text, label)


def format_wikiqa(row: Row) -> tuple[str, int] | None:
    """WikiQA: is this Wikipedia sentence a correct answer to the question? (``no``/``yes``)."""
    label = _binary(row["label"])
    text = f"question: {row['question']} candidate answer: {row['answer']}"
    return None if label is None else (text, label)


def format_paws(row: Row) -> tuple[str, int] | None:
    """PAWS: are the two sentences paraphrases? (``no``/``yes``)."""
    label = _binary(row["label"])
    return None if label is None else (f"sentence 1: {row['sentence1']} sentence 2: {row['sentence2']}", label)


def format_winogrande(row: Row) -> tuple[str, int] | None:
    """WinoGrande: which option fills the blank ``_``? (``1``/``2``).

    >>> format_winogrande({"sentence": "A _ b", "option1": "x", "option2": "y", "answer": "2"})
    ('sentence: A _ b option 1: x option 2: y', 1)
    """
    label = _index(row["answer"], ONE_TWO)
    text = f"sentence: {row['sentence']} option 1: {row['option1']} option 2: {row['option2']}"
    return None if label is None else (text, label)


def format_wsc(row: Row) -> tuple[str, int] | None:
    """WSC (SuperGLUE ``wsc.fixed``): does the pronoun refer to the noun phrase? (``no``/``yes``)."""
    label = _binary(row["label"])
    text = f'passage: {row["text"]} question: does "{row["span2_text"]}" refer to "{row["span1_text"]}"?'
    return None if label is None else (text, label)


def format_rte(row: Row) -> tuple[str, int] | None:
    """RTE (SuperGLUE): label 0 is entailment, so classes are (``yes``, ``no``)."""
    label = _binary(row["label"])
    return None if label is None else (f"premise: {row['premise']} hypothesis: {row['hypothesis']}", label)


_STORY_COLUMNS = {  # official CSV header -> Hugging Face column name
    "InputSentence1": "input_sentence_1", "InputSentence2": "input_sentence_2",
    "InputSentence3": "input_sentence_3", "InputSentence4": "input_sentence_4",
    "RandomFifthSentenceQuiz1": "sentence_quiz1", "RandomFifthSentenceQuiz2": "sentence_quiz2",
    "AnswerRightEnding": "answer_right_ending",
}


def format_story_cloze(row: Row) -> tuple[str, int] | None:
    """Story Cloze: four sentences and two endings -> the right ending (``1``/``2``).

    Accepts both the official CSV header (``InputSentence1`` ...) and the Hugging Face names.

    >>> row = {"InputSentence1": "a.", "InputSentence2": "b.", "InputSentence3": "c.",
    ...        "InputSentence4": "d.", "RandomFifthSentenceQuiz1": "e.", "RandomFifthSentenceQuiz2": "f.",
    ...        "AnswerRightEnding": 2}
    >>> format_story_cloze(row)
    ('story: a. b. c. d. ending 1: e. ending 2: f.', 1)
    """
    row = {_STORY_COLUMNS.get(k, k): v for k, v in row.items()}
    story = " ".join(str(row[f"input_sentence_{i}"]) for i in range(1, 5))
    label = _index(row["answer_right_ending"], ONE_TWO)
    text = f"story: {story} ending 1: {row['sentence_quiz1']} ending 2: {row['sentence_quiz2']}"
    return None if label is None else (text, label)


def _formatted(rows: Iterable[Row], formatter: Formatter) -> Split:
    pairs = [p for p in map(formatter, rows) if p is not None]
    return Split([text for text, _ in pairs], np.asarray([label for _, label in pairs], dtype=np.int64))


@dataclass(frozen=True)
class HubTextLoader:
    """Loader of a text task from the hub: each row is turned into ``(input text, label)``."""

    task: str
    train: HubSplit
    test: HubSplit
    formatter: Formatter = field(repr=False)

    def _split(self, source: HubSplit) -> Split:
        return fetch(self.task, source.hf_id, lambda: _formatted(source.rows(), self.formatter))

    def __call__(self) -> tuple[Split, Split]:
        return self._split(self.train), self._split(self.test)


STORY_CLOZE_ENV = "TALOS_STORY_CLOZE_DIR"
STORY_CLOZE_ID = "LSDSem/story_cloze"


def _story_cloze_csv(folder: Path, suffixes: tuple[str, ...]) -> str:
    """The one CSV file in ``folder`` whose name ends with one of ``suffixes``.

    The official files are ``cloze_test_val__spring2016 - cloze_test_ALL_val.csv`` and
    ``cloze_test_test__spring2016 - cloze_test_ALL_test.csv``.
    """
    found = sorted(p for p in folder.glob("*.csv") if p.name.lower().endswith(suffixes))
    if len(found) != 1:
        raise hub_error("story_cloze", STORY_CLOZE_ID,
                        f"expected one CSV file ending in {' or '.join(suffixes)} in {str(folder)!r}, "
                        f"found {len(found)}")
    return str(found[0])


@dataclass(frozen=True)
class StoryClozeLoader:
    """Story Cloze 2016 from the manually downloaded CSV files in ``$TALOS_STORY_CLOZE_DIR``.

    The hub entry (``LSDSem/story_cloze``) only describes the data; the files must be requested from
    the authors. The validation CSV trains, the test CSV tests.
    """

    task: str = "story_cloze"

    def __call__(self) -> tuple[Split, Split]:
        folder = os.environ.get(STORY_CLOZE_ENV)
        if not folder or not Path(folder).is_dir():
            raise hub_error(self.task, STORY_CLOZE_ID,
                            f"it needs a manual download; set {STORY_CLOZE_ENV} to the folder holding the "
                            "Spring 2016 validation and test CSV files")
        files = {"train": _story_cloze_csv(Path(folder), ("val.csv", "validation.csv")),
                 "test": _story_cloze_csv(Path(folder), ("test.csv",))}
        return HubTextLoader(self.task, HubSplit("csv", "train", data_files=files),
                             HubSplit("csv", "test", data_files=files), format_story_cloze)()


def _nlp(name: str, hf_id: str, classes: tuple[str, ...], formatter: Formatter, instruction: str,
         description: str, *, config: str | None = None, test: str = "test", control: bool = False,
         loader: Callable[[], tuple[Split, Split]] | None = None) -> TaskSpec:
    if loader is None:
        loader = HubTextLoader(name, HubSplit(hf_id, "train", config), HubSplit(hf_id, test, config), formatter)
    return TaskSpec(name=name, modality="text", classes=classes, templates=("{}",), description=description,
                    loader=loader, source="huggingface", hf_id=hf_id, input_template=instruction + " {}",
                    control=control)


NLP_TASKS: tuple[TaskSpec, ...] = (
    _nlp("qasc", "allenai/qasc", LETTERS, format_qasc,
         "Answer the question with the letter of the correct choice.",
         "QASC: 8-way multiple-choice science questions with two supporting facts.", test="validation"),
    _nlp("wikiqa", "microsoft/wiki_qa", NO_YES, format_wikiqa,
         "Is the candidate a correct answer to the question? Answer yes or no.",
         "WikiQA: does a Wikipedia sentence answer the question?"),
    _nlp("quartz", "allenai/quartz", ("A", "B"), format_quartz,
         "Answer the question about the paragraph with A or B.",
         "QuaRTz: 2-way qualitative relationship questions about a paragraph."),
    _nlp("paws", "google-research-datasets/paws", NO_YES, format_paws,
         "Do the two sentences mean the same thing? Answer yes or no.",
         "PAWS (labeled_final): paraphrase identification with high word overlap.", config="labeled_final"),
    _nlp("story_cloze", STORY_CLOZE_ID, ONE_TWO, format_story_cloze,
         "Which ending continues the story? Answer 1 or 2.",
         f"Story Cloze 2016: pick the right ending (manual download, set {STORY_CLOZE_ENV}).",
         loader=StoryClozeLoader()),
    _nlp("winogrande", "allenai/winogrande", ONE_TWO, format_winogrande,
         "Which option fills the blank (_)? Answer 1 or 2.",
         "WinoGrande (xl): commonsense pronoun-style blank filling.", config="winogrande_xl",
         test="validation"),
    _nlp("wsc", "aps/super_glue", NO_YES, format_wsc,
         "Does the pronoun refer to the given noun phrase? Answer yes or no.",
         "SuperGLUE WSC (fixed): Winograd schema coreference.", config="wsc.fixed", test="validation"),
    _nlp("rte", "aps/super_glue", YES_NO, format_rte,
         "Does the premise entail the hypothesis? Answer yes or no.",
         "SuperGLUE RTE: textual entailment; control task for negation.", config="rte", test="validation",
         control=True),
)

PAPER_TASKS: tuple[TaskSpec, ...] = VISION_TASKS + NLP_TASKS
PAPER_BY_NAME: dict[str, TaskSpec] = {s.name: s for s in PAPER_TASKS}

