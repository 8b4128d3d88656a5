"""Stage `renders`: each run's demo prompts, with and without its best adapter.

Per run and demo, two renders with the same prompt, seed, duration, steps and guidance:
the base model (the adapter at strength 0, which is the base bit for bit) and the best
adapter at the demo's strength. Each is written as a 16-bit WAV, peak-normalised and cut
to the requested duration (underfit's demo format), an MP3 beside it where ffmpeg is
present (`-q:a 0`), a spectrogram PNG and a JSON sidecar with every setting. Renders are
cached in the store under the base model's fingerprint, the adapter file's hash, the demo
and the placement: an unchanged adapter and demo list renders nothing again.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import soundfile as sf

from tunesmith.backends.placement import Placement
from tunesmith.report import StageResult
from tunesmith.store import Store, canonical_json, content_key, sha256_file
from tunesmith.store.atomic import atomic_write_text, link_into
from tunesmith.train.config import RunConfig

STAGE_VERSION = 1
SIDES = ("base", "adapter")
COLUMNS = ["run", "demo", "side", "prompt", "seed", "wav", "mp3", "spectrogram", "sidecar"]


@dataclass
class Renders:
    frame: pd.DataFrame
    result: StageResult
    keys: list[str]


def wav_bytes(samples: np.ndarray, sample_rate: int) -> bytes:
    """16-bit PCM WAV of [channels, N] float samples, peak-normalised."""
    peak = float(np.max(np.abs(samples))) if samples.size else 0.0
    scaled = samples / peak if peak > 0 else samples
    buffer = io.BytesIO()
    sf.write(buffer, scaled.T.astype(np.float32), sample_rate, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def mp3_from_wav(wav: Path, mp3: Path) -> bool:
    """underfit's demo MP3 (`ffmpeg -q:a 0`); False when ffmpeg is not installed."""
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        return False
    subprocess.run(
        [ffmpeg, "-nostdin", "-loglevel", "error", "-y", "-i", str(wav), "-q:a", "0", str(mp3)],
        check=True,
    )
    return True


def build_renders(
    runs: list[tuple[RunConfig, dict]],
    base_fingerprints: dict[str, str],
    out: Path,
    store: Store,
    placement: Placement,
    renderer: Callable[[RunConfig, Path], object],
    sample_rate: int,
) -> Renders:
    """Render every demo of every (run, adapters-table row) pair.

    `renderer(run, adapter_path)` makes an object with `render(demo, strength) -> [2, N]`;
    it is called only when something is missing from the store.
    """
    start = time.perf_counter()
    rows, keys, notes = [], [], []
    cached = computed = 0
    mp3_ok = shutil.which("ffmpeg") is not None
    if not mp3_ok:
        notes.append("ffmpeg not found: WAV only, no MP3")
    for run, trained in runs:
        adapter = Path(trained["best_path"])
        adapter_sha = sha256_file(adapter)
        made = None
        for i, demo in enumerate(run.demos):
            for side in SIDES:
                strength = 0.0 if side == "base" else demo.strength
                key = content_key(
                    stage="renders", version=STAGE_VERSION, family=run.family,
                    base=base_fingerprints[run.name], adapter=adapter_sha if strength else None,
                    demo={**asdict(demo), "strength": strength}, placement=placement.as_dict(),
                    mp3=mp3_ok,
                )  # fmt: skip
                if store.has(key):
                    cached += 1
                else:
                    made = made or renderer(run, adapter)
                    samples = made.render(demo, strength)
                    sidecar = {
                        "prompt": demo.prompt, "seed": demo.seed, "duration": demo.duration,
                        "steps": demo.steps, "cfg": demo.cfg, "side": side,
                        "adapter": str(adapter) if strength else None, "strength": strength,
                        "training_step": int(trained["best_step"]), "family": run.family,
                        "placement": str(placement), "run": run.name,
                    }  # fmt: skip
                    _write_entry(store, key, samples, sample_rate, sidecar, mp3_ok)
                    computed += 1
                keys.append(key)
                rows.append(_publish(store.path(key), out / "renders" / run.name / side, run, i))
    frame = pd.DataFrame(rows, columns=COLUMNS)
    result = StageResult(
        stage="renders",
        data_version=content_key(stage="renders", keys=keys),
        items=len(rows),
        cached=cached,
        computed=computed,
        seconds=time.perf_counter() - start,
        extra={"notes": notes} if notes else {},
    )
    return Renders(frame, result, keys)


def _write_entry(store, key, samples, sample_rate, sidecar, mp3_ok) -> None:
    from tunesmith.render.spectrogram import spectrogram_png

    with store.writing(key) as tmp:
        (tmp / "audio.wav").write_bytes(wav_bytes(samples, sample_rate))
        if mp3_ok:
            mp3_from_wav(tmp / "audio.wav", tmp / "audio.mp3")
        spectrogram_png(samples, sample_rate, tmp / "spectrogram.png")
        (tmp / "value.json").write_text(canonical_json(sidecar), encoding="utf-8")


def _publish(entry: Path, folder: Path, run: RunConfig, index: int) -> dict:
    stem = folder / f"demo{index}"
    paths = {}
    for name, suffix in (("audio.wav", ".wav"), ("audio.mp3", ".mp3"), ("spectrogram.png", ".png")):
        if (entry / name).exists():
            link_into(entry / name, stem.with_suffix(suffix))
            paths[suffix] = str(stem.with_suffix(suffix))
    sidecar = json.loads((entry / "value.json").read_text(encoding="utf-8"))
    text = json.dumps(sidecar, indent=2, ensure_ascii=False) + "\n"
    target = stem.with_suffix(".json")
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        atomic_write_text(target, text)
    return {
        "run": run.name, "demo": f"demo{index}", "side": sidecar["side"],
        "prompt": sidecar["prompt"], "seed": sidecar["seed"], "wav": paths[".wav"],
        "mp3": paths.get(".mp3"), "spectrogram": paths[".png"], "sidecar": str(target),
    }  # fmt: skip
