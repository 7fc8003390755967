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
    with pytest.raises(TalosError, match="evaluation precision must be one of auto, fp32, bf16, got 'fp16'"):
        with P.eval_precision("fp16"):
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
