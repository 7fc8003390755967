"""The store's schema in one torch-free module: result names and slugs, and the method catalogue.

Engine and dashboard both import this module (and nothing heavier) to agree on what a store holds;
``talos_core/evaluation/SCHEMA.md`` describes the same layout for people, and a test keeps the two
in step. Importing it never imports torch.

>>> result_name("default", "clip:ViT-B-32:openai", "talos")
'default__clip-ViT-B-32-openai__talos'
>>> method_info("lota").calibrates, method_info("ties").kind
(True, 'posthoc')
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from talos_core.errors import TalosError, unknown

# --------------------------------------------------------------------------------------------
# names
# --------------------------------------------------------------------------------------------
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def slug(text: str) -> str:
    """Replace anything not ``[A-Za-z0-9._-]`` by ``-``.

    >>> slug("hf-encoder:org/model")
    'hf-encoder-org-model'
    """
    return _UNSAFE.sub("-", str(text))


def check_suite(suite: str) -> str:
    """A suite name must be non-empty, made of ``[A-Za-z0-9._-]`` and contain no ``__``."""
    if not isinstance(suite, str) or not suite or _UNSAFE.search(suite) or "__" in suite:
        raise TalosError(f"suite name must be non-empty letters, digits, '.', '_' or '-' without '__', "
                         f"got {suite!r}")
    return suite


def result_name(suite: str, model: str, *parts: str) -> str:
    """``<suite>__<slug(model)>__<slug(part)>...``."""
    return "__".join([check_suite(suite), slug(model), *(slug(p) for p in parts)])


# --------------------------------------------------------------------------------------------
# where stores are
# --------------------------------------------------------------------------------------------
STORE_ENV = "TALOS_STORE"
USER_STORE = "runs"
"""The user's own store, relative to the working directory."""


def default_store(env: Mapping[str, str] | None = None) -> Path:
    """The store a command uses without ``--store``: ``$TALOS_STORE`` if set, else ``./runs``.

    One rule for every command that reads or writes runs and results; only the viewers (``talos
    dashboard``, ``talos report``) open :func:`shipped_store` instead when neither is given.

    >>> default_store({"TALOS_STORE": "/tmp/s"}), default_store({})
    (PosixPath('/tmp/s'), PosixPath('runs'))
    """
    env = os.environ if env is None else env
    value = env.get(STORE_ENV, "").strip()
    return Path(value).expanduser() if value else Path(USER_STORE)


def shipped_store() -> Path | None:
    """The shipped results ``cached_results/`` of a source checkout (``None`` where there is none,
    e.g. when talos_core is installed from a wheel)."""
    path = Path(__file__).resolve().parent.parent / "cached_results"
    return path if path.is_dir() else None


# --------------------------------------------------------------------------------------------
# the method catalogue
# --------------------------------------------------------------------------------------------
MethodKind = Literal["finetune", "posthoc"]
EvalMode = Literal["nonlinear", "linearized"]

FAMILIES: tuple[str, ...] = ("full fine-tuning", "post-hoc", "parameter-efficient", "ablation")
"""Method families in the order of the paper's tables (paper Sec. 5: (i) full fine-tuning, (ii) post-hoc
methods on non-linear FT vectors, (iii) parameter-efficient fine-tuning, where the paper also places
TaLoS; plus our ablation controls last)."""


@dataclass(frozen=True)
class MethodInfo:
    """What every layer needs to know about a method, without running it.

    ``kind``: ``"finetune"`` (a fine-tuning method, run by :mod:`talos_core.methods`) or ``"posthoc"``
    (a merge of ``base_method``'s task vectors, :mod:`talos_core.methods.merging`). ``sparse``: it
    trains a subset of entries chosen by a mask at ``sparsity``; its α grid is extended by
    1/(1 − sparsity) and its sparsity is part of the run's identity. ``calibrates``: it computes its
    mask from data with a calibration phase, whose settings are part of the run's identity.
    ``eval_mode``: how its task vectors are evaluated (``"linearized"`` = first-order Taylor model).
    """

    name: str
    label: str
    family: str
    kind: MethodKind = "finetune"
    sparse: bool = False
    calibrates: bool = False
    eval_mode: EvalMode = "nonlinear"
    base_method: str | None = None  # post-hoc methods merge this method's vectors

    @property
    def posthoc(self) -> bool:
        return self.kind == "posthoc"


METHODS: dict[str, MethodInfo] = {m.name: m for m in (
    MethodInfo("nonlinear", "Non-linear FT", "full fine-tuning"),
    MethodInfo("linearized", "Linearized FT", "full fine-tuning", eval_mode="linearized"),
    MethodInfo("ties", "TIES-Merging", "post-hoc", kind="posthoc", base_method="nonlinear"),
    MethodInfo("tall_consensus", "TALL Mask / Consensus", "post-hoc", kind="posthoc", base_method="nonlinear"),
    MethodInfo("dare", "DARE", "post-hoc", kind="posthoc", base_method="nonlinear"),
    MethodInfo("breadcrumbs", "Breadcrumbs", "post-hoc", kind="posthoc", base_method="nonlinear"),
    MethodInfo("llora", "L-LoRA", "parameter-efficient", eval_mode="linearized"),
    MethodInfo("lota", "LoTA", "parameter-efficient", sparse=True, calibrates=True),
    MethodInfo("talos", "TaLoS", "parameter-efficient", sparse=True, calibrates=True),
    MethodInfo("random", "Random mask", "ablation", sparse=True),
    MethodInfo("magnitude", "Magnitude mask", "ablation", sparse=True),
    MethodInfo("talos-top", "TaLoS top-k", "ablation", sparse=True, calibrates=True),
)}
"""Every fine-tuning and post-hoc method, in the paper's table order (controls last)."""


def method_info(name: str) -> MethodInfo:
    """The catalogue entry of ``name``; an unknown name is one :class:`TalosError` listing the choices."""
    if name not in METHODS:
        raise unknown("method", name, METHODS)
    return METHODS[name]


def method_label(name: str) -> str:
    """Display name as in the paper's tables (``"talos"`` → ``"TaLoS"``); unknown names are returned as given.

    >>> method_label("tall_consensus"), method_label("my-method")
    ('TALL Mask / Consensus', 'my-method')
    """
    info = METHODS.get(name)
    return info.label if info else name


def method_family(name: str) -> str:
    """The family of a fine-tuning or post-hoc method (see :data:`FAMILIES`).

    >>> method_family("linearized")
    'full fine-tuning'
    """
    return method_info(name).family
