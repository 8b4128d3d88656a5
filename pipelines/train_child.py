"""The training process: `python -m pipelines.train_child`, launched by the `adapters` asset
through Dagster Pipes. Its log lines stream into the Dagster run; a crash or an
out-of-memory kill fails the asset's step, not the orchestrator. It needs only the small
`dagster-pipes` package, so the same entry point runs on a separate training machine. The run
comes as the build's plan holds it (`tunesmith.train.config.run_document`), resolved once
by the build: the process rebuilds it and reads no `tunesmith.toml`.

With `train.devices` × `train.nodes` > 1 this process launches the ranks under torchrun
(`torch.distributed.run`, in this process) as `python -m pipelines.train_child --rank
<run>/launch.json`, and forwards to the Dagster run every rank's first line and rank 0's
lines (`<run>/ranks/rank-<r>.log`). A rank that fails ends them all; the message names it.
Another machine of a several-node run starts its ranks with
`python -m pipelines.train_child --node-rank <n> <run>/launch.json` (docs/deploy.md).

On the MLX backend the ranks are started by `mlx.launch --backend ring -n <devices>` (the
console script beside this Python, else on PATH) on this machine only; its report of each
rank's end names the rank that failed.

A run that keeps its adapter by a measure of its renders (`train.select` other than "loss")
gets `quality` in its extras (the embedding models, items and store the adapters stage
measures with): this process (rank 0) then measures each validation's samples as the loop
draws them (`tunesmith.quality.select.StepScore`) and, once the loop has ended, writes every
step's measures to the run's quality.json and events, which the stage reads back.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import traceback
from pathlib import Path

import pandas as pd
from dagster_pipes import open_dagster_pipes

from tunesmith import family as families
from tunesmith.adapters.svd_bases import BasesError
from tunesmith.adapters.targets import TargetSelectionError
from tunesmith.adapters.torch_lora import AdapterError
from tunesmith.backends.placement import Placement
from tunesmith.config import ROOTS
from tunesmith.quality.select import StepScore
from tunesmith.store.atomic import DiskFull, atomic_write_json
from tunesmith.train import distributed, loop
from tunesmith.train.config import ConfigError, run_from_document, world_size
from tunesmith.train.state import ResumeError
from tunesmith.train.trainer import TrainingError

# Stops a person can act on: their one-line message is handed to the asset (error.json).
# Stops a person can act on: a full disk, a run that cannot train as set (its layers, its
# adapter type on this backend, an -xs rank above a layer's size), an interrupted resume.
EXPECTED = (
    DiskFull,
    TrainingError,
    ResumeError,
    ConfigError,
    MemoryError,
    AdapterError,
    BasesError,
    TargetSelectionError,
)


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
            return _stopped(pipes, extras, str(exc) or type(exc).__name__)
        except KeyboardInterrupt:  # the build is being stopped (it says so itself)
            return _stopped(pipes, extras, "stopped by a signal")
        except Exception as exc:  # a defect, not a stop a person can act on
            return _stopped(pipes, extras, _defect(exc, Path(extras["run_dir"]) / "error.log"))
    return 0


def _stopped(pipes, extras: dict, reason: str) -> int:
    """Hand the one-line reason to the asset (error.json) and the Dagster run; exit 1."""
    with contextlib.suppress(OSError):  # the disk may be the problem
        Path(extras["error_path"]).write_text(json.dumps({"error": reason}))
    pipes.log.error(reason)
    return 1


def _defect(exc: Exception, log: Path) -> str:
    """One line for an error no check foresaw; its traceback goes to `log` (the run's
    error.log), where a bug report can take it from."""
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join(traceback.format_exception(exc)), encoding="utf-8")
        where = f"the traceback is in {log}"
    except OSError:
        where = "its traceback could not be written"
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return f"training failed on an unexpected error ({type(exc).__name__}: {first}); {where}"


def train(pipes, extras: dict) -> None:
    run = run_from_document(extras["run"])
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
    _use_store(extras)
    items = pd.DataFrame(extras["items"])
    run_dir = Path(extras["run_dir"])
    run_dir.mkdir(parents=True, exist_ok=True)
    make = families.get(run.family).trainer(placement.backend)
    trainer = make(run, Path(extras["base_model"]), items, run_dir, placement, extras["metadata"])
    score = _scorer(run, extras, pipes.log.info)
    # underfit's progress bar goes to train.log; validation lines go to the Dagster run.
    with open(run_dir / "train.log", "a", encoding="utf-8") as progress:
        result = loop.train(trainer, run_dir, log=pipes.log.info, progress=progress, score=score)
    if score is not None:
        score.finish()
    document = {**result.as_dict(), "placement": str(placement), "family": run.family}
    atomic_write_json(Path(extras["result_path"]), document)
    pipes.log.info(
        f"{run.name}: done, best validation loss {result.best_loss:.6f} at step "
        f"{result.best_step} (base {result.base_loss:.6f})"
    )


def _scorer(run, extras: dict, log):
    """The loop's `score` where the run keeps its adapter by a measure (`train.select`), made
    from what the adapters stage measures with; None where it keeps by the loss."""
    if run.train.select == "loss" or not extras.get("quality"):
        return None
    family = families.get(run.family)
    return StepScore(run, family, Path(extras["run_dir"]), extras["quality"], log)


# --- several processes ---------------------------------------------------------------------


def torchrun_args(train, node_rank: int, launch_path: Path) -> list[str]:
    """torchrun's command line for this machine's ranks of a run."""
    if train.nodes == 1:
        where = ["--standalone"]  # one machine: a free port on localhost
    else:
        host, _, port = train.master_addr.partition(":")
        where = [
            "--nnodes",
            str(train.nodes),
            "--node-rank",
            str(node_rank),
            "--master-addr",
            host,
            "--master-port",
            port or "29500",
        ]
    return [
        *where,
        "--nproc-per-node",
        str(train.devices),
        "--max-restarts",
        "0",
        "--module",
        "pipelines.train_child",
        "--rank",
        str(launch_path),
    ]


def launch(extras: dict, node_rank: int, log) -> None:
    """Train one run on `train.devices` processes of this machine (node `node_rank`) under
    torchrun; raises TrainingError naming the rank where one fails."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args
    from torch.distributed.run import run as torchrun

    run = run_from_document(extras["run"])
    mlx = extras["placement"]["backend"] == "mlx"
    if mlx and run.train.nodes > 1:
        raise ConfigError(
            f"{run.name}: the MLX backend trains on one machine (mlx.launch's ring on this "
            f"host): set train.nodes to 1, got {run.train.nodes}"
        )
    run_dir = Path(extras["run_dir"])
    ranks = run_dir / "ranks"
    launch_path = run_dir / "launch.json"
    if node_rank == 0:  # the first machine clears the last launch's lines and says what to run
        ranks.mkdir(parents=True, exist_ok=True)
        for old in ranks.glob("rank-*"):
            old.unlink()
        atomic_write_json(launch_path, extras)
    launcher = "mlx.launch" if mlx else "torchrun"
    log(
        f"{run.name}: {run.train.devices} process(es) on node {node_rank} of {run.train.nodes} "
        f"under {launcher}, {world_size(run.train)} in all"
    )
    forward = _Forward(ranks, log)
    forward.start()
    try:
        if mlx:
            mlx_launch(run, launch_path, ranks)
        else:
            torchrun(parse_args(torchrun_args(run.train, node_rank, launch_path)))
    except ChildFailedError as exc:
        raise TrainingError(f"{run.name}: {_failed(exc, ranks)}") from None
    finally:
        forward.finish()


# mlx.launch's line as a rank ends other than by completing (its stderr, in colour codes).
_MLX_END = re.compile(r"Node with rank (\d+) (?:exited with code (-?\d+)|was killed)")


def mlx_launcher() -> str | None:
    """The mlx.launch console script beside this Python, else on PATH (`python -m` has no
    such module); None where mlx is installed without it."""
    beside = Path(sys.executable).with_name("mlx.launch")
    return str(beside) if beside.exists() else shutil.which("mlx.launch")


def mlx_launch_args(devices: int, port: int, launch_path: Path) -> list[str]:
    """mlx.launch's command line for a run's ranks on this machine (the ring backend)."""
    launcher = mlx_launcher()
    if launcher is None:
        raise TrainingError("mlx.launch is not installed beside this Python nor on PATH")
    return [
        launcher,
        "--backend",
        "ring",
        "-n",
        str(devices),
        "--starting-port",
        str(port),
        "--",
        sys.executable,
        "-m",
        "pipelines.train_child",
        "--rank",
        str(launch_path),
    ]


def mlx_launch(run, launch_path: Path, ranks: Path) -> None:
    """The ranks under mlx.launch; raises TrainingError naming the rank where one fails.

    mlx.launch exits 0 whatever its ranks do and ends the others when one fails; it says on
    its stderr how each rank that did not complete ended, which is read here. Its other lines
    (the ranks' own stderr, tracebacks) go on to this process's stderr."""
    args = mlx_launch_args(run.train.devices, _free_ports(run.train.devices), launch_path)
    ended: dict[int, int | None] = {}  # rank → exit code (None: killed by mlx.launch)
    try:
        launcher = subprocess.Popen(args, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        raise TrainingError(f"{run.name}: cannot start mlx.launch ({exc})") from None
    with launcher:
        threading.Thread(target=_fill, args=(launcher.stdin.fileno(),), daemon=True).start()
        for line in launcher.stderr:
            text = line.decode("utf-8", "replace")
            found = _MLX_END.search(text)
            if found is None:
                sys.stderr.write(text)
            else:
                code = found.group(2)
                ended.setdefault(int(found.group(1)), None if code is None else int(code))
    failed = {rank: code for rank, code in ended.items() if code != 0}
    if failed:
        raise TrainingError(f"{run.name}: {_failed_mlx(failed, ranks)}")
    if launcher.returncode:
        raise TrainingError(f"{run.name}: mlx.launch exited with code {launcher.returncode}")


def _fill(stdin: int) -> None:
    """Fill the ranks' stdin pipes through mlx.launch's stdin (kept open until it ends).

    mlx.launch forwards its stdin to every rank, and its loop per rank waits on that rank's
    output and on room in its stdin pipe: while the pipe has room the loop never waits, and
    spins a core (95 % of one here, the ranks' time doubled on two cores). The ranks never
    read stdin, so once their pipes are full (64 KiB on Linux) it waits on their output
    alone. At end of file it would spin again, reading nothing: the pipe stays open."""
    with contextlib.suppress(OSError):  # mlx.launch ended before taking it all
        os.write(stdin, b"\n" * (1 << 18))


def _free_ports(count: int) -> int:
    """The first of `count` consecutive free ports on localhost: the ring's ranks listen on
    one each. mlx.launch's default start (32323) is fixed, so two runs on one machine would
    meet; torchrun's --standalone finds its own free port."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + count > 65536:
            continue
        held = []
        try:
            for port in range(first, first + count):
                held.append(socket.socket())
                held[-1].bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()


def _failed_mlx(failed: dict[int, int | None], ranks: Path) -> str:
    """`_failed` for mlx.launch: a rank's own reason first, then the others in the order they
    ended (the rank that failed first, then those ended in its wake)."""
    own = _own_reasons(ranks, failed)
    parts = [
        f"training rank {rank} (local rank {rank}, pid {_pid(ranks, rank)}) "
        + _how(own.get(rank), failed[rank])
        for rank in sorted(failed, key=lambda r: r not in own)  # stable: the order of ending
    ]
    return _one_line(parts)


def _pid(ranks: Path, rank: int) -> str:
    """A rank's pid from its first line (`rank 1 of 2 on host (pid 123, …) started`)."""
    with contextlib.suppress(OSError, IndexError):
        first = (ranks / f"rank-{rank}.log").read_text(encoding="utf-8").splitlines()[0]
        return first.split("(pid ")[1].split(",")[0]
    return "unknown"


def _use_store(extras: dict) -> None:
    """The stage's store root for what a trainer caches there (`Roots.from_env`): the
    asset's storage resource may name another root than this process's environment."""
    if extras.get("store"):
        os.environ[ROOTS["store"][0]] = extras["store"]


def rank_main(launch_path: Path) -> int:
    """One rank under torchrun or mlx.launch: join the group, train, rank 0 writes the
    result."""
    extras = json.loads(launch_path.read_text(encoding="utf-8"))
    run_dir = Path(extras["run_dir"])
    chosen = Placement(**extras["placement"], reason="chosen by the asset")
    if chosen.backend == "mlx":
        distributed.start_mlx()
        placement = chosen
    else:
        device = distributed.start(chosen.device)
        placement = Placement(chosen.backend, device, chosen.dtype, chosen.reason)
    rank, world = distributed.rank_and_world()
    lines = run_dir / "ranks" / f"rank-{rank}.log"
    lines.parent.mkdir(parents=True, exist_ok=True)
    with open(lines, "a", encoding="utf-8") as out:

        def log(line: str) -> None:
            out.write(line + "\n")
            out.flush()

        log(
            f"rank {rank} of {world} on {socket.gethostname()} (pid {os.getpid()}, "
            f"{placement}) started"
        )
        try:
            rank_train(extras, placement, log)
        except (KeyboardInterrupt, Exception) as exc:
            if isinstance(exc, EXPECTED):
                reason = str(exc) or type(exc).__name__
            elif isinstance(exc, KeyboardInterrupt):
                reason = "stopped by a signal"
            else:
                reason = _defect(exc, lines.with_suffix(".traceback"))
            with contextlib.suppress(OSError):
                lines.with_suffix(".error").write_text(reason, encoding="utf-8")
            log(reason)
            return 1
        finally:
            distributed.stop()
    return 0


def rank_train(extras: dict, placement: Placement, log) -> None:
    run = run_from_document(extras["run"])
    _use_store(extras)
    items = pd.DataFrame(extras["items"])
    run_dir = Path(extras["run_dir"])
    make = families.get(run.family).trainer(placement.backend)
    trainer = make(run, Path(extras["base_model"]), items, run_dir, placement, extras["metadata"])
    if not getattr(trainer, "data_parallel", False):  # a launch the adapters stage did not vet
        raise ConfigError(
            f"{run.name}: the {run.family} trainer on {placement.backend} trains on one process; "
            "set train.devices and train.nodes to 1"
        )
    if not distributed.is_main():
        loop.train(trainer, run_dir)
        return
    score = _scorer(run, extras, log)
    with open(run_dir / "train.log", "a", encoding="utf-8") as progress:
        result = loop.train(trainer, run_dir, log=log, progress=progress, score=score)
    if score is not None:
        score.finish()
    document = {
        **result.as_dict(),
        "placement": str(placement),
        "family": run.family,
        "world_size": distributed.rank_and_world()[1],
    }
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
    own = _own_reasons(ranks, failures)

    def order(rank: int) -> tuple[int, float, int]:
        f = failures[rank]
        return (0 if rank in own else 1 if f.exitcode < 0 else 2), f.timestamp, rank

    parts = [
        f"training rank {rank} (local rank {f.local_rank}, pid {f.pid}) "
        + _how(own.get(rank), f.exitcode)
        for rank, f in ((r, failures[r]) for r in sorted(failures, key=order))
    ]
    return _one_line(parts)


def _own_reasons(ranks: Path, which) -> dict[int, str]:
    """The reasons the ranks `which` wrote before they stopped (`rank-<r>.error`)."""
    own = {r: ranks / f"rank-{r}.error" for r in which}
    return {r: p.read_text(encoding="utf-8") for r, p in own.items() if p.exists()}


def _how(own: str | None, code: int | None) -> str:
    """How one rank ended: its own reason, else the signal or exit code (None: mlx.launch ended
    it without saying how)."""
    if own is not None:
        return f"stopped: {own}"
    if code is None:
        return "was ended by mlx.launch"
    if code < 0:
        return f"was ended by {signal.Signals(-code).name}"
    return f"exited with code {code} (its traceback is in the run's log)"


def _one_line(parts: list[str]) -> str:
    more = f"; {len(parts) - 3} more rank(s) failed" if len(parts) > 3 else ""
    return "; ".join(parts[:3]) + more


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # a signal before or after training: the build says so itself
        sys.exit(1)
