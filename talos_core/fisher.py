"""Per-example gradient engine: diagonal Fisher scores for TaLoS mask calibration (paper Eq. diag_fim).

:func:`fisher_scores` returns ``s_j = Σ_i [∂/∂θ_j f(x_i, ŷ_i)]²`` with ``f = log p_θ(ŷ|x)`` and
``ŷ_i ~ p_θ(·|x_i)`` sampled once per input — the diagonal Fisher of Eq. (diag_fim) up to the
constant 1/N — for chosen parameter tensors of a :class:`~talos_core.models.base.TaskModel`.
Per-sample gradients are computed for chunks of examples at once, never one backward per sample:
a layer-wise engine accumulates ``Σ_i g_i²`` inside one batched backward (``Linear``, norms,
convolutions and attention projections), or ``torch.func.vmap`` materializes per-example gradients.
:func:`fisher_scores_loop` is the one-backward-per-sample reference (as the official code does).

The calibration loop that uses these scores (rounds, soft mask, bottom-k selection) is
:func:`talos_core.masks.calibrate_talos`.
"""

from __future__ import annotations

import functools
import weakref
from contextlib import nullcontext
from typing import Literal

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap
from torch.overrides import TorchFunctionMode

from talos_core.errors import TalosError
from talos_core.inference import tally
from talos_core.inference.attention import differentiable_attention
from talos_core.models.base import Batch, TaskModel, iter_batches
from talos_core.tasks.base import Split, TaskSpec

Engine = Literal["auto", "layerwise", "vmap"]
ENGINES = ("auto", "layerwise", "vmap")


def _slice(batch: Batch, start: int, stop: int) -> Batch:
    return {k: v[start:stop] for k, v in batch.items()}


def _take(batch: Batch, idx: torch.Tensor) -> Batch:
    return {k: v.index_select(0, idx.to(v.device)) for k, v in batch.items()}


def _length_order(batch: Batch) -> torch.Tensor:
    """Example order for gradient chunks: by token count when the batch has a 2-D ``attention_mask``
    (so chunks hold sequences of similar length and :func:`trim_padding` removes most padding)."""
    mask = batch.get("attention_mask")
    n = next(iter(batch.values())).shape[0]
    if mask is None or mask.dim() != 2:
        return torch.arange(n)
    return torch.argsort(mask.ne(0).sum(1).cpu(), stable=True)


def trim_padding(batch: Batch) -> Batch:
    """Drop the trailing positions that are padding in *every* example of a token batch.

    Applies to batches with a 2-D 0/1 ``attention_mask`` ``[B, L]`` (right-padded sequences, as the
    text families' ``prepare`` returns): such positions are masked keys for every query and carry
    zero pooling weight, so removing them changes no logit, gradient or score (only the float
    summation order). Every tensor whose first two dimensions are ``[B, L]`` is cut; other batches
    are returned unchanged.

    >>> b = {"input_ids": torch.tensor([[5, 6, 0], [7, 0, 0]]), "attention_mask": torch.tensor([[1, 1, 0], [1, 0, 0]])}
    >>> trim_padding(b)["input_ids"].tolist()
    [[5, 6], [7, 0]]
    """
    mask = batch.get("attention_mask")
    if mask is None or mask.dim() != 2 or mask.shape[1] == 0:
        return batch
    used = torch.nonzero(mask.ne(0).any(0)).view(-1)
    length = int(used.max()) + 1 if used.numel() else 1
    if length == mask.shape[1]:
        return batch
    shape = mask.shape
    return {k: (v[:, :length] if v.dim() >= 2 and v.shape[:2] == shape else v) for k, v in batch.items()}


def _target_value(logits: torch.Tensor, y: torch.Tensor, target: str) -> torch.Tensor:
    """``Σ_i f(x_i, ŷ_i)``: the sampled log-probability (``"logprob"``) or raw logit (``"logit"``)."""
    if target == "logprob":
        logits = torch.log_softmax(logits.float(), dim=-1)
    return logits.gather(-1, y.view(-1, 1)).sum()


# ----- layer-wise engine: Σ_i g_i² accumulated inside one batched backward ---------------------
class _Unsupported(RuntimeError):
    """A parameter is used in a way the layer-wise engine cannot attribute to single examples."""


#: scores are squared and summed in float64: per-sample gradients under calibration's soft mask reach 1e-20 and
#: below, whose float32 squares underflow to exactly zero — which calibration would take for entries with no
#: influence at all (``CalibrationConfig.zero_scores``). Per-sample gradients themselves stay in the model's dtype.
SCORE_DTYPE = torch.float64
#: per-sample weight gradients are materialized at most this many elements at a time (bmm path)
_BMM_BUDGET = 1 << 24
#: on CPU, weights at least this large are accumulated one example at a time (mm + addcmul)
_LOOP_NUMEL = 1 << 16


def _add_outer_squares(acc: torch.Tensor, dy: torch.Tensor, x: torch.Tensor) -> None:
    """``acc += Σ_b (dy_bᵀ x_b)²``: squared per-example weight gradients of ``y = x Wᵀ``.

    ``dy`` is ``[B, T, out]``, ``x`` is ``[B, T, in]`` (``T`` positions per example); the per-example
    gradient ``dy_bᵀ x_b`` is ``[out, in]``. On CPU, large weights go one example at a time through a
    reused buffer (``mm`` + ``addcmul_``: no ``[B, out, in]`` tensor, no page-faulting allocations);
    otherwise ``bmm`` over groups of examples bounded by :data:`_BMM_BUDGET` elements.
    """
    B = dy.shape[0]
    if dy.device.type == "cpu" and acc.numel() >= _LOOP_NUMEL:
        buf = torch.empty(acc.shape, dtype=dy.dtype, device=dy.device)
        wide = buf if buf.dtype == acc.dtype else torch.empty(acc.shape, dtype=acc.dtype, device=dy.device)
        for b in range(B):
            torch.mm(dy[b].t(), x[b], out=buf)
            if wide is not buf:
                wide.copy_(buf)
            acc.addcmul_(wide, wide)
        return
    step = max(1, _BMM_BUDGET // max(1, acc.numel()))
    for s in range(0, B, step):
        g = torch.bmm(dy[s:s + step].transpose(1, 2), x[s:s + step]).to(acc.dtype)
        acc.add_(g.pow_(2).sum(0))


def _per_example(t: torch.Tensor, batch: int) -> torch.Tensor:
    """``[N, ..., C] → [B, N/B·…, C]``: rows of example ``b`` are rows ``b·m … b·m+m−1`` (m = N/B)."""
    return t.reshape(batch, -1, t.shape[-1])


class _SquareLinear(torch.autograd.Function):
    """``y = x Wᵀ + b`` whose backward returns ``∂/∂x`` and adds the per-example squared gradients of
    ``W`` and ``b`` to the engine's accumulators (it returns no parameter gradient)."""

    @staticmethod
    def forward(ctx, x, w, b, state, wname, bname):
        ctx.save_for_backward(x, w)
        ctx.state, ctx.wname, ctx.bname = state, wname, bname
        return F.linear(x, w, b)

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        state = ctx.state
        gx = gy.matmul(w.to(gy.dtype)) if ctx.needs_input_grad[0] else None
        dy = _per_example(gy, state.batch)
        if ctx.wname is not None:
            _add_outer_squares(state.acc[ctx.wname], dy, _per_example(x, state.batch))
        if ctx.bname is not None:
            state.acc[ctx.bname].add_(dy.sum(1).to(state.acc[ctx.bname].dtype).pow_(2).sum(0))
        return gx, None, None, None, None, None


class _SquareAffine(torch.autograd.Function):
    """``y = h · w + b`` over the last dimension (a norm layer's affine part, or a learned scale)."""

    @staticmethod
    def forward(ctx, h, w, b, state, wname, bname):
        ctx.save_for_backward(h, w)
        ctx.state, ctx.wname, ctx.bname = state, wname, bname
        y = h * w if w is not None else h
        return y + b if b is not None else (y if w is not None else h.clone())

    @staticmethod
    def backward(ctx, gy):
        h, w = ctx.saved_tensors
        state = ctx.state
        gh = None
        if ctx.needs_input_grad[0]:
            gh = gy * w if w is not None else gy
        dy = _per_example(gy, state.batch)
        if ctx.wname is not None:
            g = (dy * _per_example(h, state.batch)).sum(1)
            state.acc[ctx.wname].add_(g.to(state.acc[ctx.wname].dtype).pow_(2).sum(0))
        if ctx.bname is not None:
            state.acc[ctx.bname].add_(dy.sum(1).to(state.acc[ctx.bname].dtype).pow_(2).sum(0))
        return gh, None, None, None, None, None


class _SquareConv2d(torch.autograd.Function):
    """``conv2d(x, W, b)`` (groups = 1); per-example weight gradients from unfolded input patches."""

    @staticmethod
    def forward(ctx, x, w, b, stride, padding, dilation, state, wname, bname):
        ctx.save_for_backward(x, w)
        ctx.conf = (stride, padding, dilation)
        ctx.state, ctx.wname, ctx.bname = state, wname, bname
        return F.conv2d(x, w, b, stride, padding, dilation)

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        stride, padding, dilation = ctx.conf
        state = ctx.state
        gx = None
        if ctx.needs_input_grad[0]:
            gx = torch.nn.grad.conv2d_input(x.shape, w, gy, stride, padding, dilation)
        B = x.shape[0]
        dy = gy.reshape(B, gy.shape[1], -1)  # [B, out, L]
        if ctx.wname is not None:
            cols = F.unfold(x, w.shape[2:], dilation=dilation, padding=padding, stride=stride)  # [B, in·k, L]
            acc = state.acc[ctx.wname].view(w.shape[0], -1)
            _add_outer_squares(acc, dy.transpose(1, 2), cols.transpose(1, 2))
        if ctx.bname is not None:
            state.acc[ctx.bname].add_(dy.sum(2).to(state.acc[ctx.bname].dtype).pow_(2).sum(0))
        return gx, None, None, None, None, None, None, None, None


_MUL_FUNCS = (torch.Tensor.__mul__, torch.Tensor.__rmul__, torch.Tensor.mul, torch.mul)


class _LayerwiseMode(TorchFunctionMode):
    """Routes every use of a tracked tensor through a ``_Square*`` function during one forward.

    Handled uses: ``F.linear``, ``F.layer_norm`` (affine over the last dimension), ``F.conv2d``
    (groups = 1), a 1-D learned scale ``w * h`` over the last dimension (T5's RMS norm) and
    ``F.multi_head_attention_forward`` for plain self-attention (re-expressed with ``F.linear`` and
    ``scaled_dot_product_attention``). Any other operation that receives a tracked tensor and
    returns something differentiable, a second use of the same tensor, or an input whose leading
    dimension is not a multiple of the batch raises :class:`_Unsupported`.
    """

    def __init__(self, tracked: dict[int, str], acc: dict[str, torch.Tensor], batch: int) -> None:
        super().__init__()
        self.tracked, self.acc, self.batch = tracked, acc, batch
        self.used: set[str] = set()

    def _name(self, t) -> str | None:
        return self.tracked.get(id(t)) if isinstance(t, torch.Tensor) else None

    def _claim(self, x: torch.Tensor, *names: str | None) -> None:
        if x.dim() < 2 or x.shape[0] % self.batch != 0:
            raise _Unsupported(f"input of shape {tuple(x.shape)} has no leading batch dimension {self.batch}")
        for n in names:
            if n is not None:
                if n in self.used:
                    raise _Unsupported(f"{n} is used more than once per forward")
                self.used.add(n)

    def _touches_tracked(self, args, kwargs) -> bool:
        for a in (*args, *kwargs.values()):
            if isinstance(a, (list, tuple)):
                if any(self._name(t) for t in a):
                    return True
            elif self._name(a):
                return True
        return False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            x = args[0]
            w = args[1] if len(args) > 1 else kwargs.get("weight")
            b = args[2] if len(args) > 2 else kwargs.get("bias")
            wn, bn = self._name(w), self._name(b)
            if wn or bn:
                self._claim(x, wn, bn)
                return _SquareLinear.apply(x, w, b, self, wn, bn)
        elif func is F.layer_norm:
            x, shape = args[0], args[1]
            w = args[2] if len(args) > 2 else kwargs.get("weight")
            b = args[3] if len(args) > 3 else kwargs.get("bias")
            eps = args[4] if len(args) > 4 else kwargs.get("eps", 1e-5)
            wn, bn = self._name(w), self._name(b)
            if (wn or bn) and len(shape) == 1:
                self._claim(x, wn, bn)
                return _SquareAffine.apply(F.layer_norm(x, shape, None, None, eps), w, b, self, wn, bn)
        elif func is F.conv2d:
            names = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
            call = {**dict(zip(names, args)), **kwargs}
            w, b = call["weight"], call.get("bias")
            wn, bn = self._name(w), self._name(b)
            padding = call.get("padding", 0)
            if (wn or bn) and call.get("groups", 1) == 1 and not isinstance(padding, str) \
                    and call["input"].dim() == 4:
                if call["input"].shape[0] != self.batch:
                    raise _Unsupported("conv2d input without a leading batch dimension")
                self._claim(call["input"], wn, bn)
                return _SquareConv2d.apply(call["input"], w, b, call.get("stride", 1), padding,
                                           call.get("dilation", 1), self, wn, bn)
        elif func in _MUL_FUNCS and len(args) == 2 and not kwargs:
            for w, h in (args, args[::-1]):
                wn = self._name(w)
                if wn and isinstance(h, torch.Tensor) and not self._name(h) and w.dim() == 1 \
                        and h.dim() >= 2 and h.shape[-1] == w.shape[0]:
                    self._claim(h, wn)
                    return _SquareAffine.apply(h, w, None, self, wn, None)
        elif func is F.multi_head_attention_forward and self._touches_tracked(args, kwargs):
            return self._self_attention(*args, **kwargs)
        out = func(*args, **kwargs)
        if self._touches_tracked(args, kwargs):
            flat = out if isinstance(out, (list, tuple)) else (out,)
            if any(isinstance(o, torch.Tensor) and o.requires_grad for o in flat):
                raise _Unsupported(f"a tracked parameter is used by {getattr(func, '__name__', func)}")
        return out

    def _self_attention(self, query, key, value, embed_dim, num_heads, in_proj_weight, in_proj_bias, bias_k,
                        bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, training=True,
                        key_padding_mask=None, need_weights=True, attn_mask=None, use_separate_proj_weight=False,
                        q_proj_weight=None, k_proj_weight=None, v_proj_weight=None, static_k=None,
                        static_v=None, average_attn_weights=True, is_causal=False):
        """``nn.MultiheadAttention``'s computation for self-attention without extras, sequence-first."""
        plain = (query is key and key is value and query.dim() == 3 and bias_k is None and bias_v is None
                 and not add_zero_attn and not (training and dropout_p > 0) and key_padding_mask is None
                 and not need_weights and not use_separate_proj_weight and static_k is None and static_v is None)
        if not plain or query.shape[1] != self.batch or embed_dim % num_heads:
            raise _Unsupported("multi-head attention variant not handled")
        T, B, E = query.shape
        H, hd = num_heads, embed_dim // num_heads
        x = query.transpose(0, 1)  # [B, T, E]
        win, bin_, wout, bout = (self._name(t) for t in (in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias))
        self._claim(x, win, bin_, wout, bout)
        qkv = (_SquareLinear.apply(x, in_proj_weight, in_proj_bias, self, win, bin_) if (win or bin_)
               else F.linear(x, in_proj_weight, in_proj_bias))
        q, k, v = qkv.view(B, T, 3, H, hd).permute(2, 0, 3, 1, 4).unbind(0)
        mask = attn_mask
        if mask is not None:
            if mask.dtype == torch.bool:
                mask = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill_(mask, float("-inf"))
            if mask.dim() == 3:
                mask = mask.view(B, H, T, T)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=bool(is_causal and mask is None))
        o = o.transpose(1, 2).reshape(B, T, E)
        y = (_SquareLinear.apply(o, out_proj_weight, out_proj_bias, self, wout, bout) if (wout or bout)
             else F.linear(o, out_proj_weight, out_proj_bias))
        return y.transpose(0, 1), None


def _layerwise_chunk(model: TaskModel, diff: dict[str, torch.Tensor], const: dict[str, torch.Tensor],
                     batch: Batch, labels, target: str, acc: dict[str, torch.Tensor]) -> None:
    """Add ``Σ_i g_i²`` of one chunk to ``acc`` with one batched forward and backward.

    ``labels`` is the chunk's ``ŷ`` or a function ``logits → ŷ`` (sampling from this very forward).
    """
    leaves = {n: v.detach().requires_grad_() for n, v in diff.items()}
    n = next(iter(batch.values())).shape[0]
    mode = _LayerwiseMode({id(t): name for name, t in leaves.items()}, acc, n)
    with torch.enable_grad():
        with mode:
            logits = functional_call(model, (leaves, const), args=(), kwargs=batch, strict=False)
        y = labels(logits.detach()) if callable(labels) else labels
        value = _target_value(logits, y, target)
        if value.requires_grad:
            torch.autograd.grad(value, list(leaves.values()), allow_unused=True)


def _exact_squares(model: TaskModel, diff: dict[str, torch.Tensor], const: dict[str, torch.Tensor],
                   batch: Batch, y: torch.Tensor, target: str) -> dict[str, torch.Tensor]:
    """``Σ_i g_i²`` with one plain autograd backward per example (the reference semantics)."""
    out = {n: torch.zeros_like(v, dtype=SCORE_DTYPE) for n, v in diff.items()}
    for i in range(y.shape[0]):
        leaves = {n: v.detach().requires_grad_() for n, v in diff.items()}
        with torch.enable_grad():
            logits = functional_call(model, (leaves, const), args=(), kwargs=_slice(batch, i, i + 1), strict=False)
            value = _target_value(logits, y[i:i + 1], target)
            grads = torch.autograd.grad(value, list(leaves.values()), allow_unused=True)
        for n, g in zip(leaves, grads):
            if g is not None:
                out[n] += g.to(SCORE_DTYPE).pow(2)
    return out


@functools.cache
def _multinomial_is_exponential_race() -> bool:
    """Whether ``torch.multinomial(p, 1, generator=g)`` equals ``argmax(p / q)`` with
    ``q = empty_like(p).exponential_(1, generator=g)`` (PyTorch's one-sample kernel), draw for draw
    and in generator state — checked on this installation, not assumed."""
    for seed in range(3):
        p = torch.softmax(torch.randn(9, 5, generator=torch.Generator().manual_seed(seed)), dim=-1)
        g1, g2 = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        a = torch.multinomial(p, 1, generator=g1).view(-1)
        b = torch.argmax(p / torch.empty_like(p).exponential_(1, generator=g2), dim=-1)
        if not (torch.equal(a, b) and torch.equal(g1.get_state(), g2.get_state())):
            return False
    return True


class _BatchSampler:
    """Draws ``ŷ ~ softmax(logits)`` for the examples of one batch, chunk by chunk, exactly as one
    ``torch.multinomial(probs, 1, generator)`` over the whole batch would (same noise, same draws):
    the batch's exponential noise ``q`` is drawn on first use, then ``ŷ_i = argmax_c p_ic / q_ic``."""

    def __init__(self, n: int, generator: torch.Generator, device: torch.device) -> None:
        self.n, self.generator, self.device = n, generator, device
        self.q: torch.Tensor | None = None

    def labels(self, idx: torch.Tensor):
        def draw(logits: torch.Tensor) -> torch.Tensor:
            probs = torch.softmax(logits.float(), dim=-1).cpu()
            if self.q is None:
                self.q = torch.empty(self.n, probs.shape[-1]).exponential_(1, generator=self.generator)
            return torch.argmax(probs / self.q[idx.cpu()], dim=-1).to(self.device)

        return draw


#: per model: {(batch keys, target): names verified for the layer-wise engine, or None = unsupported}
_LAYERWISE_VERIFIED: weakref.WeakKeyDictionary[TaskModel, dict] = weakref.WeakKeyDictionary()


def _layerwise_ok(model: TaskModel, diff: dict[str, torch.Tensor], const: dict[str, torch.Tensor],
                  batch: Batch, target: str) -> bool:
    """Whether the layer-wise engine is exact for this model: checked once per model (and set of
    parameter names) on two examples against one plain backward per example, then cached."""
    key = (tuple(sorted(batch)), target)
    seen = _LAYERWISE_VERIFIED.setdefault(model, {})
    if key in seen:
        verified = seen[key]
        if verified is None:
            return False
        if set(diff) <= verified:
            return True
    if next(iter(batch.values())).shape[0] < 2:
        return False  # too few examples to check the batch layout: use vmap this time
    pair = _slice(batch, 0, 2)
    y = torch.zeros(2, dtype=torch.long, device=model.device)  # any label: this checks the structure
    got = {n: torch.zeros_like(v, dtype=SCORE_DTYPE) for n, v in diff.items()}
    try:
        _layerwise_chunk(model, diff, const, pair, y[:2], target, got)
    except _Unsupported:
        seen[key] = None
        return False
    ref = _exact_squares(model, diff, const, pair, y[:2], target)
    scale = max((float(r.abs().max()) for r in ref.values() if r.numel()), default=0.0)
    ok = all(bool(((got[n] - r).abs() <= 1e-3 * r.abs().max() + 1e-6 * scale + 1e-30).all())
             for n, r in ref.items() if r.numel())
    seen[key] = (seen.get(key) or set()) | set(diff) if ok else None
    return ok


def fisher_scores(model: TaskModel, split: Split, task: TaskSpec, names: list[str], *,
                  generator: torch.Generator, batch_size: int = 32, chunk_size: int = 16,
                  target: Literal["logprob", "logit"] = "logprob",
                  param_override: dict[str, torch.Tensor] | None = None,
                  engine: Engine = "auto") -> dict[str, torch.Tensor]:
    """``s = Σ_i (∇_θ f(x_i, ŷ_i))²`` over ``split`` for the parameters ``names`` (Eq. diag_fim × N).

    ``f`` is ``log p(ŷ|x)`` (``target="logprob"``, the paper) or the raw sampled logit
    (``"logit"``, the official vision code). ``ŷ_i`` is sampled from ``softmax(logits)`` of the same
    model using ``generator``, one batch of ``batch_size`` at a time (the same draws as
    :func:`fisher_scores_loop`). ``param_override`` replaces parameter values in the forward (the soft
    mask); gradients are taken with respect to those effective values.

    Per-example gradients are computed ``chunk_size`` examples at a time (token batches: chunks of
    similar length, trailing padding removed — :func:`trim_padding`) by one of two exact engines:

    * ``"layerwise"``: one batched forward and backward per chunk; each layer adds
      ``Σ_i g_i²`` of its own parameters during the backward (``Linear``: ``g_i = Σ_t δ_itᵀ x_it``
      from the layer's input ``x`` and output gradient ``δ``; norms, convolutions and attention
      projections alike), so per-example gradients exist for one layer at a time only;
    * ``"vmap"``: ``torch.func.vmap(grad(f))``, which materializes ``[chunk, *θ]`` per-example
      gradients of every parameter at once.

    ``"auto"`` uses the layer-wise engine where it is exact for the model — checked once per model on
    two examples against one backward per example — and vmap otherwise (e.g. BatchNorm or grouped
    convolutions). The layer-wise engine also draws ``ŷ`` from its own forward instead of a separate
    one: one batch's exponential noise, ``ŷ_i = argmax_c p_ic / q_ic``, which is how
    ``torch.multinomial`` draws one sample (checked on the installation), so the draws are the same.

    Example: ``fisher_scores(model, calib, task, model.maskable_names(), generator=torch.Generator().manual_seed(0))``
    returns one float64 score tensor per name (:data:`SCORE_DTYPE`), shaped like the parameter.
    """
    if engine not in ENGINES:
        raise TalosError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    params = {n: p.detach() for n, p in model.named_parameters()}
    if param_override:
        params.update(param_override)
    diff = {n: params[n] for n in names}
    const = {n: v for n, v in params.items() if n not in diff}
    scores = {n: torch.zeros_like(v, dtype=SCORE_DTYPE) for n, v in diff.items()}
    if not diff:
        return scores

    def f_single(p_diff: dict[str, torch.Tensor], sample: Batch, y: torch.Tensor) -> torch.Tensor:
        one = {k: v.unsqueeze(0) for k, v in sample.items()}
        logits = functional_call(model, (p_diff, const), args=(), kwargs=one, strict=False)
        return _target_value(logits, y.view(1), target)

    per_sample = vmap(grad(f_single), in_dims=(None, 0, 0))
    was_training = model.training
    model.eval()
    chosen = engine
    try:
        for batch in iter_batches(model, split, task, batch_size):
            order = _length_order(batch).to(model.device)
            if chosen == "auto" and len(order) >= 2:
                chosen = "layerwise" if _layerwise_ok(model, diff, const, trim_padding(_take(batch, order[:2])),
                                                      target) else "vmap"
            layerwise = chosen == "layerwise"
            if layerwise and _multinomial_is_exponential_race():
                sampler = _BatchSampler(len(order), generator, model.device)  # ŷ from each chunk's own forward
                y_hat = None
            else:
                with torch.no_grad():
                    logits = functional_call(model, params, args=(), kwargs=batch, strict=False).float()
                    probs = torch.softmax(logits, dim=-1).cpu()
                y_hat = torch.multinomial(probs, 1, generator=generator).view(-1).to(model.device)
            for start in range(0, len(order), chunk_size):
                idx = order[start:start + chunk_size]
                chunk = trim_padding(_take(batch, idx))
                if layerwise:
                    labels = sampler.labels(idx) if y_hat is None else y_hat[idx]
                    try:
                        _layerwise_chunk(model, diff, const, chunk, labels, target, scores)
                    except _Unsupported as exc:
                        raise TalosError(f"the layer-wise engine cannot handle this model ({exc}); "
                                         "use engine='vmap'") from None
                    continue
                # on CPU the math attention kernel has vmap batching rules (the fused one loops)
                with differentiable_attention() if model.device.type == "cpu" else nullcontext():
                    grads = per_sample(diff, chunk, y_hat[idx])
                for name, g in grads.items():
                    scores[name] += g.to(SCORE_DTYPE).pow(2).sum(0)
    finally:
        model.train(was_training)
    tally.add("grad", len(split))
    return scores


def fisher_scores_loop(model: TaskModel, split: Split, task: TaskSpec, names: list[str], *,
                       generator: torch.Generator, batch_size: int = 32,
                       target: Literal["logprob", "logit"] = "logprob") -> dict[str, torch.Tensor]:
    """Reference implementation: one forward+backward per sample (as the official code does).

    Same sampling order as :func:`fisher_scores`, so with equal generators both return the same
    scores up to float rounding. Used by tests and by the calibration benchmark.
    """
    params = dict(model.named_parameters())
    scores = {n: torch.zeros_like(params[n], dtype=SCORE_DTYPE) for n in names}
    flags = {n: p.requires_grad for n, p in params.items()}
    was_training = model.training
    model.eval()
    try:
        for n, p in params.items():
            p.requires_grad_(n in scores)
        for batch in iter_batches(model, split, task, batch_size):
            with torch.no_grad():
                probs = torch.softmax(model(**batch).float(), dim=-1).cpu()
            y_hat = torch.multinomial(probs, 1, generator=generator).view(-1)
            for i in range(y_hat.shape[0]):
                out = model(**_slice(batch, i, i + 1)).float()
                if target == "logprob":
                    out = torch.log_softmax(out, dim=-1)
                value = out[0, int(y_hat[i])]
                grads = torch.autograd.grad(value, [params[n] for n in names], allow_unused=True)
                for n, g in zip(names, grads):
                    if g is not None:
                        scores[n] += g.to(SCORE_DTYPE).pow(2)
    finally:
        for n, p in params.items():
            p.requires_grad_(flags[n])
        model.train(was_training)
    return scores
