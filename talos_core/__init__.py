"""TaLoS Studio engine: task arithmetic with Task-Localized Sparse fine-tuning (TaLoS, ICLR 2025).

Data path: models -> tasks -> masks -> train -> vectors -> evaluate -> store -> dashboard.
"""

from talos_core import _torchvision_guard

_torchvision_guard.install()

__version__ = "0.1.0"
