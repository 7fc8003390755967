"""Post-hoc task-vector methods: those the paper compares against (TIES-Merging, DARE, Breadcrumbs, TALL masks /
Consensus), later merges (TSV-Merge, Iso-C, Iso-CTS, LiNeS, DELLA), plus the plain task-arithmetic helpers they are
built from: the registry view :data:`POSTHOC_METHODS` of their declarations, and one import for the tensor functions
of :mod:`talos_core.methods.taskvec`, :mod:`~talos_core.methods.sparsify` and :mod:`~talos_core.methods.spectral`.

A *task vector* here is a ``dict[str, torch.Tensor]``: parameter name -> dense delta ``θ_t − θ0``; the conventions
(validation, purity, ordering and ties) are :mod:`talos_core.methods.taskvec`'s. Each method is declared in its own
file (:mod:`talos_core.methods.ties`, ``tall``, ``dare``, ``breadcrumbs``, ``tsv``, ``iso``, ``lines``, ``della``),
which holds its hyperparameters, grids and α rule; the differences from the official TaLoS code are listed in
:mod:`talos_core.methods.sparsify`.

Registry: :data:`POSTHOC_METHODS` maps a method name to a :class:`PosthocSpec` (built from its declaration)
whose callables take the paper's hyperparameter names (``sparsity`` etc.) and whose ``grid`` is the paper's search grid
(appendix, "Hyperparameter search"); its label and family are in the method catalogue
:data:`talos_core.schema.METHODS`. The later merges follow their authors' code (AntoAndGar/task_singular_vectors,
danielm1405/iso-merging, wang-kee/LiNeS), searched on the validation split:

* TSV-Merge, Iso-C: no hyperparameter but the final α, which the evaluator searches on ``0, step, …, 3``
  (:data:`SPECTRAL_ALPHA_STOP`; the authors' ``0.1, 0.2, …, 3``);
* Iso-CTS: the common-space fraction fixed at the paper's 0.8 (:data:`ISO_COMMON_FRACTION`), α on ``0…3``;
* LiNeS: ``λ(ℓ) = α + β (ℓ − 1)/(L − 1)`` on the task-arithmetic sum with the rule ``α = 1/T`` (shallow layers
  get the task vectors' mean) and ``β ∈ {0.1, 0.2, …, 1}`` (:data:`LINES_BETA_GRID`), the result added at α = 1
  (:data:`LINES_ADDITION_ALPHA`); parameters outside the blocks are scaled by ``α``.

Conventions of the later merges, each a labelled option (:attr:`PosthocSpec.options`, the authors' choice
first): "matrix" = a 2-D parameter; every other parameter (biases, norms, conv kernels) is averaged over tasks
(``nonmatrix="mean"``; ``"sum"`` is task arithmetic's sum); ``conv1x1="matrix"`` also merges pointwise
convolution kernels ``[out, in, 1, 1]`` as matrices (the authors' code, written for ViTs, does not). Iso-CTS
sizes its subspaces and sets its isotropic scale as its code does
(:func:`~talos_core.methods.spectral.iso_cts_sizes`, ``spectrum="combined"``). LiNeS scales the parameters
outside the blocks by ``α`` (``nonblock="first"``; ``"nearest"``: by the factor of the block before them).
Their single-task vectors are the merge of one vector (TSV: the vector itself; Iso: its isotropic version);
LiNeS, which only rescales the multi-task vector, returns each task's vector unchanged.

Task negation with these methods: the paper applies each post-hoc method to the single task's vector
and then subtracts it. Use ``spec.single_task(vectors, index, **hparams)`` (the processed vector of task
``index``; e.g. TIES on one vector is trimming only, since sign election and the disjoint mean of a
single vector return it unchanged) and scale it by a negative α (:func:`scale`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from talos_core.errors import TalosError, check_int, check_range, unknown
from talos_core.methods.breadcrumbs import OUTLIER_QUANTILE_GRID
from talos_core.methods.declaration import GridValues, MethodDeclaration
from talos_core.methods.iso import ISO_COMMON_FRACTION
from talos_core.methods.lines import LINES_ADDITION_ALPHA, LINES_BETA_GRID
from talos_core.methods.registry import METHODS, method_info
from talos_core.methods.sparsify import (  # noqa: F401 - the tensor functions, re-exported for one import
    TallSource,
    band_mask_tensor,
    breadcrumbs,
    breadcrumbs_merge,
    consensus_mask,
    consensus_merge,
    dare,
    dare_merge,
    disjoint_mean,
    elect_sign,
    tall_mask_tensor,
    tall_mask_vectors,
    tall_masks,
    ties_merge,
)
from talos_core.methods.spectral import (  # noqa: F401
    Conv1x1,
    NonMatrix,
    iso_c_merge,
    iso_cts_merge,
    lines_merge,
    lines_scale,
    tsv_merge,
)
from talos_core.methods.tall import TALL_LAMBDA_GRID, consensus_k_grid
from talos_core.methods.taskvec import (  # noqa: F401
    BandScope,
    Scope,
    TieBreak,
    Vector,
    VectorLike,
    _check_vectors,
    _topk_select,
    add,
    apply_mask,
    density_of,
    magnitude_topk_mask,
    one_task,
    scale,
    stack_param,
    topk_mask_tensor,
    trim,
)
from talos_core.methods.ties import SPARSITY_GRID
from talos_core.methods.tsv import SPECTRAL_ALPHA_STOP, SPECTRAL_OPTIONS

__all__ = ["ISO_COMMON_FRACTION", "LINES_ADDITION_ALPHA", "LINES_BETA_GRID", "OUTLIER_QUANTILE_GRID",
           "SPARSITY_GRID", "SPECTRAL_ALPHA_STOP", "SPECTRAL_OPTIONS", "TALL_LAMBDA_GRID", "consensus_k_grid"]


@dataclass(frozen=True)
class PosthocSpec:
    """A post-hoc method, its callables and its hyperparameter grid.

    ``merge(vectors, **hparams)`` returns ONE merged vector for task addition (scale it by α afterwards).
    ``single_task(vectors, index, **hparams)`` returns the processed vector of task ``index`` alone: use
    it for the method's own single-task accuracy (normalized accuracy) and, scaled by a negative α, for
    task negation. ``grid`` maps each hyperparameter to its values, or to a callable ``T -> values`` when
    they depend on the number of tasks; ``constraint`` filters invalid combinations. ``defaults`` are the
    values used by the official TaLoS scripts (or the method's paper). ``options`` are the method's labelled
    conventions (keyword arguments of ``merge`` that are not searched), each with its allowed values, the first
    its default (the authors' code): every grid point carries them, so a stored result records them.
    ``alpha_stop`` ends the evaluator's α grid ``0, step, …, alpha_stop`` (1 as in the paper; the range the
    method's authors search where it is wider). ``addition_alpha``: task addition applies the merged vector at
    this α only, as the method's authors do (LiNeS, whose β is searched instead); negation keeps the grid.
    ``name`` is the method's id in the catalogue (:data:`talos_core.schema.METHODS`), which holds its label and
    family.
    """

    name: str
    description: str
    merge: Callable[..., Vector]
    single_task: Callable[..., Vector]
    grid: Mapping[str, GridValues]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    constraint: Callable[[Mapping[str, Any]], bool] | None = None
    alpha_stop: float = 1.0
    options: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    addition_alpha: float | None = None

    def __post_init__(self) -> None:
        method_info(self.name, "posthoc")  # a catalogue entry of this kind
        check_range("alpha_stop", self.alpha_stop, 0.0, math.inf, low_open=True)
        if self.addition_alpha is not None:
            check_range("addition_alpha", self.addition_alpha, 0.0, math.inf, low_open=True)

    @property
    def info(self) -> MethodDeclaration:
        return method_info(self.name)

    @property
    def label(self) -> str:
        """Display name, as in the paper's tables."""
        return self.info.label

    def check_options(self, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Every labelled option of the method: its default (the authors' choice) unless ``options`` sets it.

        >>> POSTHOC_METHODS["iso_c"].check_options({"conv1x1": "matrix"})
        {'nonmatrix': 'mean', 'conv1x1': 'matrix'}
        """
        given = dict(options or {})
        for key, value in given.items():
            if key not in self.options:
                allowed = ", ".join(self.options) or "none"
                raise TalosError(f"{key!r} is not an option of post-hoc method {self.name!r} (its options: {allowed})")
            if value not in self.options[key]:
                raise TalosError(f"option {key} of post-hoc method {self.name!r} must be one of "
                                 f"{', '.join(map(repr, self.options[key]))}, got {value!r}")
        return {key: given.get(key, values[0]) for key, values in self.options.items()}

    def grid_points(self, num_tasks: int, options: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """All valid hyperparameter combinations for ``num_tasks`` task vectors (cartesian product), each with the
        method's labelled options (:meth:`check_options`).

        >>> len(POSTHOC_METHODS["ties"].grid_points(8))
        11
        >>> POSTHOC_METHODS["tall_consensus"].grid_points(2)[:2]
        [{'lam': 0.2, 'k': 0}, {'lam': 0.2, 'k': 1}]
        >>> POSTHOC_METHODS["tsv"].grid_points(8)
        [{'nonmatrix': 'mean', 'conv1x1': 'other'}]
        """
        check_int("num_tasks", num_tasks, low=1)
        fixed = self.check_options(options)
        names = list(self.grid)
        values = [list(v(num_tasks) if callable(v) else v) for v in self.grid.values()]
        points = [dict(zip(names, combo)) for combo in itertools.product(*values)]
        if self.constraint is not None:
            points = [p for p in points if self.constraint(p)]
        return [{**p, **fixed} for p in points]


def merge_alone(merge: Callable[..., Vector]) -> Callable[..., Vector]:
    """The single-task version of ``merge``: the merge of task ``index``'s vector alone, ``merge([vectors[index]],
    **hparams)`` (a method that declares no ``single_task`` of its own gets this one)."""
    def single_task(vectors: Sequence[VectorLike], index: int, **hparams: Any) -> Vector:
        """The merge of task ``index``'s vector alone."""
        return merge(one_task(vectors, index), **hparams)

    return single_task


def _spec(declaration: MethodDeclaration) -> PosthocSpec:
    rule = declaration.alpha_rule
    merge = declaration.resolve("merge")
    single = declaration.resolve("single_task") if declaration.single_task else merge_alone(merge)
    return PosthocSpec(declaration.name, declaration.description, merge=merge, single_task=single,
                       grid=declaration.grid, defaults=declaration.defaults, constraint=declaration.constraint,
                       alpha_stop=rule.stop, options=declaration.options, addition_alpha=rule.addition_alpha)


POSTHOC_METHODS: dict[str, PosthocSpec] = {name: _spec(d) for name, d in METHODS.items() if d.kind == "posthoc"}
"""Post-hoc methods keyed by id, from their declarations: the baselines of the paper's Tables 1-2 (TIES, TALL /
Consensus, DARE, Breadcrumbs) and the later merges TSV-Merge, Iso-C, Iso-CTS, LiNeS and DELLA."""


def get_posthoc(name: str) -> PosthocSpec:
    """Look up a post-hoc method by id.

    >>> get_posthoc("ties").label
    'TIES-Merging'
    """
    if name not in POSTHOC_METHODS:
        raise unknown("post-hoc method", name, POSTHOC_METHODS)
    return POSTHOC_METHODS[name]
