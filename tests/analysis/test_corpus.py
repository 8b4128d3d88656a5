"""The labels stage's tempo and key against plain Essentia, on songs rendered from MIDI.

The corpus (tests/analysis/corpus.py) has a "tuning" half the analysis was adjusted on and
a "held-out" half it was not (since 48 more songs of its generator became development data,
the held-out half is a check of songs like those, not of unseen ones). The stage must read
at least as many keys as plain Essentia on each half and 15 of every 16 in all, and at least
as many tempi as plain Essentia in all; every tempo it reads wrong must be listed for review
with the right one named as the alternative. Four sixteenth-hat grooves sit between their
notated tempo and its double, at 0.50 to 0.57: which side each falls on moves with the
level model's random start, so the tempo of each half is not asserted against plain
Essentia's (docs/conventions/labels.md, "Two pulses to the dotted quarter, and the ninth
corpus held out").
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
        "doubt": {
            s.name: (r["tempo_confidence"], r["tempo"]["alternatives"])
            for s, r in zip(SONGS, stage, strict=True)
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
def test_the_stage_reads_as_many_keys_as_plain_essentia(results, half: str) -> None:
    songs = [s for s in SONGS if s.half == half]
    stage, plain = _score(results["stage"], songs), _score(results["plain"], songs)
    print(
        f"{half}: tempo {stage[0]}/{len(songs)} (plain {plain[0]}), "
        f"key {stage[1]}/{len(songs)} (plain {plain[1]})"
    )
    assert stage[1] >= plain[1], (stage, plain)


@pytest.mark.slow
def test_as_many_tempi_as_plain_essentia_and_fifteen_in_sixteen_keys_are_right(results) -> None:
    tempo, key = _score(results["stage"], list(SONGS))
    plain, _ = _score(results["plain"], list(SONGS))
    wrong = [s.name for s in SONGS if not tempo_right(results["stage"][s.name][0], s)]
    # 20 of 22 with the weighted sum of the bar's onset evidence, 22 with the level model once
    # 48 more songs of this generator were development data, 20 with the seventh corpus's
    # half-time grooves among them too, 18 to 20 now, by the fit's random start: the
    # sixteenth-hat grooves read at double are coin flips, each listed (the test below)
    assert tempo >= plain, (tempo, plain, wrong)
    wrong = [s.name for s in SONGS if results["stage"][s.name][1:] != (s.tonic, s.scale)]
    assert key / len(SONGS) >= 15 / 16, wrong


@pytest.mark.slow
def test_every_tempo_read_wrong_is_listed_with_the_right_one_as_its_alternative(results) -> None:
    from tunesmith.dataset.fields import CONFIDENCE_FLOOR  # the labels' review floor

    for s in SONGS:
        if tempo_right(results["stage"][s.name][0], s):
            continue
        confidence, alternatives = results["doubt"][s.name]
        assert confidence < CONFIDENCE_FLOOR, (s.name, confidence)
        assert any(tempo_right(bpm, s) for bpm in alternatives), (s.name, alternatives)


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
