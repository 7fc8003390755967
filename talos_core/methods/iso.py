"""Iso-C and Iso-CTS (Marczak et al., "No Task Left Behind: Isotropic Model Merging with Common and Task-Specific
Subspaces", ICML 2025), following the authors' code (github.com/danielm1405/iso-merging):

* Iso-C: per weight matrix, the task-arithmetic sum with a flat spectrum (its mean singular value);
* Iso-CTS: a common subspace (the top :data:`ISO_COMMON_FRACTION` of the sum's rank, the paper's value for every
  benchmark) plus each task's own top directions off it, orthogonalized, with a flat spectrum.

Other parameters are averaged; α is searched on ``0…3``. The tensor math is
:func:`talos_core.methods.spectral.iso_c_merge` and :func:`~talos_core.methods.spectral.iso_cts_merge`.
"""

from __future__ import annotations

from talos_core.methods.declaration import MethodDeclaration, Param
from talos_core.methods.tsv import SPECTRAL_ALPHA, SPECTRAL_OPTIONS

ISO_COMMON_FRACTION: float = 0.8
"""Iso-CTS: fraction of the rank given to the common subspace; the paper's default for every benchmark."""

COMMON_FRACTION = Param("common_fraction", float, ISO_COMMON_FRACTION, low=0.0, high=1.0, high_open=False,
                        grid=(ISO_COMMON_FRACTION,), doc="Iso-CTS: fraction of the rank given to the common subspace")


ISO_C = MethodDeclaration(
    "iso_c", "Iso-C", "post-hoc", kind="posthoc", base_method="nonlinear",
    description="Per weight matrix, the task-arithmetic sum with a flat spectrum (its mean singular value); "
    "other parameters averaged (Marczak et al., 2025). No hyperparameter but α, searched on 0…3 as the authors.",
    reference="Marczak et al., No Task Left Behind, ICML 2025 (github.com/danielm1405/iso-merging)",
    options=SPECTRAL_OPTIONS, alpha=SPECTRAL_ALPHA,
    merge="talos_core.methods.spectral:iso_c_merge")

ISO_CTS = MethodDeclaration(
    "iso_cts", "Iso-CTS", "post-hoc", kind="posthoc", base_method="nonlinear",
    description="Iso-C with a common subspace (top 80% of the sum's rank) plus each task's own top "
    "directions off it, orthogonalized, with a flat spectrum (Marczak et al., 2025); α searched on 0…3.",
    reference=ISO_C.reference, params=(COMMON_FRACTION,), alpha=SPECTRAL_ALPHA,
    options={"nonmatrix": SPECTRAL_OPTIONS["nonmatrix"], "spectrum": ("combined", "sum"),
             "conv1x1": SPECTRAL_OPTIONS["conv1x1"]},
    merge="talos_core.methods.spectral:iso_cts_merge")
