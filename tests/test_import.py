"""``talos import``: checkpoints fine-tuned elsewhere become runs of method ``imported`` whose task vector
θ_ft − θ0 equals the studio's own for the same fine-tuning — transformers CLIP vision folders (mapped onto open_clip by
an explicit, tested key mapping), open_clip state dicts, transformers BertModel folders (tiny-text, MiniLM) — and the
protocols evaluate them like any other run; every bad checkpoint gets one sentence, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from test_robustness import _files, _one_sentence

from talos_core.cli import main
from talos_core.errors import TalosError
from talos_core.importing import ImportRequest, default_label, import_checkpoint, read_import_manifest
from talos_core.models import convert
from talos_core.store import Store

FAST = dict(steps=3, max_train=32, max_val=16, max_test=16, batch_size=8, lr=5e-3)
TINY_HF_CLIP = dict(image_size=32, patch_size=8, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=2, projection_dim=64, layer_norm_eps=1e-5)


def _studio_run(store: Store, model: str, task: str):
    """The studio's own non-linear fine-tuning of ``model`` on ``task`` (a few steps), made once per store."""
    from talos_core.evaluation.runs import resolve_runs

    return resolve_runs(store, model, [task], "nonlinear", overrides=FAST)[task]


def _at(model_name: str, vector):
    """``model_name`` loaded with θ0 + τ (θ_ft, as the fine-tuning left it)."""
    from talos_core.models import load_model

    model = load_model(model_name)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.add_(vector.dense(n).to(p.dtype))
    return model


def _hf_clip(visual: dict, act: str = "gelu", projection: bool = True):
    """A tiny transformers CLIP vision model holding the open_clip tower ``visual``'s weights."""
    from transformers import CLIPVisionConfig, CLIPVisionModel, CLIPVisionModelWithProjection

    cls = CLIPVisionModelWithProjection if projection else CLIPVisionModel
    hf = cls(CLIPVisionConfig(**TINY_HF_CLIP, hidden_act=act)).eval()
    prefix = convert.hf_clip_vision_prefix(hf.state_dict())  # transformers 5 saves a CLIPVisionModel unprefixed
    state = convert.open_clip_to_hf_clip_vision(visual, prefix)
    hf.load_state_dict({k: v for k, v in state.items() if projection or k != convert.HF_PROJECTION})
    return hf


def _assert_same_vector(a, b, atol: float = 0.0) -> None:
    assert set(a.values) == set(b.values)
    for n in a.values:
        torch.testing.assert_close(a.dense(n), b.dense(n), atol=atol, rtol=0, msg=n)


def _import(tmp_path, store: Store, model: str, task: str, path, *extra: str) -> int:
    return main(["import", "--model", model, "--task", task, str(path), "--store", str(store.root), *extra])


def _imported(store: Store, task: str, label: str | None = None):
    runs = [r for r in store.find_runs(task=task, method="imported")
            if label is None or r.manifest.info["label"] == label]
    assert len(runs) == 1, [r.id for r in runs]
    return runs[0]


@pytest.fixture(scope="module")
def clip_store(tmp_path_factory):
    """A store with the studio's non-linear tiny-clip runs on digits and mnist, and θ_ft of each."""
    store = Store(tmp_path_factory.mktemp("import-clip") / "store")
    runs = {t: _studio_run(store, "tiny-clip", t) for t in ("digits", "mnist")}
    return store, {t: (r, _at("tiny-clip", r.task_vector())) for t, r in runs.items()}


# --------------------------------------------------------------------------------------------
# the transformers CLIP ↔ open_clip mapping
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("act", ["gelu", "quick_gelu"])
def test_hf_clip_mapping_gives_the_same_embedding_both_ways(act):
    """A tiny random transformers CLIP vision tower and the open_clip tower it maps onto embed images equally; the
    mapping back returns the same tensors. OpenAI's weights use quick_gelu (open_clip builds them with QuickGELU)."""
    import open_clip

    from talos_core.models.clip import TINY_CLIP_CONFIG

    torch.manual_seed(3)
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    hf = CLIPVisionModelWithProjection(CLIPVisionConfig(**TINY_HF_CLIP, hidden_act=act)).eval()
    visual, rest = convert.hf_clip_vision_to_open_clip(hf.state_dict())
    assert rest == []
    clip = open_clip.model.CLIP(**TINY_CLIP_CONFIG, quick_gelu=act == "quick_gelu").eval()
    assert convert.open_clip_activation(clip.visual) == act
    clip.visual.load_state_dict(visual, strict=True)
    x = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(clip.visual(x), hf(pixel_values=x).image_embeds, atol=1e-5, rtol=1e-5)
    back = convert.open_clip_to_hf_clip_vision(clip.visual.state_dict())
    assert set(back) == set(hf.state_dict())
    assert all(torch.equal(back[k], v) for k, v in hf.state_dict().items())
    # the mapping is explicit: every transformers block tensor has its named open_clip counterpart
    assert convert.hf_clip_vision_name("encoder.layers.0.layer_norm1.weight") == "transformer.resblocks.0.ln_1.weight"
    assert convert.hf_clip_vision_name("encoder.layers.0.self_attn.q_proj.weight") is None  # packed, not renamed
    with pytest.raises(KeyError, match="no transformers CLIP counterpart"):
        convert.open_clip_to_hf_clip_vision({"attn_pool.weight": torch.zeros(1)})


# --------------------------------------------------------------------------------------------
# round trips: the imported vector is the studio's own
# --------------------------------------------------------------------------------------------
def test_transformers_clip_folder_round_trips(clip_store, tmp_path, capsys):
    store, runs = clip_store
    run, model = runs["digits"]
    folder = tmp_path / "clip-digits"
    _hf_clip(model.visual.state_dict()).save_pretrained(folder)
    assert _import(tmp_path, store, "tiny-clip", "digits", folder, "--method-label", "hf-ft") == 0
    out = capsys.readouterr().out
    assert "imported run tiny-clip__digits__imported__" in out and "transformers CLIP vision tower" in out
    imported = _imported(store, "digits", "hf-ft")
    _assert_same_vector(imported.task_vector(), run.task_vector())
    m = imported.manifest
    assert (m.method, m.eval_mode, m.sparse_method, m.config["options"]) == ("imported", "nonlinear", False,
                                                                           {"label": "hf-ft"})
    assert m.artifacts and not imported.verify()
    # importing the same checkpoint again finds the run: same id, nothing rewritten
    before = (imported.path / "manifest.json").read_bytes()
    assert _import(tmp_path, store, "tiny-clip", "digits", folder, "--method-label", "hf-ft") == 0
    assert "already imported: run " + imported.id in capsys.readouterr().out
    assert (imported.path / "manifest.json").read_bytes() == before
    # a quick_gelu config (OpenAI's CLIP) on a gelu base: τ is exact, the difference is reported
    quick = tmp_path / "clip-quick"
    _hf_clip(model.visual.state_dict(), act="quick_gelu").save_pretrained(quick)
    sub = Store(tmp_path / "quick")
    assert _import(tmp_path, sub, "tiny-clip", "digits", quick) == 0
    assert "fine-tuned with activation quick_gelu (its config.json) but 'tiny-clip' evaluates with gelu" in \
        capsys.readouterr().out
    _assert_same_vector(_imported(sub, "digits").task_vector(), run.task_vector())
    # a checkpoint of the same architecture from another start (another random init): reported as far from θ0
    from talos_core.models.clip import tiny_clip

    other = tmp_path / "other-init.safetensors"
    save_file({k: v.contiguous() for k, v in tiny_clip(seed=1).visual.state_dict().items()}, str(other))
    assert _import(tmp_path, sub, "tiny-clip", "digits", other) == 0
    assert "the checkpoint is far from θ0" in capsys.readouterr().out


def test_transformers_clip_vision_models_without_projection(clip_store, tmp_path, capsys):
    """A CLIPVisionModel has no visual projection: visual.proj stays at θ0 (reported), the rest is the studio's
    vector — saved by transformers 5 (keys without a prefix), and in the layout of transformers 4 (``vision_model.``,
    FusionBench's checkpoints) in float16, whose conversion is reported (equal up to float16 rounding)."""
    _store, runs = clip_store
    run, model = runs["digits"]
    own = run.task_vector()
    v5 = tmp_path / "clip-vision-v5"
    _hf_clip(model.visual.state_dict(), projection=False).save_pretrained(v5)
    v4 = tmp_path / "clip-vision-fp16"
    v4.mkdir()
    state = convert.open_clip_to_hf_clip_vision(model.visual.state_dict())
    save_file({k: v.half().contiguous() for k, v in state.items() if k != convert.HF_PROJECTION},
              str(v4 / "model.safetensors"))
    (v4 / "config.json").write_text(json.dumps({"model_type": "clip_vision_model", "hidden_act": "gelu"}))
    sub = Store(tmp_path / "s")
    for folder, atol in ((v5, 0.0), (v4, 2e-3)):
        assert _import(tmp_path, sub, "tiny-clip", "digits", folder) == 0
        out = capsys.readouterr().out
        assert "visual.proj stays at θ0" in out
        assert ("converted 31 tensors from float16 to float32" in out) == (folder == v4), out
        imported = _imported(sub, "digits", folder.name).task_vector()
        assert not imported.dense("visual.proj").any()
        for n in own.values:
            if n != "visual.proj":
                torch.testing.assert_close(imported.dense(n), own.dense(n), atol=atol, rtol=0, msg=n)


def test_open_clip_layouts_round_trip(clip_store, tmp_path, capsys):
    """A whole open_clip model written by talos merge (text tower left out and reported) and a visual-only state
    dict saved with torch.save both import to the studio's vector."""
    store, runs = clip_store
    run, model = runs["mnist"]
    merged = tmp_path / "merged"
    assert main(["merge", "--model", "tiny-clip", "--tasks", "mnist", "--method", "nonlinear", "--alpha", "1",
                 "--store", str(store.root), "--out", str(merged)]) == 0
    capsys.readouterr()
    sub = Store(tmp_path / "oc")
    assert _import(tmp_path, sub, "tiny-clip", "mnist", merged, "--method-label", "merged") == 0
    out = capsys.readouterr().out
    assert "left out" in out and "outside the fine-tuned backbone" in out and "prefix 'visual.'" in out
    _assert_same_vector(_imported(sub, "mnist", "merged").task_vector(), run.task_vector(), atol=1e-6)
    pt = tmp_path / "visual.pt"
    torch.save(model.visual.state_dict(), pt)
    assert _import(tmp_path, sub, "tiny-clip", "mnist", pt) == 0
    _assert_same_vector(_imported(sub, "mnist", "visual").task_vector(), run.task_vector())
    # a training checkpoint that wraps the state dict is unwrapped
    wrapped = tmp_path / "epoch3.ckpt"
    torch.save({"epoch": 3, "state_dict": {f"module.{k}": v for k, v in model.visual.state_dict().items()}}, wrapped)
    assert _import(tmp_path, sub, "tiny-clip", "mnist", wrapped) == 0
    _assert_same_vector(_imported(sub, "mnist", "epoch3").task_vector(), run.task_vector())


@pytest.mark.parametrize("name,task", [("tiny-text", "drug-reviews"), ("minilm-l6", "tweets")])
def test_text_encoder_bert_folder_round_trips(name, task, tmp_path, capsys):
    """The text-encoder family's BertModel (tiny-text; MiniLM's real weights) saved with save_pretrained (pooler
    included) and, for tiny-text, a BertForSequenceClassification-style state dict (bert. prefix, classifier)."""
    store = Store(tmp_path / "store")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run = _studio_run(store, name, task)
    finally:
        torch.set_num_threads(before)
    model = _at(name, run.task_vector())
    encoder, pooler = model.encoder, model._pooler.get("module")
    encoder.pooler = pooler  # the complete BertModel again, as transformers saves it
    folder = tmp_path / f"{name}-ft"
    encoder.save_pretrained(folder)
    assert _import(tmp_path, store, name, task, folder) == 0
    assert "transformers" in capsys.readouterr().out
    _assert_same_vector(_imported(store, task).task_vector(), run.task_vector())
    if name != "tiny-text":
        return
    state = {f"bert.{k}": v for k, v in encoder.state_dict().items()}
    state["classifier.weight"] = torch.zeros(3, 64)
    save_file(state, str(tmp_path / "classifier.safetensors"))
    assert _import(tmp_path, store, name, task, tmp_path / "classifier.safetensors") == 0
    out = capsys.readouterr().out
    assert "left out 1 keys outside the fine-tuned backbone (classifier.weight)" in out and "prefix 'bert.'" in out
    _assert_same_vector(_imported(store, task, "classifier").task_vector(), run.task_vector())


def test_timm_state_dict_round_trips(tmp_path, capsys):
    """The CNN family's timm feature extractor: its state dict (BatchNorm statistics included, which are buffers
    and not part of θ) imports to the studio's vector."""
    store = Store(tmp_path / "store")
    run = _studio_run(store, "tiny-cnn", "digits")
    model = _at("tiny-cnn", run.task_vector())
    save_file({k: v.contiguous() for k, v in model.backbone.state_dict().items()}, str(tmp_path / "cnn.safetensors"))
    assert _import(tmp_path, store, "tiny-cnn", "digits", tmp_path / "cnn.safetensors") == 0
    assert "(label cnn, timm;" in capsys.readouterr().out
    _assert_same_vector(_imported(store, "digits").task_vector(), run.task_vector())


# --------------------------------------------------------------------------------------------
# protocols and the dashboard see imported runs like any other
# --------------------------------------------------------------------------------------------
def test_protocols_and_dashboard_use_imported_runs(clip_store, tmp_path, capsys, monkeypatch):
    _store, runs = clip_store
    sub = Store(tmp_path / "protocols")
    for task, (_, model) in runs.items():
        pt = tmp_path / f"ft-{task}.safetensors"
        save_file({k: v.contiguous() for k, v in model.visual.state_dict().items()}, str(pt))
        assert _import(tmp_path, sub, "tiny-clip", task, pt, "--method-label", "ext") == 0
    capsys.readouterr()
    base = ["--model", "tiny-clip", "--tasks", "digits,mnist", "--method", "imported", "--store", str(sub.root),
            "--max-val", "16", "--max-test", "16", "--quiet"]
    for protocol in ("single", "addition", "negation"):
        assert main(["evaluate", protocol, *base, "--no-train", "--control-task", "fashion-mnist"]) == 0, protocol
    capsys.readouterr()
    payload = json.loads((sub.root / "results" / "addition" / "default__tiny-clip__imported.json").read_text())
    assert payload["method"] == "imported" and sorted(payload["runs"]) == ["digits", "mnist"]
    single = sub.read_table("single", "default__tiny-clip")
    assert set(single["method"]) == {"imported"}
    # post-hoc merges of the imported vectors (their own suite: results are written under the post-hoc method)
    assert main(["evaluate", "posthoc", *base[:4], "--method", "ties", *base[6:], "--posthoc-base", "imported",
                 "--posthoc-points", "1", "--suite", "imported-merges", "--control-task", "fashion-mnist"]) == 0
    ties = json.loads((sub.root / "results" / "addition" / "imported-merges__tiny-clip__ties.json").read_text())
    assert ties["base_method"] == "imported" and ties["runs"] == payload["runs"]
    code = main(["evaluate", "posthoc", *base[:4], "--method", "ties", *base[6:], "--posthoc-base", "llora"])
    _one_sentence(capsys, code, "base method 'llora' is evaluated linearized")
    # the dashboard shows the imported runs' results like any other method's, under the catalogue's label
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("TALOS_STORE", str(sub.root))
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "dashboard" / "app.py"), default_timeout=120)
    at.switch_page("app_pages/arithmetic.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Imported" in [str(o) for sb in at.selectbox for o in sb.options]  # the catalogue label of imported
    assert at.get("plotly_chart") and not [e.value for e in at.error]
    # a second label on one task: the protocols ask which; --option label=NAME picks it
    _, model = runs["digits"]
    other = tmp_path / "other.safetensors"
    save_file({k: (v + 0.01).contiguous() for k, v in model.visual.state_dict().items()}, str(other))
    assert _import(tmp_path, sub, "tiny-clip", "digits", other) == 0
    capsys.readouterr()
    code = main(["evaluate", "single", *base])
    _one_sentence(capsys, code, "with 2 labels (ext, other); pick one with --option label=NAME")
    assert main(["evaluate", "single", *base, "--option", "label=ext"]) == 0
    capsys.readouterr()
    # a task without an imported run is never fine-tuned: one sentence on how to import it
    code = main(["evaluate", "single", *base[:2], "--tasks", "fashion-mnist", *base[4:]])
    _one_sentence(capsys, code, "has no 'imported' run of 'tiny-clip' on 'fashion-mnist', and 'imported' runs are "
                                "not fine-tuned here; import one first: talos import")
    code = main(["finetune", "--model", "tiny-clip", "--task", "digits", "--method", "imported", "--store",
                 str(tmp_path / "never")])
    _one_sentence(capsys, code, "are not fine-tuned here")
    assert not (tmp_path / "never").exists()


# --------------------------------------------------------------------------------------------
# bad checkpoints: one sentence, exit 2, nothing written
# --------------------------------------------------------------------------------------------
def _bad_cases(tmp_path: Path, model) -> list[tuple[str, list[str], str]]:
    """``(name, import arguments, the sentence's needle)`` of every bad checkpoint."""
    visual = {k: v.clone() for k, v in model.visual.state_dict().items()}

    def st(name: str, state: dict) -> str:
        path = tmp_path / f"{name}.safetensors"
        save_file({k: v.contiguous() for k, v in state.items()}, str(path))
        return str(path)

    hf_other = tmp_path / "hf-wide"
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    CLIPVisionModelWithProjection(CLIPVisionConfig(**{**TINY_HF_CLIP, "hidden_size": 32})).save_pretrained(hf_other)
    pickled = tmp_path / "model.pt"
    torch.save(torch.nn.Linear(2, 2), pickled)
    listed = tmp_path / "list.pt"
    torch.save([torch.zeros(1)], listed)
    nan = dict(visual)
    nan["ln_post.weight"] = torch.full_like(nan["ln_post.weight"], float("nan"))
    missing = {k: v for k, v in visual.items() if not k.startswith("transformer.resblocks.1.mlp")}
    extra = {**visual, "transformer.resblocks.7.ln_1.weight": torch.ones(64)}
    ints = {**visual, "ln_pre.bias": torch.zeros(64, dtype=torch.int32)}
    from talos_core.models import load_model

    theta0 = load_model("tiny-clip").visual.state_dict()
    (tmp_path / "empty-folder").mkdir()
    text_ckpt = st("bert", {"embeddings.word_embeddings.weight": torch.zeros(10, 4),
                            "encoder.layer.0.x": torch.ones(1)})
    (tmp_path / "notes.txt").write_text("hello")
    return [
        ("other-architecture", [text_ckpt], "is not a checkpoint of 'tiny-clip' (clip): none of its 2 keys names"),
        ("shape", [str(hf_other)], "is a checkpoint of another architecture: 'class_embedding' has shape (32,) where "
                                   "the parameter 'visual.class_embedding' of 'tiny-clip' has (64,)"),
        ("missing", [st("missing", missing)], "does not fit 'tiny-clip': 4 of its 32 parameters are missing "
                                              "(transformer.resblocks.1.mlp.c_fc.weight"),
        ("unexpected", [st("extra", extra)], "1 keys are not its parameters "
                                             "(transformer.resblocks.7.ln_1.weight)"),
        ("non-finite", [st("nan", nan)], "holds non-finite values (NaN or inf) in 'ln_post.weight'"),
        ("identical", [st("theta0", theta0)], "equals the pre-trained weights θ0 of 'tiny-clip' exactly: its task "
                                              "vector is empty"),
        ("integers", [st("ints", ints)], "stores 'ln_pre.bias' as torch.int32, not floating point"),
        ("pickled", [str(pickled)], "holds a pickled Python object (e.g. a whole model saved with torch.save(model)), "
                                    "which is not unpickled"),
        ("not-a-state-dict", [str(listed)], "holds a list, not a state dict"),
        ("no-file", [str(tmp_path / "nope.safetensors")], "does not exist; give a transformers model folder"),
        ("empty-folder", [str(tmp_path / "empty-folder")], "holds no checkpoint file: expected one of"),
        ("suffix", [str(tmp_path / "notes.txt")], "is neither a .safetensors file nor a torch state dict"),
        ("label", [st("ok", visual), "--method-label", "a b"], "method label must be 1 to 64 letters"),
    ]


def test_bad_checkpoints_get_one_sentence(clip_store, tmp_path, capsys):
    _, runs = clip_store
    ckpts = tmp_path / "ckpts"
    ckpts.mkdir()
    store = Store(tmp_path / "store")
    cases = _bad_cases(ckpts, runs["digits"][1])
    capsys.readouterr()
    for name, args, needle in cases:
        code = main(["import", "--model", "tiny-clip", "--task", "digits", *args, "--store", str(store.root)])
        _one_sentence(capsys, code, needle)
        assert _files(store.root) == [], name
    code = main(["import", "--model", "tiny-clip", "--task", "tweets", str(ckpts / "ok.safetensors"),
                 "--store", str(store.root)])
    _one_sentence(capsys, code, "model 'tiny-clip' takes image inputs but task 'tweets' is a text task")
    code = main(["import", "--model", "tiny-clip", str(ckpts / "ok.safetensors")])
    _one_sentence(capsys, code, "talos import needs --task")
    assert _files(store.root) == []


def test_manifest_imports_many_or_nothing(clip_store, tmp_path, capsys):
    _, runs = clip_store
    for task, (_, model) in runs.items():
        save_file({k: v.contiguous() for k, v in model.visual.state_dict().items()},
                  str(tmp_path / f"{task}.safetensors"))
    good = [{"model": "tiny-clip", "task": t, "path": f"{t}.safetensors", "label": "batch"} for t in runs]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([*good, {"model": "tiny-clip", "task": "digits", "path": "missing.pt"}]))
    store = Store(tmp_path / "store")
    code = main(["import", "--manifest", str(bad), "--store", str(store.root)])
    _one_sentence(capsys, code, "entry 3 (")
    assert _files(store.root) == []
    (tmp_path / "ok.csv").write_text("model,task,path,label\n" + "".join(
        f"{g['model']},{g['task']},{g['path']},{g['label']}\n" for g in good))
    assert main(["import", "--manifest", str(tmp_path / "ok.csv"), "--store", str(store.root)]) == 0
    assert capsys.readouterr().out.count("imported run ") == 2
    assert {r.manifest.task for r in store.find_runs(method="imported")} == set(runs)
    assert [r.label for r in read_import_manifest(tmp_path / "ok.csv")] == ["batch", "batch"]
    (tmp_path / "typo.json").write_text(json.dumps([{"modle": "tiny-clip"}]))
    code = main(["import", "--manifest", str(tmp_path / "typo.json"), "--store", str(store.root)])
    _one_sentence(capsys, code, "entry 1 of import manifest")
    code = main(["import", "--manifest", str(bad), "--model", "tiny-clip", "--store", str(store.root)])
    _one_sentence(capsys, code, "drop --model")


def test_default_label_and_request_checks(tmp_path):
    assert default_label("/x/clip-vit-base-patch32_sun397/") == "clip-vit-base-patch32_sun397"
    assert default_label("/x/sun397/pytorch_model.bin") == "sun397"
    assert default_label("weird name (1).pt") == "weird-name--1"
    with pytest.raises(TalosError, match="unknown model 'nope'"):
        import_checkpoint(ImportRequest("nope", "digits", str(tmp_path)), Store(tmp_path / "s"))
    assert not (tmp_path / "s").exists()


def test_openai_clip_weights_are_built_with_quick_gelu(monkeypatch):
    """OpenAI's CLIP weights were trained with QuickGELU: ``load_clip`` builds their architecture with it (open_clip's
    plain ``ViT-B-32`` config uses GELU and only warns); random init and other tags keep the config's activation."""
    import open_clip

    from talos_core.models import clip as C

    assert C.quick_gelu_weights("ViT-B-32", "openai") and C.quick_gelu_weights("ViT-L-14", "openai")
    assert not C.quick_gelu_weights("ViT-B-32", None)
    seen = {}

    def fake_create(arch, pretrained=None, force_quick_gelu=False):
        seen["quick"] = force_quick_gelu
        return open_clip.model.CLIP(**C.TINY_CLIP_CONFIG, quick_gelu=force_quick_gelu)

    monkeypatch.setattr(open_clip, "create_model", fake_create)
    model = C.load_clip("ViT-B-32", "openai")
    assert seen["quick"] is True and model.model_cfg["quick_gelu"] is True
