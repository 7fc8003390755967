"""The model abstraction every family implements.

A :class:`TaskModel` is ``θ`` (the backbone whose parameters are fine-tuned and whose task vectors
we store) plus a frozen, swappable task head. ``model(**batch)`` returns class logits ``[B, C]`` for
the task whose head is set. Heads are buffers, never parameters, so task vectors only ever hold
backbone entries and ``functional_call`` over ``named_parameters()`` sees exactly ``θ``.

Families implement four things:

* :meth:`TaskModel.prepare` — raw inputs (strings or uint8 images) → a batch dict of tensors, each
  with a leading batch dimension (so it can be sliced per sample for ``torch.func.vmap``);
* :meth:`TaskModel.build_head` — a frozen zero-shot head for a :class:`~talos_core.tasks.TaskSpec`;
* :meth:`TaskModel.forward` — logits for the current head;
* :meth:`TaskModel.maskable_names` — the parameters TaLoS may select from (Linear, attention,
  LayerNorm and conv weights and all biases; embeddings and final projections stay frozen).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from talos_core.tasks.base import Inputs, Split, TaskSpec

Head = dict[str, torch.Tensor]
Batch = dict[str, torch.Tensor]


def iter_batches(model: TaskModel, split: Split, task: TaskSpec, batch_size: int,
                 order: np.ndarray | None = None) -> Iterator[Batch]:
    """Prepared batches of ``split`` on the model's device, visiting examples in ``order`` (default: as stored)."""
    order = np.arange(len(split)) if order is None else order
    for start in range(0, len(split), batch_size):
        part = split.take(order[start:start + batch_size])
        yield {k: v.to(model.device) for k, v in model.prepare(part.inputs, task).items()}


#: module types whose own parameters are maskable (LayerNorm variants are matched by class name)
_MASKABLE_MODULES = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.MultiheadAttention, nn.LayerNorm)


class TaskModel(nn.Module):
    """Backbone ``θ`` + frozen task head. Subclasses set :attr:`family` and :attr:`modality`."""

    family: ClassVar[str] = "base"
    modality: ClassVar[str] = "text"

    def __init__(self) -> None:
        super().__init__()
        self._head_keys: list[str] = []
        self.head_task: str | None = None

    # --- to implement -----------------------------------------------------------------------
    def prepare(self, inputs: Inputs, task: TaskSpec | None = None) -> Batch:  # pragma: no cover - abstract
        raise NotImplementedError

    def input_lengths(self, inputs: Inputs, task: TaskSpec | None = None) -> np.ndarray | None:
        """Tokens per input after truncation (what a batch is padded to), for length-grouped batching; ``None`` for
        models whose inputs all have one size (images)."""
        return None

    def build_head(self, task: TaskSpec) -> Head:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, **batch: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def excluded_names(self) -> set[str]:
        """Parameters of maskable module types that the paper still keeps frozen (e.g. ``lm_head``)."""
        return set()

    # --- shared behaviour -------------------------------------------------------------------
    def maskable_names(self) -> list[str]:
        """Names of the parameters TaLoS may select entries from, in ``named_parameters`` order."""
        excluded = self.excluded_names()
        names: set[str] = set()
        for mod_name, module in self.named_modules():
            is_norm = type(module).__name__.endswith(("LayerNorm", "RMSNorm"))
            if isinstance(module, _MASKABLE_MODULES) or is_norm:
                for p_name, _ in module.named_parameters(recurse=False):
                    full = f"{mod_name}.{p_name}" if mod_name else p_name
                    if full not in excluded:
                        names.add(full)
        return [n for n, _ in self.named_parameters() if n in names]

    def set_head(self, head: Head, task: str | None = None) -> None:
        """Install a frozen head (tensors become non-persistent buffers named ``head_<key>``)."""
        for key in self._head_keys:
            delattr(self, f"head_{key}")
        device = self.device
        for key, value in head.items():
            self.register_buffer(f"head_{key}", value.detach().to(device), persistent=False)
        self._head_keys = list(head)
        self.head_task = task

    def head(self) -> Head:
        return {key: getattr(self, f"head_{key}") for key in self._head_keys}

    @property
    def device(self) -> torch.device:
        for p in self.parameters():
            return p.device
        return torch.device("cpu")

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


@dataclass(frozen=True)
class ModelSpec:
    """A registered model: ``factory()`` builds a fresh :class:`TaskModel` on CPU.

    ``weights`` says where the weights come from: ``"pretrained"`` (a hub download or a local
    package), ``"random"`` (random init from an architecture config, for tests and benchmarks). ``cpu``: a run
    of it fits a CPU-only machine (seconds for the tiny models, minutes for the small real ones); the others
    need a GPU.
    """

    name: str
    family: str
    description: str
    factory: Callable[[], TaskModel] = field(repr=False, compare=False)
    weights: str = "pretrained"
    offline: bool = False  # True when it loads with no network (random init or a local package)
    defaults: dict = field(default_factory=dict, compare=False)  # per-model training defaults
    cpu: bool = False  # small enough to fine-tune on a CPU in seconds to minutes (the Run page offers these)
