"""Fit analysis.activation's network on development songs: a beat and a downbeat activation
learned from the songs' known beats, the level model's learned evidence (analysis.meter).

The test corpora are rendered from MIDI, so every beat and bar line of every development song
is known: the renders start on a downbeat, the beats are every 60/bpm seconds from 0 and every
bar's first beat is a downbeat (the 22-song corpus's generator, which draws its own, is left
out of the training). tests/analysis/fit_analysis.py calls this module:

- the inputs (analysis.activation.inputs) from analysis.meter.onset_bands' eight bands, cached
  beside fit_analysis's measurements (data/cache/fit_analysis/bands/), and the chroma
  fit_analysis measured;
- one network for each fold of fit_analysis.table_folds, trained on the whole songs of
  the other three folds, gives each clip (whole and excerpts) of its own fold its activations:
  out of fold, as the level model will meet them on music the network has not heard; the level
  model is fitted and cross-validated on those;
- with `--write`, one more network trained on every development song is what ships
  (analysis.activation.NETWORK_FILE).

Like any stacked model, the cross-validated figures leak a little: the level model of one
fold is fitted on the other folds' activations, whose networks met that fold's songs.

The network (Activation, torch; analysis.activation runs it with numpy): WIDTH channels, LAYERS
residual layers of dilated convolutions, trained by Adam on random CROP-frame windows (BATCH a
step, STEPS steps, a cosine schedule). The loss: a weighted binary cross-entropy for the beat
and the downbeat (a beat is one frame in about 40, a downbeat one in 120: POSITIVE_WEIGHT), the
frames beside a true beat marked 0.5; and a cross-entropy for each of the metre's and the
tempo's heads (HEAD_WEIGHT each), the song's metre and tempo on every frame, the tempo spread
over its two nearest bins (a normal curve TEMPO_SPREAD octaves wide). torch's layers, losses
and optimiser, not hand-written.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

BANDS = Path(__file__).resolve().parents[2] / "data" / "cache" / "fit_analysis" / "bands" / "1"
WIDTH, LAYERS = 20, 10  # channels; residual layers, dilation 2**layer (about 12 s either side)
CROP, BATCH, STEPS = 1536, 16, 1000  # frames of a window (9 s), windows a step, steps
POSITIVE_WEIGHT = (8.0, 20.0)  # beats, downbeats
UNTRAINED = ("corpus22", "corpus22_extra")  # another generator: its beats are not drawn this way
PEAK, PEAK_WINDOW = 0.5, 0.07  # F-measure: an activation peak over PEAK within 70 ms
# the metre's and the tempo's cross-entropy beside the beats' (set once, not tuned: a class
# head's loss starts several times the beats' and must not drown them)
HEAD_WEIGHT = 0.5
TEMPO_SPREAD = 1 / 12  # octaves: half the distance between two of the tempo's bins


def out_of_fold(xs, clips, whole: int, folds) -> tuple[list, tuple[float, ...]]:
    """Each clip's activations [len(analysis.activation.OUTPUTS), frames] from the network of
    its fold (trained on the other folds' whole songs; `xs`: each clip's inputs), and for the
    whole songs: the beat and downbeat F-measure of the peaks, how often the metre head's
    likeliest metre is right and how often the tempo head's likeliest tempo is within a bin of
    the song's."""
    acts: list = [None] * len(clips)
    scores = []
    for k, held in enumerate(folds):
        net = fitted(xs, clips, [i for i in range(whole) if i not in held], seed=k)
        for i in held:
            acts[i] = activations(net, xs[i])
            if i < whole and clips[i].source not in UNTRAINED:
                scores.append((*beat_scores(clips[i], acts[i]), *head_scores(clips[i], acts[i])))
    return acts, tuple(float(v) for v in np.mean(scores, axis=0))


def fitted(xs, clips, chosen: list[int], seed: int):
    """An Activation trained on the clips `chosen` (whole songs; UNTRAINED sources skipped)."""
    chosen = [i for i in chosen if clips[i].source not in UNTRAINED and not clips[i].seconds]
    ys = [targets(clips[i], xs[i].shape[1]) for i in chosen]
    return train([xs[i] for i in chosen], ys, STEPS, seed)


def measure_bands(song, excerpts: tuple[float, ...]) -> dict[str, np.ndarray]:
    """analysis.meter.onset_bands' bands of the whole song and of each of fit_analysis's
    excerpts (cached)."""
    cached = BANDS / song.source / f"{song.name}.npz"
    if not cached.is_file():
        from tunesmith.analysis import audio, meter

        samples, rate, _ = audio._decode(Path(song.path))
        mono = audio.analysis_mono(audio.downmix(samples), rate)
        values = {"whole": meter.onset_bands(mono)[2]}
        start = len(mono) // 3  # where fit_analysis.measure cuts its excerpts
        for seconds in excerpts:
            end = start + int(seconds * audio.ANALYSIS_SAMPLE_RATE)
            values[f"cut{seconds:g}"] = meter.onset_bands(mono[start:end])[2]
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f".{cached.stem}.part.npz")
        np.savez(partial, **values)
        partial.replace(cached)
    with np.load(cached, allow_pickle=False) as stored:
        return dict(stored)


def inputs(values: dict, bands: dict, song) -> np.ndarray:
    """analysis.activation's inputs for a clip of `song` (module docstring)."""
    from tunesmith.analysis import activation, meter
    from tunesmith.analysis.chroma import Chroma

    frames = len(values["full_onset"])
    band = bands[f"cut{song.seconds:g}" if song.seconds else "whole"][:, :frames]
    band = np.pad(band, ((0, 0), (0, frames - band.shape[1])))
    chroma = Chroma(values["chroma_full"], values["chroma_bass"], values["chroma_low"])
    return activation.inputs(band, chroma, meter.HOP, meter.FRAME)


def frame_times(frames: int) -> np.ndarray:
    """The centre (seconds) of each of analysis.meter's onset frames (its _frames inverted)."""
    from tunesmith.analysis import activation, meter

    return activation.frame_times(frames, meter.HOP, meter.FRAME)


def targets(song, frames: int) -> np.ndarray:
    """[len(analysis.activation.OUTPUTS), frames]: 1 on the frame of each true beat (row 0)
    and downbeat (row 1), 0.5 beside it; the song's metre (one of the metre's rows) and its
    tempo (spread over the tempo's rows) on every frame."""
    from tunesmith.analysis import activation, meter

    beat = 60.0 / song.bpm
    beats = meter.METRES[song.metre].beats
    out = np.zeros((len(activation.OUTPUTS), frames), np.float32)
    out[activation.METRE_ROWS.start + activation.METRE_CLASSES.index(song.metre)] = 1.0
    out[activation.TEMPO_ROWS] = tempo_target(song.bpm)[:, None]
    for k in range(int(frame_times(frames)[-1] / beat) + 2):
        (centre,) = meter._frames(np.array([k * beat]))
        for frame, weight in ((centre, 1.0), (centre - 1, 0.5), (centre + 1, 0.5)):
            if 0 <= frame < frames:
                rows = (0, 1) if k % beats == 0 else (0,)
                for row in rows:
                    out[row, frame] = max(out[row, frame], weight)
    return out


def tempo_target(bpm: float) -> np.ndarray:
    """The tempo head's target: a normal curve over the bins' octaves, TEMPO_SPREAD wide, at
    `bpm`'s, summing to 1."""
    from tunesmith.analysis import activation

    distance = np.log2(activation.TEMPO_BINS) - np.log2(bpm)
    curve = np.exp(-0.5 * (distance / TEMPO_SPREAD) ** 2)
    return (curve / curve.sum()).astype(np.float32)


def activation_network():
    """Activation: the temporal convolutional network of the module docstring (torch)."""
    import torch
    from torch import nn

    from tunesmith.analysis import activation

    class Activation(nn.Module):
        def __init__(self):
            super().__init__()
            self.first = nn.Conv1d(10, WIDTH, 3, padding=1)
            self.layers = nn.ModuleList(
                nn.Conv1d(WIDTH, WIDTH, 3, padding=2**i, dilation=2**i) for i in range(LAYERS)
            )
            self.drop = nn.Dropout(0.1)
            self.last = nn.Conv1d(WIDTH, len(activation.OUTPUTS), 1)

        def forward(self, x):
            h = torch.nn.functional.elu(self.first(x))
            for layer in self.layers:
                h = h + self.drop(torch.nn.functional.elu(layer(h)))
            return self.last(h)

    return Activation()


def save_network(net, path: Path) -> None:
    """An Activation as analysis.activation.Network reads it."""
    import json

    import torch

    from tunesmith.analysis import activation
    from tunesmith.store.tensors import write_safetensors

    tensors = {
        "first.weight": net.first.weight,
        "first.bias": net.first.bias,
        "layers.weight": torch.stack([layer.weight for layer in net.layers]),
        "layers.bias": torch.stack([layer.bias for layer in net.layers]),
        "last.weight": net.last.weight,
        "last.bias": net.last.bias,
    }
    tensors = {name: t.detach().float().contiguous() for name, t in tensors.items()}
    dilations = [layer.dilation[0] for layer in net.layers]
    metadata = {
        "inputs": json.dumps(activation.INPUTS),
        "outputs": json.dumps(activation.OUTPUTS),
        "dilations": json.dumps(dilations),
    }
    write_safetensors(path, tensors, metadata)


def train(xs: list[np.ndarray], ys: list[np.ndarray], steps: int, seed: int):
    """An Activation fitted to `ys` by Adam on random CROP-frame windows, BATCH a step."""
    import torch

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    net = activation_network()
    optimiser = torch.optim.Adam(net.parameters(), lr=3e-3)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, steps)
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
        target = torch.from_numpy(np.stack(batch_y))
        loss = loss_of(net(torch.from_numpy(np.stack(batch_x))), target)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
    return net.eval()


def loss_of(logits, target):
    """The module docstring's loss of a batch's logits [batch, OUTPUTS, frames] against its
    targets."""
    import torch
    from torch.nn import functional

    weight = torch.tensor(POSITIVE_WEIGHT).view(1, 2, 1)
    beats = functional.binary_cross_entropy_with_logits(
        logits[:, :2], target[:, :2], pos_weight=weight
    )
    return beats + HEAD_WEIGHT * head_loss(logits, target)


def head_loss(logits, target):
    """The metre's and the tempo's cross-entropy, a mean over the frames (a padded frame's
    metre and tempo rows are all 0: it counts for nothing)."""
    from torch.nn import functional

    from tunesmith.analysis import activation

    return sum(
        functional.cross_entropy(logits[:, rows], target[:, rows])
        for rows in (activation.METRE_ROWS, activation.TEMPO_ROWS)
    )


def activations(net, x: np.ndarray) -> np.ndarray:
    """The network's probabilities for `x`, as analysis.activation.Network gives them."""
    import torch

    from tunesmith.analysis import activation

    with torch.no_grad():
        logits = net(torch.from_numpy(x)[None])[0].numpy().astype(np.float64)
    return activation.probabilities(logits)


def head_scores(song, probabilities: np.ndarray) -> tuple[float, float]:
    """(metre, tempo): 1.0 where the clip's likeliest metre is the song's, and where its
    likeliest tempo bin is within one of the song's nearest."""
    from tunesmith.analysis import activation

    metre = activation.clip_metre(probabilities)
    tempo = probabilities[activation.TEMPO_ROWS].mean(axis=1)
    nearest = int(np.argmax(tempo_target(song.bpm)))  # the target peaks on the nearest bin
    return float(max(metre, key=metre.get) == song.metre), float(
        abs(int(np.argmax(tempo)) - nearest) <= 1
    )


def f_measure(found: np.ndarray, truth: np.ndarray) -> float:
    if len(found) == 0 or len(truth) == 0:
        return 0.0
    hits = sum(np.min(np.abs(truth - t)) <= PEAK_WINDOW for t in found)
    precision, recall = hits / len(found), min(hits, len(truth)) / len(truth)
    return 2 * precision * recall / (precision + recall) if hits else 0.0


def peaks(curve: np.ndarray) -> np.ndarray:
    inner = curve[1:-1]
    return np.flatnonzero((inner > PEAK) & (inner >= curve[:-2]) & (inner > curve[2:])) + 1


def beat_scores(song, activation: np.ndarray) -> tuple[float, float]:
    """(beat, downbeat) F-measure of a whole song's activation peaks."""
    from tunesmith.analysis import meter

    times = frame_times(activation.shape[1])
    beats = np.arange(0.0, times[-1], 60.0 / song.bpm)
    downbeats = beats[:: meter.METRES[song.metre].beats]
    return (
        f_measure(times[peaks(activation[0])], beats),
        f_measure(times[peaks(activation[1])], downbeats),
    )
