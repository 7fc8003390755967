"""Executors of a suite's steps: ``local`` (in this process, in order) and ``ray`` (Ray tasks).

``talos suite NAME --executor local|ray [--address ADDR]``. The step table (:func:`talos_core.suites.steps.suite_steps`)
is the same for both; what differs is who runs the steps:

* ``local`` (the default) runs them one after another in this process, in the table's order (what
  ``talos suite`` always did; results are bit for bit the same).
* ``processes`` runs the same units as ``ray`` (every step, every fine-tuning run of a step that fine-tunes) on
  ``--jobs N`` worker processes of this machine (started fresh, reused from unit to unit), in dependency order: parallel
  evaluation on one GPU (several processes share it; with CUDA MPS they run side by side) or on many cores,
  without Ray. A unit that fails is not retried; the rest is as with Ray (failed / blocked steps in the record).
* ``ray`` submits every step — and every fine-tuning run of a step that fine-tunes the runs later steps
  evaluate — as a Ray task with declared resources (``num_gpus`` per model step when the cluster has GPUs,
  ``num_cpus`` otherwise), passing the tasks it waits for as arguments: the dependency graph
  (:func:`step_graph`) is expressed as Ray task dependencies and Ray schedules everything. Ray retries a
  failed task once (``max_retries=1, retry_exceptions=True``); a step that still fails is recorded by name
  in the suite record (``failed``) while the steps that do not depend on it go on; the steps that do are
  recorded as ``blocked``. ``talos suite ... --resume`` (with either executor) then runs what is missing.

Every worker opens the store by its path: with ``--address`` (a Ray cluster) the store must be on a filesystem
every node mounts at the same path (NFS, a cluster filesystem), and talos-studio must be installed on every
node. Steps that update one result (the per-model tables of :attr:`Protocol.upserts
<talos_core.evaluation.protocols.Protocol.upserts>`) hold :meth:`Store.locked <talos_core.store.Store.locked>`
and write their rows in the suite's row order (:attr:`Step.row_order <talos_core.suites.steps.Step.row_order>`),
so they run in any order and the store ends identical to the local executor's.

The dependency graph is derived from data on the steps (:func:`step_graph`): a step waits for the earlier
``trains`` steps of every fine-tuning method whose runs it reads (its own, the post-hoc method's base method,
:attr:`Step.uses <talos_core.suites.steps.Step.uses>`); those steps also write the learning curves, lr checks and
selections its resolvers read. It waits for the steps it names in :attr:`Step.after
<talos_core.suites.steps.Step.after>` (results it reads) and for the previous step writing the same result (same
protocol, result id and tasks); an ``always`` step (the comparison, which gathers every stored result) waits for
every earlier step.

The progress display (:class:`Progress`) is shared: one line per state change (started, done, failed,
blocked, skipped) with the counts, a summary at the end, and per-step state in the suite record's session
(``sessions[-1]["steps"]``) for the dashboard.
"""

from __future__ import annotations

import math
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from talos_core.errors import TalosError, check_int, unknown
from talos_core.store import Store

EXECUTORS = ("local", "processes", "ray")
"""What ``talos suite --executor`` accepts."""

INSTALL_RAY = "pip install -e '.[ray]' (or pip install ray)"
STATES = ("pending", "running", "done", "failed", "blocked", "skipped", "later")
"""Per-step states in the suite record: ``skipped`` = done by an earlier session (``--resume``), ``later`` = left
to another part of the suite (``--part``)."""


# --------------------------------------------------------------------------------------------
# the dependency graph
# --------------------------------------------------------------------------------------------
def step_methods(step) -> set[str]:
    """The fine-tuning methods whose runs ``step`` reads: its own (a post-hoc method's base method), the one
    its mask comparison names, and :attr:`~talos_core.suites.steps.Step.uses`."""
    from talos_core.evaluation.protocols import get_protocol
    from talos_core.schema import METHODS

    kind = get_protocol(step.protocol).method_kind
    out = set(getattr(step, "uses", ()) or ())
    if kind == "finetune":
        out.add(step.method)
    elif kind == "posthoc":
        out.add(METHODS[step.method].base_method)
    compare = getattr(step.settings, "compare_method", None)  # settings resolved later name theirs in ``uses``
    if not callable(step.settings) and compare:
        out.add(compare)
    return out


def step_writes(step) -> set[tuple]:
    """Keys of the results ``step`` writes: ``("upsert", kind)`` per upserted per-model table, and
    ``(protocol, result id, tasks)`` for its own results. Only the latter order writers (:func:`step_graph`):
    upserts are safe in any order."""
    from talos_core.evaluation.protocols import get_protocol

    keys: set[tuple] = {("upsert", kind) for kind in get_protocol(step.protocol).upserts}
    keys.add((step.protocol, step.row_key, tuple(step.tasks)))
    return keys


def step_graph(steps: Sequence, *, results: bool = True) -> dict[str, tuple[str, ...]]:
    """``{label: labels of the earlier steps it waits for}`` (see the module docstring), in table order;
    ``results=False``: only the steps whose runs it needs (what a step's fine-tuning runs wait for).

    >>> from talos_core.suites import get_suite, suite_steps
    >>> g = step_graph(suite_steps(get_suite("tiny"), "mini", ["talos", "nonlinear"], ["ties"], seed=0,
    ...                            device="cpu"))
    >>> g["talos: addition"], g["nonlinear: fine-tune + single"]
    (('talos: fine-tune + single',), ())
    >>> g["ties: post-hoc addition + negation"]
    ('nonlinear: fine-tune + single',)
    >>> len(g["comparison"]) == len(g) - 1
    True
    >>> step_graph(suite_steps(get_suite("tiny"), "mini", ["talos", "nonlinear"], [], seed=0, device="cpu"),
    ...            results=False)["nonlinear: fine-tune + single"]
    ()
    """
    graph: dict[str, tuple[str, ...]] = {}
    trains: dict[str, list[str]] = {}  # method -> its train steps so far
    last_writer: dict[tuple, str] = {}
    seen: list[str] = []
    for st in steps:
        if st.label in graph:
            raise TalosError(f"suite step {st.label!r} is listed twice")
        if st.always and results:
            deps = list(seen)
        else:
            deps = [lab for m in sorted(step_methods(st)) for lab in trains.get(m, [])]
            deps += list(getattr(st, "after", ()) or ())  # results its settings, overrides or runs read
            if results:
                deps += [last_writer[k] for k in sorted(step_writes(st), key=repr) if k in last_writer]
        graph[st.label] = tuple(dict.fromkeys(lab for lab in seen if lab in set(deps)))  # table order, no repeats
        for k in step_writes(st):
            if k[0] != "upsert":  # upserts keep the suite's row order under the store's lock: no order needed
                last_writer[k] = st.label
        if st.trains and getattr(st, "feeds", True):  # an lr check that only reports feeds no later step
            trains.setdefault(st.method, []).append(st.label)
        seen.append(st.label)
    return graph


# --------------------------------------------------------------------------------------------
# progress display (both executors)
# --------------------------------------------------------------------------------------------
@dataclass
class Progress:
    """Per-step state of a suite run and its display: one line per state change, a summary at the end.

    ``states[label]`` is ``{"state": one of STATES, "seconds": ..., "error": ..., "host": ..., "attempts": ...,
    "work": ...}`` (``work``: the examples the step pushed through the model, :mod:`talos_core.inference.tally`);
    ``on_change(label)`` is called after every change (the suite record is rewritten there).
    """

    prefix: str
    labels: Sequence[str]
    log: Callable[[str], None] = print
    on_change: Callable[[str], None] | None = None
    states: dict[str, dict] = field(default_factory=dict)
    t0: float = field(default_factory=time.perf_counter)

    def __post_init__(self) -> None:
        for lab in self.labels:
            self.states.setdefault(lab, {"state": "pending"})

    def count(self, state: str) -> int:
        return sum(s["state"] == state for s in self.states.values())

    def counts(self) -> str:
        n = len(self.states)
        done = self.count("done") + self.count("skipped")
        out = f"{done}/{n} done, {self.count('running')} running"
        bad = self.count("failed") + self.count("blocked")
        out += f", {self.count('failed')} failed, {self.count('blocked')} blocked" if bad else ""
        return out + (f", {self.count('later')} for other parts" if self.count("later") else "")

    def _set(self, label: str, **values: Any) -> None:
        self.states.setdefault(label, {}).update(values)
        if self.on_change is not None:
            self.on_change(label)

    def skip(self, label: str, seconds: float) -> None:
        self.states[label] = {"state": "skipped", "seconds": float(seconds)}
        self.log(f"{self.prefix} {label}: already done ({seconds:.1f}s), skipped")

    def defer(self, label: str, why: str) -> None:
        self.states[label] = {"state": "later", "error": why}

    def start(self, label: str, host: str | None = None) -> None:
        st = self.states.setdefault(label, {"state": "pending"})
        attempts = int(st.get("attempts", 0)) + 1
        retry = f" (retry {attempts - 1})" if attempts > 1 else ""
        where = f" on {host}" if host and host != socket.gethostname() else ""
        self.log(f"{self.prefix} {label}{retry}{where} ...")
        self._set(label, state="running", attempts=attempts, **({"host": host} if host else {}),
                  started_s=round(time.perf_counter() - self.t0, 3))

    def done(self, label: str, seconds: float, work: Mapping[str, int] | None = None) -> None:
        self.states[label]["state"] = "done"  # counted before the line is printed
        self.log(f"{self.prefix} {label} done in {seconds:.1f}s [{self.counts()}]")
        self._set(label, state="done", seconds=float(seconds), **({"work": dict(work)} if work is not None else {}))

    def fail(self, label: str, error: str) -> None:
        self.states[label]["state"] = "failed"
        self.log(f"{self.prefix} {label} FAILED: {error} [{self.counts()}]")
        self._set(label, state="failed", error=error)

    def block(self, label: str, because: Sequence[str]) -> None:
        self.states[label]["state"] = "blocked"
        self.log(f"{self.prefix} {label} not run: it needs {', '.join(because)}, which failed")
        self._set(label, state="blocked", error=f"needs {', '.join(because)}, which failed")

    def failures(self) -> dict[str, str]:
        """``{label: error}`` of the failed and blocked steps."""
        return {lab: str(s.get("error", "")) for lab, s in self.states.items() if s["state"] in ("failed", "blocked")}

    def summary(self) -> list[str]:
        """Final lines: the counts, then one line per step with its state and time."""
        lines = [f"{self.prefix} steps: {self.counts()} in {time.perf_counter() - self.t0:.1f}s wall"]
        width = max((len(lab) for lab in self.states), default=0)
        for lab, s in self.states.items():
            secs = f"{s['seconds']:8.1f}s" if s.get("seconds") is not None else " " * 9
            err = f"  {s['error']}" if s.get("error") else ""
            lines.append(f"  {lab:<{width}}  {s['state']:<8}{secs}{err}")
        return lines


# --------------------------------------------------------------------------------------------
# a step as workers see it
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SuiteJob:
    """What any worker needs to rebuild the suite's step table and run one step of it."""

    suite: str
    scale: str
    model: str
    table: Callable[[], Sequence]  # builds the step table (a partial of talos_core.suites.steps.suite_steps)
    store: str
    precision: str | None = None  # the requested evaluation precision (run_suite's precision block)
    threads: int | None = None  # torch threads in a worker (the driver's: CPU float sums depend on it)
    env: Mapping[str, str] = field(default_factory=dict)  # the driver's $TALOS_* settings
    device: str = "auto"  # the suite's --device: "cpu" keeps Ray tasks off a cluster's GPUs by default

    def steps(self) -> dict[str, Any]:
        return {st.label: st for st in self.table()}

    def open_store(self) -> Store:
        store = Store(self.store)
        if not (store.root / "store.json").is_file():
            raise TalosError(f"store {self.store} is not visible on {socket.gethostname()}: with a Ray cluster the "
                             f"store must be on a filesystem every node mounts at the same path")
        return store


def _run_in_worker(job: SuiteJob, label: str, fine_tune: str | None, progress: bool) -> dict:
    """Body of one Ray task: fine-tune one run of step ``label`` (``fine_tune`` = its :func:`run_parts` key), or
    run the step; returns its time, host and work (:func:`talos_core.inference.tally.since`)."""
    import torch

    from talos_core.inference import tally
    from talos_core.inference.precision import eval_precision

    if job.threads:
        torch.set_num_threads(job.threads)
    saved = {k: os.environ.get(k) for k in job.env}
    os.environ.update(job.env)
    try:
        store = job.open_store()
        st = job.steps()[label]
        t0, before = time.perf_counter(), tally.snapshot()
        with eval_precision(job.precision):
            if fine_tune is None:
                st.run(store, job.model, job.suite, progress=progress)
            else:
                fine_tune_run(st, store, job.model, fine_tune, progress=progress)
        return {"seconds": time.perf_counter() - t0, "host": socket.gethostname(), "work": tally.since(before)}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_parts(step) -> list[tuple[str, str, Any]]:
    """``(key, task, candidate)`` of every run a fine-tuning step makes, each of which can be trained on its own
    (a Ray task, or a ``--stage train`` process that shares the work, :func:`fine_tune_parts`): one per task for
    ``single`` and ``learning-curve`` (candidate ``None``; a curve's run is the task's run to the curve's length,
    with its validation curve), one per task and candidate value for ``selection`` (keys ``"<task>
    <param>=<value>"``, candidates in the order the selection trains them) and for ``lr-check`` (keys ``"<task>
    lr=<value>"``). Other steps: ``[]``."""
    if not step.trains:
        return []
    if step.protocol in ("single", "learning-curve"):
        return [(t, t, None) for t in step.tasks]
    if step.protocol in ("selection", "lr-check") and not callable(step.settings):
        s = step.settings
        param = "lr" if step.protocol == "lr-check" else s.param
        return [(f"{t} {param}={v:g}", t, v) for v in s.values for t in step.tasks]
    return []


def part_overrides(step, store: Store, task: str, candidate: Any, model: str | None = None) -> dict:
    """The fine-tuning settings of one :func:`run_parts` entry, as the step itself resolves them when it runs
    (its overrides, the task's overrides, then the selection candidate's change, or the lr check's learning rate:
    ``model`` is needed there, to tell the method's own lr, whose run is the request itself)."""
    from talos_core.evaluation.runs import merge_overrides
    from talos_core.evaluation.selection import candidate_delta

    settings, ov, per_task = step.resolve(store)
    base = merge_overrides(ov, (per_task or {}).get(task))
    if step.protocol == "learning-curve":
        from talos_core.evaluation.learning_curve import curve_overrides

        return curve_overrides(base, settings)
    if candidate is None:
        return dict(base)
    if step.protocol == "lr-check":
        from talos_core.evaluation.lr_check import lr_overrides, own_lr

        if settings.choose:  # a check that chooses trains each candidate as it is
            return lr_overrides(base, candidate, None)
        if model is None:
            raise TalosError(f"the runs of step {step.label!r} depend on the model; pass it")
        return lr_overrides(base, candidate, own_lr(model, task, step.method, base))
    return merge_overrides(base, candidate_delta(settings.param, candidate, base))


def fine_tune_run(step, store: Store, model: str, key: str, *, progress: bool = False) -> None:
    """Fine-tune (or find) the run ``key`` (a :func:`run_parts` key) of ``step``."""
    from talos_core.evaluation.runs import resolve_runs

    for k, task, candidate in run_parts(step):
        if k == key:
            ov = part_overrides(step, store, task, candidate, model)
            if step.protocol == "learning-curve":  # the run with its curve (trained again when stored without one)
                from talos_core.evaluation.learning_curve import curve_run

                curve_run(store, model, task, step.method, ov, progress=progress)
                return
            resolve_runs(store, model, (task,), step.method, overrides=ov, train=True, progress=progress)
            return
    raise unknown("run of step " + repr(step.label), key, [k for k, _, _ in run_parts(step)])


def fine_tune_parts(step, store: Store, model: str, *, progress: bool = False,
                    log: Callable[[str], None] | None = None) -> list[str]:
    """Fine-tune the runs of ``step`` that no other process is fine-tuning now; returns the keys trained here.

    ``talos suite --stage train`` calls this before the step itself, so several processes started with the same
    command share a step's runs: each skips the runs already in the store and those whose run lock
    (:meth:`Store.run_lock`) another process holds, and the step, run afterwards, finds them all (waiting for
    the runs still in training, :func:`talos_core.pipeline.run_finetune`). One process alone trains every run,
    in the step's own order, as before."""
    from talos_core.evaluation.learning_curve import has_curve
    from talos_core.evaluation.runs import build_request, find_run

    done = []
    for key, task, candidate in run_parts(step):
        ov = part_overrides(step, store, task, candidate, model)
        curve = step.protocol == "learning-curve"  # reads the run's manifest only
        found = find_run(store, model, task, step.method, ov, weights=not curve)
        if found is not None and (not curve or has_curve(found, ov["eval_every"])):
            continue
        if store.lock_held("run", build_request(model, task, step.method, ov).run_id()):
            if log:
                log(f"  {step.label} [{key}]: another process is fine-tuning it")
            continue
        fine_tune_run(step, store, model, key, progress=progress)
        done.append(key)
    return done


def splits_runs(step) -> bool:
    """A fine-tuning step whose runs can be trained one by one (:func:`run_parts`): one Ray task per run."""
    return bool(run_parts(step))


# --------------------------------------------------------------------------------------------
# executors
# --------------------------------------------------------------------------------------------
def run_local(job: SuiteJob, steps: Sequence, store: Store, display: Progress, *, progress: bool = False) -> None:
    """Run ``steps`` in order in this process (an exception stops the suite, as it always did)."""
    from talos_core.inference import tally

    for st in steps:
        t0, before = time.perf_counter(), tally.snapshot()
        display.start(st.label)
        try:
            st.run(store, job.model, job.suite, progress=progress)
        except BaseException as exc:
            display.fail(st.label, _one_line(exc))
            raise
        display.done(st.label, time.perf_counter() - t0, tally.since(before))


def _one_line(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)  # ray.exceptions.RayTaskError: the exception the task raised
    exc = cause if isinstance(cause, BaseException) else exc
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def check_address(address: str) -> None:
    """An unreachable ``host:port`` is one :class:`TalosError` sentence (Ray itself would wait for minutes)."""
    target = address.split("://", 1)[-1]
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise TalosError(f"Ray address {address!r} is not HOST:PORT (e.g. 10.0.0.5:6379, what `ray start --head` "
                         f"prints), 'auto', or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise TalosError(f"cannot reach the Ray cluster at {address} ({exc.strerror or exc}); start it with "
                         f"`ray start --head` there, or pass the address `ray status` prints") from None


def preflight(executor: str, address: str | None, gpus_per_task: float | None = None,
              cpus_per_task: float = 1.0, jobs: int | None = None) -> None:
    """Before anything is written: ``ray`` needs Ray installed, a reachable ``address`` and positive resources;
    ``processes`` a positive ``jobs``."""
    check_executor(executor)
    if executor == "processes":
        check_jobs(jobs)
    if executor != "ray":
        return
    if gpus_per_task is not None and not 0 < gpus_per_task < math.inf:
        raise TalosError(f"--gpus-per-task must be a positive number of GPUs (e.g. 1 or 0.25), got {gpus_per_task!r}")
    if not 0 < cpus_per_task < math.inf:
        raise TalosError(f"--cpus-per-task must be a positive number of CPUs, got {cpus_per_task!r}")
    try:
        import ray  # noqa: F401
    except ImportError:
        raise TalosError(f"--executor ray needs Ray, which is not installed; install it with {INSTALL_RAY}") from None
    if address and address != "auto":
        check_address(address)


def connect_ray(address: str | None):
    """``(ray, started)``: the Ray module, connected to ``address`` (``None``: the Ray instance this process
    already has, else a new local one with this machine's CPUs and GPUs); ``started`` when we started it."""
    try:
        import ray
    except ImportError:
        raise TalosError(f"--executor ray needs Ray, which is not installed; install it with {INSTALL_RAY}") from None
    if ray.is_initialized():
        return ray, False
    if address and address != "auto":
        check_address(address)
    try:
        ray.init(address=address or None, logging_level="WARNING", log_to_driver=True)
    except ConnectionError as exc:
        raise TalosError(f"cannot connect to a Ray cluster at {address or 'a new local instance'}: "
                         f"{_one_line(exc)}; start one with `ray start --head`") from None
    return ray, True


def run_ray(job: SuiteJob, steps: Sequence, display: Progress, *, address: str | None = None,
            gpus_per_task: float | None = None, cpus_per_task: float = 1.0, progress: bool = False,
            **_: Any) -> dict[str, float]:
    """Run ``steps`` as Ray tasks (see the module docstring); returns ``{label: seconds}`` of the steps that
    finished (a split step's time includes its fine-tuning tasks'). Failures are in ``display``."""
    ray, started = connect_ray(address)
    try:
        return _run_ray(ray, job, steps, display, gpus_per_task=gpus_per_task, cpus_per_task=cpus_per_task,
                        progress=progress)
    finally:
        if started:
            ray.shutdown()


def default_gpus_per_task(cluster_gpus: float, device: str) -> float:
    """GPUs per Ray task when ``--gpus-per-task`` is not given: one where the cluster has GPUs and the suite's
    ``--device`` is not ``cpu``, else none.

    >>> default_gpus_per_task(4, "auto"), default_gpus_per_task(4, "cpu"), default_gpus_per_task(0, "auto")
    (1.0, 0.0, 0.0)
    """
    return 1.0 if cluster_gpus and device != "cpu" else 0.0


def _ray_gpus_per_task(ray, job: SuiteJob, gpus_per_task: float | None, cpus_per_task: float) -> float:
    """GPUs per Ray task: ``gpus_per_task``, checked against the cluster, or the default for it
    (:func:`default_gpus_per_task`)."""
    if gpus_per_task is not None and not gpus_per_task > 0:
        raise TalosError(f"--gpus-per-task must be a positive number of GPUs (e.g. 1 or 0.25), got {gpus_per_task!r}")
    if not cpus_per_task > 0:
        raise TalosError(f"--cpus-per-task must be a positive number of CPUs, got {cpus_per_task!r}")
    gpus = float(ray.cluster_resources().get("GPU", 0))
    if gpus_per_task is None:
        return default_gpus_per_task(gpus, job.device)
    if not gpus:
        raise TalosError(f"--gpus-per-task {gpus_per_task:g} but the Ray cluster has no GPU; leave it out to run on "
                         f"CPUs")
    return gpus_per_task


def _start_reporter(ray) -> Any:
    """A Ray actor the tasks tell that they started (Ray tells the driver only when they end)."""

    @ray.remote
    class _Started:
        def __init__(self) -> None:
            self.events: list[tuple[str, str]] = []

        def started(self, label: str, host: str) -> None:
            self.events.append((label, host))

        def take(self) -> list[tuple[str, str]]:
            out, self.events = self.events, []
            return out

    return _Started.options(num_cpus=0).remote()


def _run_ray(ray, job: SuiteJob, steps: Sequence, display: Progress, *, gpus_per_task: float | None,
             cpus_per_task: float, progress: bool) -> dict[str, float]:
    from talos_core.evaluation.protocols import get_protocol

    gpus_per_task = _ray_gpus_per_task(ray, job, gpus_per_task, cpus_per_task)
    reporter = _start_reporter(ray)

    def body(job: SuiteJob, label: str, fine_tune: str | None, *upstream: Any) -> dict:
        ray.get(reporter.started.remote(label if fine_tune is None else _run_label(label, fine_tune),
                                        socket.gethostname()))
        return _run_in_worker(job, label, fine_tune, progress)

    remote = ray.remote(body)
    plan = _plan_units(job, steps, display)
    needs, parts, by_label = plan.needs, plan.parts, {st.label: st for st in steps}
    refs: dict[str, Any] = {}  # display label -> ObjectRef
    for lab, (step_label, key) in plan.units.items():  # a unit comes after the units it needs
        model_step = get_protocol(by_label[step_label].protocol).needs_tasks
        opts = dict(num_cpus=cpus_per_task, num_gpus=gpus_per_task if model_step else 0, max_retries=1,
                    retry_exceptions=True)
        refs[lab] = remote.options(name=lab, **opts).remote(job, step_label, key, *[refs[d] for d in needs[lab]])

    times: dict[str, float] = {}
    work: dict[str, dict[str, int]] = {}
    settled: dict[str, bool] = {}  # display label -> succeeded

    def settle(lab: str) -> bool:
        if lab in settled:
            return settled[lab]
        for d in needs[lab]:
            settle(d)
        bad = [d for d in needs[lab] if not settled[d]]
        try:
            out = ray.get(refs[lab])
        except Exception as exc:  # the task's own error, or a failed dependency's
            poll()
            if bad:
                display.block(lab, bad)
            else:
                display.fail(lab, _one_line(exc))
            settled[lab] = False
            return False
        poll()
        if display.states.get(lab, {}).get("state") != "running":
            display.start(lab, out.get("host"))
        secs = float(out["seconds"]) + sum(times.get(p, 0.0) for p in parts.get(lab, []))
        times[lab], work[lab] = secs, _with_parts(out, parts.get(lab, []), work)
        display.done(lab, secs, work[lab])
        settled[lab] = True
        return True

    def poll() -> None:
        for lab, host in ray.get(reporter.take.remote()):
            if lab not in settled:
                display.start(lab, host)

    pending = dict(refs)
    by_ref = {ref: lab for lab, ref in refs.items()}
    try:
        while pending:
            ready, _ = ray.wait(list(pending.values()), num_returns=1, timeout=1.0)
            poll()
            for ref in ready:
                lab = by_ref[ref]
                pending.pop(lab, None)
                settle(lab)
                for d in needs[lab]:
                    pending.pop(d, None)
    except BaseException:  # interrupted (Ctrl-C): the cluster stops the suite's tasks too
        for ref in pending.values():
            ray.cancel(ref, force=False)
        raise
    finally:
        ray.kill(reporter)
    return {lab: t for lab, t in times.items() if lab in plan.labels}


@dataclass
class _Units:
    """What an executor runs for a list of steps: each step, and before a step whose runs are split
    (:func:`splits_runs`) one unit per run, with the units each waits for."""

    units: dict[str, tuple[str, str | None]]  # display label -> (step label, run key or None), each after its needs
    needs: dict[str, list[str]]  # display label -> display labels it waits for
    parts: dict[str, list[str]]  # step label -> its fine-tuning units' labels
    labels: set[str]  # the steps' labels


def _plan_units(job: SuiteJob, steps: Sequence, display: Progress) -> _Units:
    """The units of ``steps`` (:class:`_Units`; their dependencies from :func:`step_graph` over the whole table);
    every run unit is added to ``display`` as pending."""
    table = list(job.steps().values())
    graph, run_graph = step_graph(table), step_graph(table, results=False)
    plan = _Units({}, {}, {}, {st.label for st in steps})
    for st in steps:
        deps = [d for d in graph[st.label] if d in plan.labels]  # steps done in an earlier session: not waited for
        if splits_runs(st):
            run_deps = [d for d in run_graph[st.label] if d in plan.labels]  # its runs: not the writer order
            plan.parts[st.label] = []
            for key, _, _ in run_parts(st):
                lab = _run_label(st.label, key)
                display.states[lab] = {"state": "pending"}
                plan.units[lab], plan.needs[lab] = (st.label, key), run_deps
                plan.parts[st.label].append(lab)
            deps = deps + plan.parts[st.label]
        plan.units[st.label], plan.needs[st.label] = (st.label, None), deps
    return plan


def _with_parts(out: Mapping[str, Any], parts: Sequence[str], work: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """A unit's work (:mod:`talos_core.inference.tally` counts) plus that of its fine-tuning parts."""
    total = dict(out.get("work") or {})
    for p in parts:
        for k, n in (work.get(p) or {}).items():
            total[k] = total.get(k, 0) + n
    return total


def _run_label(label: str, key: str) -> str:
    return f"{label} [fine-tune {key}]"


def exit_with_parent(parent: int, every_s: float = 1.0) -> None:
    """Worker initializer of ``--executor processes``: a daemon thread ends this worker (``os._exit``) once the process
    that started it (pid ``parent``) is gone — a suite stopped with ``kill`` or by the end of a session would otherwise
    leave its workers computing on as orphans, holding the CPU and writing progress files under the next run's feet
    (seen 2026-11-28: a worker of a killed text run ran on for 50 minutes beside its successor). Polling
    ``os.getppid()`` works on every POSIX system, with no parent-side cleanup to miss."""
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(1)

    threading.Thread(target=watch, name="talos-exit-with-parent", daemon=True).start()


def run_processes(job: SuiteJob, steps: Sequence, display: Progress, *, jobs: int | None = None,
                  progress: bool = False, **_: Any) -> dict[str, float]:
    """Run ``steps`` (and the runs of the fine-tuning steps, :func:`run_parts`) on ``jobs`` worker processes of
    this machine (default: its CPU count; ``spawn``-ed, reused from unit to unit), a unit starting when the
    units it depends on (:func:`step_graph`, as with Ray) are done. Returns ``{label: seconds}`` of the steps that
    finished (a split step's time includes its runs'); failures and blocked steps are in ``display``."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    jobs = check_jobs(jobs)
    plan = _plan_units(job, steps, display)
    units, needs, parts = plan.units, plan.needs, plan.parts
    times: dict[str, float] = {}
    work: dict[str, dict[str, int]] = {}
    state: dict[str, bool] = {}  # display label -> succeeded
    running: dict[Any, str] = {}
    ctx = multiprocessing.get_context("spawn")  # fresh interpreters: no inherited CUDA or thread state
    # workers are reused, as Ray's are, and end with this process (exit_with_parent)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=exit_with_parent,
                             initargs=(os.getpid(),)) as pool:
        while len(state) < len(units):
            for lab in units:
                if lab in state or lab in running.values():
                    continue
                if any(d in state and not state[d] for d in needs[lab]):
                    display.block(lab, [d for d in needs[lab] if d in state and not state[d]])
                    state[lab] = False
                elif all(state.get(d) for d in needs[lab]) and len(running) < jobs:
                    display.start(lab)
                    step_label, key = units[lab]
                    running[pool.submit(_run_in_worker, job, step_label, key, progress)] = lab
            if not running:
                continue  # only blocked units were left this round
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for fut in finished:
                lab = running.pop(fut)
                try:
                    out = fut.result()
                except Exception as exc:  # the unit's own error, one line in the record
                    display.fail(lab, _one_line(exc))
                    state[lab] = False
                    continue
                secs = float(out["seconds"]) + sum(times.get(p, 0.0) for p in parts.get(lab, []))
                times[lab], work[lab] = secs, _with_parts(out, parts.get(lab, []), work)
                display.done(lab, secs, work[lab])
                state[lab] = True
    return {lab: t for lab, t in times.items() if lab in plan.labels}


def check_jobs(jobs: int | None) -> int:
    """``--jobs``: a positive number of worker processes (``None``: this machine's CPU count)."""
    if jobs is None:
        return os.cpu_count() or 1
    return check_int("--jobs", jobs, low=1, what="a positive number of worker processes")


def check_executor(executor: str) -> str:
    if executor not in EXECUTORS:
        raise unknown("executor", executor, EXECUTORS)
    return executor
