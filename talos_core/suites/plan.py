"""``talos suite NAME --plan``: what a suite run would do, without downloading or training anything.

:func:`plan_suite` is a pure function of a suite's step table (:func:`talos_core.suites.steps.suite_steps`) and a
listing of a store (:class:`StoreListing`: which runs it holds, which steps its suite record has done, and the
results earlier steps wrote that later ones read — per-task selections, learning-curve budgets). It returns a
:class:`Plan`: every step with the fine-tuning runs it uses (their run ids, :meth:`FinetuneRequest.run_id`), the
runs it is the first to need (so it trains them), the steps it ``needs`` (the steps that train its runs, the
selection or learning-curve step whose result it reads, and for the comparison every step before it), which runs
and steps the store already has, and an estimated cost from the measured table :mod:`talos_core.suites.costs`.

Runs whose identity depends on a result not in the store yet are still counted: a run chosen by a selection step is
one of that step's candidates (no new run); a run whose step budget a learning-curve step will choose is a new run
of unknown id, counted once per (method, task, settings), its cost unknown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from talos_core.errors import TalosError
from talos_core.store import Store


@dataclass(frozen=True)
class StoreListing:
    """What a plan needs to know of a store: its path (``None``: no store), the step labels its suite record has
    done with the same settings (what ``--resume`` skips) and what those steps pushed through the model (the record's
    ``step_work``: :func:`cache_shares`), and the store itself for run look-ups and for the results later steps read
    (``None``: an empty store)."""

    root: str | None = None
    done_steps: frozenset[str] = frozenset()
    complete: bool = False
    store: Store | None = None
    step_work: Mapping[str, Any] = field(default_factory=dict)

    def has_run(self, model: str, task: str, method: str, overrides: Mapping[str, Any], *,
                weights: bool = True) -> bool:
        """Whether a run of this request (same run id, or a compatible one ``find_run`` reuses) is in the store
        (``weights``: with its task vector; a learning curve reads the manifest alone)."""
        return self.find(model, task, method, overrides, weights=weights) is not None

    def find(self, model: str, task: str, method: str, overrides: Mapping[str, Any], *, weights: bool = True):
        """The store's run of this request (:meth:`has_run`), or ``None``."""
        if self.store is None:
            return None
        from talos_core.evaluation.runs import find_run

        return find_run(self.store, model, task, method, overrides, weights=weights)


@dataclass(frozen=True)
class PlannedRun:
    """One fine-tuning run: ``key`` is its run id (or, for a budget a learning-curve step has not chosen yet,
    ``"<method>/<task>: steps from <step>"``)."""

    key: str
    model: str
    task: str
    method: str
    steps: int | None  # iterations (None: chosen by a learning-curve step later; with early stopping: the maximum)
    batch_size: int | None
    early_stopping: bool = False
    calibrates: bool = False
    calib_samples: int | None = None
    in_store: bool = False
    max_steps: int | None = None  # a budget chosen later: its largest value (the scale's ``curve_steps``)
    sparsity: float | None = None  # sparse methods' (the α grid's stretch)
    eval_every: int = 0  # validation accuracy every N steps (learning curves, early stopping)
    calib_rounds: int = 0  # calibration rounds (TaLoS: Fisher rounds; LoTA: its dense iterations, see lota_steps)
    calib_batch: int = 0
    lota_steps: int = 0  # LoTA's dense calibration iterations when fixed by an option (else rounds × batches)
    eval_mode: str = "nonlinear"
    evals: int | None = None  # a stored run: the validation evaluations its curve recorded (early stopping: fewer)


@dataclass(frozen=True)
class PlannedStep:
    """One step of the suite: ``runs`` it uses (run keys), ``trains`` (the runs it is the first to need),
    ``chosen_by`` (the selection step whose per-task choice it evaluates, if any), ``needs`` (labels of the
    steps it depends on), ``done`` (in the store's suite record)."""

    index: int
    label: str
    protocol: str
    method: str
    tasks: tuple[str, ...]
    runs: tuple[str, ...]
    trains: tuple[str, ...]
    needs: tuple[str, ...]
    chosen_by: str | None = None
    done: bool = False
    trains_any: bool = False  # a fine-tuning step (Step.trains: ``--stage train`` runs it)


@dataclass
class Plan:
    suite: str
    model: str
    scale: str
    device: str
    store: str | None
    steps: list[PlannedStep]
    runs: dict[str, PlannedRun]
    cost: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    kept: list[dict] = field(default_factory=list)  # Store.kept_work: what interrupted runs left for --resume
    # the evaluation work of the steps to do (talos_core.suites.workload): {"steps": {label: {kind: examples}},
    # "total", "theta0", "lota_calibration_iterations"}, or {"why": ...} when the data sizes are not known here
    work: dict = field(default_factory=dict)
    device_note: str = ""  # how the cost device was chosen (``--plan``: detected from this machine's CPU)
    workers: int = 2  # the worker processes the wall time is estimated for (``--jobs``)

    @property
    def edges(self) -> list[tuple[str, str]]:
        """``(step, needed step)`` pairs: the dependency graph."""
        return [(s.label, n) for s in self.steps for n in s.needs]

    def to_train(self) -> list[PlannedRun]:
        """The runs still to fine-tune: not in the store with their weights, and read by a step still to do. A
        finished step's runs kept as manifests only (a store restored from its JSON snapshot) are not trained
        again for that step; a step to do trains again the ones it reads."""
        read = {k for s in self.steps if not s.done for k in s.runs}
        return [r for r in self.runs.values() if not r.in_store and r.key in read]

    def counts(self) -> dict[str, int]:
        new = self.to_train()
        return {"steps": len(self.steps), "steps_done": sum(s.done for s in self.steps),
                "finetune_runs": len(self.runs), "finetune_runs_in_store": len(self.runs) - len(new),
                "evaluations": sum(1 for s in self.steps if s.protocol not in _TRAIN_ONLY),
                "evaluations_done": sum(1 for s in self.steps if s.protocol not in _TRAIN_ONLY and s.done),
                "iterations_to_run": sum(r.steps or 0 for r in new)}

    def text(self) -> str:
        """The plan as ``talos suite NAME --plan`` prints it."""
        c = self.counts()
        lines = [f"plan of suite {self.suite!r} (scale {self.scale}, model {self.model}) — nothing is downloaded or "
                 f"trained; store: {self.store or 'none'}"]
        if self.settings:
            lines.append("fine-tuning: " + ", ".join(f"{k} {v}" for k, v in self.settings.items()))
        lines += ["", "steps (needs: the steps whose runs or results it uses):"]
        num = {s.label: s.index for s in self.steps}
        width = max((len(s.label) for s in self.steps), default=0)
        for s in self.steps:
            state = "done" if s.done else "to do"
            new = f", trains {len(s.trains)} new" if s.trains else ""
            have = sum(self.runs[k].in_store for k in s.trains)
            if s.trains and have:
                new += f" ({have} in store)"
            runs = f"{len(s.runs)} runs{new}" if s.runs else ("per-task choice of its selection" if s.chosen_by
                                                               else "no runs")
            if s.chosen_by and s.runs:
                runs += f" (chosen by #{num[s.chosen_by]})"
            needs = ", ".join(f"#{num[n]}" for n in s.needs) if len(s.needs) <= 8 else f"#1–#{s.index - 1}"
            lines.append(f"  #{s.index:<3} {s.label:<{width}}  {runs}; needs {needs or '-'}; {state}")
        lines += ["", f"fine-tuning runs: {c['finetune_runs']} ({c['finetune_runs_in_store']} in the store, "
                      f"{c['finetune_runs'] - c['finetune_runs_in_store']} to train: "
                      f"{c['iterations_to_run']:,} iterations"
                      + (", a maximum: early stopping ends runs sooner" if any(r.early_stopping for r in
                                                                                 self.runs.values()) else "")
                      + ")",
                  f"evaluation steps: {c['evaluations']} ({c['evaluations_done']} done in the store); steps in all: "
                  f"{c['steps']} ({c['steps_done']} done)"]
        if self.kept:
            lines += ["", "kept from interrupted runs (--resume continues from here):"]
            lines += [f"  {'run' if k['kind'] == 'run' else k['kind']} {k['name']}: {k['kept']}" for k in self.kept]
        lines += ["", *self.cost_lines()]
        return "\n".join(lines)

    def cost_lines(self) -> list[str]:
        cost = self.cost
        out = [f"estimated cost on {cost['device_name']} (device '{self.device}'"
               + (f"; {self.device_note}" if self.device_note else "") + "), from the measured table "
               "talos_core/suites/plan_costs.json (seconds per training iteration by model, method, device and batch "
               "size; not a measurement of this plan):"]
        if cost["groups"]:
            for g in cost["groups"]:
                if g.get("max_hours") is not None:
                    out.append(f"  {g['method']:<11} {g['runs']:>4} runs × ≤ {g['max_iterations']:>7,} iterations × "
                               f"{g['s_per_iter']:.3f} s ≤ {g['max_hours']:.2f} device-hours (budget chosen by its "
                               f"learning curve; at most the curve's length)  [{g['ref']}]")
                elif g["s_per_iter"] is None:
                    out.append(f"  {g['method']:<11} {g['runs']:>4} runs × {g['iterations']:>9,} iterations: "
                               f"not measured ({g['why']})")
                else:
                    out.append(f"  {g['method']:<11} {g['runs']:>4} runs × {g['iterations']:>9,} iterations × "
                               f"{g['s_per_iter']:.3f} s = {g['hours']:.2f} device-hours  [{g['ref']}]")
        else:
            out.append("  nothing to train")
        bound = cost.get("max_hours") or 0.0
        out.append(f"  training, measured cells: {cost['hours']:.2f} device-hours"
                   + (f" + at most {bound:.2f} for the runs whose budget a learning curve chooses" if bound else "")
                   + (f"; {cost['unmeasured_runs']} runs have no measured cell and are not included"
                      if cost["unmeasured_runs"] else ""))
        ev = cost.get("evaluation")
        if ev is None:
            out.append(f"  evaluation not included: {self.work.get('why') or 'no data sizes'}")
            return out
        out.append("  evaluation: examples through the model counted from the step table (talos_core/suites/"
                   "workload.py; validation during training and TaLoS calibration included) × measured seconds per "
                   "example:")
        names = {"forward": "forward (edited model)", "base": "base f(x, θ0)", "jvp": "JVP at θ0",
                 "grad": "calibration gradient", "forward0": "θ0 (zero-shot)",
                 "lota-calibration": "LoTA dense calibration"}
        for r in ev["rows"]:
            unit = "iterations" if r["kind"] == "lota-calibration" else "examples"
            what = f"  {names[r['kind']]:<24} {r['examples']:>11,} {unit}"
            out.append(f"  {what} × {r['s_per_example']:.4f} s = {r['hours']:.2f} device-hours  [{r['ref']}]"
                       if r["hours"] is not None else f"  {what}: not measured for {self.model} on '{self.device}'")
        early = any(r.early_stopping for r in self.runs.values())
        why = ["runs that stop early evaluate less"] if early else []
        why.append("the logits cache serves an edit a step evaluated before")
        out.append(f"  evaluation, measured cells: {ev['hours']:.2f} device-hours (a bound: {', and '.join(why)})"
                   + (f"; not measured: {', '.join(ev['unmeasured'])}" if ev["unmeasured"] else ""))
        out.append(f"  in all: {cost['hours'] + ev['hours']:.2f} device-hours"
                   + (f" + at most {bound:.2f} for budgets a learning curve chooses" if bound else ""))
        sched = cost.get("schedule")
        if sched:
            out.append(f"  wall time with {sched['workers']} workers (--executor processes --jobs {sched['workers']}; "
                       f"the step graph's units scheduled in table order, each priced as above): "
                       f"{sched['wall_hours']:.1f} h for {sched['worker_hours']:.1f} worker-hours"
                       + (" (a bound: runs that stop early end sooner)" if early else "")
                       + f"; its longest chain of units: {sched['critical_hours']:.1f} h")
        proj = cost.get("projected")
        if proj:
            def runs(n: int) -> str:
                return f"{n} run" + ("" if n == 1 else "s")

            said = ", ".join(f"{m} {v['share']:.2f} (" + (f"median of {runs(v['runs'])} of its own" if v["own"] else
                                                           f"none of its own: every method's median, {runs(v['runs'])}")
                             + ")" for m, v in proj["shares"].items())
            served = ", ".join(f"{p} {v['share']:.2f} ({v['steps']} step{'' if v['steps'] == 1 else 's'})"
                               for p, v in (proj.get("cache") or {}).items())
            parts = ([f"each run to train priced where this store's runs that stopped early stopped, as a share of "
                      f"their maximum steps ({said})"] if said else []) \
                + ([f"each step's edited forward passes less the share the logits cache served in this store's done "
                    f"steps of its protocol ({served})"] if served else [])
            out.append(f"  projected, {'; '.join(parts)}: {proj['wall_hours']:.1f} h wall for "
                       f"{proj['worker_hours']:.1f} worker-hours; the rest of the evaluation stays at its bound")
        return out

    def to_dict(self) -> dict:
        from dataclasses import asdict

        return {"suite": self.suite, "model": self.model, "scale": self.scale, "device": self.device,
                "store": self.store, "counts": self.counts(), "settings": self.settings,
                "steps": [asdict(s) for s in self.steps], "runs": {k: asdict(r) for k, r in self.runs.items()},
                "edges": self.edges, "cost": self.cost, "kept": self.kept, "work": self.work}


_TRAIN_ONLY = ("learning-curve",)  # steps that only fine-tune (and measure curves) count as runs, not evaluations


def listing(store: Store | str | None, suite: str, fingerprint: Mapping[str, Any] | None = None) -> StoreListing:
    """A :class:`StoreListing` of ``store`` for ``suite``: its suite record's done steps count only when the record's
    settings agree with ``fingerprint`` (model and scale, as ``--resume`` checks)."""
    if store is None:
        return StoreListing()
    store = store if isinstance(store, Store) else Store(store)
    if not store.root.exists():
        return StoreListing(root=str(store.root))
    done: frozenset[str] = frozenset()
    complete = False
    work: Mapping[str, Any] = {}
    if suite in store.results("suite"):
        rec = store.read_result("suite", suite)
        if all(rec.get(k) == v for k, v in (fingerprint or {}).items()):
            done = frozenset(rec.get("step_times_s") or {})
            complete = bool(rec.get("complete", False))
            work = rec.get("step_work") if isinstance(rec.get("step_work"), dict) else {}
    return StoreListing(root=str(store.root), done_steps=done, complete=complete, store=store, step_work=work)


def plan_suite(spec, scale: str, store: Store | str | StoreListing | None = None, model: str | None = None, *,
               device: str = "h100", seed: int = 0, methods: Sequence[str] | None = None,
               posthoc: Sequence[str] | None = None, workers: int = 2, device_note: str = "") -> Plan:
    """The :class:`Plan` of suite ``spec`` (a :class:`~talos_core.suites.specs.SuiteSpec` or its name) at ``scale`` with
    ``model`` (``--model``; ``None``: the suite's) against ``store`` (a path, a :class:`Store`, a
    :class:`StoreListing` or ``None``), costed for ``device`` (a device of :mod:`talos_core.suites.costs`; the text
    says ``device_note``) and scheduled on ``workers`` worker processes (:func:`schedule`).

    Offline: nothing is downloaded (model and task registries, run ids and the store only).
    """
    from talos_core.suites.costs import check_device
    from talos_core.suites.specs import get_suite, with_model
    from talos_core.suites.steps import suite_steps

    spec = get_suite(spec) if isinstance(spec, str) else spec
    spec = with_model(spec, model)
    if scale not in spec.scales:
        from talos_core.errors import unknown

        raise unknown(f"scale of suite {spec.name!r}", scale, spec.scales)
    check_device(device)
    ft = list(methods) if methods else list(spec.methods)
    ph = list(spec.posthoc) if posthoc is None else list(posthoc)
    for m in ft:
        if m not in spec.methods:
            from talos_core.errors import unknown

            raise unknown(f"method of suite {spec.name!r}", m, spec.methods)
    steps = suite_steps(spec, scale, ft, ph, seed=seed, device="auto")
    if not isinstance(store, StoreListing):
        store = listing(store, spec.name, {"model": spec.model, "scale": scale})
    from talos_core.suites.workload import load_sizes

    sc = spec.scales[scale]
    sizes = load_sizes([*spec.tasks, spec.control_task], sc.max_val, sc.max_test)
    plan = build_plan(spec, scale, steps, store, device=device, sizes=sizes, workers=workers)
    plan.device_note = device_note
    return plan


def build_plan(spec, scale: str, steps: Sequence, store: StoreListing, *, device: str = "h100",
               sizes: tuple | None = None, workers: int = 2) -> Plan:
    """The plan of ``steps`` (:func:`~talos_core.suites.steps.suite_steps` of ``spec`` at ``scale``) against a
    listing; with ``sizes`` (:func:`~talos_core.suites.workload.load_sizes`' answer) its evaluation work too."""
    from talos_core.suites.costs import estimate

    model = spec.model
    runs: dict[str, PlannedRun] = {}
    producer: dict[str, str] = {}  # run key -> label of the first step that uses it
    planned: list[PlannedStep] = []
    selection_of: dict[str, str] = {}  # method -> label of its selection step
    # method -> label of its learning-curve step / of its lr check (where later steps read the rate it chooses)
    curve_of: dict[str, str] = {}
    side = {st.label for st in steps if not getattr(st, "feeds", True)}  # lr checks that report: never waited for
    probe = _Probe(spec.scales[scale].lr_check)
    for i, st in enumerate(steps, 1):
        if st.protocol == "selection":
            selection_of[st.method] = st.label
        if st.protocol == "learning-curve":
            curve_of[("budget", st.method)] = st.label
        if st.protocol == "lr-check" and st.label not in side:
            curve_of[("lr", st.method)] = st.label
        needs: list[str] = []
        chosen_by = None
        if st.protocol == "comparison":
            planned.append(PlannedStep(i, st.label, st.protocol, st.method, tuple(st.tasks), (), (),
                                       tuple(p.label for p in planned), done=st.label in store.done_steps))
            continue
        requests, waits = _requests(st, store, spec, curve_of, probe)
        if st.task_overrides is not None and requests is None:
            chosen_by = selection_of.get(st.method)
        for dep in (*waits, *getattr(st, "after", ())):
            if dep and dep not in needs:
                needs.append(dep)
        if chosen_by and chosen_by not in needs:
            needs.append(chosen_by)
        keys, trains = [], []
        for task, method, ov, budget_from in requests or ():
            run = _planned_run(model, task, method, ov, store, budget_from, spec.scales[scale].curve_steps,
                               weights=st.protocol != "learning-curve")
            keys.append(run.key)
            if run.key not in runs:
                runs[run.key] = run
                producer[run.key] = st.label
                trains.append(run.key)
            elif producer[run.key] != st.label and producer[run.key] not in needs and producer[run.key] not in side:
                needs.append(producer[run.key])
        planned.append(PlannedStep(i, st.label, st.protocol, st.method, tuple(st.tasks), tuple(keys), tuple(trains),
                                   tuple(needs), chosen_by=chosen_by, done=st.label in store.done_steps,
                                   trains_any=bool(st.trains)))
    sc = spec.scales[scale]
    settings = {k: v for k, v in (("steps", sc.steps), ("batch", sc.batch_size), ("lr", sc.lr),
                                  *sorted(sc.finetune_settings(model).items())) if v is not None}
    if sc.lr_chosen:
        settings["lr"] = "chosen per method by its lr check among " + ", ".join(f"{v:g}" for v in sc.lr_check)
    if sc.lr_by_method:
        settings["lr by method"] = dict(sc.lr_by_method)
    plan = Plan(spec.name, model, scale, device, store.root, planned, runs, settings=settings,
                kept=store.store.kept_work() if store.store is not None else [], workers=workers)
    plan.cost = estimate(plan.to_train(), device)
    if sizes is not None:
        _add_work(plan, steps, spec, sizes, stop_fractions(store.store, model), cache_shares(store.step_work, steps))
    return plan


def _add_work(plan: Plan, steps: Sequence, spec, sizes: tuple,
              stops: Mapping[str, tuple[float, int]] | None = None,
              cache: Mapping[str, tuple[float, int]] | None = None) -> None:
    """The evaluation work of the plan's steps still to do (:mod:`talos_core.suites.workload`), and its cost: the wall
    time as a bound and, with ``stops`` (:func:`stop_fractions` of the store) or ``cache`` (:func:`cache_shares`),
    projected where runs stop early and with the forward passes the logits cache serves."""
    from collections import Counter

    from talos_core.suites.costs import estimate_eval
    from talos_core.suites.workload import lota_calibration_iterations, plan_views, step_work, theta0_work

    found, why = sizes
    if found is None:
        plan.work = {"why": why}
        return
    per, total = {}, Counter()
    views = plan_views(plan, steps, spec.control_task)
    for view, ps in zip(views, plan.steps):
        if ps.done:
            continue
        w = step_work(view, found)
        per[ps.label] = dict(w)
        total += w
    todo = plan.to_train()
    lota = sum(lota_calibration_iterations(r, found) for r in todo)
    theta0 = theta0_work([*spec.tasks, spec.control_task], found, 1)
    plan.work = {"steps": per, "total": dict(total), "theta0": dict(theta0), "lota_calibration_iterations": lota}
    plan.cost["evaluation"] = estimate_eval({**total, "forward0": total["forward0"] + theta0["forward0"]},
                                            plan.model, plan.device, lota_iterations=lota,
                                            lota_batch_size=next((r.batch_size for r in todo if r.method == "lota"),
                                                                 None))
    plan.cost["schedule"] = schedule(plan, steps, views, found, plan.workers)
    early = {r.method for r in todo if r.early_stopping}
    todo_protocols = {ps.protocol for ps in plan.steps if not ps.done}
    cached = {p: {"share": f, "steps": n} for p, (f, n) in sorted((cache or {}).items()) if p in todo_protocols}
    if (stops and early) or cached:  # the store shows where runs like these stop, what the cache serves: price so
        used = {m: (stops[m] if m in stops else stops["*"]) for m in sorted(early)} if stops else {}
        shares = {m: {"share": f, "runs": n, "own": m in stops} for m, (f, n) in used.items()}
        plan.cost["projected"] = {**schedule(plan, steps, views, found, plan.workers, stops if used else None,
                                             {p: (v["share"], v["steps"]) for p, v in cached.items()}),
                                  "shares": shares, "cache": cached}


def unit_seconds(plan: Plan, steps: Sequence, views: Sequence, sizes,
                 stops: Mapping[str, tuple[float, int]] | None = None,
                 cache: Mapping[str, tuple[float, int]] | None = None) -> tuple[dict, dict]:
    """``({unit: seconds}, {unit: units it waits for})`` of the plan's steps still to do as the executors run them
    (:func:`talos_core.suites.executors.step_graph`): one unit per fine-tuning run a step trains (its iterations and
    the evaluation its fine-tuning makes: validation curve, val/test accuracy, calibration) and one per step (the rest
    of its evaluation), each priced with the plan's cells (an unmeasured one counts 0). With ``stops``
    (:func:`stop_fractions`) a run that stops early is priced at that share of its maximum steps (its method's, else
    every method's ``"*"``), its validation curve with it; without, at its maximum (a bound). With ``cache``
    (:func:`cache_shares`) a step's edited forward passes (``forward``, the kind the logits cache serves) are priced
    less the share its protocol's done steps had served; without, all of them (a bound)."""
    from collections import Counter
    from dataclasses import replace

    from talos_core.suites.costs import cell, eval_cell
    from talos_core.suites.executors import step_graph
    from talos_core.suites.workload import finetune_work, lota_calibration_iterations, step_work

    def eval_s(work: Mapping[str, int]) -> float:
        return sum(n * c["s_per_example"] for k, n in work.items()
                   if n > 0 and (c := eval_cell(plan.model, plan.device, k)) is not None)

    def train_s(run: PlannedRun) -> float:
        c = cell(run.model, run.method, plan.device, run.batch_size)
        lota = cell(run.model, "nonlinear", plan.device, run.batch_size)
        iters = run.steps if run.steps is not None else (run.max_steps or 0)
        return ((iters * c["s_per_iter"] if c else 0.0) + eval_s(finetune_work(run, sizes))
                + (lota_calibration_iterations(run, sizes) * lota["s_per_iter"] if lota else 0.0))

    graph, run_graph = step_graph(steps), step_graph(steps, results=False)
    todo = {ps.label for ps in plan.steps if not ps.done}
    seconds: dict[str, float] = {}
    needs: dict[str, list[str]] = {}
    for ps, view in zip(plan.steps, views):
        if ps.done:
            continue
        parts = []
        for run in view.trains:
            unit = f"{ps.label} [{run.key}]"
            share = (stops.get(run.method) or stops.get("*")) if stops and run.early_stopping else None
            priced = replace(run, steps=max(1, round(run.steps * share[0])), evals=None) \
                if share and run.steps else run
            seconds[unit], needs[unit] = train_s(priced), [d for d in run_graph[ps.label] if d in todo]
            parts.append(unit)
        rest = step_work(view, sizes) - sum((finetune_work(r, sizes) for r in view.trains), Counter())
        if cache and ps.protocol in cache:
            rest["forward"] = round(rest["forward"] * (1.0 - cache[ps.protocol][0]))
        seconds[ps.label] = eval_s(rest)
        needs[ps.label] = [d for d in graph[ps.label] if d in todo] + parts
    return seconds, needs


def stop_fractions(store: Store | None, model: str) -> dict[str, tuple[float, int]]:
    """Where the store's runs of ``model`` that stop early (``early_stopping_patience``) ended, as a share of their
    maximum steps: ``{method: (median share, runs)}`` and ``"*"`` over every method; ``{}`` without such runs.
    Read from the run manifests (``timings.steps_run`` against ``config.train.steps``); an unreadable one is skipped.
    """
    import statistics

    from talos_core.atomic import read_json

    if store is None or not (store.root / "runs").is_dir():
        return {}
    shares: dict[str, list[float]] = {}
    for path in sorted((store.root / "runs").glob("*/manifest.json")):
        try:
            man = read_json(path)
        except TalosError:
            continue
        config, timings = (man.get("config"), man.get("timings")) if isinstance(man, dict) else (None, None)
        train = config.get("train") if isinstance(config, dict) else None
        if not isinstance(train, dict) or not isinstance(timings, dict) or man.get("model") != model:
            continue
        ran, most = timings.get("steps_run"), train.get("steps")
        if not train.get("early_stopping_patience") or not all(
                isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (ran, most)):
            continue
        shares.setdefault(str(man.get("method")), []).append(min(ran / most, 1.0))
    out = {m: (statistics.median(v), len(v)) for m, v in sorted(shares.items())}
    if out:
        every = [x for v in shares.values() for x in v]
        out["*"] = (statistics.median(every), len(every))
    return out


def cache_shares(step_work: Mapping[str, Any], steps: Sequence) -> dict[str, tuple[float, int]]:
    """Of the edited forward passes a suite record's done steps of each protocol made, the share the logits cache
    served (``step_work``, the record's: ``cached`` / (``forward`` + ``cached``), pooled over the protocol's steps of
    ``steps``, the suite's step table): ``{protocol: (share, steps)}``; ``{}`` without such steps. A post-hoc merge
    whose processed vector equals another row's, a negation point the addition search evaluated: the cache serves
    them, and how often depends on the suite (`vision`'s post-hoc steps 7–61 %, `text`'s 9–10 %). A plan reads the
    record's ``step_work`` through its :class:`StoreListing`, only where the record's settings agree."""
    pooled: dict[str, list[int]] = {}
    for st in steps:
        w = step_work.get(st.label)
        if not isinstance(w, dict):
            continue
        forward, cached = w.get("forward"), w.get("cached")
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (forward, cached)) \
                or forward + cached == 0:
            continue
        acc = pooled.setdefault(st.protocol, [0, 0, 0])
        acc[0], acc[1], acc[2] = acc[0] + cached, acc[1] + forward + cached, acc[2] + 1
    return {p: (c / n, k) for p, (c, n, k) in sorted(pooled.items())}


def makespan(seconds: Mapping[str, float], needs: Mapping[str, Sequence[str]], workers: int) -> float:
    """Wall seconds of units (``{unit: seconds}``, in table order) with these dependencies on ``workers`` processes:
    each free worker takes the first unit whose units it waits for are done, as ``--executor processes`` does.

    >>> makespan({"a": 2.0, "b": 1.0, "c": 1.0}, {"a": [], "b": [], "c": ["b"]}, 2)
    2.0
    """
    import heapq

    done: set[str] = set()
    running: list[tuple[float, int, str]] = []
    now, i = 0.0, 0
    pending = list(seconds)
    while pending or running:
        for u in [u for u in pending if all(d in done for d in needs[u])]:
            if len(running) >= workers:
                break
            pending.remove(u)
            heapq.heappush(running, (now + seconds[u], i, u))
            i += 1
        if not running:  # nothing can start (a unit waits for one not in the plan): stop counting
            break
        now, _, u = heapq.heappop(running)
        done.add(u)
    return now


def schedule(plan: Plan, steps: Sequence, views: Sequence, sizes, workers: int,
             stops: Mapping[str, tuple[float, int]] | None = None,
             cache: Mapping[str, tuple[float, int]] | None = None) -> dict:
    """The wall time of the plan's units (:func:`unit_seconds`, with ``stops`` and ``cache`` where given) on
    ``workers`` processes (:func:`makespan`), with the total (worker-hours) and the longest chain of dependent units
    (no number of workers does better)."""
    seconds, needs = unit_seconds(plan, steps, views, sizes, stops, cache)
    chain: dict[str, float] = {}
    for u in seconds:
        chain[u] = seconds[u] + max((chain[d] for d in needs[u] if d in chain), default=0.0)
    return {"workers": workers, "wall_hours": makespan(seconds, needs, workers) / 3600,
            "worker_hours": sum(seconds.values()) / 3600, "critical_hours": max(chain.values(), default=0.0) / 3600}


def _requests(st, store: StoreListing, spec, curve_of: Mapping[Any, str],
              probe: _Probe) -> tuple[list | None, list[str]]:
    """``([(task, method, overrides, budget_from)], waits)`` of the runs step ``st`` uses (``None`` when they are
    a selection's per-task choice not in the store yet) and the labels of steps whose results it reads."""
    from talos_core.evaluation.runs import merge_overrides
    from talos_core.methods.posthoc import BASE_METHOD
    from talos_core.suites.steps import _resolved

    waits: list[str] = []
    budget_from = None
    ov, read = _probed(st.overrides, store, probe)
    if read:  # the step budget of a learning-curve step, or a learning rate an lr check chooses, not known yet
        waits += [curve_of.get(k) for k in read]
        if any(k[0] == "budget" for k in read):
            budget_from = curve_of.get(("budget", BASE_METHOD if st.protocol == "posthoc" else st.method))
            ov = {**ov, "steps": None}
    tov = None
    if st.task_overrides is not None:
        try:
            tov = _resolved(st.task_overrides, store.store) if store.store is not None else None
        except TalosError:
            tov = None
        if tov is None:
            return None, waits
    settings, read = _probed(st.settings, store, probe)
    settings_wait = None  # settings that read a learning-curve budget not chosen yet (the masks comparison's)
    for k in read:
        if curve_of.get(k) and curve_of[k] not in waits:
            waits.append(curve_of[k])
        if k[0] == "budget":
            settings_wait = curve_of.get(k)
    tasks = list(st.tasks)
    p = st.protocol
    out: list = []
    extra: list = []  # (task, method, overrides, budget_from) with their own budget
    if p == "posthoc":
        out = [(t, BASE_METHOD, ov) for t in tasks]
    elif p == "sparsity-ablation":
        out = [(t, st.method, {**ov, "sparsity": k}) for k in settings.sparsities for t in tasks]
    elif p == "selection":
        from talos_core.evaluation.selection import candidate_delta

        out = [(t, st.method, merge_overrides(ov, candidate_delta(settings.param, v, ov)))
               for v in settings.values for t in tasks]
    elif p == "learning-curve":
        out = [(t, st.method, {**ov, "steps": settings.steps, "eval_every": settings.eval_every}) for t in tasks]
    elif p == "lr-check":  # the method's own lr is its other rows' run (the same overrides), the others new ones
        from talos_core.evaluation.lr_check import lr_overrides, own_lr

        out = [(t, st.method, lr_overrides(ov, v, None if settings.choose else own_lr(spec.model, t, st.method, ov)))
               for v in settings.values for t in tasks]
    else:
        out = [(t, st.method, merge_overrides(ov, (tov or {}).get(t))) for t in tasks]
        if p == "masks" and getattr(settings, "compare_method", None):
            cov = dict(settings.compare_overrides if settings.compare_overrides is not None else ov)
            if settings_wait:
                cov["steps"] = None
            extra = [(t, settings.compare_method, cov, settings_wait) for t in tasks]
    return [(t, m, o, budget_from) for t, m, o in out] + extra, waits


class _Probe:
    """Stands in for a store whose learning-curve budgets and lr-check choices are not known yet (every budget reads
    as 1, the plan replacing the step count by "chosen later"; every chosen learning rate as the first candidate, the
    dense baseline's as the last, so a one-rate row is planned as if the two checks disagree: its larger cost), so a
    step's overrides can be inspected without them. ``read`` collects ``("budget" | "lr", method)`` of what was
    asked."""

    root = "<plan>"

    def __init__(self, lr_values: Sequence[float] = ()) -> None:
        self.lr_values = tuple(lr_values) or (1e-4,)
        self.read: list[tuple[str, str]] = []

    class _Everything:
        def __contains__(self, name: object) -> bool:
            return True

    def results(self, kind: str) -> _Everything:
        return self._Everything()

    def read_result(self, kind: str, name: str) -> dict:
        from talos_core.methods.posthoc import BASE_METHOD
        from talos_core.schema import parse_result_name

        method = (parse_result_name(kind, name) or {}).get("method", "")
        if kind == "lr_check":
            self.read.append(("lr", method))
            lr = self.lr_values[-1] if method == BASE_METHOD else self.lr_values[0]
            return {"best_lr": lr, "suite_lr": lr, "chooses": True}
        self.read.append(("budget", method))
        return {"budget": 1}


def _probed(value: Any, store: StoreListing, probe: _Probe) -> tuple[Any, list[tuple[str, str]]]:
    """``value`` resolved against the store (a :data:`~talos_core.suites.steps.Resolved` function), else — no store,
    or one that lacks an earlier step's result — against ``probe``; with the ``(kind, method)`` it read there."""
    from talos_core.suites.steps import _resolved

    if not callable(value):
        return value, []
    if store.store is not None:
        try:
            return _resolved(value, store.store), []
        except TalosError:
            pass
    probe.read.clear()
    out = _resolved(value, probe)
    return out, list(dict.fromkeys(probe.read))


def _planned_run(model: str, task: str, method: str, ov: Mapping[str, Any], store: StoreListing,
                 budget_from: str | None, max_steps: int | None = None, *, weights: bool = True) -> PlannedRun:
    from talos_core.evaluation.runs import build_request
    from talos_core.runners import get_method

    info = get_method(method)
    if budget_from is not None or ov.get("steps") is None:
        import hashlib
        import json

        rest = {k: v for k, v in ov.items() if k != "steps"}
        tag = hashlib.sha256(json.dumps(rest, sort_keys=True, default=str).encode()).hexdigest()[:8]
        bound = max_steps if budget_from is not None else None
        req = build_request(model, task, method, {**rest, "steps": max(bound or 1, int(rest.get("eval_every") or 1))})
        return PlannedRun(f"{method}/{task}/{tag}: steps from {budget_from}", model, task, method, None,
                          rest.get("batch_size"), calibrates=info.calibrates, max_steps=bound,
                          early_stopping=bool(rest.get("early_stopping_patience")), **_run_work(req, info))
    req = build_request(model, task, method, ov)
    cfg = req.train_config()
    found = store.find(model, task, method, ov, weights=weights)
    evals = len(found.manifest.curve or []) if found is not None and req.eval_every else None
    return PlannedRun(req.run_id(), model, task, method, cfg.steps, cfg.batch_size,
                      early_stopping=bool(cfg.early_stopping_patience), calibrates=info.calibrates,
                      in_store=found is not None, evals=evals, **_run_work(req, info))


def _run_work(req, info) -> dict:
    """The fields of a :class:`PlannedRun` that its evaluation work depends on (:mod:`talos_core.suites.workload`)."""
    out = {"sparsity": req.sparsity if info.sparse else None, "eval_every": req.eval_every,
           "eval_mode": info.eval_mode, "calib_samples": None}
    if info.calibrates:
        cal = req.calib_config()
        out.update(calib_samples=cal.samples, calib_rounds=cal.rounds, calib_batch=cal.batch_size)
        if req.method == "lota":
            out["lota_steps"] = int(dict(req.options).get("calib_steps") or 0)
    return out


def recount(store: Store | str, suite: str) -> list[dict]:
    """Every step of the suite run recorded in ``store``: ``{"label", "counted", "seconds", "recorded", "trains"}``,
    the work :mod:`talos_core.suites.workload` counts for it (its runs' fine-tuning included, as the run made them),
    the step's recorded time and work (``step_work``; ``None`` where the record has none) and whether it fine-tuned
    runs. The tests hold counted and recorded equal; ``python -m bench.plan_costs --fit`` divides seconds by counted
    examples."""
    from talos_core.suites.specs import get_suite
    from talos_core.suites.steps import suite_steps
    from talos_core.suites.workload import load_sizes, plan_views, step_work

    store = store if isinstance(store, Store) else Store(store)
    meta = store.read_result("suite", suite)
    spec, scale = get_suite(suite), str(meta["scale"])
    steps = suite_steps(spec, scale, list(meta["methods"]), list(meta["posthoc"]), seed=int(meta.get("seed", 0)),
                        device="auto")
    # the plan of the whole table against the store (its own work estimate is for the steps still to do: not needed)
    plan = build_plan(spec, scale, steps, listing(store, suite, {"model": spec.model, "scale": scale}),
                      device="cpu-2core")
    sc = spec.scales[scale]
    sizes, why = load_sizes([*spec.tasks, spec.control_task], sc.max_val, sc.max_test)
    if sizes is None:
        raise TalosError(f"cannot count the work of suite {suite!r} here: {why}")
    times, work = meta.get("step_times_s") or {}, meta.get("step_work") or {}
    return [{"label": st.label, "counted": dict(step_work(view, sizes)), "seconds": times.get(st.label),
             "recorded": work.get(st.label), "trains": bool(view.trains)}
            for view, st in zip(plan_views(plan, steps, spec.control_task, stored=True, store=store), steps)]
