"""The cost levers of the converged protocol, each before and after, side by side (``bench/RESULTS.md``).

``python -m bench.bench_converge [--json out.json]``: counts and prices, no training (seconds).

* **(a) the curve is the run.** The ``full`` scales as they were (a learning-curve step per method to
  ``curve_steps``, then every run at the budget read off it) against the converged protocol (every run to its
  maximum with early stopping; no learning-curve runs): runs, iterations and the plan's worker-hours of each, from
  an empty store; the "before" budgets are the ones the shipped suites' learning curves chose (read from
  ``cached_results``), so that column is what those suites trained. The learning-curve runs' share is also read
  off the shipped suite records (their step times).
* **(b) post-hoc steps in parallel.** The step graph with the ``single`` upserts ordered (before: each post-hoc
  step waited for the previous writer of the shared table) and without (after: upserts keep the suite's row order
  under the store's lock): the shipped ``text`` record's measured step times scheduled on 2 workers under each
  graph, and the converged plans' schedules.
* **(c) ``--plan`` priced with the CPU it runs on.** The previous protocol's plans (the shipped budgets) priced with
  the AMD EPYC cells (``cpu-2core``, what ``--plan`` used on every CPU) and with the cells of the CPU each suite
  actually ran on, against the suite records' measured worker-hours and wall time.

Every figure is a bound where runs stop early (the plan prices each run at its maximum); the text says where.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "cached_results"


def previous_scale(name: str):
    """The ``full`` scale of ``name`` as it was before the converged protocol (learning curves, then budgets; one
    learning rate; the lr check reports; the paper's α grid; 200 validation examples)."""
    from talos_core.suites import get_suite

    full = get_suite(name).scales["full"]
    common = dict(max_val=200, lr=1e-4, lr_rows=(("talos", 1e-3),), curve_every=50, curve_tolerance=0.01,
                  eval_every=None, early_stopping_patience=0, lr_choose=False, one_rate_rows=(), alpha_rule="paper",
                  alpha_extend=0.0)
    if name == "text":
        return replace(full, steps=1000, curve_steps=1000, budget_patience=5, **common)
    return replace(full, steps=600, curve_steps=2000, **common)


def previous_spec(name: str):
    from talos_core.suites import get_suite

    spec = get_suite(name)
    return replace(spec, scales={**spec.scales, "full": previous_scale(name)})


def shipped_choices(tmp: Path, name: str) -> Path:
    """A store holding only the shipped suite's learning-curve budgets and selections (what later steps read)."""
    store = tmp / f"{name}-choices"
    for kind in ("learning_curve", "selection"):
        src = SHIPPED / "results" / kind
        dst = store / "results" / kind
        dst.mkdir(parents=True, exist_ok=True)
        for f in src.glob(f"{name}__*.json"):
            shutil.copy(f, dst / f.name)
    (store / "store.json").write_text((SHIPPED / "store.json").read_text())
    return store


def stop_step(curve: list[tuple[int, float]], patience: int = 5) -> int:
    """Where early stopping (``patience`` evaluations without a new best) ends a run with this validation curve; its
    last step when it never stops.

    >>> stop_step([(50, .5), (100, .6), (150, .6), (200, .55), (250, .6), (300, .59), (350, .6)], patience=3)
    250
    """
    best, bad = float("-inf"), 0
    for step, acc in sorted(curve):
        if acc > best:
            best, bad = acc, 0
        else:
            bad += 1
            if bad >= patience:
                return step
    return max(s for s, _ in curve)


def stop_fractions(name: str, maximum: int) -> dict[str, float]:
    """Per method, the mean fraction of ``maximum`` at which its runs would stop under patience 5, read off the
    shipped suite's learning curves (validation every 50 steps; a curve that never stops by its end counts as a run to
    ``maximum``): a projection of the converged protocol's early stopping, not a measurement of it."""
    out: dict[str, list[float]] = {}
    for f in (SHIPPED / "results" / "learning_curve").glob(f"{name}__*.json"):
        payload = json.loads(f.read_text())
        by_task: dict[str, list] = {}
        for r in payload["records"]:
            by_task.setdefault(r["task"], []).append((int(r["step"]), float(r["val_acc"])))
        for curve in by_task.values():
            end = max(s for s, _ in curve)
            stop = stop_step(curve)
            out.setdefault(payload["method"], []).append((stop if stop < end else maximum) / maximum)
    return {m: sum(v) / len(v) for m, v in out.items()}


def repriced(plan, spec, steps_of) -> object:
    """``plan`` (of ``spec``) with each run's iterations replaced by ``steps_of(run)`` where that is not ``None`` (its
    validation evaluations following them) and its training, evaluation and schedule priced again."""
    from talos_core.suites.costs import estimate
    from talos_core.suites.plan import _add_work
    from talos_core.suites.steps import suite_steps
    from talos_core.suites.workload import load_sizes

    for key, r in list(plan.runs.items()):
        n = steps_of(r)
        if n is not None:
            plan.runs[key] = replace(r, steps=int(n), max_steps=None,
                                     evals=-(-int(n) // r.eval_every) if r.eval_every else None)
    sc = spec.scales[plan.scale]
    steps = suite_steps(spec, plan.scale, list(spec.methods), list(spec.posthoc), seed=0, device="auto")
    plan.cost = estimate(plan.to_train(), plan.device)
    _add_work(plan, steps, spec, load_sizes([*spec.tasks, spec.control_task], sc.max_val, sc.max_test))
    return plan


def ran_steps(run) -> int | None:
    """The iterations a shipped run actually trained (its manifest in ``cached_results``), or ``None``."""
    path = SHIPPED / "runs" / run.key / "manifest.json"
    if not path.is_file():
        return None
    m = json.loads(path.read_text())
    return (m.get("timings") or {}).get("steps_run") or (m.get("config") or {}).get("train", {}).get("steps")


def plan_row(plan) -> dict:
    runs = list(plan.runs.values())
    curve = [r for r in runs if any(s.protocol == "learning-curve" and r.key in s.runs for s in plan.steps)]
    iters = sum(r.steps if r.steps is not None else (r.max_steps or 0) for r in runs)
    ev = plan.cost.get("evaluation") or {"hours": 0.0}
    return {"runs": len(runs), "iterations": iters,
            "curve_runs": len(curve), "curve_iterations": sum(r.steps or 0 for r in curve),
            "train_hours": plan.cost["hours"] + plan.cost.get("max_hours", 0.0), "eval_hours": ev["hours"],
            "worker_hours": plan.cost["schedule"]["worker_hours"], "wall_hours": plan.cost["schedule"]["wall_hours"]}


def record_hours(name: str) -> dict:
    """The shipped suite record's measured step time (worker-hours), wall time of its sessions, and the learning-curve
    steps' share."""
    meta = json.loads((SHIPPED / "results" / "suite" / f"{name}.json").read_text())
    times = meta["step_times_s"]
    curves = sum(v for k, v in times.items() if k.endswith(": learning curve"))
    return {"step_hours": sum(times.values()) / 3600, "curve_step_hours": curves / 3600,
            "sessions": len(meta.get("sessions") or [])}


def lever_a(tmp: Path, device: str) -> list[dict]:
    from talos_core.store import Store
    from talos_core.suites import get_suite
    from talos_core.suites.costs import cell
    from talos_core.suites.plan import plan_suite

    out = []
    for name in ("vision", "text"):
        spec = get_suite(name)
        sc = spec.scales["full"]
        before = plan_suite(previous_spec(name), "full", Store(shipped_choices(tmp, name)), device=device)
        after = plan_suite(name, "full", tmp / f"{name}-empty", device=device)
        # what the converged protocol would add with a separate learning-curve step: one run per method and task to
        # the maximum, validated every 50 steps (the lever, isolated)
        curve_train = sum(len(spec.tasks) * sc.steps * (cell(spec.model, m, device, sc.batch_size) or {}).get(
            "s_per_iter", 0.0) for m in spec.methods) / 3600
        fractions = stop_fractions(name, sc.steps)
        projected = repriced(plan_suite(name, "full", tmp / f"{name}-empty", device=device), spec,
                             lambda r, f=fractions: round(f.get(r.method, 1.0) * (r.steps or 0) / 50) * 50 or 50)
        out.append({"suite": name, "before": plan_row(before), "after": plan_row(after),
                    "projected": plan_row(projected), "stop_fractions": fractions,
                    "separate_curves_training_hours": curve_train, "record": record_hours(name)})
    return out


def ordered_upserts(steps, graph: dict[str, tuple]) -> dict[str, list[str]]:
    """``graph`` with the previous rule added back: a step upserting a per-model table waits for the previous step
    upserting the same table."""
    from talos_core.evaluation.protocols import get_protocol

    last: dict[str, str] = {}
    out = {k: list(v) for k, v in graph.items()}
    for st in steps:
        for kind in get_protocol(st.protocol).upserts:
            if kind in last and last[kind] not in out[st.label]:
                out[st.label].append(last[kind])
            last[kind] = st.label
    return out


def lever_b(tmp: Path, device: str) -> dict:
    from talos_core.suites.executors import step_graph
    from talos_core.suites.plan import makespan, plan_suite, unit_seconds
    from talos_core.suites.steps import suite_steps
    from talos_core.suites.workload import load_sizes, plan_views

    meta = json.loads((SHIPPED / "results" / "suite" / "text.json").read_text())
    spec = previous_spec("text")
    steps = suite_steps(spec, "full", meta["methods"], meta["posthoc"], seed=meta["seed"], device="auto")
    times = meta["step_times_s"]
    graph = {k: [d for d in v if d in times] for k, v in step_graph(steps).items() if k in times}
    old = {k: [d for d in v if d in times] for k, v in ordered_upserts(steps, graph).items() if k in times}
    seconds = {k: times[k] for k in graph}
    record = {"before_h": makespan(seconds, old, 2) / 3600, "after_h": makespan(seconds, graph, 2) / 3600,
              "worker_hours": sum(seconds.values()) / 3600,
              "posthoc_hours": sum(v for k, v in seconds.items() if "post-hoc" in k) / 3600}
    plans = {}
    for name in ("vision", "text"):
        plan = plan_suite(name, "full", tmp / f"{name}-b", device=device)
        sc = plan.cost["schedule"]
        from talos_core.suites import get_suite

        s = get_suite(name)
        table = suite_steps(s, "full", list(s.methods), list(s.posthoc), seed=0, device="auto")
        sizes, _ = load_sizes([*s.tasks, s.control_task], s.scales["full"].max_val, s.scales["full"].max_test)
        secs, needs = unit_seconds(plan, table, plan_views(plan, table, s.control_task), sizes)
        old_graph = ordered_upserts(table, {k: tuple(v) for k, v in step_graph(table).items()})
        old_needs = {u: ([*old_graph[u], *[d for d in needs[u] if d not in old_graph[u]]] if u in old_graph
                         else needs[u]) for u in needs}
        plans[name] = {"before_h": makespan(secs, old_needs, 2) / 3600, "after_h": sc["wall_hours"],
                       "after_sim_h": makespan(secs, needs, 2) / 3600, "worker_hours": sc["worker_hours"]}
    return {"text_record": record, "plans": plans}


def lever_c(tmp: Path) -> list[dict]:
    """Each previous-protocol plan priced on both CPU devices at the shipped budgets (a bound) and at the iterations
    the shipped runs actually trained (their manifests: what the plan could have known), against the record."""
    from talos_core.store import Store
    from talos_core.suites.plan import plan_suite

    out = []
    for name, ran_on in (("vision", "cpu-2core"), ("text", "cpu-2core-xeon")):
        rec = record_hours(name)
        row = {"suite": name, "ran_on": ran_on, "measured_step_hours": rec["step_hours"]}
        for device in ("cpu-2core", "cpu-2core-xeon"):
            spec = previous_spec(name)
            bound = plan_suite(spec, "full", Store(shipped_choices(tmp, name)), device=device)
            actual = repriced(plan_suite(spec, "full", Store(shipped_choices(tmp, name)), device=device), spec,
                              ran_steps)
            row[device] = {"bound": plan_row(bound), "at_ran_steps": plan_row(actual)}
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu-2core", help="the plan device of levers (a) and (b)")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = {"a": lever_a(Path(tmp), a.device), "b": lever_b(Path(tmp), a.device), "c": lever_c(Path(tmp))}
    print(f"(a) the curve is the run — plans from an empty store on '{a.device}': 'before' the previous full scale "
          f"at the budgets its shipped curves chose, 'after' the converged protocol, both bounds (every run priced at "
          f"its maximum); 'projected': the converged runs stopping where the shipped learning curves of their method "
          f"stop under patience 5")
    print("| suite | protocol | runs | of them learning-curve runs | iterations | training h | evaluation h | "
          "worker-h | wall h, 2 workers |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in out["a"]:
        for when in ("before", "after", "projected"):
            x = r[when]
            print(f"| {r['suite']} | {when} | {x['runs']} | {x['curve_runs']} ({x['curve_iterations']:,} it.) | "
                  f"{x['iterations']:,} | {x['train_hours']:.1f} | {x['eval_hours']:.1f} | {x['worker_hours']:.1f} | "
                  f"{x['wall_hours']:.1f} |")
        rec = r["record"]
        print(f"| {r['suite']} | shipped record | | learning-curve steps {rec['curve_step_hours']:.1f} of "
              f"{rec['step_hours']:.1f} step-hours | | | | | |")
        print(f"  {r['suite']}: a separate learning-curve step in the converged protocol would add "
              f"{r['separate_curves_training_hours']:.1f} training hours; stop fractions "
              + ", ".join(f"{m} {v:.2f}" for m, v in sorted(r["stop_fractions"].items())))
    b = out["b"]
    rec = b["text_record"]
    print(f"\n(b) post-hoc steps in parallel — the shipped text record's step times ({rec['worker_hours']:.1f} "
          f"step-hours, post-hoc {rec['posthoc_hours']:.1f}) on 2 workers: {rec['before_h']:.2f} h with the `single` "
          f"upserts ordered, {rec['after_h']:.2f} h without ({rec['before_h'] - rec['after_h']:+.2f} h saved)")
    for name, x in b["plans"].items():
        print(f"  {name} full (converged plan, {x['worker_hours']:.1f} worker-h): {x['before_h']:.1f} h wall "
              f"ordered, {x['after_h']:.1f} h unordered")
    print("\n(c) --plan priced with the CPU the suite ran on — the previous protocol's plans at the shipped budgets "
          "(bound) and at the iterations its runs trained, against the records' measured step-hours")
    print("| suite | ran on | measured step-h | cpu-2core (EPYC): bound / at ran steps | cpu-2core-xeon: bound / at "
          "ran steps |")
    print("|---|---|---|---|---|")
    for r in out["c"]:
        cells = [f"{r[d]['bound']['worker_hours']:.1f} / {r[d]['at_ran_steps']['worker_hours']:.1f}"
                 if r[d]["bound"]["worker_hours"] else "not measured" for d in ("cpu-2core", "cpu-2core-xeon")]
        print(f"| {r['suite']} | {r['ran_on']} | {r['measured_step_hours']:.1f} | {cells[0]} | {cells[1]} |")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
