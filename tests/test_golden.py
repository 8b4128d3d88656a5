"""Golden hashes: a small run of each family and backend gives the same bytes as recorded.

Each case builds a tiny dataset through every stage (Dagster, the training child, the
renders) and hashes what a user keeps: adapter files, the training record, renders, encoded
latents and sidecars. The hashes are in `tests/golden/<case>.json`; a difference means the
pipeline computes something else than it did. After an intended change, re-record with
`TUNESMITH_WRITE_GOLDEN=1 make test` (or that variable and `pytest tests/test_golden.py`) and
say in the commit why the bytes moved.

Floating-point sums depend on how many threads share them, so the build runs in a child
Python with one thread for torch, BLAS and OpenMP, and on a fixed instruction set (see
`SAME_KERNELS`): the bytes are the same on a laptop and on a CI machine with another core
count or another x86-64 processor.

Run folders end in the first 10 hex digits of the run's key; the key covers the resolved
config, so the hashes name them `<run>-KEY`. MP3s are left out (ffmpeg may be missing), and
so is the resumable state in `state/`.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from tests.conftest import materialize, write_clip

pytestmark = pytest.mark.slow

GOLDEN = Path(__file__).parent / "golden"
PATTERNS = ("*.safetensors", "*.bin", "*.wav", "*.png", "*.npy")
AUDIO_TOML = """\
[[runs]]
name = "golden-audio"
family = "stable-audio-3"
base_model = "tiny-stable-audio-3"
trigger = "gldn"
[runs.adapter]
type = "dora-rows"
rank = 4
[runs.train]
steps = 6
lr = 1e-3
eval_every = 3
checkpoint_every = 3
latent_crop_length = 32
[[runs.demos]]
prompt = "{trigger}, a loop"
seed = 7
duration = 1.0
steps = 2
"""
IMAGE_TOML = """\
[[runs]]
name = "golden-images"
family = "sdxl"
base_model = "tiny-sdxl"
trigger = "gldn"
[runs.train]
size = 64
steps = 6
lr = 1e-3
eval_every = 3
checkpoint_every = 3
[[runs.demos]]
prompt = "{trigger}, a disc"
seed = 7
steps = 2
cfg = 5.0
"""


SONGS_TOML = """\
[dataset]
default_language = "en"
[[runs]]
name = "golden-songs"
family = "ace-step"
base_model = "tiny-ace-step"
trigger = "gldn"
[runs.adapter]
rank = 16
[runs.train]
epochs = 3
accumulation = 2
crop_frames = 24
eval_every = 3
checkpoint_every = 3
[[runs.demos]]
prompt = "{trigger}, a loop"
lyrics = "[Verse]\\nla la"
seed = 7
duration = 1.0
steps = 2
"""


def _songs(folder: Path) -> None:
    for i, (bpm, freq) in enumerate([(90, 220.0), (120, 330.0), (150, 440.0)]):
        write_clip(folder / f"clip{i}.wav", seconds=1.6, bpm=bpm, freq=freq)
        (folder / f"clip{i}.txt").write_text(f"a loop at {bpm} bpm")
    (folder / "clip0.lyrics.txt").write_text("[Verse]\nla la la\n")
    (folder / "tunesmith.toml").write_text(SONGS_TOML)


def _audio(folder: Path) -> None:
    for i, (bpm, freq) in enumerate([(90, 220.0), (120, 330.0), (150, 440.0)]):
        write_clip(folder / f"clip{i}.wav", seconds=2.0, bpm=bpm, freq=freq)
        (folder / f"clip{i}.txt").write_text(f"gldn, a loop at {bpm} bpm")
    (folder / "tunesmith.toml").write_text(AUDIO_TOML)


def _images(folder: Path) -> None:
    folder.mkdir(parents=True)
    for i, colour in enumerate([(200, 80, 40), (40, 160, 90), (30, 60, 200), (220, 220, 40)]):
        image = Image.new("RGB", (80, 64), colour)
        for x in range(10 + 10 * i, 40 + 10 * i):
            for y in range(20, 44):
                image.putpixel((x, y), (255 - colour[0], 255 - colour[1], 255 - colour[2]))
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        (folder / f"pic{i}.png").write_bytes(buffer.getvalue())
        (folder / f"pic{i}.txt").write_text(f"gldn, a picture number {i}")
    (folder / "tunesmith.toml").write_text(IMAGE_TOML)


# case: (dataset maker, tiny base model maker, model folder name, training backend)
CASES = {
    "stable-audio-3-torch": (_audio, "stable_audio_3", "tiny-stable-audio-3", "torch"),
    "stable-audio-3-mlx": (_audio, "stable_audio_3", "tiny-stable-audio-3", "mlx"),
    "sdxl-torch": (_images, "sdxl", "tiny-sdxl", "torch"),
    "ace-step-torch": (_songs, "ace_step", "tiny-ace-step", "torch"),
}


def hashes(out: Path, root: Path) -> dict[str, str]:
    """sha256 per output; in JSON sidecars the machine's root folder reads `ROOT`."""
    found = {}
    for pattern in PATTERNS:
        for path in out.rglob(pattern):
            if "state" in path.relative_to(out).parts:
                continue  # how a run resumes is not an output (its own tests keep it exact)
            name = re.sub(r"-[0-9a-f]{10}/", "-KEY/", path.relative_to(out).as_posix())
            found[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    for sub in ("encoded", "renders"):
        for path in (out / sub).rglob("*.json"):
            text = path.read_text(encoding="utf-8").replace(str(root), "ROOT")
            found[path.relative_to(out).as_posix()] = hashlib.sha256(text.encode()).hexdigest()
    return dict(sorted(found.items()))


ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
# The kernels torch picks depend on the processor: its own vectorised kernels on the widest
# instruction set found (AVX-512 where there is one), oneDNN's convolutions likewise, and MKL's
# matrix products on the vendor. Measured: one machine's bytes differ from another's in 14 of
# 17 ACE-Step outputs, and the same machine's with and without AVX-512 too. The golden builds
# run on one fixed set every x86-64 machine has (AVX2; MKL's vendor-neutral "compatible" path).
SAME_KERNELS = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "MKL_CBWR": "COMPATIBLE",
}


def build(case: str, root: str) -> None:
    """In the child: make the tiny base model (its random weights go through kernels too),
    build the golden dataset under `root`, print the stage metadata."""
    import importlib

    import dagster as dg
    import torch

    from resources.storage import StorageResource

    torch.set_num_threads(1)
    _, family, model_name, _ = CASES[case]
    tiny = importlib.import_module(f"tunesmith.families.{family}.tiny")
    maker = {"stable_audio_3": "make_tiny_stable_audio_3"}.get(family, f"make_tiny_{family}")
    getattr(tiny, maker)(Path(root) / "models" / model_name, seed=0)
    storage = StorageResource(
        datasets_root=f"{root}/datasets",
        out_root=f"{root}/out",
        store_root=f"{root}/store",
        models_root=f"{root}/models",
    )
    with dg.instance_for_test() as instance:
        md = materialize(instance, storage, "golden")
    print(json.dumps({"computed": md["adapters"]["computed"]}))


@pytest.mark.parametrize("case", list(CASES))
def test_a_small_run_gives_the_recorded_bytes(case, storage):
    make, _, _, backend = CASES[case]
    make(Path(storage.datasets_root) / "golden")
    root = Path(storage.out_root).parent
    env = {**os.environ, **ONE_THREAD, **SAME_KERNELS, "TUNESMITH_BACKEND": f"adapters={backend}"}
    repo = Path(__file__).resolve().parents[1]
    code = f"from tests.test_golden import build; build({case!r}, {str(root)!r})"
    child = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, env=env, capture_output=True, text=True
    )
    assert child.returncode == 0, child.stderr[-3000:]
    assert json.loads(child.stdout.strip().splitlines()[-1]) == {"computed": 1}
    found = hashes(Path(storage.out_root) / "golden", root)
    path = GOLDEN / f"{case}.json"
    if os.environ.get("TUNESMITH_WRITE_GOLDEN"):
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(found, indent=1) + "\n")
    recorded = json.loads(path.read_text())
    changed = sorted(k for k in recorded.keys() | found.keys() if recorded.get(k) != found.get(k))
    assert not changed, f"{len(changed)} outputs differ from {path.name}: {changed[:8]}"
