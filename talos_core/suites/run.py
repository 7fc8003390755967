"""Suite runs: :func:`run_suite` (``talos suite NAME``) checks the request and has an executor
(:mod:`talos_core.suites.executors`) run the suite's step table (:mod:`talos_core.suites.steps`) into one store. It
keeps the suite record (``results/suite/<name>.json``: the settings' fingerprint, the time of every step, one session
per invocation), so an interrupted run resumes where it stopped (``--resume``); ``--stage train`` runs only the
fine-tuning steps and writes no record. What to run and where is one :class:`SuiteRunOptions` (with its
:class:`ExecutorOptions`), checked when it is made.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import partial
from typing import Any

from talos_core.atomic import json_ready
from talos_core.errors import TalosError, check_int, check_seed, unknown
from talos_core.provenance import code_version
from talos_core.store import Store
from talos_core.suites.specs import SuiteSpec, get_suite, with_model
from talos_core.suites.steps import Step, logits_cache_dir, suite_steps

STAGES = ("all", "train")
"""What ``talos suite --stage`` runs: every step, or only the fine-tuning ones (see :func:`run_suite`)."""


@dataclass(frozen=True)
class ExecutorOptions:
    """Who runs the steps (``talos suite --executor``; see :mod:`talos_core.suites.executors`): ``"local"`` (in order,
    in this process), ``"processes"`` (``jobs`` worker processes of this machine; ``None``: its CPU count) or
    ``"ray"`` (Ray tasks on the Ray instance at ``address``, each with ``cpus_per_task`` CPUs and ``gpus_per_task``
    GPUs). Checked when made, before anything is written: a known executor, positive resources, Ray installed and
    its address reachable (:func:`~talos_core.suites.executors.preflight`)."""

    executor: str = "local"
    address: str | None = None
    gpus_per_task: float | None = None
    cpus_per_task: float = 1.0
    jobs: int | None = None

    def __post_init__(self) -> None:
        from talos_core.suites.executors import preflight

        preflight(self.executor, self.address, self.gpus_per_task, self.cpus_per_task, self.jobs)

    def settings(self) -> dict[str, Any]:
        """The keyword arguments of :func:`~talos_core.suites.executors.run_ray` and ``run_processes``."""
        return {"address": self.address, "gpus_per_task": self.gpus_per_task, "cpus_per_task": self.cpus_per_task,
                "jobs": self.jobs}


@dataclass(frozen=True)
class SuiteRunOptions:
    """What one ``talos suite NAME`` invocation runs (see :func:`run_suite` for each setting), checked when made: the
    seed, ``checkpoint_every`` ≥ 0, ``stage`` one of :data:`STAGES` and the executor (:class:`ExecutorOptions`).
    The suite's own checks (scale, methods, precisions, ``part``) come when :func:`run_suite` knows the suite.

    >>> SuiteRunOptions.of(scale="mini", methods=["talos"], jobs=2, executor="processes").executor.jobs
    2
    >>> SuiteRunOptions(stage="eval")
    Traceback (most recent call last):
    ...
    talos_core.errors.TalosError: unknown suite stage 'eval'; choose one of: all, train
    """

    scale: str = "full"
    seed: int = 0
    device: str = "auto"
    methods: Sequence[str] | None = None  # fine-tuning methods (None or empty: the suite's)
    posthoc: Sequence[str] | None = None  # post-hoc methods (None: the suite's; empty: none)
    resume: bool = False
    eval_precision: str | None = None  # None: the scale's
    train_precision: str | None = None  # None: the scale's
    stage: str = "all"
    model: str | None = None  # None: the suite's (see with_model)
    checkpoint_every: int = 0
    part: Sequence[str] | None = None
    executor: ExecutorOptions = field(default_factory=ExecutorOptions)

    def __post_init__(self) -> None:
        if not isinstance(self.executor, ExecutorOptions):
            raise TypeError(f"executor must be an ExecutorOptions, got {self.executor!r} (SuiteRunOptions.of takes "
                            f"executor='ray' and its settings side by side)")
        for name in ("methods", "posthoc", "part"):  # tuples: the options stay as made
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(getattr(self, name)))
        check_seed(self.seed)
        check_int("checkpoint_every", self.checkpoint_every, low=0,
                  what="a whole number of steps ≥ 0 (0: no checkpoints)")
        if self.stage not in STAGES:
            raise unknown("suite stage", self.stage, STAGES)

    @classmethod
    def of(cls, **settings: Any) -> SuiteRunOptions:
        """The options from :func:`run_suite`'s keyword settings: fields of this class and of
        :class:`ExecutorOptions` (``executor="ray"``, ``address=...``) side by side."""
        runner = {f.name: settings.pop(f.name) for f in fields(ExecutorOptions) if f.name in settings}
        return cls(**settings, executor=ExecutorOptions(**runner))

    @property
    def resumes(self) -> bool:
        """Whether finished steps of an interrupted run with the same settings are skipped (``part`` implies it)."""
        return self.resume or self.part is not None


def run_suite(name: str, store: Store | str, options: SuiteRunOptions | None = None, *,
              log: Callable[[str], None] = print, progress: bool = False, **settings: Any) -> dict:
    """Run every fine-tuning method, post-hoc method and analysis of suite ``name`` into ``store``.

    ``options`` says what to run and where (:class:`SuiteRunOptions`); without it, the keyword ``settings`` make
    it (:meth:`SuiteRunOptions.of`: ``scale="mini", methods=["talos"], executor="ray", ...``). ``log`` takes each
    line of progress; ``progress`` shows progress bars.

    Evaluation runs at the scale's ``eval_precision`` (``eval_precision`` overrides it; see
    :mod:`talos_core.inference.precision`); the precision it resolved to is part of the suite record.
    Fine-tuning uses the scale's ``train_precision`` (``train_precision`` overrides it), which is part of
    every run's request.

    The suite's record (``results/suite/<name>.json``) is rewritten after every step with
    ``complete: false`` and the steps done so far; ``resume=True`` (``talos suite ... --resume``)
    skips the steps an interrupted run with the *same* settings already finished (runs are reused
    from the store in any case). ``wall_time_s`` is the sum of all step times over all sessions.

    ``stage="train"`` runs only the steps that fine-tune (learning curves, selections, the first
    ``single`` of every row) and writes no suite record: several such processes, one per method
    (``methods=[m]``), can share one store and one GPU; the suite run afterwards (``stage="all"``)
    finds every run and only evaluates. Results several of them update are written under
    :meth:`~talos_core.store.Store.locked`.

    ``executor="ray"`` runs the steps as Ray tasks on the Ray instance at ``address`` (see
    :mod:`talos_core.suites.executors`: dependencies, resources, retries, the shared-filesystem requirement);
    ``"processes"`` runs the same units on ``jobs`` worker processes of this machine (no Ray); ``"local"``
    (default) runs them in order in this process. Each can resume the others' runs.

    ``checkpoint_every=N`` (``--checkpoint-every``) makes every fine-tuning run save a resumable checkpoint every N
    steps (``store.checkpoint_dir(run_id)``): a suite cut off mid-run continues that run from its last checkpoint
    instead of from step 0, with the same task vector. It changes no run id, result or fingerprint.

    ``part=[names]`` (``--part``) runs one part of the suite: the steps of these fine-tuning and post-hoc methods
    (and the comparison), not yet done, whose runs and choices come from steps done before or run now
    (:func:`part_steps`). The record keeps the whole suite's fingerprint and stays ``complete: false`` until every
    step is done, so several calls — on different machines, the store carried between them — complete one suite,
    each resuming the last (``part`` implies ``resume``). Steps that read the runs of methods of two parts (e.g.
    TaLoS vs LoTA masks) run only in a part that names both. A later part never needs an earlier part's task
    vectors, so the store can travel without them (``talos export``: results and run manifests).
    """
    if options is None:
        options = SuiteRunOptions.of(**settings)
    elif settings:
        raise TypeError(f"run_suite takes options or keyword settings, not both (got {', '.join(settings)})")
    from talos_core.inference.precision import eval_precision as precision_block

    spec, precision = _requested_spec(name, options)
    with precision_block(precision):
        return _run_suite(spec, store, options, log=log, progress=progress)


def _requested_spec(name: str, opts: SuiteRunOptions) -> tuple[SuiteSpec, str]:
    """Suite ``name`` as ``opts`` asks for it (its model, its scale's training precision pinned), and the evaluation
    precision asked for; an unknown suite, scale or precision is one :class:`TalosError`."""
    from talos_core.inference.precision import check_precision

    spec = with_model(get_suite(name), opts.model)  # ``model``: talos suite NAME --model (see with_model)
    if opts.scale not in spec.scales:
        raise unknown(f"scale of suite {name!r}", opts.scale, spec.scales)
    precision = check_precision(opts.eval_precision or spec.scales[opts.scale].eval_precision)
    if opts.train_precision is not None:
        check_precision(opts.train_precision, "training precision")
        pinned = replace(spec.scales[opts.scale], train_precision=opts.train_precision)
        spec = replace(spec, scales={**spec.scales, opts.scale: pinned})
    return spec, precision


def _chosen_methods(spec: SuiteSpec, opts: SuiteRunOptions) -> tuple[list[str], list[str]]:
    """The fine-tuning and post-hoc methods ``opts`` runs, each one of the suite's."""
    ft_methods = list(opts.methods) if opts.methods else list(spec.methods)
    ph_methods = list(spec.posthoc) if opts.posthoc is None else list(opts.posthoc)
    for m in ft_methods:
        if m not in spec.methods:
            raise unknown(f"method of suite {spec.name!r}", m, spec.methods)
    for m in ph_methods:
        if m not in spec.posthoc:
            raise unknown(f"post-hoc method of suite {spec.name!r}", m, spec.posthoc)
    return ft_methods, ph_methods


def _run_suite(spec: SuiteSpec, store: Store | str, opts: SuiteRunOptions, *, log: Callable[[str], None],
               progress: bool) -> dict:
    """:func:`run_suite` once the suite is known, inside its evaluation-precision block."""
    import torch

    import talos_core.suites.executors as executors
    from talos_core.inference.precision import current_precision

    store = Store(store) if not isinstance(store, Store) else store
    store.check_folder()
    t_start = time.perf_counter()
    ft_methods, ph_methods = _chosen_methods(spec, opts)
    steps = suite_steps(spec, opts.scale, ft_methods, ph_methods, seed=opts.seed, device=opts.device,
                        checkpoint_every=opts.checkpoint_every)
    if opts.part is not None:
        check_part(opts.part, ft_methods, ph_methods, opts.stage)
    store.ensure()  # after every check: a bad suite request writes nothing
    table = partial(suite_steps, spec, opts.scale, tuple(ft_methods), tuple(ph_methods), seed=opts.seed,
                    device=opts.device, checkpoint_every=opts.checkpoint_every)
    job = executors.SuiteJob(spec.name, opts.scale, spec.model, table, str(store.root.resolve()),
                             precision=current_precision(), threads=torch.get_num_threads(), device=opts.device,
                             env={k: v for k, v in os.environ.items() if k.startswith("TALOS_")})
    kind = opts.executor.executor
    if opts.stage == "train":
        trains = [st for st in steps if st.trains]
        if kind != "local":
            return _train_stage_parallel(job, kind, trains, log=log, progress=progress, **opts.executor.settings())
        return _train_stage(spec, opts.scale, store, trains, log=log, progress=progress)
    record = _open_record(spec, store, opts, ft_methods, ph_methods, [st.label for st in steps], log=log)
    todo, later = _todo(steps, record.done, opts.part)
    if opts.part is not None:
        record.session["part"] = list(opts.part)
    display = _progress_display(f"[{spec.name}/{opts.scale}]", steps, todo, later, record, log=log)
    if kind == "ray":
        executors.run_ray(job, todo, display, progress=progress, **opts.executor.settings())
    elif kind == "processes":
        executors.run_processes(job, todo, display, progress=progress, **opts.executor.settings())
    else:
        executors.run_local(job, todo, store, display, progress=progress)
    record.session["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    record.session["wall_time_s"] = time.perf_counter() - t_start
    return _close_record(spec, opts, steps, record, display, later, log=log)


@dataclass
class _SuiteRecord:
    """The suite record being written (``results/suite/<name>.json``): the settings' fingerprint, the command that
    gives them, the time and work of every step done (resumed ones included) and one session per invocation (this
    one last)."""

    store: Store
    name: str
    fingerprint: dict[str, Any]
    command: str
    order: list[str]  # the step table's labels
    done: dict[str, float]  # steps an earlier session finished: label -> seconds
    work: dict[str, dict[str, int]]  # examples through the model per step (talos_core.inference.tally)
    sessions: list[dict]
    timings: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    t0: float = field(default_factory=time.perf_counter)  # this session's start (its elapsed_s)

    def __post_init__(self) -> None:
        self.timings = {**self.done, **self.timings}

    @property
    def session(self) -> dict:
        return self.sessions[-1]

    def write(self, complete: bool) -> dict:
        """Write the record (``complete``: every step done, nothing failed) and return it."""
        meta = {**self.fingerprint, "command": self.command, "complete": complete,
                **({"failed": self.failed} if self.failed else {}),
                "wall_time_s": float(sum(self.timings.values())), "step_times_s": _in_order(self.timings, self.order),
                "step_work": _in_order(self.work, self.order), "sessions": self.sessions,
                "device": self.session["device"], "torch_threads": self.session["torch_threads"],
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        self.store.write_result("suite", self.name, meta)
        return meta

    def step_changed(self, states: Mapping[str, dict], label: str) -> None:
        """A step changed state (``states[label]``, the progress display's): the record follows."""
        state = states[label]
        # how long this session has run, as of its latest step event: a session cut off (its machine lost, its
        # processes killed) never writes its wall time, and this says how far it got
        self.session["elapsed_s"] = round(time.perf_counter() - self.t0, 3)
        if state["state"] == "done" and label in self.order:
            self.timings[label] = state["seconds"]
            if state.get("work") is not None:
                self.work[label] = state["work"]
            self.session["steps_run"].append(label)
        elif state["state"] in ("failed", "blocked"):
            self.failed[label] = state.get("error", "")
        self.write(complete=False)


def _open_record(spec: SuiteSpec, store: Store, opts: SuiteRunOptions, ft_methods: Sequence[str],
                 ph_methods: Sequence[str], order: list[str], *, log: Callable[[str], None]) -> _SuiteRecord:
    """The suite record of this invocation: its fingerprint and command, what an interrupted run with the same
    settings finished (when ``opts`` resumes), and a new session."""
    import torch

    from talos_core.inference.precision import current_precision, resolve_precision
    from talos_core.inference.runtime import resolve_device
    from talos_core.models import get_model_spec

    name, scale = spec.name, opts.scale
    requested = current_precision()
    precision = resolve_precision(resolve_device(opts.device), family=get_model_spec(spec.model).family)
    fingerprint = json_ready({"model": spec.model, "tasks": list(spec.tasks), "control_task": spec.control_task,
                              "methods": list(ft_methods), "posthoc": list(ph_methods), "xi_pairs": spec.xi_pairs,
                              "scale": scale, "scale_settings": spec.scales[scale].settings_dict(),
                              "seed": opts.seed, "eval_precision": precision})
    command = _command(spec, store, opts, ft_methods, ph_methods, requested)
    log(f"[{name}/{scale}] evaluation precision: {precision}" + (f" ({requested})" if requested != precision else ""))
    done, work, sessions = _resumed(store, name, fingerprint, log=log, prefix=f"[{name}/{scale}]") \
        if opts.resumes else ({}, {}, [])
    session = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "device": str(resolve_device(opts.device)),
               "torch_threads": torch.get_num_threads(), "eval_precision": precision, "code": code_version(),
               "steps_run": []}
    if opts.executor.executor != "local":
        session["executor"] = opts.executor.executor
        if opts.executor.address:
            session["address"] = opts.executor.address
    return _SuiteRecord(store, name, fingerprint, command, order, done, work, [*sessions, session])


def _command(spec: SuiteSpec, store: Store, opts: SuiteRunOptions, ft_methods: Sequence[str],
             ph_methods: Sequence[str], requested: str | None) -> str:
    """The ``talos suite`` command line that asks for these settings (the record's ``command``)."""
    shipped, scale = get_suite(spec.name), opts.scale
    sc = spec.scales[scale]
    return (f"talos suite {spec.name} --scale {scale} --seed {opts.seed} --store {store.root}"
            + (f" --model {spec.model}" if spec.model != shipped.model else "")
            + (f" --methods {','.join(ft_methods)}" if opts.methods else "")
            + (f" --posthoc {','.join(ph_methods)}" if opts.posthoc is not None else "")
            + (f" --eval-precision {requested}" if requested != sc.eval_precision else "")
            + (f" --train-precision {sc.train_precision}"
               if sc.train_precision != shipped.scales[scale].train_precision else ""))


def _resumed(store: Store, name: str, fingerprint: Mapping[str, Any], *, log: Callable[[str], None],
             prefix: str) -> tuple[dict[str, float], dict[str, dict[str, int]], list[dict]]:
    """``(step times, step work, sessions)`` of the stored suite record when it is an interrupted run with the same
    fingerprint, else empty."""
    if name not in store.results("suite"):
        return {}, {}, []
    old = store.read_result("suite", name)
    if {k: old.get(k) for k in fingerprint} == fingerprint and not old.get("complete", True):
        done = dict(old.get("step_times_s") or {})
        work = {k: v for k, v in (old.get("step_work") or {}).items() if k in done}
        log(f"{prefix} resuming: {len(done)} steps already done")
        return done, work, list(old.get("sessions") or [])
    if old.get("complete", True) is False:
        log(f"{prefix} not resuming: the stored partial run has other settings")
    return {}, {}, []


def _todo(steps: Sequence[Step], done: Mapping[str, float],
          part: Sequence[str] | None) -> tuple[list[Step], dict[str, str]]:
    """The steps this invocation runs (not done before, or run every time), and ``{label: why not}`` of the steps
    another part runs (:func:`part_steps`)."""
    todo = [st for st in steps if not (st.label in done and not st.always)]
    if part is None:
        return todo, {}
    return part_steps(todo, steps, set(done), part)


def _progress_display(prefix: str, steps: Sequence[Step], todo: Sequence[Step], later: Mapping[str, str],
                      record: _SuiteRecord, *, log: Callable[[str], None]):
    """The progress display of the run: the steps of other parts deferred, those done before skipped; every later
    change rewrites ``record``."""
    from talos_core.suites.executors import Progress

    display = Progress(prefix, [st.label for st in steps], log=log)
    record.session["steps"] = display.states
    for st in steps:
        if st.label in later:
            display.defer(st.label, later[st.label])
        elif st not in todo:
            display.skip(st.label, record.done[st.label])
    display.on_change = partial(record.step_changed, display.states)
    return display


def _close_record(spec: SuiteSpec, opts: SuiteRunOptions, steps: Sequence[Step], record: _SuiteRecord, display,
                  later: Mapping[str, str], *, log: Callable[[str], None]) -> dict:
    """Write the final record, report the run and return the record; failed steps are one :class:`TalosError`."""
    name, prefix = spec.name, f"[{spec.name}/{opts.scale}]"
    meta = record.write(complete=not record.failed and not later)
    if meta["complete"]:  # nothing left to resume: the logits a cut-off step would have reused go
        shutil.rmtree(logits_cache_dir(record.store), ignore_errors=True)
    for line in display.summary() if opts.executor.executor != "local" or record.failed else ():
        log(line)
    failed = record.failed
    if failed:
        raise TalosError(f"suite {name!r}: {len(failed)} step{'s' if len(failed) != 1 else ''} did not finish "
                         f"({'; '.join(f'{k}: {v}' for k, v in failed.items())}); the suite record "
                         f"{record.store.result_path('suite', name)} lists them; fix the cause and rerun with --resume")
    if later:
        rest = sorted({st.method for st in steps if st.label in later and not st.always})
        log(f"{prefix} part {','.join(opts.part or ())} done; {len(later)} step{'s' if len(later) != 1 else ''} "
            f"of other parts remain ({', '.join(rest)}): run them with --part, the store carried along")
        return meta
    log(f"{prefix} finished in {meta['wall_time_s'] / 60:.1f} min")
    return meta


def check_part(part: Sequence[str], ft_methods: Sequence[str], ph_methods: Sequence[str], stage: str) -> None:
    """``part`` when it names at least one of the run's fine-tuning or post-hoc methods and nothing else, with
    ``stage="all"``; else one :class:`TalosError` sentence."""
    allowed = [*ft_methods, *ph_methods]
    if stage != "all":
        raise TalosError("--part goes with the whole suite (--stage all): a part evaluates what it trains; leave "
                         "--stage out")
    if not part:
        raise TalosError(f"--part needs at least one method; choose among: {', '.join(allowed)}")
    for m in part:
        if m not in allowed:
            raise unknown("method of this suite run (--part)", m, allowed)


def part_steps(todo: Sequence[Step], steps: Sequence[Step], done: set[str],
               part: Sequence[str]) -> tuple[list[Step], dict[str, str]]:
    """The steps of ``todo`` that a call running ``part`` runs, and ``{label: why not}`` for the others.

    A step belongs to the method it is listed under (a post-hoc step to its post-hoc method; the comparison, which
    gathers the stored results, to every part), and runs in a part that names its method and every fine-tuning
    method whose runs it reads (:func:`~talos_core.suites.executors.step_methods`: TaLoS vs LoTA masks needs
    both, a post-hoc method its base method), so a part never fine-tunes another part's runs a second time nor
    needs the task vectors an earlier part made. A step also waits while a step whose runs or choices it reads
    (:func:`~talos_core.suites.executors.step_graph` with ``results=False``) is neither done nor run now.

    >>> from talos_core.suites import get_suite, suite_steps
    >>> steps = suite_steps(get_suite("text"), "mini", ["talos", "lota", "nonlinear"], ["ties"], seed=0,
    ...                     device="cpu")
    >>> run, later = part_steps(steps, steps, set(), ["talos", "ties"])
    >>> [st.label for st in run][:2], later["talos vs lota masks"]
    (['talos: fine-tune + single', 'talos: efficiency'], 'reads lota runs (another part)')
    >>> later["ties: post-hoc addition + negation"]
    'reads nonlinear runs (another part)'
    >>> later["lota: addition"], run[-1].label
    ('another part (lota)', 'comparison')
    """
    from talos_core.suites.executors import step_graph, step_methods

    needs = step_graph(steps, results=False)
    chosen, later = set(), {}
    for st in todo:
        outside = sorted(step_methods(st) - set(part))
        if st.always:
            chosen.add(st.label)
        elif st.method not in part:
            later[st.label] = f"another part ({st.method})"
        elif outside:
            later[st.label] = f"reads {', '.join(outside)} runs (another part)"
        else:
            chosen.add(st.label)
    changed = True
    while changed:  # a step waiting for a step no part of this call runs waits too
        changed = False
        for st in todo:
            if st.label not in chosen or st.always:
                continue
            missing = [d for d in needs[st.label] if d not in done and d not in chosen]
            if missing:
                chosen.discard(st.label)
                later[st.label] = f"needs {', '.join(missing)} (another part)"
                changed = True
    return [st for st in todo if st.label in chosen], later


def _train_stage(spec: SuiteSpec, scale: str, store: Store, steps: Sequence[Step], *, log: Callable[[str], None],
                 progress: bool) -> dict:
    """``talos suite --stage train``: the fine-tuning steps only, no suite record (see :func:`run_suite`).

    Several processes started with the same command share the work: each fine-tunes the runs of a step that no
    other process is fine-tuning (:func:`talos_core.suites.executors.fine_tune_parts`) before running the step."""
    from talos_core.suites.executors import fine_tune_parts

    times: dict[str, float] = {}
    for st in steps:
        t0 = time.perf_counter()
        log(f"[{spec.name}/{scale}] {st.label} (train stage) ...")
        fine_tune_parts(st, store, spec.model, progress=progress, log=log)
        st.run(store, spec.model, spec.name, progress=progress)
        times[st.label] = time.perf_counter() - t0
        log(f"[{spec.name}/{scale}] {st.label} done in {times[st.label]:.1f}s")
    return {"stage": "train", "step_times_s": times, "wall_time_s": float(sum(times.values()))}


def _in_order(times: dict[str, float], order: Sequence[str]) -> dict[str, float]:
    """``times`` with the step table's labels first, in table order (executors finish steps in any order)."""
    return {**{lab: times[lab] for lab in order if lab in times}, **times}


def _train_stage_parallel(job, kind: str, steps: Sequence[Step], *, log: Callable[[str], None], progress: bool,
                          **run: Any) -> dict:
    """``talos suite --stage train --executor ray|processes``: the fine-tuning steps (each run its own task), no
    suite record."""
    from talos_core.suites.executors import Progress, run_processes, run_ray

    display = Progress(f"[{job.suite}/{job.scale}]", [st.label for st in steps], log=log)
    times = (run_ray if kind == "ray" else run_processes)(job, steps, display, progress=progress, **run)
    for line in display.summary():
        log(line)
    if display.failures():
        raise TalosError(f"suite {job.suite!r} train stage: {len(display.failures())} step(s) did not finish "
                         f"({'; '.join(f'{k}: {v}' for k, v in display.failures().items())})")
    return {"stage": "train", "step_times_s": times, "wall_time_s": float(sum(times.values()))}
