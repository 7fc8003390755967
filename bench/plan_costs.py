"""Measure cells of the ``--plan`` cost table (``talos_core/suites/plan_costs.json``): seconds per training iteration,
and with ``--eval`` seconds per example of each evaluation pass.

``python -m bench.plan_costs [--models tiny-text,tiny-clip,tiny-t5] [--methods ...] [--batch 8] [--steps 20]
[--device cpu] [--name cpu-2core] [--tasks T1,T2,...] [--batching random|length] [--max-train 256] [--json out.json]``

Each (model, method) is one real fine-tuning run through :func:`talos_core.pipeline.run_finetune` into a throw-away
store (the suite's own code path: calibration, masks, the method's forward), on the model's first task of its
modality; the cell is the run's mean forward+backward time plus its mean optimizer-step time (``finetune``'s
per-step timings, CUDA synchronized), i.e. one iteration, as in ``bench.bench_table3``. With ``--tasks`` the cell is
the mean over those tasks (a text step costs its padded tokens, which differ 6x between the text suite's tasks:
measure a suite's cell on all its tasks). The rows are printed as
JSON cells to paste into the table, with the device name, torch version and date as their ``source``.

``--fit STORE SUITE`` fits the ``forward`` and ``jvp`` evaluation cells from a suite run's step times instead
(:func:`fit_record`). ``--eval`` measures, per model, the evaluation cells (``eval_cells``) that price ``--plan``'s
evaluation work (:mod:`talos_core.suites.workload`): ``forward`` (an edited model's prediction,
:func:`~talos_core.inference.forward.predict_logits`, also used for θ0 and the linearized base), ``jvp`` (a
linearized prediction with a dense vector: one JVP at θ0) and ``grad`` (a Fisher calibration round,
:func:`~talos_core.fisher.fisher_scores`, over every maskable tensor), in seconds per example, the mean over
``--tasks`` (texts cost their tokens: measure a suite's cell on its tasks and control task), on up to ``--examples``
test / validation examples each, batch 128, after one warm-up batch.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

TASK = {"image": "digits", "text": "drug-reviews"}


def measure(model: str, method: str, *, batch: int, steps: int, device: str, tasks: list[str] | None = None,
            batching: str = "random", max_train: int = 256) -> dict:
    import torch

    from talos_core.models import get_model_spec
    from talos_core.pipeline import CalibrationSettings, FinetuneRequest, model_modality, run_finetune
    from talos_core.store import Store

    tasks = tasks or [TASK[model_modality(get_model_spec(model))]]
    per_task, precision = [], None
    for task in tasks:
        with tempfile.TemporaryDirectory() as tmp:
            req = FinetuneRequest(model=model, task=task, method=method, steps=steps, batch_size=batch,
                                  max_train=max_train, max_val=32, max_test=32,
                                  calibration=CalibrationSettings(calib_samples=16), device=device,
                                  batching=batching)
            run = run_finetune(req, Store(tmp), progress=False)
            t = run.manifest.timings
            per_task.append(t["fwd_bwd_s_mean"] + t["opt_s_mean"])
            precision = run.manifest.train_precision
    name = torch.cuda.get_device_name() if device.startswith("cuda") else "CPU"
    each = ", ".join(f"{s:.3f}" for s in per_task)
    on = tasks[0] if len(tasks) == 1 else f"the mean over {', '.join(tasks)} ({each})"
    return {"model": model, "method": method, "batch_size": batch,
            "s_per_iter": round(sum(per_task) / len(per_task), 4),
            "source": f"bench.plan_costs, {name}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
                      f"{time.strftime('%Y-%m-%d')}, {steps} steps, {batching} batches of {max_train} training "
                      f"examples, on {on}, precision {precision}"}


def measure_eval(model: str, *, tasks: list[str] | None, device: str, examples: int = 256) -> list[dict]:
    """The ``forward``, ``jvp`` and ``grad`` cells of ``model`` (seconds per example, the mean over ``tasks``)."""
    import torch

    from talos_core.fisher import fisher_scores
    from talos_core.inference.forward import predict_logits
    from talos_core.inference.runtime import prepared_model, resolve_device
    from talos_core.masks import calibration_split
    from talos_core.models import get_model_spec
    from talos_core.pipeline import model_modality
    from talos_core.tasks import get_task, load_task
    from talos_core.vectors import TaskVector

    tasks = tasks or [TASK[model_modality(get_model_spec(model))]]
    dev = resolve_device(device)
    per: dict[str, list[float]] = {"forward": [], "jvp": [], "grad": []}
    for name in tasks:
        spec = get_task(name)
        data = load_task(name, max_val=examples, max_test=examples)
        m = prepared_model(model, spec, dev)
        g = torch.Generator().manual_seed(0)
        names = m.maskable_names()
        params = dict(m.named_parameters())
        tv = TaskVector.from_dense({n: 1e-3 * torch.randn(params[n].shape, generator=g) for n in names})
        warm = data.test.take(list(range(min(8, len(data.test)))))
        for mode in ("nonlinear", "linearized"):
            predict_logits(m, spec, warm, [(tv, 1.0)], mode=mode)
            t0 = time.perf_counter()
            predict_logits(m, spec, data.test, [(tv, 1.0)], mode=mode)
            per["forward" if mode == "nonlinear" else "jvp"].append((time.perf_counter() - t0) / len(data.test))
        calib = calibration_split(data.val, examples, 0)
        t0 = time.perf_counter()
        fisher_scores(m, calib, spec, names, generator=torch.Generator().manual_seed(0))
        per["grad"].append((time.perf_counter() - t0) / len(calib))
    name = torch.cuda.get_device_name() if device.startswith("cuda") else "CPU"
    out = []
    for kind, vals in per.items():
        each = ", ".join(f"{v * 1000:.2f}" for v in vals)
        on = tasks[0] if len(tasks) == 1 else f"the mean over {', '.join(tasks)} ({each} ms)"
        out.append({"model": model, "kind": kind, "s_per_example": round(sum(vals) / len(vals), 5),
                    "source": f"bench.plan_costs --eval, {name}, torch {torch.__version__}, "
                              f"{torch.get_num_threads()} threads, {time.strftime('%Y-%m-%d')}, up to {examples} "
                              f"examples per task, batch 128, on {on}"})
    return out


def computed_work(counted: dict, recorded: dict | None) -> dict:
    """``counted`` (a step's work as :mod:`talos_core.suites.workload` counts it) with the forwards the run's logits
    cache served (``recorded["cached"]``) taken off: what the step computed, to compare with ``recorded``."""
    hits = (recorded or {}).get("cached", 0)
    return {**counted, "forward": counted.get("forward", 0) - hits} if hits else counted


def fit_record(store: str, suite: str) -> list[dict]:
    """Evaluation cells fitted from a finished (or partial) suite run: the record's step times divided by the
    examples :mod:`talos_core.suites.workload` counts for each step (the same counts ``--plan`` prices), over the
    steps that train nothing. ``forward``: the median over steps that only run edited forwards; ``jvp``: the median
    over steps with JVPs of (time − their forward and base passes at the ``forward`` cell) / JVPs. The cell is the
    cost under the run's own conditions (its workers sharing the machine), and the spread of the per-step values says
    how well counts explain step times."""
    import statistics

    from talos_core.store import Store
    from talos_core.suites import get_suite
    from talos_core.suites.plan import recount

    st = Store(store)
    meta = st.read_result("suite", suite)
    spec, scale = get_suite(suite), meta["scale"]
    # the forwards the logits cache served cost no model pass: they are left out of the step's count
    done = [(r["label"], r["seconds"], computed_work(r["counted"], r["recorded"])) for r in recount(st, suite)
            if r["seconds"] is not None and not r["trains"]]
    fwd = [t / w["forward"] for _, t, w in done
           if w.get("forward", 0) >= 1000 and not (w.get("base") or w.get("jvp") or w.get("grad"))]
    if not fwd:
        raise SystemExit(f"the record of {suite!r} in {store} has no finished forward-only evaluation step to fit")
    f = statistics.median(fwd)
    jvp = [(t - (w.get("forward", 0) + w.get("base", 0)) * f) / w["jvp"] for _, t, w in done
           if w.get("jvp", 0) >= 1000 and not w.get("grad")]
    when = (meta.get("sessions") or [{}])[0].get("started", "?")[:10]
    src = (f"bench.plan_costs --fit: step times of the {suite} suite record ({scale}, started {when}, "
           f"{meta.get('torch_threads')} thread(s) per worker, eval precision {meta.get('eval_precision')}) over the "
           f"examples talos_core/suites/workload.py counts; median of")
    out = [{"model": spec.model, "kind": "forward", "s_per_example": round(f, 5),
            "source": f"{src} {len(fwd)} forward-only steps (range {min(fwd) * 1000:.2f}–{max(fwd) * 1000:.2f} ms)"}]
    if jvp:
        j = statistics.median(jvp)
        out.append({"model": spec.model, "kind": "jvp", "s_per_example": round(j, 5),
                    "source": f"{src} {len(jvp)} steps with JVPs (range {min(jvp) * 1000:.2f}–{max(jvp) * 1000:.2f} "
                              f"ms), their forward and base passes at the forward cell"})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="tiny-text,tiny-clip,tiny-t5")
    p.add_argument("--methods", default="nonlinear,linearized,llora,lota,talos")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--device", default="cpu")
    p.add_argument("--name", default="cpu-2core", help="the table's device key for these cells")
    p.add_argument("--tasks", default=None, help="comma-separated tasks; the cell is their mean")
    p.add_argument("--batching", default="random", choices=("random", "length"))
    p.add_argument("--max-train", type=int, default=256)
    p.add_argument("--json", default=None)
    p.add_argument("--eval", action="store_true", help="measure the evaluation cells (seconds per example) instead")
    p.add_argument("--examples", type=int, default=256, help="--eval: examples per task")
    p.add_argument("--fit", nargs=2, metavar=("STORE", "SUITE"), default=None,
                   help="fit the evaluation cells from a suite run's record instead (fit_record)")
    a = p.parse_args(argv)
    tasks = a.tasks.split(",") if a.tasks else None
    if a.fit:
        found = fit_record(*a.fit)
    elif a.eval:
        found = [c for model in a.models.split(",")
                 for c in measure_eval(model, tasks=tasks, device=a.device, examples=a.examples)]
    else:
        found = (measure(model, method, batch=a.batch, steps=a.steps, device=a.device, tasks=tasks,
                         batching=a.batching, max_train=a.max_train)
                 for model in a.models.split(",") for method in a.methods.split(","))
    cells = []
    for c in found:  # printed as each is measured
        cells.append({**c, "device": a.name})
        print(json.dumps(cells[-1]), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(cells, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
