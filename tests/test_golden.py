"""Golden outputs: a small run of each family and backend gives what was recorded.

Each case builds a tiny dataset through every stage (Dagster, the training child, the
renders) and reads what a user keeps: adapter files, the training record, renders, encoded
latents and sidecars. `tests/golden/<case>.json` holds, per output, its sha256 and a summary
of its values (a safetensors' metadata and each tensor's dtype, shape, mean, rms and 16
evenly strided values; the same for audio, pixels and arrays; sidecars whole). Equal bytes
pass; otherwise every key, dtype, shape, string and integer must be the same and every
number within rounding (`RTOL`, `PIXELS`), so a change of the computation fails and another
processor's last bits do not. After an intended change, re-record with
`TUNESMITH_WRITE_GOLDEN=1 make test` (or that variable and `pytest tests/test_golden.py`) and
say in the commit why the values moved.

Floating-point sums depend on how many threads share them, so the build runs in a child
Python with one thread for torch, BLAS and OpenMP, and on a fixed instruction set (see
`SAME_KERNELS`). That keeps the bytes of most outputs across machines, not all: measured on
an AVX-512 Xeon with AMX against the recording machine, a few outputs of each case differed
in their last bits; with AVX-512 kernels (the fixed set lifted) the trained tensors moved by
at most 1.3e-3 of their rms, 8 times inside `RTOL`.

Run folders end in the first 10 hex digits of the run's key; the key covers the resolved
config, so the outputs name them `<run>-KEY`. MP3s are left out (ffmpeg may be missing), and
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


def outputs(out: Path, root: Path) -> dict[str, dict]:
    """Per output: its sha256 and a summary of its values (see `values`)."""
    found = {}
    for pattern in PATTERNS:
        for path in out.rglob(pattern):
            if "state" in path.relative_to(out).parts:
                continue  # how a run resumes is not an output (its own tests keep it exact)
            name = re.sub(r"-[0-9a-f]{10}/", "-KEY/", path.relative_to(out).as_posix())
            data = path.read_bytes()
            found[name] = {"sha256": hashlib.sha256(data).hexdigest(), "values": values(path, root)}
    for sub in ("encoded", "renders"):
        for path in (out / sub).rglob("*.json"):
            text = path.read_text(encoding="utf-8").replace(str(root), "ROOT")
            found[path.relative_to(out).as_posix()] = {
                "sha256": hashlib.sha256(text.encode()).hexdigest(),
                "values": json.loads(text),
            }
    return dict(sorted(found.items()))


SAMPLES = 16  # values kept per tensor, evenly strided over its flattened elements


def _numbers(array) -> dict:
    import numpy as np

    flat = np.asarray(array, dtype=np.float64).reshape(-1)
    picks = flat[:: max(1, len(flat) // SAMPLES)][:SAMPLES]
    rms = float(np.sqrt(np.mean(flat**2))) if len(flat) else 0.0
    mean = float(flat.mean()) if len(flat) else 0.0
    return {
        "shape": list(np.shape(array)),
        "rms": _short(rms),
        "mean": _short(mean),
        "picks": [_short(v) for v in picks],
    }


def _short(value) -> float:
    return float(f"{float(value):.7g}")  # float32's precision, in a short JSON number


def values(path: Path, root: Path) -> dict:
    """What an output holds, small enough to keep in the golden file: a safetensors' metadata
    and, per tensor, dtype, shape, mean, rms and evenly strided values; the same numbers for
    audio samples, pixels, arrays and the loss record."""
    import numpy as np
    import soundfile as sf
    from safetensors import safe_open

    if path.suffix == ".safetensors":
        with safe_open(str(path), "pt") as f:
            meta = {k: v.replace(str(root), "ROOT") for k, v in (f.metadata() or {}).items()}
            tensors = {}
            for key in sorted(f.keys()):
                t = f.get_tensor(key)
                tensors[key] = {"dtype": str(t.dtype), **_numbers(t.float().numpy())}
        return {"metadata": meta, "tensors": tensors}
    if path.suffix == ".wav":
        audio, sr = sf.read(path, dtype="float32", always_2d=True)
        return {"rate": sr, **_numbers(audio)}
    if path.suffix == ".png":
        image = Image.open(path)
        return {"mode": image.mode, **_numbers(np.asarray(image))}
    if path.suffix == ".npy":
        return _numbers(np.load(path, allow_pickle=False))
    records = np.frombuffer(
        path.read_bytes(), dtype=np.dtype([("s", "<u4"), ("t", "<f4"), ("l", "<f4")])
    )
    return {
        "steps": [int(s) for s in records["s"]],
        "t": _numbers(records["t"]),
        "loss": _numbers(records["l"]),
    }


# Where bytes differ, values must agree within these. Each processor family rounds a few
# sums differently even on the fixed instruction set below (an AVX-512 Xeon with AMX gives
# other last bits than the machine the goldens were first recorded on), and six training
# steps carry those bits on; a change of the computation moves values by far more.
RTOL = 1e-2  # of a tensor's rms, per strided value; relative for single numbers
PIXELS = 3  # 8-bit levels


def differences(recorded, found, where: str = "") -> list[str]:
    """Where `found` departs from `recorded` by more than rounding: different keys, shapes,
    dtypes, strings or integers anywhere, and numbers outside the tolerance."""
    if isinstance(recorded, dict) and isinstance(found, dict):
        if recorded.keys() != found.keys():
            return [f"{where}: keys {sorted(recorded.keys() ^ found.keys())[:4]}"]
        if "picks" in recorded:
            exact = [k for k in recorded if k not in ("rms", "mean", "picks")]  # shape, dtype...
            if any(recorded[k] != found[k] for k in exact):
                return [f"{where}: {[(recorded[k], found[k]) for k in exact]}"]
            scale = max(abs(recorded["rms"]), 1e-12)
            slack = PIXELS if where.endswith(".png") else RTOL * scale
            worst = max(
                [abs(a - b) for a, b in zip(recorded["picks"], found["picks"], strict=True)]
                + [abs(recorded["rms"] - found["rms"]), abs(recorded["mean"] - found["mean"])]
            )
            return [f"{where}: off by {worst:.3g} (allowed {slack:.3g})"] if worst > slack else []
        return [
            d for key in recorded for d in differences(recorded[key], found[key], f"{where}/{key}")
        ]
    if isinstance(recorded, list) and isinstance(found, list):
        if len(recorded) != len(found):
            return [f"{where}: length {len(recorded)} -> {len(found)}"]
        return [
            d
            for i, (a, b) in enumerate(zip(recorded, found, strict=True))
            for d in differences(a, b, f"{where}[{i}]")
        ]
    if (
        isinstance(recorded, float)
        and isinstance(found, (int, float))
        and not isinstance(found, bool)
    ):
        ok = abs(recorded - found) <= RTOL * max(abs(recorded), 1e-6)
        return [] if ok else [f"{where}: {recorded} -> {found}"]
    if isinstance(recorded, str) and isinstance(found, str) and recorded != found:
        try:  # a safetensors metadata value holding JSON or a number
            return differences(json.loads(recorded), json.loads(found), where)
        except ValueError:
            pass
    return [] if recorded == found else [f"{where}: {str(recorded)[:60]!r} -> {str(found)[:60]!r}"]


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
    found = outputs(Path(storage.out_root) / "golden", root)
    path = GOLDEN / f"{case}.json"
    if os.environ.get("TUNESMITH_WRITE_GOLDEN"):
        GOLDEN.mkdir(exist_ok=True)
        lines = (f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in found.items())
        path.write_text("{\n" + ",\n".join(lines) + "\n}\n")  # one output a line
    recorded = json.loads(path.read_text())
    assert sorted(found) == sorted(recorded), f"other outputs than {path.name} records"
    moved = [
        d
        for k in recorded
        if recorded[k]["sha256"] != found[k]["sha256"]
        for d in differences(recorded[k]["values"], found[k]["values"], k)
    ]
    assert not moved, f"{len(moved)} values moved from {path.name}: {moved[:8]}"
