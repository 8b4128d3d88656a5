"""Faults a user's machine deals out, each followed by the next build.

Every case kills or damages a real `tunesmith run` (the command line, Dagster, the training
child) on a small Stable Audio 3 dataset, then checks that the next build finishes in bounded
time, that `tunesmith status` told the truth before it, and that its outputs equal a clean
build's byte for byte: adapter files (tensors and header), the training record, WAV/MP3/PNG
renders, encoded latents and sidecars.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from pipelines.status import STAGES
from tests.conftest import write_clip

pytestmark = pytest.mark.slow

TOML = """\
[[runs]]
name = "clips-lora"
family = "stable-audio-3"
base_model = "tiny-stable-audio-3"
trigger = "clipz"
[runs.adapter]
type = "lora"
rank = 4
[runs.train]
steps = 40
lr = 1e-3
eval_every = 20
checkpoint_every = 20
latent_crop_length = 64
[[runs.demos]]
prompt = "{trigger}, a short clip"
seed = 1
duration = 1.0
steps = 2
"""
BUILD_SECONDS = 300  # a whole build of this dataset, on a slow shared machine
OUTPUTS = ("*.safetensors", "loss_by_timestep.bin", "*.wav", "*.mp3", "*.png", "*.npy")


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    from tunesmith.families.stable_audio_3.tiny import make_tiny_stable_audio_3

    root = tmp_path_factory.mktemp("models")
    make_tiny_stable_audio_3(root / "tiny-stable-audio-3", seed=0)
    return root


class World:
    """One machine's roots (datasets, out, store, Dagster home) and the dataset `clips`."""

    def __init__(self, root: Path, models: Path) -> None:
        self.root, self.out = root, root / "out"
        clips = root / "datasets" / "clips"
        for i, (bpm, freq) in enumerate([(90, 220.0), (120, 330.0), (150, 440.0)]):
            write_clip(clips / f"clip{i}.wav", seconds=3.0, bpm=bpm, freq=freq)
            (clips / f"clip{i}.txt").write_text(f"clipz, a loop at {bpm} bpm")
        (clips / "tunesmith.toml").write_text(TOML)
        self.dataset = clips
        self.env = {
            **os.environ,
            "DAGSTER_HOME": str(root / "home"),
            "TUNESMITH_DATASETS": str(root / "datasets"),
            "TUNESMITH_OUT": str(self.out),
            "TUNESMITH_STORE": str(root / "store"),
            "TUNESMITH_MODELS": str(models),
            "PYTHONUNBUFFERED": "1",
        }

    def cli(self, *args: str, timeout: float = BUILD_SECONDS) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pipelines.cli", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start(self, log: str = "build.log") -> subprocess.Popen:
        """`tunesmith run clips` in its own process group, output to a file."""
        return subprocess.Popen(
            [sys.executable, "-m", "pipelines.cli", "run", "clips"],
            env=self.env,
            start_new_session=True,
            stdout=open(self.root / log, "w"),
            stderr=subprocess.STDOUT,
        )

    def run_dir(self) -> Path | None:
        found = sorted((self.out / "clips" / "adapters").glob("clips-lora-*"))
        return found[0] if found else None

    def steps_done(self) -> int:
        run_dir = self.run_dir()
        events = run_dir / "events.jsonl" if run_dir else None
        if events is None or not events.exists():
            return 0
        return events.read_text().count('"event": "step"')

    def states(self) -> list[str]:
        run_dir = self.run_dir()
        return sorted(p.name for p in (run_dir / "state").glob("step=*")) if run_dir else []

    def outputs(self) -> dict[str, str]:
        """sha256 of every output a clean build must reproduce exactly."""
        found = {}
        for pattern in OUTPUTS:
            for path in (self.out / "clips").rglob(pattern):
                found[str(path.relative_to(self.out))] = _sha(path)
        for path in (self.out / "clips" / "encoded").rglob("*.json"):
            # sidecars name their source file by its full path, as underfit's do: the
            # world's own folder reads ROOT so that two worlds compare
            text = path.read_text(encoding="utf-8").replace(str(self.root), "ROOT")
            found[str(path.relative_to(self.out))] = hashlib.sha256(text.encode()).hexdigest()
        return found

    def status(self) -> str:
        done = self.cli("status", "clips", timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def rebuild(self) -> str:
        done = self.cli("run", "clips")
        assert done.returncode == 0, done.stdout + done.stderr
        assert self.status().count(" fresh ") == len(STAGES)
        return done.stdout


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def built(tmp_path_factory, models) -> World:
    world = World(tmp_path_factory.mktemp("reference"), models)
    world.first_build = world.rebuild()
    return world


@pytest.fixture(scope="module")
def reference(built) -> dict[str, str]:
    outputs = built.outputs()
    assert any(k.endswith(".wav") for k in outputs) and any(".safetensors" in k for k in outputs)
    return outputs


@pytest.fixture
def world(tmp_path, models) -> World:
    return World(tmp_path, models)


def kill_when(proc: subprocess.Popen, ready: Callable[[], bool], limit: float = 240) -> None:
    """Freeze the build's whole process group the moment `ready()` holds, check it still holds
    (the kill lands where the case says), then SIGKILL the group."""
    deadline = time.monotonic() + limit
    while not ready():
        assert proc.poll() is None, "the build finished before the fault could be injected"
        assert time.monotonic() < deadline, "the build never reached the point of the fault"
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGSTOP)
    held = ready()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert held, "the build moved past the point of the fault before it was stopped"


def _parquet(world: World, stage: str) -> Path:
    return world.out / "clips" / f"{stage}.parquet"


def _store_files(world: World, name: str) -> list[Path]:
    return list((world.root / "store" / "objects").glob(f"*/*/{name}"))


CASES = {
    "labels": lambda w: _parquet(w, "manifest").exists() and not _parquet(w, "labels").exists(),
    "encoded": lambda w: (
        bool(_store_files(w, "latents.npy")) and not _parquet(w, "encoded").exists()
    ),
    "training before its first checkpoint": lambda w: w.steps_done() >= 3 and not w.states(),
    "training after a checkpoint": lambda w: w.states() == ["step=20"] and w.steps_done() < 40,
    "renders": lambda w: _parquet(w, "adapters").exists() and not _parquet(w, "renders").exists(),
}


@pytest.mark.parametrize("stage", list(CASES))
def test_a_build_killed_during_a_stage_is_followed_by_a_clean_one(world, reference, stage):
    kill_when(world.start(), lambda: CASES[stage](world))
    started = time.monotonic()
    status = world.status()  # answers at once, and does not call a dead build fresh
    assert time.monotonic() - started < 60
    assert "ended without finishing (its process is gone): marked failed" in status
    assert status.count(" fresh ") < len(STAGES)
    world.rebuild()
    assert world.outputs() == reference


def test_a_killed_training_process_says_what_was_kept_and_the_next_build_resumes(world, reference):
    proc = world.start()
    deadline = time.monotonic() + 240
    while not (world.states() == ["step=20"] and world.steps_done() >= 22):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    (child,) = [
        p
        for p in psutil.Process(proc.pid).children(recursive=True)
        if "pipelines.train_child" in " ".join(p.cmdline())
    ]
    child.kill()
    assert proc.wait(BUILD_SECONDS) == 1
    log = (world.root / "build.log").read_text()
    assert "the state at step 20 is kept" in log and "the next build resumes from it" in log
    assert "Traceback" not in log
    world.rebuild()
    assert world.outputs() == reference


def test_two_builds_started_together_on_a_fresh_instance(world, reference):
    first, second = world.start("first.log"), world.start("second.log")
    waiting = None
    deadline = time.monotonic() + BUILD_SECONDS
    while first.poll() is None or second.poll() is None:
        assert time.monotonic() < deadline
        for proc, log in ((first, "first.log"), (second, "second.log")):
            if waiting is None and "waiting for the gpu pool" in (world.root / log).read_text():
                waiting = proc
                build = [c for c in psutil.Process(proc.pid).children() if c.is_running()][0]
                before = sum(build.cpu_times()[:2])
                time.sleep(2.0)
                if proc.poll() is None and "done" not in (world.root / log).read_text():
                    spent = sum(build.cpu_times()[:2]) - before
                    assert spent < 0.5, f"a waiting build used {spent:.2f} s of CPU in 2 s"
        time.sleep(0.05)
    assert first.returncode == 0 and second.returncode == 0
    logs = [(world.root / n).read_text() for n in ("first.log", "second.log")]
    trained = ["adapters   items    1  computed    1" in log for log in logs]
    assert sorted(trained) == [False, True], logs  # each prints what it did itself
    assert world.status().count(" fresh ") == len(STAGES)
    assert world.outputs() == reference


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[1000:1064] = bytes(b ^ 0xFF for b in data[1000:1064])  # 64 flipped bytes, same size
    path.write_bytes(bytes(data))


def test_damaged_store_entries_are_found_evicted_and_computed_again(built, reference):
    world = built  # the module's built world: this test leaves it as it found it
    latents = _store_files(world, "latents.npy")[0]
    latents.write_bytes(latents.read_bytes()[:200])  # truncated
    _flip(_store_files(world, "audio.wav")[0])
    assert "cached entries damaged" in world.status()  # the truncation: sizes are cheap
    out = world.rebuild()
    assert out.count("removed, it is computed again") == 2, out
    assert world.outputs() == reference
    assert world.cli("verify", "clips").returncode == 0
    _flip(_store_files(world, "audio.wav")[0])  # only a hash sees this one
    verify = world.cli("verify", "clips")
    assert verify.returncode == 1 and ", 1 damaged" in verify.stdout, verify.stdout
    world.rebuild()
    assert world.outputs() == reference


def test_sigterm_stops_a_build_cleanly_and_the_next_one_continues(world, reference):
    proc = world.start()
    deadline = time.monotonic() + 240
    while not world.states():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    tree = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGTERM)  # the command alone, as a service manager sends it
    assert proc.wait(60) == 128 + signal.SIGTERM
    log = (world.root / "build.log").read_text()
    assert "stopped by SIGTERM" in log
    assert "Traceback" not in log, log
    assert not [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    world.rebuild()
    assert world.outputs() == reference


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_a_full_disk_is_one_line_and_the_next_build_continues(world, built, reference):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    # Room for about half of what a build writes: it runs out somewhere in the middle.
    half = (_size(built.out) + _size(built.root / "store")) // 2
    disk = world.root / "disk"
    disk.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", f"size={half // 1024}k", "tmpfs", str(disk)]
    if subprocess.run(mount, capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        world.out = disk / "out"
        world.env.update(TUNESMITH_OUT=str(disk / "out"), TUNESMITH_STORE=str(disk / "store"))
        done = world.cli("run", "clips")
        assert done.returncode == 1, done.stdout
        assert "disk full: could not write" in done.stdout and "MB free there" in done.stdout
        assert "Traceback" not in done.stdout + done.stderr
        subprocess.run(["mount", "-o", "remount,size=400m", str(disk)], check=True)
        world.rebuild()
        assert world.outputs() == reference
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_deleted_adapter_file_is_written_again_from_the_state(built, reference):
    world = built  # the module's built world: this test leaves it as it found it
    run_dir = world.run_dir()
    best = next((run_dir / "best").glob("*-best-step=*.safetensors"))
    last = run_dir / "checkpoints" / "clips-lora-step=40-epoch=13.safetensors"
    last = last if last.exists() else sorted((run_dir / "checkpoints").glob("*-step=40-*"))[0]
    best.unlink()
    last.unlink()
    status = world.status()
    assert f"{best} is missing" in status or f"{last} is missing" in status, status
    out = world.rebuild()
    assert "adapters   items    1  computed    1" in out  # trained 0 steps: files rewritten
    assert world.outputs() == reference


def test_outputs_edited_by_hand_are_said_and_written_again(built, reference):
    world = built  # the module's built world: this test leaves it as it found it
    wav = next((world.out / "clips" / "renders").rglob("*.wav"))
    best = next((world.run_dir() / "best").glob("*-best-step=*.safetensors"))
    for path in (wav, best):  # a render copied out of the store; an adapter file trained
        with open(path, "ab") as f:
            f.write(b"edited")
        status = world.status()
        assert f"{path} edited by hand: rebuilt next time" in status, status
        world.rebuild()
        assert world.outputs() == reference


def test_a_moved_base_model_stops_the_build_before_it_unpublishes_anything(built, reference):
    world = built  # the module's built world: this test leaves it as it found it
    tables = {p.name: p.read_bytes() for p in (world.out / "clips").glob("*.parquet")}
    report = (world.out / "clips" / "report.json").read_bytes()
    model = Path(world.env["TUNESMITH_MODELS"]) / "tiny-stable-audio-3"
    away = model.with_name("moved-away")
    model.rename(away)
    try:
        done = world.cli("run", "clips")
        check = world.cli("check", "clips")
    finally:
        away.rename(model)
    assert done.returncode == 1 and check.returncode == 1, done.stdout
    said = f"run clips-lora: base model {model}"
    assert said in done.stdout and said in check.stdout, done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert {p.name: p.read_bytes() for p in (world.out / "clips").glob("*.parquet")} == tables
    assert (world.out / "clips" / "report.json").read_bytes() == report
    assert world.outputs() == reference  # the adapters and renders are still listed and whole
    assert world.status().count(" fresh ") == len(STAGES)


def test_a_build_without_a_terminal_writes_plain_lines(built):
    """A CI log: no bars or escape codes; a line per stage, per finished piece of work and per
    validation of a training run (its step of the total, losses and the time left)."""
    lines = built.first_build.splitlines()
    assert lines[0].startswith("building clips: runs recorded in "), lines[0]
    assert "\x1b[" not in built.first_build and "\r" not in built.first_build
    for stage in STAGES:
        assert f"  {stage.to_user_string()}: started" in lines, (stage, built.first_build)
    assert any(re.fullmatch(r"  analysing: 3 of 3 in \d+\.\d s", line) for line in lines)
    assert "  training clips-lora: 40 steps" in lines
    validations = [line for line in lines if line.startswith("  training clips-lora: step ")]
    assert [line.split()[3] for line in validations] == ["20", "40"], built.first_build
    assert re.fullmatch(
        r"  training clips-lora: step 20 of 40, loss \d\.\d{4}, validation \d\.\d{4}, .+ left",
        validations[0],
    ), validations[0]
