"""The Arithmetic page's "export this mix": the current sliders' edited model written as a standard checkpoint
(:func:`talos_core.export_model.export_merge`) into the user's store, under ``exports/``.

The runs are exactly those the shown result evaluated (its ``runs``), read from the store being viewed; the
checkpoint goes into the server's writable store (:meth:`dashboard.access.ServerConfig.writable_store`: never the
shipped results, nothing in read-only mode). The folder name is a hash of what is merged, so exporting the same
mix twice finds the first export instead of writing another. No Streamlit here (tested without a server).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from talos_core.errors import TalosError
from talos_core.schema import METHODS, base_method_of, read_result, slug, stored_hyperparameters

EXPORTS_DIR = "exports"


@dataclass(frozen=True)
class MixExport:
    """One planned export: the merge request, the runs it merges, where they are read and where it is written."""

    request: object  # talos_core.export_model.MergeRequest
    run_ids: dict[str, str] = field(default_factory=dict)
    source: Path = Path(".")
    folder: Path = Path(".")

    @property
    def done(self) -> bool:
        """Already exported (a complete export folder, with its checksums, is there)."""
        from talos_core.export_model import SUMS

        return (self.folder / SUMS).is_file()


def plan_mix_export(source_root: str | Path, dest_store: str | Path, kind: str, result: str,
                    alphas: Mapping[str, float]) -> MixExport:
    """The export of result ``result`` (kind ``addition``: ``θ0 + Σ α_t τ_t`` over ``alphas``' tasks; ``negation``:
    ``θ0 − α τ_t`` for the one target in ``alphas``) at the given α's. Problems are one :class:`TalosError`."""
    from talos_core.export_model import MergeRequest, check_request

    if kind not in ("addition", "negation"):
        raise TalosError(f"only addition and negation mixes can be exported, not {kind!r}")
    payload = read_result(source_root, kind, result)
    model = payload.get("model")
    method = base_method_of(str(payload.get("method") or result.split("__")[-1]))
    runs = payload.get("runs")
    if not isinstance(model, str) or method is None:
        raise TalosError(f"the {kind} result {result!r} does not name its model and method; export it with "
                         f"talos merge")
    if not isinstance(runs, dict):
        raise TalosError(f"the {kind} result {result!r} does not record which runs it evaluated; export it with "
                         f"talos merge")
    alphas = {str(t): float(a) for t, a in alphas.items()}
    # a post-hoc result merges with the hyperparameters it chose on validation (they name the export too)
    # (as they were merged: a result written before a labelled option existed lacks it)
    hp = (stored_hyperparameters(method, payload.get("hyperparameters") or {})
          if METHODS.get(method) and METHODS[method].posthoc else None)
    if kind == "addition":
        req = MergeRequest(model, tuple(alphas), method, alphas, hyperparameters=hp)
    else:
        if len(alphas) != 1:
            raise TalosError("a negation export subtracts one task's vector; pick one target")
        req = MergeRequest(model, (), method, alphas, negate=tuple(alphas))
    check_request(req)
    missing = [t for t in alphas if t not in runs]
    if missing:
        raise TalosError(f"the {kind} result {result!r} records no run for {missing[0]!r}")
    run_ids = {t: str(runs[t]) for t in alphas}
    key = json.dumps([kind, model, method, sorted(alphas.items()), sorted(run_ids.items())] + ([hp] if hp else []),
                     sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    folder = Path(dest_store) / EXPORTS_DIR / f"{slug(model)}__{slug(method)}__{kind}__{digest}"
    return MixExport(req, run_ids, Path(source_root), folder)


def run_mix_export(plan: MixExport):
    """Write ``plan`` (unless :attr:`MixExport.done`); returns the :class:`~talos_core.export_model.MergeResult`,
    or ``None`` when it was exported before."""
    from talos_core.export_model import export_merge

    if plan.done:
        return None
    return export_merge(plan.source, plan.request, plan.folder, run_ids=plan.run_ids)


def vectors_missing(source_root: str | Path, kind: str, result: str) -> str | None:
    """Why "export this mix" cannot work for result ``result`` of ``kind`` (one sentence), or ``None`` when every
    run it evaluated keeps its task vector in ``source_root`` (an exported store such as the shipped
    ``cached_results/`` keeps the runs' manifests only)."""
    try:
        runs = read_result(source_root, kind, result).get("runs")
    except TalosError as exc:
        return str(exc)
    if not isinstance(runs, dict) or not runs:
        return f"the {kind} result does not record which runs it evaluated"
    for task, rid in runs.items():
        if not (Path(source_root) / "runs" / str(rid) / "task_vector.safetensors").is_file():
            return (f"this store keeps no task vector of run {rid} ({task}), only the runs' manifests; export from a "
                    f"store with the runs' task vectors (talos merge)")
    return None
