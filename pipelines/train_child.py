"""The training process: `python -m pipelines.train_child`, launched by the `adapters` asset
through Dagster Pipes. Its log lines stream into the Dagster run; a crash or an
out-of-memory kill fails the asset's step, not the orchestrator. It needs only the small
`dagster-pipes` package, so the same entry point runs on a separate training machine.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import pandas as pd
from dagster_pipes import open_dagster_pipes

from tunesmith import families
from tunesmith.backends.placement import Placement
from tunesmith.store.atomic import DiskFull, atomic_write_json
from tunesmith.train import loop
from tunesmith.train.config import ConfigError, resolve_run
from tunesmith.train.state import ResumeError
from tunesmith.train.trainer import TrainingError

# Stops a person can act on: their one-line message is handed to the asset (error.json).
EXPECTED = (DiskFull, TrainingError, ResumeError, ConfigError, MemoryError)


def main() -> int:
    """0 when trained; 1 on a stop a person can act on, its reason written for the asset (no
    traceback: the asset reports the one line). Anything else raises as usual."""
    with open_dagster_pipes() as pipes:
        extras = pipes.extras
        try:
            train(pipes, extras)
        except EXPECTED as exc:
            reason = str(exc) or type(exc).__name__
            with contextlib.suppress(OSError):  # the disk may be the problem
                Path(extras["error_path"]).write_text(json.dumps({"error": reason}))
            pipes.log.error(reason)
            return 1
    return 0


def train(pipes, extras: dict) -> None:
    run = resolve_run(extras["run"], Path(extras["config_source"]), 0)
    placement = Placement(**extras["placement"], reason="chosen by the asset")
    items = pd.DataFrame(extras["items"])
    run_dir = Path(extras["run_dir"])
    run_dir.mkdir(parents=True, exist_ok=True)
    make = families.get(run.family).trainer(placement.backend)
    trainer = make(run, Path(extras["checkpoint"]), items, run_dir, placement, extras["metadata"])
    # underfit's progress bar goes to train.log; validation lines go to the Dagster run.
    with open(run_dir / "train.log", "a", encoding="utf-8") as progress:
        result = loop.train(trainer, run_dir, log=pipes.log.info, progress=progress)
    document = {**result.as_dict(), "placement": str(placement), "family": run.family}
    atomic_write_json(Path(extras["result_path"]), document)
    pipes.log.info(
        f"{run.name}: done, best validation loss {result.best_loss:.6f} at step "
        f"{result.best_step} (base {result.base_loss:.6f})"
    )


if __name__ == "__main__":
    sys.exit(main())
