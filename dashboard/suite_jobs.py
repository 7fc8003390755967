"""Whole suites launched from the Run page: one ``talos suite`` command as a background job
(:mod:`dashboard.jobs`), run here or submitted to a Ray cluster (``--executor ray --address ...``), and the
suite's progress read from its record (``results/suite/<name>.json``: per-step states, rewritten on every change
by both executors, :mod:`talos_core.suites.executors`).

    >>> cmd = build_suite_command(SuiteJobSpec("tiny", executor="ray", address="10.0.0.5:6379"), "/tmp/s")
    >>> from dashboard.jobs import display_command
    >>> display_command(cmd)
    'talos suite tiny --store /tmp/s --scale mini --executor ray --address 10.0.0.5:6379'
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from talos_core.errors import TalosError, check_number

_DONE = re.compile(r"\[(\d+)/(\d+) done")


@dataclass(frozen=True)
class SuiteJobSpec:
    """``talos suite NAME --scale SCALE`` on ``executor`` (``local`` or ``ray`` at ``address``)."""

    suite: str
    scale: str | None = None
    executor: str = "local"
    address: str | None = None
    gpus_per_task: float | None = None
    resume: bool = False

    def validate(self) -> None:
        from talos_core.suites import SUITES, default_scale
        from talos_core.suites.executors import EXECUTORS

        if self.suite not in SUITES:
            raise TalosError(f"unknown suite {self.suite!r}; choose among: {', '.join(SUITES)}")
        scale = self.scale or default_scale(self.suite)
        if scale not in SUITES[self.suite].scales:
            raise TalosError(f"suite {self.suite!r} has no scale {scale!r}; choose among: "
                             f"{', '.join(SUITES[self.suite].scales)}")
        if self.executor not in EXECUTORS:
            raise TalosError(f"unknown executor {self.executor!r}; choose among: {', '.join(EXECUTORS)}")
        if self.executor != "ray" and (self.address or self.gpus_per_task is not None):
            raise TalosError("a Ray address or GPUs per task go with the ray executor; pick it or clear them")
        if self.address is not None and (not self.address.strip() or any(c.isspace() for c in self.address.strip())):
            raise TalosError(f"Ray address {self.address!r} must be HOST:PORT (e.g. 10.0.0.5:6379) or auto")
        check_number("GPUs per task", self.gpus_per_task, low=0, low_open=True, optional=True)

    def resolved_scale(self) -> str:
        from talos_core.suites import default_scale

        return self.scale or default_scale(self.suite)


def build_suite_command(spec: SuiteJobSpec, store: str | Path) -> list[str]:
    """The job's one command: ``talos suite`` with the spec's executor flags."""
    from dashboard.jobs import _cli

    spec.validate()
    cmd = [*_cli(), "suite", spec.suite, "--store", str(store), "--scale", spec.resolved_scale()]
    if spec.executor != "local":
        cmd += ["--executor", spec.executor]
    if spec.address:
        cmd += ["--address", spec.address.strip()]
    if spec.gpus_per_task is not None:
        cmd += ["--gpus-per-task", f"{spec.gpus_per_task:g}"]
    if spec.resume:
        cmd.append("--resume")
    return cmd


def suite_job_problem(spec: SuiteJobSpec, limits) -> str | None:
    """The sentence when the suite's scale is over a cap of this server (:class:`dashboard.jobs.JobLimits`); a scale
    without a limit on a split's examples (the paper suites: whole data sets) is over any examples cap."""
    from talos_core.suites import SUITES

    sc = SUITES[spec.suite].scales[spec.resolved_scale()]
    steps = max(sc.steps, sc.curve_steps or 0)
    checks = [("steps", steps, limits.max_steps)] + [
        (f"{split} examples", getattr(sc, f"max_{split}"), limits.max_examples) for split in ("train", "val", "test")]
    for label, value, cap in checks:
        if cap and (value is None or value > cap):
            shown = f"{label} {value}" if value is not None else f"all {label} of its data sets (no limit)"
            return (f"suite {spec.suite!r} at scale {spec.resolved_scale()!r} uses {shown}, above the cap of this "
                    f"dashboard server ({cap}); pick a smaller scale or run it with `talos suite` yourself")
    return None


#: a suite whose plan estimates more device-hours (training and evaluation) than this (or has runs it cannot
#: estimate) is launched only after the visitor confirms its cost
CONFIRM_HOURS = 0.25


def suite_plan(spec: SuiteJobSpec, store: str | Path, *, gpu: bool):
    """The suite's :class:`~talos_core.suites.plan.Plan` against ``store``, costed on this machine's kind of device (an
    H100 with a GPU, the 2-core CPU without one): what ``talos suite --plan`` prints."""
    from talos_core.suites.plan import plan_suite

    spec.validate()
    return plan_suite(spec.suite, spec.resolved_scale(), store, device="h100" if gpu else "cpu-2core")


def needs_confirmation(plan) -> bool:
    """Whether launching ``plan`` needs the visitor's confirmation of its cost (:data:`CONFIRM_HOURS`)."""
    return plan_hours(plan) > CONFIRM_HOURS or bool(plan.cost["unmeasured_runs"])


def plan_hours(plan) -> float:
    """The plan's device-hours: training, with the runs whose budget a learning curve chooses at their upper bound, and
    the evaluation it counts where its cells are measured."""
    return plan.cost["hours"] + plan.cost.get("max_hours", 0.0) + (plan.cost.get("evaluation") or {}).get("hours", 0.0)


def start_suite_job(spec: SuiteJobSpec, store: str | Path, *, limits=None, python: str | None = None,
                    plan=None, confirmed: bool = False):
    """Create and launch the suite's job (caps and concurrent jobs checked under the launch lock); with ``plan``
    (:func:`suite_plan`), one that :func:`needs_confirmation` is refused unless ``confirmed``."""
    if plan is not None and needs_confirmation(plan) and not confirmed:
        raise TalosError(f"suite {spec.suite!r} at scale {spec.resolved_scale()!r} is estimated at "
                         f"{plan_hours(plan):.2f} device-hours of training and evaluation "
                         f"({plan.counts()['finetune_runs']} runs); confirm its cost to launch it")
    import fcntl

    from dashboard import jobs
    from talos_core.suites import SUITES

    cmd = build_suite_command(spec, Path(store).resolve())
    suite = SUITES[spec.suite]
    meta = {**asdict(spec), "kind": "suite", "model": suite.model, "method": f"suite {spec.suite}",
            "tasks": list(suite.tasks)}
    if limits is None:
        return jobs.launch(jobs.create_job(store, [cmd], meta), python=python)
    problem = suite_job_problem(spec, limits)
    if problem:
        raise TalosError(problem)
    root = jobs.jobs_root(store)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".launch.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        busy = limits.busy(jobs.active_jobs(store))
        if busy:
            raise TalosError(busy)
        return jobs.launch(jobs.create_job(store, [cmd], meta), python=python)


def suite_progress(log_text: str, status: dict) -> tuple[float, str]:
    """Fraction and label of a suite job from its log's last ``[k/n done`` (the progress display's lines).

    >>> suite_progress("[tiny/mini] a done in 1.0s [3/12 done, 2 running]", {"state": "running"})
    (0.25, '3/12 steps done, 2 running')
    """
    if status.get("state") == "done":
        return 1.0, "done"
    found = list(_DONE.finditer(log_text))
    if not found:
        return 0.0, "starting"
    k, n = int(found[-1].group(1)), int(found[-1].group(2))
    rest = log_text[found[-1].end():].split("]", 1)[0]
    return (k / n if n else 0.0), f"{k}/{n} steps done{rest}"


def steps_table(record: dict | None) -> pd.DataFrame:
    """Per-step state of the suite record's latest session: ``step, state, seconds, host, error``."""
    cols = ["step", "state", "seconds", "host", "error"]
    sessions = (record or {}).get("sessions") or []
    states = (sessions[-1].get("steps") if sessions and isinstance(sessions[-1], dict) else None) or {}
    rows = [{"step": lab, "state": s.get("state"), "seconds": s.get("seconds"), "host": s.get("host"),
             "error": s.get("error")} for lab, s in states.items() if isinstance(s, dict)]
    return pd.DataFrame(rows, columns=cols)
