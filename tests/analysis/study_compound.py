"""Which compound songs' scores tell 6/8 from 12/8? A study on the fit's out-of-fold readings
(tests/analysis/fit_analysis.py saves them: OutOfFold) and the development songs' own MIDI.

A 6/8 bar is two dotted quarters, a 12/8 bar four. Where every part plays the same in both
halves of a 12/8 bar, the two metres differ only in where the bar lines are drawn: 12/8 with a
chord a bar is, note for note, 6/8 with a chord every two bars. This sorts the development songs
in 6/8 and 12/8 by what their MIDI file says:

- `repeats`: the onsets of every part but the melody (drawn bar by bar) and the crash cymbal
  (every four bars: a phrase both readings hold) are the same in both halves of at least REPEAT
  of the pairs of two-dotted-quarter windows (at the better of the two phases): the rhythm
  alone cannot say where a 12/8 bar starts;
- `chords`: the bass (it plays the chord's root) changes somewhere on each phase of the
  two-dotted-quarter windows ("2": a chord every 6/8 bar), on one phase only ("4": a chord
  every 12/8 bar), or not at all ("none"),

and counts in each cell the songs whose time signature the out-of-fold reading has right, those
read as the other compound metre at the right tempo, and those read otherwise.
docs/conventions/labels.md has the figures.

    .venv/bin/python -m tests.analysis.study_compound [OUT_OF_FOLD.npz]
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np

from tests.analysis import fit_analysis, study_review
from tests.analysis.corpus60 import CRASH
from tests.analysis.test_corpus60 import _read_midi

BASS, MELODY, DRUMS = 0, 2, 9  # corpus60's writer's channels
WINDOW = 12  # sixteenths: two dotted quarters, a 6/8 bar or half a 12/8 bar
REPEAT = 0.75


def score_of(midi: bytes) -> tuple[bool, str]:
    """(repeats, chords) of a format-0 MIDI file written by tests/analysis/corpus60.py's
    writer (module docstring); the last window (a final chord) is left out."""
    division = int.from_bytes(midi[12:14], "big")
    windows: dict[int, tuple[set, set]] = {}
    for channel, pitch, tick in _read_midi(midi)[2]:
        index, at = divmod(round(tick / (division / 4)), WINDOW)  # players drift a few ticks
        pitches, onsets = windows.setdefault(index, (set(), set()))
        if channel == BASS:
            pitches.add(pitch % 12)
        if channel != MELODY and (channel, pitch) != (DRUMS, CRASH):
            onsets.add((channel, pitch if channel == DRUMS else -1, at))
    n = max(windows, default=0)  # windows 0 .. n-1
    played = [windows.get(k, (set(), set())) for k in range(n)]
    same = [
        np.mean([played[k][1] == played[k + 1][1] for k in range(phase, n - 1, 2)] or [0.0])
        for phase in (0, 1)
    ]
    changes = {
        k % 2
        for k in range(1, n)
        if played[k][0] and played[k - 1][0] and played[k][0] != played[k - 1][0]
    }
    chords = {0: "none", 1: "4", 2: "2"}[len(changes)]
    return max(same) >= REPEAT, chords


def readings(d: dict) -> dict[tuple[str, str], tuple[str, bool]]:
    """(source, name) -> (the metre read, whether at the right tempo) of every song of the
    out-of-fold record, chosen as the analysis chooses (study_review.decided)."""
    out = {}
    for s in range(len(d["song"])):
        _, best, _ = study_review.decided(d, s)
        right_tempo = fit_analysis._tempo_right(best.bpm, float(d["truth_bpm"][s]))
        out[str(d["source"][s]), str(d["name"][s])] = (best.metre, right_tempo)
    return out


def outcome(truth: str, read: str, right_tempo: bool) -> str:
    """ "right" (the time signature), "swapped" (the other compound metre at the right tempo)
    or "other"."""
    from tunesmith.analysis import meter

    if meter.METRES[read].timesignature == meter.METRES[truth].timesignature:
        return "right"
    return "swapped" if {truth, read} == {"6/8", "12/8"} and right_tempo else "other"


def main(argv: list[str]) -> None:
    path = Path(argv[0]) if argv else fit_analysis.CACHE / fit_analysis.CACHE_VERSION
    path = path / "out_of_fold.npz" if path.is_dir() else path
    with np.load(path, allow_pickle=False) as stored:
        read = readings(dict(stored))
    cells: Counter = Counter()
    for song in fit_analysis.dev_songs():
        if song.metre not in ("6/8", "12/8") or (song.source, song.name) not in read:
            continue
        repeats, chords = score_of(Path(song.path).with_suffix(".mid").read_bytes())
        cells[song.metre, repeats, chords, outcome(song.metre, *read[song.source, song.name])] += 1
    print("| metre | the rest repeats every two dotted quarters | chords change every | songs "
          "| right | swapped | other |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for metre, repeats, chords in sorted({key[:3] for key in cells}):
        counts = [cells[metre, repeats, chords, o] for o in ("right", "swapped", "other")]
        every = {"2": "2 dotted quarters", "4": "4 dotted quarters", "none": "(one chord)"}
        print(
            f"| {metre} | {'yes' if repeats else 'no'} | {every[chords]} | {sum(counts)} | "
            + " | ".join(str(c) for c in counts)
            + " |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
