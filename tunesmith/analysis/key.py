"""Key of a mono 44.1 kHz signal: the 24 major and minor keys weighed on what the music does.

Essentia's KeyExtractor correlates the song's pitch-class profile with one key profile; on
songs in natural minor it often names the relative major or the minor key a fourth up (the
two share all but one note), and songs cut from the middle of a piece, which neither start
nor end on their tonic, mislead any rule that looks at the ends alone. Here every key is
weighed on six measured values, each how a listener finds a tonic:

- `profile`: the correlation of the song's mean chroma (analysis.chroma, full band) with the
  key's Krumhansl-Kessler probe-tone profile (Krumhansl and Kessler 1982, the values
  Essentia's Key algorithm uses as "krumhansl");
- `extractor`: 1 for the key KeyExtractor names ("bgate" profile, Essentia's default), 0 for
  the others;
- `start_end`: how well the first and the last bar's chroma match the key's tonic triad
  (cosine), averaged: tonal music states its tonic where it starts and ends;
- `start_end_bass`: how much of the bass in the first and last bar sits on the tonic, against
  the bar's strongest bass note;
- `tonic_chord`: the share of the beat tracker's pulses whose chord (analysis.chroma.chords)
  is the tonic triad;
- `diatonic_chords`: the share whose chord belongs to the key (major: I ii iii IV V vi; minor:
  i iv v III VI VII and the harmonic V). This tells a minor key from its neighbour a fourth
  up, with which it shares all but one note: a song in E minor plays D major (its VII), which
  A minor has only as a minor chord.

Their weighted sum is each key's log-odds and the softmax its probability; the weights were
fitted (a conditional logit, 6 numbers) by tests/analysis/fit_analysis.py on development
songs only (analysis.meter says which). The confidence is the probability raised to the
power that puts REVIEW_PROBABILITY at 0.5, the labels' review floor
(analysis.meter.calibrated). A bar is the metre's bar at the song's tempo (two seconds when
there is none), counted from the first and back from the last sound above -40 dB of the
peak.

Not handled: modulation (one global key), modes other than major and minor, chords other
than triads (analysis.chroma).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from tunesmith.analysis import chroma as chroma_analysis
from tunesmith.analysis.chroma import PITCH_CLASSES, TRIADS
from tunesmith.analysis.meter import calibrated

SAMPLE_RATE = 44100
# "bgate": Essentia's default, built from Beatport's global-key set.
KEY_PROFILE = "bgate"
_ENHARMONIC = {"Db": "C#", "D#": "Eb", "Gb": "F#", "G#": "Ab", "A#": "Bb"}
TRIM_DB = -40.0  # what counts as sound when finding the first and last bar
# Krumhansl and Kessler (1982) probe-tone ratings, tonic first (Essentia's "krumhansl").
KRUMHANSL = {
    "major": np.array([6.35, 2.23, 3.48, 2.33, 4.38, 4.09, 2.52, 5.19, 2.39, 3.66, 2.29, 2.88]),
    "minor": np.array([6.33, 2.68, 3.52, 5.38, 2.60, 3.53, 2.54, 4.75, 3.98, 2.69, 3.34, 3.17]),
}
# Degrees (semitones above the tonic) and qualities of the key's chords (module docstring).
DIATONIC = {
    "major": {(0, "major"), (2, "minor"), (4, "minor"), (5, "major"), (7, "major"), (9, "minor")},
    "minor": {
        (0, "minor"),
        (5, "minor"),
        (7, "minor"),
        (7, "major"),
        (3, "major"),
        (8, "major"),
        (10, "major"),
    },
}
FEATURES = (
    "profile",
    "extractor",
    "start_end",
    "start_end_bass",
    "tonic_chord",
    "diatonic_chords",
)
# Fitted by tests/analysis/fit_analysis.py (module docstring).
WEIGHTS = {
    "profile": 6.343,
    "extractor": 2.278,
    "start_end": 2.823,
    "start_end_bass": 2.213,
    "tonic_chord": 2.122,
    "diatonic_chords": 16.306,
}
REVIEW_PROBABILITY = 0.80  # a key less probable than this is listed for review
KEYS = tuple((tonic, scale) for scale in ("major", "minor") for tonic in range(12))


@dataclass(frozen=True)
class Key:
    key: str  # tonic, spelled as PITCH_CLASSES
    scale: str  # "major" or "minor"
    strength: float  # KeyExtractor's profile correlation for its own answer
    confidence: float  # 0..1, see the module docstring
    extractor_key: str  # what KeyExtractor said, e.g. "D major"
    probability: float  # of the key, before the review calibration
    candidates: list[dict] = field(default_factory=list)  # the three most probable keys

    def as_dict(self) -> dict:
        return asdict(self)


def estimate_key(
    mono: np.ndarray,
    chroma: chroma_analysis.Chroma,
    ticks: np.ndarray,
    bar_seconds: float,
) -> Key:
    """The key of `mono` (float32, 44.1 kHz) from its chromagram, the beat tracker's ticks
    (empty for none) and the bar's length in seconds (0 for none: two seconds)."""
    import essentia.standard as es

    name, scale, strength = es.KeyExtractor(profileType=KEY_PROFILE, sampleRate=SAMPLE_RATE)(mono)
    extractor = (_ENHARMONIC.get(name, name), scale)
    found = evidence(sounding(mono), chroma, ticks, bar_seconds, extractor)
    scores = np.array([sum(WEIGHTS[k] * e[k] for k in FEATURES) for e in found])
    p = np.exp(scores - scores.max())
    p /= p.sum()
    order = np.argsort(-p)
    tonic, chosen_scale = KEYS[order[0]]
    return Key(
        key=PITCH_CLASSES[tonic],
        scale=chosen_scale,
        strength=float(strength),
        confidence=round(calibrated(float(p[order[0]]), REVIEW_PROBABILITY), 4),
        extractor_key=f"{extractor[0]} {extractor[1]}",
        probability=round(float(p[order[0]]), 4),
        candidates=[
            {
                "key": f"{PITCH_CLASSES[KEYS[i][0]]} {KEYS[i][1]}",
                "probability": round(float(p[i]), 4),
                "evidence": {k: round(v, 4) for k, v in found[i].items()},
            }
            for i in order[:3]
        ],
    )


def evidence(
    sounding_seconds: tuple[float, float],
    chroma: chroma_analysis.Chroma,
    ticks: np.ndarray,
    bar_seconds: float,
    extractor: tuple[str, str],
) -> list[dict[str, float]]:
    """The FEATURES of each of KEYS (module docstring), in KEYS' order; `sounding_seconds`:
    where the sound starts and ends (`sounding`)."""
    start, end = sounding_seconds
    bar = bar_seconds if bar_seconds > 0 else 2.0
    ends = np.array([start, min(end, start + bar), max(start, end - bar), end])
    first, _, last = chroma_analysis.segments(chroma.full, ends)
    first_bass, _, last_bass = chroma_analysis.segments(chroma.bass, ends)
    whole = chroma_analysis.segments(chroma.full, np.array([start, end]))[0]
    if len(ticks) >= 2:
        pulses = ticks
    else:  # no beat: half-second segments
        pulses = np.arange(start, end + 0.5, 0.5)
    labels = chroma_analysis.chords(
        chroma_analysis.segments(chroma.full, pulses), chroma_analysis.segments(chroma.bass, pulses)
    )
    labels = labels[labels >= 0]
    rows: list[dict[str, float]] = []
    for tonic, scale in KEYS:
        profile = np.roll(KRUMHANSL[scale], tonic)
        triad = [tonic, (tonic + (4 if scale == "major" else 3)) % 12, (tonic + 7) % 12]
        chords = {
            TRIADS.index(((tonic + degree) % 12, quality)) for degree, quality in DIATONIC[scale]
        }
        home = TRIADS.index((tonic, scale))
        row = {
            "profile": _correlation(whole, profile),
            "extractor": 1.0 if extractor == (PITCH_CLASSES[tonic], scale) else 0.0,
            "start_end": (_on_triad(first, triad) + _on_triad(last, triad)) / 2,
            "start_end_bass": (_share(first_bass, tonic) + _share(last_bass, tonic)) / 2,
            "tonic_chord": float(np.mean(labels == home)) if len(labels) else 0.0,
            "diatonic_chords": float(np.mean([c in chords for c in labels]))
            if len(labels)
            else 0.0,
        }
        rows.append({name: float(value) for name, value in row.items()})
    return rows


def sounding(mono: np.ndarray) -> tuple[float, float]:
    """Seconds of the first and last sample above TRIM_DB of the peak ((0, 0) for silence)."""
    magnitude = np.abs(mono)
    peak = float(magnitude.max()) if len(mono) else 0.0
    if peak <= 0:
        return 0.0, 0.0
    loud = magnitude > peak * 10 ** (TRIM_DB / 20)  # a mask: no index array of every sample
    first, last = int(np.argmax(loud)), len(loud) - int(np.argmax(loud[::-1]))
    return first / SAMPLE_RATE, last / SAMPLE_RATE


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(), b - b.mean()
    norm = float(np.sqrt((a @ a) * (b @ b)))
    return float(a @ b) / norm if norm > 0 else 0.0


def _on_triad(chroma: np.ndarray, triad: list[int]) -> float:
    """Cosine of a chroma with the triad's three notes."""
    norm = float(np.linalg.norm(chroma))
    return float(chroma[triad].sum()) / (norm * np.sqrt(3.0)) if norm > 0 else 0.0


def _share(bass: np.ndarray, tonic: int) -> float:
    top = float(bass.max())
    return float(bass[tonic]) / top if top > 0 else 0.0
