"""The installed package: build the wheel, install it into a fresh virtual environment, launch
``talos dashboard`` from outside the repository and fetch the health endpoint.

The venv sees the test environment's site-packages (torch, streamlit, ... are not reinstalled) but gets its own
copy of talos_core and dashboard from the wheel; the test checks that those, not the repository's, are
the ones imported. Every process started here is killed in ``finally`` (bounded waits).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dashboard_fixtures import REPO

from bench.server import free_port, health

pytestmark = pytest.mark.slow

#: top-level entries of the checkout that the wheel does not need (data, tests, caches)
_NOT_BUILT = {".git", "cached_results", "snapshots", "runs", "build", "dist", ".venv", "tests", "bench", "logs"}


def _run(cmd: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    assert out.returncode == 0, f"{cmd} failed:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    return out


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TALOS_STORE", "VIRTUAL_ENV")}
    env.update(PYTHONUNBUFFERED="1", **extra)
    return env


def _venv_over_this_environment(venv: Path) -> Path:
    """A fresh venv that also sees the packages of the environment running the tests (a ``.pth`` file naming its
    site-packages, after the venv's own): ``--system-site-packages`` would show the base interpreter's packages
    only, which lack streamlit and torch when the tests run in the project's ``.venv``. The directories a ``.pth``
    names are not scanned for further ``.pth`` files, so an editable install of the checkout stays out of sight."""
    import site

    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], 120)
    python = venv / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], 60).stdout.strip()
    Path(purelib, "_tests_parent_env.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


def _build_wheel(tmp: Path) -> Path:
    """The wheel of a copy of the checkout, built through the PEP 517 backend named in pyproject.toml."""
    src = tmp / "src"
    src.mkdir()
    for entry in REPO.iterdir():
        if entry.name in _NOT_BUILT or entry.name.endswith(".egg-info"):
            continue
        if entry.is_dir():
            shutil.copytree(entry, src / entry.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(entry, src / entry.name)
    backend = re.search(r'^build-backend\s*=\s*"([\w.]+)"', (src / "pyproject.toml").read_text(), re.M).group(1)
    out_dir = tmp / "wheel"
    out_dir.mkdir()
    code = f"import {backend} as b; print(b.build_wheel({str(out_dir)!r}))"
    name = _run([sys.executable, "-c", code], 300, cwd=src, env=_clean_env()).stdout.strip().splitlines()[-1]
    return out_dir / name


def test_wheel_installs_and_talos_dashboard_serves(tmp_path, fixture_store):
    wheel = _build_wheel(tmp_path)
    venv = tmp_path / "venv"
    python, talos = _venv_over_this_environment(venv), venv / "bin" / "talos"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--ignore-installed",
          "--no-index", str(wheel)], 300, env=_clean_env())
    assert talos.exists(), "the wheel installs the `talos` console script"
    outside = tmp_path / "elsewhere"
    outside.mkdir()

    # the venv imports its own talos_core and dashboard (pages and SCHEMA.md included), not the repository's
    code = ("import sys, talos_core, dashboard, talos_core.schema as s; from pathlib import Path; "
            "d = Path(dashboard.__file__).parent; "
            "print(talos_core.__file__); print(dashboard.__file__); "
            "print(len(list((d / 'app_pages').glob('*.py')))); "
            "print((Path(talos_core.__file__).parent / 'evaluation' / 'SCHEMA.md').is_file()); "
            "print(s.shipped_store())")
    lines = _run([str(python), "-c", code], 120, cwd=outside, env=_clean_env()).stdout.split("\n")
    site = venv.resolve()
    for path in lines[:2]:
        assert Path(path).resolve().is_relative_to(site) and not Path(path).resolve().is_relative_to(REPO), path
    assert int(lines[2]) >= 7 and lines[3] == "True"
    assert lines[4] == "None", "an installed package has no shipped cached_results"

    # the installed app runs on the store (Streamlit's in-process app runner, venv interpreter)
    app_code = ("import dashboard, pathlib; from streamlit.testing.v1 import AppTest; "
                "at = AppTest.from_file(str(pathlib.Path(dashboard.__file__).parent / 'app.py'), default_timeout=120); "
                "at.run(); assert not at.exception, [e.value for e in at.exception]; "
                "assert not at.error, [e.value for e in at.error]; print('app ok', at.title[0].value)")
    out = _run([str(python), "-c", app_code], 300, cwd=outside, env=_clean_env(TALOS_STORE=str(fixture_store)))
    assert "app ok" in out.stdout

    # `talos dashboard` from outside the repository serves the health endpoint
    port = free_port()
    log_path = tmp_path / "dashboard.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([str(talos), "dashboard", "--port", str(port), "--store", str(fixture_store)],
                                cwd=outside, env=_clean_env(), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while health(port) != "ok":
            assert proc.poll() is None, f"talos dashboard exited ({proc.returncode}): {log_path.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no health answer in 120 s: {log_path.read_text()[-3000:]}"
            time.sleep(0.5)
        first = log_path.read_text().splitlines()[0]
        assert str(site) in first and f"on store {fixture_store.resolve()}" in first, first
        # SIGTERM to `talos dashboard` stops the Streamlit server it started
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 30
        while health(port) is not None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert health(port) is None, "the Streamlit server outlived `talos dashboard`"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)
