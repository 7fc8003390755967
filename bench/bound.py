"""The exact-gradient bound: multiply-adds and memory one training step must cost, per model and mask.

For a plan (``{name: None}`` dense, ``{name: bool mask}`` partly trainable, missing = frozen: exactly
:func:`talos_core.training.plan_from_mask`'s and ``finetune``'s semantics) one forward on a real batch
runs under a :class:`~torch.overrides.TorchFunctionMode` that records every matrix product — ``F.linear``,
``F.conv1d/2d``, ``matmul``/``@``/``bmm``/``baddbmm``/``mm``/``addmm``, ``scaled_dot_product_attention``
(its ``QKᵀ`` and ``AV`` products) and ``nn.MultiheadAttention``'s ``multi_head_attention_forward``
(packed in-projection, ``QKᵀ``, ``AV``, out-projection) — with its shapes and, from the ``requires_grad``
flags the plan sets, which of its inputs need a gradient. The backward of a product ``Y = A·B`` costs
one product of the same size per input that needs a gradient (``dA = dY·Bᵀ``, ``dB = Aᵀ·dY``), so:

* **non-linear FT** (every parameter trainable): forward + activation gradients of every product whose
  input depends on a parameter + the weight gradient of every weight;
* **TaLoS**: forward + activation gradients only of products whose input depends on a trainable
  tensor — none below the first trainable tensor in execution order, which is where autograd stops
  (paper Sec. 3, Algorithm 1; ``finetune`` sets ``requires_grad=False`` on frozen tensors) — + weight
  gradients only of tensors with trainable entries. ``finetune`` computes those weight gradients in
  full and gathers the trainable entries afterwards (``MaskedAdamW._grads``), so the bound counts them
  in full; ``macs_rows`` is the variant a row-split implementation would reach (only the output rows
  holding a trainable entry), reported separately because the code does not do it.

Bias gradients and element-wise work (norms, activations, softmax, the loss) hold no multiply-add of a
product and are left out, as is the optimizer step (memory-bound, measured separately). The ratio
``NL / TaLoS`` is the best fwd+bwd speed-up any implementation computing the same exact gradients (and
the same full weight gradients) can reach on that mask.

Memory, in the same forward: the activations autograd keeps for the backward under the plan (the
distinct storages passed to :func:`torch.autograd.graph.saved_tensors_hooks`, parameters and buffers
excluded), and the tensors ``finetune`` holds: parameters and buffers, full-size gradients of every
tensor in the plan, AdamW's two moments (dense for fully trainable tensors, compact plus an int64 index
for partly trainable ones, ``MaskedAdamW``), and the θ0 snapshot the task vector is taken against
(``_snapshot``: a clone, or the trainable entries and their int64 index). Their sum is what the step
keeps at once in the worst case (activations are freed as gradients are written, so the true peak of a
perfect implementation lies between the sum minus the smaller of the two and the sum).

>>> import torch
>>> from torch import nn
>>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
>>> x = torch.zeros(5, 4)
>>> step_cost(net, lambda: net(x), None).macs   # fwd 280 + dX of layer 2 120 + dW 280
680
>>> step_cost(net, lambda: net(x), {"2.weight": None}).macs   # fwd 280 + dW of layer 2 120
400
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

Plan = Mapping[str, "torch.Tensor | None"]

_MATMULS = {torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.bmm, torch.Tensor.bmm, torch.mm,
            torch.Tensor.mm}
_ADD_MATMULS = {torch.baddbmm, torch.Tensor.baddbmm, torch.addmm, torch.Tensor.addmm}


@dataclass(frozen=True)
class Product:
    """One recorded matrix product: its forward multiply-adds and the backward ones it needs under the plan.

    ``input_grad``: activation-gradient MACs actually needed (0 where no input needs a gradient);
    ``weight_grad``: the full weight-gradient MACs where the weight is trainable, else 0;
    ``weight_grad_rows``: the same restricted to the output rows that hold a trainable entry.
    """

    op: str
    weight: str | None
    forward: int
    input_grad: int
    weight_grad: int
    weight_grad_rows: int


@dataclass
class StepCost:
    """Multiply-adds of one training step and the memory it keeps, for one plan (bytes)."""

    forward: int = 0
    input_grad: int = 0
    weight_grad: int = 0
    weight_grad_rows: int = 0
    products: list[Product] = field(default_factory=list)
    activation_bytes: int = 0
    param_bytes: int = 0
    grad_bytes: int = 0
    optimizer_bytes: int = 0
    snapshot_bytes: int = 0
    trainable_entries: int = 0

    @property
    def macs(self) -> int:
        """Forward + activation gradients + full weight gradients (what ``finetune`` computes)."""
        return self.forward + self.input_grad + self.weight_grad

    @property
    def macs_rows(self) -> int:
        """The same with weight gradients restricted to rows holding a trainable entry."""
        return self.forward + self.input_grad + self.weight_grad_rows

    @property
    def memory_bytes(self) -> int:
        """Parameters + kept activations + gradients + optimizer state + θ0 snapshot."""
        return self.param_bytes + self.activation_bytes + self.grad_bytes + self.optimizer_bytes + self.snapshot_bytes

    def summary(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if k != "products"}
        out.update(macs=self.macs, macs_rows=self.macs_rows, memory_bytes=self.memory_bytes,
                   products=len(self.products))
        return out


def _rows_fraction(mask: torch.Tensor | None) -> float:
    """Fraction of a weight's output rows (first dimension) holding a trainable entry (1 for dense)."""
    if mask is None or mask.dim() == 0:
        return 1.0
    flat = mask.reshape(mask.shape[0], -1)
    return float(flat.any(1).sum()) / max(flat.shape[0], 1)


def _rg(t) -> bool:
    return isinstance(t, torch.Tensor) and t.requires_grad


class _CountMode(TorchFunctionMode):
    """Records every matrix product of one forward as a :class:`Product` (see the module docstring)."""

    def __init__(self, names: dict[int, str], plan: Plan) -> None:
        super().__init__()
        self.names, self.plan = names, plan
        self.products: list[Product] = []

    def _add(self, op: str, weight: torch.Tensor | None, forward: int, grads: list[tuple[bool, int]],
             weight_grad: tuple[bool, int] = (False, 0)) -> None:
        """``grads``: ``(needed, macs)`` per activation input; ``weight_grad``: the same for the weight."""
        name = self.names.get(id(weight)) if weight is not None else None
        wneed, wmacs = weight_grad
        full = wmacs if wneed else 0
        rows = round(full * _rows_fraction(self.plan.get(name))) if (full and name in self.plan) else full
        self.products.append(Product(op, name, int(forward), int(sum(m for need, m in grads if need)), int(full),
                                     int(rows)))

    def _param(self, t) -> torch.Tensor | None:
        """The parameter ``t`` is, or is a view of (``W.t()``, ``W.T``), else ``None``."""
        for cand in (t, getattr(t, "_base", None)):
            if cand is not None and id(cand) in self.names:
                return cand
        return None

    def _product(self, op: str, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
        """``out = a @ b`` (broadcast batch dims): MACs = out.numel() · k; a parameter operand is the weight."""
        k = a.shape[-1] if a.dim() >= 1 else 1
        macs = out.numel() * k
        for w, x in ((b, a), (a, b)):
            w = self._param(w)
            if w is not None:
                self._add(op, w, macs, [(_rg(x), macs)], (_rg(w), macs))
                return
        self._add(op, None, macs, [(_rg(a), macs), (_rg(b), macs)])

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.multi_head_attention_forward:
            return self._attention(func, args, kwargs)
        out = func(*args, **kwargs)
        if func is F.linear:
            x = args[0]
            w = args[1] if len(args) > 1 else kwargs["weight"]
            macs = out.numel() * w.shape[-1]
            self._add("linear", w, macs, [(_rg(x), macs)], (_rg(w), macs))
        elif func in (F.conv1d, F.conv2d):
            names = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
            call = {**dict(zip(names, args)), **kwargs}
            x, w = call["input"], call["weight"]
            macs = out.numel() * w[0].numel()  # per output element: C_in/groups · kernel
            self._add(func.__name__, w, macs, [(_rg(x), macs)], (_rg(w), macs))
        elif func in _MATMULS:
            self._product(getattr(func, "__name__", "matmul"), args[0], args[1], out)
        elif func in _ADD_MATMULS:
            a, b = args[1], args[2]
            self._product(getattr(func, "__name__", "addmm"), a, b, out)
        elif func is F.scaled_dot_product_attention:
            q, k, v = args[0], args[1], args[2]
            self._sdpa(q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1], out.numel() // (q.shape[-2] * v.shape[-1]),
                       _rg(q), _rg(k), _rg(v))
        return out

    def _sdpa(self, L: int, S: int, E: int, Ev: int, batch: int, q: bool, k: bool, v: bool) -> None:
        """``QKᵀ`` and ``AV``. Backward: ``dP = dO·Vᵀ`` (if Q or K needs a gradient), ``dQ = dS·K``,
        ``dK = dSᵀ·Q``, ``dV = Pᵀ·dO`` (each if that input needs one)."""
        qk, av = batch * L * S * E, batch * L * S * Ev
        self._add("attention QK^T", None, qk, [(q, qk), (k, qk)])
        self._add("attention AV", None, av, [(q or k, av), (v, av)])

    def _attention(self, func, args, kwargs):
        """``nn.MultiheadAttention`` (sequence-first inside): packed in-projection, attention, out-projection.
        Q, K and V are slices of one in-projection output, so they need a gradient together (as in autograd)."""
        names = ("query", "key", "value", "embed_dim_to_check", "num_heads", "in_proj_weight", "in_proj_bias",
                 "bias_k", "bias_v", "add_zero_attn", "dropout_p", "out_proj_weight", "out_proj_bias")
        call = {**dict(zip(names, args)), **kwargs}
        if call.get("use_separate_proj_weight") or call.get("bias_k") is not None or call.get("add_zero_attn"):
            raise NotImplementedError("multi-head attention with separate projections or extra keys is not counted")
        query, key, w_in, w_out = call["query"], call["key"], call["in_proj_weight"], call["out_proj_weight"]
        out = func(*args, **kwargs)
        E, H = call["embed_dim_to_check"], call["num_heads"]
        L, B = query.shape[0], (query.shape[1] if query.dim() == 3 else 1)
        S = key.shape[0]
        if query is key:
            m = L * B * E * 3 * E
            self._add("attention in-projection", w_in, m, [(_rg(query), m)], (_rg(w_in), m))
        else:  # cross-attention: Q from the query rows, K and V from the key rows (same packed weight)
            m = L * B * E * E + 2 * S * B * E * E
            self._add("attention in-projection", w_in, m, [(_rg(query), L * B * E * E), (_rg(key), 2 * S * B * E * E)],
                      (_rg(w_in), m))
        qkv = _rg(query) or _rg(key) or _rg(w_in) or _rg(call.get("in_proj_bias"))
        self._sdpa(L, S, E // H, E // H, B * H, qkv, qkv, qkv)
        m = L * B * E * E
        self._add("attention out-projection", w_out, m, [(qkv, m)], (_rg(w_out), m))
        return out


def full_plan(model: torch.nn.Module) -> dict[str, None]:
    """Non-linear FT's plan: every parameter trained densely (as ``bench/_worker.py`` builds it)."""
    return {n: None for n, _ in model.named_parameters()}


def step_cost(model: torch.nn.Module, forward: Callable[[], object], plan: Plan | None) -> StepCost:
    """Multiply-adds and memory of one training step of ``plan`` (``None``: every parameter, non-linear FT).

    ``forward()`` runs the model on the real batch (its output is discarded; no backward runs). Parameters'
    ``requires_grad`` flags are set as ``finetune`` sets them for the forward and restored afterwards.
    """
    params = dict(model.named_parameters())
    plan = full_plan(model) if plan is None else dict(plan)
    unknown = [n for n in plan if n not in params]
    if unknown:
        raise ValueError(f"plan names parameters the model does not have: {unknown[:3]}")
    before = {n: p.requires_grad for n, p in params.items()}
    own = {p.untyped_storage().data_ptr() for p in params.values()}
    own |= {b.untyped_storage().data_ptr() for b in model.buffers()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        if s.data_ptr() not in own:
            saved[s.data_ptr()] = s.nbytes()
        return t

    mode = _CountMode({id(p): n for n, p in params.items()}, plan)
    try:
        for n, p in params.items():
            p.requires_grad_(n in plan)
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), mode:
            forward()
    finally:
        for n, p in params.items():
            p.requires_grad_(before[n])
    cost = StepCost(products=mode.products, activation_bytes=sum(saved.values()))
    for prod in mode.products:
        cost.forward += prod.forward
        cost.input_grad += prod.input_grad
        cost.weight_grad += prod.weight_grad
        cost.weight_grad_rows += prod.weight_grad_rows
    cost.param_bytes = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    for n, mask in plan.items():
        p = params[n]
        cost.grad_bytes += p.numel() * p.element_size()  # autograd writes full-size gradients
        if mask is None:
            entries = p.numel()
            cost.optimizer_bytes += 2 * 4 * entries  # fp32 exp_avg, exp_avg_sq
            cost.snapshot_bytes += entries * p.element_size()  # θ0 clone
        else:
            entries = int(mask.sum())
            cost.optimizer_bytes += 2 * 4 * entries + 8 * entries  # compact moments + int64 index
            cost.snapshot_bytes += entries * p.element_size() + 8 * entries  # θ0 values + int64 index
        cost.trainable_entries += entries
    return cost


def exact_bound(model: torch.nn.Module, forward: Callable[[], object], mask: Mapping[str, torch.Tensor]) -> dict:
    """Non-linear FT vs TaLoS on ``mask`` (a TaLoS mask, turned into a plan as ``finetune`` gets it).

    Returns ``{"nonlinear": StepCost.summary(), "talos": ..., "speedup": NL MACs / TaLoS MACs,
    "speedup_rows": the same with row-restricted weight gradients, "memory_ratio": TaLoS / NL bytes,
    "forward_floor": NL MACs / forward MACs}`` (``forward_floor`` bounds any method that still runs the
    forward: what a free backward would give).
    """
    from talos_core.training import plan_from_mask

    nl = step_cost(model, forward, None)
    ts = step_cost(model, forward, plan_from_mask(dict(mask)))
    return {"nonlinear": nl.summary(), "talos": ts.summary(), "speedup": nl.macs / max(ts.macs, 1),
            "speedup_rows": nl.macs / max(ts.macs_rows, 1), "memory_ratio": ts.memory_bytes / max(nl.memory_bytes, 1),
            "forward_floor": nl.macs / max(nl.forward, 1)}
