"""Metre of a mono 44.1 kHz signal: beats a bar (3 or 4) and whether the beat divides in three.

The beat tracker (analysis.tempo) gives one pulse, the tracker's tempo T (its period p = 60/T
seconds), which may be the beat, its eighth notes, or the quarter notes of a compound metre.
What else recurs is read from the autocorrelation of two onset-strength curves (a positive
log-spectral flux, 172 frames a second, its one-second running mean taken away): one over the
full band (every note, hats included) and one under 200 Hz (kick and bass, which mark the
bar). F(x) and L(x) are their autocorrelations, normalised to 1 at lag 0, at lag x (the
highest value within 3% of x, so that a tracker a little off still reads its peaks).
The rules, in this order, each from the structure of the metre it names:

1. the beat divides in three at p (6/8 or 12/8 at the tracker's tempo):
   `triplet = min(F(p/3), F(2p/3)) - F(p/2) > TRIPLET_MARGIN`;
2. the tracker counts the eighths of a compound metre (the beat is 3p, the tempo T/3): the
   bass groups the tracker's pulses in threes, `L(3p) - max(L(2p), L(4p)) > GROUP_MARGIN`,
   at a pulse too fast to be a waltz's beat (T >= EIGHTH_MIN_BPM);
3. the tracker counts quarter notes of a compound metre (the beat is 1.5p, the tempo 2T/3):
   `F(1.5p) - F(p) > DOTTED_MARGIN`, the dotted quarter recurs more than the tracker's pulse;
4. otherwise the metre is simple; three beats a bar when either curve groups them in threes,
   `max over F, L of X(3p) - max(X(2p), X(4p)) > WALTZ_MARGIN`, four otherwise.

A compound metre is written "6" (ACE-Step 1.5's value for 6/8) unless the full band recurs
more at four beats than at two (`F(4b) - F(2b) > WALTZ_MARGIN`, b the beat), which is 12/8,
written "4" (its four dotted-quarter beats a bar, as tests/analysis/corpus60.py has it).

The margins are round values set on the development half of tests/analysis/corpus60.py: the
smallest that no song of another metre there reached. The confidence (0..1) is how far past
its margin the deciding value lies (half at the margin, 1 one margin beyond), times how
periodic the signal is at all (F at the beat over 0.5, at most 1): a free-time string pad
reads "4" with a confidence near 0. A "4" found because nothing said 3 or compound gets the
confidence of the 3/4 test's distance from its margin, counted the other way.

Not handled: 2/4 (read as "4"), 5/4, 7/8 and other odd metres, metre changes, and a 3/4 whose
tracker counts dotted quarters (a fast waltz heard in two).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

SAMPLE_RATE = 44100
HOP = 256  # 172 onset frames a second: a third of a beat at 208 BPM is 16 frames
FRAME = 2048
LOW_BAND_HZ = 200.0
LAG_TOLERANCE = 0.03
TRIPLET_MARGIN = 0.3
GROUP_MARGIN = 0.2
EIGHTH_MIN_BPM = 140.0
DOTTED_MARGIN = 0.2
WALTZ_MARGIN = 0.06
PERIODIC = 0.5  # F at the beat above this: the signal is periodic enough to trust


@dataclass(frozen=True)
class Metre:
    timesignature: str  # ACE-Step 1.5's value: "3", "4" or "6"
    confidence: float  # 0..1, see the module docstring
    compound: bool  # the beat divides in three (6/8, 12/8)
    factor: float  # the beat's tempo over the tracker's: 1, 1/3 or 2/3
    rule: str  # which rule decided: "triplet", "eighths", "dotted", "waltz", "simple"
    features: dict  # the values the rules compared, rounded

    def as_dict(self) -> dict:
        return asdict(self)


UNKNOWN = Metre("4", 0.0, False, 1.0, "none", {})


def estimate_metre(mono: np.ndarray, tracker_bpm: float) -> Metre:
    """The metre of `mono` (float32, 44.1 kHz) given the beat tracker's tempo (0: none)."""
    if tracker_bpm <= 0 or len(mono) < FRAME * 4:
        return UNKNOWN
    full, low = (autocorrelation(curve) for curve in onset_strength(mono))
    return decide(full, low, 60.0 / tracker_bpm)


def decide(full: np.ndarray, low: np.ndarray, period: float) -> Metre:
    """The rules of the module docstring on two autocorrelations and the tracker's period."""

    def f(x: float) -> float:
        return _at(full, period * x)

    def lo(x: float) -> float:
        return _at(low, period * x)

    triplet = min(f(1 / 3), f(2 / 3)) - f(1 / 2)
    eighths = lo(3) - max(lo(2), lo(4))
    dotted = f(1.5) - f(1)
    waltz = max(f(3) - max(f(2), f(4)), eighths)
    features = {
        "triplet": triplet,
        "eighths": eighths,
        "dotted": dotted,
        "waltz": waltz,
        "periodic": f(1),
    }
    features = {k: round(float(v), 4) for k, v in features.items()}
    tracker_bpm = 60.0 / period
    if triplet > TRIPLET_MARGIN:
        return _compound(full, period, 1.0, "triplet", triplet / TRIPLET_MARGIN, features)
    if eighths > GROUP_MARGIN and tracker_bpm >= EIGHTH_MIN_BPM:
        return _compound(full, period, 1 / 3, "eighths", eighths / GROUP_MARGIN, features)
    if dotted > DOTTED_MARGIN:
        return _compound(full, period, 2 / 3, "dotted", dotted / DOTTED_MARGIN, features)
    reliability = min(1.0, max(0.0, f(1)) / PERIODIC)
    if waltz > WALTZ_MARGIN:
        confidence = _beyond(waltz / WALTZ_MARGIN) * reliability
        return Metre("3", round(confidence, 4), False, 1.0, "waltz", features)
    confidence = _beyond(2.0 - waltz / WALTZ_MARGIN) * reliability
    return Metre("4", round(confidence, 4), False, 1.0, "simple", features)


def _compound(
    full: np.ndarray, period: float, factor: float, rule: str, ratio: float, features: dict
) -> Metre:
    beat = period / factor
    four = _at(full, 4 * beat) - _at(full, 2 * beat)
    features = {**features, "four_over_two": round(float(four), 4)}
    timesignature = "4" if four > WALTZ_MARGIN else "6"
    reliability = min(1.0, max(0.0, _at(full, beat), _at(full, period)) / PERIODIC)
    confidence = _beyond(ratio) * reliability
    return Metre(timesignature, round(confidence, 4), True, factor, rule, features)


def _beyond(ratio: float) -> float:
    """0.5 at the margin (ratio 1), 1 at twice the margin, 0 at none."""
    return float(min(1.0, max(0.0, ratio / 2.0)))


def onset_strength(mono: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positive log-magnitude spectral flux, HOP samples a frame, its slow trend removed:
    over the full band and under LOW_BAND_HZ, from one short-time spectrum."""
    frames = np.lib.stride_tricks.sliding_window_view(mono, FRAME)[::HOP]
    spectrum = np.abs(np.fft.rfft(frames * np.hanning(FRAME).astype(np.float32), axis=1))
    rise = np.maximum(np.diff(np.log1p(100.0 * spectrum), axis=0), 0.0)
    low = int(LOW_BAND_HZ * FRAME / SAMPLE_RATE) + 1
    second = int(SAMPLE_RATE / HOP)
    curves = []
    for flux in (rise.sum(axis=1), rise[:, :low].sum(axis=1)):
        width = min(second, len(flux))  # a clip under a second: its own mean
        trend = np.convolve(flux, np.ones(width) / width, mode="same")
        curves.append(np.maximum(flux - trend, 0.0))
    return curves[0], curves[1]


def autocorrelation(x: np.ndarray) -> np.ndarray:
    """Autocorrelation of `x` minus its mean, 1 at lag 0 (all zeros for a constant)."""
    x = x - x.mean()
    spectrum = np.fft.rfft(x, 2 * len(x))
    acf = np.fft.irfft(spectrum * np.conj(spectrum))[: len(x)]
    return acf / acf[0] if acf[0] > 0 else np.zeros_like(acf)


def _at(acf: np.ndarray, seconds: float) -> float:
    lag = seconds * SAMPLE_RATE / HOP
    lo, hi = int(np.floor(lag * (1 - LAG_TOLERANCE))), int(np.ceil(lag * (1 + LAG_TOLERANCE))) + 1
    if hi > len(acf) // 2:  # fewer than half the frames overlap: no evidence
        return 0.0
    return float(acf[lo:hi].max())
