"""The `tunesmith` command: what people do by hand, on the code path the UI uses.

    tunesmith run [DATASET...]   register partitions and materialize every stage
    tunesmith status [DATASET...]  per dataset and stage: fresh, skipped, stale or missing, and why;
                                 running or waiting while a build is at work
    tunesmith status DATASET --review  the label values listed for review (labels stage)
    tunesmith ui                 the Dagster UI (`dagster dev`) on 127.0.0.1
    tunesmith examples           write the example datasets
    tunesmith check [DATASET...]   validate tunesmith.toml and the base models, build nothing
    tunesmith verify [DATASET...]  check every cached file's hash; damaged entries are removed
    tunesmith gc [--dry-run]     remove store entries no current materialization uses
    tunesmith gc --runs [--dry-run]  remove run folders the last build listed as superseded
    tunesmith adapters [DATASET...] [--json]  every trained adapter, the file for each tool
    tunesmith render DATASET RUN --prompt TEXT [--prompt TEXT ...]  render with a run's
                                 trained adapter, no build (pipelines/render.py)
    tunesmith ratings DATASET FILE  hand back the blind choices an audition page exported,
                                 counted by the next build (pipelines/ratings.py)
    tunesmith import-kohya CONFIG [DATASET_CONFIG] [--out PATH] [--force]  a kohya SDXL LoRA
                                 run as the dataset's tunesmith.toml (pipelines/import_kohya.py)

Runs are recorded in DAGSTER_HOME (default `data/dagster_home`), so the UI shows them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipelines import import_kohya  # the standard library only until it runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tunesmith", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="materialize every stage of the datasets")
    run.add_argument("datasets", nargs="*", help="dataset folder names or partition keys")
    status = sub.add_parser(
        "status", help="fresh, skipped, stale or missing, per dataset and stage"
    )
    status.add_argument("datasets", nargs="*")
    status.add_argument(
        "--review", action="store_true", help="print the labels listed for review instead"
    )
    ui = sub.add_parser("ui", help="start the Dagster UI on 127.0.0.1")
    ui.add_argument("--port", type=int, default=3000)
    verify = sub.add_parser("verify", help="check the hashes of every cached file")
    verify.add_argument("datasets", nargs="*")
    check = sub.add_parser("check", help="validate tunesmith.toml and base models, build nothing")
    check.add_argument("datasets", nargs="*")
    examples = sub.add_parser("examples", help="write the example datasets")
    examples.add_argument("--to", type=Path, default=None, help="default: the datasets root")
    gc = sub.add_parser("gc", help="remove unreferenced store entries")
    gc.add_argument("--dry-run", action="store_true")
    gc.add_argument(
        "--runs",
        action="store_true",
        help="instead: remove the run folders of earlier settings the last build listed",
    )
    render = sub.add_parser(
        "render",
        help="render prompts with a run's trained adapter, without a build",
        description="Render each --prompt with the run's best adapter (or --step's), loading "
        "the model once, into the run's folder: renders/<prompt>-seed<N>-s<strength>. Settings "
        "not given are the run's first demo's.",
    )
    render.add_argument("dataset", help="dataset folder name, partition key or path")
    render.add_argument("run", help="the run's name in tunesmith.toml")
    render.add_argument(
        "--prompt",
        action="append",
        required=True,
        help='repeat for several; "{trigger}" is the run\'s trigger word',
    )
    render.add_argument("--strength", type=float, help="adapter strength (0: the base model)")
    render.add_argument("--seed", type=int)
    render.add_argument("--steps", type=int, help="inference steps")
    render.add_argument("--duration", type=float, help="seconds (audio families)")
    render.add_argument(
        "--step", type=int, help="the adapter file of this training step instead of the best"
    )
    listing = sub.add_parser(
        "adapters", help="every trained adapter, and the file to hand each tool"
    )
    listing.add_argument("datasets", nargs="*")
    listing.add_argument("--json", action="store_true", help="as JSON")
    ratings = sub.add_parser(
        "ratings",
        help="hand back the blind choices an audition page exported",
        description="Copy FILE (an audition page's Export choices) into its run's folder "
        "(ratings/<sha256>.json), where the next build's auditions stage counts it per step; "
        "the same file twice counts once.",
    )
    ratings.add_argument("dataset", help="dataset folder name, partition key or path")
    ratings.add_argument("file", help="the exported JSON (audition-<run>.json)")
    import_kohya.add_parser(sub)
    args = parser.parse_args(argv)

    if args.command == "examples":
        return _examples(args.to)
    if args.command == "gc":
        return _gc(args.dry_run, args.runs)
    if args.command == "adapters":
        from pipelines.listing import adapters

        return adapters(args.datasets, args.json)
    if args.command == "import-kohya":
        return import_kohya.run(args)
    if args.command == "ratings":
        from pipelines.ratings import ratings as hand_back

        return hand_back(args.dataset, args.file)
    if args.command == "render":
        from pipelines import render as rendering

        settings = ("strength", "seed", "steps", "duration", "step")
        return rendering.render(
            args.dataset, args.run, args.prompt, **{k: getattr(args, k) for k in settings}
        )
    from pipelines import operations

    if args.command == "ui":
        return operations.ui(args.port)
    if args.command == "run":
        return operations.run(args.datasets)
    if args.command == "verify":
        return operations.verify(args.datasets)
    if args.command == "check":
        return operations.check(args.datasets)
    if args.review:
        return operations.review(args.datasets)
    from pipelines import status

    return status.status(args.datasets)


def _examples(to: Path | None) -> int:
    from tunesmith.config import Roots
    from tunesmith.examples import make_examples
    from tunesmith.store.verdicts import RECORD

    roots = Roots.from_env()
    datasets = (to or roots.datasets).absolute()
    for name, folder in make_examples(datasets, roots.models, roots.store / RECORD).items():
        print(f"example {name}: {folder}")
    return 0


def _gc(dry_run: bool, runs: bool) -> int:
    from tunesmith.config import Roots
    from tunesmith.store import Store

    if runs:
        from tunesmith.train.stage import remove_superseded

        verb = "would remove" if dry_run else "removed"
        removed = remove_superseded(Roots.from_env().out, dry_run=dry_run)
        for folder, size in removed:
            print(f"{verb} {folder} ({size / 1e6:.1f} MB)")
        print(json.dumps({verb: len(removed), "bytes": sum(size for _, size in removed)}))
        return 0
    result = Store(Roots.from_env().store).gc(dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    print(json.dumps({verb: result.removed, "kept": result.kept, "bytes": result.bytes_freed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
