"""``talos dashboard``: launch the Streamlit app over a store."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from talos_core.errors import TalosError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dashboard", help="launch the Streamlit dashboard")
    p.add_argument("--store", default=None, help="store to open (default: the shipped cached_results)")
    p.add_argument("--port", type=int, default=8501)
    p.set_defaults(handler=_dashboard)


def _dashboard(args: argparse.Namespace) -> int:
    app = Path(__file__).resolve().parent.parent.parent / "dashboard" / "app.py"
    if not app.exists():
        raise TalosError(f"dashboard app not found at {app}")
    env = dict(os.environ)
    if args.store:
        env["TALOS_STORE"] = str(Path(args.store).resolve())
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(args.port),
           "--server.headless", "true", "--browser.gatherUsageStats", "false"]
    return subprocess.call(cmd, env=env)
