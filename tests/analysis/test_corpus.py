"""The labels stage's tempo and key against plain Essentia, on songs rendered from MIDI.

The corpus (tests/analysis/corpus.py) has a "tuning" half the analysis was adjusted on and
a "held-out" half it was not (since 48 more songs of its generator became development data,
the held-out half is a check of songs like those, not of unseen ones); the stage must do at
least as well as plain Essentia on each, read 20 of the 22 tempi right, and at least 15 of
every 16 keys.
"""

from __future__ import annotations

import pytest

from tests.analysis.corpus import SONGS, Song, make_corpus, plain_essentia, tempo_right
from tunesmith.dataset.analyse import analyse_file
from tunesmith.dataset.workers import run_all
from tunesmith.store import sha256_file

HALVES = ("tuning", "held-out")


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, tuple[float, str, str]]]:
    folder = make_corpus()
    paths = [str(folder / song.filename) for song in SONGS]
    tasks = [
        (str(folder / s.filename), s.filename, "audio", sha256_file(folder / s.filename))
        for s in SONGS
    ]
    stage = run_all(analyse_file, tasks, workers=0)
    plain = run_all(plain_essentia, paths, workers=0)
    found = {
        "stage": {
            s.name: (r["bpm"], r["key"], r["scale"]) for s, r in zip(SONGS, stage, strict=True)
        },
        "plain": {s.name: p for s, p in zip(SONGS, plain, strict=True)},
    }
    print(
        f"\n{'song':13} {'half':8} {'bpm':>4} {'plain':>6} {'stage':>6}  "
        f"{'key':9} {'plain':9} {'stage':9}"
    )
    for s in SONGS:
        (pb, pk, ps), (sb, sk, ss) = found["plain"][s.name], found["stage"][s.name]
        print(
            f"{s.name:13} {s.half:8} {s.bpm:4} {pb:6.1f} {sb:6.1f}  {s.keyscale:9} "
            f"{pk + ' ' + ps:9} {sk + ' ' + ss:9}"
        )
    return found


def _score(found: dict[str, tuple[float, str, str]], songs: list[Song]) -> tuple[int, int]:
    tempo = sum(tempo_right(found[s.name][0], s) for s in songs)
    key = sum(found[s.name][1:] == (s.tonic, s.scale) for s in songs)
    return tempo, key


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS) >= 16 and len({s.name for s in SONGS}) == len(SONGS)
    for half in HALVES:
        songs = [s for s in SONGS if s.half == half]
        assert len(songs) == len(SONGS) // 2
        assert min(s.bpm for s in songs) < 80 and max(s.bpm for s in songs) > 150
        assert {s.scale for s in songs} == {"major", "minor"}
    assert len({s.tonic for s in SONGS}) >= 10  # around the circle of fifths
    assert {s.fmt for s in SONGS} == {"wav", "flac", "mp3"}


@pytest.mark.slow
@pytest.mark.parametrize("half", HALVES)
def test_the_stage_does_at_least_as_well_as_plain_essentia(results, half: str) -> None:
    songs = [s for s in SONGS if s.half == half]
    stage, plain = _score(results["stage"], songs), _score(results["plain"], songs)
    print(
        f"{half}: tempo {stage[0]}/{len(songs)} (plain {plain[0]}), "
        f"key {stage[1]}/{len(songs)} (plain {plain[1]})"
    )
    assert stage[0] >= plain[0] and stage[1] >= plain[1], (stage, plain)


@pytest.mark.slow
def test_twenty_of_the_tempi_and_fifteen_in_sixteen_keys_are_right(results) -> None:
    tempo, key = _score(results["stage"], list(SONGS))
    wrong = [s.name for s in SONGS if not tempo_right(results["stage"][s.name][0], s)]
    # 20 with the weighted sum of the bar's onset evidence (two of the sixteenth-note pop
    # grooves at double); 22 with the level model, once 48 more songs of this generator were
    # development data (docs/conventions/labels.md, "A model that weighs the values together");
    # 20 again since the seventh corpus's half-time grooves, notated at the fast tempo, are
    # development data too: two sixteenth-hat grooves at double, both listed for review
    # ("The compound bar's harmony, and the eighth corpus held out")
    assert tempo >= 20, wrong
    wrong = [s.name for s in SONGS if results["stage"][s.name][1:] != (s.tonic, s.scale)]
    assert key / len(SONGS) >= 15 / 16, wrong


def test_the_extra_songs_are_more_of_the_tuning_half() -> None:
    # development data only (tests/analysis/fit_analysis.py): six a groove, in its tempi, with
    # the tuning half's progressions and instruments; none shares a name with the table
    from collections import Counter

    from tests.analysis.corpus import EXTRA_SONGS, TEMPI, extra_songs

    assert extra_songs() == EXTRA_SONGS and len(EXTRA_SONGS) == 6 * len(TEMPI)
    assert Counter(s.groove for s in EXTRA_SONGS) == dict.fromkeys(TEMPI, 6)
    assert not {s.name for s in EXTRA_SONGS} & {s.name for s in SONGS}
    tuning = [s for s in SONGS if s.half == "tuning"]
    for song in EXTRA_SONGS:
        low, high = TEMPI[song.groove]
        assert low <= song.bpm <= high and song.half == "extra"
        assert song.progression in {s.progression for s in tuning if s.scale == song.scale}
        assert all(p in {s.programs[i] for s in tuning} for i, p in enumerate(song.programs))
