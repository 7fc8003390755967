"""Shared pieces of the benchmarks: the benchmarked cases, worker subprocesses, memory and tables.

Every measurement runs in a fresh worker process (``python -m bench._worker JOB ARGS``), one per
(model, configuration), so that peak memory of one configuration never leaks into another's and
the orchestrating process stays small. A worker prints one line ``RESULT {json}`` at the end.

Memory (see :func:`reset_peak_memory` / :func:`peak_memory_mb`):

* CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``;
* CPU: the process's peak resident set size ``VmHWM`` from ``/proc/self/status``, after handing
  freed heap memory back to the OS (``malloc_trim``) and resetting the peak with
  ``echo 5 > /proc/self/clear_refs`` (Linux ≥ 4.0) right before the measured region; where that
  reset is not possible the peak since process start (``ru_maxrss``) is reported instead and the
  table says so.

>>> markdown_table([{"a": 1, "b": 2.5}], ["a", "b"])
'| a | b |\\n|---|---|\\n| 1 | 2.500 |'
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from talos_core.memory import peak_memory_mb, reset_peak_memory, trim_heap  # noqa: F401 (re-exported)

ROOT = Path(__file__).resolve().parent.parent
SPARSITY_KEY = "0.9"
CACHE = Path(__file__).resolve().parent / ".cache"


# --------------------------------------------------------------------------------------------
# benchmarked cases
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One benchmarked model with the sizes used for it on CPU (GPU sizes are set in ``for_device``).

    ``ft_batch``/``ft_iters``: fine-tuning batch and measured iterations (after one warm-up step);
    ``score_samples``: examples of the vmap-vs-loop Fisher comparison; ``mask_samples``: calibration
    examples of the benchmark's real TaLoS mask (4 rounds, sparsity 0.9); ``chunk_size``: vmap chunk;
    ``eval_examples``: test examples of one evaluation pass.
    """

    model: str
    task: str
    ft_batch: int
    ft_iters: int
    score_samples: int
    mask_samples: int
    chunk_size: int
    eval_examples: int
    gpu_only: bool = False

    def for_device(self, device: str) -> Case:
        if device == "cpu":
            return self
        scale = dict(ft_batch=max(self.ft_batch, 32), ft_iters=max(self.ft_iters, 10),
                     score_samples=max(self.score_samples, 64), mask_samples=max(self.mask_samples, 128),
                     chunk_size=max(self.chunk_size, 16), eval_examples=max(self.eval_examples, 512))
        return Case(**{**asdict(self), **scale})


CASES: dict[str, Case] = {c.model: c for c in [
    Case("tiny-clip", "digits", 32, 5, 64, 64, 16, 512),
    Case("tiny-text", "tweets", 32, 5, 64, 64, 16, 512),
    Case("tiny-t5", "tweets", 32, 5, 32, 32, 16, 256),
    Case("minilm-l6", "tweets", 32, 3, 32, 32, 16, 128),
    Case("clip-vit-b-32-random", "digits", 8, 3, 4, 4, 4, 32),
    Case("clip-vit-l-14-random", "digits", 8, 3, 4, 4, 4, 32, gpu_only=True),
]}
QUICK = ("tiny-clip", "tiny-text")


def select_cases(models: list[str] | None, quick: bool, device: str) -> list[Case]:
    """The cases to run: ``--models`` if given, else all (tiny ones only with ``--quick``)."""
    if models:
        unknown = [m for m in models if m not in CASES]
        if unknown:
            raise SystemExit(f"unknown benchmark model(s) {unknown}; choose from {sorted(CASES)}")
        names = models
    elif quick:
        names = list(QUICK)
    else:
        names = [m for m, c in CASES.items() if not c.gpu_only or device.startswith("cuda")]
    return [CASES[m].for_device("cpu" if device == "cpu" else "cuda") for m in names]


def common_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda[:N]")
    p.add_argument("--quick", action="store_true", help="fast smoke run: tiny models, fewer iterations")
    p.add_argument("--models", nargs="*", help=f"subset of {sorted(CASES)}")
    p.add_argument("--json", type=Path, help="also write the raw results to this JSON file")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads per worker (default 1: on a shared, oversubscribed CPU, OpenMP "
                        "with more threads than free cores spins and makes timings meaningless)")
    p.add_argument("--timeout", type=float, default=1200.0, help="seconds before a worker is given up (default 1200)")
    return p


def resolve_device(device: str, threads: int = 1, timeout: float = 1200.0) -> str:
    """Check ``device``; set the worker thread count and time limit."""
    import torch

    THREADS["n"] = max(1, int(threads))
    THREADS["timeout"] = float(timeout)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"--device {device} asked for but CUDA is not available on this machine")
    return device


# --------------------------------------------------------------------------------------------
# worker processes
# --------------------------------------------------------------------------------------------
THREADS = {"n": 1, "timeout": 1200.0}


def run_worker(job: str, args: dict, *, timeout: float | None = None, module: str = "bench._worker") -> dict:
    """Run ``job`` of the worker ``module`` (default ``bench._worker``; called as ``python -m MODULE JOB 'JSON'``)
    with ``args`` in a fresh interpreter; return its RESULT dict."""
    args = {"threads": THREADS["n"], **args}
    cmd = [sys.executable, "-m", module, job, json.dumps(args)]
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "TOKENIZERS_PARALLELISM": "false",
           "OMP_NUM_THREADS": str(args["threads"]), "MKL_NUM_THREADS": str(args["threads"])}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout or THREADS["timeout"],
                          env=env)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            out = json.loads(line[len("RESULT "):])
            out["worker_wall_s"] = time.perf_counter() - t0
            return out
    tail = (proc.stderr or proc.stdout)[-3000:]
    raise RuntimeError(f"worker {job} {args} failed (rc={proc.returncode}):\n{tail}")


def run_cases(cases: list[Case], fn, json_path: Path | None, benchmark: str, device: str) -> list[dict]:
    """``fn(case)`` for every case; a failing case (error, timeout) becomes ``{"case", "error"}`` and the
    run goes on. Results so far are written to ``json_path`` after each case."""
    results = []
    for case in cases:
        print(f"- {case.model} ({case.task}) …", flush=True)
        t0 = time.perf_counter()
        try:
            results.append(fn(case))
        except Exception as exc:  # report and keep going: one slow model must not sink the run
            first = str(exc).strip().splitlines()
            results.append({"case": case.model, "error": f"{type(exc).__name__}: {first[0][:160] if first else ''}"})
            print(f"  FAILED after {time.perf_counter() - t0:.0f}s: {results[-1]['error']}", flush=True)
        write_json(json_path, {"benchmark": benchmark, "device": device, "results": results})
    return results


def error_rows(results: list[dict]) -> str:
    bad = [r for r in results if "error" in r]
    return "\n".join(f"- {r['case']}: not measured ({r['error']})" for r in bad)


def emit(result: dict) -> None:
    """Worker side: print the result line the parent parses."""
    print("RESULT " + json.dumps(result), flush=True)


def mask_cache_path(case: Case, device: str) -> Path:
    """Where the case's real TaLoS mask is cached (an input of the fine-tuning benchmark, shared by
    runs before and after an engine change so that both train exactly the same entries)."""
    key = f"{case.model}-{case.task}-n{case.mask_samples}-s{SPARSITY_KEY}-{device.split(':')[0]}"
    return CACHE / f"mask-{key}.safetensors"


# --------------------------------------------------------------------------------------------
# timing and memory (used inside workers)
# --------------------------------------------------------------------------------------------
def sync(device) -> None:
    import torch

    if getattr(device, "type", str(device)).startswith("cuda"):
        torch.cuda.synchronize(device)


def timed(fn, device, repeats: int = 1) -> list[float]:
    """Wall times (s) of ``repeats`` calls of ``fn()``, synchronizing CUDA around each."""
    out = []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        out.append(time.perf_counter() - t0)
    return out


def rss_mb() -> float:
    """Current resident set size of this process (MiB)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def current_memory_mb(device) -> float:
    import torch

    if getattr(device, "type", str(device)).startswith("cuda"):
        return torch.cuda.memory_allocated(device) / 2**20
    return rss_mb()


# --------------------------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------------------------
def fmt(value, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        if value != value:
            return "nan"
        if abs(value) >= 100:
            return f"{value:.0f}"
        return f"{value:.{digits}g}" if abs(value) < 1e-3 and value != 0 else f"{value:.{digits}f}"
    return str(value)


def markdown_table(rows: Iterable[dict], columns: list[str], headers: list[str] | None = None) -> str:
    rows = list(rows)
    headers = headers or columns
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(fmt(r.get(c)) for c in columns) + " |")
    return "\n".join(lines)


def machine_line(device: str) -> str:
    """Date, CPU, cores, torch version, worker threads, GPU and device, on one line."""
    import platform

    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{time.strftime('%Y-%m-%d %H:%M')} · {cpu} · {os.cpu_count()} cores (load avg {load:.1f}) · "
            f"torch {torch.__version__} · {THREADS['n']} thread(s) per worker · {gpu} · device={device}")


def write_json(path: Path | None, payload: dict) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str))
    tmp.replace(path)


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b
