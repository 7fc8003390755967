"""Benchmark: what a MiniLM fine-tuning step and an evaluation pass cost, before and after batching by length.

``python -m bench.bench_text_costs [--tasks tweets,drug-reviews,fortune-topics] [--steps 8] [--examples 400]
[--batch 32] [--no-steps]``

Measured side by side in one process, one CPU thread, on all-MiniLM-L6-v2 with the text suite's real data:

* **Fine-tuning step** (non-linear FT, batch 32, the ``text`` ``full`` setting): ``--steps`` steps with random
  batches (before: ``batching="random"``) and as many with length-grouped batches (after: ``batching="length"``), the
  two runs alternated ``--reps`` times; the cell is the median over runs of ``finetune``'s mean forward+backward +
  optimizer time per step. Both draw batch ``s`` of the same seed's epoch, so they see the same examples per epoch.
* **Evaluation pass** (``predict`` over ``--examples`` test examples, batch ``--batch``, 32 by default as the suites
  evaluate on CPU): in the split's stored order, by character count (the order of 2026-11-25) and by token count
  (:func:`talos_core.inference.forward.eval_order` since 2026-11-26); predictions are compared (they must be
  equal: padding is masked).

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


def eval_seconds(model, task, split, *, order: str, batch: int) -> tuple[float, object]:
    """Seconds of one evaluation pass and its predictions, visiting ``split`` in ``order``: ``"stored"``,
    ``"chars"`` (by character count, the evaluation order before 2026-11-26) or ``"tokens"`` (by the model's token
    count: :func:`talos_core.inference.forward.eval_order` now)."""
    import numpy as np

    from talos_core.inference import forward

    original = forward.eval_order
    if order == "stored":
        forward.eval_order = lambda s, m=None, t=None: np.arange(len(s))
    elif order == "chars":
        forward.eval_order = lambda s, m=None, t=None: original(s)
    try:
        t0 = time.perf_counter()
        preds = forward.predict(model, task, split, batch_size=batch)
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
    p.add_argument("--batch", type=int, default=32, help="evaluation batch size (32: the suites' default on CPU)")
    p.add_argument("--no-steps", action="store_true", help="measure the evaluation pass only")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    print(machine_line("cpu"), "| all-MiniLM-L6-v2")
    print("\n| task | step, random batches (s) | step, length-grouped (s) | ratio | eval pass, stored order (s) "
          "| eval pass, by characters (s) | eval pass, by tokens (s) | ratio stored / tokens | ratio characters / "
          "tokens | same predictions |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in a.tasks.split(","):
        model, task, data = _setup(name, a.max_train, a.examples)
        rand, grouped = [], []
        ev: dict[str, list[float]] = {"stored": [], "chars": [], "tokens": []}
        same = True
        for _ in range(a.reps):
            if not a.no_steps:
                rand.append(step_seconds(model, task, data, batching="random", steps=a.steps))
                grouped.append(step_seconds(model, task, data, batching="length", steps=a.steps))
            preds = []
            for order in ev:
                t, pr = eval_seconds(model, task, data.test, order=order, batch=a.batch)
                ev[order].append(t)
                preds.append(pr)
            same = same and all(bool(np.array_equal(preds[0], pr)) for pr in preds[1:])
        if rand:
            r, g = statistics.median(rand), statistics.median(grouped)
            step = f"{r:.3f} | {g:.3f} | {r / g:.2f}×"
        else:
            step = "– | – | –"
        es, ec, et = (statistics.median(ev[k]) for k in ("stored", "chars", "tokens"))
        print(f"| {name} | {step} | {es:.2f} | {ec:.2f} | {et:.2f} | {es / et:.2f}× | {ec / et:.2f}× | {same} |",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
