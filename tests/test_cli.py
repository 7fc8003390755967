"""`talos` CLI: listings, end-to-end fine-tuning on the tiny families, and clear errors."""

from __future__ import annotations

import pytest
import torch

from talos_core.cli import main
from talos_core.store import Store


def test_listings(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "tiny-clip" in out and "minilm-l6" in out and "clip-vit-b-32" in out
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    assert "digits" in out and "wordnet-nouns" in out and "qasc" in out


@pytest.mark.parametrize("argv,needle", [
    (["--model", "vit-z", "--task", "digits"], "unknown model 'vit-z'"),
    (["--model", "tiny-clip", "--task", "nope"], "unknown task 'nope'"),
    (["--model", "tiny-clip", "--task", "digits", "--method", "magic"], "unknown method 'magic'"),
    (["--model", "tiny-clip", "--task", "digits", "--sparsity", "1.0"], "sparsity must be in [0, 1)"),
    (["--model", "tiny-clip", "--task", "digits", "--sparsity", "-0.5"], "sparsity must be in [0, 1)"),
    (["--model", "tiny-clip", "--task", "digits", "--device", "tpu"], "device must be"),
])
def test_errors_are_one_line(argv, needle, capsys, tmp_path):
    code = main(["finetune", *argv, "--store", str(tmp_path), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_bad_number_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["finetune", "--model", "tiny-clip", "--task", "digits", "--steps", "zero"])
    assert exc.value.code == 2
    assert "expected a positive integer" in capsys.readouterr().err


@pytest.mark.parametrize("model,task", [("tiny-clip", "digits"), ("tiny-text", "drug-reviews"),
                                        ("tiny-t5", "drug-reviews")])
def test_finetune_talos_end_to_end(model, task, tmp_path, capsys):
    argv = ["finetune", "--model", model, "--task", task, "--method", "talos", "--sparsity", "0.9",
            "--store", str(tmp_path), "--quiet", "--steps", "8", "--max-train", "128", "--max-test", "64",
            "--calib-samples", "32"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "fine-tuned test acc" in out
    (run,) = list(Store(tmp_path).runs())
    m = run.manifest
    assert abs(m.metrics["mask_density"] - 0.1) <= 0.005
    mask, tv = run.mask(), run.task_vector()
    for n in tv.values:
        assert torch.count_nonzero(tv.dense(n)[~mask[n]]) == 0
    assert set(tv.values) <= set(mask)
    assert m.model == model and m.task == task and m.seed == 0
    assert m.timings["calibration_s"] > 0 and m.versions
    # the same request is served from the store without re-training
    assert main(argv) == 0
    assert len(list(Store(tmp_path).runs())) == 1


def test_a_closed_pipe_ends_the_command_quietly():
    """``talos report ... | head``: the reader goes away before the table is written; the command stops without an
    error line or traceback (exit 141, as a shell reports SIGPIPE)."""
    import subprocess
    import sys
    from pathlib import Path

    shipped = Path(__file__).resolve().parents[1] / "cached_results"
    proc = subprocess.Popen([sys.executable, "-m", "talos_core.cli", "report", "tiny", "--store", str(shipped)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # before the command has written anything (it imports torch first)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141 and err == "", err
