"""Metre and the tempo's metrical level of a mono 44.1 kHz signal, chosen together.

The beat tracker (analysis.tempo) gives one pulse, the tracker's tempo T, which may be the
beat, its eighth notes, its half notes, or the quarter notes of a compound metre. Which it
is, and the metre, are chosen among hypotheses (metre, factor): the beat's tempo is
factor x T, and the metre says how many beats make a bar and whether the beat divides in two
or in three:

| metre | beats a bar | beat divides in | factors weighed | ACE-Step's value |
|---|---|---|---|---|
| 4/4 | 4 | 2 | 1/2, 1, 2 | "4" |
| 3/4 | 3 | 2 | 1/2, 1, 3/2, 2 | "3" |
| 6/8 | 2 dotted quarters | 3 | 1/3, 1/2, 2/3, 1, 2 | "6" |
| 12/8 | 4 dotted quarters | 3 | 1/3, 1/2, 2/3, 1 | "4" |

(only tempi from MIN_TEMPO to MAX_TEMPO). A compound beat's factor 1/2 is the tracker
following its eighths' long-short (a quarter and an eighth), two pulses to the dotted quarter:
without it, 11 of the 1,263 development songs, all compound, had no right hypothesis at all.

Each hypothesis predicts what the music does, and measured values (FEATURES) say how well it
does, each from the structure of metre itself, not from the tempo it would give (a 60 and a
120 BPM song are equally likely a priori):

- `harmony`: chords change at bar lines. The chord novelty of analysis.chroma (full band
  plus low register) on a grid of half pulses is correlated with a comb of the hypothesis's
  bar length (beats a bar / factor pulses), at the comb's best phase. A hypothesis a level
  too fast puts its bar lines on half the changes; one a level too slow misses every other
  one. The comb needs two of the bar's lengths: in a clip too short to hold two bars of
  every hypothesis, the bars it does hold give `harmony_part` instead (its own weight: the
  comb then favours the short bars it can count) and the others get `long_bar` = 1; a clip
  that holds no hypothesis's two bars has no harmony evidence at all.
- `harmony_half`, `harmony_double` (compound readings only, 0 for the simple ones): the same
  comb at half and at twice the reading's bar, where the clip holds two of them. A 12/8 bar
  is two 6/8 bars, so each of the two readings sees its rival's comb beside its own: chords
  every two dotted quarters say 6/8, every four either (6/8 held two bars, or 12/8), every
  eight 12/8. On the development songs (1,183, cross-validated) they raised the tempo from
  1,045 to 1,055 and the time signature from 1,037 to 1,044. Given to every reading, they had
  also moved sixteenth-note pop grooves to double time (docs/conventions/labels.md).
- `division`: the beat divides in two (simple metre) or three (compound). From the
  autocorrelation F of the full-band onset strength at the hypothesis's beat b:
  min(F(b/3), F(2b/3)) - F(b/2), positive when thirds of the beat recur more than halves;
  counted for compound hypotheses and against simple ones.
- `beat_full`, `beat_low`: the beat recurs. F(b), and L(b) for the onset strength under
  200 Hz (kick, bass), which marks the beat rather than its subdivisions.
- `bar_full`, `bar_low`: the bar recurs. F and L at the hypothesis's bar (its beats a bar
  times b: 4 beats for 4/4 and 12/8, 3 for 3/4, 2 dotted quarters for 6/8). The profile
  below weighs the same lags alike for every metre; these are the one onset evidence that
  belongs to the metre, a groove or an accompaniment figure that repeats once a bar. On the
  development songs they raised the cross-validated tempo from 731 to 756 of 891 and the
  time signature from 738 to 762, and on the third corpus fitted without it from 37 to 40
  and 39 to 43 of 48.
- the grid (grid_evidence): where the autocorrelations say what recurs, the tracker's own
  ticks say where the beats are, and the onset strength is read on each hypothesis's grid:
  `accent_full`, `accent_low` (the beat louder than its divisions), `grid_division` (the
  beat's thirds against its half, which tells a compound beat from a swung eighth),
  `downbeat_full`, `downbeat_low` (one beat of the bar louder than the others) and
  `backbeat` (the bass and the treble taking turns on the beats, a kick on one and three and
  a snare on two and four). On the development songs they raised the cross-validated tempo
  from 839 to 846 of 999 and the time signature from 845 to 850, and the tempo of the 4 s
  and 8 s excerpts from 645 to 664 and 766 to 777.
- `full_r`, `low_r` for r in PROFILE_LAGS (1/4, 1/3, 1/2, 2/3, 3/2, 2, 3 and 4 beats): the
  rest of the rhythm's profile around the hypothesis's beat, F(r b) and L(r b). A reading a
  level too slow finds the real beat at 1/2 or 1/3 of its own, one a level too fast at 2
  or 3 times it; how a groove recurs at those lags, in the full band and in the bass, is
  evidence about the level where the harmony has none (chords held two bars put the
  harmony's bar at the double). On the development songs these lags changed few choices
  but made the probabilities sharper: the review list flags fewer right values (below).

- the learned beats (activation_evidence): analysis.activation's network gives each frame a
  beat and a downbeat probability, learned from the development songs' known beats, and the
  hypothesis is read on them as on the onsets: `act_beat`, `act_beat_half` (the beat
  activation recurring at the beat and at half of it), `act_bar`, `act_bar_half` (the downbeat
  activation at the bar and half of it), `act_accent` (the beat activation on the beats against
  their divisions) and `act_downbeat` (the downbeat activation on one beat of the bar against
  the others). Measured on the development songs (2,095, cross-validated, three networks in the
  model) they raised the tempo from 1,774 to 1,806, the time signature from 1,753 to 1,775 and
  the tempo of the 4 s and 8 s excerpts from 1,447 to 1,491 and 1,659 to 1,687. The same
  network also says, a frame at a time, which metre and which tempo it hears (analysis.
  activation's metre and tempo heads): `act_tempo` is the log of the clip's tempo
  probability at the hypothesis's tempo, `act_metre` that of its metre. Measured on the
  development songs (2,247, cross-validated, the same folds) against the network without the
  heads, they raised the tempo from 1,916 to 1,952 and the time signature from 1,898 to 1,917;
  on the seventeenth corpus, held out, two tempi and no time signature.

A value that some hypothesis cannot measure (a lag longer than half the clip: the slow
readings of a short clip) is left out for every hypothesis of that clip, so that a missing
value never counts as a low one.

A fitted model turns each hypothesis's values, and two indicators of its own (its factor, its
metre: how often the tracker's pulse is the beat, its eighths, its half notes..., and how common
each metre is), into its log-odds; the softmax over a clip's hypotheses gives probabilities.
Nothing in it is a prior over BPM but what the learned tempo carries (it hears the tempo in the
sound, and learned it on songs whose tempi are spread evenly over 45-200 BPM). The model
(LevelModel, in MODEL_FILE) is small: ten networks of one layer of 64 tanh units, each fitted
from its own random start, their scores averaged. It was a weighted sum of the same values until
the seventh corpus, but what one value says depends on the others (a bar that recurs in the bass
matters when there is a bass; the harmony when the chords move), and a sum cannot weigh that: on
the development songs of the time, cross-validated, the networks read 970 tempi of 1,111 against
the sum's 947, and 969 time signatures against 953 (docs/conventions/labels.md has the figures
by corpus). It is fitted (maximum likelihood of the right hypothesis, a little L2 shrinkage) by
tests/analysis/fit_analysis.py on development songs only, 2,575 of them: both halves of
tests/analysis/corpus60.py and of tests/analysis/corpus96.py and all of tests/analysis/corpus48.py,
corpus56.py, corpus52.py, corpus64.py, corpus72.py, corpus80.py, corpus88.py, corpus104.py,
corpus112.py, corpus120.py, corpus128.py, corpus136.py, corpus144.py, corpus152.py, corpus160.py
and corpus168.py (hand-written arrangements, chords held one or two bars; each was scored as
held-out data, then became development data), corpus60's "dev_extra" songs (192 more of its
generator), 480 songs in arrangements drawn at random (tests/analysis/random_styles.py: what was
learnt from a table of arrangements did not carry over to the next table, what is learnt from
random ones does better) and the "tuning" half of tests/analysis/corpus.py with 48 more songs of
its generator, each whole and as 4 s and 8 s excerpts (a short clip is weighed on less, and the
model has seen what that looks like). The learned activations it is fitted on are each clip's from
a network that never heard the clip's corpus (fit_analysis.table_folds): the model weighs them as
they sound on music from a new table of arrangements, as the held-out songs are. The held-out songs
are tests/analysis/corpus176.py's and corpus184.py's, each scored once, in arrangements none of
those has. (fit_analysis.py now counts corpus176.py among the development songs too; the refit on
them read no more of corpus184.py and was not shipped: docs/conventions/labels.md.)

The tempo's probability is the sum over the hypotheses within 4% of it (a 3/4 and a 6/8
reading can agree on the tempo and differ on the metre), the time signature's the sum over
those that give it. The tempo chosen is the one most probable in that sum, not the tempo of the
single most probable hypothesis: three readings at one tempo, each a little less probable
than a fourth at another, are together the likelier tempo. The time signature chosen is the
one most probable among the readings at that tempo (a click on every beat, no accent, has its
tempo certain and its bar not: 4/4 and 12/8 together outweigh 6/8 there), and the metre and
factor recorded are the most probable reading that gives both. On the development songs
(1,263, cross-validated) choosing by the sums raised the tempo from 1,118 to 1,129, the 4 s
and 8 s excerpts from 910 to 925 and 1,052 to 1,057, and the time signature from 1,124 to
1,128 (the time signature chosen by its own sum over every tempo read 1,122). A confidence is
that probability raised to a power that puts REVIEW_PROBABILITY at 0.5, the labels' review
floor: values whose runners-up are close get listed. The review probabilities were set on the
same development songs from cross-validated probabilities (tests/analysis/fit_analysis.py
gives the rule), each fold holding whole corpora so that the probabilities are those of music
from a table of arrangements the fit has not met: for the tempo and the key together, the pair
that catches 80% of the wrong values while listing the fewest right ones; for the time
signature, the level under which 80% of its wrong values fall.

Not handled: 2/4 (read as 4/4), 5/4, 7/8 and other odd metres, metre and tempo changes;
music whose chords do not change with the bar (a drone, one chord throughout) leaves the
harmony silent and the choice to the onsets.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from functools import cache, cached_property
from pathlib import Path

import numpy as np

from tunesmith.analysis import activation
from tunesmith.analysis import chroma as chroma_analysis
from tunesmith.store import sha256_file

SAMPLE_RATE = 44100
HOP = 256  # 172 onset frames a second: a third of a beat at 208 BPM is 16 frames
FRAME = 2048
BLOCK = 1024  # onset frames a spectrum block (onset_strength): 16 MB of float64 frames
LOW_BAND_HZ = 200.0
LAG_TOLERANCE = 0.03
AGREE = 0.04  # two tempi agree within 4% (MIREX's tempo tolerance)
MIN_TEMPO, MAX_TEMPO = 40, 208  # RhythmExtractor2013's defaults, made explicit


@dataclass(frozen=True)
class Bar:
    beats: int  # beats a bar
    compound: bool  # the beat divides in three
    timesignature: str  # ACE-Step 1.5's value


METRES: dict[str, Bar] = {
    "4/4": Bar(4, False, "4"),
    "3/4": Bar(3, False, "3"),
    "6/8": Bar(2, True, "6"),
    "12/8": Bar(4, True, "4"),  # four dotted-quarter beats, as tests/analysis/corpus60 has it
}
F = Fraction
FACTORS: dict[str, tuple[Fraction, ...]] = {
    "4/4": (F(1, 2), F(1), F(2)),
    "3/4": (F(1, 2), F(1), F(3, 2), F(2)),
    "6/8": (F(1, 3), F(1, 2), F(2, 3), F(1), F(2)),
    "12/8": (F(1, 3), F(1, 2), F(2, 3), F(1)),
}
GRID_FEATURES = (
    "accent_full",
    "accent_low",
    "grid_division",
    "downbeat_full",
    "downbeat_low",
    "backbeat",
)
GRID_TOLERANCE = 2  # onset frames (12 ms) either side of a grid position
MAX_SHIFT = 12  # onset frames (70 ms): how far the tracker's ticks may be off the onsets
PROFILE_LAGS = (F(1, 4), F(1, 3), F(1, 2), F(2, 3), F(3, 2), F(2), F(3), F(4))  # in beats
FEATURES = (
    "harmony",
    "harmony_part",
    "long_bar",
    "harmony_half",
    "harmony_double",
    "division",
    "beat_full",
    "beat_low",
    "bar_full",
    "bar_low",
    *GRID_FEATURES,
) + tuple(f"{band}_{lag}" for band in ("full", "low") for lag in PROFILE_LAGS)
ACTIVATION_FEATURES = (
    "act_beat",
    "act_beat_half",
    "act_bar",
    "act_bar_half",
    "act_accent",
    "act_downbeat",
    "act_tempo",
    "act_metre",
)
FEATURES += ACTIVATION_FEATURES
LEAST_PROBABILITY = 1e-3  # the floor under a learned probability before its log
# The hypothesis's own level and metre, as indicators: what the tracker's pulse usually is
# (its eighths, its half notes, ...) and how common each metre is. Factor 1 and 4/4 are the
# reference (no indicator).
PRIOR_FACTORS = (F(1, 3), F(1, 2), F(2, 3), F(3, 2), F(2))
PRIOR_METRES = ("3/4", "6/8", "12/8")
INPUTS = (
    FEATURES
    + tuple(f"factor {f}" for f in PRIOR_FACTORS)
    + tuple(f"metre {m}" for m in PRIOR_METRES)
)
MODEL_FILE = Path(__file__).with_name("level_model.safetensors")
REVIEW_PROBABILITY = 0.85  # a time signature less probable than this is listed for review


@dataclass(frozen=True)
class Hypothesis:
    metre: str  # a key of METRES
    factor: Fraction  # the beat's tempo over the tracker's
    bpm: float
    evidence: dict[str, float]  # FEATURES

    def inputs(self) -> list[float]:
        """The level model's inputs (INPUTS): the evidence, then the prior's indicators."""
        return (
            [self.evidence[k] for k in FEATURES]
            + [float(self.factor == f) for f in PRIOR_FACTORS]
            + [float(self.metre == m) for m in PRIOR_METRES]
        )


@dataclass(frozen=True)
class Metre:
    timesignature: str  # ACE-Step 1.5's value: "3", "4" or "6"
    confidence: float  # 0..1, see the module docstring
    compound: bool  # the beat divides in three (6/8, 12/8)
    factor: float  # the beat's tempo over the tracker's: 1/3, 1/2, 2/3, 1, 3/2 or 2
    metre: str  # "4/4", "3/4", "6/8" or "12/8"
    probability: float  # of the time signature, before the review calibration
    hypotheses: list[dict] = field(default_factory=list)  # each weighed one, most likely first

    def as_dict(self) -> dict:
        return asdict(self)


UNKNOWN = Metre("4", 0.0, False, 1.0, "4/4", 0.0)


@dataclass(frozen=True)
class Onsets:
    """A clip's onset strength (onset_strength: full band and under LOW_BAND_HZ, one value a
    HOP), their autocorrelations, and the same in analysis.activation's bands (onset_bands;
    None where a caller has only the two)."""

    full: np.ndarray
    low: np.ndarray
    full_acf: np.ndarray
    low_acf: np.ndarray
    bands: np.ndarray | None = None

    @classmethod
    def of(cls, mono: np.ndarray) -> Onsets:
        full, low, bands = onset_bands(mono)
        return cls(full, low, autocorrelation(full), autocorrelation(low), bands)

    @cached_property
    def in_means(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The full band, the low band and the treble (full minus low), each in units of its
        own mean (zeros where silent): what grid_evidence reads, once a clip."""
        treble = np.maximum(self.full - self.low, 0.0)
        full, low, treble = (
            c / c.mean() if c.mean() > 0 else np.zeros_like(c)
            for c in (self.full, self.low, treble)
        )
        return full, low, treble


def hypotheses(
    tracker_bpm: float,
    ticks: np.ndarray,
    onsets: Onsets,
    chroma: chroma_analysis.Chroma,
    beats: np.ndarray | None = None,
) -> list[Hypothesis]:
    """Every (metre, factor) of the module docstring inside the tempo range, with its
    evidence. `beats`: the clip's activations [len(activation.OUTPUTS), frames], by default
    analysis.activation's network on `onsets.bands` and `chroma`."""
    full_acf, low_acf = onsets.full_acf, onsets.low_acf
    if beats is None:
        bands = onsets.bands
        if bands is None:  # only the two curves: the bands read as silent
            bands = np.zeros((len(activation.BAND_EDGES) - 1, len(onsets.full)))
        beats = activation.network()(activation.inputs(bands, chroma, HOP, FRAME))
    learned = Onsets(*beats[:2], *(autocorrelation(curve) for curve in beats[:2]))
    learned_shift = grid_shift(ticks, learned.full)
    learned_metre = activation.clip_metre(beats)
    weighed = [
        (metre, bar, factor)
        for metre, bar in METRES.items()
        for factor in FACTORS[metre]
        if MIN_TEMPO <= float(factor) * tracker_bpm <= MAX_TEMPO
    ]
    # A clip too short to hold two bars of a reading cannot show that reading's harmony: the
    # harmony is weighed for the readings it holds, and `long_bar` marks the others (none
    # when it holds no reading's two bars: then no reading has harmony evidence).
    lengths = {int(2 * bar.beats / f) for _, bar, f in weighed}
    heard = held_twice(ticks, lengths)
    change = chord_change(ticks, chroma) if heard else None  # once, for both sets of combs
    combs = harmony_combs(ticks, chroma, heard, change)
    # compound readings: the comb at half and twice the bar too (6/8 against 12/8)
    others = {
        n
        for _, bar, f in weighed
        if bar.compound
        for n in (int(bar.beats / f), int(4 * bar.beats / f))
    }
    extra = harmony_combs(ticks, chroma, held_twice(ticks, others), change) if combs else {}
    shift = grid_shift(ticks, onsets.full)
    measured = []
    for metre, bar, factor in weighed:
        bpm = float(factor) * tracker_bpm
        beat = 60.0 / bpm
        thirds = np.minimum(_at(full_acf, beat / 3), _at(full_acf, 2 * beat / 3))  # nan stays
        triple = thirds - _at(full_acf, beat / 2)
        half_pulses = 2 * bar.beats / factor  # an integer for every factor weighed
        evidence = {
            "harmony": combs.get(int(half_pulses), 0.0) if heard == lengths else 0.0,
            "harmony_part": combs.get(int(half_pulses), 0.0) if heard != lengths else 0.0,
            "long_bar": float(bool(combs) and int(half_pulses) not in heard),
            "harmony_half": extra.get(int(half_pulses / 2), 0.0) if bar.compound else 0.0,
            "harmony_double": extra.get(int(2 * half_pulses), 0.0) if bar.compound else 0.0,
            "division": triple if bar.compound else -triple,
            "beat_full": _at(full_acf, beat),
            "beat_low": _at(low_acf, beat),
            "bar_full": _at(full_acf, bar.beats * beat),
            "bar_low": _at(low_acf, bar.beats * beat),
        }
        evidence |= grid_evidence(ticks, factor, bar, onsets, shift)
        evidence |= activation_evidence(ticks, factor, bar, beat, learned, learned_shift)
        evidence["act_tempo"] = math.log(activation.clip_tempo(beats, bpm) + LEAST_PROBABILITY)
        evidence["act_metre"] = math.log(learned_metre[metre] + LEAST_PROBABILITY)
        for lag in PROFILE_LAGS:
            evidence[f"full_{lag}"] = _at(full_acf, float(lag) * beat)
            evidence[f"low_{lag}"] = _at(low_acf, float(lag) * beat)
        measured.append((metre, factor, bpm, {k: float(v) for k, v in evidence.items()}))
    # A value some hypothesis cannot measure (its lag is too long for the clip) is left out
    # for all of them, as the harmony is: a missing value must not count as a low one.
    missing = {k for *_, evidence in measured for k, v in evidence.items() if math.isnan(v)}
    return [
        Hypothesis(metre, factor, bpm, {k: 0.0 if k in missing else v for k, v in ev.items()})
        for metre, factor, bpm, ev in measured
    ]


def activation_evidence(
    ticks: np.ndarray, factor: Fraction, bar: Bar, beat: float, learned: Onsets, shift: int
) -> dict:
    """The hypothesis read on the learned activations (`learned`: the beat activation as its
    `full`, the downbeat activation as its `low`): `act_beat`, `act_beat_half`, the beat
    activation recurring at the beat and at half of it; `act_bar`, `act_bar_half`, the
    downbeat activation at the bar and half of it; `act_accent`, the beat activation on the
    beats against their divisions, and `act_downbeat`, the downbeat activation on one beat of
    the bar against the others (grid_evidence's accent_full and downbeat_low)."""
    grid = grid_evidence(ticks, factor, bar, learned, shift)
    return {
        "act_beat": _at(learned.full_acf, beat),
        "act_beat_half": _at(learned.full_acf, beat / 2),
        "act_bar": _at(learned.low_acf, bar.beats * beat),
        "act_bar_half": _at(learned.low_acf, bar.beats * beat / 2),
        "act_accent": grid["accent_full"],
        "act_downbeat": grid["downbeat_low"],
    }


def grid_evidence(
    ticks: np.ndarray, factor: Fraction, bar: Bar, onsets: Onsets, shift: int
) -> dict:
    """How loud the onsets are on the hypothesis's beats, between them and on its bar lines,
    on the tracker's own grid (the autocorrelations say what recurs, not where):

    - `accent_full`, `accent_low`: the onset strength on the beat against that on its
      divisions (the half beat; the thirds of a compound beat). A reading a level too fast
      puts every other beat on an off-beat, one too slow puts its divisions on beats.
    - `grid_division`: min(the two thirds) against the half of the beat, `division` from the
      grid (counted for compound readings, against simple ones): a swung eighth falls on
      the second third only, a compound beat's eighths on both.
    - `downbeat_full`, `downbeat_low`: the strongest beat of the bar (over the bar's
      phases) against the others: a kick, a bass note or a strum on the one.
    - `backbeat` (bars of an even number of beats): the bass (under LOW_BAND_HZ) and the
      treble (the rest) taking turns, odd beats against even ones in each, the one's
      contrast times minus the other's: a kick on one and three, a snare on two and four.

    "a against b" is _contrast of the mean strengths, -1 to 1; the beat's phase, where the
    reading's beat is longer than the tracker's pulse, is the one whose beats are loudest.
    nan (not measured) with fewer than two beats, the downbeats with fewer than two bars."""
    missing = dict.fromkeys(GRID_FEATURES, math.nan)
    n = len(ticks)
    step = 1.0 / float(factor)  # the beat, in tracker pulses
    if n < 4:
        return missing
    full, low, treble = onsets.in_means
    positions = np.arange(n, dtype=float)

    def at(curve: np.ndarray, beats: np.ndarray, fraction: float = 0.0) -> np.ndarray:
        """The strength `fraction` of a beat after each beat start (in tracker pulses)."""
        return _on_grid(curve, np.interp(beats + fraction * step, positions, ticks), shift)

    # phases: every pulse or half pulse (a 2/3 reading's beat falls between pulses) that
    # starts a beat; a reading at or faster than the pulse starts on the first one
    grain = 1.0 if float(step).is_integer() else 0.5
    phases = np.arange(0.0, step, grain) if step > 1 else np.zeros(1)
    candidates = [np.arange(phase, n - 1 - step + 1e-9, step) for phase in phases]
    if min(len(c) for c in candidates) < 2:
        return missing
    starts = max(candidates, key=lambda c: at(full, c).mean() + at(low, c).mean())

    full_thirds = [at(full, starts, f).mean() for f in (1 / 3, 2 / 3)]
    triple = _contrast(min(full_thirds), at(full, starts, 0.5).mean())
    evidence = {"grid_division": triple if bar.compound else -triple}
    divisions = (1 / 3, 2 / 3) if bar.compound else (0.5,)
    for name, curve in (("full", full), ("low", low)):
        beats = at(curve, starts)
        between = np.mean([at(curve, starts, f).mean() for f in divisions])
        evidence[f"accent_{name}"] = _contrast(beats.mean(), between)
        whole = len(beats) // bar.beats * bar.beats
        if whole < 2 * bar.beats:
            evidence[f"downbeat_{name}"] = math.nan
            continue
        by_bar = beats[:whole].reshape(-1, bar.beats).mean(axis=0)
        one = int(np.argmax(by_bar))
        others = (by_bar.sum() - by_bar[one]) / (bar.beats - 1)
        evidence[f"downbeat_{name}"] = _contrast(by_bar[one], others)
    evidence["backbeat"] = 0.0
    if bar.beats % 2 == 0 and len(starts) >= 4:
        turns = []
        for curve in (low, treble):
            beats = at(curve, starts)
            odd, even = beats[: len(beats) // 2 * 2].reshape(-1, 2).mean(axis=0)
            turns.append(_contrast(odd, even))
        evidence["backbeat"] = -turns[0] * turns[1]
    return evidence


def _contrast(a: float, b: float) -> float:
    """(a - b) / (a + b + 1) for strengths in units of the clip's mean: -1 to 1, and near 0
    when both are faint (two near-silent positions say nothing)."""
    return float((a - b) / (a + b + 1.0))


def grid_shift(ticks: np.ndarray, curve: np.ndarray) -> int:
    """The shift (onset frames) that puts the tracker's ticks on the onsets: the one, within
    MAX_SHIFT frames of the frame whose window is centred on the tick, under which the ticks
    are loudest. The tracker's ticks and the onset frames differ by a few tens of
    milliseconds, by song, which is as much as a third of a fast beat."""
    if len(ticks) == 0:
        return 0
    frames = _frames(ticks)
    shifts = np.arange(-MAX_SHIFT, MAX_SHIFT + 1)
    loudness = [curve[np.clip(frames + k, 0, len(curve) - 1)].mean() for k in shifts]
    return int(shifts[int(np.argmax(loudness))])


def _frames(times: np.ndarray) -> np.ndarray:
    """The onset frame whose window is centred on each time (seconds): onset_strength's
    frame i measures the rise into the window starting at (i + 1) HOP."""
    return np.rint((times * SAMPLE_RATE - FRAME / 2) / HOP - 1).astype(int)


def _on_grid(curve: np.ndarray, times: np.ndarray, shift: int) -> np.ndarray:
    """The onset strength at each time (seconds), shifted by `shift` frames (grid_shift): the
    highest within GRID_TOLERANCE frames."""
    frames = _frames(times) + shift
    offsets = np.arange(-GRID_TOLERANCE, GRID_TOLERANCE + 1)
    index = np.clip(frames[:, None] + offsets[None, :], 0, len(curve) - 1)
    return curve[index].max(axis=1)


@dataclass(frozen=True)
class LevelModel:
    """The fitted scorer of hypotheses: a few small networks (INPUTS -> a layer of tanh units
    -> one score), each fitted from its own random start; a hypothesis's log-odds is their
    mean score. Held in MODEL_FILE (safetensors: hidden.weight [members, hidden, inputs],
    hidden.bias [members, hidden], out.weight [members, hidden]; its metadata names the
    inputs in order). Written by tests/analysis/fit_analysis.py, which fits it."""

    hidden_weight: np.ndarray
    hidden_bias: np.ndarray
    out_weight: np.ndarray

    def member_scores(self, x: np.ndarray) -> np.ndarray:
        """Every member's score of each row of `x` (candidates x INPUTS): candidates x members."""
        units = np.tanh(np.einsum("mhi,ci->mch", self.hidden_weight, x) + self.hidden_bias[:, None])
        return np.einsum("mch,mh->cm", units, self.out_weight)

    def log_odds(self, x: np.ndarray) -> np.ndarray:
        """One score for each row of `x` (candidates x INPUTS): the members' mean."""
        return self.member_scores(x).mean(axis=1)

    @classmethod
    def load(cls, path: Path) -> LevelModel:
        from safetensors import safe_open

        with safe_open(path, "np") as stored:
            named = json.loads((stored.metadata() or {}).get("inputs", "[]"))
            if tuple(named) != INPUTS:
                raise ValueError(
                    f"{path}: fitted for the inputs {named}; this analysis measures {list(INPUTS)}"
                )
            names = ("hidden.weight", "hidden.bias", "out.weight")
            return cls(*(stored.get_tensor(name) for name in names))


@cache
def level_model() -> LevelModel:
    return LevelModel.load(MODEL_FILE)


def model_digest() -> str:
    """MODEL_FILE's SHA-256 (a refitted model is another analysis), "missing" without it."""
    return sha256_file(MODEL_FILE) if MODEL_FILE.is_file() else "missing"


def probabilities(found: list[Hypothesis]) -> np.ndarray:
    """Softmax of the hypotheses' log-odds under the shipped level model."""
    scores = level_model().log_odds(np.array([h.inputs() for h in found]))
    weights = np.exp(scores - scores.max())
    return weights / weights.sum()


@dataclass(frozen=True)
class TempoGroup:
    """Hypotheses that agree on the tempo: within AGREE of the most probable of them."""

    bpm: float  # the most probable member's
    probability: float  # the members' sum
    members: tuple[int, ...]  # indices into the hypotheses, most probable first


def tempo_groups(found: list[Hypothesis], p: np.ndarray) -> list[TempoGroup]:
    """`found` grouped by tempo, the most probable group first: taken in order of probability,
    a hypothesis joins the first group whose tempo is within AGREE of its own, or starts one."""
    groups: list[tuple[float, list[int]]] = []
    for i in np.argsort(-p, kind="stable"):
        bpm = found[i].bpm
        match = next(
            (members for centre, members in groups if abs(bpm - centre) <= AGREE * centre), None
        )
        if match is None:
            groups.append((bpm, [int(i)]))
        else:
            match.append(int(i))
    made = [
        TempoGroup(bpm, float(sum(p[i] for i in members)), tuple(members))
        for bpm, members in groups
    ]
    return sorted(made, key=lambda g: -g.probability)  # stable: ties keep the likelier first


def decision(found: list[Hypothesis], p: np.ndarray) -> tuple[Hypothesis, str, list[TempoGroup]]:
    """The reading chosen, its time signature and the tempo groups (tempo_groups: the chosen
    tempo's first): the tempo whose agreeing readings are the most probable together, then the
    time signature most probable among those readings, and the most probable reading that
    gives both (the module docstring has why)."""
    groups = tempo_groups(found, p)
    members = groups[0].members
    by_signature: dict[str, float] = {}
    for i in members:  # most probable first: a tie goes to the likelier reading's signature
        signature = METRES[found[i].metre].timesignature
        by_signature[signature] = by_signature.get(signature, 0.0) + float(p[i])
    signature = max(by_signature, key=by_signature.__getitem__)
    best = next(found[i] for i in members if METRES[found[i].metre].timesignature == signature)
    return best, signature, groups


def choose(found: list[Hypothesis]) -> tuple[Hypothesis, Metre, list[TempoGroup]]:
    """The chosen hypothesis (decision), the metre it gives with its confidence, and the
    hypotheses' tempo groups, the chosen tempo's first."""
    if not found:
        return None, UNKNOWN, []  # type: ignore[return-value]
    p = probabilities(found)
    best, signature, groups = decision(found, p)
    same = sum(p[i] for i, h in enumerate(found) if METRES[h.metre].timesignature == signature)
    order = np.argsort(-p)
    listed = [
        {
            "metre": found[i].metre,
            "factor": str(found[i].factor),
            "bpm": round(found[i].bpm, 2),
            "probability": round(float(p[i]), 4),
            "evidence": {k: round(v, 4) for k, v in found[i].evidence.items()},
        }
        for i in order
    ]
    metre = Metre(
        timesignature=signature,
        confidence=round(calibrated(float(same), REVIEW_PROBABILITY), 4),
        compound=METRES[best.metre].compound,
        factor=float(best.factor),
        metre=best.metre,
        probability=round(float(same), 4),
        hypotheses=listed,
    )
    return best, metre, groups


def calibrated(probability: float, review: float) -> float:
    """`probability` raised to the power that maps `review` to 0.5 (0 and 1 stay)."""
    if probability <= 0.0:
        return 0.0
    return float(min(1.0, probability ** (math.log(0.5) / math.log(review))))


def harmony_combs(
    ticks: np.ndarray,
    chroma: chroma_analysis.Chroma,
    lengths: set[int],
    change: np.ndarray | None = None,
) -> dict[int, float]:
    """The `harmony` evidence for each bar length in half pulses of `lengths`; none at all
    ({}) unless the song holds two bars of every one (`held_twice`): the comb would favour
    the short bars it can still count. `change`: chord_change(ticks, chroma), if at hand."""
    if not lengths or held_twice(ticks, lengths) != lengths:
        return {}
    change = chord_change(ticks, chroma) if change is None else change
    return {n: comb(change, n) for n in sorted(lengths)}


def chord_change(ticks: np.ndarray, chroma: chroma_analysis.Chroma) -> np.ndarray:
    """The chord novelty (full band plus low register) on a grid of half pulses."""
    halves = np.empty(2 * len(ticks) - 1)
    halves[0::2] = ticks
    halves[1::2] = (ticks[:-1] + ticks[1:]) / 2
    change = chroma_analysis.novelty(chroma_analysis.segments(chroma.full, halves))
    return change + chroma_analysis.novelty(chroma_analysis.segments(chroma.low, halves))


def held_twice(ticks: np.ndarray, lengths: set[int]) -> set[int]:
    """The bar lengths of `lengths` (in half pulses) that the tracked pulses hold two of."""
    if len(ticks) < 4:
        return set()
    room = 2 * len(ticks) - 2  # chord changes measured, one a half pulse
    return {n for n in lengths if 2 * n <= room}


def comb(values: np.ndarray, period: int) -> float:
    """The highest correlation of `values` with a comb (1 every `period` steps, 0 between)
    over the comb's phases; 0 when there are fewer than two periods or no variation."""
    if len(values) < 2 * period or period < 2 or np.std(values) == 0:
        return 0.0
    centred = values - values.mean()
    best = -1.0
    for phase in range(period):
        teeth = np.zeros(len(values))
        teeth[phase::period] = 1.0
        teeth -= teeth.mean()
        best = max(best, float(centred @ teeth / np.sqrt((centred @ centred) * (teeth @ teeth))))
    return best


def onset_strength(mono: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positive log-magnitude spectral flux, HOP samples a frame, its slow trend removed:
    over the full band and under LOW_BAND_HZ (onset_bands' first two)."""
    full, low, _ = onset_bands(mono)
    return full, low


def onset_bands(mono: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """onset_strength's two curves and the same in each band of analysis.activation's
    BAND_EDGES [bands, frames], from one short-time spectrum.

    The spectrum is taken BLOCK frames at a time, so that a long song needs no more memory
    than a short one, and in float64: numpy's FFT of float32 frames is many times slower
    (bench/labels.py times the analysis)."""
    if len(mono) < FRAME * 4:
        return np.zeros(1), np.zeros(1), np.zeros((len(activation.BAND_EDGES) - 1, 1))
    frames = np.lib.stride_tricks.sliding_window_view(mono, FRAME)[::HOP]
    window = np.hanning(FRAME)
    low = int(LOW_BAND_HZ * FRAME / SAMPLE_RATE) + 1
    edges = [int(edge * FRAME / SAMPLE_RATE) for edge in activation.BAND_EDGES]
    fluxes, last = [], None
    for start in range(0, len(frames), BLOCK):
        level = np.log1p(100.0 * np.abs(np.fft.rfft(frames[start : start + BLOCK] * window)))
        rise = np.maximum(np.diff(level if last is None else np.vstack([last, level]), axis=0), 0)
        bands = [rise[:, a:b].sum(axis=1) for a, b in zip(edges, edges[1:], strict=False)]
        fluxes.append((rise.sum(axis=1), rise[:, :low].sum(axis=1), *bands))
        last = level[-1:]
    second = int(SAMPLE_RATE / HOP)
    curves = []
    for flux in (np.concatenate(band) for band in zip(*fluxes, strict=True)):
        width = min(second, len(flux))  # a clip under a second: its own mean
        trend = np.convolve(flux, np.ones(width) / width, mode="same")
        curves.append(np.maximum(flux - trend, 0.0))
    return curves[0], curves[1], np.stack(curves[2:])


def autocorrelation(x: np.ndarray) -> np.ndarray:
    """Autocorrelation of `x` minus its mean, 1 at lag 0 (all zeros for a constant)."""
    x = x - x.mean()
    spectrum = np.fft.rfft(x, 2 * len(x))
    acf = np.fft.irfft(spectrum * np.conj(spectrum))[: len(x)]
    return acf / acf[0] if acf[0] > 0 else np.zeros_like(acf)


def _at(acf: np.ndarray, seconds: float) -> float:
    """The autocorrelation's highest value within LAG_TOLERANCE of a lag in seconds (so that
    a tracker a little off still reads its peaks); nan where fewer than half the frames
    overlap (not measured)."""
    lag = seconds * SAMPLE_RATE / HOP
    lo, hi = int(np.floor(lag * (1 - LAG_TOLERANCE))), int(np.ceil(lag * (1 + LAG_TOLERANCE))) + 1
    if hi > len(acf) // 2:
        return math.nan
    return float(acf[lo:hi].max())
