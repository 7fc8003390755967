"""What every evaluation protocol is given and gives back, and the store bookkeeping they share.

An :class:`EvalRequest` names *what* to evaluate (store, suite, model, tasks, method, the fine-tuning
overrides that identify the runs); the protocol's own typed settings say *how* (see
:mod:`talos_core.evaluation.protocols`). A protocol returns an :class:`EvalOutcome`: the table it
computed, the results it wrote (``results/<kind>/<name>.json``, SCHEMA.md) and a human summary.

Per-model tables (``single``, ``linearization``, ``efficiency``) are *upserted* (:func:`upsert`): the
evaluated method's rows are replaced and other methods' rows kept, unless they were computed on other
evaluation data. Under the store's lock, and in the suite's row order when the request names one, so writers
running in parallel leave the table a sequential run leaves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from talos_core.atomic import json_ready
from talos_core.errors import TalosError, check_range, check_seed  # noqa: F401  (check_seed: re-exported)
from talos_core.evaluation.context import EvalContext
from talos_core.evaluation.runs import resolve_runs, run_eval_mode
from talos_core.schema import result_name
from talos_core.store import Run, Store


@dataclass(frozen=True)
class EvalRequest:
    """What to evaluate: ``method``'s runs of ``model`` on ``tasks`` in ``store``, results under ``suite``.

    ``overrides`` are :class:`~talos_core.pipeline.FinetuneRequest` fields (``steps``, ``max_train``,
    ``max_val``, ``max_test``, ``sparsity``, ...) identifying — or used to create — the runs;
    ``max_val``/``max_test`` also set the evaluation data. ``task_overrides`` (``{task: {...}}``) are
    merged over ``overrides`` for their task: a different run per task, e.g. the per-task choices of a
    ``selection`` result (:func:`~talos_core.evaluation.selection.selected_overrides`). ``result_method``
    is the id results are written under (default: ``method``; a variant id such as ``talos-k0.9``, see
    :func:`talos_core.schema.variant_id`). ``train=False`` refuses to fine-tune missing runs;
    ``force=True`` re-fine-tunes them; ``progress`` shows progress bars. ``row_order``: the suite's row ids in
    table order, the order per-model tables keep their rows in (:func:`upsert`; empty: writers' order).
    """

    store: Store
    suite: str
    model: str
    tasks: tuple[str, ...]
    method: str
    overrides: Mapping[str, Any] = field(default_factory=dict)
    train: bool = True
    progress: bool = False
    force: bool = False
    task_overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    result_method: str | None = None
    row_order: tuple[str, ...] = ()

    @property
    def result_id(self) -> str:
        """The method id results are written under (``result_method``, else ``method``)."""
        return self.result_method or self.method

    def result_meta(self) -> dict:
        """Payload keys recording how the runs were chosen and under which id: ``variant_of`` when results
        are written under another id than the method, ``task_overrides`` when runs differ per task."""
        out: dict[str, Any] = {}
        if self.result_id != self.method:
            out["variant_of"] = self.method
        if self.task_overrides:
            out["task_overrides"] = {t: json_ready(dict(o)) for t, o in self.task_overrides.items()
                                     if t in self.tasks}
        return out

    def runs(self, method: str | None = None, overrides: Mapping[str, Any] | None = None, *,
             force: bool | None = None, weights: bool = True) -> dict[str, Run]:
        """``{task: run}`` of ``method`` (default: the request's) with ``overrides`` (default: the request's,
        with its ``task_overrides`` merged in per task; explicit ``overrides`` are used as given); ``weights=False``
        for a protocol that reads only the runs' manifests (:func:`~talos_core.evaluation.runs.resolve_runs`)."""
        return resolve_runs(self.store, self.model, self.tasks, method or self.method,
                            overrides=self.overrides if overrides is None else overrides, train=self.train,
                            progress=self.progress, force=self.force if force is None else force,
                            task_overrides=self.task_overrides if overrides is None else None, weights=weights)

    def context(self, runs: Mapping[str, Run] | None, batch_size: int | None,
                extra_tasks: Sequence[str] = ()) -> EvalContext:
        """An evaluation context over the request's tasks (and ``extra_tasks``) with the data limits of
        :func:`eval_limits`; ``batch_size=None`` takes the device's default."""
        lim = eval_limits(self.overrides, runs)
        return EvalContext.for_model(self.model, [*self.tasks, *extra_tasks], max_val=lim["max_val"],
                                     max_test=lim["max_test"], device=self.overrides.get("device", "auto") or "auto",
                                     batch_size=batch_size)

    def name(self, *parts: str) -> str:
        """The result name ``<suite>__<model>__<parts>...`` (SCHEMA.md)."""
        return result_name(self.suite, self.model, *parts)


@dataclass
class EvalOutcome:
    """What a protocol computed and wrote."""

    protocol: str
    table: pd.DataFrame
    results: list[tuple[str, str]] = field(default_factory=list)  # (kind, name) written
    lines: list[str] = field(default_factory=list)  # human summary

    def summary(self) -> str:
        return "\n".join(self.lines)


# --------------------------------------------------------------------------------------------
# runs and evaluation data
# --------------------------------------------------------------------------------------------
def eval_limits(overrides: Mapping[str, Any], runs: Mapping[str, Run] | None) -> dict:
    """Evaluation data limits: explicit overrides, else those all runs were evaluated with."""
    out = {}
    for key in ("max_val", "max_test"):
        if overrides.get(key) is not None:
            out[key] = overrides[key]
            continue
        seen = {r.manifest.request.get(key) for r in (runs or {}).values()}
        out[key] = seen.pop() if len(seen) == 1 else None
    return out


def common_mode(runs: Mapping[str, Run]) -> str:
    """The evaluation mode all ``runs`` share (``"nonlinear"`` or ``"linearized"``)."""
    modes = {run_eval_mode(r) for r in runs.values()}
    if len(modes) > 1:
        raise TalosError(f"runs mix evaluation modes {sorted(modes)}; evaluate one method at a time")
    return modes.pop()


def eval_data(ctx: EvalContext) -> dict:
    """What per-model tables' numbers depend on besides the runs: data limits and evaluation precision."""
    from talos_core.inference.precision import model_precision

    return {"max_val": ctx.limits.get("max_val"), "max_test": ctx.limits.get("max_test"),
            "eval_precision": model_precision(ctx.model)}


def same_data(old: dict | None, new: dict) -> bool:
    """Whether a stored table's ``data`` matches ``new`` (``None``: unknown, accepted); stores written before
    ``eval_precision`` was recorded evaluated in fp32.

    >>> same_data({"max_val": 8, "max_test": 8}, {"max_val": 8, "max_test": 8, "eval_precision": "fp32"})
    True
    """
    if old is None:
        return True
    return {"eval_precision": "fp32", **old} == {"eval_precision": "fp32", **new}


# --------------------------------------------------------------------------------------------
# per-model tables
# --------------------------------------------------------------------------------------------
def merged_rows(store: Store, kind: str, name: str, table: pd.DataFrame, method: str, *,
                data: dict | None = None, order: Sequence[str] = ()) -> tuple[pd.DataFrame, dict]:
    """``table`` after the stored rows of other methods, and the stored payload's other keys.

    The stored table is dropped (and nothing of it kept) when it is unreadable, has no ``method``
    column, or was computed on other evaluation ``data`` (:func:`same_data`; ``data=None`` accepts any).
    ``order`` (row ids): the rows are then sorted by it (:func:`in_order`), whatever order the writers came in.
    """
    if name not in store.results(kind):
        return in_order(table, order), {}
    try:
        payload = store.read_result(kind, name)
        old = pd.DataFrame(payload.get("records", []), columns=payload.get("columns"))
    except TalosError:
        return in_order(table, order), {}
    kept = {k: v for k, v in payload.items() if k not in ("columns", "records")}
    if (data is not None and not same_data(kept.get("data"), data)) or "method" not in old.columns:
        return in_order(table, order), {}
    return in_order(pd.concat([old[old["method"] != method], table], ignore_index=True), order), kept


def order_rank(order: Sequence[str]) -> Any:
    """``key(method)``: a row id's position in ``order``; ids not in it after all of them (stable sorts keep them
    as they were)."""
    rank = {m: i for i, m in enumerate(order)}
    return lambda m: rank.get(m, len(rank))


def in_order(table: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    """``table``'s rows sorted by their ``method``'s place in ``order`` (stable: a method's rows keep their order;
    empty ``order``: unchanged).

    >>> in_order(pd.DataFrame({"method": ["b", "a", "b"], "x": [1, 2, 3]}), ["a", "b"])["x"].tolist()
    [2, 1, 3]
    """
    if not order or table.empty or "method" not in table.columns:
        return table
    key = order_rank(order)
    idx = sorted(range(len(table)), key=lambda i: key(table["method"].iloc[i]))
    return table.iloc[idx].reset_index(drop=True)


def upsert(store: Store, kind: str, name: str, table: pd.DataFrame, method: str, *, data: dict | None = None,
           run_ids: Mapping[str, str] | None = None, examples: Mapping[str, Any] | None = None,
           order: Sequence[str] = (), **extra: Any) -> None:
    """Replace ``method``'s rows in the per-model table ``kind/name``, keeping other methods (see
    :func:`merged_rows`); ``run_ids`` (``{task: run id}``) become ``runs[method]``, ``examples`` (the
    per-example test correctness behind the rows, SCHEMA.md) ``examples[method]`` (dropped when ``None``).

    The payload keeps the stored keys, then ``extra``, then ``data`` (the new one, else the stored one),
    ``examples`` and ``runs`` last. With ``order`` (the suite's row ids in table order) the rows, ``examples`` and
    ``runs`` follow it, so the table is the same whichever writer comes first.
    """
    with store.locked(kind, name):  # other processes may update other methods' rows of the same result
        merged, kept = merged_rows(store, kind, name, table, method, data=data, order=order)
        old_data, runs = kept.pop("data", None), dict(kept.pop("runs", None) or {})
        by_method = dict(kept.pop("examples", None) or {})
        payload = {**kept, **extra}
        if data is not None or old_data is not None:
            payload["data"] = data if data is not None else old_data
        by_method.pop(method, None)
        if examples is not None:
            by_method[method] = dict(examples)
        if run_ids is not None:
            runs[method] = dict(run_ids)
        if order:
            key = order_rank(order)
            by_method, runs = ({m: d[m] for m in sorted(d, key=key)} for d in (by_method, runs))
        if by_method:
            payload["examples"] = by_method
        if runs:
            payload["runs"] = runs
        store.write_table(kind, name, merged, **payload)


# --------------------------------------------------------------------------------------------
# settings checks and formatting
# --------------------------------------------------------------------------------------------
#: the largest |α| anywhere (merge, the disentanglement range): α grids reach 1/(1 − 0.99) = 100 at the sparsest
#: setting; beyond this, weights leave any range a model was trained in (and, near 3.4e38, float32)
MAX_ALPHA = 1000.0
#: α grid steps: at least this (a grid of at most ~1,000 points per unit of α), at most 1
MIN_ALPHA_STEP = 1e-3
#: the largest disentanglement grid per axis (grid² evaluations; the paper's is 20)
MAX_GRID = 100


def check_alpha_step(value: Any) -> None:
    """``value`` must be an α grid step in [:data:`MIN_ALPHA_STEP`, 1] (a smaller one makes a grid too large to
    evaluate)."""
    check_range("alpha_step", value, MIN_ALPHA_STEP, 1.0, high_open=False)


def check_control_task(control_task: str, tasks: Sequence[str]) -> str:
    """A registered task that is not one of the negated ``tasks`` and whose data loads.

    The data is loaded here, before anything is fine-tuned (the loader runs once per process, so the
    evaluation later reuses it): a control task that cannot be loaded — e.g. the online ``imagenet``,
    the registered control of image tasks, on a machine without the Hugging Face Hub — fails in one
    sentence at once instead of after the targets' fine-tuning.
    """
    from talos_core.tasks import get_task, load_task

    get_task(control_task)
    if control_task in tasks:
        raise TalosError(f"control task {control_task!r} is also a negation target; pick another control task")
    load_task(control_task)
    return control_task


def fmt(x: float | None) -> str:
    """``0.1234`` or ``nan``.

    >>> fmt(0.123456), fmt(None), fmt(float("nan"))
    ('0.1235', 'nan', 'nan')
    """
    return "nan" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.4f}"
