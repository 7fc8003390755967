"""Benchmark: what a MiniLM fine-tuning step and an evaluation pass cost, before and after issue 30's batching.

``python -m bench.bench_text_costs [--tasks tweets,drug-reviews,fortune-topics] [--steps 8] [--examples 400]``

Measured side by side in one process, one CPU thread, on all-MiniLM-L6-v2 with the text suite's real data:

* **Fine-tuning step** (non-linear FT, batch 32, the ``text`` ``full`` setting): ``--steps`` steps with random
  batches (before: ``batching="random"``) and as many with length-grouped batches (after: ``batching="length"``), the
  two runs alternated ``--reps`` times; the cell is the median over runs of ``finetune``'s mean forward+backward +
  optimizer time per step. Both draw batch ``s`` of the same seed's epoch, so they see the same examples per epoch.
* **Evaluation pass** (``predict`` over ``--examples`` test examples, batch 128): in the split's stored order
  (before) and in :func:`talos_core.inference.forward.eval_order` (after: by length); predictions are compared
  (they must be equal: padding is masked).

A step costs its padded tokens, so the ratios follow ``bench.bench_batching``'s token counts; this measures them.
"""

from __future__ import annotations

import argparse
import statistics
import time


def _setup(task_name: str, max_train: int, max_test: int):
    from talos_core.models import load_model
    from talos_core.tasks import get_task, load_task

    model = load_model("minilm-l6")
    task = get_task(task_name)
    model.set_head(model.build_head(task), task.name)
    data = load_task(task_name, max_train=max_train, max_val=32, max_test=max_test)
    return model, task, data


def step_seconds(model, task, data, *, batching: str, steps: int) -> float:
    """Mean seconds per fine-tuning step (forward+backward + optimizer); ``finetune`` restores θ0 at the end."""
    from talos_core.training import TrainConfig, finetune

    plan = {n: None for n, _ in model.named_parameters()}
    cfg = TrainConfig(steps=steps, batch_size=32, lr=1e-4, warmup_steps=0, batching=batching)
    t = finetune(model, data.train, task, plan, cfg, progress=False).timings
    return t["fwd_bwd_s_mean"] + t["opt_s_mean"]


def eval_seconds(model, task, split, *, by_length: bool) -> tuple[float, object]:
    """Seconds of one evaluation pass and its predictions, in stored order or by length."""
    import numpy as np

    from talos_core.inference import forward

    original = forward.eval_order
    if not by_length:
        forward.eval_order = lambda s: np.arange(len(s))
    try:
        t0 = time.perf_counter()
        preds = forward.predict(model, task, split)
        return time.perf_counter() - t0, preds
    finally:
        forward.eval_order = original


def main(argv: list[str] | None = None) -> int:
    import numpy as np
    import torch

    from bench.common import machine_line

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", default="tweets,drug-reviews,fortune-topics")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--examples", type=int, default=400)
    p.add_argument("--max-train", type=int, default=20000)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    print(machine_line("cpu"), "| all-MiniLM-L6-v2")
    print("\n| task | step, random batches (s) | step, length-grouped (s) | ratio | eval pass, stored order (s) "
          "| eval pass, by length (s) | ratio | same predictions |")
    print("|---|---|---|---|---|---|---|---|")
    for name in a.tasks.split(","):
        model, task, data = _setup(name, a.max_train, a.examples)
        rand, grouped, ev_before, ev_after = [], [], [], []
        same = True
        for _ in range(a.reps):
            rand.append(step_seconds(model, task, data, batching="random", steps=a.steps))
            grouped.append(step_seconds(model, task, data, batching="length", steps=a.steps))
            tb, pb = eval_seconds(model, task, data.test, by_length=False)
            ta, pa = eval_seconds(model, task, data.test, by_length=True)
            ev_before.append(tb)
            ev_after.append(ta)
            same = same and bool(np.array_equal(pb, pa))
        r, g = statistics.median(rand), statistics.median(grouped)
        eb, ea = statistics.median(ev_before), statistics.median(ev_after)
        print(f"| {name} | {r:.3f} | {g:.3f} | {r / g:.2f}× | {eb:.2f} | {ea:.2f} | {eb / ea:.2f}× | {same} |",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
