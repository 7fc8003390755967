"""``talos merge``: the edited model ``θ0 + Σ α τ_t − α τ_c`` out of a store, as a standard checkpoint
(:mod:`talos_core.export_model`)."""

from __future__ import annotations

import argparse

from talos_core.cli.common import add_store_argument, check_sparsity_flag, folder, number, option
from talos_core.errors import check_range
from talos_core.methods.finetuning import SPARSITY


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "merge", help="write θ0 + Σ α τ (− α τ for --negate) from a store's runs as a standard checkpoint",
        description="Write the edited model θ0 + Σ_t α_t τ_t − Σ_c α_c τ_c of the store's runs (never fine-tunes), or "
                    "θ0 + α·merge(τ_1, …, τ_T) of a post-hoc method over the nonlinear runs, as a checkpoint the "
                    "model's own library loads: save_pretrained safetensors for transformers models, an open_clip "
                    "state dict + open_clip_config.json for CLIP, a timm state dict for CNNs; "
                    "with each task's frozen head, a model card README.md and SHA256SUMS. α is applied as given "
                    "(the 1/(1-k) stretch of sparse methods' α grid is not applied).")
    p.add_argument("--model", required=True, help="model name (see `talos models`)")
    p.add_argument("--tasks", default="", help="tasks whose vectors are added, comma-separated")
    p.add_argument("--negate", default="", help="tasks whose vectors are subtracted, comma-separated")
    p.add_argument("--method", default="talos",
                   help="fine-tuning method of the runs (default: talos), or a post-hoc merge (tsv, iso_c, ties, …) "
                        "of the store's nonlinear runs, added with one α (task addition only)")
    p.add_argument("--alpha", required=True,
                   help="one coefficient for every task (e.g. 0.6), or TASK=α pairs (e.g. a=0.5,b=0.3,c=1); "
                        "negated tasks take their α with a minus sign")
    p.add_argument("--sparsity", type=number, default=None,
                   help="pick the runs of this sparsity "
                        f"(sparse methods; default: the runs' default {SPARSITY.default:g})")
    p.add_argument("--option", type=option, action="append", default=[],
                   help="pick the runs with this method option KEY=VALUE; repeatable")
    p.add_argument("--hparam", type=option, action="append", default=None,
                   help="post-hoc methods: hyperparameter KEY=VALUE (e.g. beta=0.5); repeatable; default: those the "
                        "store's addition result of these tasks chose on validation, else the method's defaults")
    add_store_argument(p, help="results store holding the runs")
    p.add_argument("--out", type=folder, required=True, help="new (or empty) folder to write the checkpoint into")
    p.set_defaults(handler=_merge)


def _names(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t.strip())


def _merge(args: argparse.Namespace) -> int:
    from talos_core.export_model import MergeRequest, check_out, check_request, export_merge, parse_alphas

    check_sparsity_flag(args.sparsity, args.method)
    tasks, negate = _names(args.tasks), _names(args.negate)
    overrides: dict = {}
    if args.sparsity is not None:
        overrides["sparsity"] = check_range("--sparsity", args.sparsity, 0.0, 1.0)
    if args.option:
        overrides["options"] = dict(args.option)
    req = MergeRequest(model=args.model, tasks=tasks, method=args.method, negate=negate,
                       alphas=parse_alphas(args.alpha, tasks, negate), overrides=overrides,
                       hyperparameters=dict(args.hparam) if args.hparam is not None else None)
    check_request(req)
    check_out(args.out)
    result = export_merge(args.store, req, args.out)
    print(f"wrote {result.out} ({len(result.files)} files, {result.family}); load with: {result.loader}")
    for t, rid in result.runs.items():
        print(f"  {t}: run {rid}")
    test = [r for r in result.accuracies if r.get("split") == "test" and r.get("accuracy") is not None]
    if test:
        print("  store's test accuracy of this mix: " + ", ".join(
            f"{r['task']} ({r['role']}) {100 * float(r['accuracy']):.2f}%" for r in test))
    else:
        print("  the store holds no evaluation of exactly this mix (see README.md in the folder)")
    return 0
