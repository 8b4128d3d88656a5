"""Development songs in arrangements drawn at random, one arrangement a song.

Each hand-written corpus showed the same thing when it was scored: weights fitted on a table
of arrangements learn that table, and the tempo's level does not carry over to the next one.
These songs widen what the analysis is fitted on. Each has its own arrangement, drawn from
its name by the rules a player writes a part by, so that the notated beat is still the beat:

- the metre (4/4 half the time, 3/4, 6/8 and 12/8 a sixth each);
- drums two times in three: a kick on the downbeat and on some other beats and off-beats; a
  backbeat (snare, clap or side stick on 2 and 4; or half time, on every beat, or none); a
  cymbal or shaker in eighths, sixteenths, on the beats or the off-beats, or none; now and
  then a hand drum or bell on some of the eighths;
- a bass on the downbeat, the beats, the half bars, the eighths or a syncopated figure (or a
  walking line);
- chords held, struck on the beats, the off-beats or some of them, or broken into eighths
  or sixteenths;
- a melody on the beats, in eighths, or sparse; swung eighths now and then;
- instruments from General MIDI's basses, keys, guitars, strings, brass, reeds and pads.

`RANDOM_SONGS` are drawn by corpus96's rule (keys, tempi over the metre's range, soundfonts,
formats, three in ten excerpts) with a fixed seed, one song for each of `COUNT` arrangements
named random_NNN (corpus60.style_of builds them from the name). They are development data
only, cached in data/cache/random_styles (git-ignored), rendered where missing.
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

from tests.analysis import corpus60, corpus96
from tests.analysis.corpus import CLAP, HAT, KICK, OPEN_HAT, RIDE, SNARE, STICK
from tests.analysis.corpus60 import AGOGO, COWBELL, LOW_CONGA, MARACAS, METRES, Song, Style
from tests.analysis.corpus96 import SHAKER, TAMBOURINE

SEED = "random-styles-1"
COUNT = 480
BATCH = 240
CACHE = corpus60.DEFAULT_CACHE.with_name("random_styles")
HAND_DRUMS = (COWBELL, LOW_CONGA, TAMBOURINE, SHAKER, MARACAS, AGOGO)
PROGRAMS = {
    "bass": (32, 33, 34, 35, 36, 38, 39, 42, 43, 58, 0),
    "chords": (0, 1, 2, 4, 5, 6, 11, 16, 17, 19, 21, 24, 25, 26, 27, 29, 46, 48, 49, 52, 61, 88,
               89, 90),
    "melody": (0, 8, 10, 11, 13, 22, 25, 40, 41, 56, 57, 60, 64, 65, 66, 68, 71, 72, 73, 79, 80,
               81),
}  # fmt: skip


def random_style(name: str) -> Style:
    """The arrangement `name` stands for (module docstring); the same every call."""
    rng = random.Random(f"{SEED}:{name}")
    metre = rng.choices(("4/4", "3/4", "6/8", "12/8"), weights=(3, 1, 1, 1))[0]
    steps, beat = METRES[metre].steps, METRES[metre].beat
    simple = beat == 4
    beats = tuple(range(0, steps, beat))
    eighths = tuple(range(0, steps, 2))
    offbeats = tuple(s for s in eighths if s % beat)
    swing = simple and rng.random() < 0.15

    drums: dict[int, tuple[tuple[int, ...], int]] = {}
    if rng.random() < 2 / 3:
        kick = {0} | {b for b in beats[1:] if rng.random() < 0.45}
        kick |= {s for s in offbeats if rng.random() < 0.12}
        drums[KICK] = (tuple(sorted(kick)), rng.randint(90, 115))
        back = _backbeat(rng, metre, beats)
        if back:
            drums[rng.choice((SNARE, SNARE, CLAP, STICK))] = (back, rng.randint(70, 105))
        cymbals = ["eighths", "beats", "offbeats", "none"] + ["sixteenths"] * simple
        cymbal = rng.choice(cymbals)
        if cymbal != "none":
            chosen = {
                "eighths": eighths,
                "sixteenths": tuple(range(steps)),
                "beats": beats,
                "offbeats": offbeats,
            }[cymbal]
            instrument = OPEN_HAT if cymbal == "offbeats" else rng.choice((HAT, HAT, RIDE, SHAKER))
            drums[instrument] = (chosen, rng.randint(44, 70))
        if rng.random() < 0.3:
            figure = {0} | {s for s in eighths if rng.random() < 0.5}
            drums[rng.choice(HAND_DRUMS)] = (tuple(sorted(figure)), rng.randint(50, 75))

    walk = simple and not swing and rng.random() < 0.1
    if walk:
        bass = (beats, 4)
    else:
        kind = rng.choice(("downbeat", "beats", "half", "eighths", "syncopated"))
        bass = {
            "downbeat": ((0,), steps),
            "beats": (beats, rng.choice((2, beat))),
            "half": ((0, steps // 2) if len(beats) % 2 == 0 else (0,), steps // 2),
            "eighths": (eighths, 2),
            "syncopated": (tuple(sorted({0} | {s for s in eighths if rng.random() < 0.3})), 2),
        }[kind]

    kind = rng.choice(("hold", "beats", "offbeats", "some", "eighths", "arpeggio"))
    if kind == "hold" or (kind == "offbeats" and not simple):
        comp: tuple[str, tuple[int, ...], int] = ("hold", (0,), 0)
    elif kind == "arpeggio":
        notes = tuple(range(steps)) if simple and rng.random() < 0.4 else eighths
        comp = ("arpeggio", notes, rng.choice((2, 4)))
    else:
        chosen = {
            "beats": beats,
            "offbeats": offbeats,
            "some": tuple(sorted({0} | {b for b in beats if rng.random() < 0.5})),
            "eighths": eighths,
        }[kind]
        comp = ("block", chosen, rng.choice((0, 1, 2)))

    return drawn_style(rng, metre, drums, bass, comp, swing=swing, walk=walk)


def drawn_style(
    rng: random.Random,
    metre: str,
    drums: dict[int, tuple[tuple[int, ...], int]],
    bass: tuple[tuple[int, ...], int],
    comp: tuple[str, tuple[int, ...], int],
    *,
    swing: bool = False,
    walk: bool = False,
    crash: bool | None = None,
) -> Style:
    """The style of these parts, with its instruments, melody, crash (unless given) and bass
    register drawn from `rng`, in that order."""
    return Style(
        metre,
        tuple(rng.choice(PROGRAMS[part]) for part in ("bass", "chords", "melody")),
        drums,
        bass,
        comp,
        rng.choice(("beats", "sparse", "eighths")),
        swing=swing,
        walk=walk,
        crash=rng.random() < 0.5 if crash is None else crash,
        bass_low=rng.choice((28, 31, 33, 36, 40)),
    )


def _backbeat(rng: random.Random, metre: str, beats: tuple[int, ...]) -> tuple[int, ...]:
    """Where the snare goes: mostly the backbeat, sometimes half time, every beat or none."""
    middle = (beats[len(beats) // 2],) if len(beats) % 2 == 0 else ()
    options = {
        "4/4": (((4, 12), 6), (middle, 1), (beats, 1), ((), 1)),
        "3/4": (((4, 8), 3), ((8,), 1), ((4,), 1), ((), 1)),
        "6/8": (((6,), 4), ((), 1)),
        "12/8": (((6, 18), 4), (middle, 1), ((), 1)),
    }[metre]
    return rng.choices([o for o, _ in options], weights=[w for _, w in options])[0]


def random_songs(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """One song for each of `count` random arrangements, drawn by corpus96's rule BATCH at a
    time (each batch its own seed, so that more songs leave the first ones as they were)."""
    songs: list[Song] = []
    for first in range(0, count, BATCH):
        names = [f"random_{i:03d}" for i in range(first, min(count, first + BATCH))]
        batch = corpus96.draw(
            {name: random_style(name) for name in names},
            len(names),
            seed if first == 0 else f"{seed}+{first}",
            "mixed",
        )
        songs += [replace(song, name=f"mixed_{first + i:03d}") for i, song in enumerate(batch)]
    return tuple(songs)


RANDOM_SONGS: tuple[Song, ...] = random_songs()
corpus60.HALF.update({song.name: "random" for song in RANDOM_SONGS})


def make_random_songs(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=RANDOM_SONGS)
