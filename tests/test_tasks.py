"""Tests of the task registry, the offline tasks and the (offline-checkable parts of the) paper tasks."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import talos_core.tasks as tasks
from talos_core.errors import TalosError
from talos_core.tasks import TaskSpec, get_task, list_tasks, load_task, register_task, task_table
from talos_core.tasks.base import Split
from talos_core.tasks.splits import carve_validation, holdout_fraction, subsample, validation_size

OFFLINE_CLASSES = {
    "tweets": 3, "drug-reviews": 3, "wordnet-nouns": 26, "wordnet-verbs": 15, "fortune-topics": 12,
    "fortune-langs": 7, "digits": 10, "mnist": 10, "fashion-mnist": 10, "animal-shapes": 10,
}
IMAGE_SHAPES = {"digits": (8, 8), "mnist": (28, 28), "fashion-mnist": (28, 28), "animal-shapes": (28, 28)}
PAPER_VISION = {"cars": 196, "dtd": 47, "eurosat": 10, "gtsrb": 43, "resisc45": 45, "sun397": 397,
                "svhn": 10, "imagenet": 1000}
PAPER_NLP = {"qasc": 8, "wikiqa": 2, "quartz": 2, "paws": 2, "story_cloze": 2, "winogrande": 2, "wsc": 2,
             "rte": 2}


def _rows(split: Split) -> list[bytes | str]:
    """Hashable contents of each example (texts as is, images as bytes)."""
    if isinstance(split.inputs, np.ndarray):
        return [x.tobytes() for x in split.inputs]
    return list(split.inputs)


# --- registry -------------------------------------------------------------------------------------

def test_registry_lists_offline_and_paper_tasks() -> None:
    names = [s.name for s in list_tasks()]
    assert set(OFFLINE_CLASSES) | set(PAPER_VISION) | set(PAPER_NLP) == set(names)
    assert len(names) == len(set(names))
    assert names.count("mnist") == 1  # the paper's MNIST is the offline task
    table = task_table()
    assert list(table.columns) == ["name", "modality", "num_classes", "source", "hf_id", "control", "description"]
    assert table["name"].tolist() == names
    controls = set(table.loc[table["control"], "name"])
    assert controls == {"fortune-langs", "imagenet", "rte"}


def test_unknown_task_is_a_talos_error() -> None:
    with pytest.raises(TalosError, match=r"unknown task 'nope'; choose one of: .*mnist"):
        get_task("nope")
    with pytest.raises(TalosError, match="unknown task"):
        load_task("nope")


@pytest.mark.parametrize("spec", list_tasks(), ids=lambda s: s.name)
def test_specs_are_well_formed(spec: TaskSpec) -> None:
    assert spec.description and "\n" not in spec.description
    assert spec.templates and all(t.count("{}") == 1 for t in spec.templates)
    assert spec.input_template.count("{}") == 1
    assert all(isinstance(c, str) and c for c in spec.classes)
    if spec.name != "imagenet":  # CLIP's curated ImageNet names repeat 'missile' and 'sunglasses'
        assert len(set(spec.classes)) == spec.num_classes
    if spec.modality == "image" and spec.source == "offline":
        assert spec.input_template == "{}"


def test_register_task_refuses_silent_replacement(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tasks, "TASKS", dict(tasks.TASKS))
    spec = get_task("digits")
    assert register_task(spec) is spec
    clone = TaskSpec(**{**spec.__dict__, "description": "other"})
    with pytest.raises(TalosError, match="already registered"):
        register_task(clone)
    assert register_task(clone, replace=True) is get_task("digits")


def _toy(name: str, train: Split, test: Split, classes: tuple[str, ...] = ("a", "b")) -> TaskSpec:
    return TaskSpec(name=name, modality="text", classes=classes, templates=("{}",), description="toy",
                    loader=lambda: (train, test), source="synthetic")


def test_empty_or_mislabelled_splits_are_talos_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tasks, "TASKS", dict(tasks.TASKS))
    ok = Split(["x", "y", "z"], np.array([0, 1, 0]))
    register_task(_toy("toy-empty", ok, Split([], np.array([], dtype=np.int64))))
    with pytest.raises(TalosError, match="task 'toy-empty' has an empty test split"):
        load_task("toy-empty")
    register_task(_toy("toy-one", Split(["x"], np.array([0])), ok))
    with pytest.raises(TalosError, match="task 'toy-one' has an empty train split"):
        load_task("toy-one")
    register_task(_toy("toy-range", ok, Split(["q"], np.array([2]))))
    with pytest.raises(TalosError, match=r"task 'toy-range': test labels span 2\.\.2, outside 0\.\.1"):
        load_task("toy-range")


# --- offline tasks --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(OFFLINE_CLASSES))
def test_offline_task_loads(name: str) -> None:
    spec = get_task(name)
    assert spec.source == "offline" and spec.hf_id is None
    assert spec.num_classes == OFFLINE_CLASSES[name]
    data = load_task(name)
    for split_name in ("train", "val", "test"):
        split = getattr(data, split_name)
        assert len(split) > 0
        assert np.issubdtype(split.labels.dtype, np.integer)
        assert split.labels.min() >= 0 and split.labels.max() < spec.num_classes
        if spec.modality == "text":
            assert isinstance(split.inputs, list) and all(isinstance(t, str) and t.strip() for t in split.inputs)
        else:
            assert isinstance(split.inputs, np.ndarray) and split.inputs.dtype == np.uint8
            assert split.inputs.shape[1:] == IMAGE_SHAPES[name]
    assert len(np.unique(data.train.labels)) == spec.num_classes
    assert len(np.unique(data.test.labels)) == spec.num_classes

    # val is 10% (at most 5,000) of the source's training set and disjoint from what is left.
    n_source_train = len(data.train) + len(data.val)
    assert len(data.val) == validation_size(n_source_train) == min(5000, n_source_train // 10)
    if spec.modality == "text" or name == "digits":
        train_rows, val_rows = set(_rows(data.train)), set(_rows(data.val))
        assert not train_rows & val_rows
    if spec.modality == "text":  # texts are de-duplicated, so no text is in two splits
        assert not set(data.test.inputs) & (set(data.train.inputs) | set(data.val.inputs))


def test_standard_image_split_sizes() -> None:
    for name in ("mnist", "fashion-mnist"):
        data = load_task(name)
        assert (len(data.train), len(data.val), len(data.test)) == (55_000, 5_000, 10_000)
    mnist = load_task("mnist").train.inputs
    assert mnist.max() == 255 and mnist.min() == 0
    animals = load_task("animal-shapes")  # 10k images, 1,000 per class, fixed 20% hold-out
    assert (len(animals.train) + len(animals.val), len(animals.test)) == (8_000, 2_000)
    counts = np.bincount(np.concatenate([animals.train.labels, animals.val.labels, animals.test.labels]))
    assert counts.tolist() == [1000] * 10


def test_loading_is_cached_and_deterministic() -> None:
    first = load_task("wordnet-verbs")
    assert load_task("wordnet-verbs").train is first.train  # cached: same objects, no re-parse
    again = tasks._load_splits.__wrapped__("wordnet-verbs")  # a fresh parse, bypassing the cache
    for split_name in ("train", "val", "test"):
        a, b = getattr(first, split_name), getattr(again, split_name)
        assert a.inputs == b.inputs
        np.testing.assert_array_equal(a.labels, b.labels)
    digits_a = load_task("digits", max_train=50, max_test=20)
    digits_b = load_task("digits", max_train=50, max_test=20)
    np.testing.assert_array_equal(digits_a.train.inputs, digits_b.train.inputs)
    np.testing.assert_array_equal(digits_a.test.labels, digits_b.test.labels)


def test_max_sizes_subsample_deterministically() -> None:
    full = load_task("drug-reviews")
    small = load_task("drug-reviews", max_train=50, max_val=7, max_test=30)
    assert (len(small.train), len(small.val), len(small.test)) == (50, 7, 30)
    larger = load_task("drug-reviews", max_train=100)
    assert set(small.train.inputs) <= set(larger.train.inputs) <= set(full.train.inputs)
    assert set(small.val.inputs) <= set(full.val.inputs)
    assert set(small.test.inputs) <= set(full.test.inputs)
    huge = load_task("drug-reviews", max_train=10**9)
    assert huge.train.inputs == full.train.inputs
    mnist = load_task("mnist", max_train=64, max_val=32, max_test=16)
    assert mnist.train.inputs.shape == (64, 28, 28) and len(mnist.val) == 32 and len(mnist.test) == 16


@pytest.mark.parametrize("bad", [0, -3, 1.5, True, "10"])
def test_invalid_max_size_is_a_talos_error(bad: object) -> None:
    with pytest.raises(TalosError, match="max_val must be a positive integer or None"):
        load_task("digits", max_val=bad)  # type: ignore[arg-type]


# --- split helpers --------------------------------------------------------------------------------

def test_carve_validation_is_disjoint_and_covering() -> None:
    for n in (1, 9, 10, 1234, 60_000):
        split = Split(np.arange(n), np.arange(n))
        rest, val = carve_validation(split)
        assert len(val) == min(5000, max(1, n // 10))
        assert not set(rest.labels) & set(val.labels)
        assert sorted([*rest.labels, *val.labels]) == list(range(n))
        assert list(rest.labels) == sorted(rest.labels)  # source order kept
    train, test = holdout_fraction(Split(np.arange(100), np.arange(100)))
    assert (len(train), len(test)) == (80, 20)
    s = Split(np.arange(50), np.arange(50))
    assert set(subsample(s, 10).labels) <= set(subsample(s, 20).labels)


# --- sources --------------------------------------------------------------------------------------

def test_numpy_only_unpickler_refuses_code(tmp_path) -> None:
    from talos_core.tasks.sources import load_numpy_pickle

    good = tmp_path / "good.pkl"
    good.write_bytes(pickle.dumps((np.arange(3, dtype=np.float32), np.array([1, 2]))))
    arrays = load_numpy_pickle(good)
    np.testing.assert_array_equal(arrays[0], [0, 1, 2])

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    bad = tmp_path / "bad.pkl"
    bad.write_bytes(pickle.dumps(Evil()))
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        load_numpy_pickle(bad)


def test_wordnet_parser_skips_license_and_maps_lexfiles() -> None:
    from talos_core.tasks.offline import NOUN_LEXFILES, VERB_LEXFILES, parse_wordnet_data

    lines = ["  1 This software and database is provided",
             "00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 | that which is perceived  ",
             "02084071 05 n 02 dog 0 domestic_dog 0 000 | a member of the genus Canis"]
    texts, labels = parse_wordnet_data(lines, NOUN_LEXFILES)
    assert texts == ["that which is perceived", "a member of the genus Canis"]
    assert [get_task("wordnet-nouns").classes[i] for i in labels] == ["top-level concept", "animal"]
    assert len(NOUN_LEXFILES) == 26 and len(VERB_LEXFILES) == 15
    with pytest.raises(TalosError, match="lexicographer file 05"):
        parse_wordnet_data(lines[2:], VERB_LEXFILES)


# --- paper tasks ----------------------------------------------------------------------------------

@pytest.fixture
def no_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every Hugging Face download fail at once, as it does without network."""
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach the Hub")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    monkeypatch.delenv("TALOS_STORY_CLOZE_DIR", raising=False)


def test_paper_tasks_are_registered_with_hub_ids() -> None:
    for name, n_classes in {**PAPER_VISION, **PAPER_NLP}.items():
        spec = get_task(name)
        assert spec.source == "huggingface" and spec.hf_id and "/" in spec.hf_id
        assert spec.num_classes == n_classes
        assert spec.modality == ("image" if name in PAPER_VISION else "text")
    assert get_task("qasc").classes == tuple("ABCDEFGH")
    assert get_task("quartz").classes == ("A", "B")
    assert get_task("winogrande").classes == get_task("story_cloze").classes == ("1", "2")
    assert {get_task(n).classes for n in ("paws", "wikiqa", "wsc", "rte")} == {("no", "yes"), ("yes", "no")}


@pytest.mark.parametrize("name", sorted({**PAPER_VISION, **PAPER_NLP}))
def test_paper_tasks_fail_cleanly_offline(name: str, no_hub: None) -> None:
    hf_id = get_task(name).hf_id
    with pytest.raises(TalosError) as info:
        load_task(name)
    message = str(info.value)
    assert message.startswith(f"task {name!r} needs the Hugging Face dataset {hf_id!r}, which could not be loaded")
    assert "offline tasks: " in message and "mnist" in message


def _fake_hub(monkeypatch: pytest.MonkeyPatch, make) -> list[tuple]:
    """Replace datasets.load_dataset with ``make(hf_id, config, split, kwargs)``; return the calls."""
    import datasets

    calls: list[tuple] = []

    def fake(hf_id, config=None, *, split, **kwargs):
        calls.append((hf_id, config, split, kwargs.get("streaming", False)))
        return make(hf_id, config, split, kwargs)

    monkeypatch.setattr(datasets, "load_dataset", fake)
    return calls


def test_hub_image_loader_converts_pil_images(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets
    from PIL import Image

    from talos_core.tasks.paper import PAPER_BY_NAME

    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(num_classes=10)})

    def make(hf_id, config, split, kwargs):
        sizes = [(64, 64)] * 3 if split == "train" else [(300, 600), (40, 30)]
        images = [Image.new("L" if i % 2 else "RGB", size, color=i * 40) for i, size in enumerate(sizes)]
        ds = datasets.Dataset.from_dict({"image": images, "label": list(range(len(images)))}, features=features)
        return ds.to_iterable_dataset() if kwargs.get("streaming") else ds

    calls = _fake_hub(monkeypatch, make)
    train, test = PAPER_BY_NAME["eurosat"].loader()
    assert calls == [("tanganke/eurosat", None, "train", False), ("tanganke/eurosat", None, "test", False)]
    assert isinstance(train.inputs, np.ndarray) and train.inputs.shape == (3, 64, 64, 3)
    assert train.inputs.dtype == np.uint8 and train.labels.tolist() == [0, 1, 2]
    assert isinstance(test.inputs, list) and [im.shape for im in test.inputs] == [(512, 256, 3), (30, 40, 3)]

    with pytest.raises(TalosError, match="has 10 classes but the task defines 47"):
        PAPER_BY_NAME["dtd"].loader()


def test_hub_streaming_for_imagenet(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets
    from PIL import Image

    from talos_core.tasks.paper import PAPER_BY_NAME

    def make(hf_id, config, split, kwargs):
        labels = [5, 999, -1]  # ImageNet's unlabelled rows carry -1
        images = [Image.new("RGB", (8, 8)) for _ in labels]
        return datasets.Dataset.from_dict({"image": images, "label": labels},
                                          features=datasets.Features({"image": datasets.Image(),
                                                                      "label": datasets.Value("int64")})
                                          ).to_iterable_dataset()

    calls = _fake_hub(monkeypatch, make)
    train, _test = PAPER_BY_NAME["imagenet"].loader()
    assert [c[2:] for c in calls] == [("train", True), ("validation", True)]
    assert train.labels.tolist() in ([5, 999], [999, 5]) and train.inputs.shape == (2, 8, 8, 3)


def test_hub_text_formatters(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    from talos_core.tasks.paper import PAPER_BY_NAME

    rows = {
        "allenai/qasc": [{"question": "What do plants need?", "fact1": "f1", "fact2": "f2", "answerKey": "C",
                          "choices": {"label": list("ABCDEFGH"), "text": list("abcdefgh")}},
                         {"question": "unlabelled", "fact1": "", "fact2": "", "answerKey": "",
                          "choices": {"label": list("ABCDEFGH"), "text": list("abcdefgh")}}],
        "allenai/winogrande": [{"sentence": "Tom beat Bob because _ was strong.", "option1": "Tom",
                                "option2": "Bob", "answer": "1"}],
        "aps/super_glue": [{"premise": "A dog runs.", "hypothesis": "An animal moves.", "idx": 0, "label": 0},
                           {"premise": "p", "hypothesis": "h", "idx": 1, "label": -1}],
    }
    _fake_hub(monkeypatch, lambda hf_id, config, split, kwargs: datasets.Dataset.from_list(rows[hf_id]))
    train, _ = PAPER_BY_NAME["qasc"].loader()
    assert train.labels.tolist() == [2] and "(C) c" in train.inputs[0] and "What do plants need?" in train.inputs[0]
    train, _ = PAPER_BY_NAME["winogrande"].loader()
    assert train.labels.tolist() == [0] and "option 2: Bob" in train.inputs[0]
    train, _test = PAPER_BY_NAME["rte"].loader()
    assert train.inputs == ["premise: A dog runs. hypothesis: An animal moves."]
    assert get_task("rte").classes[train.labels[0]] == "yes"


def test_story_cloze_reads_manual_csv_files(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    import datasets

    header = ("InputStoryid,InputSentence1,InputSentence2,InputSentence3,InputSentence4,"
              "RandomFifthSentenceQuiz1,RandomFifthSentenceQuiz2,AnswerRightEnding\n")
    for kind, answer in (("val", 1), ("test", 2)):
        path = tmp_path / f"cloze_test_{kind}__spring2016 - cloze_test_ALL_{kind}.csv"
        path.write_text(header + f"id1,A.,B.,C.,D.,E1.,E2.,{answer}\n")
    real = datasets.load_dataset
    monkeypatch.setattr(datasets, "load_dataset",
                        lambda *a, **k: real(*a, cache_dir=str(tmp_path / "cache"), **k))
    monkeypatch.setenv("TALOS_STORY_CLOZE_DIR", str(tmp_path))
    train, test = get_task("story_cloze").loader()
    assert train.inputs == ["story: A. B. C. D. ending 1: E1. ending 2: E2."]
    assert train.labels.tolist() == [0] and test.labels.tolist() == [1]
