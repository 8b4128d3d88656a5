"""The training process: `python -m pipelines.train_child`, launched by the `adapters` asset
through Dagster Pipes. Its log lines stream into the Dagster run; a crash or an
out-of-memory kill fails the asset's step, not the orchestrator. It needs only the small
`dagster-pipes` package, so the same entry point runs on a separate training machine.

With `train.devices` × `train.nodes` > 1 this process launches the ranks under torchrun
(`torch.distributed.run`, in this process) as `python -m pipelines.train_child --rank
<run>/launch.json`, and forwards to the Dagster run every rank's first line and rank 0's
lines (`<run>/ranks/rank-<r>.log`). A rank that fails ends them all; the message names it.
Another machine of a several-node run starts its ranks with
`python -m pipelines.train_child --node-rank <n> <run>/launch.json` (docs/deploy.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
from pathlib import Path

import pandas as pd
from dagster_pipes import open_dagster_pipes

from tunesmith import families
from tunesmith.backends.placement import Placement
from tunesmith.store.atomic import DiskFull, atomic_write_json
from tunesmith.train import distributed, loop
from tunesmith.train.config import ConfigError, resolve_run, world_size
from tunesmith.train.state import ResumeError
from tunesmith.train.trainer import TrainingError

# Stops a person can act on: their one-line message is handed to the asset (error.json).
EXPECTED = (DiskFull, TrainingError, ResumeError, ConfigError, MemoryError)


def main(argv: list[str] | None = None) -> int:
    """0 when trained; 1 on a stop a person can act on, its reason written for the asset (no
    traceback: the asset reports the one line). Anything else raises as usual."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--rank"]:
        return rank_main(Path(argv[1]))
    if argv[:1] == ["--node-rank"]:  # this machine's ranks of a several-node run
        extras = json.loads(Path(argv[2]).read_text(encoding="utf-8"))
        try:
            launch(extras, int(argv[1]), print)
        except EXPECTED as exc:
            print(str(exc) or type(exc).__name__, file=sys.stderr)
            return 1
        return 0
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
    if world_size(run.train) > 1:
        launch(extras, 0, pipes.log.info)
        result = json.loads(Path(extras["result_path"]).read_text(encoding="utf-8"))
        pipes.log.info(
            f"{run.name}: done on {world_size(run.train)} processes, best validation loss "
            f"{result['best_loss']:.6f} at step {result['best_step']} "
            f"(base {result['base_loss']:.6f})"
        )
        return
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


# --- several processes ---------------------------------------------------------------------


def torchrun_args(train, node_rank: int, launch_path: Path) -> list[str]:
    """torchrun's command line for this machine's ranks of a run."""
    if train.nodes == 1:
        where = ["--standalone"]  # one machine: a free port on localhost
    else:
        host, _, port = train.master_addr.partition(":")
        where = ["--nnodes", str(train.nodes), "--node-rank", str(node_rank),
                 "--master-addr", host, "--master-port", port or "29500"]  # fmt: skip
    return [*where, "--nproc-per-node", str(train.devices), "--max-restarts", "0",
            "--module", "pipelines.train_child", "--rank", str(launch_path)]  # fmt: skip


def launch(extras: dict, node_rank: int, log) -> None:
    """Train one run on `train.devices` processes of this machine (node `node_rank`) under
    torchrun; raises TrainingError naming the rank where one fails."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args
    from torch.distributed.run import run as torchrun

    run = resolve_run(extras["run"], Path(extras["config_source"]), 0)
    run_dir = Path(extras["run_dir"])
    ranks = run_dir / "ranks"
    launch_path = run_dir / "launch.json"
    if node_rank == 0:  # the first machine clears the last launch's lines and says what to run
        ranks.mkdir(parents=True, exist_ok=True)
        for old in ranks.glob("rank-*"):
            old.unlink()
        atomic_write_json(launch_path, extras)
    log(f"{run.name}: {run.train.devices} process(es) on node {node_rank} of {run.train.nodes} "
        f"under torchrun, {world_size(run.train)} in all")  # fmt: skip
    args = parse_args(torchrun_args(run.train, node_rank, launch_path))
    forward = _Forward(ranks, log)
    forward.start()
    try:
        torchrun(args)
    except ChildFailedError as exc:
        raise TrainingError(f"{run.name}: {_failed(exc, ranks)}") from None
    finally:
        forward.finish()


def rank_main(launch_path: Path) -> int:
    """One rank under torchrun: join the group, train, rank 0 writes the result."""
    extras = json.loads(launch_path.read_text(encoding="utf-8"))
    run_dir = Path(extras["run_dir"])
    chosen = Placement(**extras["placement"], reason="chosen by the asset")
    device = distributed.start(chosen.device)
    placement = Placement(chosen.backend, device, chosen.dtype, chosen.reason)
    rank, world = distributed.rank_and_world()
    lines = run_dir / "ranks" / f"rank-{rank}.log"
    lines.parent.mkdir(parents=True, exist_ok=True)
    with open(lines, "a", encoding="utf-8") as out:

        def log(line: str) -> None:
            out.write(line + "\n")
            out.flush()

        log(f"rank {rank} of {world} on {socket.gethostname()} (pid {os.getpid()}, "
            f"{placement}) started")  # fmt: skip
        try:
            rank_train(extras, placement, log)
        except EXPECTED as exc:
            reason = str(exc) or type(exc).__name__
            with contextlib.suppress(OSError):
                lines.with_suffix(".error").write_text(reason, encoding="utf-8")
            log(reason)
            return 1
        finally:
            distributed.stop()
    return 0


def rank_train(extras: dict, placement: Placement, log) -> None:
    run = resolve_run(extras["run"], Path(extras["config_source"]), 0)
    items = pd.DataFrame(extras["items"])
    run_dir = Path(extras["run_dir"])
    make = families.get(run.family).trainer(placement.backend)
    trainer = make(run, Path(extras["checkpoint"]), items, run_dir, placement, extras["metadata"])
    if not getattr(trainer, "data_parallel", False):  # a family may pick its trainer by run
        raise ConfigError(
            f"{run.name}: the {run.family} trainer on {placement.backend} trains on one process; "
            "set train.devices and train.nodes to 1"
        )
    if not distributed.is_main():
        loop.train(trainer, run_dir)
        return
    with open(run_dir / "train.log", "a", encoding="utf-8") as progress:
        result = loop.train(trainer, run_dir, log=log, progress=progress)
    document = {**result.as_dict(), "placement": str(placement), "family": run.family,
                "world_size": distributed.rank_and_world()[1]}  # fmt: skip
    atomic_write_json(Path(extras["result_path"]), document)


class _Forward(threading.Thread):
    """Forwards the ranks' lines to `log` while they train: each rank's first line, and all of
    rank 0's."""

    def __init__(self, ranks: Path, log) -> None:
        super().__init__(daemon=True)
        self.ranks, self.log = ranks, log
        self.read: dict[Path, int] = {}  # bytes forwarded or passed over, per rank's file
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            self.forward()

    def finish(self) -> None:
        self.done.set()
        self.join()
        self.forward()

    def forward(self) -> None:
        for path in sorted(self.ranks.glob("rank-*.log")):
            rank, start = int(path.stem.split("-")[1]), self.read.get(path, 0)
            with contextlib.suppress(OSError), open(path, "rb") as text:
                text.seek(start)
                chunk = text.read()
            end = chunk.rfind(b"\n") + 1  # whole lines only
            lines = chunk[:end].decode("utf-8", "replace").splitlines()
            for number, line in enumerate(lines):
                if rank == 0:
                    self.log(line)
                elif start == 0 and number == 0:
                    self.log(f"[rank {rank}] {line}")
            self.read[path] = start + end


def _failed(exc, ranks: Path) -> str:
    """Which rank failed and how, in one line: a rank's own reason where it wrote one, else a
    signal that ended it, else its exit code; the ranks that failed in its wake after it."""
    failures = exc.failures
    own = {r: ranks / f"rank-{r}.error" for r in failures}
    own = {r: p.read_text(encoding="utf-8") for r, p in own.items() if p.exists()}

    def order(rank: int) -> tuple[int, float, int]:
        f = failures[rank]
        return (0 if rank in own else 1 if f.exitcode < 0 else 2), f.timestamp, rank

    parts = []
    for rank in sorted(failures, key=order):
        f = failures[rank]
        if rank in own:
            how = f"stopped: {own[rank]}"
        elif f.exitcode < 0:
            how = f"was ended by {f.signal_name()}"
        else:
            how = f"exited with code {f.exitcode} (its traceback is in the run's log)"
        parts.append(f"training rank {rank} (local rank {f.local_rank}, pid {f.pid}) {how}")
    more = f"; {len(parts) - 3} more rank(s) failed" if len(parts) > 3 else ""
    return "; ".join(parts[:3]) + more


if __name__ == "__main__":
    sys.exit(main())
