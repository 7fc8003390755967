"""What a method is, declared once: :class:`MethodDeclaration` and its typed hyperparameters :class:`Param`.

A declaration holds everything the layers need to know about a method without running it — its id, catalogue
label, family, kind and flags, its hyperparameters (type, default, allowed range, the grid the suites search), the
α-grid rule it needs, its reference — and names its runner as ``"module:function"``, imported only when the
method runs. This module and the declaration files import neither torch nor any module that reads the catalogue,
so :mod:`talos_core.schema` derives :data:`~talos_core.schema.METHODS` from the registry
(:data:`talos_core.methods.registry.DECLARATIONS`) and stays torch-free.

>>> SPARSE_ALPHA.stretch(0.5), ALPHA.stretch(0.5)
(2.0, 1.0)
>>> Param("beta", float, 0.5, low=0.0, high=1.0, high_open=False).check(2.0)
Traceback (most recent call last):
...
talos_core.errors.TalosError: beta must be in [0, 1], got 2.0
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from talos_core.errors import TalosError, check_int, check_range, unknown

MethodKind = Literal["finetune", "posthoc"]
EvalMode = Literal["nonlinear", "linearized"]

ALPHA_STEP: float = 0.05
"""The step of the paper's α grid ``0, 0.05, …, 1`` (task addition and negation)."""

GridValues = Sequence[Any] | Callable[[int], Sequence[Any]]
"""A hyperparameter's search grid: its values, or a callable ``T -> values`` when they depend on the task count."""


@dataclass(frozen=True)
class Param:
    """One typed hyperparameter: ``name``, ``type`` (``float``, ``int`` or ``str``), ``default``, the allowed range
    (``low``/``high`` with open or closed ends; ``choices`` for a string), the ``grid`` the suites search (``None``:
    not searched), the ``tag`` a variant id writes it with (``talos-k0.9``; ``None``: no variant fixes it) and its
    ``doc``."""

    name: str
    type: type
    default: Any = None
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = True
    choices: tuple[Any, ...] = ()
    grid: GridValues | None = None
    tag: str | None = None
    doc: str = ""

    def check(self, value: Any) -> Any:
        """``value`` if it is allowed; otherwise one :class:`TalosError` sentence naming it and the allowed range."""
        if self.choices:
            if value not in self.choices:
                raise TalosError(f"{self.name} must be one of {', '.join(map(repr, self.choices))}, got {value!r}")
            return value
        if self.type is int:
            return check_int(self.name, value, low=None if self.low is None else int(self.low),
                             high=None if self.high is None else int(self.high))
        if self.type is float:
            return check_range(self.name, value, -math.inf if self.low is None else self.low,
                               math.inf if self.high is None else self.high,
                               low_open=self.low_open, high_open=self.high_open)
        if not isinstance(value, self.type):
            raise TalosError(f"{self.name} must be a {self.type.__name__}, got {value!r}")
        return value

    def with_(self, **changes: Any) -> Param:
        """A copy with ``changes`` (e.g. another method's grid), everything else — the default included — kept."""
        return replace(self, **changes)


@dataclass(frozen=True)
class AlphaRule:
    """The α grid a method's task vectors are evaluated on: ``0, ALPHA_STEP, …, stop``, stretched by
    ``1/(1 − sparsity)`` for a sparse method (its vectors move fewer entries, so they need larger α); a post-hoc
    method searches up to its authors' ``stop`` and may apply its addition at one fixed ``addition_alpha``."""

    stop: float = 1.0
    stretch_by_sparsity: bool = False
    addition_alpha: float | None = None

    def __post_init__(self) -> None:
        check_range("alpha_stop", self.stop, 0.0, math.inf, low_open=True)
        if self.addition_alpha is not None:
            check_range("addition_alpha", self.addition_alpha, 0.0, math.inf, low_open=True)

    def stretch(self, sparsity: float | None) -> float:
        """The factor the grid is stretched by at ``sparsity`` (1 where the rule does not stretch)."""
        if not self.stretch_by_sparsity or sparsity is None:
            return 1.0
        check_range("sparsity", float(sparsity), 0.0, 1.0)
        return 1.0 / (1.0 - float(sparsity))


ALPHA = AlphaRule()
"""The paper's α grid ``0, 0.05, …, 1``."""
SPARSE_ALPHA = AlphaRule(stretch_by_sparsity=True)
"""The paper's α grid for sparse methods, stretched by ``1/(1 − sparsity)``."""


def resolve(target: str) -> Callable[..., Any]:
    """The function named ``"package.module:function"`` (imported now, not when the declaration was made)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class MethodDeclaration:
    """One method, declared once (fine-tuning and post-hoc alike).

    ``kind``: ``"finetune"`` (a fine-tuning method) or ``"posthoc"`` (a merge of ``base_method``'s task vectors).
    ``sparse``: it trains a subset of entries chosen by a mask at ``sparsity``; its α grid is extended by
    1/(1 − sparsity) and its sparsity is part of the run's identity. ``calibrates``: it computes its mask from
    data with a calibration phase, whose settings are part of the run's identity. ``eval_mode``: how its task
    vectors are evaluated (``"linearized"`` = first-order Taylor model). ``trains``: False for ``imported``,
    whose runs are checkpoints fine-tuned elsewhere (``talos import``).

    ``params`` are its typed hyperparameters (:class:`Param`); ``options`` the labelled conventions of a post-hoc
    merge (keyword arguments that are not searched, each with its allowed values, the authors' first);
    ``constraint`` filters invalid grid points. ``runner`` names the fine-tuning ``run(ctx)``, ``option_keys`` the
    ``--option`` keys it accepts and ``option_check`` their check against the loaded model; ``merge`` and
    ``single_task`` name the post-hoc callables (each ``"module:function"``, imported when the method runs;
    ``single_task`` left ``None``: the merge of the task's vector alone, :func:`talos_core.methods.merging.
    merge_alone`).
    ``studied`` marks the method the suites study (one method: TaLoS), ``mask_rival`` the method whose masks they
    compare with its own.
    """

    name: str
    label: str
    family: str
    kind: MethodKind = "finetune"
    sparse: bool = False
    calibrates: bool = False
    eval_mode: EvalMode = "nonlinear"
    base_method: str | None = None  # post-hoc methods merge this method's vectors
    trains: bool = True  # False: runs come only from ``talos import`` (never fine-tuned here)
    description: str = ""
    reference: str = ""
    params: tuple[Param, ...] = ()
    options: Mapping[str, tuple[Any, ...]] = field(default_factory=dict, hash=False)
    constraint: Callable[[Mapping[str, Any]], bool] | None = field(default=None, compare=False)
    alpha: AlphaRule | None = None  # None: the paper's grid, stretched if ``sparse``
    studied: bool = False  # the suites' studies (sharing, sparsity ablation, comparison) are about this method
    mask_rival: str | None = None  # the method whose masks the suites compare with its own, at equal sparsity
    runner: str | None = None
    option_keys: tuple[str, ...] = ()
    option_check: str | None = None
    merge: str | None = None
    single_task: str | None = None

    @property
    def posthoc(self) -> bool:
        return self.kind == "posthoc"

    @property
    def alpha_rule(self) -> AlphaRule:
        """The rule of its α grid (:class:`AlphaRule`)."""
        return self.alpha or (SPARSE_ALPHA if self.sparse else ALPHA)

    def param(self, name: str) -> Param:
        """Its hyperparameter ``name``; another name is one :class:`TalosError` listing them."""
        for p in self.params:
            if p.name == name:
                return p
        raise unknown(f"hyperparameter of method {self.name!r}", name, [p.name for p in self.params])

    @property
    def grid(self) -> dict[str, GridValues]:
        """The searched hyperparameters and their grids, in declaration order."""
        return {p.name: p.grid for p in self.params if p.grid is not None}

    @property
    def defaults(self) -> dict[str, Any]:
        """The hyperparameters' defaults (the official scripts' or the method paper's values)."""
        return {p.name: p.default for p in self.params if p.default is not None}

    def resolve(self, what: Literal["runner", "option_check", "merge", "single_task"]) -> Callable[..., Any]:
        """The callable its ``runner``, ``option_check``, ``merge`` or ``single_task`` names (imported now)."""
        target = getattr(self, what)
        if target is None:
            raise TalosError(f"method {self.name!r} declares no {what}")
        return resolve(target)
