"""Background runs launched from the dashboard's Run page.

A *job* is a list of ``talos`` CLI commands (fine-tune each task, then evaluation protocols) run one
after another by a detached runner process (``python -m dashboard.jobs run <job dir>``), so it keeps
going when the browser tab closes. Each job has its own folder ``<store>/jobs/<job_id>/``:

* ``job.json``    — the :class:`JobSpec` and the commands (written once, atomically);
* ``status.json`` — ``state`` (queued/running/done/failed/cancelled), current ``step``, runner ``pid``,
  per-command return codes and log offsets (rewritten atomically by the runner);
* ``log.txt``     — stdout+stderr of every command (tqdm progress bars included).

Several browser sessions can launch jobs on one store at the same time: job ids are unique
(timestamp + random suffix), each job writes only its own folder, and the ``talos`` commands publish
runs and results atomically (staging folder + rename, temp file + rename).

    >>> spec = JobSpec(model="tiny-clip", tasks=("digits", "mnist"), method="talos", steps=20,
    ...                protocols=("addition",))
    >>> [c[3] for c in build_commands(spec, "/tmp/s")]
    ['finetune', 'finetune', 'evaluate']
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dashboard.limits import ints_from_env
from talos_core.errors import TalosError, check_int, check_range, check_seed
from talos_core.schema import METHODS, check_suite

JOBS_DIR = "jobs"
PROTOCOL_ORDER = ("single", "addition", "negation", "localization", "preview", "masks", "disentanglement",
                  "linearization", "sharing", "efficiency", "comparison")
DEFAULT_PROTOCOLS = ("single", "addition", "negation", "localization", "preview", "masks", "efficiency",
                     "comparison")
MAX_JOBS_ENV = "TALOS_DASHBOARD_MAX_JOBS"
MAX_STEPS_ENV = "TALOS_DASHBOARD_MAX_STEPS"
MAX_EXAMPLES_ENV = "TALOS_DASHBOARD_MAX_EXAMPLES"
_CHILDREN: list[subprocess.Popen] = []  # runners started by this process, reaped by list_jobs()
_TQDM = re.compile(r"(\d+)/(\d+) \[")


@dataclass(frozen=True)
class JobSpec:
    """What to compute: fine-tune ``method`` on each task of ``model``, then run ``protocols``."""

    model: str
    tasks: tuple[str, ...]
    method: str = "talos"
    sparsity: float = 0.9
    steps: int | None = None
    max_train: int | None = None
    max_val: int | None = None
    max_test: int | None = None
    suite: str = "dashboard"
    protocols: tuple[str, ...] = DEFAULT_PROTOCOLS
    control_task: str | None = None
    device: str = "auto"
    grid: int = 8  # disentanglement grid per axis (paper 20)
    points: int = 128  # disentanglement points per task (paper 2048)
    preview_points: int = 128
    seed: int = 0

    def validate(self) -> None:
        """Raise :class:`TalosError` naming the first bad field."""
        if not self.model:
            raise TalosError("pick a model")
        if not self.tasks:
            raise TalosError("pick at least one task")
        if len(set(self.tasks)) != len(self.tasks):
            raise TalosError(f"tasks must be distinct, got {list(self.tasks)}")
        check_range("sparsity", self.sparsity, 0.0, 1.0)
        for name in ("steps", "max_train", "max_val", "max_test"):
            check_int(name, getattr(self, name), low=1, optional=True, what="a positive integer or empty")
        for name in ("grid", "points", "preview_points"):
            check_int(name, getattr(self, name), low=1)
        check_seed(self.seed)
        check_suite(self.suite)
        bad = [p for p in self.protocols if p not in PROTOCOL_ORDER]
        if bad:
            raise TalosError(f"unknown protocol {bad[0]!r}; choose among: {', '.join(PROTOCOL_ORDER)}")
        if ("negation" in self.protocols) and self.control_task in self.tasks:
            raise TalosError(f"the negation control task {self.control_task!r} must not be one of the tasks")


@dataclass(frozen=True)
class JobLimits:
    """Caps of one dashboard server on the jobs its visitors launch (a workshop shares one machine).

    ``max_jobs`` queued or running jobs in the store at once, ``max_steps`` training steps per run,
    ``max_examples`` examples per split (train, val, test); ``0`` means no cap. Defaults suit a CPU
    workshop; set them with ``talos dashboard --max-jobs/--max-steps/--max-examples`` or the
    ``TALOS_DASHBOARD_MAX_JOBS/_MAX_STEPS/_MAX_EXAMPLES`` environment variables.

    >>> JobLimits(max_steps=100).problem(JobSpec(model="tiny-clip", tasks=("digits",), steps=500))
    'steps 500 is above the cap of this dashboard server (100); lower it or ask whoever runs the server to raise it'
    """

    max_jobs: int = 2
    max_steps: int = 2000
    max_examples: int = 20000

    @classmethod
    def from_env(cls, env=None) -> JobLimits:
        return cls(**ints_from_env((("max_jobs", MAX_JOBS_ENV), ("max_steps", MAX_STEPS_ENV),
                                    ("max_examples", MAX_EXAMPLES_ENV)), minimum=0,
                                   rule="a non-negative integer (0 = no cap)", env=env))

    def problem(self, spec: JobSpec) -> str | None:
        """The sentence saying which field of ``spec`` is over a cap (``None`` if none is)."""
        checks = [("steps", spec.steps, self.max_steps)] + [
            (name.replace("_", " ") + " examples", getattr(spec, name), self.max_examples)
            for name in ("max_train", "max_val", "max_test")]
        for label, value, cap in checks:
            if not cap:
                continue
            if value is None:
                return f"{label} must be set (at most {cap} on this dashboard server)"
            if value > cap:
                return (f"{label} {value} is above the cap of this dashboard server ({cap}); lower it or ask whoever "
                        f"runs the server to raise it")
        return None

    def busy(self, active: int) -> str | None:
        """The sentence when ``active`` queued/running jobs already fill the cap (``None`` otherwise)."""
        if self.max_jobs and active >= self.max_jobs:
            return (f"{active} job{'s are' if active != 1 else ' is'} already queued or running and this dashboard "
                    f"server runs at most {self.max_jobs} at once; wait for one to finish")
        return None


#: how the runner calls the ``talos`` CLI: this interpreter, ``-m talos_core.cli`` (works without the
#: ``talos`` script on PATH)
CLI_PREFIX = ["-m", "talos_core.cli"]
#: the runner process: this interpreter, ``-m dashboard.jobs run <job dir>`` (the installed package)
RUNNER_MODULE = "dashboard.jobs"


def _cli() -> list[str]:
    return [sys.executable, *CLI_PREFIX]


def _run_flags(spec: JobSpec, store: str | Path) -> list[str]:
    from talos_core.schema import METHODS

    sparse = spec.method in METHODS and METHODS[spec.method].sparse  # --sparsity goes with sparse methods only
    flags = ["--model", spec.model, "--method", spec.method, *(["--sparsity", f"{spec.sparsity:g}"] if sparse else []),
             "--store", str(store), "--seed", str(spec.seed), "--device", spec.device]
    for name in ("steps", "max_train", "max_val", "max_test"):
        v = getattr(spec, name)
        if v is not None:
            flags += [f"--{name.replace('_', '-')}", str(v)]
    return flags


def build_commands(spec: JobSpec, store: str | Path) -> list[list[str]]:
    """The CLI commands of a job: one ``finetune`` per task (progress per task), then one ``evaluate``
    per protocol in :data:`PROTOCOL_ORDER` (they reuse the runs: same flags → same run ids). A method that never
    fine-tunes (``imported``: runs from ``talos import``) has no ``finetune`` commands; its protocols find the runs.

    >>> [c[3] for c in build_commands(JobSpec(model="tiny-clip", tasks=("digits",), method="imported",
    ...                                       protocols=("single",)), "/tmp/s")]
    ['evaluate']
    """
    spec.validate()
    info = METHODS.get(spec.method)
    trains = info is None or info.trains  # an unknown method: its finetune command says so in one sentence
    cmds = [[*_cli(), "finetune", "--task", t, *_run_flags(spec, store)] for t in spec.tasks if trains]
    for proto in (p for p in PROTOCOL_ORDER if p in spec.protocols):
        if proto == "disentanglement" and len(spec.tasks) < 2:
            continue
        cmd = [*_cli(), "evaluate", proto, "--tasks", ",".join(spec.tasks), "--suite", spec.suite,
               *_run_flags(spec, store)]
        if proto == "negation" and spec.control_task:
            cmd += ["--control-task", spec.control_task]
        if proto == "disentanglement":
            cmd += ["--grid", str(spec.grid), "--points", str(spec.points)]
        if proto == "preview":
            cmd += ["--preview-points", str(spec.preview_points)]
        cmds.append(cmd)
    return cmds


def display_command(cmd: list[str]) -> str:
    """The job's ``python -c "...main()" finetune ...`` shown as ``talos finetune ...``."""
    import shlex

    args = cmd[3:] if cmd[1:3] == CLI_PREFIX else cmd
    return "talos " + " ".join(shlex.quote(a) for a in args)


# --------------------------------------------------------------------------------------------
# job folders
# --------------------------------------------------------------------------------------------
def new_job_id() -> str:
    """Unique, sortable id: ``YYYYmmdd-HHMMSS-<6 hex>``."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


def jobs_root(store: str | Path) -> Path:
    return Path(store) / JOBS_DIR


def _write_json(path: Path, payload: dict) -> None:
    from talos_core.atomic import atomic_write_json

    atomic_write_json(path, payload)


def read_status(job_dir: str | Path) -> dict:
    """The job's status; a running job whose runner died is reported as ``died``."""
    job_dir = Path(job_dir)
    try:
        status = json.loads((job_dir / "status.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {"state": "unknown"}
    if not status.get("pid"):
        try:
            status["pid"] = int((job_dir / "runner.pid").read_text())
        except (OSError, ValueError):
            pass
    if status.get("state") in ("queued", "running") and status.get("pid") and not _alive(int(status["pid"]), job_dir):
        status["state"] = "died"
    return status


def read_job(job_dir: str | Path) -> dict:
    try:
        return json.loads((Path(job_dir) / "job.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def _alive(pid: int, job_dir: Path) -> bool:
    """Is ``pid`` our runner for ``job_dir`` (guards against pid reuse)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        return str(job_dir) in cmdline and "<defunct>" not in cmdline
    except OSError:
        return True


@dataclass
class JobInfo:
    id: str
    path: Path
    spec: dict
    status: dict = field(default_factory=dict)

    @property
    def state(self) -> str:
        return str(self.status.get("state", "unknown"))

    @property
    def label(self) -> str:
        s = self.spec
        return f"{self.id} · {s.get('model')} · {s.get('method')} · {', '.join(s.get('tasks', []))} · {self.state}"


def list_jobs(store: str | Path) -> list[JobInfo]:
    """Jobs in the store, newest first."""
    for proc in list(_CHILDREN):  # reap finished runners (no zombies in a long-lived server)
        if proc.poll() is not None:
            _CHILDREN.remove(proc)
    root = jobs_root(store)
    if not root.is_dir():
        return []
    out = []
    for d in sorted(root.iterdir(), reverse=True):
        if d.is_dir() and (d / "job.json").exists():
            out.append(JobInfo(d.name, d, read_job(d).get("spec", {}), read_status(d)))
    return out


def create_job(store: str | Path, commands: list[list[str]], spec: dict | None = None) -> JobInfo:
    """Create a fresh job folder (unique id) holding ``commands``; nothing runs yet (see :func:`launch`)."""
    jid = new_job_id()
    job_dir = jobs_root(store).resolve() / jid
    job_dir.mkdir(parents=True)
    _write_json(job_dir / "job.json", {"format": "talos-job/1", "id": jid, "spec": spec or {}, "commands": commands,
                                       "created": time.strftime("%Y-%m-%dT%H:%M:%S")})
    _write_json(job_dir / "status.json", {"state": "queued", "step": 0, "n_steps": len(commands), "returncodes": [],
                                          "offsets": []})
    (job_dir / "log.txt").touch()
    return JobInfo(jid, job_dir, spec or {}, read_status(job_dir))


def launch(job: JobInfo, *, python: str | None = None) -> JobInfo:
    """Start the detached runner of ``job`` (own session / process group); returns immediately."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
    with open(job.path / "runner.err", "wb") as err:
        proc = subprocess.Popen([python or sys.executable, "-m", RUNNER_MODULE, "run", str(job.path)], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)
    _CHILDREN.append(proc)
    from talos_core.atomic import atomic_write_bytes

    atomic_write_bytes(job.path / "runner.pid", str(proc.pid).encode())  # only the launcher writes this file
    return JobInfo(job.id, job.path, job.spec, read_status(job.path))


def active_jobs(store: str | Path) -> int:
    """Queued or running jobs in the store."""
    return sum(j.state in ("queued", "running") for j in list_jobs(store))


def start_job(spec: JobSpec, store: str | Path, *, python: str | None = None,
              limits: JobLimits | None = None) -> JobInfo:
    """Create the job folder for ``spec`` and launch its detached runner; returns immediately.

    With ``limits``, a spec over a cap or a store already running ``limits.max_jobs`` jobs is refused
    (:class:`TalosError`, nothing written); the count and the launch happen under a file lock, so two
    visitors clicking at once cannot both pass the cap.
    """
    cmds = build_commands(spec, Path(store).resolve())
    if limits is None:
        return launch(create_job(store, cmds, asdict(spec)), python=python)
    problem = limits.problem(spec)
    if problem:
        raise TalosError(problem)
    import fcntl

    root = jobs_root(store)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".launch.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        busy = limits.busy(active_jobs(store))
        if busy:
            raise TalosError(busy)
        return launch(create_job(store, cmds, asdict(spec)), python=python)


def run_job(job_dir: str | Path) -> int:
    """Runner body: execute the job's commands in order, logging and updating ``status.json``."""
    job_dir = Path(job_dir)
    job = read_job(job_dir)
    cmds: list[list[str]] = job.get("commands", [])
    status = {"state": "running", "step": 0, "n_steps": len(cmds), "pid": os.getpid(), "returncodes": [],
              "offsets": [], "started": time.time()}
    _write_json(job_dir / "status.json", status)
    stopping = {"flag": False}

    def _term(signum, frame):
        stopping["flag"] = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _term)
    rc = 0
    with open(job_dir / "log.txt", "ab", buffering=0) as log:
        try:
            for i, cmd in enumerate(cmds):
                status.update(step=i, command=display_command(cmd))
                status["offsets"].append(log.tell())
                _write_json(job_dir / "status.json", status)
                log.write(f"\n$ {display_command(cmd)}\n".encode())
                rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT)
                status["returncodes"].append(rc)
                if rc != 0:
                    log.write(f"\n[job] command failed with exit status {rc}; stopping.\n".encode())
                    break
            status["state"] = "done" if rc == 0 else "failed"
        except KeyboardInterrupt:
            status["state"] = "cancelled"
            log.write(b"\n[job] cancelled.\n")
            rc = 130
        status.update(finished=time.time(), step=len(status["returncodes"]))
        _write_json(job_dir / "status.json", status)
    return rc


def cancel_job(job: JobInfo) -> bool:
    """Stop a running job (SIGTERM to its runner's process group, which includes the current command)."""
    status = read_status(job.path)
    pid = status.get("pid")
    if status.get("state") not in ("queued", "running") or not pid or not _alive(int(pid), job.path):
        return False
    try:
        os.killpg(int(pid), signal.SIGTERM)
    except ProcessLookupError:
        return False
    return True


# --------------------------------------------------------------------------------------------
# log and progress
# --------------------------------------------------------------------------------------------
def tail_log(job_dir: str | Path, max_chars: int = 12000) -> str:
    """The end of the job's log with tqdm carriage-return updates collapsed to their latest state."""
    path = Path(job_dir) / "log.txt"
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 4 * max_chars))
            raw = fh.read().decode(errors="replace")
    except OSError:
        return ""
    lines = []
    for ln in raw.split("\n"):
        segs = [s for s in ln.split("\r") if s.strip()]
        lines.append(segs[-1] if segs else "")
    return "\n".join(lines)[-max_chars:]


def parse_progress(log_text: str, status: dict) -> tuple[float, str]:
    """Overall fraction done in [0, 1] and a label.

    ``fraction = (finished commands + progress of the current command) / commands``, the current
    command's progress being its last tqdm ``k/n [`` counter (0 if none yet).

    >>> parse_progress("fine-tune digits:  50%|##| 30/60 [00:01<00:01]", {"step": 1, "n_steps": 4,
    ...                                                                   "state": "running"})[0]
    0.375
    """
    n = max(1, int(status.get("n_steps", 1)))
    step = int(status.get("step", 0))
    if status.get("state") == "done":
        return 1.0, "done"
    within, label = 0.0, ""
    matches = list(_TQDM.finditer(log_text))
    if matches:
        k, total = int(matches[-1].group(1)), int(matches[-1].group(2))
        within = min(1.0, k / total) if total else 0.0
        line_start = max(log_text.rfind("\n", 0, matches[-1].start()), log_text.rfind("\r", 0, matches[-1].start())) + 1
        label = log_text[line_start:matches[-1].start()].split("|")[0].strip().rstrip(":")
    frac = min(1.0, (step + within) / n)
    cmd = str(status.get("command", ""))
    what = cmd.split()[1] if cmd.startswith("talos ") and len(cmd.split()) > 1 else ""
    if what == "evaluate" and len(cmd.split()) > 2:
        what = f"evaluate {cmd.split()[2]}"
    return frac, f"step {min(step + 1, n)}/{n} {what} {label}".strip()


def current_progress(job: JobInfo) -> tuple[float, str]:
    """Progress of ``job``: only the log written since its current command started is parsed."""
    status = read_status(job.path)
    offsets = status.get("offsets") or [0]
    path = job.path / "log.txt"
    try:
        with open(path, "rb") as fh:
            fh.seek(int(offsets[-1]))
            text = fh.read().decode(errors="replace")[-20000:]
    except OSError:
        text = ""
    return parse_progress(text, status)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != "run":
        print(f"usage: python -m {RUNNER_MODULE} run <job dir>", file=sys.stderr)
        return 2
    return run_job(argv[1])


if __name__ == "__main__":
    sys.exit(main())
