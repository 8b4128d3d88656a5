"""Audio as models take it: decoded, stereo, at the model's rate, aligned, capped.

What underfit's pre-encoder (`dataset_processing/pre_encode.py`) does: whole files up to
600 s, 44.1 kHz stereo, mono repeated to two channels, other rates resampled with
torchaudio's default (windowed-sinc, Hann window, 6 zero crossings, 0.99 rolloff), no loudness
or peak change; then the length is cut down to a multiple of the VAE's downsampling ratio
(underfit pads instead, see docs/conventions/stable-audio-3.md); a file with more than two
channels keeps its first two, as underfit's `load_audio` does (warned). torchaudio is not a
dependency (its wheels pin other torch builds), so its default resampler is written out here;
it is the same arithmetic.

Not handled: files longer than the cap (cut, warned).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import soundfile as sf

from tunesmith.media.sniff import MediaError

if TYPE_CHECKING:  # torch is imported where audio is prepared: the cache keys need none of it
    import torch

MAX_SECONDS = 600.0  # underfit's pre-encode cap


@dataclass(frozen=True)
class ModelAudio:
    samples: torch.Tensor  # float32 [2, N], N a multiple of the alignment
    sample_rate: int
    source_seconds: float  # duration of the file as decoded, before cap and alignment
    warnings: tuple[str, ...] = ()
    resampled_samples: int = 0  # length at `sample_rate`, after the cap, before the alignment


def decode(path: Path, label: str | None = None) -> tuple[np.ndarray, int]:
    """float32 samples [channels, N] at the file's own rate."""
    name = label or str(path)
    try:
        data, rate = sf.read(path, dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError):
        data, rate = _decode_with_essentia(path, name)
    if data.shape[0] == 0:
        raise MediaError(f"{name}: decoded to zero samples; expected audio")
    return np.ascontiguousarray(data.T), int(rate)


def _decode_with_essentia(path: Path, name: str) -> tuple[np.ndarray, int]:
    # libsndfile reads wav/flac/ogg/mp3/aiff; Essentia's FFmpeg covers m4a and the rest.
    import essentia

    essentia.log.infoActive = False
    import essentia.standard as es

    try:
        stereo, rate, channels, *_ = es.AudioLoader(filename=str(path))()
    except RuntimeError as exc:
        raise MediaError(f"{name}: could not decode as audio ({exc})") from exc
    data = stereo[:, :1] if channels == 1 else stereo  # AudioLoader pads mono with silence
    return data.astype(np.float32), int(rate)


def for_model(path: Path, sample_rate: int, align_to: int, label: str | None = None) -> ModelAudio:
    """Decode `path` and make it what the model encodes: stereo, `sample_rate`, aligned."""
    import torch

    name = label or str(path)
    data, rate = decode(path, name)
    audio = torch.from_numpy(data)
    warnings = []
    if audio.shape[0] == 1:
        audio = audio.repeat(2, 1)  # mono → both channels, level unchanged
    elif audio.shape[0] > 2:
        warnings.append(f"{name}: {audio.shape[0]} channels; the first two are used")
        audio = audio[:2]
    source_seconds = audio.shape[1] / rate
    if source_seconds > MAX_SECONDS:
        audio = audio[:, : int(MAX_SECONDS * rate)]
        warnings.append(f"{name}: {source_seconds:.1f} s is over {MAX_SECONDS:.0f} s; cut there")
    if rate != sample_rate:
        audio = resample(audio, rate, sample_rate)
    usable = aligned(audio.shape[1], align_to)
    if usable == 0:
        raise MediaError(
            f"{name}: {audio.shape[1]} samples at {sample_rate} Hz is shorter than one "
            f"latent frame ({align_to} samples)"
        )
    return ModelAudio(
        audio[:, :usable].contiguous(), sample_rate, source_seconds, tuple(warnings), audio.shape[1]
    )


def model_length(path: Path, sample_rate: int, align_to: int) -> int | None:
    """The length `for_model` gives `path` (samples at `sample_rate`, capped, aligned), read
    from the file's header without decoding it; None where libsndfile cannot read the header
    (formats only Essentia decodes, a damaged or missing file): the caller learns it by
    decoding. An encoder plans its batches by it, so that each process of several decodes only
    the clips it encodes; a clip that decodes to another length (an MPEG header without an
    exact count) still encodes correctly, in a batch of its own length."""
    try:
        info = sf.info(str(path))
    except (sf.LibsndfileError, RuntimeError, OSError):
        return None
    frames, rate = int(info.frames), int(info.samplerate)
    if frames <= 0 or rate <= 0:
        return None
    if frames / rate > MAX_SECONDS:
        frames = int(MAX_SECONDS * rate)
    if rate != sample_rate:
        frames = resampled_length(frames, rate, sample_rate)
    return aligned(frames, align_to)


def aligned(samples: int, align_to: int) -> int:
    """`samples` cut down to a whole number of `align_to` (the VAE's frames)."""
    return samples - samples % align_to


def resampled_length(samples: int, orig: int, new: int) -> int:
    """The length `resample` gives `samples` samples at rate `orig` resampled to `new`."""
    gcd = math.gcd(orig, new)
    return math.ceil(new // gcd * samples / (orig // gcd))


def resample(audio: torch.Tensor, orig: int, new: int) -> torch.Tensor:
    """torchaudio.functional.resample with its defaults, on [..., N]."""
    import torch.nn.functional as F

    if orig == new:
        return audio
    gcd = math.gcd(orig, new)
    orig, new = orig // gcd, new // gcd
    kernel, width = _sinc_kernel(orig, new, audio.dtype)
    shape = audio.shape
    flat = F.pad(audio.reshape(-1, shape[-1]), (width, width + orig))
    # One strided convolution computes `new` output phases per `orig` input samples.
    out = F.conv1d(flat[:, None], kernel, stride=orig).transpose(1, 2).reshape(flat.shape[0], -1)
    length = resampled_length(shape[-1], orig, new)
    return out[:, :length].reshape(*shape[:-1], length)


def _sinc_kernel(
    orig: int, new: int, dtype: torch.dtype, zeros: int = 6, rolloff: float = 0.99
) -> tuple[torch.Tensor, int]:
    import torch

    cutoff = min(orig, new) * rolloff  # the low-pass sits just under the lower Nyquist
    width = math.ceil(zeros * orig / cutoff)
    taps = torch.arange(-width, width + orig, dtype=torch.float64)[None, None] / orig
    t = torch.arange(0, -new, -1, dtype=torch.float64)[:, None, None] / new + taps
    t = (t * cutoff).clamp(-zeros, zeros)
    window = torch.cos(t * math.pi / zeros / 2) ** 2  # Hann
    t = t * math.pi
    sinc = torch.where(t == 0, torch.ones_like(t), torch.sin(t) / t)
    return (sinc * window * (cutoff / orig)).to(dtype), width
