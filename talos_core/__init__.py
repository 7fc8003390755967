"""TaLoS Studio engine: task arithmetic with Task-Localized Sparse fine-tuning (TaLoS, ICLR 2025).

Data path: models -> tasks -> masks -> train -> vectors -> evaluate -> store -> dashboard.

Importing the package imports no torch: the torchvision CPU guard (:mod:`talos_core._torchvision_guard`)
runs just before torchvision is first imported.
"""

from talos_core import _torchvision_guard

_torchvision_guard.install_hook()

__version__ = "0.1.0"
