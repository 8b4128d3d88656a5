"""Spectrogram previews of rendered audio: a mel-spaced, log-magnitude STFT as a PNG.

Time runs left to right, low frequencies sit at the bottom, and the colours come from a
small magma-like lookup table. The level scale is absolute (0 dB is a full-scale sine, the
floor is -80 dB) so that the base and adapter renders of one prompt can be compared by
eye: the same colour is the same level in both pictures. numpy and Pillow only; the same
samples give the same PNG bytes.

Not handled: more than one picture per channel (channels are mixed to mono first), and
frequency axes other than mel.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

from tunesmith.store.atomic import atomic_write_bytes

FLOOR_DB = -80.0  # quieter than this is drawn as the darkest colour

# magma at nine evenly spaced points (matplotlib's table, rounded); linear in between
_MAGMA_ANCHORS = np.array(
    [
        [0, 0, 4],
        [28, 16, 68],
        [79, 18, 123],
        [129, 37, 129],
        [181, 54, 122],
        [229, 80, 100],
        [251, 135, 97],
        [254, 194, 135],
        [252, 253, 191],
    ],
    dtype=np.float64,
)


def _lookup_table() -> np.ndarray:
    """256 RGB colours, dark for quiet and bright for loud, uint8 [256, 3]."""
    x = np.linspace(0.0, 1.0, 256)
    anchors = np.linspace(0.0, 1.0, len(_MAGMA_ANCHORS))
    table = [np.interp(x, anchors, _MAGMA_ANCHORS[:, c]) for c in range(3)]
    return np.round(np.stack(table, axis=1)).astype(np.uint8)


COLORMAP = _lookup_table()


def fft_size(sample_rate: int) -> int:
    """About 46 ms of audio, a power of two: 2048 at 44.1 and 48 kHz."""
    return int(2 ** round(np.log2(sample_rate * 0.0464)))


def band_edges(sample_rate: int, height: int) -> np.ndarray:
    """The frequency band of each row, in Hz: `height + 1` edges, lowest first.

    Rows are evenly spaced on the mel scale from 0 Hz to Nyquist.
    """
    top_mel = 2595.0 * np.log10(1.0 + (sample_rate / 2) / 700.0)
    mels = np.linspace(0.0, top_mel, height + 1)
    return 700.0 * (10.0 ** (mels / 2595.0) - 1.0)


def row_of_frequency(freq: float, sample_rate: int, height: int) -> int:
    """The image row (0 is the top) whose band holds `freq`."""
    band = int(np.searchsorted(band_edges(sample_rate, height), freq, side="right")) - 1
    return height - 1 - min(max(band, 0), height - 1)


def _band_matrix(sample_rate: int, n_fft: int, height: int) -> np.ndarray:
    """[height, bins]: each row's mean of the power density over its band.

    Bin k covers [k - 1/2, k + 1/2] · sample_rate / n_fft; a row's weight for a bin is the
    overlap of the two intervals over the row's width. Narrow low rows thereby take a share
    of one bin instead of falling between bins, and wide high rows average all their bins.
    """
    df = sample_rate / n_fft
    centres = np.arange(n_fft // 2 + 1) * df
    lo_bin, hi_bin = centres - df / 2, centres + df / 2
    edges = band_edges(sample_rate, height)
    lo, hi = edges[:-1, None], edges[1:, None]
    overlap = np.clip(np.minimum(hi, hi_bin) - np.maximum(lo, lo_bin), 0.0, None)
    return overlap / (hi - lo)


def _mono(samples: np.ndarray) -> np.ndarray:
    samples = np.asarray(samples)
    if samples.ndim == 2:
        samples = samples.mean(axis=0)  # [channels, N] → [N]
    elif samples.ndim != 1:
        raise ValueError(f"spectrogram: samples of shape {samples.shape}; expected [N] or [C, N]")
    if samples.shape[0] == 0:
        raise ValueError("spectrogram: zero samples; expected audio")
    if not np.all(np.isfinite(samples)):
        raise ValueError("spectrogram: samples contain NaN or infinity")
    return samples.astype(np.float64)


def spectrogram_levels(
    samples: np.ndarray, sample_rate: int, width: int = 600, height: int = 160
) -> np.ndarray:
    """Levels in [0, 1] (0 is FLOOR_DB or quieter, 1 is 0 dB), [height, width], row 0 on top."""
    if sample_rate <= 0 or width < 1 or height < 1:
        raise ValueError(
            f"spectrogram: sample_rate {sample_rate}, size {width}x{height}; expected positive"
        )
    mono = _mono(samples)
    n = mono.shape[0]
    n_fft = fft_size(sample_rate)
    hop = n_fft // 4
    window = np.hanning(n_fft)
    # Frames are centred on multiples of `hop`, the signal zero-padded by half a frame.
    padded = np.pad(mono, (n_fft // 2, n_fft // 2))
    centres = np.arange(0, n, hop)
    # Scaled so that a full-scale sine's peak bin has magnitude 1 (0 dB).
    scale = 2.0 / window.sum()

    columns = np.empty((width, n_fft // 2 + 1))
    for j in range(width):
        # Column j shows the mean power of the frames centred in its slice of time; a
        # column narrower than a hop shows the frame nearest its middle.
        first = np.searchsorted(centres, j * n / width)
        last = np.searchsorted(centres, (j + 1) * n / width)
        if last <= first:
            nearest = min(int(round((j + 0.5) * n / width / hop)), len(centres) - 1)
            first, last = nearest, nearest + 1
        starts = centres[first:last]
        frames = padded[starts[:, None] + np.arange(n_fft)] * window
        columns[j] = (np.abs(np.fft.rfft(frames, axis=1) * scale) ** 2).mean(axis=0)

    power = _band_matrix(sample_rate, n_fft, height) @ columns.T  # [height, width], low first
    db = 10.0 * np.log10(np.maximum(power, 10.0 ** (FLOOR_DB / 10.0)))
    levels = np.clip((db - FLOOR_DB) / -FLOOR_DB, 0.0, 1.0)
    return levels[::-1]  # low frequencies at the bottom


def spectrogram_array(
    samples: np.ndarray, sample_rate: int, width: int = 600, height: int = 160
) -> np.ndarray:
    """The picture as uint8 RGB [height, width, 3]."""
    levels = spectrogram_levels(samples, sample_rate, width, height)
    return COLORMAP[np.round(levels * 255.0).astype(np.int64)]


def spectrogram_png(
    samples: np.ndarray, sample_rate: int, path: Path, width: int = 600, height: int = 160
) -> Path:
    """Write the spectrogram of `samples` ([N] or [channels, N]) to `path` as a PNG."""
    image = Image.fromarray(spectrogram_array(samples, sample_rate, width, height))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False, compress_level=9)
    atomic_write_bytes(path, buffer.getvalue())
    return path
