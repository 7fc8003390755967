"""Measure cells of the ``--plan`` cost table (``talos_core/suites/plan_costs.json``): seconds per training iteration.

``python -m bench.plan_costs [--models tiny-text,tiny-clip,tiny-t5] [--methods ...] [--batch 8] [--steps 20]
[--device cpu] [--name cpu-2core] [--json out.json]``

Each (model, method) is one real fine-tuning run through :func:`talos_core.pipeline.run_finetune` into a throw-away
store (the suite's own code path: calibration, masks, the method's forward), on the model's first task of its
modality; the cell is the run's mean forward+backward time plus its mean optimizer-step time (``finetune``'s
per-step timings, CUDA synchronized), i.e. one iteration, as in ``bench.bench_table3``. The rows are printed as
JSON cells to paste into the table, with the device name, torch version and date as their ``source``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

TASK = {"image": "digits", "text": "drug-reviews"}


def measure(model: str, method: str, *, batch: int, steps: int, device: str) -> dict:
    import torch

    from talos_core.models import get_model_spec
    from talos_core.pipeline import FinetuneRequest, model_modality, run_finetune
    from talos_core.store import Store

    task = TASK[model_modality(get_model_spec(model))]
    with tempfile.TemporaryDirectory() as tmp:
        req = FinetuneRequest(model=model, task=task, method=method, steps=steps, batch_size=batch, max_train=256,
                              max_val=32, max_test=32, calib_samples=16, device=device)
        run = run_finetune(req, Store(tmp), progress=False)
        t = run.manifest.timings
        name = torch.cuda.get_device_name() if device.startswith("cuda") else "CPU"
        return {"model": model, "method": method, "batch_size": batch,
                "s_per_iter": round(t["fwd_bwd_s_mean"] + t["opt_s_mean"], 4),
                "source": f"bench.plan_costs, {name}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
                          f"{time.strftime('%Y-%m-%d')}, {steps} steps on {task}, precision "
                          f"{run.manifest.train_precision}"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="tiny-text,tiny-clip,tiny-t5")
    p.add_argument("--methods", default="nonlinear,linearized,llora,lota,talos")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--device", default="cpu")
    p.add_argument("--name", default="cpu-2core", help="the table's device key for these cells")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    cells = []
    for model in a.models.split(","):
        for method in a.methods.split(","):
            c = {**measure(model, method, batch=a.batch, steps=a.steps, device=a.device), "device": a.name}
            print(json.dumps(c), flush=True)
            cells.append(c)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(cells, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
