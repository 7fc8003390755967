"""``--plan``'s projection held against a finished suite run (``bench/RESULTS.md``, docs/scale-out.md).

``python -m bench.bench_plan_check [--store cached_results] [--suite vision] [--device cpu-2core]
[--skip-device cuda] [--json out.json]``: prices, no training (about a minute).

A suite run in parts on two machines (``text``, 2026-11-28: TaLoS's and LoTA's part on a lent H200, the rest on this
CPU) is checked on this machine's part: ``--skip-device cuda`` leaves out the steps that the record's sessions on that
device ran, from the plan (counted as done, as ``--resume`` would) and from the measured step times alike.

The suite is planned from an empty store, as before its run, on ``--device``'s cells, but with what the finished store
shows: each method's early-stopping share (:func:`talos_core.suites.plan.stop_fractions`) and each protocol's share
of forward passes the logits cache served (:func:`~talos_core.suites.plan.cache_shares`). Its projection — without
and with the cache term — stands beside the suite record's measurement: the step times (worker-hours) in all and
by kind of step, and the forward passes each kind counted. The measured wall time is not in the record of a run
resumed over several sessions (a session cut off never wrote it); pass ``--wall-hours`` to print the ratio.
This is a check after the fact, with the shares the finished run shows; in the middle of a run the plan takes them
from the steps done so far.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _kind(label: str) -> str:
    """A step's kind from its label: ``"talos: selection (sparsity)"`` → ``"selection"``; a label without a method
    (``"talos sparsity ablation"``, ``"sharing (prune)"``) is its own kind."""
    return label.split(": ", 1)[1].split(" ")[0] if ": " in label else label


def steps_run_on(record: dict, device: str) -> frozenset[str]:
    """The step labels the suite record's sessions on ``device`` (``cpu``, ``cuda``) ran (``steps_run``); the
    comparison, which every session gathers again, is never one of them.

    >>> steps_run_on({"sessions": [{"device": "cuda", "steps_run": ["a", "comparison"]},
    ...                            {"device": "cpu", "steps_run": ["b"]}]}, "cuda")
    frozenset({'a'})
    """
    return frozenset(label for s in record.get("sessions") or [] if s.get("device") == device
                     for label in s.get("steps_run") or [] if label != "comparison")


def check(store_root: Path, suite: str, device: str, skip_device: str | None = None) -> dict:
    import talos_core.suites.plan as P
    from talos_core.store import Store
    from talos_core.suites import get_suite
    from talos_core.suites.steps import suite_steps
    from talos_core.suites.workload import load_sizes, plan_views

    store = Store(store_root)
    record = store.read_result("suite", suite)
    spec = get_suite(suite)
    model = record["model"]
    steps = suite_steps(spec, record["scale"], list(record["methods"]), list(record["posthoc"]),
                        seed=record["seed"], device="auto")
    stops, cache = P.stop_fractions(store, model), P.cache_shares(record.get("step_work") or {}, steps)
    skipped = steps_run_on(record, skip_device) if skip_device else frozenset()
    # an empty store, but with the other machine's steps done (their runs and results are not this part's work)
    plan = P.plan_suite(spec, record["scale"], P.StoreListing(done_steps=skipped), device=device, workers=2,
                        methods=list(record["methods"]), posthoc=list(record["posthoc"]), seed=record["seed"])
    views = plan_views(plan, steps, spec.control_task)
    sc = spec.scales[record["scale"]]
    sizes, _ = load_sizes([*spec.tasks, spec.control_task], sc.max_val, sc.max_test)
    rows = {}
    for name, kw in (("without_cache", {"stops": stops}), ("with_cache", {"stops": stops, "cache": cache})):
        rows[name] = P.schedule(plan, steps, views, sizes, plan.workers, **kw)
        seconds, _ = P.unit_seconds(plan, steps, views, sizes, **kw)
        by: dict[str, float] = {}
        for unit, s in seconds.items():
            by[_kind(unit.split(" [")[0])] = by.get(_kind(unit.split(" [")[0]), 0.0) + s / 3600
        rows[name]["by_kind_hours"] = by
    measured: dict[str, float] = {}
    for label, s in (record.get("step_times_s") or {}).items():
        if label in skipped:
            continue
        measured[_kind(label)] = measured.get(_kind(label), 0.0) + s / 3600
    work: dict[str, dict[str, int]] = {}
    for label, w in (record.get("step_work") or {}).items():
        if label in skipped:
            continue
        k = work.setdefault(_kind(label), {"forward": 0, "cached": 0})
        k["forward"] += int(w.get("forward") or 0)
        k["cached"] += int(w.get("cached") or 0)
    return {"suite": suite, "store": str(store_root), "device": device, "model": model,
            "skipped": {"device": skip_device, "steps": sorted(skipped)} if skip_device else None,
            "stop_shares": {m: v[0] for m, v in stops.items()}, "cache_shares": {p: v[0] for p, v in cache.items()},
            "projected": rows, "measured_worker_hours": sum(measured.values()), "measured_by_kind_hours": measured,
            "forward_passes": work}


def markdown(r: dict, wall_hours: float | None) -> str:
    p0, p1 = r["projected"]["without_cache"], r["projected"]["with_cache"]
    m = r["measured_worker_hours"]
    lines = [f"**{r['suite']}** ({r['model']}, priced on `{r['device']}`, 2 workers), from `{r['store']}`'s record",
             ""]
    if r.get("skipped"):
        lines += [f"Left out, on both sides: the {len(r['skipped']['steps'])} steps its sessions on "
                  f"`{r['skipped']['device']}` ran.", ""]
    lines += ["| | wall (h) | worker-hours | worker-hours / measured |",
              "|---|---|---|---|",
              f"| projected, stop shares only | {p0['wall_hours']:.2f} | {p0['worker_hours']:.2f} | "
              f"{p0['worker_hours'] / m:.2f} |",
              f"| projected, stop and cache shares | {p1['wall_hours']:.2f} | {p1['worker_hours']:.2f} | "
              f"{p1['worker_hours'] / m:.2f} |",
              f"| measured (record's step times) | {wall_hours if wall_hours is not None else '–'} | {m:.2f} | 1.00 |",
              ""]
    if wall_hours:
        lines.append(f"Wall: projected / measured {p0['wall_hours'] / wall_hours:.2f} (stop shares only), "
                     f"{p1['wall_hours'] / wall_hours:.2f} (with the cache shares).")
        lines.append("")
    lines += ["| kind of step | projected h (no cache) | projected h (cache) | measured h | forward passes | cached |",
              "|---|---|---|---|---|---|"]
    kinds = sorted(set(p0["by_kind_hours"]) | set(r["measured_by_kind_hours"]),
                   key=lambda k: -p0["by_kind_hours"].get(k, 0.0))
    for k in kinds:
        w = r["forward_passes"].get(k, {"forward": 0, "cached": 0})
        lines.append(f"| {k} | {p0['by_kind_hours'].get(k, 0.0):.2f} | {p1['by_kind_hours'].get(k, 0.0):.2f} | "
                     f"{r['measured_by_kind_hours'].get(k, 0.0):.2f} | {w['forward']:,} | {w['cached']:,} |")
    lines += ["", "Stop shares: " + ", ".join(f"{k} {v:.2f}" for k, v in r["stop_shares"].items()),
              "Cache shares: " + ", ".join(f"{k} {v:.2f}" for k, v in r["cache_shares"].items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=REPO / "cached_results")
    parser.add_argument("--suite", default="vision")
    parser.add_argument("--device", default="cpu-2core")
    parser.add_argument("--wall-hours", type=float, default=None,
                        help="the run's measured wall time (its sessions' windows), to print the wall ratio")
    parser.add_argument("--skip-device", default=None, metavar="DEVICE",
                        help="leave out the steps the record's sessions on DEVICE (cpu, cuda) ran: a suite run in "
                             "parts on two machines, checked on this machine's part")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    result = check(args.store, args.suite, args.device, args.skip_device)
    print(markdown(result, args.wall_hours))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
