"""Make ``import torchvision`` work with a CPU-only torch build.

Why: on this kind of machine torch is the local CPU build 2.13.0, while the only torchvision wheel on
PyPI (0.28.0) is linked against CUDA. Its compiled extension then fails to load, and
``torchvision/_meta_registrations.py`` dies at import with ``operator torchvision::nms does not
exist`` because it registers fake kernels for ops the extension would have defined. open_clip, timm
and transformers' vision models all import torchvision, so everything would break.

Fix: before torchvision is imported, define the *schemas* of the two ops it registers fake kernels
for (``nms`` and ``qnms``). Nothing in TaLoS Studio calls these ops; they only need to exist.

This is a no-op when torchvision's compiled ops load (the op already exists, e.g. a matching
CUDA build on a GPU machine) or when torchvision was already imported. ``import talos_core`` calls
:func:`install_hook`: the guard then runs (imports torch, calls :func:`install`) just before torchvision
is first looked up, so importing the torch-free parts of talos_core (e.g. :mod:`talos_core.schema`)
never imports torch.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
_LIBRARY: torch.library.Library | None = None  # kept alive: dropping it would unregister the schemas


def _op_exists(name: str) -> bool:
    import torch

    try:
        torch._C._dispatch_find_schema_or_throw(f"torchvision::{name}", "")
        return True
    except RuntimeError:
        return False


def _try_load_compiled_ops() -> None:
    """Let torchvision load its own extension first, if it can (no-op path)."""
    import torch

    try:
        import importlib.util

        spec = importlib.util.find_spec("torchvision")
        if spec is None or not spec.submodule_search_locations:
            return
        import glob
        import os

        for folder in spec.submodule_search_locations:
            for lib in glob.glob(os.path.join(folder, "_C*.so")):
                try:
                    torch.ops.load_library(lib)
                except (OSError, RuntimeError):
                    pass
    except Exception:  # pragma: no cover - best effort only
        pass


def missing_ops() -> list[str]:
    """Names of the torchvision ops whose schemas are not registered right now."""
    return [name for name in _SCHEMAS if not _op_exists(name)]


def install() -> list[str]:
    """Register the missing schemas; return the names registered (empty list = no-op).

    >>> isinstance(install(), list)
    True
    """
    global _LIBRARY
    import torch

    if "torchvision" in sys.modules:
        return []
    if missing_ops():
        _try_load_compiled_ops()
    missing = missing_ops()
    if not missing:
        return []
    if _LIBRARY is None:
        _LIBRARY = torch.library.Library("torchvision", "FRAGMENT")
    for name in missing:
        _LIBRARY.define(_SCHEMAS[name])
    return missing


class _BeforeTorchvision:
    """A ``sys.meta_path`` finder that finds nothing: it runs :func:`install` the first time anything looks
    up ``torchvision`` (an import, or ``importlib.util.find_spec``), then removes itself."""

    def find_spec(self, fullname: str, path=None, target=None):  # finder protocol
        if fullname == "torchvision" and self in sys.meta_path:
            sys.meta_path.remove(self)  # first, so the lookups inside install() do not come back here
            try:
                install()
            except BaseException:
                sys.meta_path.insert(0, self)  # try again at the next lookup
                raise
        return None


def install_hook() -> None:
    """Run :func:`install` just before torchvision is first imported (at once if it already is). Idempotent."""
    if "torchvision" in sys.modules:
        install()
        return
    if not any(isinstance(f, _BeforeTorchvision) for f in sys.meta_path):
        sys.meta_path.insert(0, _BeforeTorchvision())
