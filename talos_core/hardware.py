"""Which machine a measurement was taken on: a run records it beside its step timings, so a time per step is
compared only with times taken on the same kind of machine.

A run manifest's ``device`` says ``cpu`` or ``cuda``; its ``timings`` add ``hardware`` (the GPU's name, or the CPU
model) and, on a CPU, ``torch_threads``. Manifests written before these were recorded carry the device alone:
:meth:`Machine.same_as` then compares what both sides know.

>>> a = Machine("cuda", "NVIDIA H200", None)
>>> b = Machine("cpu", "AMD EPYC 7B13", 1)
>>> a.label(), b.label(), Machine("cpu", None, None).label()
('cuda · NVIDIA H200', 'cpu · AMD EPYC 7B13 · 1 thread', 'cpu')
>>> a.same_as(b), b.same_as(Machine("cpu", None, None)), b.same_as(Machine("cpu", "AMD EPYC 7B13", 2))
(False, True, False)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


def cpu_model() -> str:
    """This machine's CPU model name: ``/proc/cpuinfo``'s ``model name`` (Linux), else ``lscpu``'s, else
    :func:`platform.processor`; ``""`` when none says."""
    import platform
    import subprocess

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name") and ":" in line:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            if line.lower().startswith("model name") and ":" in line:
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return platform.processor() or ""


def hardware_name(device) -> str:
    """What ``device`` (a ``torch.device`` or its name) runs on, as a person names it: the GPU's name for CUDA,
    this machine's CPU model otherwise (``""`` when nothing says)."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(dev)
    return cpu_model() if dev.type == "cpu" else dev.type


def machine_timings(device) -> dict:
    """The keys a run's ``timings`` record about its machine: ``hardware``, and ``torch_threads`` on a CPU (a CPU's
    time per step depends on how many threads the step used)."""
    import torch

    dev = torch.device(device)
    out: dict = {"hardware": hardware_name(dev)}
    if dev.type == "cpu":
        out["torch_threads"] = torch.get_num_threads()
    return out


@dataclass(frozen=True)
class Machine:
    """Where a run was timed: ``kind`` (``cpu``, ``cuda``, …; ``None`` when the manifest does not say), ``name``
    (GPU or CPU model) and ``threads`` (torch threads on a CPU); ``None`` where the manifest predates the field."""

    kind: str | None
    name: str | None
    threads: int | None

    @classmethod
    def of(cls, manifest: Mapping) -> Machine:
        """The machine a run manifest (its JSON dict) records."""
        t = manifest.get("timings") if isinstance(manifest.get("timings"), Mapping) else {}
        kind = manifest.get("device")
        name, threads = t.get("hardware"), t.get("torch_threads")
        return cls(str(kind).split(":")[0] if kind else None, str(name) if name else None,
                   int(threads) if isinstance(threads, (int, float)) else None)

    def label(self) -> str:
        parts = [self.kind or "unknown device", *([self.name] if self.name else [])]
        if self.threads is not None:
            parts.append(f"{self.threads} thread" + ("s" if self.threads != 1 else ""))
        return " · ".join(parts)

    def same_as(self, other: Machine) -> bool:
        """Whether two timings can be compared: the same kind, and the same hardware and threads where both record
        them (a side that does not say is not taken for a difference)."""
        return all(a is None or b is None or a == b for a, b in ((self.kind, other.kind), (self.name, other.name),
                                                               (self.threads, other.threads)))


__all__ = ["cpu_model", "hardware_name", "machine_timings", "Machine"]
