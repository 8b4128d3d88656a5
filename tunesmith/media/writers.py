"""Media files as tunesmith writes them: 16-bit WAV, MP3 through ffmpeg, PNG.

The same samples or pixels always give the same bytes (libsndfile's and Pillow's encoders),
which the renders' cache and the golden hashes rely on.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import numpy as np
import soundfile as sf


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


def write_png(pixels: np.ndarray, path: Path) -> Path:
    """uint8 [H, W, 3] as a PNG (Pillow's encoder: the same pixels give the same bytes)."""
    from PIL import Image

    Image.fromarray(np.ascontiguousarray(pixels, dtype=np.uint8), "RGB").save(path, format="PNG")
    return path
