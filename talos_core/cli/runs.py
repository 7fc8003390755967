"""``talos finetune``, ``talos runs`` and ``talos export``: runs in a store."""

from __future__ import annotations

import argparse

from talos_core.cli.common import add_run_arguments, add_store_argument, folder, print_table, request_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("finetune", help="calibrate (if needed) + fine-tune + evaluate one run into a store")
    add_run_arguments(p)
    p.set_defaults(handler=_finetune)
    p = sub.add_parser("runs", help="list the runs in a store (and the corrupt ones; exit status 1 when any is)")
    add_store_argument(p)
    p.add_argument("--verify", action="store_true",
                   help="also check every run's artifacts against the SHA-256 its manifest records (reads them all)")
    p.add_argument("--record-checksums", action="store_true",
                   help="first record in every manifest the SHA-256 it lacks (runs of the older format talos-run/1): "
                        "the files as they are now, so only on a store you trust; absent files are recorded as not "
                        "kept")
    p.set_defaults(handler=_runs)
    p = sub.add_parser("export", help="copy a store's results and run manifests (no weights) into another store")
    p.add_argument("--store", type=folder, required=True, help="source store")
    p.add_argument("--to", type=folder, required=True, help="destination store (e.g. cached_results)")
    p.add_argument("--artifacts", action="store_true", help="also copy task vectors and masks (large)")
    p.add_argument("--referenced-only", action="store_true",
                   help="copy only the runs that some result refers to")
    p.add_argument("--replace", action="store_true",
                   help="re-ship suites: first remove the destination's results of every suite (and model) the "
                        "source has results of, then the runs no remaining result refers to")
    p.set_defaults(handler=_export)


def _finetune(args: argparse.Namespace) -> int:
    from talos_core.pipeline import run_finetune
    from talos_core.store import Store

    req = request_from_args(args)
    req.validate()
    run = run_finetune(req, Store(args.store), force=args.force, progress=not args.quiet)
    m = {k: float("nan") for k in ("zero_shot_test_acc", "finetuned_test_acc")} | run.manifest.metrics
    print(f"run {run.id} -> {run.path}")
    line = f"zero-shot test acc {m['zero_shot_test_acc']:.4f} | fine-tuned test acc {m['finetuned_test_acc']:.4f}"
    if "mask_density" in m:
        line += f" | mask density {m['mask_density']:.4f}"
        if m.get("mask_moved") is not None:
            line += f" | moved {m['mask_moved']:.4f}"
    print(line)
    from talos_core.evaluation.maskstats import mask_diagnostics, mask_warnings

    for warning in mask_warnings(mask_diagnostics(m, run.manifest.info)):
        print(f"warning: {warning}")
    return 0


def _runs(args: argparse.Namespace) -> int:
    from talos_core.errors import TalosError
    from talos_core.store import Store

    store = Store(args.store)
    if not store.root.exists():
        raise TalosError(f"store {store.root} does not exist; pass --store with a results store folder")
    if not store.root.is_dir():
        raise TalosError(f"store {store.root} is a file; --store must name a results store folder")
    if not (store.root / "runs").is_dir() and not (store.root / "store.json").exists():
        raise TalosError(f"{store.root} is not a results store (no store.json or runs/ folder); pass --store "
                         f"with a results store folder")
    if args.record_checksums:
        from talos_core.store import record_checksums

        done = record_checksums(store)
        for rid, what in done:
            print(f"recorded the checksums of run {rid}: {what}")
        print(f"{len(done)} manifest(s) updated; every other manifest already records its checksums")
    table = store.run_table()
    if table.empty:
        print(f"no runs in {args.store}")
    else:
        print_table(table)
    corrupt = store.corrupt_runs()
    if args.verify:
        corrupt += [(run.id, problem) for run in store.runs() for problem in run.verify()]
    if corrupt:
        print(f"{len(corrupt)} corrupt run(s), not used by any command (fine-tune them again, or delete the folders):")
        for rid, problem in corrupt:
            print(f"  CORRUPT {rid}: {problem}")
        return 1
    return 0


def _export(args: argparse.Namespace) -> int:
    from talos_core.store import export_store

    counts = export_store(args.store, args.to, artifacts=args.artifacts, referenced_only=args.referenced_only,
                          replace=args.replace)
    if args.replace:
        print(f"removed {counts['removed_results']} result files of the re-shipped suites and "
              f"{counts['removed_runs']} runs no result refers to from {args.to}")
    print(f"exported {counts['results']} result files, {counts['manifests']} run manifests, "
          f"{counts['artifacts']} artifacts from {args.store} to {args.to}")
    return 0
