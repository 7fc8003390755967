"""The Run page's uploads (dashboard/uploads.py) and the upload path of the page through AppTest."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from test_file_tasks import write_csv, write_images

from dashboard.access import ServerConfig
from dashboard.uploads import UploadLimits, import_upload, safe_name, save_upload
from talos_core.errors import TalosError
from talos_core.tasks import get_task, load_task

REPO = Path(__file__).resolve().parents[1]
APP = str(REPO / "dashboard" / "app.py")


def zip_folder(folder: Path, prefix: str = "pets/") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                z.write(p, prefix + p.relative_to(folder).as_posix())
        z.writestr("__MACOSX/._junk", b"resource fork")
    return buf.getvalue()


def zip_of(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def test_csv_upload_is_saved_in_the_store_and_named(tmp_path):
    data = write_csv(tmp_path / "r.csv").read_bytes()
    store = tmp_path / "store"
    task = save_upload(store, "../my reviews.csv", data, options={"text": "review", "label": ""})
    spec = get_task(task)
    (folder,) = (store / "uploads").iterdir()
    assert task.startswith(f"csv:{folder}/my_reviews.csv?text=review#") and spec.classes == ("1", "5")
    assert save_upload(store, "my reviews.csv", data, options={"text": "review"}) == task  # same bytes, same task
    assert len(list((store / "uploads").iterdir())) == 1


def test_zip_upload_unpacks_an_image_folder(tmp_path):
    data = zip_folder(write_images(tmp_path / "pets", per_class=3))
    store = tmp_path / "store"
    task = save_upload(store, "pets.zip", data)
    spec = get_task(task)
    assert task.startswith("images:") and task.split("#")[0].endswith("/images/pets")
    assert spec.classes == ("cat", "dog", "red_fox") and len(load_task(task).test) == 1
    assert not list((store / "uploads").glob(".staging-*"))
    assert not any("__MACOSX" in str(p) for p in (store / "uploads").rglob("*"))


@pytest.mark.parametrize("name,data,needle", [
    ("evil.zip", {"../outside.png": b"x"}, "a path outside its folder"),
    ("evil.zip", {"/etc/passwd": b"x"}, "a path outside its folder"),
    ("evil.zip", {"a/..\\..\\x.png": b"x"}, "a path outside its folder"),
    ("empty.zip", {"__MACOSX/x": b"x"}, "holds no files"),
    ("one.zip", {"cat/1.png": b"not an image", "dog/1.png": b"x"}, "could not be read"),
])
def test_bad_zips_are_one_sentence_and_leave_nothing(name, data, needle, tmp_path):
    store = tmp_path / "store"
    with pytest.raises(TalosError, match=needle):
        save_upload(store, name, zip_of(data))
    assert not (store / "uploads").exists() or not list((store / "uploads").iterdir())
    assert not (tmp_path / "outside.png").exists()


def test_zip_bomb_and_caps(tmp_path):
    bomb = zip_of({f"c{i}/x.png": b"\0" * (3 * 2**20) for i in range(2)})  # 6 MB unpacked, a few KB zipped
    assert len(bomb) < 50_000
    with pytest.raises(TalosError, match="unpacks to more than 5 MB"):
        save_upload(tmp_path / "s", "bomb.zip", bomb, limits=UploadLimits(max_unpacked_mb=5))
    with pytest.raises(TalosError, match="more than 1 files"):
        save_upload(tmp_path / "s", "two.zip", zip_of({"a/1.png": b"1", "b/1.png": b"2"}),
                    limits=UploadLimits(max_files=1))
    with pytest.raises(TalosError, match=r"above the upload cap of this dashboard server \(1 MB\)"):
        save_upload(tmp_path / "s", "big.csv", b"x" * (2**20 + 1), limits=UploadLimits(max_upload_mb=1))
    with pytest.raises(TalosError, match="neither a CSV file nor a zip"):
        save_upload(tmp_path / "s", "model.pkl", b"data")
    with pytest.raises(TalosError, match="is not a zip file"):
        save_upload(tmp_path / "s", "fake.zip", b"PK no zip")
    assert not (tmp_path / "s" / "uploads").exists() or not list((tmp_path / "s" / "uploads").iterdir())


def test_bad_csv_upload_leaves_nothing(tmp_path):
    with pytest.raises(TalosError, match="has no column 'grade'"):
        save_upload(tmp_path / "s", "r.csv", write_csv(tmp_path / "r.csv").read_bytes(), options={"label": "grade"})
    assert not list((tmp_path / "s" / "uploads").iterdir())


def test_upload_limits_from_env():
    cfg = ServerConfig.from_env({"TALOS_STORE": "/tmp/x", "TALOS_DASHBOARD_MAX_UPLOAD_MB": "3",
                                 "TALOS_DASHBOARD_MAX_UNPACKED_MB": "7", "TALOS_DASHBOARD_MAX_UPLOAD_FILES": "9"})
    assert cfg.uploads == UploadLimits(3, 7, 9)
    with pytest.raises(TalosError, match="TALOS_DASHBOARD_MAX_UPLOAD_MB must be a positive integer"):
        UploadLimits.from_env({"TALOS_DASHBOARD_MAX_UPLOAD_MB": "lots"})
    assert safe_name("C:\\Users\\me\\data.csv") == "data.csv"


# --- the Run page ----------------------------------------------------------------------------------

def open_run_page(monkeypatch, store: Path) -> AppTest:
    monkeypatch.setenv("TALOS_STORE", str(store))
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("app_pages/run.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _code(at: AppTest) -> str:
    return "\n".join(c.value for c in at.code)


def test_run_page_upload_csv_becomes_a_task_of_the_job(monkeypatch, tmp_path):
    store = tmp_path / "store"
    at = open_run_page(monkeypatch, store)
    at.selectbox(key="run_model").set_value("tiny-text").run()
    at.text_input(key="run_upload_label").set_value("stars").run()
    data = write_csv(tmp_path / "reviews.csv").read_bytes()
    at.file_uploader(key="run_upload").set_value(("reviews.csv", data, "text/csv")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    success = " ".join(s.value for s in at.success)
    assert "text task csv:" in success and "2 classes (1, 5)" in success
    (folder,) = (store / "uploads").iterdir()
    code = _code(at)
    assert f"talos finetune --task 'csv:{folder}/reviews.csv?label=stars#" in code
    assert f"csv:{folder}/reviews.csv?label=stars#" in code.split("talos evaluate addition --tasks ")[1]


def test_run_page_upload_zip_and_typed_model(monkeypatch, tmp_path):
    store = tmp_path / "store"
    at = open_run_page(monkeypatch, store)
    data = zip_folder(write_images(tmp_path / "pets", per_class=3))
    at.file_uploader(key="run_upload").set_value(("pets.zip", data, "application/zip")).run()
    assert not at.error, [e.value for e in at.error]
    assert "image task images:" in " ".join(s.value for s in at.success)
    assert "talos finetune --task 'images:" in _code(at)
    # a typed model spec: the offline caveat is shown and the commands use it
    at.text_input(key="run_model_typed").set_value("clip:ViT-B-16:laion2b_s34b_b88k").run()
    assert any("download their weights" in w.value for w in at.warning)
    assert "--model clip:ViT-B-16:laion2b_s34b_b88k" in _code(at)
    # a text upload for an image model: a warning, and it is not added to the job
    at.file_uploader(key="run_upload").set_value(("r.csv", write_csv(tmp_path / "r.csv").read_bytes(),
                                                  "text/csv")).run()
    assert any("This is a text task" in w.value for w in at.warning)
    assert "csv:" not in _code(at)


def test_run_page_bad_upload_is_one_sentence(monkeypatch, tmp_path):
    store = tmp_path / "store"
    at = open_run_page(monkeypatch, store)
    at.file_uploader(key="run_upload").set_value(("evil.zip", zip_of({"../x.png": b"x"}), "application/zip")).run()
    assert not at.exception
    assert any("a path outside its folder" in e.value for e in at.error)
    assert not (store / "uploads").exists() or not list((store / "uploads").iterdir())


# --- checkpoint uploads: imported runs (talos import) -----------------------------------------------

def _checkpoint_bytes(shift: float = 0.01) -> bytes:
    """tiny-clip's image tower with every weight moved by ``shift``, as safetensors bytes (a 'fine-tuned' state)."""
    from safetensors.torch import save

    from talos_core.models import load_model

    visual = load_model("tiny-clip").visual.state_dict()
    return save({k: (v + shift).contiguous() for k, v in visual.items()})


def test_checkpoint_upload_imports_a_run_and_bad_ones_leave_nothing(tmp_path):
    import torch

    from talos_core.store import Store

    store = tmp_path / "store"
    res = import_upload(store, "../my ft.safetensors", _checkpoint_bytes(), model="tiny-clip", task="digits")
    assert res.run.id.startswith("tiny-clip__digits__imported__") and res.run.manifest.info["label"] == "my_ft"
    (folder,) = (store / "uploads").iterdir()
    assert [p.name for p in folder.iterdir()] == ["my_ft.safetensors"]
    assert import_upload(store, "my ft.safetensors", _checkpoint_bytes(), model="tiny-clip", task="digits").reused
    pickled = io.BytesIO()
    torch.save(torch.nn.Linear(2, 2), pickled)
    bad = [("model.pt", pickled.getvalue(), {}, "holds a pickled Python object"),
           ("notes.txt", b"x", {}, "'notes.txt' is not a checkpoint file; upload a .safetensors, .pt"),
           ("big.safetensors", b"x" * (2 * 2**20), {"limits": UploadLimits(max_upload_mb=1)},
            "above the upload cap of this dashboard server (1 MB)"),
           ("theta0.safetensors", _checkpoint_bytes(0.0), {}, "equals the pre-trained weights θ0 of 'tiny-clip'"),
           ("ok.safetensors", _checkpoint_bytes(0.02), {"task": "tweets"}, "takes image inputs but task 'tweets'")]
    for name, data, kw, needle in bad:
        with pytest.raises(TalosError, match=needle.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
            import_upload(store, name, data, **{"model": "tiny-clip", "task": "digits", **kw})
        assert [p.name for p in (store / "uploads").iterdir()] == [folder.name], name
        assert [r.id for r in Store(store).runs()] == [res.run.id], name


def test_run_page_imports_an_uploaded_checkpoint(monkeypatch, tmp_path):
    store = tmp_path / "store"
    at = open_run_page(monkeypatch, store)
    at.file_uploader(key="run_import_file").set_value(("ft.safetensors", _checkpoint_bytes(),
                                                       "application/octet-stream"))
    at.selectbox(key="run_import_task_image").set_value("digits")
    at.text_input(key="run_import_label").set_value("outside").run()
    at.button(key="run_import").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    success = " ".join(s.value for s in at.success)
    assert "Imported: run tiny-clip__digits__imported__" in success and "label outside" in success
    # evaluating it: the job runs the protocols on the imported runs and fine-tunes nothing
    at.selectbox(key="run_method").set_value("imported").run()
    code = _code(at)
    assert "talos finetune" not in code and "talos evaluate single" in code and "--method imported" in code
