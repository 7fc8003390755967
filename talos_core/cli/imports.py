"""``talos import``: checkpoints fine-tuned elsewhere become runs of method ``imported`` (:mod:`talos_core.importing`).

Example::

    talos import --model tiny-clip --task digits ckpt/digits --method-label my-ft --store runs
    talos import --manifest checkpoints.json --store runs   # [{"model", "task", "path", "label"?}, ...] or a CSV
"""

from __future__ import annotations

import argparse

from talos_core.cli.common import add_store_argument
from talos_core.errors import TalosError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import", help="turn fine-tuned checkpoints into runs (method imported, τ = θ_ft − θ0 of a registered base)",
        description="Import a checkpoint fine-tuned elsewhere as a run of method 'imported' whose task vector is "
                    "θ_ft − θ0 for the base model, so every protocol and dashboard page works on it (evaluate it with "
                    "--method imported; --option label=NAME picks one label when a store holds several). Formats: a "
                    "transformers model folder (save_pretrained; CLIP vision towers are mapped onto open_clip), an "
                    "open_clip / timm / transformers state dict in .safetensors, or a .pt/.pth/.bin/.ckpt read with "
                    "torch.load(weights_only=True). Nothing is written when a check fails.")
    p.add_argument("path", nargs="?", help="the checkpoint: a model folder or a state dict file")
    p.add_argument("--model", help="the registered base model it was fine-tuned from (see `talos models`)")
    p.add_argument("--task", help="the task it was fine-tuned on (see `talos tasks`; or csv:PATH, images:DIR, hf:ID)")
    p.add_argument("--method-label", default=None,
                   help="label recorded with the run (default: the checkpoint's file or folder name)")
    p.add_argument("--manifest", default=None,
                   help="import many: a .json list of {model, task, path, label} objects or a .csv with those columns "
                        "(paths relative to the file); every entry is checked before any is written")
    add_store_argument(p)
    p.add_argument("--force", action="store_true", help="import again even if the store has this run")
    p.set_defaults(handler=_import)


def _import(args: argparse.Namespace) -> int:
    from talos_core.importing import ImportRequest, import_many, read_import_manifest
    from talos_core.store import Store

    if args.manifest:
        given = [f for f, v in (("PATH", args.path), ("--model", args.model), ("--task", args.task),
                                ("--method-label", args.method_label)) if v]
        if given:
            raise TalosError(f"--manifest lists every checkpoint with its model, task and label; drop {given[0]}")
        reqs = read_import_manifest(args.manifest)
    else:
        lacking = [f for f, v in (("PATH", args.path), ("--model", args.model), ("--task", args.task)) if not v]
        if lacking:
            raise TalosError(f"talos import needs {lacking[0]}: talos import --model MODEL --task TASK PATH "
                             f"[--method-label NAME], or talos import --manifest FILE")
        reqs = [ImportRequest(args.model, args.task, args.path, args.method_label)]
    for res in import_many(reqs, Store(args.store), force=args.force):
        run, m = res.run, res.run.manifest
        if res.reused:
            print(f"already imported: run {run.id} -> {run.path} (same checkpoint, model, task and label; --force "
                  f"imports it again)")
            continue
        print(f"imported run {run.id} -> {run.path} (label {m.info.get('label')}, {m.info.get('layout')}; "
              f"{m.metrics['vector_nnz']:,} of {m.metrics['theta_numel']:,} entries changed)")
        for note in res.notes:
            print(f"  note: {note}")
    return 0
