"""Property-based fuzzing of the CLI and the store: generated values for every numeric option of every
command, and mutated fields of a tiny store's manifests and results JSON; and the classes a hostile user's probes
found: manifests rewritten consistently (format downgrades, checksums nulled or recomputed, files swapped between
runs or scaled), pathological JSON (nesting, duplicate keys, non-finite numbers, sizes, repeated table rows),
non-finite model outputs, and the dashboard server's environment variables.

Every bad value must be refused with one sentence (exit 2; 1 for ``talos runs`` on a corrupt store), no traceback,
nothing written; every accepted value must be one the documented rules allow, and reach the command unchanged; a
mutated store is either refused (naming the file) or gives exactly the output of the intact one — never a silently
different number. In-process, nothing trains: an accepted value stops where the work would start.

Budget: ``TALOS_FUZZ_EXAMPLES`` examples per property (default 12, derandomized so CI is repeatable); a larger
number also draws new examples each run, e.g. ``TALOS_FUZZ_EXAMPLES=2000 pytest tests/test_fuzz.py``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import types
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from talos_core.cli import main
from talos_core.errors import TalosError
from talos_core.pipeline import MAX_ROUNDS, MAX_STEPS

DEFAULT_EXAMPLES = 12
EXAMPLES = int(os.environ.get("TALOS_FUZZ_EXAMPLES", DEFAULT_EXAMPLES))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES == DEFAULT_EXAMPLES, database=None,
                phases=[Phase.explicit, Phase.generate, Phase.shrink],
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
MODEL, TASK = "tiny-text", "drug-reviews"

#: option values as typed: integers of every size, floats with their specials, and text that is no number
VALUES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.integers(min_value=-3, max_value=70000).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(min_value=-2.0, max_value=2.0).map(repr),
    st.sampled_from(["", " ", "abc", "1e", "0x10", "1_000", "nan", "-inf", "1e308", "-0", "1e-320", " 7 ", "٣"]),
    st.text(max_size=4))


class Accepted(Exception):
    """Raised where the command's work would start: every check has passed."""


# --------------------------------------------------------------------------------------------
# the rules, as the documentation states them (the oracle)
# --------------------------------------------------------------------------------------------
def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def ints(low: int, high: float = math.inf) -> Callable[[str], bool]:
    return lambda t: _int(t) is not None and low <= _int(t) <= high


def floats(low: float, high: float, *, low_open: bool = False, high_open: bool = False) -> Callable[[str], bool]:
    def ok(t: str) -> bool:
        v = _float(t)
        return v is not None and (v > low if low_open else v >= low) and (v < high if high_open else v <= high)
    return ok


ANY_INT = ints(-(2**200))
SEED = ints(0, 2**63 - 1)

#: (option, rule) of the fine-tuning flags; the command runs with TINY, so --batch-size ≤ --max-train 32,
#: --warmup-steps ≤ --steps 2 and --max-train ≥ --batch-size 8
TINY = ["--steps", "2", "--max-train", "32", "--max-val", "16", "--max-test", "16", "--calib-samples", "8",
        "--batch-size", "8", "--quiet"]
RUN_OPTIONS = [("--sparsity", floats(0, 1, high_open=True)), ("--seed", SEED), ("--steps", ints(1, MAX_STEPS)),
               ("--batch-size", ints(1, 32)), ("--lr", floats(0, 1, low_open=True)),
               ("--weight-decay", floats(0, math.inf)), ("--warmup-steps", ints(0, 2)),
               ("--rounds", ints(1, MAX_ROUNDS)),
               ("--calib-samples", ints(1)), ("--soft-mask", floats(0, 1)), ("--max-train", ints(8)),
               ("--max-val", ints(1)), ("--max-test", ints(1)), ("--checkpoint-every", ints(0)),
               ("--eval-every", ints(0))]
#: (protocol, option, rule) of the evaluation settings
EVAL_OPTIONS = [("disentanglement", "--grid", ints(1, 100)),
                ("disentanglement", "--range", floats(0, 1000, low_open=True)),
                ("disentanglement", "--points", ints(1)), ("sharing", "--fraction", floats(0, 1)),
                ("sharing", "--samples", ints(1)), ("preview", "--preview-points", ints(1)),
                ("examples", "--example-points", ints(1, 24)), ("addition", "--alpha-step", floats(0.001, 1)),
                ("posthoc", "--posthoc-points", ints(1)), ("learning-curve", "--tolerance", floats(0, 1)),
                ("addition", "--eval-seed", SEED), ("addition", "--eval-batch-size", ints(1))]
#: (argv before the option, option, rule, where the work starts)
OTHER_OPTIONS = [
    (["merge", "--model", MODEL, "--tasks", TASK], "--alpha", floats(0, 1000), "talos_core.export_model.export_merge"),
    (["merge", "--model", MODEL, "--tasks", TASK, "--alpha", "1"], "--sparsity", floats(0, 1, high_open=True),
     "talos_core.export_model.export_merge"),
    (["dashboard"], "--port", ints(1, 65535), "subprocess.Popen"),
    (["dashboard"], "--max-jobs", ints(0), "subprocess.Popen"),
    (["dashboard"], "--max-steps", ints(0), "subprocess.Popen"),
    (["dashboard"], "--max-examples", ints(0), "subprocess.Popen"),
    (["suite", "tiny"], "--seed", SEED, "talos_core.suites.run._run_suite"),
    (["suite", "tiny"], "--checkpoint-every", ints(0), "talos_core.suites.run._run_suite"),
    (["suite", "tiny", "--executor", "processes"], "--jobs", ints(1), "talos_core.suites.run._run_suite"),
    (["suite", "tiny", "--executor", "ray"], "--gpus-per-task", floats(0, math.inf, low_open=True, high_open=True),
     "talos_core.suites.run._run_suite"),
    (["suite", "tiny", "--executor", "ray"], "--cpus-per-task", floats(0, math.inf, low_open=True, high_open=True),
     "talos_core.suites.run._run_suite"),
    (["examples"], "--points", ints(1, 24), "talos_core.evaluation.examples.examples_from_store"),
    (["examples"], "--seed", SEED, "talos_core.evaluation.examples.examples_from_store"),
]


def _outcome(argv: list[str], capsys) -> tuple[str, str]:
    """``("accepted", "")``, or ``("refused", sentence)`` after checking the refusal's form; any other end of the
    command (a traceback, exit 0 where the work should have started) fails the test."""
    try:
        code = main(argv)
    except Accepted:
        capsys.readouterr()
        return "accepted", ""
    except SystemExit as exc:  # argparse: its usage, then one error line
        err = capsys.readouterr().err
        assert exc.code == 2 and "Traceback" not in err, (argv, err)
        assert err.strip().splitlines()[-1].startswith("usage:") is False and ": error: " in err, (argv, err)
        return "refused", err.strip().splitlines()[-1]
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert code == 2 and "Traceback" not in err, (argv, code, err)
    assert len(lines) == 1 and lines[0].startswith("error: "), (argv, err)
    return "refused", lines[0]


def _check(argv: list[str], value: str, ok: bool, store: Path, capsys) -> None:
    outcome, sentence = _outcome(argv, capsys)
    if outcome == "refused":
        assert not store.exists() or not any(store.rglob("*")), (argv, sorted(store.rglob("*")))
    assert (outcome == "accepted") == ok, (argv, value, outcome, sentence)


@pytest.fixture
def stop_work(monkeypatch):
    """Every place a command's work starts raises :class:`Accepted`."""
    def accepted(*args, **kwargs):
        raise Accepted

    import talos_core.evaluation.protocols as protocols
    import talos_core.pipeline as pipeline

    monkeypatch.setattr(pipeline, "_finetune_and_publish", accepted)
    monkeypatch.setattr(protocols, "evaluate", accepted)
    for target in {t for *_, t in OTHER_OPTIONS}:
        monkeypatch.setattr(target, accepted)
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.setitem(sys.modules, "ray", types.ModuleType("ray"))  # `--executor ray` checks it is installed


def _fresh(tmp_path: Path) -> Path:
    """A store folder no example used before (the folder itself is not created)."""
    n = len(list(tmp_path.iterdir()))
    return tmp_path / f"s{n}"


@pytest.mark.parametrize("option,rule", RUN_OPTIONS, ids=[o for o, _ in RUN_OPTIONS])
def test_fuzz_finetune_options(option, rule, stop_work, tmp_path, capsys):
    @FUZZ
    @given(value=VALUES)
    def run(value):
        store = _fresh(tmp_path)
        argv = ["finetune", "--model", MODEL, "--task", TASK, "--store", str(store), *TINY, f"{option}={value}"]
        _check(argv, value, rule(value), store, capsys)

    run()


@pytest.mark.parametrize("protocol,option,rule", EVAL_OPTIONS, ids=[o for _, o, _ in EVAL_OPTIONS])
def test_fuzz_evaluate_settings(protocol, option, rule, stop_work, tmp_path, capsys):
    method = ["--method", "ties"] if protocol == "posthoc" else []

    @FUZZ
    @given(value=VALUES)
    def run(value):
        store = _fresh(tmp_path)
        argv = ["evaluate", protocol, "--model", MODEL, "--tasks", f"{TASK},tweets", *method, "--store", str(store),
                "--no-train", "--quiet", f"{option}={value}"]
        _check(argv, value, rule(value), store, capsys)

    run()


@pytest.mark.parametrize("prefix,option,rule,target", OTHER_OPTIONS,
                         ids=[f"{p[0]}{o}" for p, o, _, _ in OTHER_OPTIONS])
def test_fuzz_other_commands(prefix, option, rule, target, stop_work, tmp_path, capsys):
    @FUZZ
    @given(value=VALUES)
    def run(value):
        store = _fresh(tmp_path)
        store.mkdir()
        (store / "results").mkdir()  # `talos examples` needs results to start
        argv = [*prefix, "--store", str(store), *(["--out", str(store / "out")] if prefix[0] == "merge" else []),
                f"{option}={value}"]
        before = sorted(store.rglob("*"))
        outcome, sentence = _outcome(argv, capsys)
        assert (outcome == "accepted") == rule(value), (argv, value, outcome, sentence)
        assert sorted(store.rglob("*")) == before, argv  # nothing written, accepted or not (the work is stopped)

    run()


# --------------------------------------------------------------------------------------------
# mutated stores
# --------------------------------------------------------------------------------------------
#: what replaces a value: deletion, values of other JSON types, non-finite and out-of-range numbers
CANDIDATES = ["<delete>", None, True, "0.5", [0.5], {"x": 1}, float("nan"), float("-inf"), float("inf"), -1, -3, 7.5,
              1e308, 2**64]


def _kind(value) -> str:
    return "number" if isinstance(value, (int, float)) and not isinstance(value, bool) else type(value).__name__


def _mutations(value, rule=None, *, key: bool = True):
    """Type swaps, out-of-range numbers and deletion (of a ``key``, not of a list item) for one value: a number
    replacing a number only where it is out of the field's range (its ``rule``; any finite number is in range of a
    field without one)."""
    def bad(m) -> bool:
        if m == "<delete>":
            return key
        if value is None and _kind(m) == "number" and rule is not None:  # a measurement where none was: in range?
            return not rule.check(m)
        if _kind(m) != _kind(value):
            return True
        if _kind(m) != "number":
            return False
        return not rule.check(m) if rule is not None else not math.isfinite(m)
    return st.sampled_from([m for m in CANDIDATES if bad(m)])


def _without_audit(text: str) -> list[str]:
    """A report's lines without what the audit derives from the numbers (the ``audit flags`` column and the
    footnotes): a damaged number may rightly change which flags are raised, never the numbers shown."""
    lines = []
    for line in text.splitlines():
        if line.startswith(("Audit flags", "Audit: no flags")):
            break
        lines.append(line.rsplit("|", 2)[0] + "|" if line.startswith("|") else line)
    return lines


def _same_but_missing(got: str, want: str, missing: tuple[str, ...]) -> bool:
    """``got`` is ``want`` with, at most, some cells shown as missing or without their interval (never another
    number): Markdown rows cell by cell, other lines word by word (the audit's column and footnotes aside)."""
    a, b = _without_audit(got), _without_audit(want)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        cx, cy = (x.split("|"), y.split("|")) if "|" in y else (x.split(), y.split())
        if len(cx) != len(cy) or not all(u.strip() in (v.strip(), v.split(" [")[0].strip(), *missing)
                                         for u, v in zip(cx, cy)):
            return False
    return True


def _paths(obj, prefix=()) -> list[tuple]:
    """Every key path of a JSON object (into objects, and into the first few items of lists)."""
    out = []
    items = obj.items() if isinstance(obj, dict) else enumerate(obj[:3]) if isinstance(obj, list) else []
    for key, value in items:
        out.append((*prefix, key))
        out += _paths(value, (*prefix, key))
    return out


def _mutate(data, path: tuple, mutation) -> None:
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    if mutation == "<delete>":
        del parent[path[-1]]
    else:
        parent[path[-1]] = mutation


@pytest.fixture(scope="module")
def run_store(tmp_path_factory) -> Path:
    """A tiny store: one TaLoS run of the tiny text model (mask, task vector, manifest)."""
    root = tmp_path_factory.mktemp("fuzz-runs") / "store"
    assert main(["finetune", "--model", MODEL, "--task", TASK, "--store", str(root), *TINY]) == 0
    return root


def _runs_output(root: Path, capsys) -> tuple[int, str]:
    code = main(["runs", "--store", str(root), "--verify"])
    out = capsys.readouterr()
    assert "Traceback" not in out.err, out.err
    return code, out.out


def test_fuzz_manifest_fields(run_store, tmp_path, capsys):
    """Every field of a run's manifest, mutated: ``talos runs --verify`` lists the run as corrupt (exit 1) or
    prints exactly what it printed for the intact store."""
    intact = _runs_output(run_store, capsys)
    assert intact[0] == 0
    (manifest,) = run_store.glob("runs/*/manifest.json")
    data = json.loads(manifest.read_text())
    paths = [p for p in _paths(data) if p[0] not in ("history", "versions", "info")]

    @FUZZ
    @given(path=st.sampled_from(paths), data_=st.data())
    def run(path, data_):
        root = _fresh(tmp_path)
        shutil.copytree(run_store, root)
        edited = json.loads(manifest.read_text())
        value = edited
        for key in path:
            value = value[key]
        mutation = data_.draw(_mutations(value, _manifest_rule(path), key=isinstance(path[-1], str)))
        _mutate(edited, path, mutation)
        (root / manifest.relative_to(run_store)).write_text(json.dumps(edited))
        code, out = _runs_output(root, capsys)
        if code == 1:
            assert "CORRUPT" in out and "manifest" in out, (path, mutation, out)
        else:
            assert code == 0 and _same_but_missing(out, intact[1], ("NaN", "None")), (path, mutation, out)
        shutil.rmtree(root)

    run()


def _manifest_rule(path: tuple):
    from talos_core import schema
    from talos_core.manifest import _metric_rule

    if path[0] in ("metrics", "timings") and len(path) == 2:
        return _metric_rule(path[1])
    return {("sparsity",): schema.SPARSITY, ("seed",): schema.COUNT}.get(path) or (
        schema.COUNT if path[0] == "data_sizes" else None)


def _report_store(root: Path) -> None:
    from talos_core.schema import result_name
    from talos_core.store import Store

    s = Store(root)
    s.write_result("suite", "t", {"model": MODEL, "tasks": [TASK, "tweets"], "control_task": "fortune-langs",
                                  "methods": ["talos", "nonlinear"], "posthoc": [], "scale": "mini", "seed": 0,
                                  "wall_time_s": 60.0, "device": "cpu"})
    rows = [{"method": m, "addition_abs": 0.75, "addition_norm": 1.05, "negation_target": 0.3,
             "negation_control": 0.7, "single_task_acc": 0.8, "zero_shot_acc": 0.5, "time_per_step_s": 0.1,
             "peak_memory_mb": 100.0, "addition_abs_lo": 0.7, "addition_abs_hi": 0.8} for m in ("talos", "nonlinear")]
    s.write_result("comparison", result_name("t", MODEL), {"columns": list(rows[0]), "records": rows})


def _result_rule(kind: str, key: tuple):
    from talos_core import schema

    if key[0] == "records" and len(key) == 3:
        col = key[2]
        return schema.COLUMN_RULES.get(col) or schema.COLUMN_RULES.get(col.removesuffix("_lo").removesuffix("_hi"))
    return schema.FIELD_RULES.get(kind, {}).get(key[0]) if len(key) == 1 else None


def test_fuzz_report_results(tmp_path, capsys):
    """Every field of a suite record and its comparison table, mutated: ``talos report`` refuses with one sentence
    naming the file, or prints exactly the intact table."""
    base = tmp_path / "base"
    _report_store(base)
    assert main(["report", "t", "--store", str(base)]) == 0
    intact = capsys.readouterr().out
    files = sorted((base / "results").rglob("*.json"))

    @FUZZ
    @given(index=st.integers(0, len(files) - 1), data_=st.data())
    def run(index, data_):
        root = _fresh(tmp_path)
        shutil.copytree(base, root)
        path = root / files[index].relative_to(base)
        edited = json.loads(path.read_text())
        key = data_.draw(st.sampled_from(_paths(edited)))
        value = edited
        for k in key:
            value = value[k]
        mutation = data_.draw(_mutations(value, _result_rule(path.parent.name, key), key=isinstance(key[-1], str)))
        _mutate(edited, key, mutation)
        path.write_text(json.dumps(edited))
        code = main(["report", "t", "--store", str(root)])
        out = capsys.readouterr()
        assert "Traceback" not in out.err, (key, mutation, out.err)
        if code == 0:
            assert _same_but_missing(out.out, intact, ("–",)), (key, mutation, out.out)
        else:
            lines = out.err.strip().splitlines()
            assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (key, mutation, out.err)
        shutil.rmtree(root)

    run()


def _tables(store: Path, kinds=None) -> list[tuple[str, str]]:
    """``(kind, name)`` of the store's tables with rows (of ``kinds`` only, when given)."""
    from talos_core import schema

    return [(k, n) for k, n, _ in schema.iter_results(store)
            if isinstance(schema.read_result(store, k, n).get("records"), list)
            and schema.read_result(store, k, n)["records"] and (kinds is None or k in kinds)]


def _table_copy(store: Path, root: Path, kind: str, name: str, data_) -> tuple[Path, dict, int]:
    """Where table ``kind/name`` of ``store`` goes in the fresh store ``root``, its payload, and a row drawn."""
    from talos_core import schema

    path = schema.result_path(root, kind, name)
    path.parent.mkdir(parents=True)
    payload = schema.read_result(store, kind, name)
    return path, payload, data_.draw(st.integers(0, len(payload["records"]) - 1))


def test_fuzz_result_tables_of_every_kind(fixture_store, tmp_path):
    """A cell of every table kind of the dashboard's fixture store, mutated (type swap, out of range, deleted):
    the one schema reader refuses the file in one sentence naming it, or reads back exactly the intact value."""
    from talos_core import schema

    @FUZZ
    @given(which=st.sampled_from(_tables(fixture_store)), data_=st.data())
    def run(which, data_):
        kind, name = which
        path, payload, row = _table_copy(fixture_store, _fresh(tmp_path), kind, name, data_)
        root = path.parents[2]
        col = data_.draw(st.sampled_from([c for c in payload["records"][row] if c in schema.COLUMN_RULES]))
        rule = schema.COLUMN_RULES[col]
        mutation = data_.draw(_mutations(payload["records"][row][col], rule))
        _mutate(payload, ("records", row, col), mutation)
        path.write_text(json.dumps(payload))
        try:
            back = schema.read_result(root, kind, name)
        except TalosError as exc:
            assert str(path) in str(exc) and "\n" not in str(exc)
            return
        # accepted: only null or a deleted cell (not measured: shown as missing), read back as written
        kept = back["records"][row].get(col, "<delete>")
        assert kept is None or kept == "<delete>", (kind, col, kept)

    run()


# --------------------------------------------------------------------------------------------
# manifests rewritten consistently: downgrades, checksums nulled or recomputed, files swapped or scaled
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_run_store(tmp_path_factory) -> Path:
    """Two TaLoS runs of the tiny text model (same sparsity, so their masks have the same size and density)."""
    root = tmp_path_factory.mktemp("fuzz-two-runs") / "store"
    for task in (TASK, "tweets"):
        assert main(["finetune", "--model", MODEL, "--task", task, "--store", str(root), *TINY]) == 0
    return root


ARTIFACTS = ("task_vector.safetensors", "mask.safetensors")
#: what happens to a run's files: left alone, the task vector scaled, one or both files taken from the other run
FILE_EDITS = ["keep", "scale", "swap_vector", "swap_mask", "swap_both"]
#: what happens to its manifest: left alone, relabelled as the older format (checksums deleted, kept or nulled),
#: checksums nulled or recomputed from the files as they are now, and the vector's measurements rewritten to match
MANIFEST_EDITS = ["keep", "downgrade", "downgrade_keep_checksums", "null_checksums", "recompute_checksums",
                  "recompute_all", "downgrade_recompute_all"]


def _vector_facts(path: Path) -> tuple[int, float]:
    from talos_core.vectors import TaskVector

    tv = TaskVector.load(path)
    return tv.nnz(), tv.norm()


def test_fuzz_rewritten_manifests_never_let_other_weights_through(two_run_store, tmp_path, capsys):
    """A run's files altered (scaled, swapped with the other run's) under a manifest rewritten in any consistent way:
    every command that reads the run (the runs a protocol resolves, ``talos runs --verify``) refuses it in one
    sentence, unless the manifest records the SHA-256 of exactly the files now there and the task vector's own
    measurements (``--verify`` also checks that the mask is one the vector was trained under) — a consistent record,
    never unchecked or contradicted weights."""
    from talos_core.atomic import file_sha256
    from talos_core.evaluation.runs import find_run
    from talos_core.store import Store
    from talos_core.vectors import TaskVector

    @FUZZ
    @given(files=st.sampled_from(FILE_EDITS), manifest=st.sampled_from(MANIFEST_EDITS),
           factor=st.sampled_from([-1.0, 0.5, 1.0001, 2.0, 50.0]))
    def run(files, manifest, factor):
        root = _fresh(tmp_path)
        shutil.copytree(two_run_store, root)
        run_, other = sorted(Store(root).runs(), key=lambda r: r.manifest.task != TASK)
        if files == "scale":
            (TaskVector.load(run_.path / ARTIFACTS[0]) * factor).save(run_.path / ARTIFACTS[0])
        for name, swap in zip(ARTIFACTS, ("swap_vector", "swap_mask")):
            if files in (swap, "swap_both"):
                shutil.copy(other.path / name, run_.path / name)
        path = run_.path / "manifest.json"
        data = json.loads(path.read_text())
        if manifest.startswith("downgrade"):
            data["format"] = "talos-run/1"
            if manifest == "downgrade":
                del data["artifacts"]
        if manifest == "null_checksums":
            data["artifacts"] = {n: None for n in data["artifacts"]}
        if "recompute" in manifest:
            data["artifacts"] = {n: file_sha256(run_.path / n) for n in ARTIFACTS}
        if manifest.endswith("recompute_all"):
            data["metrics"]["vector_nnz"], data["metrics"]["vector_norm"] = _vector_facts(run_.path / ARTIFACTS[0])
        path.write_text(json.dumps(data))
        # the oracle: every file's checksum recorded and right, the vector's measurements right, the mask its own
        recorded = data.get("artifacts") or {}
        checked = all(recorded.get(n) == file_sha256(run_.path / n) for n in ARTIFACTS)
        nnz, norm = _vector_facts(run_.path / ARTIFACTS[0])
        measured = nnz == data["metrics"]["vector_nnz"] and math.isclose(norm, data["metrics"]["vector_norm"],
                                                                         rel_tol=1e-4)
        accept = checked and measured
        fits = files != "swap_mask" and files != "swap_vector"

        code = main(["runs", "--store", str(root), "--verify"])
        out = capsys.readouterr()
        assert "Traceback" not in out.err and code == (0 if accept and fits else 1), (files, manifest, factor, out.out)
        if not (accept and fits):
            assert f"CORRUPT {run_.id}" in out.out and str(run_.path) in out.out
        try:
            found = find_run(Store(root), MODEL, TASK, "talos", dict(zip(("steps", "max_train", "max_val", "max_test",
                                                                            "calib_samples", "batch_size"),
                                                                           (2, 32, 16, 16, 8, 8))))
            found.task_vector(), found.mask()
        except TalosError as exc:
            assert not accept and "\n" not in str(exc) and str(run_.path) in str(exc), (files, manifest, str(exc))
        else:
            assert accept, (files, manifest, factor)
        shutil.rmtree(root)

    run()


# --------------------------------------------------------------------------------------------
# pathological JSON: nesting, duplicate keys, non-finite numbers, sizes, repeated rows
# --------------------------------------------------------------------------------------------
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=30)


def _depth(value) -> int:
    if isinstance(value, dict):
        value = list(value.values())
    if not isinstance(value, list):
        return 0
    return 1 + max((_depth(v) for v in value), default=0)


@st.composite
def pathological_json(draw) -> tuple[str, str | None]:
    """``(text, what is wrong or None)``: a JSON document, possibly nested deeply, with a repeated key, a non-finite
    number or a long array (the size of a large but legitimate file)."""
    from talos_core.atomic import MAX_JSON_DEPTH

    value = draw(JSON_VALUES)
    depth = draw(st.sampled_from([0, 1, 10, MAX_JSON_DEPTH - 8, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 500, 5000,
                                  100_000]))
    how = draw(st.sampled_from(["plain", "list", "object", "duplicate", "nan", "infinity", "huge", "long"]))
    if how == "long":
        value = [value] * draw(st.sampled_from([1000, 20_000]))
    body = json.dumps(value, allow_nan=False)
    wrong = None
    if how == "duplicate":
        body, wrong = f'{{"k": {body}, "k": {body}}}', "twice"
    elif how in ("nan", "infinity", "huge"):
        literal = {"nan": "NaN", "infinity": "-Infinity", "huge": "1e999"}[how]
        body, wrong = f"[{body}, {literal}]", "not JSON" if how != "huge" else "beyond the range"
    opener, closer = ("[", "]") if how != "object" else ('{"a":', "}")
    text = opener * depth + body + closer * depth
    total = depth + _depth(json.loads(body)) if wrong is None else depth + 1 + _depth(value)
    if total > MAX_JSON_DEPTH:
        wrong = wrong or "levels deep"
    return text, wrong


def test_fuzz_pathological_json_is_read_or_refused_in_one_sentence(tmp_path):
    """The one JSON reader (:func:`talos_core.atomic.read_json`) on generated documents: it returns exactly what
    standard JSON says, or refuses in one sentence naming the file (too deep, a key twice, NaN/Infinity, a number
    beyond a float) — never another exception, whatever the depth or size."""
    from talos_core.atomic import read_json

    @FUZZ
    @given(case=pathological_json())
    def run(case):
        text, wrong = case
        path = tmp_path / "x.json"
        path.write_text(text)
        try:
            got = read_json(path)
        except TalosError as exc:
            message = str(exc)
            assert wrong is not None and str(path) in message and "\n" not in message, (text[:200], message)
            assert wrong in message or "levels deep" in message, (wrong, message)
            return
        assert wrong is None, (text[:200], wrong)
        assert got == json.loads(text)

    run()


def test_fuzz_pathological_json_in_a_store(tmp_path, capsys):
    """The same documents as a suite's comparison table or a run manifest: ``talos report`` prints the table or
    refuses in one sentence, ``talos runs`` lists the run or calls it corrupt — no traceback."""
    base = tmp_path / "base"
    _report_store(base)
    files = [base / "results" / "comparison" / f"t__{MODEL}.json", base / "results" / "suite" / "t.json"]

    @FUZZ
    @given(case=pathological_json(), which=st.integers(0, len(files) - 1))
    def run(case, which):
        root = _fresh(tmp_path)
        shutil.copytree(base, root)
        (root / files[which].relative_to(base)).write_text(case[0])
        code = main(["report", "t", "--store", str(root)])
        out = capsys.readouterr()
        lines = out.err.strip().splitlines()
        assert "Traceback" not in out.err and code == 2 and len(lines) == 1 and lines[0].startswith("error: "), out.err
        (root / "runs" / "x").mkdir(parents=True)
        (root / "runs" / "x" / "manifest.json").write_text(case[0])
        code = main(["runs", "--store", str(root)])
        out = capsys.readouterr()
        assert "Traceback" not in out.err and code == 1 and "CORRUPT x:" in out.out, out
        shutil.rmtree(root)

    run()


def test_fuzz_repeated_rows_of_every_table_kind(fixture_store, tmp_path):
    """A row of every table kind of the dashboard's fixture store repeated (as it is, or with its numbers changed):
    the one schema reader refuses the file in one sentence naming it and the repeated row."""
    from talos_core import schema

    tables = _tables(fixture_store, schema.ROW_KEYS)
    assert {k for k, _ in tables} >= {"single", "addition", "negation", "comparison", "efficiency", "masks"}

    @FUZZ
    @given(which=st.sampled_from(tables), data_=st.data())
    def run(which, data_):
        kind, name = which
        path, payload, row = _table_copy(fixture_store, _fresh(tmp_path), kind, name, data_)
        root = path.parents[2]
        copy = dict(payload["records"][row])
        for col in copy:
            if col not in schema.ROW_KEYS[kind] and schema.COLUMN_RULES.get(col) is schema.ACCURACY:
                copy[col] = data_.draw(st.sampled_from([copy[col], 0.0, 1.0]))
        records = payload["records"]
        records.insert(data_.draw(st.integers(0, len(records))), copy)
        path.write_text(json.dumps(payload))
        with pytest.raises(TalosError) as exc:
            schema.read_result(root, kind, name)
        assert str(path) in str(exc.value) and "repeating row" in str(exc.value) and "\n" not in str(exc.value)

    run()


# --------------------------------------------------------------------------------------------
# non-finite model outputs
# --------------------------------------------------------------------------------------------
def test_fuzz_non_finite_outputs_are_never_an_accuracy(tiny_setup):
    """The tiny text model edited by vectors of any size (finite entries, α up to ±1e38, in both evaluation modes):
    an accuracy in [0, 1] when every output is finite, else one sentence naming the model — never the accuracy of
    NaN logits (the share of class 0)."""
    from talos_core.inference.forward import accuracy
    from talos_core.vectors import TaskVector, apply_vectors

    model, task, data = tiny_setup[MODEL]
    split = data.test.take(np.arange(min(12, len(data.test))))
    names = [n for n, _ in model.named_parameters()]

    @FUZZ
    @given(name=st.sampled_from(names), scale=st.sampled_from([1e-3, 1.0, 1e3, 1e10, 1e20, 1e30, 3e38]),
           alpha=st.sampled_from([-1e38, -1e10, -1.0, 0.5, 1.0, 1e10, 1e38]),
           mode=st.sampled_from(["nonlinear", "linearized"]))
    def run(name, scale, alpha, mode):
        param = dict(model.named_parameters())[name]
        tv = TaskVector.from_dense({name: torch.full_like(param, scale).detach().cpu()})
        terms = [(tv, alpha)]
        try:
            acc = accuracy(model, task, split, terms, mode=mode, batch_size=16)
        except TalosError as exc:
            assert "gives non-finite" in str(exc) and repr(MODEL) in str(exc) and "\n" not in str(exc)
            finite = False
        else:
            assert 0.0 <= acc <= 1.0
            finite = True
        if mode == "nonlinear":  # the oracle: the edited model's outputs, computed without the evaluation's check
            from talos_core.models.base import iter_batches

            with apply_vectors(model, terms), torch.inference_mode():
                outs = [model(**b).float() for b in iter_batches(model, split, task, 16, np.arange(len(split)))]
            assert finite == bool(torch.isfinite(torch.cat(outs)).all()), (name, scale, alpha)

    run()


# --------------------------------------------------------------------------------------------
# the dashboard server's environment variables
# --------------------------------------------------------------------------------------------
FLAG_TEXT = st.one_of(st.sampled_from(["1", "true", "yes", "on", "0", "false", "no", "off", "", " ", "TRUE", " On ",
                                       "y", "n", "maybe", "2", "enabled", "readonly", "-1", "tru", "yes!"]),
                      st.text(max_size=5))
ENV_VARIABLES = ["TALOS_DASHBOARD_READ_ONLY", "TALOS_DASHBOARD_MAX_JOBS", "TALOS_DASHBOARD_MAX_STEPS",
                 "TALOS_DASHBOARD_MAX_EXAMPLES", "TALOS_DASHBOARD_MAX_UPLOAD_MB", "TALOS_DASHBOARD_MAX_UNPACKED_MB",
                 "TALOS_DASHBOARD_MAX_UPLOAD_FILES"]


def _env_rule(var: str, text: str) -> bool:
    """docs/classroom.md: the read-only switch is 1/true/yes/on or 0/false/no/off (any case) or unset; the job caps
    are whole numbers ≥ 0 (0 = none), the upload caps whole numbers ≥ 1; blank is unset."""
    text = text.strip()
    if not text:
        return True
    if var.endswith("READ_ONLY"):
        return text.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off")
    low = 1 if "UPLOAD" in var or "UNPACKED" in var else 0
    return _int(text) is not None and _int(text) >= low


def test_fuzz_dashboard_environment(monkeypatch, capsys):
    """Generated values of every server setting: `talos dashboard` starts the server (with the mode its banner says)
    exactly when every value follows the documented rule, else refuses in one sentence naming the variable; the
    server's own reader agrees."""
    from dashboard.access import ServerConfig

    started = []

    class Server:
        def __init__(self, cmd, env=None, **kwargs):
            started.append(env)

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr("subprocess.Popen", Server)

    @FUZZ
    @given(env=st.dictionaries(st.sampled_from(ENV_VARIABLES), st.one_of(FLAG_TEXT, VALUES), max_size=4))
    def run(env):
        env = {k: v for k, v in env.items() if "\x00" not in v}
        for var in ENV_VARIABLES:
            monkeypatch.delenv(var, raising=False)
        for var, value in env.items():
            monkeypatch.setenv(var, value)
        started.clear()
        ok = all(_env_rule(var, value) for var, value in env.items())
        code = main(["dashboard"])
        out = capsys.readouterr()
        assert "Traceback" not in out.err
        if ok:
            read_only = env.get(ENV_VARIABLES[0], "").strip().lower() in ("1", "true", "yes", "on")
            assert code == 0 and len(started) == 1 and ("(read-only)" in out.out) == read_only, (env, out)
            assert ServerConfig.from_env(env).read_only == read_only
        else:
            lines = out.err.strip().splitlines()
            assert code == 2 and not started and len(lines) == 1 and " must be " in lines[0], (env, out.err)
            assert any(lines[0].startswith(f"error: {var} must be") for var in env), lines
            with pytest.raises(TalosError):
                ServerConfig.from_env(env)

    run()
