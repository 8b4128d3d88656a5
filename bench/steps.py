"""Our training step against a bare loop, timed alike for every family, and the table of the four.

Our step is the whole of what the run loop (`tunesmith.train.loop.train`) does per step: the
trainer's step and the loop's own work (the finiteness check, the progress line, the step's
event record, the memory cap's read). To time it in the same process as the bare loop, the
run loop drives `Paired`, a trainer that hands every call on to ours but first runs one bare
step: our step is then the time from the end of that bare step to the loop's next call, the
bare step its own. Both are timed by this thread's CPU time (`time.thread_time`, with one torch
thread on the CPU: the time the OS gives other processes on a shared machine is not counted;
wall time on CUDA or with several threads),
steps alternated, the first `warmup` of each left out; a side's time is the median of its
steps. The loop's validation before the first step and its validation and state at the last
step are outside the timed steps (the last call is not timed).

`--profile` (each step bench): both sides under `cProfile` (deterministic: every Python call,
so Python-heavy phases read larger than they run without it; the ratio between the sides is
what to read), each phase's cumulative time per step (the outermost call of the phase's
functions, summed over its functions), largest first, beside the bare loop's.

    .venv/bin/python bench/steps.py [--short] [--profile]

runs the four step benches (`--short`: their reduced forms, as tests/test_bench_steps.py does)
(`--profile`: with their profiles) and prints their table: time ratio and memory ratio
(ours / bare) of each family. Each bench's own part (writing its model, starting its children,
printing) runs in this process: it times nothing, and a process of its own would import torch
and the model libraries once more for each family; what is timed runs in its children.
"""

from __future__ import annotations

import contextlib
import cProfile
import dataclasses
import importlib
import io
import pstats
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
# family, script, its full form's arguments, its reduced form's (one step after one warm-up:
# the fewest that time a step of each side)
REDUCED = ["--steps", "1", "--warmup", "1"]
BENCHES = [
    ("Stable Audio 3", "train_step.py", [], REDUCED),
    ("SDXL", "sdxl_step.py", [], REDUCED),
    ("ACE-Step", "ace_step_step.py", [], REDUCED),
    ("ACE-Step planner", "planner_step.py", ["--no-mlx"], REDUCED),
]

# The phases of a step, each a list of (file suffix, function name) whose calls' cumulative
# times add up to it (a call inside another of the phase's is counted there). Forward is the
# model's own `forward` (its file given by each bench).
PHASES: dict[str, list[tuple[str, str]]] = {
    "backward": [("torch/_tensor.py", "backward")],
    "optimizer step": [("torch/optim/optimizer.py", "wrapper")],
    "zero_grad": [("torch/optim/optimizer.py", "zero_grad")],
    "clipping": [("torch/nn/utils/clip_grad.py", "clip_grad_norm_")],
    "lr schedule": [("torch/optim/lr_scheduler.py", "step")],
    "events written": [
        ("tunesmith/train/history.py", "step"),
        ("tunesmith/train/history.py", "event"),
    ],
    "memory cap read": [("tunesmith/train/memory.py", "passed")],
    "progress line": [
        ("tqdm/std.py", "update"),
        ("tqdm/std.py", "set_postfix"),
        ("tqdm/std.py", "set_description"),
        ("tunesmith/families/stable_audio_3/trainer.py", "write"),  # its own train.log line
    ],
    "logged norms": [("tunesmith/families/stable_audio_3/trainer.py", "underfit_norms")],
    "data draws": [
        ("tunesmith/train/order.py", "next"),
        ("tunesmith/families/stable_audio_3/draws.py", "next"),
        ("tunesmith/families/sdxl/objective.py", "draw"),
        ("tunesmith/families/ace_step/data.py", "draw_window"),
    ],
    "DDP wrapper": [("torch/nn/parallel/distributed.py", "forward")],
    "loss .item()": [("~", "<method 'item' of 'torch._C.TensorBase' objects>")],
}


class Paired:
    """Our trainer as the run loop sees it, with one bare step run before each of ours."""

    def __init__(
        self, trainer: Any, bare: Callable[[], None], steps: int, warmup: int, profile: bool
    ) -> None:
        self.trainer, self.bare = trainer, bare
        self.steps, self.warmup = steps + 1, warmup  # the last call untimed
        train = dataclasses.replace(trainer.run.train, eval_every=10**9, checkpoint_every=10**9)
        self.run = dataclasses.replace(trainer.run, train=train)
        self.times: dict[str, list[float]] = {"bare": [], "ours": []}
        self.profiles = {k: cProfile.Profile() for k in ("bare", "ours")} if profile else {}
        self.after_bare: float | None = None
        # thread CPU time where all of a step runs on this thread (bench/sdxl_step.py's `clock`)
        cpu = str(trainer.device) == "cpu" and torch.get_num_threads() == 1
        self.now = time.thread_time if cpu else time.perf_counter

    def __getattr__(self, name: str) -> Any:
        return getattr(self.trainer, name)

    def step(self):
        now = self.now()
        done = len(self.times["bare"])
        # profiled: the steps after the warm-up, the last call's (validation, state) left out
        profiled = self.profiles if self.warmup <= done < self.steps - 1 else {}
        if self.after_bare is not None:
            if self.profiles and self.warmup <= done - 1:
                self.profiles["ours"].disable()
            self.times["ours"].append(now - self.after_bare)
        if profiled:
            profiled["bare"].enable()
        start = self.now()
        self.bare()
        _sync(self.trainer.device)
        end = self.now()
        if profiled:
            profiled["bare"].disable()
        self.times["bare"].append(end - start)
        self.after_bare = self.now()
        if profiled:
            profiled["ours"].enable()
        report = self.trainer.step()
        _sync(self.trainer.device)
        return report


def _sync(device: Any) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def paired(trainer: Any, bare: Callable[[], None], steps: int, warmup: int, profile: bool):
    """Run `warmup + steps` alternated steps through the run loop; returns (median seconds of
    bare, of ours, the profiles of both or {})."""
    import tempfile

    from tunesmith.train.loop import train

    pair = Paired(trainer, bare, warmup + steps, warmup, profile)
    with tempfile.TemporaryDirectory() as tmp, open("/dev/null", "w") as sink:
        train(pair, Path(tmp), log=lambda line: None, progress=sink)
    bare_s = statistics.median(pair.times["bare"][warmup:-1])
    ours_s = statistics.median(pair.times["ours"][warmup:])
    return bare_s, ours_s, pair.profiles


def timed_step(step: Callable[[], Any], device: str, warmup: int, steps: int = 1) -> float:
    """One side's step alone (the full-size rows, each side in its own process): the median
    seconds of `steps` calls after `warmup` untimed ones, by this thread's CPU time on the CPU
    with one torch thread (wall time otherwise)."""
    one_thread = str(device) == "cpu" and torch.get_num_threads() == 1
    now = time.thread_time if one_thread else time.perf_counter
    seconds = []
    for index in range(warmup + steps):
        start = now()
        step()
        _sync(device)
        if index >= warmup:
            seconds.append(now() - start)
    return statistics.median(seconds)


def profile_table(profiles: dict[str, cProfile.Profile], forward: str, steps: int) -> str:
    """Each phase's per-step milliseconds of ours and bare, largest of ours first."""
    phases = {"forward": [(forward, "forward")], **PHASES}
    rows, totals = {}, {}
    for side, profile in profiles.items():
        stats = pstats.Stats(profile).stats  # (file, line, name) -> (cc, nc, tt, ct, callers)
        totals[side] = sum(tt for _, _, tt, _, _ in stats.values()) / steps
        for phase, functions in phases.items():
            matched = {
                key
                for key in stats
                for suffix, name in functions
                if key[2] == name and key[0].replace("\\", "/").endswith(suffix)
            }
            # a call of the phase inside another of its calls is counted there already
            total = sum(stats[k][3] for k in matched if not matched & set(stats[k][4]))
            if phase == "forward":  # the model's inner modules' `forward`s, in the same file,
                total = max((stats[k][3] for k in matched), default=0.0)  # are called inside
            rows.setdefault(phase, {})[side] = total / steps
    for side in profiles:
        rows.setdefault("the rest", {})[side] = totals[side] - sum(
            rows[p][side] for p in phases if p != "loss .item()"
        )
    order = sorted(rows, key=lambda p: -rows[p]["ours"])
    lines = [f"{'phase (cProfile, ms per step)':34} {'ours':>9} {'bare':>9}"]
    lines += [f"{p:34} {rows[p]['ours'] * 1e3:9.2f} {rows[p]['bare'] * 1e3:9.2f}" for p in order]
    lines.append(f"{'total':34} {totals['ours'] * 1e3:9.2f} {totals['bare'] * 1e3:9.2f}")
    return "\n".join(lines)


RATIO = re.compile(r"^(time|memory) ratio \(ours/bare\): ([0-9.]+)", re.M)


def main() -> None:
    short, profile = "--short" in sys.argv[1:], "--profile" in sys.argv[1:]
    rows = []
    for family, script, full, reduced in BENCHES:
        print(f"== {family} (bench/{script})", flush=True)
        bench = importlib.import_module(f"bench.{Path(script).stem}")
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            bench.main([*(reduced if short else full), *(["--profile"] if profile else [])])
        print(printed.getvalue(), end="", flush=True)
        ratios = dict(RATIO.findall(printed.getvalue()))
        rows.append((family, float(ratios["time"]), float(ratios["memory"])))
    print(f"\n{'family':18} {'time ours/bare':>15} {'memory ours/bare':>17}")
    for family, time_ratio, memory_ratio in rows:
        print(f"{family:18} {time_ratio:15.3f} {memory_ratio:17.3f}")


if __name__ == "__main__":
    main()
