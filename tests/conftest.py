"""Shared fixtures: temporary roots, a Dagster test instance, and small real media files."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import dagster as dg
import numpy as np
import pytest
import soundfile as sf
from PIL import Image

from pipelines.definitions import ASSETS, resources
from resources.storage import StorageResource

# The tests' temporary files (pytest's tmp_path and every `tempfile` folder, so the Dagster
# instances and the roots of the builds and benchmarks the tests start) go to memory where the
# machine has a memory-backed /dev/shm with room for a whole run. A build commits every Dagster
# event on an SQLite connection of its own and the store syncs what it writes; on a disk that
# the other test process and its builds write to at the same time, each of those syncs waits its
# turn (tests/pipelines/test_caching.py alone, nothing beside it: 12.7 s on the disk, 10.8 s in
# memory). No test checks that a file survives a power cut. A TMPDIR set by hand is kept.
MEMORY = Path("/dev/shm")
MEMORY_ROOM = 8 * 2**30  # free bytes it must have: about four times what a run writes


def pytest_configure(config: pytest.Config) -> None:
    if "TMPDIR" in os.environ or not os.access(MEMORY, os.W_OK):
        return
    room = os.statvfs(MEMORY)
    if room.f_bavail * room.f_frsize < MEMORY_ROOM:
        return
    os.environ["TMPDIR"] = str(MEMORY)  # inherited by the test processes and their children
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again


def write_clip(path: Path, seconds: float = 4.0, bpm: float = 120.0, freq: float = 220.0) -> Path:
    """A short stereo 44.1 kHz clip: a tone with a click on every beat."""
    sr = 44100
    t = np.arange(int(seconds * sr)) / sr
    signal = 0.2 * np.sin(2 * np.pi * freq * t)
    beat = (t % (60.0 / bpm)) < 0.01
    signal = signal + 0.5 * beat * np.sin(2 * np.pi * 1000 * t)
    stereo = np.stack([signal, signal * 0.9], axis=1).astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, stereo, sr, subtype="PCM_16")
    return path


def write_image(path: Path, size=(64, 48), colour=(200, 80, 40)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    path.write_bytes(buffer.getvalue())
    return path


def tree_bytes(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` by its relative path, with its bytes."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def refuse_model(*args, **kwargs):
    """Stands where a stage's own process must not load a model (its workers load it)."""
    raise AssertionError("the stage's own process loaded the model")


def no_pool_tasks(function, tasks):
    """Stands for the worker pool where there must be nothing left to encode."""
    assert not tasks, f"tasks for the processes: {tasks}"
    return []


def make_storage(root: Path) -> StorageResource:
    """Empty datasets, outputs, store and models roots under `root`."""
    for name in ("datasets", "out", "store", "models"):
        (root / name).mkdir()
    return StorageResource(
        datasets_root=str(root / "datasets"),
        out_root=str(root / "out"),
        store_root=str(root / "store"),
        models_root=str(root / "models"),
    )


@pytest.fixture
def storage(tmp_path: Path) -> StorageResource:
    return make_storage(tmp_path)


@pytest.fixture
def instance():
    with dg.instance_for_test() as instance:
        yield instance


def materialize(
    instance, storage: StorageResource, partition: str, stages: list[str] | None = None
) -> dict[str, dict]:
    """Materialize every stage of one dataset (or `stages`); returns stage → metadata values,
    and "checks" → {check name: passed}."""
    if not instance.has_dynamic_partition("datasets", partition):
        instance.add_dynamic_partitions("datasets", [partition])
    result = dg.materialize(
        ASSETS,
        instance=instance,
        resources=resources(storage),
        partition_key=partition,
        selection=stages,
    )
    assert result.success
    stages = {
        event.asset_key.to_user_string(): {
            k: getattr(v, "value", v) for k, v in event.materialization.metadata.items()
        }
        for event in result.get_asset_materialization_events()
    }
    stages["checks"] = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    return stages


def data_version(instance, stage: str, partition: str) -> str | None:
    record = instance.get_latest_data_version_record(dg.AssetKey(stage), partition_key=partition)
    return record.asset_materialization.tags.get("dagster/data_version") if record else None


@pytest.fixture(scope="session")
def tiny_sdxl(tmp_path_factory) -> Path:
    """The tiny SDXL base model folder, made once per test session (read only)."""
    from tunesmith.families.sdxl.tiny import make_tiny_sdxl

    return make_tiny_sdxl(tmp_path_factory.mktemp("models") / "tiny-sdxl", seed=0)


@pytest.fixture(scope="session")
def tiny_sa3(tmp_path_factory) -> Path:
    """The tiny Stable Audio 3 base model folder, made once per test session."""
    from tunesmith.families.stable_audio_3.tiny import make_tiny_stable_audio_3

    return make_tiny_stable_audio_3(tmp_path_factory.mktemp("models") / "tiny-sa3", seed=0)


@pytest.fixture(scope="session")
def pipe(tiny_sa3: Path):
    """The tiny Stable Audio 3 loaded through the code a user's base model takes."""
    from tunesmith.families.stable_audio_3.model import load_pipeline

    pipe = load_pipeline(tiny_sa3)
    pipe.set_progress_bar_config(disable=True)
    return pipe


@pytest.fixture(scope="session")
def tiny_ace_step(tmp_path_factory) -> Path:
    """The tiny ACE-Step 1.5 base model folder, made once per test session (read only)."""
    from tunesmith.families.ace_step.tiny import make_tiny_ace_step

    return make_tiny_ace_step(tmp_path_factory.mktemp("models") / "tiny-ace-step", seed=0)


@pytest.fixture(scope="session")
def tiny_planner(tmp_path_factory) -> Path:
    """The tiny ACE-Step planner LM folder (read only)."""
    from tunesmith.families.ace_step_planner.tiny import make_tiny_planner

    return make_tiny_planner(tmp_path_factory.mktemp("models") / "tiny-planner", seed=0)


HEAVY = (  # model libraries, which a build that computes nothing need not import
    "torch",
    "transformers",
    "diffusers",
    "peft",
)
# Runs `python -m pipelines.build` and prints which HEAVY modules it had imported when it ended.
BUILD_AND_SAY = f"""
import runpy, sys
sys.argv = ["pipelines.build", *sys.argv[1:]]
try:
    runpy.run_module("pipelines.build", run_name="__main__")
except SystemExit as end:
    code = end.code
print("HEAVY", ",".join(m for m in {HEAVY!r} if m in sys.modules))
sys.exit(code)
"""


def build_in_a_process(storage, dataset: str, home: Path, code: int = 0) -> list[str]:
    """Build `dataset` as `tunesmith run` does (`python -m pipelines.build`, a fresh process,
    its instance in `home`), assert it exited with `code` (BUILT_WITH_SKIPS where the dataset
    holds something a stage skips) and computed nothing, and return the HEAVY modules it
    imported."""
    home.mkdir()
    env = dict(
        os.environ,
        DAGSTER_HOME=str(home),
        TUNESMITH_DATASETS=storage.datasets_root,
        TUNESMITH_OUT=storage.out_root,
        TUNESMITH_STORE=storage.store_root,
        TUNESMITH_MODELS=storage.models_root,
    )
    done = subprocess.run(
        [sys.executable, "-c", BUILD_AND_SAY, dataset],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == code, done.stdout + done.stderr
    stages = [line.split() for line in done.stdout.splitlines() if " computed " in line]
    assert stages and all(words[words.index("computed") + 1] == "0" for words in stages), (
        done.stdout
    )
    return [m for m in done.stdout.split("HEAVY", 1)[1].strip().split(",") if m]
