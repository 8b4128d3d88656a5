"""A seventh corpus of 72 songs, all held out: arrangements no earlier corpus has.

The sixth corpus (tests/analysis/corpus64.py) was scored once, with the beat's grid evidence
(docs/conventions/labels.md). This one was written after that scoring and before anything
else was changed, and kept for the next change (the level model that weighs the values
together), then scored once, with everything set; no choice looked at it before. Its 18
arrangements:

- 4/4 with drums: a slow R&B groove (sixteenth hats, a rim click on 2 and 4, a syncopated
  kick), dubstep (half time: the snare on beat 3 only), UK garage (two-step kick, swung
  off-beat hats), highlife (a bell pattern, guitars chopping the off-beats), a motorik
  groove (kick on 1, 3 and the "and" of 2, eighth hats, the bass in eighths), bachata (the
  güira and the bongos, no kit, a nylon guitar's arpeggios), bhangra (swung, the dhol's low
  strokes and claps);
- 4/4 without drums: a harpsichord continuo (the bass in eighths, chords on the beats), a
  string quartet (the cello in half notes, the violin on the beats), an ambient pad (the bass
  and the chords held, a sparse melody);
- 3/4: an organ hymn (chords on every beat), a clapped waltz (claps on every beat, a kick
  on the one, strummed guitar), a mariachi waltz (the bass on 1, the guitars on 2 and 3,
  trumpets in eighths);
- 6/8: a bell pattern over a low drum on the dotted quarters, a 6/8 rock ballad (kick on 1,
  snare on the second dotted quarter, eighth hats);
- 12/8: an organ's chord triplets (no drums), a jazz 12/8 (the ride's shuffle, the hat on
  2 and 4), a harp's triplet arpeggios (no drums).

The songs (`SONGS72`) are drawn by corpus96's rule and a fixed seed: styles four each, the 24
keys three times, tempi over 55-200 BPM (45-140 dotted-quarter BPM in 6/8 and 12/8), the
soundfonts and formats dealt evenly, three in ten excerpts. The truth follows corpus60's
rules, and the songs are written and rendered by its code. Cached in data/cache/corpus72
(git-ignored), rendered where missing.
"""

from __future__ import annotations

from pathlib import Path

from tests.analysis import corpus60, corpus96
from tests.analysis.corpus import CLAP, HAT, KICK, RIDE, SNARE, STICK
from tests.analysis.corpus52 import HIGH_BONGO
from tests.analysis.corpus56 import GUIRO
from tests.analysis.corpus60 import COWBELL, LOW_TOM, PEDAL_HAT, Song, Style, _every
from tests.analysis.corpus96 import SHAKER

SEED = "corpus72-1"
COUNT = 72
CACHE = corpus60.DEFAULT_CACHE.with_name("corpus72")
LOW_BONGO = 61  # General MIDI, besides the earlier corpora's

STYLES72: dict[str, Style] = {
    "rnb": Style(
        "4/4",
        (38, 4, 65),
        {KICK: ((0, 3, 10), 96), STICK: ((4, 12), 80), HAT: (_every(16, 0, 1), 40)},
        ((0, 3, 10), 3),
        ("hold", (0,), 0),
        "sparse",
        crash=False,
    ),
    "dubstep": Style(
        "4/4",
        (38, 90, 81),
        {KICK: ((0, 10), 110), SNARE: ((8,), 110), HAT: (_every(16), 50)},
        ((0,), 16),
        ("hold", (0,), 0),
        "sparse",
    ),
    "garage": Style(
        "4/4",
        (38, 89, 81),
        {KICK: ((0, 10), 100), SNARE: ((4, 12), 90), HAT: (_every(16, 2, 4), 60)},
        ((0, 3, 10), 2),
        ("block", (0, 6, 12), 1),
        "eighths",
        swing=True,
    ),
    "highlife": Style(
        "4/4",
        (33, 27, 56),
        {KICK: ((0, 8), 90), COWBELL: ((0, 4, 7, 10, 14), 70), SHAKER: (_every(16, 0, 1), 40)},
        ((0, 6, 8, 14), 2),
        ("block", _every(16, 2, 4), 1),
        "eighths",
        crash=False,
    ),
    "motorik": Style(
        "4/4",
        (34, 81, 90),
        {KICK: ((0, 6, 8), 100), SNARE: ((4, 12), 90), HAT: (_every(16), 60)},
        (_every(16), 2),
        ("hold", (0,), 0),
        "sparse",
    ),
    "bachata": Style(
        "4/4",
        (33, 24, 24),
        {GUIRO: (_every(16), 60), HIGH_BONGO: (_every(16, 1, 2), 50), LOW_BONGO: ((6, 14), 70)},
        ((0, 6, 8, 12), 2),
        ("arpeggio", _every(16), 2),
        "eighths",
        crash=False,
    ),
    "bhangra": Style(
        "4/4",
        (38, 105, 105),
        {KICK: ((0, 6, 8, 14), 104), CLAP: ((4, 12), 70)},
        ((0, 8), 4),
        ("hold", (0,), 0),
        "eighths",
        swing=True,
        crash=False,
    ),
    "harpsichord": Style(
        "4/4",
        (6, 6, 68),
        bass=(_every(16), 2),
        comp=("block", (0, 4, 8, 12), 3),
        melody="eighths",
    ),
    "quartet": Style(
        "4/4",
        (42, 48, 40),
        bass=((0, 8), 8),
        comp=("hold", (0,), 0),
        melody="beats",
    ),
    "ambient": Style(
        "4/4",
        (38, 89, 88),
        bass=((0,), 16),
        comp=("hold", (0,), 0),
        melody="sparse",
    ),
    "hymn3": Style(
        "3/4",
        (19, 19, 19),
        bass=((0, 4, 8), 4),
        comp=("block", (0, 4, 8), 4),
        melody="beats",
    ),
    "claps3": Style(
        "3/4",
        (32, 24, 24),
        {KICK: ((0,), 100), CLAP: ((0, 4, 8), 80)},
        ((0,), 4),
        ("block", _every(12), 1),
        "eighths",
        crash=False,
    ),
    "mariachi3": Style(
        "3/4",
        (32, 25, 56),
        bass=((0,), 3),
        comp=("block", (4, 8), 2),
        melody="eighths",
    ),
    "bell68": Style(
        "6/8",
        (33, 12, 108),
        {LOW_TOM: ((0, 6), 90), COWBELL: ((0, 4, 8, 10), 70), SHAKER: (_every(12), 40)},
        ((0, 6), 4),
        ("block", (0, 6), 2),
        "eighths",
        crash=False,
    ),
    "rock68": Style(
        "6/8",
        (34, 0, 29),
        {KICK: ((0,), 100), SNARE: ((6,), 100), HAT: (_every(12), 50)},
        ((0, 6), 6),
        ("arpeggio", _every(12), 2),
        "beats",
    ),
    "organ128": Style(
        "12/8",
        (32, 16, 16),
        bass=((0, 6, 12, 18), 6),
        comp=("block", _every(24), 1),
        melody="sparse",
    ),
    "jazz128": Style(
        "12/8",
        (32, 0, 66),
        {
            RIDE: ((0, 4, 6, 10, 12, 16, 18, 22), 60),
            PEDAL_HAT: ((6, 18), 60),
            KICK: ((0,), 60),
        },
        ((0, 6, 12, 18), 5),
        ("block", (6, 18), 2),
        "eighths",
        crash=False,
    ),
    "harp128": Style(
        "12/8",
        (46, 46, 73),
        bass=((0, 12), 12),
        comp=("arpeggio", _every(24), 2),
        melody="beats",
    ),
}


def songs72(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """The corpus's songs, drawn as the module docstring says; the same every call."""
    return corpus96.draw(STYLES72, count, seed, "seventh")


SONGS72: tuple[Song, ...] = songs72()
corpus60.HALF.update({song.name: "held_out" for song in SONGS72})


def make_corpus72(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=SONGS72)
