"""TSV-Merge (Gargiulo et al., "Task Singular Vectors: Reducing Task Interference in Model Merging", CVPR 2025):
per weight matrix, each task's top 1/T singular directions, decorrelated by orthogonal Procrustes and re-weighted
by their singular values; other parameters averaged. It follows the authors' code
(github.com/AntoAndGar/task_singular_vectors): no hyperparameter but the final α, searched on ``0…3``.

The tensor math is :func:`talos_core.methods.spectral.tsv_merge`, the declared merge itself (its keyword defaults are
the labelled options' first values).
"""

from __future__ import annotations

from talos_core.methods.declaration import AlphaRule, MethodDeclaration

SPECTRAL_ALPHA_STOP: float = 3.0
"""TSV-Merge, Iso-C, Iso-CTS: α searched up to 3, as both authors' code (``np.linspace(0.0, 3.0, 31)[1:]``, i.e.
``0.1, 0.2, …, 3`` on the validation split); the flat or truncated spectra have smaller norms than the sum, so the
best α often lies above 1."""

SPECTRAL_ALPHA = AlphaRule(stop=SPECTRAL_ALPHA_STOP)
"""The α grid of the spectral merges: ``0, 0.05, …, 3``."""

SPECTRAL_OPTIONS: dict[str, tuple[str, ...]] = {"nonmatrix": ("mean", "sum"), "conv1x1": ("other", "matrix")}
"""Labelled conventions of the spectral merges, the authors' first: parameters that are not matrices averaged
(``"sum"``: task arithmetic's sum), and 1×1 convolution kernels merged as such (``"matrix"``: as ``[out, in]``
matrices; the authors' code, written for ViTs, only treats 2-D tensors as matrices)."""


DECLARATION = MethodDeclaration(
    "tsv", "TSV-Merge", "post-hoc", kind="posthoc", base_method="nonlinear",
    description="Per weight matrix, each task's top 1/T singular directions, decorrelated by orthogonal "
    "Procrustes and re-weighted by their singular values; other parameters averaged (Gargiulo et al., 2025). "
    "No hyperparameter but α, searched on 0…3 as the authors.",
    reference="Gargiulo et al., Task Singular Vectors, CVPR 2025 (github.com/AntoAndGar/task_singular_vectors)",
    options=SPECTRAL_OPTIONS, alpha=SPECTRAL_ALPHA,
    merge="talos_core.methods.spectral:tsv_merge")
