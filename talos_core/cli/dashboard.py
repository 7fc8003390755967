"""``talos dashboard``: launch the Streamlit app of the installed ``dashboard`` package over a store.

The server listens on 127.0.0.1 (this machine only) unless ``--host`` says otherwise, with a printed
warning then (no authentication: anyone who reaches the port can use it). ``--store-root`` adds folders
whose stores visitors may pick, ``--read-only`` drops the Run page, ``--max-jobs/--max-steps/--max-examples``
cap what the Run page launches (0 = no cap). They reach the app as environment variables
(``TALOS_DASHBOARD_ROOTS``, ``TALOS_DASHBOARD_READ_ONLY``, ``TALOS_DASHBOARD_MAX_*``; :mod:`dashboard.access`).
"""

from __future__ import annotations

import argparse
import importlib.util
import ipaddress
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from talos_core.cli.common import add_store_argument, port
from talos_core.errors import TalosError

DEFAULT_HOST = "127.0.0.1"
#: the caps of a workshop server (see dashboard.jobs.JobLimits, whose defaults these are)
DEFAULT_MAX_JOBS, DEFAULT_MAX_STEPS, DEFAULT_MAX_EXAMPLES = 2, 2000, 20000
READ_ONLY_ENV = "TALOS_DASHBOARD_READ_ONLY"
#: the server's whole-number settings and the rule of each, as dashboard.jobs and dashboard.uploads read them: checked
#: here too, so that a bad value stops `talos dashboard` before a server starts (tests keep the two in step)
CAP_VARIABLES: dict[str, tuple[int, str]] = {
    **{f"TALOS_DASHBOARD_MAX_{cap}": (0, "a non-negative integer (0 = no cap)")
       for cap in ("JOBS", "STEPS", "EXAMPLES")},
    **{f"TALOS_DASHBOARD_MAX_{cap}": (1, "a positive integer") for cap in ("UPLOAD_MB", "UNPACKED_MB", "UPLOAD_FILES")}}


def _cap(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer (0 = no cap), got {text!r}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dashboard", help="launch the Streamlit dashboard")
    add_store_argument(p, viewer=True, help="store to open first; also where the Run page writes, unless it is "
                                            "the shipped cached_results (then ./runs)")
    p.add_argument("--port", type=port, default=8501, help="TCP port, 1 to 65535 (default 8501)")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address to listen on (default {DEFAULT_HOST}: this machine only); e.g. 0.0.0.0 to let "
                        "others on the network open it (no authentication: use --read-only for a room)")
    p.add_argument("--store-root", action="append", default=[], metavar="DIR",
                   help="a folder whose stores (it, and its sub-folders holding results/ or runs/) visitors may "
                        "pick, besides the shipped results and your store; repeatable (also $TALOS_DASHBOARD_ROOTS)")
    p.add_argument("--read-only", action="store_true",
                   help="workshop mode: no Run page, nothing computed or written")
    p.add_argument("--max-jobs", type=_cap, default=None,
                   help=f"queued or running jobs at once (default {DEFAULT_MAX_JOBS}; 0 = no cap)")
    p.add_argument("--max-steps", type=_cap, default=None,
                   help=f"training steps per run of a job (default {DEFAULT_MAX_STEPS}; 0 = no cap)")
    p.add_argument("--max-examples", type=_cap, default=None,
                   help=f"examples per split (train, val, test) of a job (default {DEFAULT_MAX_EXAMPLES}; 0 = no cap)")
    p.set_defaults(handler=_dashboard)


def is_loopback(host: str) -> bool:
    """Does ``host`` only accept connections from this machine (``127.0.0.0/8``, ``::1``, ``localhost``)?

    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0"), is_loopback("::")
    (True, True, False, False)
    """
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def streamlit_command(app: Path, *, port: int, host: str = DEFAULT_HOST) -> list[str]:
    """The ``streamlit run`` command line of the dashboard (its server binds ``host``:``port``).

    ``--runner.postScriptGC false``: Streamlit runs a full ``gc.collect()`` after every script and fragment run,
    ~100 ms of the server's one busy core per slider move in this process (torch and the result caches make a
    large heap), about 40 % of a move's cost (``bench/RESULTS.md``, load); Python's own generational collector
    still runs, and the server's memory stays flat without it (measured there).

    ``--server.fileWatcherType none``: Streamlit's source watcher (re-run on save, for editing the app) walks every
    module in ``sys.modules`` (torch's thousands, ``realpath`` each) whenever a session's run imports something new
    (each new session's first run does), and polls the watched files; ~17 % of the server's one core under the
    30-session load (py-spy, ``bench/RESULTS.md``). A served dashboard does not edit itself; to develop the app,
    ``streamlit run dashboard/app.py`` keeps the watcher.

    ``--runner.magicEnabled false``: Streamlit rewrites and compiles a page's source (its "magic": bare expressions
    shown) on the first run after no session was connected, as a first visit to an idle server is; no page uses
    magic (a test checks), and the rewrite was most of that compile (bench/RESULTS.md, first chart).

    ``--client.toolbarMode viewer``: the toolbar a visitor needs (settings, print), without the developer's
    "Deploy" button and menu entries that Streamlit shows on a local server."""
    return [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(port),
            "--server.address", host, "--server.headless", "true", "--browser.gatherUsageStats", "false",
            "--runner.postScriptGC", "false", "--runner.magicEnabled", "false", "--server.fileWatcherType", "none",
            "--client.toolbarMode", "viewer"]


def server_env(args: argparse.Namespace, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of the Streamlit process: the store and the server policy (:mod:`dashboard.access`)."""
    env = dict(os.environ if base is None else base)
    env["TALOS_STORE"] = str(Path(args.store).expanduser().resolve())
    roots = [str(Path(r).expanduser().resolve()) for r in args.store_root]
    if roots:
        env["TALOS_DASHBOARD_ROOTS"] = os.pathsep.join(roots + [r for r in env.get("TALOS_DASHBOARD_ROOTS", "")
                                                                .split(os.pathsep) if r])
    if args.read_only:
        env["TALOS_DASHBOARD_READ_ONLY"] = "1"
    for name in ("max_jobs", "max_steps", "max_examples"):
        value = getattr(args, name)
        if value is not None:
            env[f"TALOS_DASHBOARD_{name.upper()}"] = str(value)
    return env


def check_server_env(env: dict[str, str]) -> bool:
    """Check the server's settings in ``env`` before it starts (one :class:`TalosError` for the first bad one) and
    return whether it is read-only."""
    from talos_core.errors import check_env_int, check_flag

    for name, (low, what) in CAP_VARIABLES.items():
        check_env_int(name, env.get(name), low=low, what=what)
    return check_flag(READ_ONLY_ENV, env.get(READ_ONLY_ENV))


def check_host(host: str) -> None:
    """``--host`` must be an address of this machine the server can listen on: a name that resolves, an address
    that can be bound (checked on a free port: the real one is the server's to take). One :class:`TalosError`
    otherwise, before the server starts (it would end with a traceback)."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as sock:
            sock.bind(address)
    except (OSError, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise TalosError(f"--host {host!r} is not an address this machine can listen on ({reason}); give "
                         f"{DEFAULT_HOST} (this machine only), 0.0.0.0 (every network interface) or one of its own "
                         f"addresses or host names") from None


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
    for root in args.store_root:
        if not Path(root).expanduser().is_dir():
            raise TalosError(f"--store-root {root!r} is not a folder; give folders that hold stores")
    env = server_env(args)
    read_only = check_server_env(env)
    check_host(args.host)
    cmd = streamlit_command(app, port=args.port, host=args.host)
    shown = "localhost" if is_loopback(args.host) else args.host
    mode = " (read-only)" if read_only else ""
    print(f"TaLoS Studio dashboard ({app}) on store {env['TALOS_STORE']}{mode}: http://{shown}:{args.port}",
          flush=True)
    if not is_loopback(args.host):
        print(f"warning: the dashboard listens on {args.host}:{args.port}, reachable from other machines, with no "
              "authentication: anyone who can reach this port can browse the stores it serves"
              + ("" if read_only else " and launch jobs on the Run page (add --read-only to prevent that)")
              + ".", file=sys.stderr, flush=True)
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
