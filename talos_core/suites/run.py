"""Suite runs: :func:`run_suite` (``talos suite NAME``) checks the request and has an executor
(:mod:`talos_core.suites.executors`) run the suite's step table (:mod:`talos_core.suites.steps`) into one store. It
keeps the suite record (``results/suite/<name>.json``: the settings' fingerprint, the time of every step, one session
per invocation), so an interrupted run resumes where it stopped (``--resume``); ``--stage train`` runs only the
fine-tuning steps and writes no record.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from talos_core.atomic import json_ready
from talos_core.errors import TalosError, check_int, check_seed, unknown
from talos_core.store import Store
from talos_core.suites.specs import SuiteSpec, get_suite, with_model
from talos_core.suites.steps import Step, logits_cache_dir, suite_steps

STAGES = ("all", "train")
"""What ``talos suite --stage`` runs: every step, or only the fine-tuning ones (see :func:`run_suite`)."""


def run_suite(name: str, store: Store | str, *, scale: str = "full", seed: int = 0, device: str = "auto",
              methods: Sequence[str] | None = None, posthoc: Sequence[str] | None = None,
              log: Callable[[str], None] = print, progress: bool = False, resume: bool = False,
              eval_precision: str | None = None, train_precision: str | None = None, stage: str = "all",
              model: str | None = None, executor: str = "local", address: str | None = None,
              gpus_per_task: float | None = None, cpus_per_task: float = 1.0, jobs: int | None = None,
              checkpoint_every: int = 0, part: Sequence[str] | None = None) -> dict:
    """Run every fine-tuning method, post-hoc method and analysis of suite ``name`` into ``store``.

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
    from talos_core.suites.executors import preflight

    preflight(executor, address, gpus_per_task, cpus_per_task, jobs)
    check_seed(seed)
    check_int("checkpoint_every", checkpoint_every, low=0, what="a whole number of steps ≥ 0 (0: no checkpoints)")
    if stage not in STAGES:
        raise unknown("suite stage", stage, STAGES)
    from talos_core.inference.precision import check_precision
    from talos_core.inference.precision import eval_precision as precision_block

    spec = with_model(get_suite(name), model)  # ``model``: talos suite NAME --model (see with_model)
    if scale not in spec.scales:
        raise unknown(f"scale of suite {name!r}", scale, spec.scales)
    precision = check_precision(eval_precision or spec.scales[scale].eval_precision)
    if train_precision is not None:
        from dataclasses import replace

        check_precision(train_precision, "training precision")
        pinned = replace(spec.scales[scale], train_precision=train_precision)
        spec = replace(spec, scales={**spec.scales, scale: pinned})
    with precision_block(precision):
        return _run_suite(spec, scale, store, seed=seed, device=device, methods=methods, posthoc=posthoc, log=log,
                          progress=progress, resume=resume or part is not None, stage=stage,
                          checkpoint_every=checkpoint_every, part=part,
                          executor=dict(executor=executor, address=address, gpus_per_task=gpus_per_task,
                                        cpus_per_task=cpus_per_task, jobs=jobs))


def _run_suite(spec: SuiteSpec, scale: str, store: Store | str, *, seed: int, device: str,
               methods: Sequence[str] | None, posthoc: Sequence[str] | None, log: Callable[[str], None],
               progress: bool, resume: bool, stage: str = "all", executor: dict | None = None,
               checkpoint_every: int = 0, part: Sequence[str] | None = None) -> dict:
    import torch

    import talos_core.suites.executors as executors
    from talos_core.inference.precision import current_precision, resolve_precision
    from talos_core.inference.runtime import resolve_device
    from talos_core.models import get_model_spec

    name = spec.name
    sc = spec.scales[scale]
    store = Store(store) if not isinstance(store, Store) else store
    store.check_folder()
    t_start = time.perf_counter()
    ft_methods = list(methods) if methods else list(spec.methods)
    ph_methods = list(spec.posthoc) if posthoc is None else list(posthoc)
    for m in ft_methods:
        if m not in spec.methods:
            raise unknown(f"method of suite {name!r}", m, spec.methods)
    for m in ph_methods:
        if m not in spec.posthoc:
            raise unknown(f"post-hoc method of suite {name!r}", m, spec.posthoc)
    steps = suite_steps(spec, scale, ft_methods, ph_methods, seed=seed, device=device,
                        checkpoint_every=checkpoint_every)
    if part is not None:
        check_part(part, ft_methods, ph_methods, stage)
    store.ensure()  # after every check: a bad suite request writes nothing
    run = dict(executor or {})
    kind = executors.check_executor(run.pop("executor", "local"))
    table = partial(suite_steps, spec, scale, tuple(ft_methods), tuple(ph_methods), seed=seed, device=device,
                    checkpoint_every=checkpoint_every)
    job = executors.SuiteJob(name, scale, spec.model, table, str(store.root.resolve()),
                     precision=current_precision(), threads=torch.get_num_threads(), device=device,
                     env={k: v for k, v in os.environ.items() if k.startswith("TALOS_")})
    if stage == "train":
        if kind != "local":
            return _train_stage_parallel(job, kind, [st for st in steps if st.trains], log=log, progress=progress,
                                         **run)
        return _train_stage(spec, scale, store, [st for st in steps if st.trains], log=log, progress=progress)

    requested = current_precision()
    precision = resolve_precision(resolve_device(device), family=get_model_spec(spec.model).family)
    fingerprint = json_ready({"model": spec.model, "tasks": list(spec.tasks), "control_task": spec.control_task,
                             "methods": ft_methods, "posthoc": ph_methods, "xi_pairs": spec.xi_pairs, "scale": scale,
                             "scale_settings": sc.settings_dict(), "seed": seed, "eval_precision": precision})
    command = (f"talos suite {name} --scale {scale} --seed {seed} --store {store.root}"
               + (f" --model {spec.model}" if spec.model != get_suite(name).model else "")
               + (f" --methods {','.join(ft_methods)}" if methods else "")
               + (f" --posthoc {','.join(ph_methods)}" if posthoc is not None else "")
               + (f" --eval-precision {requested}" if requested != sc.eval_precision else "")
               + (f" --train-precision {sc.train_precision}"
                  if sc.train_precision != get_suite(name).scales[scale].train_precision else ""))
    log(f"[{name}/{scale}] evaluation precision: {precision}"
        + (f" ({requested})" if requested != precision else ""))
    done: dict[str, float] = {}
    work: dict[str, dict[str, int]] = {}  # examples through the model per step (talos_core.inference.tally)
    sessions: list[dict] = []
    if resume and name in store.results("suite"):
        old = store.read_result("suite", name)
        if {k: old.get(k) for k in fingerprint} == fingerprint and not old.get("complete", True):
            done = dict(old.get("step_times_s") or {})
            work.update({k: v for k, v in (old.get("step_work") or {}).items() if k in done})
            sessions = list(old.get("sessions") or [])
            log(f"[{name}/{scale}] resuming: {len(done)} steps already done")
        elif old.get("complete", True) is False:
            log(f"[{name}/{scale}] not resuming: the stored partial run has other settings")
    timings: dict[str, float] = dict(done)
    session = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "device": str(resolve_device(device)),
               "torch_threads": torch.get_num_threads(), "eval_precision": precision, "steps_run": []}
    sessions.append(session)

    def write_meta(complete: bool) -> dict:
        meta = {**fingerprint, "command": command, "complete": complete, **({"failed": failed} if failed else {}),
                "wall_time_s": float(sum(timings.values())), "step_times_s": _in_order(timings, order),
                "step_work": _in_order(work, order), "sessions": sessions,
                "device": session["device"], "torch_threads": session["torch_threads"],
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        store.write_result("suite", name, meta)
        return meta

    if kind != "local":
        session["executor"] = kind
        if run.get("address"):
            session["address"] = run["address"]
    todo = [st for st in steps if not (st.label in done and not st.always)]
    later: dict[str, str] = {}  # steps another part runs: label -> why not this one
    if part is not None:
        todo, later = part_steps(todo, steps, set(done), part)
        session["part"] = list(part)
    failed: dict[str, str] = {}

    def changed(label: str) -> None:  # a step changed state: the record follows (per-step states in the session)
        state = display.states[label]
        if state["state"] == "done" and label in by_label:
            timings[label] = state["seconds"]
            if state.get("work") is not None:
                work[label] = state["work"]
            session["steps_run"].append(label)
        elif state["state"] in ("failed", "blocked"):
            failed[label] = state.get("error", "")
        write_meta(complete=False)

    order = [st.label for st in steps]
    by_label = set(order)
    display = executors.Progress(f"[{name}/{scale}]", [st.label for st in steps], log=log)
    session["steps"] = display.states
    for st in steps:
        if st.label in later:
            display.defer(st.label, later[st.label])
        elif st not in todo:
            display.skip(st.label, done[st.label])
    display.on_change = changed
    if kind == "ray":
        executors.run_ray(job, todo, display, progress=progress, **run)
    elif kind == "processes":
        executors.run_processes(job, todo, display, progress=progress, **run)
    else:
        executors.run_local(job, todo, store, display, progress=progress)
    session["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    session["wall_time_s"] = time.perf_counter() - t_start
    meta = write_meta(complete=not failed and not later)
    if meta["complete"]:  # nothing left to resume: the logits a cut-off step would have reused go
        shutil.rmtree(logits_cache_dir(store), ignore_errors=True)
    for line in display.summary() if kind != "local" or failed else ():
        log(line)
    if failed:
        raise TalosError(f"suite {name!r}: {len(failed)} step{'s' if len(failed) != 1 else ''} did not finish "
                         f"({'; '.join(f'{k}: {v}' for k, v in failed.items())}); the suite record "
                         f"{store.result_path('suite', name)} lists them; fix the cause and rerun with --resume")
    if later:
        rest = sorted({st.method for st in steps if st.label in later and not st.always})
        log(f"[{name}/{scale}] part {','.join(part or ())} done; {len(later)} step{'s' if len(later) != 1 else ''} "
            f"of other parts remain ({', '.join(rest)}): run them with --part, the store carried along")
        return meta
    log(f"[{name}/{scale}] finished in {meta['wall_time_s'] / 60:.1f} min")
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
