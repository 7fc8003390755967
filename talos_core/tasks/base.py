"""Task specifications and the data they load.

A *task* is a labelled classification problem. Its :class:`TaskSpec` carries everything a model
needs to build a frozen zero-shot head (class names and prompt templates) and a loader returning the
raw examples. Raw examples are model-agnostic: text tasks give ``list[str]``, image tasks give
``uint8`` arrays of shape ``(N, H, W)`` (grey) or ``(N, H, W, 3)`` (RGB). Each model family does its
own preprocessing (tokenizing, resizing, normalizing).

Splits: every task exposes ``train``, ``val`` and ``test``. ``val`` is a deterministic held-out
10% of the original training set (at most 5,000 examples), as in the paper; it is used for mask
calibration and for α selection, never for reporting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

Inputs = list[str] | np.ndarray
Modality = Literal["text", "image"]


@dataclass(frozen=True)
class Split:
    """One split of a task: ``inputs[i]`` has label ``labels[i]`` (an index into the task's classes)."""

    inputs: Inputs
    labels: np.ndarray

    def __post_init__(self) -> None:
        if len(self.inputs) != len(self.labels):
            raise ValueError(f"inputs ({len(self.inputs)}) and labels ({len(self.labels)}) differ in length")

    def __len__(self) -> int:
        return len(self.labels)

    def take(self, idx: Sequence[int] | np.ndarray) -> Split:
        """Return the sub-split at positions ``idx`` (order kept)."""
        idx = np.asarray(idx, dtype=np.int64)
        if isinstance(self.inputs, np.ndarray):
            inputs: Inputs = self.inputs[idx]
        else:
            inputs = [self.inputs[i] for i in idx]
        return Split(inputs, np.asarray(self.labels)[idx])


@dataclass(frozen=True)
class TaskData:
    """The three splits of a loaded task."""

    train: Split
    val: Split
    test: Split


@dataclass(frozen=True)
class TaskSpec:
    """Static description of a task.

    ``templates`` are format strings with one ``{}`` filled with a class name. For image tasks they
    are CLIP prompts (``"a photo of the number: \"{}\"."``); for text tasks they are label
    descriptions embedded by a sentence encoder (``"This tweet expresses {} sentiment."``).
    ``input_template`` (text tasks) wraps the raw input for sequence-to-sequence models (T5), e.g.
    ``"tweet sentiment: {}"``. ``loader`` returns the raw ``(train, test)`` splits; validation is
    carved out of train by :func:`talos_core.tasks.load_task`.
    """

    name: str
    modality: Modality
    classes: tuple[str, ...]
    templates: tuple[str, ...]
    description: str
    loader: Callable[[], tuple[Split, Split]] = field(repr=False, compare=False)
    source: Literal["offline", "huggingface", "synthetic", "file"] = "offline"
    hf_id: str | None = None
    input_template: str = "{}"
    control: bool = False  # a control task for negation (ImageNet / RTE in the paper)

    @property
    def num_classes(self) -> int:
        return len(self.classes)
