"""A second corpus of 96 songs, in arrangements the first one does not have, split once.

The 64-song corpus (tests/analysis/corpus60.py) and its 192 extra development songs come
from one table of arrangements; its test half was scored once and has been development data
since. This corpus is drawn afterwards, to measure the analysis on music it could not have
been shaped by: 18 arrangements that corpus60 lacks (`STYLES96`), and harmony that does not
always change with the bar (half of the progressions hold each chord for two bars).

- 4/4 with drums: reggae (one drop: kick and rim on beat 3, the guitar's skank on the
  off-beats), bossa nova, funk, disco, Motown (snare on every beat), a country train beat, a
  4/4 shuffle (swung eighths over a backbeat, no walking bass); without: church organ,
  harp, vibraphone;
- 3/4: mazurka (accordion, the accent on beat 2), country waltz, minuet (harpsichord);
- 6/8: tarantella (tambourine on every eighth), barcarolle (piano, flute), a slow Celtic air
  (harp arpeggios, no drums);
- 12/8: gospel (organ, claps on 2 and 4), a piano nocturne (harp and violin, no drums).

The songs (`SONGS96`) are drawn by a fixed seed: styles dealt evenly, the 24 keys each four
times, tempi evenly over 55-200 BPM for simple metres and 45-140 dotted-quarter BPM for
compound ones, the three soundfonts and four formats dealt evenly, three in ten excerpts.
The truth follows corpus60's rules (`bpm` the beat, the dotted quarter in 6/8 and 12/8;
ACE-Step's time signature), and the songs are written and rendered by corpus60's code.

The split is corpus60's rule (by metre, drums, SHA-256 of the name, dealt out alternately)
into "dev" (48: joins the development songs the analysis is fitted on) and "test" (48:
scored once, when everything was set; development data since the third corpus,
tests/analysis/corpus48.py, was drawn to be held out in its place).
Cached in data/cache/corpus96 (git-ignored), rendered where missing.
"""

from __future__ import annotations

import random
from pathlib import Path

from tests.analysis import corpus60
from tests.analysis.corpus import CLAP, HAT, KICK, OPEN_HAT, SNARE, STICK
from tests.analysis.corpus60 import (
    FL,
    MS,
    TM,
    TONICS,
    TRIPLETS_12_8,
    F,
    M,
    Song,
    Style,
    V,
    W,
    _every,
)

SEED = "corpus96-1"
COUNT = 96
CACHE = corpus60.DEFAULT_CACHE.with_name("corpus96")
# General MIDI percussion notes besides corpus.py's and corpus60's
TAMBOURINE, SHAKER = 54, 82

STYLES96: dict[str, Style] = {
    "reggae": Style(
        "4/4",
        (33, 27, 16),
        {KICK: ((8,), 110), STICK: ((8,), 96), HAT: (_every(16), 52)},
        ((0, 3, 6, 10), 2),
        ("block", (2, 6, 10, 14), 1),
        "sparse",
        crash=False,
    ),
    "bossa": Style(
        "4/4",
        (32, 24, 73),
        {KICK: ((0, 6, 8, 14), 70), STICK: ((0, 6, 12), 66), SHAKER: (_every(16, 0, 1), 40)},
        ((0, 6, 8, 14), 2),
        ("block", (0, 3, 6, 10, 12), 2),
        crash=False,
    ),
    "funk": Style(
        "4/4",
        (36, 7, 61),
        {KICK: ((0, 3, 10), 112), SNARE: ((4, 12), 108), HAT: (_every(16, 0, 1), 60)},
        ((0, 3, 6, 10, 14), 1),
        ("block", (2, 7, 10, 15), 1),
        "sparse",
    ),
    "disco": Style(
        "4/4",
        (38, 48, 56),
        {
            KICK: ((0, 4, 8, 12), 112),
            CLAP: ((4, 12), 96),
            OPEN_HAT: ((2, 6, 10, 14), 76),
            HAT: (_every(16, 0, 1), 44),
        },
        (_every(16), 2),
    ),
    "motown": Style(
        "4/4",
        (33, 0, 65),
        {KICK: ((0, 6, 8), 100), SNARE: ((0, 4, 8, 12), 92), TAMBOURINE: ((4, 12), 80)},
        ((0, 3, 8, 11), 2),
        ("block", (4, 12), 2),
    ),
    "train": Style(
        "4/4",
        (32, 25, 40),
        {KICK: ((0, 8), 100), SNARE: (_every(16, 0, 1), 50), CLAP: ((4, 12), 84)},
        ((0, 8), 4),
        ("block", (4, 12), 2),
        "eighths",
        bass_low=40,
    ),
    "shuffle44": Style(
        "4/4",
        (34, 0, 66),
        {KICK: ((0, 8), 104), SNARE: ((4, 12), 100), HAT: (_every(16), 62)},
        ((0, 4, 8, 12), 3),
        ("block", (0, 6, 8, 14), 2),
        "eighths",
        swing=True,
    ),
    "organ": Style("4/4", (19, 19, 19), bass=((0,), 16), comp=("hold", (0,), 0)),
    "harp": Style(
        "4/4",
        (46, 46, 73),
        bass=((0, 8), 8),
        comp=("arpeggio", _every(16, 0, 1), 3),
        melody="sparse",
    ),
    "vibes": Style(
        "4/4", (32, 11, 11), bass=((0, 4, 8, 12), 4), comp=("block", (0, 6, 10), 3), crash=False
    ),
    "mazurka": Style(
        "3/4", (32, 21, 21), bass=((0,), 4), comp=("block", (4, 6, 8), 2), melody="eighths"
    ),
    "country_waltz": Style(
        "3/4",
        (32, 25, 40),
        {KICK: ((0,), 92), SNARE: ((4, 8), 58), HAT: ((0, 4, 8), 50)},
        ((0,), 4),
        ("block", (4, 8), 3),
        bass_low=40,
        crash=False,
    ),
    "minuet": Style(
        "3/4", (6, 6, 6), bass=((0, 4, 8), 4), comp=("block", (4, 8), 3), melody="eighths"
    ),
    "tarantella": Style(
        "6/8",
        (32, 21, 105),
        {TAMBOURINE: (_every(12), 70), KICK: ((0, 6), 96)},
        ((0, 6), 3),
        ("block", (2, 4, 8, 10), 2),
        "eighths",
        crash=False,
    ),
    "barcarolle": Style(
        "6/8", (0, 0, 73), bass=((0, 6), 2), comp=("block", (2, 4, 8, 10), 2), melody="beats"
    ),
    "celtic_air": Style(
        "6/8", (46, 46, 73), bass=((0,), 12), comp=("arpeggio", _every(12), 4), melody="sparse"
    ),
    "gospel128": Style(
        "12/8",
        (32, 19, 52),
        {KICK: ((0, 12), 96), CLAP: ((6, 18), 92), HAT: (TRIPLETS_12_8, 48)},
        ((0, 10, 12, 22), 2),
        ("block", TRIPLETS_12_8, 2),
        "sparse",
    ),
    "nocturne128": Style(
        "12/8",
        (46, 46, 40),
        bass=((0, 12), 12),
        comp=("arpeggio", TRIPLETS_12_8, 4),
        melody="sparse",
    ),
}
# Progressions in each mode, each playing its tonic chord (a progression without one has no
# key a listener would agree on): four with a chord a bar, four holding each chord two bars;
# half of each kind neither start nor end on the tonic, for the excerpts
PROGRESSIONS96 = {
    "major": (
        ("I", "IV", "vi", "V"),
        ("vi", "IV", "I", "V"),
        ("IV", "I", "V", "vi"),
        ("V", "I", "IV", "ii"),
        ("I", "I", "IV", "IV", "V", "V", "I", "I"),
        ("I", "I", "vi", "vi", "ii", "ii", "V", "V"),
        ("IV", "IV", "I", "I", "V", "V", "vi", "vi"),
        ("vi", "vi", "IV", "IV", "I", "I", "V", "V"),
    ),
    "minor": (
        ("i", "VII", "VI", "VII"),
        ("i", "iv", "VI", "V"),
        ("VII", "i", "iv", "V"),
        ("III", "i", "VI", "V"),
        ("i", "i", "iv", "iv", "V", "V", "i", "i"),
        ("i", "i", "VI", "VI", "III", "III", "VII", "VII"),
        ("VI", "VI", "i", "i", "VII", "VII", "V", "V"),
        ("iv", "iv", "i", "i", "VI", "VI", "V", "V"),
    ),
}
TEMPI = {"4/4": (55, 200), "3/4": (55, 200), "6/8": (45, 140), "12/8": (45, 140)}


def songs96(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """The corpus's songs, drawn as the module docstring says; the same every call."""
    return draw(STYLES96, count, seed, "fresh")


def draw(styles: dict[str, Style], count: int, seed: str, prefix: str) -> tuple[Song, ...]:
    """`count` songs named `prefix`_NNN, drawn by `seed`: `styles` and the 24 keys dealt
    evenly, a tempo over TEMPI's range for the style's metre, the three soundfonts and four
    formats dealt evenly, three in ten excerpts, a progression of PROGRESSIONS96 (an
    excerpt's neither starts nor ends on the tonic)."""
    rng = random.Random(seed)
    dealt = _dealt(rng, sorted(styles), count)
    keys = _dealt(rng, [(t, s) for t in TONICS for s in ("major", "minor")], count)
    fonts, formats = _dealt(rng, [FL, TM, MS], count), _dealt(rng, [W, F, M, V], count)
    songs = []
    for i in range(count):
        style, (tonic, scale) = dealt[i], keys[i]
        excerpt = rng.random() < 0.3
        home = "I" if scale == "major" else "i"
        pool = [p for p in PROGRESSIONS96[scale] if not excerpt or home not in (p[0], p[-1])]
        songs.append(
            Song(
                name=f"{prefix}_{i:03d}",
                bpm=rng.randint(*TEMPI[styles[style].metre]),
                tonic=tonic,
                scale=scale,
                style=style,
                progression=rng.choice(pool),
                font=fonts[i],
                fmt=formats[i],
                excerpt=excerpt,
            )
        )
    return tuple(songs)


def _dealt(rng: random.Random, values: list, count: int) -> list:
    """`values` repeated to `count` (as evenly as they go), in a shuffled order."""
    dealt = [values[i % len(values)] for i in range(count)]
    rng.shuffle(dealt)
    return dealt


SONGS96: tuple[Song, ...] = songs96()
corpus60.HALF.update(corpus60.split(SONGS96))


def make_corpus96(folder: Path | None = None, workers: int = 0, half: str | None = None) -> Path:
    """Render the songs (of one half, where `half` is given) missing from `folder`."""
    chosen = tuple(s for s in SONGS96 if half is None or s.half == half)
    return corpus60.make_corpus(folder or CACHE, workers, songs=chosen)
