"""Peak-memory accounting shared by fine-tuning (run manifests) and the benchmarks.

* CUDA: ``torch.cuda.max_memory_allocated`` after ``torch.cuda.reset_peak_memory_stats``.
* CPU (Linux): the process's peak RSS (``VmHWM``) after freed heap memory is handed back to the OS
  (``malloc_trim``) and the peak is reset with ``echo 5 > /proc/self/clear_refs``. Without the
  reset a long-running process (a suite fine-tuning several methods one after another) would report
  the largest peak of everything it ever ran. Where the reset is not possible the kind says
  ``peak_rss_since_start``.

>>> import torch
>>> kind = reset_peak_memory(torch.device("cpu"))
>>> kind in ("peak_rss_since_reset", "peak_rss_since_start") and peak_memory_mb(torch.device("cpu")) > 0
True
"""

from __future__ import annotations

import torch


def _is_cuda(device) -> bool:
    return getattr(device, "type", str(device)).startswith("cuda")


def trim_heap() -> None:
    """Collect garbage and hand freed heap memory back to the OS (glibc ``malloc_trim``), so that
    RSS counts live memory rather than what earlier, finished work left in the allocator."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def reset_peak_memory(device) -> str:
    """Reset the peak-memory counter; return the kind of peak that :func:`peak_memory_mb` reports."""
    trim_heap()
    if _is_cuda(device):
        torch.cuda.reset_peak_memory_stats(device)
        return "cuda_max_memory_allocated"
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return "peak_rss_since_reset"
    except OSError:
        return "peak_rss_since_start"


def peak_memory_mb(device) -> float:
    """Peak memory in MiB since the last :func:`reset_peak_memory` (see the module docstring)."""
    if _is_cuda(device):
        return torch.cuda.max_memory_allocated(device) / 2**20
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
