"""``talos suite --executor local|ray``: the dependency graph, the progress display, the CLI's errors, and the
``tiny`` suite on a real local Ray instance (2 CPUs) with results identical to the local executor's."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from talos_core.cli import main
from talos_core.errors import TalosError
from talos_core.suites import get_suite, suite_steps
from talos_core.suites.executors import Progress, step_graph, step_methods, step_writes

# fields that hold times, hosts or commands (they differ between any two runs); everything else must be equal
TIMING = {"wall_time_s", "step_times_s", "step_work", "sessions", "created", "time_per_step_s", "peak_memory_mb",
          "fwd_bwd_s_mean", "fwd_bwd_s_std", "opt_s_mean", "opt_s_std", "calibration_s", "total_s", "eval_s",
          "train_s", "step_s_mean", "command", "finished", "started", "torch_threads", "summary_timing",
          "calibration_s_mean"}


def _strip(o):
    if isinstance(o, dict):
        return {k: _strip(v) for k, v in o.items() if k not in TIMING}
    if isinstance(o, list):
        return [_strip(v) for v in o]
    return o


def differing_results(a: Path, b: Path) -> list[str]:
    """Result files of two stores that differ (JSON without timing fields; other files byte for byte)."""
    fa = sorted(p.relative_to(a) for p in (a / "results").rglob("*") if p.is_file())
    fb = sorted(p.relative_to(b) for p in (b / "results").rglob("*") if p.is_file())
    bad = [str(p) for p in set(fa) ^ set(fb)]
    for rel in set(fa) & set(fb):
        if rel.suffix == ".json":
            same = _strip(json.loads((a / rel).read_text())) == _strip(json.loads((b / rel).read_text()))
        else:
            same = (a / rel).read_bytes() == (b / rel).read_bytes()
        if not same:
            bad.append(str(rel))
    assert fa, f"no results in {a}"
    return sorted(bad)


# --------------------------------------------------------------------------------------------
# the graph (no Ray needed)
# --------------------------------------------------------------------------------------------
def test_graph_of_the_tiny_suite():
    steps = suite_steps(get_suite("tiny"), "mini", ["talos", "nonlinear"], ["ties"], seed=0, device="cpu")
    g = step_graph(steps)
    assert list(g) == [st.label for st in steps]
    # every step of a method waits for the step that fine-tunes its runs
    assert "talos: fine-tune + single" in g["talos: preview"]
    assert "talos: fine-tune + single" in g["talos: sparsity ablation"] if "talos: sparsity ablation" in g else True
    # ... and not for another method's evaluation steps
    assert "talos: preview" not in g["nonlinear: preview"]
    # the per-model tables keep the suite's row order under the store's lock: their writers need no order
    assert g["nonlinear: fine-tune + single"] == ()
    assert "talos: linearization" not in g["nonlinear: linearization"]
    assert g["ties: post-hoc addition + negation"] == ("nonlinear: fine-tune + single",)  # its base method's runs
    assert g["sharing (prune)"] == ("talos: fine-tune + single",)
    assert set(g["comparison"]) == set(g) - {"comparison"}  # it gathers every stored result
    # a step's fine-tuning runs wait only for the runs they need
    runs = step_graph(steps, results=False)
    assert runs["nonlinear: fine-tune + single"] == () and runs["talos: fine-tune + single"] == ()
    assert step_methods(next(st for st in steps if st.method == "ties")) == {"nonlinear"}
    assert ("upsert", "single") in step_writes(next(st for st in steps if st.method == "ties"))


def test_graph_of_the_converged_protocol_follows_lr_check_selection_rows():
    spec = get_suite("tiny")
    steps = suite_steps(spec, "paper", ["talos", "nonlinear"], ["ties", "tsv"], seed=0, device="cpu")
    g = step_graph(steps)
    assert g["talos: selection (sparsity)"] == ("talos: lr check",)
    assert g["talos: addition"] == ("talos: lr check", "talos: selection (sparsity)", "talos: fine-tune + single")
    assert g["nonlinear: lr check"] == ()  # methods train in parallel
    # the post-hoc merges wait for their base method's runs only, not for each other (their `single` rows upsert)
    assert g["ties: post-hoc addition + negation"] == g["tsv: post-hoc addition + negation"] == (
        "nonlinear: lr check", "nonlinear: fine-tune + single")
    # the one-rate row waits for both lr checks; the examples for the addition and negation whose grids they show
    assert set(g["talos-k0.9 at nonlinear's lr: single"]) >= {"talos: lr check", "nonlinear: lr check"}
    text = get_suite("text")
    g = step_graph(suite_steps(text, "full", ["talos"], [], seed=0, device="cpu"))
    assert {"talos: addition", "talos: negation"} <= set(g["talos: examples"])


def test_graph_of_the_paper_protocol_follows_curve_selection_rows():
    from tiny_text import with_curves_scale

    spec = with_curves_scale(get_suite("tiny"))
    steps = suite_steps(spec, "curves", ["talos", "nonlinear"], ["ties"], seed=0, device="cpu")
    g = step_graph(steps)
    assert g["talos: selection (sparsity)"] == ("talos: learning curve",)
    assert set(g["talos: fine-tune + single"]) == {"talos: learning curve", "talos: selection (sparsity)"}
    assert g["talos: addition"] == ("talos: learning curve", "talos: selection (sparsity)",
                                    "talos: fine-tune + single")
    assert g["nonlinear: learning curve"] == ()  # methods train in parallel
    assert "talos: learning curve" in g["talos-k0.9: single"]


def test_talos_vs_lota_masks_waits_for_lota_runs():
    spec = get_suite("text")
    steps = suite_steps(spec, "mini", ["talos", "lota"], [], seed=0, device="cpu")
    g = step_graph(steps)
    assert "lota: fine-tune + single" in g["talos vs lota masks"]
    assert "talos: masks" in g["talos vs lota masks"]  # same result id, tasks and protocol: it overwrites


def test_progress_display_lines_summary_and_states():
    lines: list[str] = []
    changes: list[str] = []
    p = Progress("[s/m]", ["a", "b", "c"], log=lines.append, on_change=changes.append)
    p.skip("a", 2.0)
    p.start("b")
    p.start("b")  # a retry
    p.fail("b", "ValueError: boom")
    p.block("c", ["b"])
    assert lines[0] == "[s/m] a: already done (2.0s), skipped"
    assert lines[1] == "[s/m] b ..." and lines[2] == "[s/m] b (retry 1) ..."
    assert "b FAILED: ValueError: boom [1/3 done, 0 running, 1 failed, 0 blocked]" in lines[3]
    assert "c not run: it needs b, which failed" in lines[4]
    assert p.states["b"]["attempts"] == 2 and p.states["c"]["state"] == "blocked"
    assert p.failures() == {"b": "ValueError: boom", "c": "needs b, which failed"}
    assert changes == ["b", "b", "b", "c"]
    summary = p.summary()
    assert summary[0].startswith("[s/m] steps: 1/3 done, 0 running, 1 failed, 1 blocked")
    assert any(ln.split()[:2] == ["a", "skipped"] for ln in summary[1:])


# --------------------------------------------------------------------------------------------
# CLI errors: one sentence, exit 2, nothing written
# --------------------------------------------------------------------------------------------
def test_without_ray_one_sentence_says_how_to_install(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    store = tmp_path / "s"
    assert main(["suite", "tiny", "--store", str(store), "--executor", "ray"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "pip install -e '.[ray]'" in err and "Traceback" not in err
    assert not store.exists()


def test_unreachable_address_is_one_sentence(capsys, tmp_path):
    pytest.importorskip("ray")
    store = tmp_path / "s"
    assert main(["suite", "tiny", "--store", str(store), "--executor", "ray", "--address", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "cannot reach the Ray cluster at 127.0.0.1:1" in err
    assert main(["suite", "tiny", "--store", str(store), "--executor", "ray", "--address", "nowhere"]) == 2
    assert "is not HOST:PORT" in capsys.readouterr().err
    assert main(["suite", "tiny", "--store", str(store), "--address", "127.0.0.1:1"]) == 2
    assert "go with --executor ray" in capsys.readouterr().err
    assert main(["suite", "tiny", "--store", str(store), "--executor", "ray", "--gpus-per-task", "0"]) == 2
    assert "--gpus-per-task must be a positive number of GPUs (e.g. 1 or 0.25), got 0.0" in capsys.readouterr().err
    assert not store.exists()


def test_bad_executor_is_refused():
    from talos_core.suites import run_suite

    with pytest.raises(TalosError, match="unknown executor 'spark'"):
        run_suite("tiny", "/nonexistent/never-written", scale="mini", executor="spark")


# --------------------------------------------------------------------------------------------
# the tiny suite on a real Ray instance
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ray_instance():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def local_tiny(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("local") / "store"
    assert main(["suite", "tiny", "--scale", "mini", "--store", str(store), "--quiet"]) == 0
    return store


@pytest.mark.slow
def test_ray_executor_gives_the_local_results(ray_instance, local_tiny, tmp_path, capsys):
    store = tmp_path / "ray"
    assert main(["suite", "tiny", "--scale", "mini", "--store", str(store), "--executor", "ray"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\[tiny/mini\] steps: 33/33 done, 0 running", out), out  # 27 steps + 6 fine-tuning runs
    assert differing_results(local_tiny, store) == []
    meta = json.loads((store / "results" / "suite" / "tiny.json").read_text())
    session = meta["sessions"][-1]
    assert meta["complete"] is True and session["executor"] == "ray" and "failed" not in meta
    assert {s["state"] for s in session["steps"].values()} == {"done"}
    assert "talos: fine-tune + single [fine-tune drug-reviews]" in session["steps"]  # each run is a Ray task
    assert list(meta["step_times_s"]) == list(json.loads(
        (local_tiny / "results" / "suite" / "tiny.json").read_text())["step_times_s"])


@pytest.mark.slow
def test_processes_executor_gives_the_local_results(local_tiny, tmp_path, capsys):
    store = tmp_path / "proc"
    assert main(["suite", "tiny", "--scale", "mini", "--store", str(store), "--executor", "processes",
                 "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\[tiny/mini\] steps: 33/33 done, 0 running", out), out  # 27 steps + 6 fine-tuning runs
    assert differing_results(local_tiny, store) == []
    meta = json.loads((store / "results" / "suite" / "tiny.json").read_text())
    session = meta["sessions"][-1]
    assert meta["complete"] is True and session["executor"] == "processes" and "failed" not in meta
    assert "talos: fine-tune + single [fine-tune drug-reviews]" in session["steps"]  # each run is a unit


@pytest.mark.slow
def test_post_hoc_steps_run_side_by_side_and_leave_the_local_store(tmp_path, capsys):
    """The converged protocol on two worker processes: the post-hoc merges upsert the shared `single` table in any
    order (under the store's lock, in the suite's row order), so they run side by side, and every result — the
    `single` table's row order included — equals the local executor's."""
    local, store = tmp_path / "local", tmp_path / "proc"
    args = ["suite", "tiny", "--scale", "paper", "--quiet"]
    assert main([*args, "--store", str(local)]) == 0
    assert main([*args, "--store", str(store), "--executor", "processes", "--jobs", "2"]) == 0
    capsys.readouterr()
    assert differing_results(local, store) == []
    single = json.loads((store / "results" / "single" / "tiny__tiny-text.json").read_text())
    assert list(dict.fromkeys(r["method"] for r in single["records"])) == list(single["runs"]) == [
        "talos", "talos-k0.9", "nonlinear", "talos-k0.9-lr0.001", "ties", "tsv", "iso_c", "iso_cts", "lines"]
    steps = json.loads((store / "results" / "suite" / "tiny.json").read_text())["sessions"][-1]["steps"]
    posthoc = [(v["started_s"], v["started_s"] + v["seconds"]) for k, v in steps.items() if "post-hoc" in k]
    assert len(posthoc) == 5
    assert any(a0 < b1 and b0 < a1 for i, (a0, a1) in enumerate(posthoc) for b0, b1 in posthoc[i + 1:])


def test_jobs_goes_with_the_processes_executor(capsys, tmp_path):
    store = tmp_path / "s"
    assert main(["suite", "tiny", "--store", str(store), "--jobs", "2"]) == 2
    assert "--jobs goes with --executor processes" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # argparse's own error for a non-positive --jobs
        main(["suite", "tiny", "--store", str(store), "--executor", "processes", "--jobs", "0"])
    assert exc.value.code == 2 and "expected a positive integer, got '0'" in capsys.readouterr().err
    assert not store.exists()
    with pytest.raises(TalosError, match="--jobs must be a positive number"):
        from talos_core.suites import run_suite

        run_suite("tiny", str(store), scale="mini", executor="processes", jobs=0)
    assert not store.exists()


@pytest.mark.slow
def test_failed_step_is_retried_reported_and_resumed_by_the_local_executor(ray_instance, tmp_path):
    """A step that fails (here: its result folder is a file) is retried once, then named in the suite record
    while the independent steps finish; the steps that need it are blocked; ``--resume`` with the local
    executor runs only what is missing."""
    store = tmp_path / "s"
    (store / "results").mkdir(parents=True)
    (store / "results" / "preview").write_text("not a folder")
    args = ["suite", "tiny", "--scale", "mini", "--store", str(store), "--methods", "talos", "--posthoc", ""]
    assert main([*args, "--executor", "ray", "--quiet"]) == 2
    meta = json.loads((store / "results" / "suite" / "tiny.json").read_text())
    assert meta["complete"] is False
    assert set(meta["failed"]) == {"talos: preview", "comparison"}
    assert "needs talos: preview" in meta["failed"]["comparison"]
    states = meta["sessions"][-1]["steps"]
    assert states["talos: preview"]["state"] == "failed" and states["talos: preview"]["attempts"] == 2
    assert states["comparison"]["state"] == "blocked"
    assert "talos: disentanglement drug-reviews/fortune-topics" in meta["step_times_s"]  # independent: done
    (store / "results" / "preview").unlink()
    lines: list[str] = []
    from talos_core.suites import run_suite

    run_suite("tiny", store, scale="mini", methods=["talos"], posthoc=[], resume=True, log=lines.append)
    started = [ln for ln in lines if ln.endswith(" ...")]
    assert started == ["[tiny/mini] talos: preview ...", "[tiny/mini] comparison ..."]
    meta = json.loads((store / "results" / "suite" / "tiny.json").read_text())
    assert meta["complete"] is True and "failed" not in meta


def test_differing_results_sees_a_changed_value(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for root, v in ((a, 1), (b, 2)):
        (root / "results" / "x").mkdir(parents=True)
        (root / "results" / "x" / "r.json").write_text(json.dumps({"v": v, "wall_time_s": v}))
    assert differing_results(a, b) == ["results/x/r.json"]
    shutil.copy(a / "results" / "x" / "r.json", b / "results" / "x" / "r.json")
    assert differing_results(a, b) == []


# --------------------------------------------------------------------------------------------
# the Run page submits a suite to a Ray address
# --------------------------------------------------------------------------------------------
def test_run_page_submits_a_suite_to_a_ray_address(monkeypatch, tmp_path):
    from dashboard_fixtures import REPO
    from streamlit.testing.v1 import AppTest

    from dashboard import jobs as J

    monkeypatch.setenv("TALOS_STORE", str(tmp_path))
    at = AppTest.from_file(str(REPO / "dashboard" / "app.py"), default_timeout=120)
    at.switch_page("app_pages/run.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at.selectbox(key="suite_name").set_value("tiny")
    at.radio(key="suite_executor").set_value("ray")
    at.run()
    at.text_input(key="suite_address").set_value("127.0.0.1:1")
    at.run()
    code = "\n".join(c.value for c in at.code)
    assert "talos suite tiny --store" in code and "--scale mini --executor ray --address 127.0.0.1:1" in code
    at.button(key="suite_launch").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    jobs = J.list_jobs(tmp_path)
    assert len(jobs) == 1 and jobs[0].spec["kind"] == "suite" and jobs[0].spec["address"] == "127.0.0.1:1"
    cmd = J.read_job(jobs[0].path)["commands"][0]
    assert cmd[cmd.index("suite"):] == ["suite", "tiny", "--store", str(tmp_path.resolve()), "--scale", "mini",
                                        "--executor", "ray", "--address", "127.0.0.1:1"]
    at.text_input(key="suite_address").set_value("two words")
    at.run()
    assert any("must be HOST:PORT" in e.value for e in at.error)


def test_suite_job_progress_and_steps_table():
    from dashboard.suite_jobs import steps_table, suite_progress

    assert suite_progress("[t/m] x done in 1.0s [4/8 done, 1 running, 1 failed, 0 blocked]\n", {"state": "running"}) \
        == (0.5, "4/8 steps done, 1 running, 1 failed, 0 blocked")
    record = {"sessions": [{"steps": {"a": {"state": "done", "seconds": 1.5, "host": "n1"},
                                      "b": {"state": "failed", "error": "OSError: x"}}}]}
    t = steps_table(record)
    assert t["state"].tolist() == ["done", "failed"] and t.loc[1, "error"] == "OSError: x"
    assert steps_table(None).empty


@pytest.mark.slow
def test_train_stage_on_ray_fine_tunes_each_run_as_a_task(ray_instance, tmp_path, capsys):
    from talos_core.store import Store

    store = tmp_path / "s"
    assert main(["suite", "tiny", "--scale", "mini", "--store", str(store), "--methods", "talos", "--posthoc", "",
                 "--stage", "train", "--executor", "ray"]) == 0
    out = capsys.readouterr().out
    assert "talos: fine-tune + single [fine-tune wordnet-verbs] done in" in out
    assert re.search(r"steps: 4/4 done, 0 running", out), out  # 3 runs + the step that evaluates them
    runs = Store(store).run_table()
    assert len(runs) == 3 and set(runs["task"]) == set(get_suite("tiny").tasks)
    assert not (store / "results" / "suite").exists()  # the train stage writes no suite record


def test_train_stage_processes_share_a_steps_runs(tmp_path):
    """``talos suite --stage train`` in several processes: each trains the runs no other process holds."""
    from tiny_text import with_curves_scale

    from talos_core.evaluation.runs import build_request
    from talos_core.store import Store
    from talos_core.suites.executors import fine_tune_parts, part_overrides, run_parts

    spec = get_suite("tiny")
    paper = {st.label: st for st in suite_steps(spec, "paper", ["talos"], [], seed=0, device="cpu")}
    sel = paper["talos: selection (sparsity)"]
    values = sel.settings.values
    assert [k for k, _, _ in run_parts(sel)] == [f"{t} sparsity={v:g}" for v in values for t in spec.tasks]
    assert run_parts(paper["talos: addition"]) == []
    curves = {st.label: st for st in suite_steps(with_curves_scale(spec), "curves", ["talos"], [], seed=0,
                                                 device="cpu")}
    assert run_parts(curves["talos: learning curve"]) == [(t, t, None) for t in spec.tasks]  # one curve run per task

    single = next(st for st in suite_steps(spec, "mini", ["talos"], [], seed=0, device="cpu")
                  if st.protocol == "single")
    assert [k for k, _, _ in run_parts(single)] == list(spec.tasks)
    store = Store(tmp_path / "s")
    store.ensure()
    first = spec.tasks[0]
    rid = build_request(spec.model, first, "talos", part_overrides(single, store, first, None)).run_id()
    assert not store.lock_held("run", rid)
    with store.run_lock(rid):  # as if another process were fine-tuning the first task's run
        assert store.lock_held("run", rid)
        lines = []
        assert fine_tune_parts(single, store, spec.model, log=lines.append) == list(spec.tasks[1:])
    assert any("another process is fine-tuning it" in ln for ln in lines)
    assert not store.lock_held("run", rid)
    assert sorted(r.manifest.task for r in store.runs()) == sorted(spec.tasks[1:])
    assert fine_tune_parts(single, store, spec.model) == [first]  # the lock is free now: this process takes it
    assert fine_tune_parts(single, store, spec.model) == []  # nothing left


def test_ray_tasks_follow_the_suites_device(tmp_path, monkeypatch):
    """The suite's --device reaches the job its Ray tasks are built from (it decides their default GPU share)."""
    from talos_core.store import Store
    from talos_core.suites import executors, run_suite

    seen = {}

    def capture(job, todo, display, **kw):
        seen["device"] = job.device
        return {}

    monkeypatch.setattr(executors, "run_ray", capture)
    monkeypatch.setattr(executors, "preflight", lambda *a, **k: None)
    run_suite("tiny", Store(tmp_path / "s"), scale="mini", methods=["talos"], posthoc=[], device="cpu",
              executor="ray", log=lambda s: None)
    assert seen == {"device": "cpu"}
    assert executors.default_gpus_per_task(2, "cpu") == 0.0 and executors.default_gpus_per_task(2, "cuda") == 1.0


_ORPHAN_SCRIPT = """
import multiprocessing, os, sys, time
from concurrent.futures import ProcessPoolExecutor
from talos_core.suites.executors import exit_with_parent

pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                           initializer=exit_with_parent if sys.argv[1] == "watched" else None,
                           initargs=(os.getpid(), 0.05) if sys.argv[1] == "watched" else ())
print(pool.submit(os.getpid).result(), flush=True)
pool.submit(time.sleep, 120)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited and not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc (Linux)")
@pytest.mark.parametrize("mode", ["watched", "unwatched"])
def test_workers_end_with_the_suite_process_that_started_them(mode, tmp_path):
    """``--executor processes`` starts its workers with ``exit_with_parent``: a suite process killed (``kill -9``, a
    session's end) takes its workers with it instead of leaving them computing as orphans; without the initializer
    (the state before) the worker outlives its parent."""
    import os
    import signal
    import subprocess
    import time

    parent = subprocess.Popen([sys.executable, "-c", _ORPHAN_SCRIPT, mode], stdout=subprocess.PIPE, text=True,
                              stderr=subprocess.DEVNULL,  # the killed parent's resource tracker warns of its semaphores
                              cwd=Path(__file__).resolve().parents[1])
    worker = int(parent.stdout.readline())
    try:
        assert _alive(worker)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 60  # the watch polls every 0.05 s; a loaded machine may take longer
        while _alive(worker) and time.monotonic() < deadline and mode == "watched":
            time.sleep(0.05)
        assert _alive(worker) == (mode == "unwatched")
    finally:
        if _alive(worker):
            os.kill(worker, signal.SIGKILL)
