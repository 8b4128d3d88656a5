"""Tempo of a mono 44.1 kHz signal: Essentia's beat tracker, at the metrical level the music
shows.

RhythmExtractor2013 ("multifeature") finds the beat grid well but often at the wrong
metrical level: a slow song read at double speed (its eighth notes taken for beats), a fast
one at half, a 6/8 song at its eighths or its quarter notes. The level and the metre are
chosen together by analysis.meter from what the music does at each level (where its chords
change, whether its beat divides in two or three, what recurs), never from a preferred
tempo: over the songs this is measured on, 60 and 120 BPM are equally likely.

The tempo is the tracker's times the chosen hypothesis's factor: the tempo the hypotheses
within 4% of it make most probable together (analysis.meter.decision). Its probability is that
sum (a 3/4 and a 6/8 reading can agree on the tempo and differ on the metre); the confidence
is that probability raised to the power that puts REVIEW_PROBABILITY at 0.5, the labels'
review floor (analysis.meter.calibrated).
`alternatives` are the other tempi worth hearing: those with a probability of ALTERNATIVE or
more, most likely first. The tracker's own beat confidence (0 to 5.32; Essentia calls 3.5
and above excellent) is kept as `beat_confidence`; it does not enter the confidence (on the
development songs it did not tell a wrong level from a right one).

Not handled: tempo changes (one global tempo), odd metres; see analysis.audio and
analysis.meter.
"""

from __future__ import annotations

import math
import threading
from dataclasses import asdict, dataclass, field

import numpy as np

from tunesmith.analysis import chroma as chroma_analysis
from tunesmith.analysis import meter as meter_analysis
from tunesmith.analysis.meter import MAX_TEMPO, MIN_TEMPO

ALTERNATIVE = 0.1  # a tempo this probable is named beside the chosen one
REVIEW_PROBABILITY = 0.95  # a tempo less probable than this is listed for review

__all__ = ["MAX_TEMPO", "MIN_TEMPO", "NO_TEMPO", "Tempo", "Track", "estimate_tempo", "track"]


@dataclass(frozen=True)
class Track:
    """What RhythmExtractor2013 says: its tempo, its beats (seconds), its confidence."""

    bpm: float  # 0.0 when no tempo is found
    ticks: np.ndarray
    confidence: float  # 0..5.32


@dataclass(frozen=True)
class Tempo:
    bpm: float  # 0.0 when no tempo is found
    confidence: float  # 0..1, see the module docstring
    beat_confidence: float  # RhythmExtractor2013's own, 0..5.32
    tracker_bpm: float  # what RhythmExtractor2013 said, before the level was chosen
    factor: float  # bpm / tracker_bpm: 1/3, 1/2, 2/3, 1, 3/2 or 2
    probability: float  # of the tempo, before the review calibration
    alternatives: tuple[float, ...] = ()  # other tempi worth hearing (module docstring)
    metre: dict = field(default_factory=dict)  # analysis.meter.Metre.as_dict()

    def as_dict(self) -> dict:
        return asdict(self)


NO_TEMPO = Tempo(0.0, 0.0, 0.0, 0.0, 1.0, 0.0)


_built = threading.local()  # an Essentia algorithm is not for two threads at once


def _tracker():
    """This thread's RhythmExtractor2013, built on first use. Building one ("multifeature":
    five onset detectors and their trackers) costs about 0.15 CPU s, a sixth of a song's
    analysis; what it returns does not depend on the clips it read before
    (tests/analysis/test_tempo_and_key.py), so one serves every song."""
    if not hasattr(_built, "tracker"):
        import essentia.standard as es

        _built.tracker = es.RhythmExtractor2013(
            method="multifeature", minTempo=MIN_TEMPO, maxTempo=MAX_TEMPO
        )
    return _built.tracker


def track(mono: np.ndarray) -> Track:
    """RhythmExtractor2013 on `mono` (float32, 44.1 kHz). On clips under ~1 s it returns bpm
    0 itself; on silence a bpm far above MAX_TEMPO with confidence 0, so anything outside the
    range counts as none."""
    bpm, ticks, confidence, _, _ = _tracker()(mono)
    if not (math.isfinite(bpm) and MIN_TEMPO <= bpm <= MAX_TEMPO):
        return Track(0.0, np.zeros(0), 0.0)
    return Track(float(bpm), np.asarray(ticks, dtype=np.float64), float(confidence))


def estimate_tempo(
    mono: np.ndarray, chroma: chroma_analysis.Chroma, tracked: Track | None = None
) -> Tempo:
    """The tempo of `mono` (float32, 44.1 kHz) with its chromagram; NO_TEMPO for silence or
    clips too short. `tracked`: `track(mono)` when the caller has it already."""
    tracked = tracked or track(mono)
    if tracked.bpm <= 0:
        return NO_TEMPO
    onsets = meter_analysis.Onsets.of(mono)
    found = meter_analysis.hypotheses(tracked.bpm, tracked.ticks, onsets, chroma)
    return decide(tracked, found)


def decide(tracked: Track, found: list[meter_analysis.Hypothesis]) -> Tempo:
    """The tempo, its confidence and alternatives from the weighed hypotheses."""
    best, metre, groups = meter_analysis.choose(found)
    if best is None:
        return NO_TEMPO
    chosen, *others = groups  # best is one of chosen's
    alternatives = tuple(round(g.bpm, 2) for g in others if g.probability >= ALTERNATIVE)
    return Tempo(
        bpm=best.bpm,
        confidence=round(meter_analysis.calibrated(chosen.probability, REVIEW_PROBABILITY), 4),
        beat_confidence=tracked.confidence,
        tracker_bpm=tracked.bpm,
        factor=float(best.factor),
        probability=round(chosen.probability, 4),
        alternatives=alternatives,
        metre=metre.as_dict(),
    )
