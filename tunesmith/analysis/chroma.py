"""Pitch-class content of a mono 44.1 kHz signal over time: what the tempo's level, the metre
and the key read the harmony from.

Three chromagrams from one spectrum a frame (4096 samples, a hop of 1024: 43 frames a
second; Essentia's Windowing, Spectrum, SpectralPeaks and HPCP with KeyExtractor's peak
settings): the full band (25 to 3500 Hz, every instrument), the bass (30 to 160 Hz: bass
notes and their second partials, below the G3 where accompaniment chords are usually voiced,
which name a chord's root) and the low register (30 to 250 Hz: the bass and the lowest notes
of the chords, where a chord change shows most plainly). Each is indexed C, C#, ..., B
(HPCP's own bin 0 is A) and normalised per frame to a maximum of 1 (HPCP's "unitMax").

From them, on a grid of segments (the beat tracker's pulses or halves of them):

- `segments`: the mean chroma of the frames whose centre lies in each segment;
- `novelty`: how much the chroma changes from one segment to the next (1 minus the cosine of
  consecutive segments), the chord changes;
- `chords`: the triad (24 major and minor) each segment sounds, by the cosine of its full-band
  chroma with the triad's three notes plus half the bass's weight on the triad's root, and a
  lone segment between two of the same chord taken as that chord (a passing note).

Not handled: tuning other than A = 440 Hz (HPCP's reference; a quarter-tone off splits each
note between two bins), chords other than major and minor triads (a seventh chord is read as
its triad, a suspended or power chord as whichever triad is closest).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SAMPLE_RATE = 44100
FRAME, HOP = 4096, 1024
FPS = SAMPLE_RATE / HOP
FULL_BAND = (25.0, 3500.0)  # KeyExtractor's HPCP band
BASS_BAND = (30.0, 160.0)  # below G3, where chords are voiced from
LOW_BAND = (30.0, 250.0)
_HPCP_MIN_SPAN = 200.0  # HPCP refuses a band narrower than this; the peaks set the bass band
BASS_WEIGHT = 0.5  # the bass on a triad's root, against the cosine of its three notes
PITCH_CLASSES = ("C", "C#", "D", "Eb", "E", "F", "F#", "G", "Ab", "A", "Bb", "B")
TRIADS = tuple((root, quality) for quality in ("major", "minor") for root in range(12))
_TEMPLATES = np.array(
    [
        [
            1.0 if (pc - root) % 12 in ((0, 4, 7) if quality == "major" else (0, 3, 7)) else 0.0
            for pc in range(12)
        ]
        for root, quality in TRIADS
    ]
) / np.sqrt(3.0)


def chord_names() -> tuple[str, ...]:
    """TRIADS spelled out, "C major" to "B minor"."""
    return tuple(f"{PITCH_CLASSES[root]} {quality}" for root, quality in TRIADS)


@dataclass(frozen=True)
class Chroma:
    full: np.ndarray  # [frames, 12], C first, each frame's maximum 1 (0 for silence)
    bass: np.ndarray  # [frames, 12], the same for BASS_BAND
    low: np.ndarray  # [frames, 12], the same for LOW_BAND

    @property
    def seconds(self) -> float:
        return len(self.full) / FPS


def chroma(mono: np.ndarray) -> Chroma:
    """Full-band, bass and low chromagrams of `mono` (float32, 44.1 kHz), FPS frames a
    second."""
    import essentia.standard as es

    window, spectrum = es.Windowing(type="blackmanharris62"), es.Spectrum()
    bands = []
    for low, high in (FULL_BAND, BASS_BAND, LOW_BAND):
        peaks = es.SpectralPeaks(
            orderBy="magnitude",
            magnitudeThreshold=1e-5,
            minFrequency=low,
            maxFrequency=high,
            maxPeaks=60,
            sampleRate=SAMPLE_RATE,
        )
        hpcp = es.HPCP(
            size=12,
            referenceFrequency=440,
            minFrequency=low,
            maxFrequency=max(high, low + _HPCP_MIN_SPAN),
            bandPreset=high > 500.0,  # HPCP's split at 500 Hz needs a band above it
            weightType="cosine",
            nonLinear=False,
            windowSize=1.0,
        )
        bands.append((peaks, hpcp))
    full, bass, low_register = [], [], []
    if len(mono) < FRAME:
        mono = np.pad(mono, (0, FRAME - len(mono))).astype(np.float32)
    for frame in es.FrameGenerator(mono, frameSize=FRAME, hopSize=HOP, startFromZero=True):
        magnitudes = spectrum(window(frame))
        for (peaks, hpcp), out in zip(bands, (full, bass, low_register), strict=True):
            out.append(hpcp(*peaks(magnitudes)))
    # HPCP's bin 0 is A (440 Hz): C, three semitones up, comes first here
    full, bass, low_register = (
        np.roll(np.array(c, dtype=np.float64), -3, axis=1) for c in (full, bass, low_register)
    )
    return Chroma(full=full, bass=bass, low=low_register)


def segments(frames: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """[len(bounds) - 1, 12]: the mean of the frames whose centre is in each [b_i, b_i+1)
    (seconds); a segment shorter than a hop takes the frame nearest its middle."""
    if len(bounds) < 2 or len(frames) == 0:
        return np.zeros((max(0, len(bounds) - 1), 12))
    centres = (np.arange(len(frames)) * HOP + FRAME / 2) / SAMPLE_RATE
    starts = np.searchsorted(centres, bounds[:-1])
    ends = np.searchsorted(centres, bounds[1:])
    cumulative = np.vstack([np.zeros(12), np.cumsum(frames, axis=0)])
    out = np.empty((len(starts), 12))
    for i, (a, b) in enumerate(zip(starts, ends, strict=True)):
        if b > a:
            out[i] = (cumulative[b] - cumulative[a]) / (b - a)
        else:
            middle = (bounds[i] + bounds[i + 1]) / 2
            out[i] = frames[min(len(frames) - 1, int(np.argmin(np.abs(centres - middle))))]
    return out


def novelty(segment_chroma: np.ndarray) -> np.ndarray:
    """[n - 1]: 1 - cosine of each segment's chroma with the previous one's (0 for silence)."""
    norms = np.linalg.norm(segment_chroma, axis=1)
    unit = segment_chroma / np.where(norms > 0, norms, 1.0)[:, None]
    cosine = (unit[1:] * unit[:-1]).sum(axis=1)
    silent = (norms[1:] == 0) | (norms[:-1] == 0)
    return np.where(silent, 0.0, 1.0 - cosine)


def chords(full: np.ndarray, bass: np.ndarray) -> np.ndarray:
    """Index into TRIADS of each segment's chord (module docstring); -1 for silence."""
    if len(full) == 0:
        return np.zeros(0, dtype=int)
    norms = np.linalg.norm(full, axis=1, keepdims=True)
    unit = full / np.where(norms > 0, norms, 1.0)
    top = bass.max(axis=1, keepdims=True)
    roots = bass / np.where(top > 0, top, 1.0)
    score = unit @ _TEMPLATES.T + BASS_WEIGHT * roots[:, [root for root, _ in TRIADS]]
    labels = np.argmax(score, axis=1)
    smoothed = labels.copy()
    passing = (labels[:-2] == labels[2:]) & (labels[1:-1] != labels[:-2])
    smoothed[1:-1][passing] = labels[:-2][passing]
    return np.where(norms[:, 0] > 0, smoothed, -1)
