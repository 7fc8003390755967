"""Measure cells of the ``--plan`` cost table (``talos_core/suites/plan_costs.json``): seconds per training iteration.

``python -m bench.plan_costs [--models tiny-text,tiny-clip,tiny-t5] [--methods ...] [--batch 8] [--steps 20]
[--device cpu] [--name cpu-2core] [--tasks T1,T2,...] [--batching random|length] [--max-train 256] [--json out.json]``

Each (model, method) is one real fine-tuning run through :func:`talos_core.pipeline.run_finetune` into a throw-away
store (the suite's own code path: calibration, masks, the method's forward), on the model's first task of its
modality; the cell is the run's mean forward+backward time plus its mean optimizer-step time (``finetune``'s
per-step timings, CUDA synchronized), i.e. one iteration, as in ``bench.bench_table3``. With ``--tasks`` the cell is
the mean over those tasks (a text step costs its padded tokens, which differ 6x between the text suite's tasks:
measure a suite's cell on all its tasks). The rows are printed as
JSON cells to paste into the table, with the device name, torch version and date as their ``source``.
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
    from talos_core.pipeline import FinetuneRequest, model_modality, run_finetune
    from talos_core.store import Store

    tasks = tasks or [TASK[model_modality(get_model_spec(model))]]
    per_task, precision = [], None
    for task in tasks:
        with tempfile.TemporaryDirectory() as tmp:
            req = FinetuneRequest(model=model, task=task, method=method, steps=steps, batch_size=batch,
                                  max_train=max_train, max_val=32, max_test=32, calib_samples=16, device=device,
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
    a = p.parse_args(argv)
    cells = []
    for model in a.models.split(","):
        for method in a.methods.split(","):
            c = {**measure(model, method, batch=a.batch, steps=a.steps, device=a.device,
                           tasks=a.tasks.split(",") if a.tasks else None, batching=a.batching,
                           max_train=a.max_train), "device": a.name}
            print(json.dumps(c), flush=True)
            cells.append(c)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(cells, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
