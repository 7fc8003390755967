"""``talos merge``: the edited model θ0 + Σ α τ (− α τ_c) written as a standard checkpoint and loaded back with the
model's own library (transformers AutoModel, open_clip) — its logits through the same frozen head equal the in-store
evaluation's (:func:`talos_core.inference.forward.predict_logits`); plus the model card, checksums, atomic writes and
one-sentence errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from test_dashboard import open_negation_tab

from talos_core.cli import main
from talos_core.errors import TalosError
from talos_core.export_model import (
    MergeRequest,
    export_merge,
    model_card,
    parse_alphas,
    store_accuracies,
    verify_export,
)
from talos_core.store import Store

FAST = dict(steps=3, max_train=32, max_val=16, max_test=16, calib_samples=8, batch_size=8, rounds=1, lr=5e-3)
CASES = {  # model: (added tasks, negated task, method)
    "tiny-text": (("drug-reviews", "tweets"), "wordnet-verbs", "talos"),
    "tiny-clip": (("digits", "mnist"), "fashion-mnist", "talos"),
    "minilm-l6": (("tweets",), "drug-reviews", "nonlinear"),
    "efficientnet-lite0": (("digits",), "mnist", "talos"),
}


class _Stores(dict):
    """``stores[model]``: a store with tiny fine-tuned runs of every task of ``CASES[model]``, made on first use."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def __missing__(self, model: str) -> Store:
        from talos_core.evaluation.runs import resolve_runs

        tasks, neg, method = CASES[model]
        st = Store(self.root / model)
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            resolve_runs(st, model, [*tasks, neg], method, overrides=FAST)
        finally:
            torch.set_num_threads(before)
        self[model] = st
        return st


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    return _Stores(tmp_path_factory.mktemp("merge-stores"))


def _edited_logits(model_name: str, store: Store, req: MergeRequest, task: str, n: int = 8):
    """The in-store evaluation's logits of θ0 + Σ α τ on ``task``'s first test examples, and those examples."""
    from talos_core.inference.forward import predict_logits
    from talos_core.models import load_model
    from talos_core.tasks import get_task, load_task

    model = load_model(model_name)
    spec = get_task(task)
    model.set_head(model.build_head(spec), spec.name)
    split = load_task(task, max_train=8, max_val=8, max_test=n).test
    runs = {t: store.find_runs(model=model_name, task=t, method=req.method)[0] for t, _ in req.terms()}
    terms = [(runs[t].task_vector(), a) for t, a in req.terms()]
    return predict_logits(model, spec, split, terms), split, model


def _head(out: Path, task: str) -> torch.Tensor:
    from safetensors.torch import load_file

    return load_file(str(out / "heads" / f"{task}.safetensors"))["weight"]


def _sentence_logits(out: Path, encoder, tokenizer, task: str, split) -> torch.Tensor:
    """Logits of an exported sentence encoder (plain transformers: mean-pool, normalize) through ``task``'s head."""
    max_len = json.loads((out / "sentence_bert_config.json").read_text())["max_seq_length"]
    enc = tokenizer(list(split.inputs), padding=True, truncation=True, max_length=max_len, return_tensors="pt")
    with torch.no_grad():
        hidden = encoder(**enc).last_hidden_state
    m = enc["attention_mask"].unsqueeze(-1).float()
    return F.normalize((hidden * m).sum(1) / m.sum(1).clamp_min(1.0), dim=-1) @ _head(out, task).T


@pytest.mark.parametrize("model_name", ["tiny-text", pytest.param("minilm-l6", marks=pytest.mark.slow)])
def test_sentence_encoder_round_trip_with_transformers(model_name, stores, tmp_path):
    from transformers import AutoModel, AutoTokenizer

    tasks, neg, method = CASES[model_name]
    req = MergeRequest(model_name, tasks, method, parse_alphas("0.7", tasks, [neg]), negate=(neg,))
    out = tmp_path / "export"
    res = export_merge(stores[model_name].root, req, out)
    assert res.out == out and verify_export(out) == []
    encoder = AutoModel.from_pretrained(str(out)).eval()  # plain transformers, nothing of TaLoS Studio
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    for task in (tasks[0], neg):
        want, split, _ = _edited_logits(model_name, stores[model_name], req, task)
        got = _sentence_logits(out, encoder, tokenizer, task, split)
        torch.testing.assert_close(got, want, atol=2e-4, rtol=1e-4)
    # the edit moved the model: θ0's logits differ
    _, split, _base = _edited_logits(model_name, stores[model_name], MergeRequest(model_name, tasks, method,
                                                                               {t: 0.0 for t in tasks}), tasks[0])
    assert (out / "modules.json").is_file() and (out / "1_Pooling" / "config.json").is_file()
    if model_name == "minilm-l6":  # the pooler (unused by mean pooling) is written back: a complete checkpoint
        from safetensors import safe_open

        with safe_open(str(out / "model.safetensors"), framework="pt") as fh:
            assert any("pooler" in k for k in fh.keys())  # noqa: SIM118 - safe_open has keys() but no __iter__


def test_posthoc_merge_exports_the_merged_nonlinear_vectors(tmp_path, capsys):
    """``talos merge --method lines`` writes θ0 + α·LiNeS(τ_a, τ_b) of the nonlinear runs; the hyperparameters are
    --hparam's, else the store's addition result's choice."""
    from transformers import AutoModel, AutoTokenizer

    from talos_core.evaluation.runs import resolve_runs
    from talos_core.inference.forward import predict_logits
    from talos_core.methods.posthoc import posthoc_merged
    from talos_core.models import load_model
    from talos_core.tasks import get_task, load_task

    tasks = ("drug-reviews", "tweets")
    st = Store(tmp_path / "store")
    resolve_runs(st, "tiny-text", list(tasks), "nonlinear", overrides=FAST)
    runs = {t: st.find_runs(model="tiny-text", task=t, method="nonlinear")[0] for t in tasks}
    st.write_table("addition", "mine__tiny-text__lines", __import__("pandas").DataFrame(
        [dict(alpha=0.8, split="test", task=t, accuracy=0.61, normalized_accuracy=0.9) for t in tasks]),
        selected_alpha=0.8, alpha_grid=[0.8], tasks=list(tasks), runs={t: r.id for t, r in runs.items()},
        model="tiny-text", method="lines", hyperparameters={"beta": 0.3})
    base = ["merge", "--model", "tiny-text", "--tasks", ",".join(tasks), "--method", "lines", "--alpha", "0.8",
            "--store", str(st.root)]
    out = tmp_path / "lines"
    assert main([*base, "--out", str(out)]) == 0
    meta = json.loads((out / "talos_merge.json").read_text())
    # the stored result predates LiNeS's `nonblock` option: it is merged as it was computed (nearest block)
    assert meta["hyperparameters"] == {"beta": 0.3, "nonblock": "nearest"} and meta["run_method"] == "nonlinear"
    assert meta["runs"] == {t: r.id for t, r in runs.items()} and meta["accuracies"]  # the store's mix
    assert "lines(τ_drug-reviews, τ_tweets)" in (out / "README.md").read_text()
    merged = posthoc_merged("lines", {t: r.task_vector() for t, r in runs.items()}, beta=0.3, nonblock="nearest")
    model, spec = load_model("tiny-text"), get_task(tasks[1])
    model.set_head(model.build_head(spec), spec.name)
    split = load_task(tasks[1], max_train=8, max_val=8, max_test=8).test
    want = predict_logits(model, spec, split, [(merged, 0.8)])
    got = _sentence_logits(out, AutoModel.from_pretrained(str(out)).eval(), AutoTokenizer.from_pretrained(str(out)),
                           tasks[1], split)
    torch.testing.assert_close(got, want, atol=2e-4, rtol=1e-4)
    other = tmp_path / "other"  # other hyperparameters: another model, and not the store's evaluated mix
    assert main([*base, "--hparam", "beta=1.0", "--out", str(other)]) == 0
    meta = json.loads((other / "talos_merge.json").read_text())
    assert meta["hyperparameters"] == {"beta": 1.0} and meta["accuracies"] == []
    # the dashboard's "export this mix" of the post-hoc result: its runs and its chosen hyperparameters
    from dashboard.export import plan_mix_export, run_mix_export

    plan = plan_mix_export(st.root, tmp_path / "dest", "addition", "mine__tiny-text__lines", {t: 0.8 for t in tasks})
    assert plan.request.hyperparameters == {"beta": 0.3, "nonblock": "nearest"} and plan.run_ids == meta["runs"]
    assert run_mix_export(plan).accuracies and plan.done
    with pytest.raises(TalosError, match="one α"):
        plan_mix_export(st.root, tmp_path / "dest", "addition", "mine__tiny-text__lines", {tasks[0]: 0.8, tasks[1]: 1})


def test_clip_round_trip_with_open_clip(stores, tmp_path):
    import open_clip
    from safetensors.torch import load_file

    tasks, neg, method = CASES["tiny-clip"]
    req = MergeRequest("tiny-clip", tasks, method, {tasks[0]: 0.5, tasks[1]: 0.8, neg: 0.3}, negate=(neg,))
    out = tmp_path / "clip"
    export_merge(stores["tiny-clip"].root, req, out)
    cfg = json.loads((out / "open_clip_config.json").read_text())
    clip, _, _ = open_clip.create_model_and_transforms(f"local-dir:{out}")  # open_clip's own folder loader
    clip2 = open_clip.model.CLIP(**cfg["model_cfg"])
    clip2.load_state_dict(load_file(str(out / "open_clip_model.safetensors")))  # and the plain state dict route
    for task in (tasks[1], neg):
        want, split, ours = _edited_logits("tiny-clip", stores["tiny-clip"], req, task)
        pixels = ours.prepare(split.inputs)["pixel_values"]
        for m in (clip.eval(), clip2.eval()):
            with torch.no_grad():
                got = F.normalize(m.encode_image(pixels), dim=-1) @ _head(out, task).T
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    # the text tower is the pre-trained one: heads built from the export equal the stored heads
    assert torch.equal(load_file(str(out / "open_clip_model.safetensors"))["logit_scale"],
                       ours._text["clip"].logit_scale.detach())


@pytest.mark.slow
def test_cnn_round_trip_with_timm(stores, tmp_path):
    import timm
    from safetensors.torch import load_file

    tasks, neg, method = CASES["efficientnet-lite0"]
    req = MergeRequest("efficientnet-lite0", tasks, method, {tasks[0]: 1.0, neg: 0.5}, negate=(neg,))
    out = tmp_path / "cnn"
    export_merge(stores["efficientnet-lite0"].root, req, out)
    cfg = json.loads((out / "config.json").read_text())
    net = timm.create_model(cfg["architecture"], pretrained=False, num_classes=0).eval()
    net.load_state_dict(load_file(str(out / "model.safetensors")))
    head = load_file(str(out / "heads" / f"{neg}.safetensors"))
    want, split, ours = _edited_logits("efficientnet-lite0", stores["efficientnet-lite0"], req, neg)
    with torch.no_grad():
        got = net(ours.prepare(split.inputs)["pixel_values"]) @ head["weight"].T + head["bias"]
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_card_checksums_and_metadata(stores, tmp_path):
    tasks, neg, method = CASES["tiny-text"]
    out = tmp_path / "m"
    code = main(["merge", "--model", "tiny-text", "--tasks", ",".join(tasks), "--negate", neg, "--method", method,
                 "--alpha", "0.6", "--store", str(stores["tiny-text"].root), "--out", str(out)])
    assert code == 0
    meta = json.loads((out / "talos_merge.json").read_text())
    assert meta["alphas"] == {tasks[0]: 0.6, tasks[1]: 0.6, neg: 0.6}
    assert meta["terms"] == [[tasks[0], 0.6], [tasks[1], 0.6], [neg, -0.6]]
    card = (out / "README.md").read_text()
    assert "tiny-text" in card and "TaLoS" in card and "no evaluation of exactly this mix" in card
    assert "1/(1 − k)" in card
    sums = (out / "SHA256SUMS").read_text().splitlines()
    listed = {line.split("  ", 1)[1] for line in sums}
    assert {"model.safetensors", "config.json", "README.md", "talos_merge.json", f"heads/{neg}.safetensors"} <= listed
    (out / "README.md").write_text("tampered")
    assert verify_export(out) == ["README.md"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_card_reports_store_accuracies_for_the_evaluated_mix(stores, tmp_path):
    from talos_core.evaluation.protocols import AdditionSettings, evaluate  # noqa: F401

    tasks, _neg, method = CASES["tiny-text"]
    st = stores["tiny-text"]
    runs = {t: st.find_runs(model="tiny-text", task=t, method=method)[0].id for t in tasks}
    st.write_table("addition", "mine__tiny-text__talos", __import__("pandas").DataFrame(
        [dict(alpha=a, split=s, task=t, accuracy=0.5 + a / 100, normalized_accuracy=0.9)
         for a in (0.0, 2.5) for s in ("val", "test") for t in tasks]),
        selected_alpha=2.5, alpha_grid=[0.0, 2.5], tasks=list(tasks), runs=runs, model="tiny-text", method=method)
    req = MergeRequest("tiny-text", tasks, method, {t: 2.5 for t in tasks})
    rows = store_accuracies(st.root, req, runs)
    assert {(r["split"], r["task"]) for r in rows} == {(s, t) for s in ("val", "test") for t in tasks}
    assert all(abs(r["accuracy"] - 0.525) < 1e-12 for r in rows)
    assert store_accuracies(st.root, MergeRequest("tiny-text", tasks, method, {t: 1.0 for t in tasks}), runs) == []
    other = {t: "x" for t in tasks}  # other runs: not this mix
    assert store_accuracies(st.root, req, other) == []
    card = model_card(req, "text-encoder", {}, rows, [{"source": "addition/x", "alpha": 2.5}], "AutoModel")
    assert "52.50" in card and "selected on validation" in card


@pytest.mark.parametrize("argv, needle", [
    (["--tasks", "drug-reviews", "--method", "linearized"], "linearized model"),
    (["--tasks", "drug-reviews", "--negate", "tweets", "--method", "ties"], "task addition (--tasks) only"),
    (["--tasks", "drug-reviews,tweets", "--method", "tsv", "--alpha", "drug-reviews=1,tweets=0.5"], "one α"),
    (["--tasks", "drug-reviews", "--hparam", "beta=0.5"], "post-hoc method's"),
    (["--tasks", "drug-reviews", "--method", "lines"], "no 'nonlinear' run of 'tiny-text' on 'drug-reviews'"),
    (["--tasks", "drug-reviews", "--method", "nope"], "unknown method 'nope'"),
    (["--tasks", "no-such-task"], "unknown task 'no-such-task'"),
    (["--tasks", "drug-reviews", "--negate", "drug-reviews"], "named twice"),
    (["--tasks", "fortune-topics"], "no 'talos' run of 'tiny-text' on 'fortune-topics'"),
    ([], "nothing to merge"),
    (["--tasks", "drug-reviews", "--alpha", "-1"], "must be in [0, 1000], got -1.0"),
    (["--tasks", "drug-reviews", "--alpha", "tweets=1"], "not among the merged tasks"),
])
def test_bad_input_is_one_sentence_and_writes_nothing(argv, needle, stores, tmp_path, capsys):
    out = tmp_path / "never"
    args = ["merge", "--model", "tiny-text", "--store", str(stores["tiny-text"].root), "--out", str(out)]
    if "--alpha" not in argv:
        args += ["--alpha", "0.5"]
    assert main(args + argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and needle in err and "\n" not in err and "Traceback" not in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_run_kept_without_its_weights_is_named_as_such(stores, tmp_path, capsys):
    import shutil

    bare = tmp_path / "bare"  # the store as JSON only (cached_results/, a snapshot): manifests, no task vectors
    shutil.copytree(stores["tiny-text"].root, bare, ignore=shutil.ignore_patterns("*.safetensors"))
    out = tmp_path / "never"
    assert main(["merge", "--model", "tiny-text", "--store", str(bare), "--out", str(out), "--tasks", "drug-reviews",
                 "--alpha", "0.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert "has no task vector (a manifest exported without its weights" in err and "\n" not in err
    assert not out.exists()


def test_existing_out_is_refused(stores, tmp_path, capsys):
    out = tmp_path / "full"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    args = ["merge", "--model", "tiny-text", "--tasks", "drug-reviews", "--alpha", "0.5",
            "--store", str(stores["tiny-text"].root), "--out", str(out)]
    assert main(args) == 2
    assert "already exists and is not an empty folder" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([*args[:-1], str(empty)]) == 0 and (empty / "SHA256SUMS").is_file()


def test_parse_alphas_errors():
    with pytest.raises(TalosError, match="no coefficient for b"):
        parse_alphas("a=1", ["a", "b"])
    with pytest.raises(TalosError, match="twice"):
        parse_alphas("a=1,a=2", ["a"])
    with pytest.raises(TalosError, match="must be a number"):
        parse_alphas("x", ["a"])


# --------------------------------------------------------------------------------------------
# the Arithmetic page's "export this mix" (AppTest)
# --------------------------------------------------------------------------------------------
def _arith_store(stores) -> Path:
    """The tiny-text store with an addition and a negation result over its runs (α grid {0, 0.5, 1})."""
    import pandas as pd

    tasks, neg, method = CASES["tiny-text"]
    st = stores["tiny-text"]
    runs = {t: st.find_runs(model="tiny-text", task=t, method=method)[0].id for t in (*tasks, neg)}
    grid = [0.0, 0.5, 1.0]
    st.write_table("addition", "app__tiny-text__talos", pd.DataFrame(
        [dict(alpha=a, split=s, task=t, accuracy=0.4 + a / 10, normalized_accuracy=0.8 + a / 10)
         for a in grid for s in ("val", "test") for t in tasks]),
        selected_alpha=0.5, alpha_grid=grid, tasks=list(tasks), runs={t: runs[t] for t in tasks},
        summary={"abs_acc": 0.45, "norm_acc": 0.85}, model="tiny-text", method=method, eval_mode="nonlinear")
    st.write_table("negation", "app__tiny-text__talos", pd.DataFrame(
        [dict(target=t, alpha=a, split=s, target_acc=0.5 - a / 10, control_acc=0.6)
         for t in tasks for a in grid for s in ("val", "test")]),
        control_task=neg, selected={t: 0.5 for t in tasks}, control_zero_shot_acc={"val": 0.6, "test": 0.6},
        summary={"target_acc": 0.45, "control_acc": 0.6}, alpha_grid=grid, runs={t: runs[t] for t in tasks},
        model="tiny-text", method=method, eval_mode="nonlinear")
    return st.root


def _open_arithmetic(monkeypatch, store: Path, **env: str):
    from dashboard_fixtures import REPO
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("TALOS_STORE", str(store))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    at = AppTest.from_file(str(REPO / "dashboard" / "app.py"), default_timeout=300)
    at.query_params["method"] = "talos"
    at.switch_page("app_pages/arithmetic.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_arithmetic_page_exports_the_current_mix(monkeypatch, stores):
    from talos_core.atomic import read_json

    root = _arith_store(stores)
    tasks, _, _ = CASES["tiny-text"]
    at = _open_arithmetic(monkeypatch, root)
    at.slider(key="a.talos").set_value(1.0).run()
    at.button(key="export_addition_talos").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("Wrote" in s.value for s in at.success), [e.value for e in at.error]
    (folder,) = list((root / "exports").iterdir())
    assert verify_export(folder) == []
    meta = read_json(folder / "talos_merge.json")
    assert meta["alphas"] == {t: 1.0 for t in tasks} and meta["negate"] == []
    card = (folder / "README.md").read_text()
    assert "50.00" in card  # the store's accuracy at α = 1 (0.4 + 1/10) for this mix
    # the same mix again: found, not rewritten
    at.button(key="export_addition_talos").click().run()
    assert any("exported before" in i.value for i in at.info)
    assert len(list((root / "exports").iterdir())) == 1
    # negation tab (built once opened): θ0 − α τ_target at its slider
    open_negation_tab(at)
    at.button(key="export_negation_talos").click().run()
    assert any("Wrote" in s.value for s in at.success)
    metas = [read_json(f / "talos_merge.json") for f in (root / "exports").iterdir()]
    assert any(m["negate"] and not m["tasks"] for m in metas)
    assert not (REPO_CACHED / "exports").exists()


REPO_CACHED = Path(__file__).resolve().parents[1] / "cached_results"


def test_arithmetic_export_is_off_in_read_only_mode(monkeypatch, stores):
    root = _arith_store(stores)
    before = sorted((root / "exports").iterdir()) if (root / "exports").exists() else []
    at = _open_arithmetic(monkeypatch, root, TALOS_DASHBOARD_READ_ONLY="1")
    assert not [b for b in at.button if b.key and b.key.startswith("export_")]
    assert any("read-only" in c.value for c in at.caption)
    after = sorted((root / "exports").iterdir()) if (root / "exports").exists() else []
    assert after == before
