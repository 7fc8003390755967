"""The suite's logits cache (talos_core/inference/cache.py): a hit is the exact logits a re-computation gives, and
anything the numbers depend on (the edit's vectors and α, the examples, the head) misses."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_text import CONTROL, MODEL, TASKS

from talos_core.evaluation import arithmetic as arith
from talos_core.evaluation.context import EvalContext
from talos_core.inference import cache, tally
from talos_core.vectors import TaskVector

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def ctx() -> EvalContext:
    return EvalContext.for_model(MODEL, [*TASKS, CONTROL], max_val=16, max_test=24)


def _vector(ctx: EvalContext, seed: int, scale: float = 0.05) -> TaskVector:
    g = torch.Generator().manual_seed(seed)
    return TaskVector.from_dense({n: scale * torch.randn(p.shape, generator=g)
                                  for n, p in ctx.model.named_parameters() if p.ndim == 2 and "encoder" in n})


def test_a_hit_is_the_logits_a_recomputation_gives(ctx, tmp_path):
    tv = _vector(ctx, 0)
    items = [(TASKS[0], "val"), (CONTROL, "test")]
    plain = ctx.logits_many(items, [(tv, 0.7)])
    with cache.logits_cache(tmp_path):
        before = tally.snapshot()
        first = ctx.logits_many(items, [(tv, 0.7)])
        computed = tally.since(before)
        before = tally.snapshot()
        again = ctx.logits_many(items[::-1], [(tv, 0.7)])  # the same splits, asked in another order
        served = tally.since(before)
    n = sum(len(ctx.split(t, s)) for t, s in items)
    assert computed["forward"] == n and computed["cached"] == 0
    assert served["forward"] == 0 and served["cached"] == n
    for a, b in zip(plain, first):
        assert torch.equal(a, b)
    assert torch.equal(again[0], first[1]) and torch.equal(again[1], first[0])
    assert len(list(tmp_path.rglob("*.safetensors"))) == 1  # one file per edit


def test_what_the_numbers_depend_on_misses(ctx, tmp_path):
    tv, other = _vector(ctx, 0), _vector(ctx, 1)
    item = [(TASKS[0], "val")]
    with cache.logits_cache(tmp_path):
        ctx.logits_many(item, [(tv, 0.5)])
        for terms, items in ([[(tv, 0.55)], item],  # another α
                             [[(other, 0.5)], item],  # another vector
                             [[(tv, 0.5), (other, 0.5)], item],  # one more term
                             [[(tv, 0.5)], [(TASKS[1], "val")]],  # another task and head
                             [[(tv, 0.5)], [(TASKS[0], ctx.split(TASKS[0], "val").take(np.arange(8)))]]):
            before = tally.snapshot()
            ctx.logits_many(items, terms)
            assert tally.since(before)["cached"] == 0, (terms, items)
        copy = TaskVector.from_dense({n: tv.dense(n).clone() for n in tv.names()})  # same content, new object
        before = tally.snapshot()
        ctx.logits_many(item, [(copy, 0.5)])
        assert tally.since(before)["cached"] == len(ctx.split(TASKS[0], "val"))


def test_off_by_default_and_for_linearized_and_theta0(ctx, tmp_path):
    tv = _vector(ctx, 2)
    assert cache.active() is None
    ctx.logits_many([(TASKS[0], "val")], [(tv, 0.5)])
    with cache.logits_cache(tmp_path):
        ctx.logits_many([(TASKS[0], "val")], [(tv, 0.5)], mode="linearized")
        ctx.logits_many([(TASKS[0], "val")], [(tv, 0.0)])  # θ0 itself: memoized per process elsewhere
    assert not list(tmp_path.rglob("*.safetensors"))


def test_a_damaged_file_is_a_miss_and_is_rewritten(ctx, tmp_path):
    tv = _vector(ctx, 3)
    item = [(CONTROL, "val")]
    with cache.logits_cache(tmp_path):
        want = ctx.logits_many(item, [(tv, 0.3)])
        (path,) = tmp_path.rglob("*.safetensors")
        path.write_bytes(b"not a safetensors file")
        before = tally.snapshot()
        got = ctx.logits_many(item, [(tv, 0.3)])
        assert tally.since(before)["forward"] == len(ctx.split(CONTROL, "val"))
        assert torch.equal(got[0], want[0]) and cache.read(path.stem)


def test_an_alpha_curve_through_the_cache_equals_one_without(ctx, tmp_path):
    tv = _vector(ctx, 4)
    items, alphas = [(TASKS[0], "val"), (CONTROL, "val")], [0.0, 0.25, 0.5]
    plain = arith.alpha_curve(ctx, items, tv, alphas, sign=-1.0)
    with cache.logits_cache(tmp_path):
        cold = arith.alpha_curve(ctx, items, tv, alphas, sign=-1.0)
        warm = arith.alpha_curve(ctx, items, tv, alphas, sign=-1.0)
    assert np.array_equal(plain, cold) and np.array_equal(cold, warm)
