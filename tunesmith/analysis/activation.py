"""A beat and a downbeat activation a frame, from a small fitted network over the sound.

The network reads ten curves at analysis.meter's onset frame rate (172 a second): the onset
strength in each of the eight bands of BAND_EDGES (analysis.meter.onset_bands, from the same
short-time spectrum as the two onset curves the meter reads, each over its own mean and
log-compressed) and the chroma's novelty in the full band and the bass (one minus the cosine
between consecutive frames, at the onset frames' times). It is a temporal convolutional
network: a convolution of three taps into WIDTH channels, then residual layers of dilated
convolutions of three taps (dilation 1, 2, 4 ... 512: each frame sees about 12 s either
side), ELU after each, and a last one-tap convolution to the logits of OUTPUTS, turned into
probabilities a frame:

- the beat's and the downbeat's (each a sigmoid);
- the metre's, over METRE_CLASSES (a softmax): what the ~24 s the frame sees sound like;
- the tempo's, over TEMPO_BINS (a softmax over tempi a sixth of an octave apart): the
  beat's tempo, in the metre's beats (dotted quarters in 6/8 and 12/8).

A clip's metre and tempo are those frames' mean (clip_metre, clip_tempo). Learning the tempo
and the metre beside the beats, from the same layers, is the multi-task way of beat trackers
(one network, several heads): each head keeps the others' layers honest, and the level model
(analysis.meter) weighs what they say against the rest of its evidence.

It is fitted by tests/analysis/fit_analysis.py (tests/analysis/fit_activation.py) on the
development songs' known beats and bar lines (torch), and run here with numpy alone from
NETWORK_FILE (safetensors; its metadata names the inputs and the dilations, so that a file
written for other inputs is refused).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from tunesmith.analysis import chroma as chroma_analysis
from tunesmith.store import sha256_file

SAMPLE_RATE = 44100
BAND_EDGES = (0, 100, 200, 400, 800, 1600, 3200, 6400, 22050)  # Hz, the last to Nyquist
INPUTS = tuple(f"band {lo}-{hi} Hz" for lo, hi in zip(BAND_EDGES, BAND_EDGES[1:], strict=False))
INPUTS += ("chroma novelty, full band", "chroma novelty, bass")
NOVELTY_SCALE = 4.0  # novelty is 0..1 and mostly small; the band curves are about 1
METRE_CLASSES = ("4/4", "3/4", "6/8", "12/8")  # analysis.meter.METRES
TEMPO_BINS = tuple(40.0 * 2 ** (k / 6) for k in range(16))  # BPM, 40 to 226
OUTPUTS = (
    "beat",
    "downbeat",
    *(f"metre {m}" for m in METRE_CLASSES),
    *(f"tempo {bpm:.1f}" for bpm in TEMPO_BINS),
)
METRE_ROWS = slice(2, 2 + len(METRE_CLASSES))
TEMPO_ROWS = slice(METRE_ROWS.stop, len(OUTPUTS))
NETWORK_FILE = Path(__file__).with_name("activation.safetensors")


def inputs(bands: np.ndarray, chroma: chroma_analysis.Chroma, hop: int, frame: int) -> np.ndarray:
    """[len(INPUTS), frames] float32: the network's inputs for a clip whose onset strength in
    BAND_EDGES' bands is `bands` [8, frames] (onset frames of `hop` samples, windows of
    `frame`) and whose chromagram is `chroma`."""
    frames = bands.shape[1]
    curves = [np.log1p(c / c.mean()) if c.mean() > 0 else np.zeros(frames) for c in bands]
    times = frame_times(frames, hop, frame)
    for chromagram in (chroma.full, chroma.bass):
        unit = chromagram / (np.linalg.norm(chromagram, axis=1, keepdims=True) + 1e-9)
        novelty = np.zeros(len(chromagram))
        novelty[1:] = 1.0 - (unit[1:] * unit[:-1]).sum(axis=1)
        at = (np.arange(len(novelty)) * chroma_analysis.HOP + chroma_analysis.FRAME / 2) / (
            chroma_analysis.SAMPLE_RATE
        )
        curves.append(NOVELTY_SCALE * np.interp(times, at, novelty) if len(at) else times * 0)
    return np.stack(curves).astype(np.float32)


def frame_times(frames: int, hop: int, frame: int) -> np.ndarray:
    """The centre (seconds) of each onset frame's window: frame i measures the rise into the
    window starting at (i + 1) hop."""
    return ((np.arange(frames) + 1) * hop + frame / 2) / SAMPLE_RATE


def clip_metre(probabilities: np.ndarray) -> dict[str, float]:
    """A clip's metre: the mean over its frames of each METRE_CLASSES probability."""
    return dict(zip(METRE_CLASSES, probabilities[METRE_ROWS].mean(axis=1).tolist(), strict=True))


def clip_tempo(probabilities: np.ndarray, bpm: float) -> float:
    """The clip's tempo probability at `bpm`: the frames' mean over TEMPO_BINS, read between
    its two nearest bins (in octaves; the end bins beyond the range)."""
    mean = probabilities[TEMPO_ROWS].mean(axis=1)
    return float(np.interp(np.log2(bpm), np.log2(TEMPO_BINS), mean))


@dataclass(frozen=True)
class Network:
    """The fitted network's weights (float32), as torch's Conv1d keeps them: first [WIDTH,
    inputs, 3], layers [layers, WIDTH, WIDTH, 3] with their dilations, last [OUTPUTS,
    WIDTH]."""

    first_weight: np.ndarray
    first_bias: np.ndarray
    layer_weight: np.ndarray
    layer_bias: np.ndarray
    last_weight: np.ndarray
    last_bias: np.ndarray
    dilations: tuple[int, ...]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """[len(OUTPUTS), frames]: each frame's probabilities (module docstring) for `x`
        [len(INPUTS), frames]."""
        h = _elu(_convolve(x, self.first_weight, self.first_bias, 1))
        for w, b, dilation in zip(self.layer_weight, self.layer_bias, self.dilations, strict=True):
            h = h + _elu(_convolve(h, w, b, dilation))
        return probabilities(self.last_weight @ h + self.last_bias[:, None])

    @classmethod
    def load(cls, path: Path) -> Network:
        from safetensors import safe_open

        with safe_open(path, "np") as stored:
            metadata = stored.metadata() or {}
            named = json.loads(metadata.get("inputs", "[]"))
            if tuple(named) != INPUTS:
                raise ValueError(
                    f"{path}: fitted for the inputs {named}; this reads {list(INPUTS)}"
                )
            given = json.loads(metadata.get("outputs", '["beat", "downbeat"]'))
            if tuple(given) != OUTPUTS:
                raise ValueError(f"{path}: fitted for the outputs {given}; this reads {OUTPUTS}")
            names = ("first.weight", "first.bias", "layers.weight", "layers.bias")
            arrays = [stored.get_tensor(name) for name in (*names, "last.weight", "last.bias")]
            dilations = tuple(json.loads(metadata["dilations"]))
        arrays[4] = arrays[4].reshape(arrays[4].shape[0], -1)  # [outputs, WIDTH, 1] -> 2-D
        return cls(*arrays, dilations=dilations)


def probabilities(logits: np.ndarray) -> np.ndarray:
    """The logits [len(OUTPUTS), frames] as probabilities: a sigmoid for the beat and the
    downbeat, a softmax over the metre's rows and one over the tempo's."""
    out = 1.0 / (1.0 + np.exp(-logits))
    for rows in (METRE_ROWS, TEMPO_ROWS):
        shifted = np.exp(logits[rows] - logits[rows].max(axis=0))
        out[rows] = shifted / shifted.sum(axis=0)
    return out


def _convolve(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, dilation: int) -> np.ndarray:
    """A three-tap convolution of x [channels, frames] with zero padding, as torch's Conv1d
    with padding=dilation: three matrix products, one a tap (no hand-written loop over
    frames)."""
    frames = x.shape[1]
    padded = np.pad(x, ((0, 0), (dilation, dilation)))
    out = bias[:, None] + weight[:, :, 1] @ x
    out += weight[:, :, 0] @ padded[:, :frames]
    out += weight[:, :, 2] @ padded[:, 2 * dilation : 2 * dilation + frames]
    return out


def _elu(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0.0)))


@cache
def network() -> Network:
    return Network.load(NETWORK_FILE)


def network_digest() -> str:
    """NETWORK_FILE's SHA-256 (a refitted network is another analysis), "missing" without it."""
    return sha256_file(NETWORK_FILE) if NETWORK_FILE.is_file() else "missing"
