"""Evaluation precision: resolution rules, bf16 evaluation close to fp32, memo keys, CLI and suite records."""

from __future__ import annotations

import pytest
import torch

from talos_core.errors import TalosError
from talos_core.inference import precision as P


def test_resolution_rules(monkeypatch):
    monkeypatch.delenv(P.ENV_VAR, raising=False)
    assert P.current_precision() == "auto"
    text = "text-encoder"
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)
    assert P.native_bf16("cpu") and P.resolve_precision("cpu", family=text) == "bf16"
    # on AMX CPUs auto picks bf16 only for families measured faster in it (CLIP ViT was slower)
    assert P.resolve_precision("cpu", family="clip") == "fp32" and P.resolve_precision("cpu") == "fp32"
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    assert not P.native_bf16("cpu") and P.resolve_precision("cpu", family=text) == "fp32"
    assert P.native_bf16("cuda") and P.resolve_precision("cuda", family="clip") == "bf16"
    assert P.resolve_precision("cpu", "bf16") == "bf16" and P.resolve_precision("cuda", "fp32") == "fp32"

    monkeypatch.setenv(P.ENV_VAR, "bf16")
    assert P.resolve_precision("cpu", family="clip") == "bf16"
    with P.eval_precision("fp32"):  # an explicit block wins over the environment
        assert P.resolve_precision("cpu", family=text) == "fp32"
        with P.eval_precision(None):  # None keeps the enclosing choice
            assert P.current_precision() == "fp32"
    assert P.current_precision() == "bf16"  # restored on exit

    monkeypatch.setenv(P.ENV_VAR, "half")
    with pytest.raises(TalosError, match="TALOS_EVAL_PRECISION must be one of auto, fp32, bf16, got 'half'"):
        P.current_precision()
    with pytest.raises(TalosError, match="evaluation precision must be one of auto, fp32, bf16, got 'fp16'"), \
            P.eval_precision("fp16"):
        pass


def test_bf16_evaluation_is_close_to_fp32(tiny_setup):
    from talos_core.inference.forward import base_and_jvps, predict_logits
    from talos_core.vectors import TaskVector

    model, task, data = tiny_setup["tiny-text"]
    g = torch.Generator().manual_seed(0)
    params = dict(model.named_parameters())
    tv = TaskVector.from_entries({n: torch.randn(p.shape, generator=g) * 1e-3 for n, p in params.items()},
                                 {n: None for n in params}, {n: tuple(p.shape) for n, p in params.items()})
    before = {n: p.detach().clone() for n, p in params.items()}
    out = {}
    for prec in ("fp32", "bf16"):
        with P.eval_precision(prec):
            out[prec] = (predict_logits(model, task, data.test, [(tv, 0.5)]),
                         *base_and_jvps(model, task, data.test, [tv]))
    for a, b in zip(out["fp32"][:2], out["bf16"][:2]):
        assert b.dtype == torch.float32 and b.shape == a.shape  # logits come back as fp32
        assert not torch.equal(a, b)  # bf16 really ran
        assert torch.allclose(a, b, atol=0.05 * float(a.abs().max()) + 1e-3)
    jf, jb = out["fp32"][2][0], out["bf16"][2][0]
    assert torch.allclose(jf, jb, atol=0.05 * float(jf.abs().max()) + 1e-4)
    for n, p in model.named_parameters():  # weights stay fp32 and are restored bitwise
        assert p.dtype == torch.float32 and torch.equal(p.detach(), before[n])


def test_zero_shot_memo_is_per_precision(monkeypatch):
    from talos_core.inference import runtime as C

    C.clear_zero_shot_memo()
    calls = []

    def compute():
        calls.append(P.resolve_precision("cpu"))
        return 0.5

    key = dict(model="m", device="cpu", max_val=4, max_test=4, batch_size=8, task="t", split="test")
    for prec in ("fp32", "fp32", "bf16", "bf16"):
        with P.eval_precision(prec):
            assert C.memoized_zero_shot(compute, precision=P.resolve_precision("cpu"), **key) == 0.5
    assert calls == ["fp32", "bf16"]
    C.clear_zero_shot_memo()


def test_cli_flag_and_run_manifest(tmp_path, capsys):
    from talos_core.cli import main
    from talos_core.store import Store

    base = ["finetune", "--model", "tiny-text", "--task", "drug-reviews", "--method", "nonlinear", "--steps", "2",
            "--max-train", "16", "--max-val", "8", "--max-test", "8", "--store", str(tmp_path), "--quiet"]
    with pytest.raises(SystemExit) as exc:
        main([*base, "--eval-precision", "fp16"])
    assert exc.value.code == 2
    assert "invalid choice: 'fp16'" in capsys.readouterr().err
    assert main([*base, "--eval-precision", "bf16"]) == 0
    (run,) = Store(tmp_path).find_runs(model="tiny-text")
    assert run.manifest.metrics["eval_precision"] == "bf16"
    assert P.current_precision() == "fp32"  # the CLI's block ended with the command


def test_suites_pin_or_record_their_precision():
    from talos_core.suites import SUITES

    assert all(sc.eval_precision == "fp32" for sc in SUITES["vision"].scales.values())  # shipped in fp32
    assert SUITES["tiny"].scales["mini"].eval_precision == "fp32"  # reproduced exactly on any CPU
    assert all(sc.eval_precision in P.PRECISIONS for s in SUITES.values() for sc in s.scales.values())


def test_per_model_tables_written_before_precision_was_recorded_count_as_fp32():
    from talos_core.evaluation.request import same_data as _same_data

    old = {"max_val": 8, "max_test": 8}
    assert _same_data(old, {**old, "eval_precision": "fp32"})
    assert not _same_data(old, {**old, "eval_precision": "bf16"})
    assert not _same_data({**old, "eval_precision": "bf16"}, {**old, "eval_precision": "fp32"})
    assert _same_data(None, {**old, "eval_precision": "bf16"})


# --------------------------------------------------------------------------------------------
# training precision
# --------------------------------------------------------------------------------------------
def test_train_precision_resolution_rules(monkeypatch):
    monkeypatch.delenv(P.TRAIN_ENV_VAR, raising=False)
    assert P.requested_train_precision() == "auto"
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)
    # auto on a CPU: bf16 only with AMX and for a family measured faster in bf16 training
    assert P.resolve_train_precision("cpu", family="text-encoder") == ("bf16" if "text-encoder" in
                                                                       P.CPU_TRAIN_BF16_FAMILIES else "fp32")
    monkeypatch.setattr(P, "CPU_TRAIN_BF16_FAMILIES", frozenset({"text-encoder"}))
    assert P.resolve_train_precision("cpu", family="text-encoder") == "bf16"
    assert P.resolve_train_precision("cpu", family="clip") == "fp32"
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    assert P.resolve_train_precision("cpu", family="text-encoder") == "fp32"  # without AMX training stays fp32
    assert P.resolve_train_precision("cuda", family="clip") == "bf16"  # GPUs: bf16, as always
    assert P.resolve_train_precision("cuda", "fp32") == "fp32" and P.resolve_train_precision("cpu", "bf16") == "bf16"
    # innermost first: an explicit setting, then the environment, then auto
    monkeypatch.setenv(P.TRAIN_ENV_VAR, "bf16")
    assert P.resolve_train_precision("cpu") == "bf16" and P.resolve_train_precision("cpu", "fp32") == "fp32"
    assert P.resolve_train_precision("cpu", "auto") == "fp32"  # an explicit auto ignores the environment
    monkeypatch.setenv(P.TRAIN_ENV_VAR, "half")
    with pytest.raises(TalosError, match="TALOS_TRAIN_PRECISION must be one of auto, fp32, bf16, got 'half'"):
        P.resolve_train_precision("cpu")
    with pytest.raises(TalosError, match="training precision must be one of auto, fp32, bf16, got 'fp16'"):
        P.resolve_train_precision("cpu", "fp16")
    # what a run id hashes: "auto" where the resolved precision is what auto always meant
    assert [P.hashed_train_precision(d, p) for d in ("cpu", "cuda") for p in ("fp32", "bf16")] == \
        ["auto", "bf16", "fp32", "auto"]


def test_train_precision_in_run_identity(monkeypatch):
    from talos_core.pipeline import FinetuneRequest

    monkeypatch.delenv(P.TRAIN_ENV_VAR, raising=False)
    # the tiny suite's nonlinear run on drug-reviews: its id from before training precision could be chosen
    tiny = dict(model="tiny-text", task="drug-reviews", method="nonlinear", steps=4, max_train=64, max_val=16,
                max_test=24, calib_samples=8, batch_size=8, lr=1e-3, device="cpu")
    legacy_id = "tiny-text__drug-reviews__nonlinear__ae096dbe59"
    for given in (None, "auto", "fp32"):
        req = FinetuneRequest.from_flat(**tiny, train_precision=given)
        assert req.train_config().precision == "fp32" and req.config_dict()["train"]["precision"] == "auto"
        assert req.run_id() == legacy_id
    # a learning curve is not part of the id
    assert FinetuneRequest.from_flat(**tiny, eval_every=2).run_id() == legacy_id
    bf16 = FinetuneRequest.from_flat(**tiny, train_precision="bf16")
    assert bf16.train_config().precision == "bf16" and bf16.config_dict()["train"]["precision"] == "bf16"
    assert bf16.run_id() != legacy_id
    monkeypatch.setenv(P.TRAIN_ENV_VAR, "bf16")
    assert FinetuneRequest.from_flat(**tiny).run_id() == bf16.run_id()
    # on a GPU (no GPU needed: the id is computed without touching it) bf16 is the old auto, fp32 is new
    gpu = {**tiny, "device": "cuda"}
    assert FinetuneRequest.from_flat(**gpu, train_precision="bf16").config_dict()["train"]["precision"] == "auto"
    assert FinetuneRequest.from_flat(**gpu, train_precision="fp32").config_dict()["train"]["precision"] == "fp32"
    with pytest.raises(TalosError, match="training precision must be one of auto, fp32, bf16, got 'fp16'"):
        FinetuneRequest.from_flat(**tiny, train_precision="fp16").validate()


def test_bf16_training_keeps_fp32_master_weights(tiny_setup):
    from talos_core.training import TrainConfig, finetune

    model, task, data = tiny_setup["tiny-text"]
    plan = {n: None for n, _ in model.named_parameters()}
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    out = {}
    for prec in ("fp32", "bf16"):
        cfg = TrainConfig(steps=3, batch_size=8, lr=1e-3, warmup_steps=0, precision=prec)
        out[prec] = finetune(model, data.train, task, plan, cfg, progress=False)
        assert out[prec].precision == prec
    for n, p in model.named_parameters():  # fp32 parameters, restored to θ0 bitwise
        assert p.dtype == torch.float32 and torch.equal(p.detach(), before[n])
    a, b = out["fp32"].vector, out["bf16"].vector
    assert all(v.dtype == torch.float32 for v in b.values.values())
    assert not all(torch.equal(a.values[n], b.values[n]) for n in a.values)  # bf16 really ran
    diff = sum(float((a.values[n] - b.values[n]).pow(2).sum()) for n in a.values) ** 0.5
    assert diff < 0.5 * a.norm()  # the same training, rounded products


def test_cli_train_precision_and_manifest(tmp_path, capsys, monkeypatch):
    from talos_core.cli import main
    from talos_core.store import Store

    monkeypatch.delenv(P.TRAIN_ENV_VAR, raising=False)
    base = ["finetune", "--model", "tiny-text", "--task", "drug-reviews", "--method", "nonlinear", "--steps", "2",
            "--max-train", "16", "--max-val", "8", "--max-test", "8", "--store", str(tmp_path), "--quiet",
            "--device", "cpu"]
    with pytest.raises(SystemExit) as exc:
        main([*base, "--train-precision", "fp16"])
    assert exc.value.code == 2
    assert "invalid choice: 'fp16'" in capsys.readouterr().err
    assert main(base) == 0 and main([*base, "--train-precision", "bf16", "--eval-every", "1"]) == 0
    runs = {r.manifest.train_precision: r for r in Store(tmp_path).find_runs(model="tiny-text")}
    assert set(runs) == {"fp32", "bf16"}
    assert runs["fp32"].manifest.config["train"]["precision"] == "auto"  # the id of an fp32 CPU run is unchanged
    assert runs["bf16"].manifest.config["train"]["precision"] == "bf16"
    assert runs["bf16"].manifest.request["train_precision"] == "bf16"
    assert [c["step"] for c in runs["bf16"].manifest.curve] == [1, 2] and runs["fp32"].manifest.curve == []
    for run in runs.values():  # appended at the end, written by every new run
        assert list(run.manifest.to_dict())[-2:] == ["train_precision", "curve"]


def test_suite_scale_train_precision_reaches_the_runs():
    from dataclasses import replace

    from talos_core.suites import SUITES, SuiteSpec, suite_steps

    assert all(sc.train_precision in (None, *P.PRECISIONS) for s in SUITES.values() for sc in s.scales.values())
    sc = SUITES["tiny"].scales["mini"]
    # tiny: auto trains in fp32 on every CPU (no CPU family is in CPU_TRAIN_BF16_FAMILIES yet); pin it if one is
    assert sc.train_precision == "fp32" or "text-encoder" not in P.CPU_TRAIN_BF16_FAMILIES
    spec = SuiteSpec("x", "tiny-text", ("drug-reviews",), "fortune-langs", ("talos",), (), (),
                     {"mini": replace(sc, train_precision="bf16")})
    steps = suite_steps(spec, "mini", ["talos"], [], seed=0, device="cpu")
    assert all(st.overrides.get("train_precision") == "bf16" for st in steps if st.overrides)
    assert all("train_precision" not in st.overrides for st in suite_steps(SUITES["tiny"], "mini", ["talos"], [],
                                                                            seed=0, device="cpu"))
