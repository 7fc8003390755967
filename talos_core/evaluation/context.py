"""The evaluation context: one model at ``θ0``, the evaluated tasks' data and frozen heads.

Every protocol evaluates edited models ``θ0 + Σ α_t τ_t`` through an :class:`EvalContext`. It holds
ONE model instance (never copied): edits are in place with bitwise restore
(:func:`talos_core.vectors.apply_vectors`), and the per-task frozen head is swapped in with
:meth:`TaskModel.set_head`. All heads are built once, at ``θ0``, when the context is created —
building a head while an edit is applied would bake the edit into the (frozen) head.

>>> # ctx = EvalContext.for_model("tiny-text", ["tweets", "drug-reviews"], max_test=64)
>>> # ctx.accuracy("tweets", "test", [(tau, 1.0)])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from talos_core.errors import TalosError, check_int
from talos_core.inference import cache
from talos_core.inference.forward import Mode, Terms, base_and_jvps, predict_logits, predict_logits_many
from talos_core.inference.runtime import head_for, memoized_zero_shot, prepared_model, resolve_device
from talos_core.models.base import Head, TaskModel
from talos_core.tasks.base import Split, TaskData, TaskSpec
from talos_core.vectors import TaskVector

SPLITS = ("val", "test")


@dataclass
class EvalContext:
    """A model at ``θ0`` plus the specs, data and heads of the tasks it is evaluated on."""

    model: TaskModel
    specs: dict[str, TaskSpec]
    data: dict[str, TaskData]
    heads: dict[str, Head]
    model_name: str = "model"
    batch_size: int = 128
    limits: dict = field(default_factory=dict)  # {"max_val": ..., "max_test": ...} used to load data
    _zero_shot: dict = field(default_factory=dict, repr=False)
    _digests: dict = field(default_factory=dict, repr=False)  # the logits cache's keys of θ0, heads and splits
    share_zero_shot: bool = field(default=False, repr=False)  # for_model: θ0 is the cached registered model

    def __post_init__(self) -> None:
        for name in self.specs:
            if name not in self.data or name not in self.heads:
                raise TalosError(f"task {name!r} has no data or head in this evaluation context")

    # ----- construction ---------------------------------------------------------------------
    @classmethod
    def for_model(cls, model_name: str, tasks: Sequence[str], *, max_val: int | None = None,
                  max_test: int | None = None, device: str = "auto",
                  batch_size: int | None = None) -> EvalContext:
        """Load (cached) model ``model_name`` and the ``val``/``test`` splits of ``tasks``.

        ``batch_size`` defaults to 32 on CPU (length-sorted small batches pad less; measured 1.3–2×
        faster than 128 on MiniLM over reviews and fortunes) and 128 on accelerators.

        ``max_val``/``max_test`` subsample exactly as :func:`talos_core.tasks.load_task` does for a run
        with the same limits, so a run's own evaluation and the protocols see the same examples.
        """
        from talos_core.tasks import get_task, load_task

        names = list(dict.fromkeys(tasks))
        if not names:
            raise TalosError("no tasks to evaluate; give at least one task name")
        specs = {n: get_task(n) for n in names}
        dev = resolve_device(device)
        if batch_size is None:
            batch_size = 32 if dev.type == "cpu" else 128
        model = prepared_model(model_name, specs[names[0]], dev)
        heads = {n: head_for(model, model_name, s) for n, s in specs.items()}  # all at θ0
        data = {n: load_task(n, max_train=1, max_val=max_val, max_test=max_test) for n in names}
        return cls(model, specs, data, heads, model_name=model_name, batch_size=batch_size,
                   limits={"max_val": max_val, "max_test": max_test}, share_zero_shot=True)

    # ----- access ---------------------------------------------------------------------------
    @property
    def tasks(self) -> list[str]:
        return list(self.specs)

    def spec(self, task: str) -> TaskSpec:
        if task not in self.specs:
            raise TalosError(f"task {task!r} is not part of this evaluation; tasks: {', '.join(self.specs)}")
        return self.specs[task]

    def split(self, task: str, split: str | Split) -> Split:
        """``split`` is ``"val"``/``"test"`` or an explicit :class:`Split` (e.g. a random subset)."""
        if isinstance(split, Split):
            return split
        if split not in SPLITS:
            raise TalosError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
        self.spec(task)
        return getattr(self.data[task], split)

    def labels(self, task: str, split: str | Split) -> np.ndarray:
        return np.asarray(self.split(task, split).labels)

    def use_head(self, task: str) -> None:
        """Swap ``task``'s frozen head in (no-op when it is already set)."""
        spec = self.spec(task)
        if self.model.head_task != spec.name:
            self.model.set_head(self.heads[task], spec.name)

    # ----- evaluation -----------------------------------------------------------------------
    def logits(self, task: str, split: str | Split, terms: Terms = (), mode: Mode = "nonlinear") -> torch.Tensor:
        """Logits ``[N, C]`` of ``θ0 + Σ α τ`` on ``task``'s split."""
        self.use_head(task)
        return predict_logits(self.model, self.spec(task), self.split(task, split), terms, mode=mode,
                              batch_size=self.batch_size)

    def logits_many(self, items: Sequence[tuple[str, str | Split]], terms: Terms = (),
                    mode: Mode = "nonlinear") -> list[torch.Tensor]:
        """Logits on several ``(task, split)`` with ONE in-place edit (see ``predict_logits_many``)."""
        evals = [(self.spec(t), self.split(t, s), self.heads[t]) for t, s in items]
        terms = [(tv, float(a)) for tv, a in terms if a != 0.0]
        if cache.active() is None or mode != "nonlinear" or not terms:
            return predict_logits_many(self.model, evals, terms, mode=mode, batch_size=self.batch_size)
        return self._cached_logits(items, evals, terms)

    def _cached_logits(self, items: Sequence[tuple[str, str | Split]], evals: list,
                       terms: Terms) -> list[torch.Tensor]:
        """:meth:`logits_many` of a non-linear edit through the logits cache (:mod:`talos_core.inference.cache`):
        the splits evaluated under this very edit before come from it, the others are computed (one edit) and
        added to it."""
        from talos_core.inference import tally
        from talos_core.inference.precision import model_precision

        key = cache.edit_key(model=self.model_name, theta0=self._theta0_digest(), device=self.model.device.type,
                             precision=model_precision(self.model), batch_size=self.batch_size,
                             terms=[(cache.vector_digest(tv), a) for tv, a in terms])
        names = [cache.item_key(t, self._head_digest(t), self._split_digest(t, s)) for t, s in items]
        kept = cache.read(key)
        todo = [i for i, n in enumerate(names) if n not in kept]
        tally.add("cached", sum(len(ev[1]) for n, ev in zip(names, evals) if n in kept))
        if todo:
            fresh = predict_logits_many(self.model, [evals[i] for i in todo], terms, mode="nonlinear",
                                        batch_size=self.batch_size)
            kept.update({names[i]: lg for i, lg in zip(todo, fresh)})
            cache.write(key, kept)
        return [kept[n] for n in names]

    def _theta0_digest(self) -> str:
        """SHA-256 of the model's weights and buffers at θ0, the installed head left out (read when no edit is
        applied: between evaluations)."""
        if "theta0" not in self._digests:
            state = {f"p:{n}": p for n, p in self.model.named_parameters()}
            state.update({f"b:{n}": b for n, b in self.model.named_buffers() if not n.startswith("head_")})
            self._digests["theta0"] = cache.tensors_digest(state)
        return self._digests["theta0"]

    def _head_digest(self, task: str) -> str:
        if ("head", task) not in self._digests:
            self._digests[("head", task)] = cache.tensors_digest(dict(self.heads[task]))
        return self._digests[("head", task)]

    def _split_digest(self, task: str, split: str | Split) -> str:
        obj = self.split(task, split)
        key = ("split", id(obj))
        if key not in self._digests or self._digests[key][0] is not obj:
            self._digests[key] = (obj, cache.split_digest(obj))  # the split is kept alive: its id stays its own
        return self._digests[key][1]

    def accuracy(self, task: str, split: str | Split, terms: Terms = (), mode: Mode = "nonlinear") -> float:
        """Top-1 accuracy in [0, 1] of ``θ0 + Σ α τ`` on ``task``'s split."""
        return self.accuracies([(task, split)], terms, mode)[0]

    def accuracies(self, items: Sequence[tuple[str, str | Split]], terms: Terms = (),
                   mode: Mode = "nonlinear") -> list[float]:
        """Accuracies on several ``(task, split)`` of one vector mix, with one edit."""
        outs = self.logits_many(items, terms, mode)
        return [accuracy_of(lg, self.labels(t, s)) for lg, (t, s) in zip(outs, items)]

    def correct_many(self, items: Sequence[tuple[str, str | Split]], terms: Terms = (),
                     mode: Mode = "nonlinear") -> list[np.ndarray]:
        """Per-example correctness (bool ``[N]``) on several ``(task, split)`` of one vector mix, with one
        edit; its mean is exactly :meth:`accuracies`."""
        outs = self.logits_many(items, terms, mode)
        return [correct_of(lg, self.labels(t, s)) for lg, (t, s) in zip(outs, items)]

    def zero_shot_correct(self, task: str, split: str) -> np.ndarray:
        """Per-example correctness of ``θ0`` (cached like :meth:`zero_shot`, under the key ``<split>#examples``)."""
        from talos_core.inference.precision import model_precision

        precision = model_precision(self.model)
        key = (task, f"{split}#examples", precision)
        if key not in self._zero_shot:
            compute = lambda: self.correct_many([(task, split)])[0]  # noqa: E731
            if self.share_zero_shot:
                self._zero_shot[key] = memoized_zero_shot(
                    compute, model=self.model_name, device=self.model.device, precision=precision,
                    max_val=self.limits.get("max_val"), max_test=self.limits.get("max_test"),
                    batch_size=self.batch_size, task=task, split=f"{split}#examples")
            else:
                self._zero_shot[key] = compute()
        return self._zero_shot[key]

    def zero_shot(self, task: str, split: str) -> float:
        """Accuracy of ``θ0`` (cached per task, split and evaluation precision)."""
        from talos_core.inference.precision import model_precision

        precision = model_precision(self.model)
        key = (task, split, precision)
        if key not in self._zero_shot:
            if self.share_zero_shot:
                self._zero_shot[key] = memoized_zero_shot(
                    lambda: self.accuracy(task, split), model=self.model_name, device=self.model.device,
                    precision=precision,
                    max_val=self.limits.get("max_val"), max_test=self.limits.get("max_test"),
                    batch_size=self.batch_size, task=task, split=split)
            else:
                self._zero_shot[key] = self.accuracy(task, split)
        return self._zero_shot[key]

    def base_and_jvps(self, task: str, split: str | Split,
                      vectors: Sequence[TaskVector]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """``f(x, θ0)`` and ``τᵀ∇f(x, θ0)`` per vector (see :func:`core.base_and_jvps`)."""
        self.use_head(task)
        return base_and_jvps(self.model, self.spec(task), self.split(task, split), list(vectors),
                             batch_size=self.batch_size)


def accuracy_of(logits: torch.Tensor | np.ndarray, labels: np.ndarray) -> float:
    """Top-1 accuracy of ``argmax(logits)`` against ``labels`` (NaN for an empty split).

    >>> accuracy_of(np.array([[0.1, 0.9], [2.0, 1.0]]), np.array([1, 1]))
    0.5
    """
    labels = np.asarray(labels)
    if len(labels) == 0:
        return float("nan")
    preds = np.asarray(logits.argmax(-1)) if not isinstance(logits, torch.Tensor) else logits.argmax(-1).numpy()
    return float((preds == labels).mean())


def correct_of(logits: torch.Tensor | np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per-example correctness ``argmax(logits) == labels`` (bool ``[N]``); its mean is :func:`accuracy_of`.

    >>> correct_of(np.array([[0.1, 0.9], [2.0, 1.0]]), np.array([1, 1])).tolist()
    [True, False]
    """
    labels = np.asarray(labels)
    preds = np.asarray(logits.argmax(-1)) if not isinstance(logits, torch.Tensor) else logits.argmax(-1).numpy()
    return np.asarray(preds == labels, dtype=bool).reshape(len(labels))


def mean_correct(correct: np.ndarray) -> float:
    """Accuracy from per-example correctness (NaN for an empty split), equal to :func:`accuracy_of`."""
    return float(correct.mean()) if len(correct) else float("nan")


def subset(split: Split, points: int, seed: int) -> Split:
    """A seeded random subset of ``points`` examples (all of them when the split is smaller), source order kept.

    >>> s = Split([str(i) for i in range(10)], np.arange(10))
    >>> len(subset(s, 4, 0)), len(subset(s, 40, 0))
    (4, 10)
    """
    check_int("points", points, low=1, numpy=True)
    n = len(split)
    if points >= n:
        return split
    idx = np.sort(np.random.default_rng(seed).choice(n, size=points, replace=False))
    return split.take(idx)
