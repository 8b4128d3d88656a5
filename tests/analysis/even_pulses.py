"""Development songs whose pulses are even: only the chords say how they group.

The level model reads a click on every pulse with chords changing every three pulses as 3/4 at
half the pulse's tempo, so that every other chord changes between two beats. The development
songs seldom show it that case: nearly every arrangement marks its bar or its beat with a kick,
a backbeat, a bass on the downbeat or a strum that stops. In these the accompaniment plays the
same on every pulse, and the chords change at the bar lines:

- the metre: 4/4, 3/4, 6/8 and 12/8 a quarter each (the even pulses of 4/4 and 12/8 grouped in
  fours and twos show the model the other side of the case);
- drums in half of them, and then only a cymbal or shaker on every eighth, every beat or (in
  4/4 and 3/4) every sixteenth, sometimes with a soft kick on every beat: nothing on the
  downbeat alone;
- a bass on every beat or every eighth;
- chords struck on every beat or every eighth, or broken into eighths or (in 4/4 and 3/4)
  sixteenths;
- a melody in eighths, on the beats, or sparse;
- instruments from random_styles' programs.

`EVEN_SONGS` are drawn by corpus96's rule (keys, tempi over the metre's range, soundfonts,
formats, three in ten excerpts) with a fixed seed, one song for each of `COUNT` arrangements
named even_NNN (corpus60.style_of builds them from the name). They are development data only,
cached in data/cache/even_pulses (git-ignored), rendered where missing.
"""

from __future__ import annotations

import random
from pathlib import Path

from tests.analysis import corpus60, corpus96
from tests.analysis.corpus import HAT, KICK, RIDE
from tests.analysis.corpus60 import METRES, Song, Style
from tests.analysis.corpus96 import SHAKER
from tests.analysis.random_styles import drawn_style

SEED = "even-pulses-1"
COUNT = 160
CACHE = corpus60.DEFAULT_CACHE.with_name("even_pulses")


def even_style(name: str) -> Style:
    """The arrangement `name` stands for (module docstring); the same every call."""
    rng = random.Random(f"{SEED}:{name}")
    metre = rng.choice(("4/4", "3/4", "6/8", "12/8"))
    steps, beat = METRES[metre].steps, METRES[metre].beat
    simple = beat == 4
    beats = tuple(range(0, steps, beat))
    eighths = tuple(range(0, steps, 2))
    pulses = {"beats": beats, "eighths": eighths, "sixteenths": tuple(range(steps))}

    drums: dict[int, tuple[tuple[int, ...], int]] = {}
    if rng.random() < 0.5:
        grid = rng.choice(("eighths", "eighths", "beats") + ("sixteenths",) * simple)
        drums[rng.choice((HAT, HAT, RIDE, SHAKER))] = (pulses[grid], rng.randint(44, 70))
        if rng.random() < 0.3:
            drums[KICK] = (beats, rng.randint(70, 90))

    kind = rng.choice(("beats", "eighths"))
    bass = (pulses[kind], 2 if kind == "eighths" else rng.choice((2, beat)))

    kind = rng.choice(("beats", "eighths", "arpeggio"))
    if kind == "arpeggio":
        notes = pulses["sixteenths"] if simple and rng.random() < 0.4 else eighths
        comp: tuple[str, tuple[int, ...], int] = ("arpeggio", notes, rng.choice((2, 4)))
    else:
        comp = ("block", pulses[kind], rng.choice((0, 1, 2)))

    return drawn_style(rng, metre, drums, bass, comp, crash=False)


def even_songs(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """One song for each of `count` even-pulse arrangements, drawn by corpus96's rule."""
    names = [f"even_{i:03d}" for i in range(count)]
    return corpus96.draw({name: even_style(name) for name in names}, count, seed, "evenly")


EVEN_SONGS: tuple[Song, ...] = even_songs()
corpus60.HALF.update({song.name: "even" for song in EVEN_SONGS})


def make_even_songs(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=EVEN_SONGS)
