"""Benchmark: one evaluation-grid point (α curve, 20×20 ξ grid) vs one plain evaluation pass.

``python -m bench.bench_eval_grid [--device cuda] [--quick] [--models ...]``

A grid point evaluates ``θ0 + α τ1`` (α curve) or ``θ0 + α1 τ1 + α2 τ2`` (ξ grid) on a test split:
``talos_core.inference.forward.predict(model, task, split, terms)``, which edits the weights in place
with ``talos_core.vectors.apply_vectors`` and restores them bitwise (no model copies). The plain pass
is ``predict`` with no terms. Reported for sparse TaLoS-like vectors (10% density) and dense
(non-linear FT) vectors; goal: grid point / plain pass ≤ 1.1. The apply+restore cost does not grow
with the number of examples, so the last column projects the ξ-grid ratio to the paper's 2,048 test
points per task: ``1 + apply_restore / (plain · 2048 / examples)``.

A second table times the plain pass and one linearized (base + JVP) pass in fp32 and in bf16
autocast (:mod:`talos_core.inference.precision`) and reports the share of identical predictions.
"""

from __future__ import annotations

from bench.common import (
    Case,
    common_parser,
    error_rows,
    machine_line,
    markdown_table,
    ratio,
    resolve_device,
    run_cases,
    run_worker,
    select_cases,
)


def run_case(case: Case, device: str, quick: bool) -> dict:
    examples = min(case.eval_examples, 128) if quick else case.eval_examples
    reps = 3 if quick or case.model.startswith(("clip-vit", "minilm")) else 5
    return {"case": case.model, **run_worker("grid", {"model": case.model, "task": case.task, "device": device,
                                                     "examples": examples, "reps": reps})}


def tables(results: list[dict]) -> str:
    rows = []
    for r in results:
        for kind in ("sparse", "dense"):
            x = r[kind]
            rows.append({"model": r["case"], "kind": kind, "n": r["examples"], "plain": r["plain_s"],
                         "apply": x["apply_restore_s"], "alpha": x["alpha_point_s"], "xi": x["xi_point_s"],
                         "ra": ratio(x["alpha_point_s"], r["plain_s"]), "rx": ratio(x["xi_point_s"], r["plain_s"]),
                         "proj": 1.0 + x["apply_restore_s"] / (r["plain_s"] * 2048 / r["examples"])})
    return "\n".join(["### Evaluation grid point vs plain evaluation pass (seconds)", "",
                      markdown_table(rows, ["model", "kind", "n", "plain", "apply", "alpha", "xi", "ra", "rx", "proj"],
                                     ["model", "task vectors", "test examples", "plain pass s",
                                      "apply+restore (2 vectors) s", "α-curve point s", "ξ-grid point s",
                                      "α point / plain (goal ≤ 1.1)", "ξ point / plain (goal ≤ 1.1)",
                                      "ξ point / plain at 2,048 examples (projected)"])])


def precision_table(results: list[dict]) -> str:
    """bf16 vs fp32 evaluation (``talos_core.inference.precision``), same passes, same run."""
    rows = []
    for r in results:
        x = r.get("precision")
        if not x:
            continue
        rows.append({"model": r["case"], "n": r["examples"], "native": "yes" if x["native_bf16"] else "no",
                     "pf": x["plain_fp32_s"], "pb": x["plain_bf16_s"],
                     "rp": ratio(x["plain_fp32_s"], x["plain_bf16_s"]),
                     "jf": x["jvp_fp32_s"], "jb": x["jvp_bf16_s"], "rj": ratio(x["jvp_fp32_s"], x["jvp_bf16_s"]),
                     "agree": x["agreement"]})
    return "\n".join(["### Evaluation precision: fp32 vs bf16 autocast (seconds per pass)", "",
                      markdown_table(rows, ["model", "n", "native", "pf", "pb", "rp", "jf", "jb", "rj", "agree"],
                                     ["model", "test examples", "native bf16 (AMX/GPU)", "plain fp32 s", "plain bf16 s",
                                      "fp32 / bf16", "base+JVP fp32 s", "base+JVP bf16 s", "fp32 / bf16 (JVP)",
                                      "same predictions"])])


def main(argv: list[str] | None = None) -> list[dict]:
    args = common_parser(__doc__.splitlines()[0]).parse_args(argv)
    device = resolve_device(args.device, args.threads, args.timeout)
    print(f"## bench_eval_grid — {machine_line(device)}", flush=True)
    results = run_cases(select_cases(args.models, args.quick, device),
                        lambda case: run_case(case, device, args.quick), args.json, "eval_grid", device)
    print()
    print(tables([r for r in results if "error" not in r]))
    print()
    print(precision_table([r for r in results if "error" not in r]))
    print(error_rows(results))
    return results


if __name__ == "__main__":
    main()
