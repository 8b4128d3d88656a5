"""A large synthetic dataset, made by code: N short clips and N small pictures with captions.

    .venv/bin/python bench/make_large.py N [--to data/cache/large-N]

Writes two dataset folders under `--to` (default `data/cache/large-N/`, git-ignored):

    songs/      N clips of 2.5 to 4 s, 44.1 kHz stereo 16-bit (every seventh a FLAC), each at
                its own tempo (70 to 170 BPM) and key (12 tonics, major and minor): a triad
                plucked on every beat, a kick on the beat and hats on the eighths. A mix of
                sidecars, as a user's folder has them: a third with a kohya-style `<stem>.txt`
                caption, a third with underfit's `<stem>.json` tags, a third with none.
                `tunesmith.toml`: a Stable Audio 3 run on the tiny model (SONGS_TOML).
    pictures/   N pictures of 48 to 112 pixels a side (every fourth a JPEG) with a `<stem>.txt`
                caption each. `tunesmith.toml`: an SDXL run on the tiny model (PICTURES_TOML).

Both runs are a few steps long: the scale benchmark measures what grows with the number of
items, and a run's cost grows with its steps, not with the dataset.

Every item is drawn from a generator seeded by its index, so item i is the same whatever N
is, and a second call writes nothing: files already holding the bytes they would get are left
untouched (bytes and modification time, `write_if_changed`). About 5 ms a clip and 1 ms a
picture on one core.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import zlib
from pathlib import Path

import numpy as np
import soundfile as sf
from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tunesmith.store.atomic import json_bytes, write_if_changed  # noqa: E402

SAMPLE_RATE = 44100
SEED = 17_2026
TONICS = ("C", "C#", "D", "Eb", "E", "F", "F#", "G", "Ab", "A", "Bb", "B")
GENRES = ("house", "techno", "lo-fi hip hop", "funk", "synth pop", "ambient", "breakbeat")
MOODS = ("warm", "dark", "bright", "dusty", "tight", "deep", "sunny")
SHAPES = ("discs", "squares", "stripes")
COLOURS = {
    "red": (214, 64, 52),
    "green": (70, 160, 90),
    "blue": (60, 100, 200),
    "yellow": (240, 200, 60),
    "purple": (130, 80, 170),
    "teal": (40, 150, 150),
}

SONGS_TOML = """\
# Written by bench/make_large.py: a run short enough to build at every N on a CPU.
[[runs]]
name = "large-songs"
family = "stable-audio-3"
base_model = "tiny-stable-audio-3"
trigger = "lrgsong"
[runs.adapter]
type = "dora-rows"
rank = 4
[runs.train]
steps = 2
eval_every = 2
checkpoint_every = 2
latent_crop_length = 32
[[runs.demos]]
prompt = "{trigger}, a loop"
seed = 7
duration = 1.0
steps = 2
"""
PICTURES_TOML = """\
# Written by bench/make_large.py: a run short enough to build at every N on a CPU.
[[runs]]
name = "large-pictures"
family = "sdxl"
base_model = "tiny-sdxl"
trigger = "lrgpic"
[runs.adapter]
rank = 4
[runs.train]
size = 64
steps = 2
eval_every = 2
checkpoint_every = 2
[[runs.demos]]
prompt = "{trigger}, three discs"
seed = 7
steps = 2
cfg = 5.0
"""


def make_large(n: int, root: Path) -> dict[str, Path]:
    """Write items 0..n-1 of both datasets under `root`; returns name → folder."""
    folders = {"songs": root / "songs", "pictures": root / "pictures"}
    write_if_changed(folders["songs"] / "tunesmith.toml", SONGS_TOML.encode())
    write_if_changed(folders["pictures"] / "tunesmith.toml", PICTURES_TOML.encode())
    for i in range(n):
        write_song(folders["songs"], i)
        write_picture(folders["pictures"], i)
    return folders


def song_name(i: int) -> str:
    return f"song_{i:05d}"


def song_caption(i: int) -> str:
    bpm, tonic, scale, _ = _song_spec(i)
    return f"{MOODS[i % len(MOODS)]} {GENRES[i % len(GENRES)]} loop in {tonic} {scale}, {bpm} bpm"


def write_song(folder: Path, i: int) -> Path:
    """Clip i and its sidecar (by i % 3: a .txt caption, underfit's .json tags, or none)."""
    bpm, tonic, scale, seconds = _song_spec(i)
    audio = render_song(i)
    flac = i % 7 == 6
    path = folder / f"{song_name(i)}.{'flac' if flac else 'wav'}"
    buffer = io.BytesIO()
    sf.write(buffer, audio, SAMPLE_RATE, subtype="PCM_16", format="FLAC" if flac else "WAV")
    write_if_changed(path, buffer.getvalue())
    if i % 3 == 0:
        write_if_changed(folder / f"{song_name(i)}.txt", f"{song_caption(i)}\n".encode())
    elif i % 3 == 1:
        tags = {
            "title": song_name(i).replace("_", " "),
            "genre": GENRES[i % len(GENRES)],
            "bpm": str(bpm),
            "prompt": song_caption(i),
        }
        write_if_changed(folder / f"{song_name(i)}.json", json_bytes(tags))
    return path


def render_song(i: int) -> np.ndarray:
    """Clip i as float32 [n, 2]: a plucked triad on each beat, kick, hats; peak -1 dBFS."""
    bpm, tonic, scale, seconds = _song_spec(i)
    rng = np.random.default_rng([SEED, i])
    t = np.arange(round(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    beat = 60.0 / bpm
    since_beat = t % beat
    since_eighth = t % (beat / 2)
    root = 60 + TONICS.index(tonic)
    third = 3 if scale == "minor" else 4
    chord = sum(np.sin(2 * np.pi * 440 * 2 ** ((root + s - 69) / 12) * t) for s in (0, third, 7))
    pluck = chord * np.exp(-since_beat * 6) * 0.25
    kick = np.sin(2 * np.pi * (50 + 90 * np.exp(-since_beat * 30)) * since_beat)
    kick *= np.exp(-since_beat * 12) * 0.8
    hats = np.diff(rng.standard_normal(len(t) + 1)) * np.exp(-since_eighth * 80) * 0.08
    left, right = pluck * 0.8 + kick + hats * 0.6, pluck * 0.6 + kick + hats
    out = np.stack([left, right], axis=1)
    return (out * (10 ** (-1 / 20) / np.abs(out).max())).astype(np.float32)


def _song_spec(i: int) -> tuple[int, str, str, float]:
    """(bpm, tonic, scale, seconds) of clip i, spread so neighbours differ."""
    h = zlib.crc32(f"song{i}".encode())
    bpm = 70 + h % 101
    tonic = TONICS[(h >> 8) % 12]
    scale = "minor" if (h >> 12) % 2 else "major"
    seconds = 2.5 + ((h >> 16) % 16) / 10  # 2.5 to 4.0 s
    return bpm, tonic, scale, seconds


def picture_name(i: int) -> str:
    return f"picture_{i:05d}"


def picture_caption(i: int) -> str:
    shape, colour, _, _ = _picture_spec(i)
    return f"lrgpic, {colour} {shape} on a light ground, picture {i}"


def write_picture(folder: Path, i: int) -> Path:
    """Picture i (PNG, every fourth a JPEG) and its .txt caption."""
    image = draw_picture(i)
    jpeg = i % 4 == 3
    path = folder / f"{picture_name(i)}.{'jpg' if jpeg else 'png'}"
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG" if jpeg else "PNG", **({"quality": 90} if jpeg else {}))
    write_if_changed(path, buffer.getvalue())
    write_if_changed(folder / f"{picture_name(i)}.txt", f"{picture_caption(i)}\n".encode())
    return path


def draw_picture(i: int) -> Image.Image:
    shape, colour, width, height = _picture_spec(i)
    rng = np.random.default_rng([SEED, 1, i])
    image = Image.new("RGB", (width, height), (240, 236, 226))
    draw = ImageDraw.Draw(image)
    fill = COLOURS[colour]
    for _ in range(int(rng.integers(1, 5))):
        x, y = int(rng.integers(0, width - 8)), int(rng.integers(0, height - 8))
        r = int(rng.integers(4, max(5, min(width, height) // 3)))
        box = (x, y, min(width - 1, x + r), min(height - 1, y + r))
        if shape == "discs":
            draw.ellipse(box, fill=fill, outline=(20, 20, 24), width=2)
        elif shape == "squares":
            draw.rectangle(box, fill=fill)
        else:
            draw.rectangle((0, y, width, min(height - 1, y + max(2, r // 4))), fill=fill)
    return image


def _picture_spec(i: int) -> tuple[str, str, int, int]:
    h = zlib.crc32(f"picture{i}".encode())
    shape = SHAPES[h % len(SHAPES)]
    colour = sorted(COLOURS)[(h >> 4) % len(COLOURS)]
    width, height = 48 + 16 * ((h >> 8) % 5), 48 + 16 * ((h >> 12) % 5)
    return shape, colour, width, height


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("n", type=int, help="items in each dataset")
    parser.add_argument("--to", type=Path, default=None, help="default: data/cache/large-N")
    args = parser.parse_args()
    if args.n < 1:
        parser.error("N must be at least 1")
    root = args.to or Path(__file__).resolve().parents[1] / "data" / "cache" / f"large-{args.n}"
    for name, folder in make_large(args.n, root).items():
        files = sum(1 for p in folder.iterdir() if p.is_file())
        print(f"{name}: {folder} ({files} files)")
    print(json.dumps({"n": args.n, "root": str(root)}))


if __name__ == "__main__":
    main()
