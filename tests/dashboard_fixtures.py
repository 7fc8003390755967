"""A small but complete synthetic results store for dashboard tests (no training, seconds to write).

:func:`write_fixture_store` writes every result kind of ``talos_core/evaluation/SCHEMA.md`` for
2 fine-tuning methods (``nonlinear``, ``talos``) × 3 tasks, plus masks for ``talos`` and ``lota``, a
preview cache, efficiency, comparison, sharing, linearization, sparsity ablation, a sparsity selection,
learning curves and a suite record.
Numbers are plausible (TaLoS is more disentangled than non-linear FT) but made up.

``tests/conftest.py`` registers this module as a pytest plugin (``pytest_plugins``), so every test module
can ask for the fixtures ``fixture_store`` and ``dashboard_store``; constants are imported from here.

``dashboard_store`` is parametrized: the synthetic store always, plus the store named by the
environment variable ``TALOS_DASHBOARD_TEST_STORE`` (e.g. ``cached_results``) when it is set, so the
same tests also run on the real shipped store.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from talos_core.atomic import atomic_write_bytes
from talos_core.store import Store

REPO = Path(__file__).resolve().parent.parent

SUITE = "default"
MODEL = "tiny-clip"
METHODS = ("nonlinear", "talos")
TASKS = ("digits", "mnist", "fashion-mnist")
CONTROL = "imagenet"
SPARSITY = 0.9
TEST_STORE_ENV = "TALOS_DASHBOARD_TEST_STORE"


def _grid(method: str) -> np.ndarray:
    base = np.round(np.arange(21) * 0.05, 4)
    return np.round(base / (1 - SPARSITY), 4) if method == "talos" else base


def _name(*parts: str) -> str:
    return "__".join([SUITE, MODEL, *parts])


def write_fixture_store(root: str | Path, *, seed: int = 0) -> Path:
    """Write the synthetic store under ``root`` and return its path."""
    rng = np.random.default_rng(seed)
    root = Path(root)
    store = Store(root)
    store.ensure()
    zs = dict(zip(TASKS, (0.35, 0.22, 0.30)))
    ft = {"nonlinear": dict(zip(TASKS, (0.95, 0.97, 0.86))),
          "talos": dict(zip(TASKS, (0.93, 0.96, 0.84)))}
    interference = {"nonlinear": 0.25, "talos": 0.06}

    # single
    rows = [{"method": m, "task": t, "zero_shot_acc": zs[t] + (0.01 if s == "val" else 0.0),
             "finetuned_acc": ft[m][t] - (0.01 if s == "val" else 0.0), "split": s}
            for m in METHODS for t in TASKS for s in ("test", "val")]
    store.write_table("single", _name(), pd.DataFrame(rows),
                      runs={m: {t: f"{MODEL}__{t}__{m}__000000000{i}" for i, t in enumerate(TASKS)} for m in METHODS})

    # addition
    for m in METHODS:
        grid = _grid(m)
        scale = grid.max()
        rows = []
        for a, s, t in itertools.product(grid, ("val", "test"), TASKS):
            x = a / scale  # 0..1
            gain = (ft[m][t] - zs[t]) * (1 - np.exp(-4 * x)) - interference[m] * x ** 2
            acc = float(np.clip(zs[t] + gain + (0.005 if s == "val" else 0.0), 0, 1))
            rows.append({"alpha": float(a), "split": s, "task": t, "accuracy": acc,
                         "normalized_accuracy": acc / ft[m][t]})
        df = pd.DataFrame(rows)
        val = df[df.split == "val"].groupby("alpha")["normalized_accuracy"].mean()
        sel = float(val.idxmax())
        test = df[(df.split == "test") & (df.alpha == sel)]
        store.write_table("addition", _name(m), df, selected_alpha=sel, alpha_grid=grid.tolist(),
                          summary={"abs_acc": float(test.accuracy.mean()),
                                   "norm_acc": float(test.normalized_accuracy.mean())},
                          tasks=list(TASKS), sparsity=SPARSITY if m == "talos" else None,
                          eval_mode="nonlinear")

    # negation
    for m in METHODS:
        grid = _grid(m)
        scale = grid.max()
        rows, per_task, selected = [], [], {}
        for t in TASKS:
            for a, s in itertools.product(grid, ("val", "test")):
                x = a / scale
                tacc = float(max(0.02, zs[t] * (1 - 0.9 * x)))
                cacc = float(0.60 * (1 - interference[m] * 0.6 * x ** 2))
                rows.append({"target": t, "alpha": float(a), "split": s, "target_acc": tacc, "control_acc": cacc})
            tv = pd.DataFrame([r for r in rows if r["target"] == t and r["split"] == "val"])
            ok = tv[tv.control_acc >= 0.95 * 0.60]
            best = ok.loc[ok.target_acc.idxmin()]
            selected[t] = float(best.alpha)
            tr = next(r for r in rows if r["target"] == t and r["split"] == "test" and r["alpha"] == best.alpha)
            per_task.append({"target": t, "alpha": float(best.alpha), "target_acc": tr["target_acc"],
                             "control_acc": tr["control_acc"]})
        store.write_table("negation", _name(m), pd.DataFrame(rows), control_task=CONTROL, selected=selected,
                          control_zero_shot_acc={"val": 0.60, "test": 0.60},
                          summary={"target_acc": float(np.mean([p["target_acc"] for p in per_task])),
                                   "control_acc": float(np.mean([p["control_acc"] for p in per_task]))},
                          per_task=per_task)

    # disentanglement
    alphas = np.round(np.linspace(-3, 3, 20), 4)
    A1, A2 = np.meshgrid(alphas, alphas, indexing="ij")
    for m in METHODS:
        region = [0.0, float(_grid(m).max())]
        for t1, t2 in itertools.combinations(TASKS, 2):
            xi = interference[m] * 2.0 * np.abs(A1 * A2) / 9.0 + 0.01 * rng.random(A1.shape)
            store.write_result("disentanglement", _name(m, t1, t2), {
                "task1": t1, "task2": t2, "alphas1": alphas.tolist(), "alphas2": alphas.tolist(),
                "xi": xi.tolist(), "search_region": region, "points_per_task": 64, "method": m, "model": MODEL})

    # localization
    for m in METHODS:
        acc = np.array([[ft[m][r] if r == c else zs[c] * (1 - interference[m] * 0.5) for c in TASKS] for r in TASKS])
        mat = acc / np.array([zs[c] for c in TASKS])[None, :]
        store.write_result("localization", _name(m), {"tasks": list(TASKS), "matrix": mat.tolist(),
                                                      "accuracy": acc.tolist(), "zero_shot": [zs[t] for t in TASKS]})

    # masks (talos + lota), mask IoU
    layer_types = ["q", "k", "v", "attn_out", "mlp_in", "mlp_out", "layernorm"]
    mask_methods = {"talos": 0.10, "lota": 0.10}
    for m, dens in mask_methods.items():
        rows = []
        for ti, t in enumerate(TASKS):
            rows.append({"task": t, "param": "embed.weight", "block": -1, "layer_type": "embedding", "numel": 4096,
                         "trainable": int(4096 * dens * 0.3), "density": dens * 0.3})
            for b in range(2):
                for lt in layer_types:
                    numel = 64 * 64 if lt != "layernorm" else 64
                    d = float(np.clip(dens * (0.5 + (b + 1) * (0.3 + 0.2 * ti)) *
                                      (1.6 if lt.startswith("mlp") else 0.8) * (1.3 if m == "lota" else 1.0), 0, 1))
                    rows.append({"task": t, "param": f"blocks.{b}.{lt}.weight", "block": b, "layer_type": lt,
                                 "numel": numel, "trainable": int(round(numel * d)), "density": d})
        store.write_table("masks", _name(m), pd.DataFrame(rows))
        iou = np.array([[1.0 if i == j else 0.7 - 0.1 * abs(i - j) - (0.2 if m == "lota" else 0.0)
                         for j in range(len(TASKS))] for i in range(len(TASKS))])
        store.write_result("mask_iou", _name(m), {"tasks": list(TASKS), "matrix": iou.tolist()})
    store.write_table("mask_iou", _name("talos", "vs", "lota"),
                      pd.DataFrame({"task": list(TASKS), "iou": [0.31, 0.28, 0.35]}), methods=["talos", "lota"])

    # sharing
    for mode in ("prune", "perturb"):
        mat = np.array([[0.4 if i == j else 0.97 for j in range(3)] for i in range(3)])
        store.write_result("sharing", _name(mode), {"tasks": list(TASKS), "matrix": mat.tolist(), "fraction": 0.1})

    # linearization
    store.write_table("linearization", _name(), pd.DataFrame(
        [{"method": m, "task": t, "finetuned_acc": ft[m][t],
          "linearized_acc": ft[m][t] - (0.01 if m == "talos" else 0.2)} for m in METHODS for t in TASKS]))

    # preview (N examples per task, C classes): jvp of task t pushes its own labels up
    n, c = 48, 10
    arrays, labels = {}, {}
    eval_tasks = [*TASKS, CONTROL]
    for e in eval_tasks:
        y = rng.integers(0, c, size=n)
        labels[e] = y.tolist()
        onehot = np.eye(c, dtype=np.float32)[y]
        hint = 1.2 * onehot * (rng.random((n, 1)) < 0.3)
        arrays[f"base::{e}"] = (rng.normal(0, 1.0, (n, c)) + hint).astype(np.float32)
        for t in TASKS:
            own = 4.0 if t == e else 0.0
            arrays[f"jvp::{e}::{t}"] = (own * onehot + rng.normal(0, 0.8, (n, c))).astype(np.float32)
    from safetensors.numpy import save

    for m in METHODS:
        name = _name(m)
        scale = 1 / (1 - SPARSITY) if m == "talos" else 1.0
        atomic_write_bytes(root / "results" / "preview" / f"{name}.safetensors",
                           save({k: (v / scale if k.startswith("jvp") else v) for k, v in arrays.items()}))
        store.write_result("preview", name, {"tasks": list(TASKS), "eval_tasks": eval_tasks, "n_per_task": n,
                                             "labels": labels, "arrays": f"{name}.safetensors"})

    # per-example predictions (12 examples per task, thumbnails; predictions drift with α)
    from talos_core.evaluation.examples import ExamplesResult, save_examples

    n_ex, classes = 12, [f"class {k}" for k in range(10)]
    rx = np.random.default_rng(seed + 17)  # its own stream: the results written after these stay as they were
    evals = [*TASKS, CONTROL]
    for m in METHODS:
        grid = _grid(m)
        labels = {e: rx.integers(0, 10, n_ex) for e in evals}
        zero = {e: np.where(rx.random(n_ex) < 0.3, labels[e], rx.integers(0, 10, n_ex)) for e in evals}
        arrays = {f"pred::zero_shot::{e}": zero[e].astype(np.int32) for e in evals}
        arrays.update({f"thumb::{e}": rx.integers(0, 256, (n_ex, 16, 16, 3)).astype(np.uint8) for e in evals})
        for t in TASKS:
            frac = np.linspace(0, 1, len(grid))[:, None]
            arrays[f"pred::addition::{t}"] = np.where(rx.random((len(grid), n_ex)) < frac, labels[t],
                                                      zero[t]).astype(np.int32)
            for e in (t, CONTROL):
                flip = rx.random((len(grid), n_ex)) < frac * (0.8 if e == t else 0.1)
                arrays[f"pred::negation::{t}::{e}"] = np.where(flip, (labels[e] + 1) % 10, zero[e]).astype(np.int32)
            for e in TASKS:
                arrays[f"pred::single::{t}::{e}"] = (labels[e] if e == t else zero[e]).astype(np.int32)
        for e in evals:
            arrays[f"base::{e}"] = np.eye(10, dtype=np.float32)[zero[e]]
            for t in TASKS:
                push = np.eye(10, dtype=np.float32)[labels[e]] * (2.0 if e == t else 0.1)
                arrays[f"jvp::{e}::{t}"] = push / float(grid.max())
        meta = {"tasks": list(TASKS), "control_task": CONTROL, "eval_tasks": evals, "split": "test", "seed": 0,
                "points": n_ex, "n": {e: n_ex for e in evals},
                "indices": {e: list(range(0, 3 * n_ex, 3)) for e in evals},
                "labels": {e: labels[e].tolist() for e in evals}, "classes": {e: classes for e in evals},
                "modality": {e: "image" for e in evals}, "snippets": {},
                "addition_alphas": grid.tolist(), "negation_alphas": {t: grid.tolist() for t in TASKS},
                "eval_mode": "nonlinear"}
        save_examples(store, _name(m), ExamplesResult(meta, arrays), method=m, model=MODEL, suite=SUITE)

    # efficiency, comparison, sparsity ablation, selection, suite
    eff = []
    for m in METHODS:
        for t in TASKS:
            eff.append({"method": m, "task": t, "fwd_bwd_s_mean": 0.020 if m == "talos" else 0.030,
                        "fwd_bwd_s_std": 0.002, "opt_s_mean": 0.002 if m == "talos" else 0.008, "opt_s_std": 0.0005,
                        "calibration_s": 3.5 if m == "talos" else None, "train_s": 12.0,
                        "peak_memory_mb": 900 if m == "talos" else 1400,
                        "peak_memory_kind": "cpu_rss", "trainable_entries": 1000 if m == "talos" else 10000})
    store.write_table("efficiency", _name(), pd.DataFrame(eff))
    comp = []
    for m in METHODS:
        a = store.read_result("addition", _name(m))["summary"]
        ng = store.read_result("negation", _name(m))["summary"]
        comp.append({"method": m, "addition_abs": a["abs_acc"], "addition_norm": a["norm_acc"],
                     "negation_target": ng["target_acc"], "negation_control": ng["control_acc"],
                     "single_task_acc": float(np.mean(list(ft[m].values()))),
                     "zero_shot_acc": float(np.mean(list(zs.values()))),
                     "time_per_step_s": 0.022 if m == "talos" else 0.038,
                     "peak_memory_mb": 900 if m == "talos" else 1400})
    store.write_table("comparison", _name(), pd.DataFrame(comp))
    store.write_table("sparsity_ablation", _name("talos"), pd.DataFrame(
        [{"sparsity": s, "addition_abs": 0.6 + 0.2 * s, "addition_norm": 0.7 + 0.25 * s,
          "negation_target": 0.3 - 0.2 * s, "negation_control": 0.58, "single_task_acc": 0.95 - 0.05 * s}
         for s in (0.5, 0.9, 0.99)]))
    sel, values = [], (0.5, 0.9, 0.99)  # TaLoS sparsity chosen per task by validation negation
    for i, t in enumerate(TASKS):
        for j, k in enumerate(values):
            target = 0.2 + 0.05 * abs(i - j)
            sel.append({"task": t, "value": k, "best_alpha": round(0.5 / (1 - k), 4), "target_val_acc": target,
                        "control_val_acc": 0.57, "score": target, "single_val_acc": 0.9, "chosen": i == j,
                        "run_id": f"run-{t}-{k}"})
    store.write_table("selection", _name("talos"), pd.DataFrame(sel), param="sparsity", values=list(values),
                      choices={t: {"sparsity": values[i]} for i, t in enumerate(TASKS)},
                      overrides={t: {"sparsity": values[i]} for i, t in enumerate(TASKS)},
                      runs={t: f"run-{t}-{values[i]}" for i, t in enumerate(TASKS)},
                      rule="lowest validation target accuracy of task negation with the control at >= 0.95 x "
                           "its zero-shot accuracy", keep=0.95, control_task=CONTROL, method="talos", model=MODEL,
                      suite=SUITE)
    for m in METHODS:  # saturating learning curves, every 10 steps up to 60
        curve = [{"method": m, "task": t, "step": k,
                  "val_acc": round(zs[t] + (ft[m][t] - zs[t]) * (1 - 0.5 ** (k / 10)), 4)}
                 for t in TASKS for k in range(10, 61, 10)]
        store.write_table("learning_curve", _name(m), pd.DataFrame(curve), budget=50, rule="synthetic fixture",
                          tolerance=0.01, eval_every=10, steps=60)
    # the learning rate re-checked at the budget: TaLoS's own 1e-3 against 1e-4 on the first two tasks
    check = [{"task": t, "lr": lr, "val_acc": acc, "run_id": f"run-{t}-lr{lr:g}", "steps": 50}
             for lr, accs in ((1e-4, (0.6, 0.7)), (1e-3, (0.8, 0.7))) for t, acc in zip(TASKS[:2], accs)]
    store.write_table("lr_check", _name("talos"), pd.DataFrame(check), suite_lr=1e-3, best_lr=1e-3, agrees=True,
                      means=[{"lr": 1e-4, "val_acc": 0.65}, {"lr": 1e-3, "val_acc": 0.75}], rule="synthetic fixture",
                      budget=50, values=[1e-4, 1e-3], tasks=list(TASKS[:2]), row="talos-k0.9", method="talos",
                      model=MODEL, suite=SUITE)
    # TaLoS's rows under both α grids (the paper's stretched grid against the official code's 0…1)
    store.write_table("alpha_rule", _name("talos"), pd.DataFrame([
        {"rule": "paper", "alpha_max": 100.0, "addition_alpha": 1.0, "addition_abs": 0.74, "addition_norm": 0.95,
         "negation_target": 0.16, "negation_control": 0.62},
        {"rule": "unit", "alpha_max": 1.0, "addition_alpha": 0.95, "addition_abs": 0.74, "addition_norm": 0.95,
         "negation_target": 0.66, "negation_control": 0.67}]),
        negation_alphas={"paper": {t: 10.0 for t in TASKS}, "unit": {t: 1.0 for t in TASKS}},
        runs={t: f"run-{t}-0.9" for t in TASKS}, control_task=CONTROL, method="talos", model=MODEL, suite=SUITE)
    store.write_result("suite", SUITE, {"model": MODEL, "tasks": list(TASKS), "control_task": CONTROL,
                                        "methods": list(METHODS), "command": "synthetic fixture (tests)",
                                        "wall_time_s": 0.0, "device": "cpu", "created": "2025-01-01T00:00:00"})
    return root


# --------------------------------------------------------------------------------------------
# pytest fixtures
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def fixture_store(tmp_path_factory) -> Path:
    """The synthetic store (written once per test session)."""
    return write_fixture_store(tmp_path_factory.mktemp("dash-store") / "store")


def _store_params() -> list[str]:
    params = ["fixture"]
    extra = os.environ.get(TEST_STORE_ENV, "").strip()
    if extra:
        params.append(extra)
    return params


@pytest.fixture(scope="session", params=_store_params())
def dashboard_store(request, fixture_store) -> Path:
    """The synthetic store, then (if ``$TALOS_DASHBOARD_TEST_STORE`` is set) the real store it names."""
    if request.param == "fixture":
        return fixture_store
    path = Path(request.param)
    path = path if path.is_absolute() else REPO / path
    if not (path / "results").is_dir():
        pytest.skip(f"{TEST_STORE_ENV}={request.param} has no results/ folder")
    return path


@contextmanager
def app_server(store: Path, log_path: Path, *, env: dict[str, str] | None = None) -> Iterator[str]:
    """``streamlit run dashboard/app.py`` on ``store`` (as docs/dashboard.md says) on a free port; yields its URL and
    kills its process group afterwards. The browser tests' ``server`` fixtures; ``env``: more of the server's
    environment (``TALOS_DASHBOARD_READ_ONLY``, ...)."""
    from bench.server import free_port, stop_server, wait_healthy

    port = free_port()
    env = dict(os.environ, TALOS_STORE=str(store), PYTHONUNBUFFERED="1", **(env or {}))
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(REPO / "dashboard" / "app.py"),
                                 "--server.headless", "true", "--server.port", str(port),
                                 "--browser.gatherUsageStats", "false"],
                                cwd=str(REPO), env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_healthy(port, proc)
            yield f"http://127.0.0.1:{port}"
        finally:
            stop_server(proc)
