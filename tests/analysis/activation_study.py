"""Would a learned beat and downbeat activation help the level model? A study on development
songs; the analysis does not use it.

analysis.meter weighs its (metre, factor) hypotheses on evidence made by hand from two onset
strengths and the chroma. The test corpora are rendered from MIDI, so every beat and bar line
of every development song is known, and a small network can learn where they fall from the
sound. This script measures whether what it learns adds to the hand-made evidence:

- the songs: tests/analysis/fit_analysis.py's development songs and tests/analysis/
  corpus144.py's (the fifteenth corpus: scored once, development data from here on), whole
  and as fit_analysis's excerpts; never corpus152.py's, which are held out;
- the inputs: onset strength in the eight bands of BAND_EDGES (positive log-magnitude flux
  from the short-time spectrum analysis.meter.onset_strength takes, its slow trend removed)
  and the chroma's novelty in the full band and the bass, ten curves at 172 frames a second,
  each over its own mean;
- the network (Activation): a temporal convolutional network, ten residual layers of dilated
  convolutions (dilations 1 to 512, about 12 s either side), a beat and a downbeat logit a
  frame. One is trained for each fold of fit_analysis.arrangement_folds on the whole songs of
  the other three folds (the renders start on a downbeat, so the beats are every 60/bpm
  seconds from 0 and every bar's first one is a downbeat; the 22-song corpus's generator is
  left out of the training), so that a clip's activations come from a network that never met
  its arrangement;
- the evidence (ACTIVATION_FEATURES, for each hypothesis of analysis.meter): the beat
  activation's autocorrelation at the hypothesis's beat and half beat, the downbeat
  activation's at its bar and half bar, and analysis.meter.grid_evidence read on the
  activations (the beat activation on the beats against their divisions; the downbeat
  activation on one beat of the bar against the others);
- the level model cross-validated on the same folds, without and with that evidence (the
  same members, seeds and folds).

Like any stacked model it leaks a little: the level model of one fold is fitted on the other
folds' activations, whose networks met that fold's songs. It prints the beat and downbeat
F-measure out of fold (a peak of the activation over 0.5 within 70 ms of a true one), and for
each model the right tempi, time signatures and 4 s and 8 s excerpts, and how many right tempi
the review list holds at the probability that catches 80% of the wrong ones.

    .venv/bin/python -m tests.analysis.activation_study [--members 3] [--steps 1000]

torch trains the network (torch.nn's convolutions, not hand-written); band onsets are cached
beside fit_analysis's measurements (data/cache/fit_analysis/bands/), whatever is missing is
rendered and measured first.
"""

from __future__ import annotations

import argparse
import importlib
import math
import time
from pathlib import Path

import numpy as np

from tests.analysis import corpus144
from tests.analysis import fit_analysis as fa
from tunesmith.dataset.workers import run_all

MODULE = "tests.analysis.activation_study"
BANDS = fa.CACHE / "bands" / "1"
BAND_EDGES = (0, 100, 200, 400, 800, 1600, 3200, 6400, 22050)  # Hz
WIDTH, LAYERS = 20, 10  # channels; residual layers, dilation 2**layer
CROP, BATCH = 1536, 16  # frames of a training example (9 s), examples a step
POSITIVE_WEIGHT = (8.0, 20.0)  # beats, downbeats: a frame in 40 is a beat, in 120 a downbeat
ACTIVATION_FEATURES = (
    "act_beat",
    "act_beat_half",
    "act_bar",
    "act_bar_half",
    "act_accent",
    "act_downbeat",
)
UNTRAINED = ("corpus22", "corpus22_extra")  # another generator: its beats are not drawn this way
PEAK, PEAK_WINDOW = 0.5, 0.07  # F-measure: an activation peak over PEAK within 70 ms


def study_songs() -> list[fa.DevSong]:
    """fit_analysis's development songs and corpus144's."""
    folder = corpus144.make_corpus144()
    return fa.dev_songs() + [
        fa.DevSong(
            "corpus144",
            s.name,
            str(folder / s.filename),
            s.bpm,
            s.metre,
            s.tonic,
            s.scale,
            s.style,
        )
        for s in corpus144.SONGS144
    ]


def band_onsets(mono: np.ndarray) -> np.ndarray:
    """[bands, frames]: analysis.meter.onset_strength in each band of BAND_EDGES."""
    from tunesmith.analysis import meter

    if len(mono) < meter.FRAME * 4:
        return np.zeros((len(BAND_EDGES) - 1, 1))
    frames = np.lib.stride_tricks.sliding_window_view(mono, meter.FRAME)[:: meter.HOP]
    window = np.hanning(meter.FRAME)
    bins = [int(edge * meter.FRAME / meter.SAMPLE_RATE) for edge in BAND_EDGES]
    fluxes, last = [], None
    for start in range(0, len(frames), meter.BLOCK):
        spectrum = np.abs(np.fft.rfft(frames[start : start + meter.BLOCK] * window))
        level = np.log1p(100.0 * spectrum)
        rise = np.maximum(np.diff(level if last is None else np.vstack([last, level]), axis=0), 0)
        fluxes.append([rise[:, a:b].sum(axis=1) for a, b in zip(bins, bins[1:], strict=False)])
        last = level[-1:]
    width = min(int(meter.SAMPLE_RATE / meter.HOP), sum(len(f[0]) for f in fluxes))
    curves = []
    for flux in (np.concatenate(band) for band in zip(*fluxes, strict=True)):
        trend = np.convolve(flux, np.ones(width) / width, mode="same")
        curves.append(np.maximum(flux - trend, 0.0))
    return np.stack(curves)


def measure_bands(song: fa.DevSong) -> dict[str, np.ndarray]:
    """band_onsets of the whole song and of each of fit_analysis's excerpts (cached)."""
    cached = BANDS / song.source / f"{song.name}.npz"
    if not cached.is_file():
        from tunesmith.analysis import audio

        samples, rate, _ = audio._decode(Path(song.path))
        mono = audio.analysis_mono(audio.downmix(samples), rate)
        values = {"whole": band_onsets(mono)}
        start = len(mono) // 3  # where fit_analysis.measure cuts its excerpts
        for seconds in fa.EXCERPTS:
            end = start + int(seconds * audio.ANALYSIS_SAMPLE_RATE)
            values[f"cut{seconds:g}"] = band_onsets(mono[start:end])
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f".{cached.stem}.part.npz")
        np.savez(partial, **values)
        partial.replace(cached)
    with np.load(cached, allow_pickle=False) as stored:
        return dict(stored)


def inputs(values: dict, bands: dict, song: fa.DevSong) -> np.ndarray:
    """[10, frames] float32: the clip's band onsets and chroma novelty (module docstring)."""
    from tunesmith.analysis import chroma, meter

    frames = len(values["full_onset"])
    band = bands[f"cut{song.seconds:g}" if song.seconds else "whole"][:, :frames]
    band = np.pad(band, ((0, 0), (0, frames - band.shape[1])))
    curves = [np.log1p(c / c.mean()) if c.mean() > 0 else np.zeros(frames) for c in band]
    times = frame_times(frames)
    for name in ("chroma_full", "chroma_bass"):
        c = values[name]
        unit = c / (np.linalg.norm(c, axis=1, keepdims=True) + 1e-9)
        novelty = np.r_[0.0, 1.0 - (unit[1:] * unit[:-1]).sum(axis=1)] if len(c) > 1 else [0.0]
        at = (np.arange(len(novelty)) * chroma.HOP + chroma.FRAME / 2) / meter.SAMPLE_RATE
        curves.append(4.0 * np.interp(times, at, novelty))
    return np.stack(curves).astype(np.float32)


def frame_times(frames: int) -> np.ndarray:
    """The centre (seconds) of each onset frame's window (analysis.meter._frames inverted)."""
    from tunesmith.analysis import meter

    return ((np.arange(frames) + 1) * meter.HOP + meter.FRAME / 2) / meter.SAMPLE_RATE


def targets(song: fa.DevSong, frames: int) -> np.ndarray:
    """[2, frames]: 1 on the frame of each true beat (row 0) and downbeat (row 1), 0.5 beside
    it."""
    from tunesmith.analysis import meter

    beat = 60.0 / song.bpm
    beats = meter.METRES[song.metre].beats
    out = np.zeros((2, frames), np.float32)
    for k in range(int(frame_times(frames)[-1] / beat) + 2):
        (centre,) = meter._frames(np.array([k * beat]))
        for frame, weight in ((centre, 1.0), (centre - 1, 0.5), (centre + 1, 0.5)):
            if 0 <= frame < frames:
                rows = (0, 1) if k % beats == 0 else (0,)
                for row in rows:
                    out[row, frame] = max(out[row, frame], weight)
    return out


def activation_network():
    """Activation: the temporal convolutional network of the module docstring (torch)."""
    import torch
    from torch import nn

    class Activation(nn.Module):
        def __init__(self):
            super().__init__()
            self.first = nn.Conv1d(10, WIDTH, 3, padding=1)
            self.layers = nn.ModuleList(
                nn.Conv1d(WIDTH, WIDTH, 3, padding=2**i, dilation=2**i) for i in range(LAYERS)
            )
            self.drop = nn.Dropout(0.1)
            self.last = nn.Conv1d(WIDTH, 2, 1)

        def forward(self, x):
            h = torch.nn.functional.elu(self.first(x))
            for layer in self.layers:
                h = h + self.drop(torch.nn.functional.elu(layer(h)))
            return self.last(h)

    return Activation()


def train(xs: list[np.ndarray], ys: list[np.ndarray], steps: int, seed: int):
    """An Activation fitted to `ys` by Adam on random CROP-frame windows, BATCH a step."""
    import torch

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    net = activation_network()
    optimiser = torch.optim.Adam(net.parameters(), lr=3e-3)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, steps)
    weight = torch.tensor(POSITIVE_WEIGHT).view(1, 2, 1)
    for _ in range(steps):
        batch_x, batch_y = [], []
        for i in rng.integers(0, len(xs), BATCH):
            x, y = xs[i], ys[i]
            if x.shape[1] > CROP:
                start = rng.integers(0, x.shape[1] - CROP)
                x, y = x[:, start : start + CROP], y[:, start : start + CROP]
            pad = ((0, 0), (0, CROP - x.shape[1]))
            batch_x.append(np.pad(x, pad))
            batch_y.append(np.pad(y, pad))
        logits = net(torch.from_numpy(np.stack(batch_x)))
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            logits, torch.from_numpy(np.stack(batch_y)), pos_weight=weight
        )
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
    return net.eval()


def activations(net, x: np.ndarray) -> np.ndarray:
    import torch

    with torch.no_grad():
        return torch.sigmoid(net(torch.from_numpy(x)[None]))[0].numpy().astype(np.float64)


def evidence(activation: np.ndarray, ticks: np.ndarray, found) -> np.ndarray:
    """[hypotheses, ACTIVATION_FEATURES] for analysis.meter's hypotheses `found`; a value one
    of them cannot measure is 0 for all, as analysis.meter does."""
    from tunesmith.analysis import meter

    beat_curve, down_curve = activation
    beat_acf, down_acf = meter.autocorrelation(beat_curve), meter.autocorrelation(down_curve)
    curves = meter.Onsets(beat_curve, down_curve, beat_acf, down_acf)
    shift = meter.grid_shift(ticks, beat_curve)
    rows = []
    for h in found:
        beat = 60.0 / h.bpm
        bar = meter.METRES[h.metre]
        grid = meter.grid_evidence(ticks, h.factor, bar, curves, shift)
        rows.append(
            [
                meter._at(beat_acf, beat),
                meter._at(beat_acf, beat / 2),
                meter._at(down_acf, bar.beats * beat),
                meter._at(down_acf, bar.beats * beat / 2),
                grid["accent_full"],
                grid["downbeat_low"],
            ]
        )
    rows = np.array(rows, dtype=float)
    rows[:, np.isnan(rows).any(axis=0)] = 0.0
    return rows


def f_measure(found: np.ndarray, truth: np.ndarray) -> float:
    if len(found) == 0 or len(truth) == 0:
        return 0.0
    hits = sum(np.min(np.abs(truth - t)) <= PEAK_WINDOW for t in found)
    precision, recall = hits / len(found), min(hits, len(truth)) / len(truth)
    return 2 * precision * recall / (precision + recall) if hits else 0.0


def peaks(curve: np.ndarray) -> np.ndarray:
    inner = curve[1:-1]
    return np.flatnonzero((inner > PEAK) & (inner >= curve[:-2]) & (inner > curve[2:])) + 1


def beat_scores(song: fa.DevSong, activation: np.ndarray) -> tuple[float, float]:
    """(beat, downbeat) F-measure of a whole song's activation peaks."""
    from tunesmith.analysis import meter

    times = frame_times(activation.shape[1])
    beats = np.arange(0.0, times[-1], 60.0 / song.bpm)
    downbeats = beats[:: meter.METRES[song.metre].beats]
    return (
        f_measure(times[peaks(activation[0])], beats),
        f_measure(times[peaks(activation[1])], downbeats),
    )


def cross_validate(songs, found, matrices, folds) -> dict:
    """The level model, fold by fold (fit_analysis.fit_level): right tempi, time signatures,
    excerpts, and the review list's right tempi at 80% of the wrong ones caught."""
    from tunesmith.analysis import meter

    problem = [
        (m, np.array([h.metre == s.metre and fa._tempo_right(h.bpm, s.bpm) for h in f], float))
        for s, f, m in zip(songs, found, matrices, strict=True)
    ]
    out = {"tempo": 0, "time signature": 0} | {f"{s:g} s": 0 for s in fa.EXCERPTS}
    doubts = []
    for held in folds:
        model = fa.fit_level([p for i, p in enumerate(problem) if i not in held and found[i]])
        for i in sorted(held):
            if not found[i]:
                continue
            song = songs[i]
            p = fa._softmax(model.log_odds(matrices[i]))
            best, _, groups = meter.decision(found[i], p)
            right = fa._tempo_right(best.bpm, song.bpm)
            if song.seconds:
                out[f"{song.seconds:g} s"] += right
                continue
            out["tempo"] += right
            out["time signature"] += fa._metre_pair(found[i], p, song)[0]
            doubts.append((right, groups[0].probability))
    wrong = sorted(p for right, p in doubts if not right)
    level = wrong[math.ceil(0.8 * len(wrong)) - 1] if wrong else 0.0
    listed = sum(right and p <= level for right, p in doubts)
    out["review: right tempi listed"] = f"{listed}/{sum(r for r, _ in doubts)}"
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=3, help="level model networks")
    parser.add_argument("--steps", type=int, default=1000, help="training steps a fold")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    import torch

    fa.LEVEL_MEMBERS = args.members
    torch.set_num_threads(args.workers)
    started = time.monotonic()
    songs = study_songs()
    whole = len(songs)
    clips = songs + fa.excerpts(songs)
    measured = run_all(fa._measure_task, clips, args.workers)
    bands = run_all(measure_bands, songs, args.workers) * (1 + len(fa.EXCERPTS))
    folds = fa.arrangement_folds(clips)
    found = [fa.tempo_candidates(v, s)[0] for v, s in zip(measured, clips, strict=True)]
    xs = [inputs(v, b, s) for v, b, s in zip(measured, bands, clips, strict=True)]
    print(f"{whole} songs, {len(clips)} clips measured ({time.monotonic() - started:.0f} s)")

    acts: list[np.ndarray | None] = [None] * len(clips)
    scores = []
    for k, held in enumerate(folds):
        fitted_on = [i for i in range(whole) if i not in held and clips[i].source not in UNTRAINED]
        net = train(
            [xs[i] for i in fitted_on],
            [targets(clips[i], xs[i].shape[1]) for i in fitted_on],
            args.steps,
            seed=k,
        )
        for i in held:
            acts[i] = activations(net, xs[i])
            if i < whole and clips[i].source not in UNTRAINED:
                scores.append(beat_scores(clips[i], acts[i]))
        print(f"fold {k}: network trained on {len(fitted_on)} songs")
    beat_f, downbeat_f = np.mean(scores, axis=0)
    print(f"out of fold: beat F-measure {beat_f:.3f}, downbeat {downbeat_f:.3f}")

    plain = [fa.tempo_matrix(f) if f else None for f in found]
    extended = [
        np.hstack([m, evidence(a, v["ticks"], f)]) if f else None
        for m, a, v, f in zip(plain, acts, measured, found, strict=True)
    ]
    for name, matrices in (("hand-made evidence", plain), ("with the activation", extended)):
        print(f"{name}: {cross_validate(clips, found, matrices, folds)}")
    print(f"{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    # run as the module's importable name, so that workers find what they are sent by it
    importlib.import_module(MODULE).main()
