"""Benchmark: padded tokens per MiniLM fine-tuning step, random vs length-grouped batches (what
grouping by length saves).

``python -m bench.bench_batching [--steps 400] [--batch-size 32] [--max-train 20000] [--tasks ...]``

A MiniLM step costs its *padded* tokens (batches are padded to their longest input; measured ≈ 1,300 tokens/s
per CPU thread), so the ratio of padded tokens per step, random / grouped, is the step-time speed-up that
length grouping (:func:`talos_core.training.grouped_batch_indices`) gives, with the same examples per epoch.
The counts are exact (the tokenizer's lengths after truncation at 128, the batches the training loop draws):
no timing noise from a shared machine. Printed per task of the text suite: real tokens, padded tokens with
each batching, padding fraction and the ratio.
"""

from __future__ import annotations

import argparse

import numpy as np


def padded_tokens(lengths: np.ndarray, batches: list[np.ndarray]) -> int:
    """Σ over batches of batch size × longest input: what dynamic padding makes a step process.

    >>> padded_tokens(np.array([3, 1, 2, 2]), [np.array([0, 1]), np.array([2, 3])])
    10
    """
    return int(sum(len(b) * int(lengths[b].max()) for b in batches))


def measure(lengths: np.ndarray, steps: int, batch_size: int, seed: int = 0) -> dict:
    from talos_core.training import batch_indices, grouped_batch_indices

    rand = [batch_indices(s, len(lengths), batch_size, seed) for s in range(steps)]
    grouped = [grouped_batch_indices(s, lengths, batch_size, seed) for s in range(steps)]
    real = int(sum(int(lengths[b].sum()) for b in rand))
    p_rand, p_grouped = padded_tokens(lengths, rand), padded_tokens(lengths, grouped)
    return {"real": real, "random": p_rand, "grouped": p_grouped, "pad_random": 1 - real / p_rand,
            "pad_grouped": 1 - int(sum(int(lengths[b].sum()) for b in grouped)) / p_grouped,
            "ratio": p_rand / p_grouped}


def main(argv: list[str] | None = None) -> None:
    from talos_core.models import load_model
    from talos_core.suites import get_suite
    from talos_core.tasks import get_task, load_task

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-train", type=int, default=20000)
    p.add_argument("--tasks", default=",".join(get_suite("text").tasks))
    a = p.parse_args(argv)
    model = load_model("minilm-l6")
    print(f"MiniLM-L6, batch {a.batch_size}, {a.steps} steps per task, max_train {a.max_train}, truncation at "
          f"{model.max_length} tokens\n")
    print("| task | train examples | real tokens | padded, random | padded, grouped | padding random → grouped "
          "| ratio (random / grouped) |")
    print("|---|---|---|---|---|---|---|")
    total_r = total_g = 0
    for t in a.tasks.split(","):
        data = load_task(t, max_train=a.max_train, max_val=1, max_test=1)
        lengths = model.input_lengths(data.train.inputs, get_task(t))
        m = measure(lengths, a.steps, a.batch_size)
        total_r, total_g = total_r + m["random"], total_g + m["grouped"]
        print(f"| {t} | {len(lengths):,} | {m['real']:,} | {m['random']:,} | {m['grouped']:,} | "
              f"{m['pad_random']:.0%} → {m['pad_grouped']:.0%} | {m['ratio']:.2f}× |")
    print(f"\nall tasks: {total_r / total_g:.2f}× fewer padded tokens per step with length grouping")


if __name__ == "__main__":
    main()
