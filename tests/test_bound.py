"""The exact-gradient bound (``bench/bound.py``): hand-made modules with known multiply-add and byte counts,
autograd's own count (``FlopCounterMode``) on products it sees, and the registry's tiny models."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from bench.bound import exact_bound, step_cost


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)), torch.randn(5, 4)


def test_two_layer_mlp_known_counts():
    net, x = _mlp()
    fwd = 5 * 4 * 8 + 5 * 8 * 3  # 160 + 120
    nl = step_cost(net, lambda: net(x), None)
    # layer 2: dX 120 (its input depends on layer 1's parameters), dW 120; layer 1: dW 160, no dX (raw input)
    assert (nl.forward, nl.input_grad, nl.weight_grad) == (fwd, 120, 280)
    assert nl.macs == 680
    # mask on the last layer only: the backward stops there — no dX of layer 2, nothing of layer 1
    last = torch.zeros(3, 8, dtype=torch.bool)
    last[1, :2] = True  # one of three rows touched
    ts = step_cost(net, lambda: net(x), {"2.weight": last})
    assert (ts.forward, ts.input_grad, ts.weight_grad, ts.weight_grad_rows) == (fwd, 0, 120, 40)
    assert (ts.macs, ts.macs_rows) == (400, 320)
    # mask on the first layer only: layer 2's activation gradient is still needed, its weight gradient is not
    first = step_cost(net, lambda: net(x), {"0.weight": None})
    assert (first.input_grad, first.weight_grad, first.macs) == (120, 160, 560)


def test_two_layer_mlp_memory_accounting():
    net, x = _mlp()
    nl = step_cost(net, lambda: net(x), None)
    params = (4 * 8 + 8 + 8 * 3 + 3) * 4
    assert nl.param_bytes == params and nl.grad_bytes == params
    assert nl.optimizer_bytes == 2 * params and nl.snapshot_bytes == params
    # kept for the backward: x (for dW1) and ReLU's output (for ReLU's and layer 2's backward), once each
    assert nl.activation_bytes == (5 * 4 + 5 * 8) * 4
    mask = torch.zeros(3, 8, dtype=torch.bool)
    mask[0, 0] = mask[2, 5] = True
    ts = step_cost(net, lambda: net(x), {"2.weight": mask})
    assert ts.activation_bytes == 5 * 8 * 4  # only layer 2's input; layer 1 and the ReLU keep nothing
    assert ts.grad_bytes == 3 * 8 * 4  # a full-size gradient of the one touched tensor
    assert ts.optimizer_bytes == 2 * (2 * 4 + 8)  # two compact moments + int64 index
    assert ts.snapshot_bytes == 2 * (4 + 8)
    assert ts.trainable_entries == 2
    assert ts.memory_bytes == params + 160 + 96 + 32 + 24


def _autograd_macs(net, x, plan) -> int:
    """Multiply-adds autograd actually runs for one forward + backward (``FlopCounterMode`` / 2)."""
    for n, p in net.named_parameters():
        p.requires_grad_(plan is None or n in plan)
    counter = FlopCounterMode(display=False)
    with counter:
        net(x).pow(2).sum().backward()
    for p in net.parameters():
        p.grad = None
        p.requires_grad_(True)
    return counter.get_total_flops() // 2


@pytest.mark.parametrize("which", [None, "first", "middle", "last"])
def test_counts_equal_what_autograd_runs_for_linear_and_conv(which):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2), nn.ReLU(), nn.Conv2d(4, 6, 3), nn.Flatten(), nn.Linear(96, 2))
    x = torch.randn(2, 3, 14, 14)
    weights = {"first": "0.weight", "middle": "2.weight", "last": "4.weight"}
    plan = None if which is None else {weights[which]: None}
    assert step_cost(net, lambda: net(x), plan).macs == _autograd_macs(net, x, plan)


def test_multi_head_attention_counts_projections_and_both_attention_products():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = torch.randn(2, 3, 8)

    def fwd():
        return mha(x, x, x, need_weights=False)[0]

    rows = 2 * 3
    in_proj, out_proj = rows * 8 * 24, rows * 8 * 8
    qk = av = 2 * 2 * 3 * 3 * 4  # batch · heads · L · S · head dim
    nl = step_cost(mha, fwd, None)
    assert nl.forward == in_proj + qk + av + out_proj
    # dQ, dK (QKᵀ), dP, dV (AV), dX of the out-projection; the raw input needs no gradient
    assert nl.input_grad == 2 * qk + 2 * av + out_proj
    assert nl.weight_grad == in_proj + out_proj
    # only the out-projection trainable: the attention and the in-projection need no backward at all
    ts = step_cost(mha, fwd, {"out_proj.weight": None})
    assert (ts.input_grad, ts.weight_grad) == (0, out_proj)
    # the in-projection's K rows only (a calibrated-mask pattern): Q, K and V slices all need gradients
    mask = torch.zeros(24, 8, dtype=torch.bool)
    mask[8:16] = True
    kk = step_cost(mha, fwd, {"in_proj_weight": mask})
    assert kk.input_grad == nl.input_grad and kk.weight_grad == in_proj and kk.weight_grad_rows == in_proj // 3


def test_flags_restored_and_unknown_names_refused():
    net, x = _mlp()
    net[0].weight.requires_grad_(False)
    step_cost(net, lambda: net(x), {"2.weight": None})
    assert [p.requires_grad for p in net.parameters()] == [False, True, True, True]
    with pytest.raises(ValueError, match="does not have"):
        step_cost(net, lambda: net(x), {"nope": None})


@pytest.mark.parametrize("name", ["tiny-clip", "tiny-text", "tiny-t5"])
def test_bound_on_registry_models(tiny_setup, name):
    model, task, data = tiny_setup[name]
    part = data.train.take(list(range(8)))
    batch = model.prepare(part.inputs, task)
    names = model.maskable_names()
    full = {n: torch.ones_like(p, dtype=torch.bool) for n, p in model.named_parameters() if n in names}
    same = exact_bound(model, lambda: model(**batch), full)
    maskable_all = step_cost(model, lambda: model(**batch), {n: None for n in names})
    assert same["talos"]["macs"] == maskable_all.macs and same["speedup"] >= 1.0
    # a mask on the last maskable tensor only: forward + that tensor's weight gradient + the little after it
    gen = torch.Generator().manual_seed(0)
    last = {n: torch.zeros_like(m) for n, m in full.items()}
    last[names[-1]] = torch.rand(last[names[-1]].shape, generator=gen) < 0.5
    out = exact_bound(model, lambda: model(**batch), last)
    assert out["talos"]["forward"] == out["nonlinear"]["forward"]
    assert out["talos"]["macs"] < 1.2 * out["talos"]["forward"]
    assert 1.0 < out["speedup"] <= out["forward_floor"]
    assert out["talos"]["memory_bytes"] < out["nonlinear"]["memory_bytes"]
    assert out["talos"]["activation_bytes"] < out["nonlinear"]["activation_bytes"]


def test_table3_goals_table_reports_the_measured_fraction_of_the_bound():
    """``bench_table3 --bound``: the goals table gains the bound and measured / bound (fwd+bwd speed-ups)."""
    from bench.bench_table3 import goals_table

    row = {"iter_s": 0.2, "fwd_bwd_s": 0.19, "opt_s": 0.01, "peak_mb": 1000.0}
    res = {"device_name": "GPU", "model": "clip-vit-l-14-random",
           "methods": {"nonlinear": row, "talos": {**row, "iter_s": 0.16, "fwd_bwd_s": 0.152, "opt_s": 0.008,
                                                   "peak_mb": 700.0}}}
    plain = goals_table([res])
    assert "exact-gradient bound" not in plain
    table = goals_table([{**res, "bound": {"speedup": 1.25, "speedup_rows": 1.3, "memory_ratio": 0.6,
                                           "forward_floor": 3.0}}])
    header, _, line = table.splitlines()[2:5]
    assert header.endswith("| exact-gradient bound (fwd+bwd) | measured / bound (goal ≥ 0.9) |")
    assert line.endswith("| 1.250 | 1.000 |")  # 0.19 / 0.152 = 1.25 measured, all of the bound
    failed = goals_table([{**res, "bound": {"error": "worker timed out"}}])
    assert "exact-gradient bound" not in failed
