"""dashboard/data.py, views.py and jobs.py without a Streamlit server: loading, errors, preview, snapping."""

from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest
from dashboard_fixtures import MODEL, REPO, SUITE, TASKS

from dashboard import data as D
from dashboard import jobs as J
from dashboard.views import addition_view, negation_view
from talos_core.errors import TalosError
from talos_core.result_arrays import PreviewCache, array_key_base, array_key_jvp, load_preview, preview_accuracy
from talos_core.schema import (
    KINDS,
    CorruptResult,
    EmptyStore,
    MissingResult,
    StoreNotFound,
    parse_result_name,
    result_path,
    viewer_store,
)


def _name(*parts):
    return "__".join([SUITE, MODEL, *parts])


def test_default_store_path(monkeypatch):
    assert viewer_store({}) == REPO / "cached_results"
    assert str(viewer_store({"TALOS_STORE": "/x/y"})) == "/x/y"


def test_parse_result_names():
    assert parse_result_name("addition", "s__m__talos") == {"suite": "s", "model": "m", "method": "talos"}
    assert parse_result_name("sharing", "s__m__prune")["mode"] == "prune"
    assert parse_result_name("addition", "s__m") is None
    assert parse_result_name("nonsense", "s__m") is None


def test_index_covers_every_kind(dashboard_store):
    idx = D.store_index(dashboard_store)
    assert list(idx.columns) == D.INDEX_COLUMNS
    assert not idx.empty
    assert set(idx["kind"]) <= set(KINDS) | {"suite"}


def test_fixture_index_content(fixture_store):
    idx = D.store_index(fixture_store)
    assert set(idx["kind"]) == set(KINDS) | {"suite"}
    assert D.available(idx, "method", kind="addition") == ["nonlinear", "talos"]
    assert D.order_methods(["nonlinear", "ties", "talos"]) == ["talos", "nonlinear", "ties"]
    assert D.available(idx, "task2", kind="disentanglement", method="talos") == sorted(set(TASKS[1:]))


def test_every_result_loads(dashboard_store):
    idx = D.store_index(dashboard_store)
    for row in idx.itertuples():
        if row.kind in D.LOADERS:
            D.LOADERS[row.kind](dashboard_store, row.name)


def test_empty_and_missing_store(tmp_path):
    with pytest.raises(StoreNotFound, match="does not exist"):
        D.store_index(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(EmptyStore, match="has no results yet") as exc:
        D.store_index(tmp_path / "empty")
    assert exc.value.level == "info"
    with pytest.raises(MissingResult, match="has no addition result"):
        D.load_addition(tmp_path / "empty", "a__b__c")


@pytest.fixture()
def store_copy(fixture_store, tmp_path):
    return shutil.copytree(fixture_store, tmp_path / "store")


def test_corrupt_files_raise_one_sentence(store_copy):
    path = result_path(store_copy, "addition", _name("talos"))
    path.write_text("{not json")
    with pytest.raises(CorruptResult, match="is corrupt") as exc:
        D.load_addition(store_copy, _name("talos"))
    assert exc.value.level == "error"
    row = {"alpha": 0.0, "split": "test", "task": "a", "accuracy": 0.5, "normalized_accuracy": 1.0}
    path.write_text(json.dumps({"columns": list(row), "records": [row]}))
    with pytest.raises(CorruptResult, match="lacks field"):
        D.load_addition(store_copy, _name("talos"))
    loc = result_path(store_copy, "localization", _name("talos"))
    loc.write_text(json.dumps({"tasks": ["a", "b"], "matrix": [[1.0]]}))
    with pytest.raises(CorruptResult, match="expected 2 × 2"):
        D.load_localization(store_copy, _name("talos"))
    arrays = store_copy / "results" / "preview" / f"{_name('talos')}.safetensors"
    arrays.write_bytes(b"garbage")
    with pytest.raises(CorruptResult, match="corrupt"):
        load_preview(store_copy, _name("talos"))


def test_cached_get_sees_rewritten_file(store_copy):
    a1 = D.get("addition", store_copy, _name("talos"))
    payload = json.loads(result_path(store_copy, "addition", _name("talos")).read_text())
    payload["selected_alpha"] = 1.5
    path = result_path(store_copy, "addition", _name("talos"))
    path.write_text(json.dumps(payload))
    import os

    st_ = path.stat()
    os.utime(path, ns=(st_.st_atime_ns, st_.st_mtime_ns + 10**9))
    assert D.get("addition", store_copy, _name("talos")).selected_alpha == 1.5 != a1.selected_alpha


def test_snap_and_addition_at(fixture_store):
    assert D.snap([0.0, 0.5, 1.0], 0.26) == (0.5, True)
    with pytest.raises(TalosError):
        D.snap([], 0.1)
    add = D.load_addition(fixture_store, _name("talos"))
    a, df = D.addition_at(add, 3.3)
    assert a == 3.5 and df["task"].tolist() == list(TASKS)
    exp = add.curve[(add.curve["alpha"] == 3.5) & (add.curve["split"] == "test")].set_index("task")["accuracy"]
    np.testing.assert_allclose(df["accuracy"], exp.reindex(list(TASKS)))


def test_preview_accuracy_is_base_plus_weighted_jvps(fixture_store):
    pv = load_preview(fixture_store, _name("nonlinear"))
    alphas = {TASKS[0]: 0.7, TASKS[1]: -0.2}
    e = TASKS[0]
    from safetensors.numpy import load_file

    raw = load_file(str(fixture_store / "results" / "preview" / f"{_name('nonlinear')}.safetensors"))
    logits = raw[f"base::{e}"] + 0.7 * raw[f"jvp::{e}::{TASKS[0]}"] - 0.2 * raw[f"jvp::{e}::{TASKS[1]}"]
    labels = np.asarray(json.loads(result_path(fixture_store, "preview", _name("nonlinear")).read_text())
                        ["labels"][e])
    assert preview_accuracy(pv, alphas, [e])[e] == pytest.approx(float(np.mean(logits.argmax(1) == labels)))
    # adding a task's own vector helps that task
    assert preview_accuracy(pv, {e: 1.0})[e] > preview_accuracy(pv, {})[e]


def test_preview_matches_engine_implementation(fixture_store):
    """The one reader (talos_core.schema, shared by engine and dashboard) gives the numbers of a cache built
    by hand from the raw arrays file."""
    from safetensors.numpy import load_file

    pv = load_preview(fixture_store, _name("talos"))
    raw = load_file(str(fixture_store / "results" / "preview" / f"{_name('talos')}.safetensors"))
    cache = PreviewCache(tasks=pv.tasks, eval_tasks=pv.eval_tasks, labels=pv.labels,
                         base={e: raw[array_key_base(e)] for e in pv.eval_tasks},
                         jvp={(e, t): raw[array_key_jvp(e, t)] for e in pv.eval_tasks for t in pv.tasks})
    alphas = {t: 0.3 * (i + 1) for i, t in enumerate(pv.tasks)}
    assert preview_accuracy(cache, alphas) == pytest.approx(preview_accuracy(pv, alphas))


def test_addition_view_snaps_and_says_so(fixture_store):
    add = D.load_addition(fixture_store, _name("talos"))
    single = D.load_table(fixture_store, "single", _name())
    pv = load_preview(fixture_store, _name("talos"))
    on_grid = addition_view(add, {t: 4.0 for t in TASKS}, single=single, preview=pv, method="talos")
    assert not on_grid.snapped and not on_grid.mixed and "on the cached grid" in on_grid.note()
    off = addition_view(add, {t: 4.2 for t in TASKS}, single=single, preview=pv, method="talos")
    assert off.snapped and off.exact_alpha == 4.0 and "snapped" in off.note()
    mixed = addition_view(add, {TASKS[0]: 1.0, TASKS[1]: 2.0, TASKS[2]: 6.0}, single=single, preview=pv, method="talos")
    assert mixed.mixed and mixed.exact_alpha == 3.0 and "shared by all tasks" in mixed.note()
    # exact bars = cached curve; preview bars = preview_accuracy
    np.testing.assert_allclose(list(off.exact_fig.data[0].y), off.exact["accuracy"])
    assert list(mixed.preview_fig.data[0].y) == [mixed.preview_acc[t] for t in TASKS]
    assert mixed.preview_acc != on_grid.preview_acc
    zs, ft = D.single_reference(single, "talos", list(TASKS))
    assert list(off.exact_fig.data[1].y) == zs and list(off.exact_fig.data[2].y) == ft


def test_negation_view(fixture_store):
    neg = D.load_negation(fixture_store, _name("talos"))
    pv = load_preview(fixture_store, _name("talos"))
    v0 = negation_view(neg, {t: 0.0 for t in neg.targets}, preview=pv, method="talos")
    v1 = negation_view(neg, {t: 9.9 for t in neg.targets}, preview=pv, method="talos")
    assert (v1.exact["target_acc"] < v0.exact["target_acc"]).all()
    assert v1.exact["snapped"].all() and "snap" in v1.note()
    assert v0.preview_fig is not None and len(v0.preview_acc) == len(TASKS)


def test_xi_region_mean_and_tables(fixture_store):
    p = D.load_disentanglement(fixture_store, _name("nonlinear", TASKS[0], TASKS[1]))
    inside = (p["alphas1"] >= 0) & (p["alphas1"] <= 1)
    assert D.xi_region_mean(p) == pytest.approx(p["xi"][np.ix_(inside, inside)].mean())
    # comparing methods: one shared square, never each method's own (a sparse method searches × 1/(1 − k) wider)
    talos = D.load_disentanglement(fixture_store, _name("talos", TASKS[0], TASKS[1]))
    wide = {**talos, "search_region": [0.0, 10.0]}
    assert D.shared_region([wide, p]) == (0.0, 1.0) and D.shared_region([{"search_region": None}, p]) is None
    assert D.xi_region_mean(wide, (0.0, 1.0)) == pytest.approx(talos["xi"][np.ix_(inside, inside)].mean())
    a = p["alphas1"]
    i = int(np.abs(a - 0.5).argmin())
    assert D.xi_at(p, 0.5) == p["xi"][i, i] and np.isnan(D.xi_at(p, 1e6))
    long = D.xi_long_table([p])
    assert len(long) == p["xi"].size and long["xi"].iloc[1] == p["xi"][0, 1]
    mats = {"talos": D.load_localization(fixture_store, _name("talos"))}
    assert len(D.localization_table(mats)) == len(TASKS) ** 2


# ----- jobs (no process is started here) -----------------------------------------------------
def test_build_commands_and_validation(tmp_path):
    spec = J.JobSpec(model="tiny-clip", tasks=("digits", "mnist"), method="talos", steps=5, max_train=32,
                     protocols=("addition", "disentanglement", "negation"), control_task="fashion-mnist")
    cmds = J.build_commands(spec, tmp_path)
    assert [c[3] for c in cmds] == ["finetune", "finetune", "evaluate", "evaluate", "evaluate"]
    assert [c[4] for c in cmds[2:]] == ["addition", "negation", "disentanglement"]
    assert cmds[0][:3] == [sys.executable, *J.CLI_PREFIX]
    assert "--control-task" in cmds[3] and "--grid" in cmds[4]
    assert J.display_command(cmds[0]).startswith("talos finetune --task digits")
    for bad, msg in [(dict(tasks=()), "at least one task"), (dict(sparsity=1.0), "sparsity"),
                     (dict(suite="a__b"), "suite name"), (dict(protocols=("x",)), "unknown protocol"),
                     (dict(steps=0), "steps")]:
        with pytest.raises(TalosError, match=msg):
            J.JobSpec(**{**dict(model="tiny-clip", tasks=("digits",)), **bad}).validate()


def test_progress_parsing():
    log = ("\n$ talos finetune\nfine-tune digits:  10%|#  | 6/60 [00:01<00:09]"
           "\rfine-tune digits:  50%|## | 30/60 [00:02<00:02]")
    frac, label = J.parse_progress(log, {"state": "running", "step": 0, "n_steps": 2, "command": "talos finetune x"})
    assert frac == pytest.approx(0.25) and "fine-tune digits" in label
    assert J.parse_progress("", {"state": "done", "step": 2, "n_steps": 2})[0] == 1.0
    assert J.parse_progress("no bar", {"state": "running", "step": 1, "n_steps": 4})[0] == 0.25


def test_job_folders_are_listed_and_dead_runner_detected(tmp_path):
    d = J.jobs_root(tmp_path) / J.new_job_id()
    d.mkdir(parents=True)
    (d / "job.json").write_text(json.dumps({"spec": {"model": "tiny-clip", "method": "talos", "tasks": ["digits"]}}))
    (d / "status.json").write_text(json.dumps({"state": "running", "pid": 2 ** 22 + 12345, "step": 0, "n_steps": 1}))
    (d / "log.txt").write_text("a\rb\nfine-tune digits: 3/6 [\r   \n")
    jobs = J.list_jobs(tmp_path)
    assert len(jobs) == 1 and jobs[0].state == "died"
    assert J.tail_log(d) == "b\nfine-tune digits: 3/6 [\n"
    assert not J.cancel_job(jobs[0])
    assert J.new_job_id() != J.new_job_id()


def _wait_state(job, states, timeout=60.0):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = J.read_status(job.path)
        if st.get("state") in states:
            return st
        time.sleep(0.2)
    raise AssertionError(f"job {job.id} did not reach {states} in {timeout} s: {J.read_status(job.path)}")


def test_two_background_jobs_on_one_store_stay_separate(tmp_path):
    """Runner processes (harmless commands, no training): own folders, own logs, status and progress."""
    bar = "import sys; [sys.stderr.write(f'fine-tune x: {k}/4 [\\r') for k in range(5)]; print('%s')"
    jobs = [J.launch(J.create_job(tmp_path, [[sys.executable, "-c", bar % f"job {i} step {s}"] for s in range(2)],
                                  {"model": "m", "method": "talos", "tasks": ["t"]})) for i in range(2)]
    assert jobs[0].id != jobs[1].id
    states = [_wait_state(job, {"done", "failed"}) for job in jobs]  # both finished before any check
    for i, (job, st) in enumerate(zip(jobs, states)):
        assert st["state"] == "done" and st["returncodes"] == [0, 0]
        log = J.tail_log(job.path)
        assert f"job {i} step 1" in log and f"job {1 - i}" not in log
        assert J.current_progress(J.list_jobs(tmp_path)[1 - i]) == (1.0, "done")
    assert {j.state for j in J.list_jobs(tmp_path)} == {"done"}


def test_failed_and_cancelled_jobs(tmp_path):
    bad = J.launch(J.create_job(tmp_path, [[sys.executable, "-c", "import sys; sys.exit(3)"],
                                           [sys.executable, "-c", "print('never')"]]))
    st = _wait_state(bad, {"done", "failed"})
    assert st["state"] == "failed" and st["returncodes"] == [3]
    assert "exit status 3" in J.tail_log(bad.path) and "never" not in J.tail_log(bad.path)
    slow = J.launch(J.create_job(tmp_path, [[sys.executable, "-c", "import time; print('start', flush=True); "
                                                                   "time.sleep(60)"]]))
    _wait_state(slow, {"running"})
    import time

    deadline = time.monotonic() + 30
    while "start" not in J.tail_log(slow.path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert J.cancel_job(slow)
    assert _wait_state(slow, {"cancelled", "died"}, timeout=30)["state"] == "cancelled"


def test_figure_export_html_and_fallback_message(monkeypatch):
    from dashboard import figures as F
    from dashboard import ui

    fig = F.localization_heatmap(["a", "b"], [[1.2, 0.9], [1.0, 1.3]])
    html = ui.figure_bytes(fig, "html")
    assert html.startswith(b"<html") or html.lower().startswith(b"<!doctype")
    assert b"plotly" in html[:200000].lower()

    def boom(*a, **k):
        raise RuntimeError("no Chrome found")

    monkeypatch.setattr("plotly.graph_objects.Figure.to_image", boom)
    with pytest.raises(TalosError, match="use the HTML export instead"):
        ui.figure_bytes(fig, "png")
    with pytest.raises(TalosError, match="png, svg or html"):
        ui.figure_bytes(fig, "gif")


@pytest.mark.slow
def test_png_and_svg_export_with_local_chromium():
    """kaleido 1.x + Debian chromium, offline (~10–40 s: starts a browser)."""
    from dashboard import figures as F
    from dashboard import ui

    if ui.ensure_browser_path() is None:
        pytest.skip("no Chrome/Chromium installed")
    fig = F.arithmetic_bars(["a", "b"], [0.5, 0.7], zero_shot=[0.1, 0.2])
    assert ui.figure_bytes(fig, "png").startswith(b"\x89PNG")
    assert b"<svg" in ui.figure_bytes(fig, "svg")[:200]


@pytest.mark.slow
def test_real_background_run_lands_in_the_store(tmp_path):
    """The Run page's path end to end: tiny-clip, 1 task, 2 steps, `talos finetune` + `talos evaluate single`."""
    spec = J.JobSpec(model="tiny-clip", tasks=("digits",), method="talos", steps=2, max_train=16, max_val=16,
                     max_test=16, protocols=("single",), suite="smoke")
    job = J.start_job(spec, tmp_path)
    st = _wait_state(job, {"done", "failed", "died"}, timeout=600)
    assert st["state"] == "done", J.tail_log(job.path)
    idx = D.store_index(tmp_path)
    assert "smoke__tiny-clip" in set(idx[idx["kind"] == "single"]["name"])


def test_mask_diagnostics_read_from_the_masks_result(tmp_path):
    """The Masks page's diagnostics: per task moved / zero-sensitivity / tied fractions from the masks
    result; empty for a result written before they existed; a value outside [0, 1] is a corrupt result; the
    warnings name each diagnostic past its limit."""
    import pandas as pd

    from talos_core.evaluation.maskstats import mask_warnings
    from talos_core.store import Store

    store = Store(tmp_path / "s")
    store.ensure()
    table = pd.DataFrame([{"task": "a", "param": "w", "block": 0, "layer_type": "q", "numel": 4, "trainable": 1,
                           "density": 0.25}])
    diag = [{"task": "a", "run_id": "r", "moved": 0.74, "zero_sensitivity": 0.35, "tied": None}]
    store.write_table("masks", "s__m__talos", table, method="talos", diagnostics=diag)
    store.write_table("masks", "s__m__lota", table, method="lota")
    got = D.mask_diagnostics(store.root, "s__m__talos")
    assert got.loc[0, "moved"] == 0.74 and got.loc[0, "zero_sensitivity"] == 0.35 and pd.isna(got.loc[0, "tied"])
    assert D.mask_diagnostics(store.root, "s__m__lota").empty
    warnings = mask_warnings({"moved": 0.74, "zero_sensitivity": 0.35, "tied": None})
    assert len(warnings) == 2 and "74.0%" in warnings[0] and "35.0%" in warnings[1]
    store.write_table("masks", "bad__m__talos", table, method="talos", diagnostics=[{**diag[0], "moved": 7.4}])
    with pytest.raises(TalosError, match="'moved' diagnostic outside"):
        D.mask_diagnostics(store.root, "bad__m__talos")
