"""Tasks from the user's own files: csv:PATH, images:DIR, hf:ID (talos_core/tasks/files.py)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from talos_core.cli import main
from talos_core.errors import TalosError
from talos_core.pipeline import FinetuneRequest
from talos_core.store import Store
from talos_core.tasks import get_task, load_task
from talos_core.tasks.files import canonical_task, resolve_file_task, task_label

ROOT = Path(__file__).resolve().parents[1]
POS = ["great", "wonderful", "excellent", "loved", "fantastic", "superb", "brilliant"]
NEG = ["awful", "terrible", "hated", "bad", "poor", "boring", "dull"]
FAST = ["--steps", "2", "--batch-size", "8", "--calib-samples", "8", "--rounds", "1", "--quiet"]


def write_csv(path: Path, n: int = 40, header=("id", "review", "stars"), labels=("1", "5"), start: int = 0) -> Path:
    rng = np.random.default_rng(0)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for i in range(start, start + n):
            lab = i % len(labels)
            words = rng.choice(POS if lab else NEG, 3, replace=False)
            w.writerow([i, " ".join(words) + f" film number {i}", labels[lab]])
    return path


def write_images(root: Path, classes=("cat", "dog", "red_fox"), per_class: int = 6, size=(20, 24)) -> Path:
    from PIL import Image

    rng = np.random.default_rng(1)
    for k, c in enumerate(classes):
        (root / c).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            colour = np.eye(3)[k % 3] * 180 + 40
            a = (colour[None, None, :] + rng.integers(-30, 30, (*size, 3))).clip(0, 255).astype(np.uint8)
            Image.fromarray(a).save(root / c / f"{i}.png")
    return root


def run_cli(argv, capsys) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


# --- resolution ------------------------------------------------------------------------------------

def test_csv_columns_detected_classes_from_data_and_splits(tmp_path):
    path = write_csv(tmp_path / "reviews.csv", n=50)
    spec = get_task(f"csv:{path}")
    assert spec.modality == "text" and spec.classes == ("1", "5") and spec.source == "file"
    assert spec.name.startswith(f"csv:{path}#") and len(spec.name.rpartition("#")[2]) == 12
    assert "review" in spec.description and "stars" in spec.description
    data = load_task(spec.name)
    assert (len(data.train), len(data.val), len(data.test)) == (36, 4, 10)  # 20% hold-out, then 10% of train
    assert set(data.train.inputs).isdisjoint(data.test.inputs)
    assert load_task(f"csv:{path}").test.inputs == data.test.inputs  # deterministic
    assert task_label(spec.name) == f"csv-reviews-{spec.name[-12:]}"


def test_csv_options_name_columns_and_numeric_classes_sort(tmp_path):
    path = write_csv(tmp_path / "d.csv", header=("a", "b", "c"), labels=("10", "2", "1"))
    with pytest.raises(TalosError, match=r"could not tell which column of 'd.csv' holds the text .*"
                                         r"\?text=COLUMN&label=COLUMN"):
        get_task(f"csv:{path}")
    spec = get_task(f"csv:{path}?text=b&label=c")
    assert spec.classes == ("1", "2", "10")
    assert spec.name == f"csv:{path}?label=c&text=b#{spec.name[-12:]}"  # options sorted
    assert get_task(f"csv:{path}?label=c&text=b") is spec


def test_tsv_and_sep_option(tmp_path):
    rows = "text\tlabel\n" + "".join(f"sentence {i}\t{'ab'[i % 2]}\n" for i in range(10))
    (tmp_path / "x.tsv").write_text(rows)
    (tmp_path / "x.txt").write_text(rows.replace("\t", ";"))
    assert get_task(f"csv:{tmp_path / 'x.tsv'}").classes == ("a", "b")
    assert get_task(f"csv:{tmp_path / 'x.txt'}?sep=;").classes == ("a", "b")


def test_changed_file_gets_a_new_name_and_run_id_old_name_refused(tmp_path):
    path = write_csv(tmp_path / "r.csv")
    relative = os.path.relpath(path)
    req = FinetuneRequest(model="tiny-text", task=f"csv:{relative}")
    first = req.task
    assert first == get_task(f"csv:{path}").name  # relative paths become absolute
    write_csv(path, n=41)
    req2 = FinetuneRequest(model="tiny-text", task=f"csv:{relative}")
    assert req2.task != first and req2.run_id() != req.run_id()
    with pytest.raises(TalosError, match="the data changed since this task was named"):
        get_task(first)
    assert canonical_task("digits") == "digits"
    assert FinetuneRequest(model="tiny-text", task="digits").run_id() == \
        FinetuneRequest(model="tiny-text", task="digits").run_id()


def test_images_folder_classes_and_hold_out(tmp_path):
    root = write_images(tmp_path / "pets")
    (root / "cat" / "notes.txt").write_text("ignored, as by torchvision's ImageFolder")
    spec = get_task(f"images:{root}")
    assert spec.modality == "image" and spec.classes == ("cat", "dog", "red_fox")
    assert "a photo of a {}." in spec.templates
    data = load_task(spec.name)
    assert len(data.train) + len(data.val) + len(data.test) == 18 and len(data.test) == 3
    assert data.train.inputs.dtype == np.uint8 and data.train.inputs.shape[1:] == (20, 24, 3)


def test_images_train_test_folders_are_used(tmp_path):
    write_images(tmp_path / "set" / "train", per_class=5)
    write_images(tmp_path / "set" / "test", classes=("cat", "dog"), per_class=2, size=(30, 30))
    data = load_task(f"images:{tmp_path / 'set'}")
    assert get_task(f"images:{tmp_path / 'set'}").classes == ("cat", "dog", "red_fox")
    assert len(data.test) == 4 and len(data.train) + len(data.val) == 15
    assert sorted(set(data.test.labels.tolist())) == [0, 1]


# --- bad files: one sentence, exit 2, nothing written ----------------------------------------------

def _bad(tmp_path: Path, case: str) -> tuple[str, str]:
    if case == "missing column":
        return f"csv:{write_csv(tmp_path / 'a.csv')}?text=review&label=grade", "has no column 'grade'"
    if case == "one class":
        return f"csv:{write_csv(tmp_path / 'a.csv', labels=('5',))}", "has 1 class ('5') in column 'stars'"
    if case == "not csv":
        (tmp_path / "a.csv").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
        return f"csv:{tmp_path / 'a.csv'}", "is not a CSV file"
    if case == "empty csv":
        (tmp_path / "a.csv").write_text("")
        return f"csv:{tmp_path / 'a.csv'}", "is empty"
    if case == "missing path":
        return f"csv:{tmp_path / 'nope.csv'}", "does not exist"
    if case == "csv is a folder":
        return f"csv:{tmp_path}", "is not a file"
    if case == "unknown option":
        return f"csv:{tmp_path / 'a.csv'}?colour=red", "unknown option 'colour'"
    if case == "unreadable image":
        root = write_images(tmp_path / "pets")
        (root / "dog" / "broken.png").write_bytes(b"not a png at all")
        return f"images:{root}", "image 'dog/broken.png' could not be read"
    if case == "empty folder":
        (tmp_path / "pets").mkdir()
        return f"images:{tmp_path / 'pets'}", "has no class sub-folders"
    if case == "empty class folder":
        root = write_images(tmp_path / "pets")
        (root / "zebra").mkdir()
        return f"images:{root}", "class folder 'zebra'"
    if case == "one class folder":
        return f"images:{write_images(tmp_path / 'pets', classes=('cat',))}", "has one class folder ('cat')"
    if case == "missing folder":
        return f"images:{tmp_path / 'nope'}", "does not exist"
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["missing column", "one class", "not csv", "empty csv", "missing path",
                                  "csv is a folder", "unknown option", "unreadable image", "empty folder",
                                  "empty class folder", "one class folder", "missing folder"])
def test_bad_files_are_one_sentence_exit_2_nothing_written(case, tmp_path, capsys):
    task, needle = _bad(tmp_path, case)
    store = tmp_path / "store"
    model = "tiny-clip" if task.startswith("images:") else "tiny-text"
    code, _, err = run_cli(["finetune", "--model", model, "--task", task, "--store", str(store), *FAST], capsys)
    assert code == 2, err
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not store.exists()


# --- end to end ------------------------------------------------------------------------------------

@pytest.mark.slow  # ~45-65 s on the shared 2-core machine (real MiniLM weights, calibration + 4 evaluations)
def test_finetune_minilm_on_a_csv(tmp_path, capsys):
    path = write_csv(tmp_path / "reviews.csv")
    code, out, err = run_cli(["finetune", "--model", "minilm-l6", "--task", f"csv:{path}", "--method", "talos",
                              "--store", str(tmp_path / "s"), *FAST], capsys)
    assert code == 0, err
    (run,) = Store(tmp_path / "s").runs()
    assert run.manifest.task == get_task(f"csv:{path}").name
    assert run.id.startswith("minilm-l6__csv-reviews-") and "fine-tuned test acc" in out
    assert run.manifest.data_sizes == {"train": 29, "val": 3, "test": 8}
    # the same file again reuses the run; an edited file trains a new one
    assert main(["finetune", "--model", "minilm-l6", "--task", f"csv:{path}", "--store", str(tmp_path / "s"),
                 *FAST]) == 0
    assert len(list(Store(tmp_path / "s").runs())) == 1


@pytest.mark.parametrize("model", ["tiny-clip", pytest.param("efficientnet-lite0", marks=pytest.mark.slow)])
def test_finetune_on_an_image_folder(model, tmp_path, capsys):
    root = write_images(tmp_path / "pets", per_class=4)
    code, _out, err = run_cli(["finetune", "--model", model, "--task", f"images:{root}", "--method", "talos",
                              "--store", str(tmp_path / "s"), *FAST], capsys)
    assert code == 0, err
    (run,) = Store(tmp_path / "s").runs()
    assert run.manifest.task == get_task(f"images:{root}").name and run.manifest.family in ("clip", "cnn")
    assert run.task_vector().nnz() > 0


def test_evaluate_accepts_file_tasks(tmp_path, capsys):
    a = write_csv(tmp_path / "a.csv")
    b = tmp_path / "b.csv"
    b.write_text("text,label\n" + "".join(f"{w} topic line {i},{'xyz'[i % 3]}\n"
                                          for i, w in enumerate(POS * 4)))
    code, _out, err = run_cli(["evaluate", "single", "--model", "tiny-text", "--tasks", f"csv:{a},csv:{b}",
                              "--store", str(tmp_path / "s"), *FAST], capsys)
    assert code == 0, err
    assert {r.manifest.task for r in Store(tmp_path / "s").runs()} == {get_task(f"csv:{a}").name,
                                                                       get_task(f"csv:{b}").name}


# --- Hugging Face datasets -------------------------------------------------------------------------

def test_hf_dataset_from_a_local_folder_with_real_load_dataset(tmp_path, monkeypatch):
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    folder = tmp_path / "myset"
    folder.mkdir()
    write_csv(folder / "train.csv", n=30, header=("id", "text", "label"), labels=("neg", "pos"))
    write_csv(folder / "test.csv", n=10, header=("id", "text", "label"), labels=("neg", "pos"), start=100)
    spec = resolve_file_task(f"hf:{folder}")
    assert spec.source == "huggingface" and spec.classes == ("neg", "pos") and spec.modality == "text"
    data = load_task(spec.name)
    assert len(data.test) == 10 and len(data.train) + len(data.val) == 30
    with pytest.raises(TalosError, match=r"has no split 'dev'; its splits: train, test"):
        resolve_file_task(f"hf:{folder}?split=dev")


def test_hf_offline_is_one_clear_sentence(tmp_path):
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "talos_core.cli", "finetune", "--model", "tiny-text", "--task",
                           "hf:stanfordnlp/imdb?split=train", "--store", str(tmp_path / "s"), "--quiet"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "the Hugging Face dataset 'stanfordnlp/imdb' could not be loaded" in err
    assert "without network access only data sets already in the local Hugging Face cache load" in err
    assert not (tmp_path / "s").exists()


def test_hf_image_folder_through_load_dataset(tmp_path, monkeypatch):
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    root = write_images(tmp_path / "pets", per_class=4)
    spec = resolve_file_task(f"hf:{root}")  # datasets' imagefolder builder: a ClassLabel from the folder names
    assert spec.modality == "image" and spec.classes == ("cat", "dog", "red_fox")
    data = load_task(spec.name)
    assert len(data.train) + len(data.val) + len(data.test) == 12
    assert data.train.inputs.shape[1:] == (20, 24, 3)


def test_doctests():
    import doctest

    import dashboard.uploads
    import talos_core.tasks.files

    for module in (talos_core.tasks.files, dashboard.uploads):
        assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0


def test_released_data_is_read_again(tmp_path):
    from talos_core.tasks.files import release_data

    path = write_csv(tmp_path / "r.csv")
    spec = get_task(f"csv:{path}")
    release_data(spec)
    assert len(load_task(spec.name).test) == 8
