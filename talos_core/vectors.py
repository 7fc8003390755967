"""Task vectors ``τ = θ* − θ0``, stored sparsely, and in-place application with exact restore.

A :class:`TaskVector` holds, per parameter, either a dense delta or the flat indices and values of
its non-zero entries. Arithmetic (``+``, ``−``, scalar ``*``) follows the paper's task arithmetic.
:func:`apply_vectors` edits a model's weights in place to ``θ0 + Σ α_t τ_t`` and restores them
bitwise afterwards, so evaluation grids never copy or rebuild the model.

On disk (safetensors): ``<name>::values`` and, for sparse entries, ``<name>::indices`` (int64 flat
positions); shapes and format version in the safetensors metadata.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from talos_core.atomic import atomic_save_safetensors, load_safetensors
from talos_core.errors import TalosError

FORMAT = "talos-task-vector/1"


@dataclass
class TaskVector:
    """Per-parameter deltas; ``indices[name] is None`` means ``values[name]`` is dense."""

    values: dict[str, torch.Tensor] = field(default_factory=dict)
    indices: dict[str, torch.Tensor | None] = field(default_factory=dict)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    source: str | None = field(default=None, compare=False, repr=False)  # the file it was read from (for messages)

    # ----- construction ---------------------------------------------------------------------
    @classmethod
    def from_dense(cls, deltas: dict[str, torch.Tensor], sparse_below: float = 0.5) -> TaskVector:
        """Build from dense deltas, storing a tensor sparsely when its non-zero density < ``sparse_below``.

        >>> tv = TaskVector.from_dense({"w": torch.tensor([[0.0, 2.0], [0.0, 0.0]])})
        >>> tv.indices["w"].tolist(), tv.values["w"].tolist()
        ([1], [2.0])
        """
        tv = cls()
        for name, d in deltas.items():
            d = d.detach()
            tv.shapes[name] = tuple(d.shape)
            nz = torch.nonzero(d.reshape(-1) != 0).view(-1)
            if nz.numel() < sparse_below * d.numel():
                tv.indices[name] = nz.cpu()
                tv.values[name] = d.reshape(-1)[nz].cpu().clone()
            else:
                tv.indices[name] = None
                tv.values[name] = d.cpu().clone()
        return tv

    @classmethod
    def from_entries(cls, values: dict[str, torch.Tensor], indices: dict[str, torch.Tensor | None],
                     shapes: dict[str, tuple[int, ...]]) -> TaskVector:
        return cls(dict(values), dict(indices), {k: tuple(v) for k, v in shapes.items()})

    # ----- views ----------------------------------------------------------------------------
    def names(self) -> list[str]:
        return list(self.values)

    def dense(self, name: str) -> torch.Tensor:
        idx = self.indices[name]
        if idx is None:
            return self.values[name]
        out = torch.zeros(self.shapes[name], dtype=self.values[name].dtype)
        out.view(-1)[idx] = self.values[name]
        return out

    def to_dense(self) -> dict[str, torch.Tensor]:
        return {n: self.dense(n) for n in self.values}

    def nnz(self) -> int:
        return sum(int((self.values[n] != 0).sum()) for n in self.values)

    def numel(self) -> int:
        return sum(int(torch.Size(s).numel()) for s in self.shapes.values())

    def norm(self) -> float:
        return float(torch.sqrt(sum((v.double() ** 2).sum() for v in self.values.values())))

    # ----- arithmetic -----------------------------------------------------------------------
    def __mul__(self, alpha: float) -> TaskVector:
        return TaskVector({n: v * alpha for n, v in self.values.items()}, dict(self.indices), dict(self.shapes))

    __rmul__ = __mul__

    def __neg__(self) -> TaskVector:
        return self * -1.0

    def __add__(self, other: TaskVector) -> TaskVector:
        return sum_vectors([self, other])

    def __sub__(self, other: TaskVector) -> TaskVector:
        return sum_vectors([self, -other])

    # ----- io -------------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        tensors: dict[str, torch.Tensor] = {}
        for n, v in self.values.items():
            tensors[f"{n}::values"] = v.contiguous()
            if self.indices[n] is not None:
                tensors[f"{n}::indices"] = self.indices[n].to(torch.int64).contiguous()
        meta = {"format": FORMAT, "shapes": json.dumps({n: list(s) for n, s in self.shapes.items()})}
        atomic_save_safetensors(tensors, Path(path), meta)

    @classmethod
    def load(cls, path: str | Path) -> TaskVector:
        """Read a task vector file; a file that is not one, or whose entries are inconsistent (an index outside
        its tensor, values and indices of different lengths, a dense entry of the wrong shape) or not finite
        (NaN, ±inf), is one :class:`TalosError` naming the file."""
        tensors, meta = load_safetensors(Path(path))
        if meta.get("format") != FORMAT:
            raise TalosError(f"{path} is not a TaLoS task vector (format {meta.get('format')!r}, expected {FORMAT!r})")
        try:
            shapes = {n: tuple(int(d) for d in s) for n, s in json.loads(meta["shapes"]).items()}
            values = {n: tensors[f"{n}::values"] for n in shapes}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise TalosError(f"task vector {path} is corrupt: its header does not match its tensors ({exc})") from None
        indices = {n: tensors.get(f"{n}::indices") for n in shapes}
        for n, shape in shapes.items():
            _check_entry(path, n, shape, values[n], indices[n])
        return cls(values, indices, shapes, source=str(path))


def _check_entry(path: str | Path, name: str, shape: tuple[int, ...], values: torch.Tensor,
                 indices: torch.Tensor | None) -> None:
    """One stored entry must be a finite delta that fits its parameter's ``shape`` (see :meth:`TaskVector.load`)."""
    numel = int(torch.Size(shape).numel())
    if indices is None:
        ok = tuple(values.shape) == tuple(shape)
    else:
        ok = (indices.dim() == 1 and values.dim() == 1 and indices.numel() == values.numel()
              and not indices.is_floating_point()
              and (indices.numel() == 0 or (int(indices.min()) >= 0 and int(indices.max()) < numel)))
    if not ok:
        raise TalosError(f"task vector {path} is corrupt: entry {name!r} does not fit its shape {tuple(shape)}")
    if values.is_floating_point() and not bool(torch.isfinite(values).all()):
        raise TalosError(f"task vector {path} holds non-finite values (NaN or inf) in {name!r}; "
                         f"fine-tune the run again (talos finetune --force)")


def sum_vectors(vectors: Sequence[TaskVector], alphas: Sequence[float] | None = None) -> TaskVector:
    """``Σ α_t τ_t`` (default α = 1); supports are united, tensors re-sparsified when sparse."""
    alphas = [1.0] * len(vectors) if alphas is None else list(alphas)
    if len(alphas) != len(vectors):
        raise TalosError(f"got {len(alphas)} coefficients for {len(vectors)} task vectors")
    shapes: dict[str, tuple[int, ...]] = {}
    for tv in vectors:
        for n, s in tv.shapes.items():
            if shapes.setdefault(n, s) != s:
                raise TalosError(f"task vectors disagree on the shape of {n}: {shapes[n]} vs {s}")
    out: dict[str, torch.Tensor] = {}
    for n in shapes:
        acc = None
        for tv, a in zip(vectors, alphas):
            if n not in tv.values:
                continue
            d = tv.dense(n) * a
            acc = d if acc is None else acc + d
        out[n] = acc
    return TaskVector.from_dense(out)


def restrict(vector: TaskVector, keep: dict[str, torch.Tensor]) -> TaskVector:
    """Zero every entry outside the boolean ``keep`` masks (names missing from ``keep`` are dropped)."""
    return TaskVector.from_dense({n: vector.dense(n) * keep[n].to(vector.values[n].dtype)
                                  for n in vector.values if n in keep})


def restore_entries(p: torch.Tensor, idx: torch.Tensor | None, original: torch.Tensor) -> None:
    """Write saved original values back into ``p`` (in place, no grad): the whole tensor when ``idx``
    is None, else its flat entries ``idx``."""
    with torch.no_grad():
        if idx is None:
            p.copy_(original)
        else:
            p.view(-1).index_copy_(0, idx, original)


@contextmanager
def apply_vectors(model: nn.Module, terms: Iterable[tuple[TaskVector, float]]) -> Iterator[nn.Module]:
    """Temporarily set ``θ ← θ + Σ α τ`` in place; restore the exact original bits on exit.

    >>> lin = nn.Linear(2, 1, bias=False); before = lin.weight.detach().clone()
    >>> tv = TaskVector.from_dense({"weight": torch.ones(1, 2)})
    >>> with apply_vectors(lin, [(tv, 0.5)]):
    ...     bool(torch.allclose(lin.weight, before + 0.5))
    True
    >>> torch.equal(lin.weight, before)
    True
    """
    terms = [(tv, float(a)) for tv, a in terms if a != 0.0]
    params = dict(model.named_parameters())
    # Per tensor: the index sets the terms touch (None = dense). Every saved slice holds ORIGINAL
    # values (all taken before any term is applied), so overlapping slices restore the same bits in
    # any order — no union (a sort over millions of indices) is needed.
    touched: dict[str, list[torch.Tensor] | None] = {}
    for tv, _ in terms:
        for n in tv.values:
            if n not in params:
                raise TalosError(f"task vector entry {n!r} is not a parameter of this model")
            if tuple(params[n].shape) != tuple(tv.shapes[n]):
                raise TalosError(f"task vector entry {n!r} has shape {tuple(tv.shapes[n])}, "
                                 f"the model's parameter has {tuple(params[n].shape)}")
            idx = tv.indices[n]
            if idx is None or touched.get(n, []) is None:
                touched[n] = None
            else:
                touched.setdefault(n, []).append(idx.to(params[n].device))
    saved: dict[str, list[tuple[torch.Tensor | None, torch.Tensor]]] = {}
    for n, idxs in touched.items():
        flat = params[n].detach().reshape(-1)
        if idxs is None or sum(i.numel() for i in idxs) >= flat.numel() // 2:
            saved[n] = [(None, params[n].detach().clone())]  # a whole copy is cheaper than the slices
        else:
            saved[n] = [(i, flat[i].clone()) for i in idxs]
    try:
        with torch.no_grad():
            for tv, a in terms:
                for n, v in tv.values.items():
                    p = params[n]
                    v = v.to(device=p.device, dtype=p.dtype)
                    idx = tv.indices[n]
                    if idx is None:
                        p.add_(v, alpha=a)
                    else:
                        p.view(-1).index_add_(0, idx.to(p.device), v, alpha=a)
        yield model
    finally:
        for n, slices in saved.items():
            for idx, orig in slices:
                restore_entries(params[n], idx, orig)
