"""The measured cost table of ``talos suite --plan``: seconds per training iteration by model, method, device and
batch size (``talos_core/suites/plan_costs.json``, every cell with its provenance), and :func:`estimate`.

A cell is a measurement, never an extrapolation: a run whose (model, method, device, batch size) has no cell is
reported as not measured and left out of the total. The table's keys do not include a method's hyperparameters:
TaLoS and LoTA were measured at 90% sparsity and L-LoRA at rank 16, and those cells are used at every sparsity /
rank (a sparser mask trains faster, so lower sparsities cost more than the cell says). Models share a cell with
their architecture (``clip-vit-b-32``, ``clip-vit-b-32-random`` and ``clip:ViT-B-32:<tag>`` have the same step
time). Add cells with ``python -m bench.plan_costs`` (CPU and GPU, it measures and prints JSON rows).

>>> cell("clip-vit-b-32", "talos", "h100", 128)["s_per_iter"]
0.032
>>> cell("clip:ViT-L-14:openai", "nonlinear", "h100", 128)["s_per_iter"]
0.227
>>> cell("t5-base", "talos", "h100", 256) is None
True

CPU devices are measured per CPU model (``cpus`` in the table: the model names each was measured on); ``--plan``
prices with the one this machine's CPU matches (:func:`detect_device`) and says which.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from talos_core.errors import TalosError
from talos_core.hardware import cpu_model  # here too: detect_device looks it up in this module (tests patch it)

TABLE = Path(__file__).with_name("plan_costs.json")


@lru_cache(maxsize=1)
def table() -> dict:
    """The parsed table: ``{"devices": {name: description}, "cells": [...], "eval_cells": [...]}``."""
    data = json.loads(TABLE.read_text())
    for c in data["cells"]:
        for key in ("model", "method", "device", "batch_size", "s_per_iter", "ref", "source"):
            if key not in c:
                raise TalosError(f"{TABLE}: a cell lacks {key!r}: {c}")
    for c in data.setdefault("eval_cells", []):
        for key in ("model", "kind", "device", "s_per_example", "ref", "source"):
            if key not in c:
                raise TalosError(f"{TABLE}: an evaluation cell lacks {key!r}: {c}")
        if c["kind"] not in EVAL_KINDS:
            raise TalosError(f"{TABLE}: evaluation cell kind {c['kind']!r} is not one of {', '.join(EVAL_KINDS)}")
    return data


EVAL_KINDS = ("forward", "jvp", "grad")
"""The measured evaluation cells (seconds per example); ``base`` and ``forward0`` passes are priced as ``forward``."""


def devices() -> dict[str, str]:
    return dict(table()["devices"])


def check_device(device: str) -> str:
    if device not in table()["devices"]:
        raise TalosError(f"unknown plan device {device!r}; choose among: {', '.join(table()['devices'])}")
    return device


def arch(model: str) -> str:
    """The architecture key of a model name (the table's ``model`` column).

    >>> arch("clip-vit-b-32-random"), arch("clip:ViT-B-16:laion2b_s34b_b88k"), arch("t5:google-t5/t5-large")
    ('clip-vit-b-32', 'clip-vit-b-16', 't5-large')
    """
    if model.startswith("clip:"):
        return "clip-" + model.split(":")[1].lower().replace("/", "-")
    if model.startswith("t5:"):
        return model.split(":", 1)[1].rsplit("/", 1)[-1].lower()
    return model[: -len("-random")] if model.endswith("-random") else model


def cell(model: str, method: str, device: str, batch_size: int | None) -> dict | None:
    """The measured cell of this model's architecture, method, device and batch size, or ``None``."""
    key = (arch(model), method, device, batch_size)
    for c in table()["cells"]:
        if (c["model"], c["method"], c["device"], c["batch_size"]) == key:
            return c
    return None


def estimate(runs, device: str) -> dict:
    """Training device-hours of ``runs`` (:class:`~talos_core.suites.plan.PlannedRun` s still to train) on ``device``:
    one group per (model, method, batch size), priced from its cell or reported as not measured."""
    groups: dict[tuple, dict] = {}
    for r in runs:
        g = groups.setdefault((r.model, r.method, r.batch_size, r.steps is None), {"model": r.model, "method": r.method,
                                                                  "batch_size": r.batch_size, "runs": 0,
                                                                  "iterations": 0, "unknown_steps": 0,
                                                                  "max_iterations": 0, "unbounded": 0})
        g["runs"] += 1
        if r.steps is None:
            g["unknown_steps"] += 1
            bound = r.max_steps
            if bound:
                g["max_iterations"] += bound
            else:
                g["unbounded"] += 1
        else:
            g["iterations"] += r.steps
    out, hours, unmeasured, max_hours = [], 0.0, 0, 0.0
    for g in groups.values():
        c = cell(g["model"], g["method"], device, g["batch_size"])
        if g["unknown_steps"] and c is not None and not g["unbounded"]:
            # a budget a learning curve chooses later: priced at its largest value (the curve's length), an upper bound
            h = g["max_iterations"] * c["s_per_iter"] / 3600
            g.update(s_per_iter=c["s_per_iter"], hours=None, max_hours=h, source=c["source"],
                     ref=c.get("ref", c["source"]), why=None)
            max_hours += h
        elif g["unknown_steps"]:
            g.update(s_per_iter=None, hours=None, source=None, ref=None,
                     why=f"{g['unknown_steps']} runs' step budget is chosen by a learning-curve step"
                         + ("" if c is not None else f"; no cell for {arch(g['model'])} / {g['method']} / {device} / "
                                                     f"batch {g['batch_size']}"))
            unmeasured += g["runs"]
        elif c is None:
            g.update(s_per_iter=None, hours=None, source=None, ref=None,
                     why=f"no cell for {arch(g['model'])} / {g['method']} / {device} / batch {g['batch_size']}")
            unmeasured += g["runs"]
        else:
            h = g["iterations"] * c["s_per_iter"] / 3600
            g.update(s_per_iter=c["s_per_iter"], hours=h, source=c["source"], ref=c.get("ref", c["source"]), why=None)
            hours += h
        out.append(g)
    return {"device": device, "device_name": devices()[device], "groups": out, "hours": hours,
            "max_hours": max_hours, "unmeasured_runs": unmeasured}


def eval_cell(model: str, device: str, kind: str) -> dict | None:
    """The measured seconds per example of pass ``kind`` (:mod:`talos_core.inference.tally`) for this model's
    architecture on ``device``, or ``None``."""
    kind = "forward" if kind in ("base", "forward0") else kind
    for c in table()["eval_cells"]:
        if (c["model"], c["device"], c["kind"]) == (arch(model), device, kind):
            return c
    return None


def estimate_eval(work: dict, model: str, device: str, *, lota_iterations: int = 0,
                  lota_batch_size: int | None = None) -> dict:
    """Device-hours of the evaluation work ``work`` (``{kind: examples}``, :mod:`talos_core.suites.workload`) and of
    LoTA's dense calibration iterations (priced as non-linear fine-tuning iterations): one row per kind, priced from
    its cell or reported as not measured."""
    rows, hours, unmeasured = [], 0.0, []
    for kind in ("forward", "base", "jvp", "grad", "forward0"):
        n = int(work.get(kind, 0))
        if not n:
            continue
        c = eval_cell(model, device, kind)
        if c is None:
            rows.append({"kind": kind, "examples": n, "s_per_example": None, "hours": None, "ref": None})
            unmeasured.append(kind)
            continue
        h = n * c["s_per_example"] / 3600
        rows.append({"kind": kind, "examples": n, "s_per_example": c["s_per_example"], "hours": h, "ref": c["ref"]})
        hours += h
    if lota_iterations:
        c = cell(model, "nonlinear", device, lota_batch_size)
        h = None if c is None else lota_iterations * c["s_per_iter"] / 3600
        rows.append({"kind": "lota-calibration", "examples": lota_iterations,
                     "s_per_example": None if c is None else c["s_per_iter"], "hours": h,
                     "ref": None if c is None else c.get("ref", c["source"])})
        if h is None:
            unmeasured.append("lota-calibration")
        else:
            hours += h
    return {"rows": rows, "hours": hours, "unmeasured": unmeasured}


def cpu_device(model_name: str) -> str | None:
    """The table's CPU device whose measured CPU model names (``cpus`` in the table) occur in ``model_name``.

    >>> cpu_device("AMD EPYC"), cpu_device("Intel(R) Xeon(R) Processor"), cpu_device("Apple M2")
    ('cpu-2core', 'cpu-2core-xeon', None)
    """
    name = model_name.lower()
    for device, names in table().get("cpus", {}).items():
        if any(n.lower() in name for n in names):
            return device
    return None


def detect_device() -> tuple[str, str]:
    """``(device, why)``: the plan device of this machine — ``h100`` where torch sees a GPU, else the CPU device
    measured on this CPU model (:func:`cpu_device`), else ``cpu-2core`` saying no cell was measured on this CPU."""
    import torch

    if torch.cuda.is_available():
        return "h100", f"torch sees a GPU ({torch.cuda.get_device_name()})"
    model = cpu_model() or "an unknown CPU"
    found = cpu_device(model)
    if found is not None:
        return found, f"detected: this machine's CPU is {model}"
    return "cpu-2core", f"no cells measured on this machine's CPU ({model}): priced with another CPU's"
