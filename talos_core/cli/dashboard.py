"""``talos dashboard``: launch the Streamlit app of the installed ``dashboard`` package over a store."""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from talos_core.cli.common import add_store_argument
from talos_core.errors import TalosError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dashboard", help="launch the Streamlit dashboard")
    add_store_argument(p, viewer=True, help="store to open")
    p.add_argument("--port", type=int, default=8501)
    p.set_defaults(handler=_dashboard)


def dashboard_app() -> Path:
    """``app.py`` of the installed ``dashboard`` package (found by import machinery, works from a wheel)."""
    spec = importlib.util.find_spec("dashboard")
    app = Path(spec.origin).parent / "app.py" if spec is not None and spec.origin else None
    if app is None or not app.is_file():
        raise TalosError("the dashboard package is not installed (no dashboard/app.py found); install TaLoS "
                         "Studio with `pip install -e .` in the repository, or install its wheel")
    return app


def _dashboard(args: argparse.Namespace) -> int:
    app = dashboard_app()
    store = Path(args.store).expanduser().resolve()
    env = dict(os.environ, TALOS_STORE=str(store))
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(args.port),
           "--server.headless", "true", "--browser.gatherUsageStats", "false"]
    print(f"TaLoS Studio dashboard ({app}) on store {store}: http://localhost:{args.port}", flush=True)
    proc = subprocess.Popen(cmd, env=env)
    # a SIGTERM to `talos dashboard` stops the server too (Ctrl-C reaches both: same process group)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: proc.send_signal(signum)) if main_thread else None
    try:
        return proc.wait()
    except KeyboardInterrupt:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
