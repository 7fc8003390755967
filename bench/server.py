"""Starting a dashboard server for a measurement or a test: a free local port, and waiting until it answers.

Stdlib only, so the browser tests, the packaging test and ``bench.bench_load`` share it without importing torch.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health(port: int) -> str | None:
    """The Streamlit health endpoint's answer on ``port`` (``"ok"`` when serving), ``None`` when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
            return r.read().decode().strip() if r.status == 200 else None
    except OSError:
        return None


def wait_healthy(port: int, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    """Wait until the server ``proc`` answers on ``port``; an error if it exits or ``timeout`` s pass first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the dashboard server exited with status {proc.returncode}")
        if health(port) is not None:
            return
        time.sleep(0.5)
    raise TimeoutError(f"the dashboard server did not become healthy on port {port} within {timeout:.0f} s")


def stop_server(proc: subprocess.Popen) -> None:
    """Stop a server started with ``start_new_session=True``: SIGTERM to its process group, SIGKILL after 15 s."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


@contextmanager
def dashboard(store: Path, log_path: Path, *, checkout: Path = ROOT) -> Iterator[tuple[str, int]]:
    """``talos dashboard --store STORE`` of ``checkout`` (its own ``talos_core`` and ``dashboard``: ``python -m`` puts
    the working folder first on ``sys.path``) on a free local port, in a process group of its own; yields its URL and
    process group id, and stops the group afterwards."""
    port = free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(checkout))
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "talos_core.cli", "dashboard", "--port", str(port),
                                 "--store", str(store)], cwd=str(checkout), env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_healthy(port, proc, timeout=180.0)
            yield f"http://127.0.0.1:{port}", proc.pid
        finally:
            stop_server(proc)
