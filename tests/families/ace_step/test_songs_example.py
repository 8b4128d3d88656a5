"""The example dataset `songs`: sung clips with lyrics sidecars, instrumentals without, captions
beside every clip; made by code, the same bytes every time."""

from __future__ import annotations

import numpy as np
import soundfile as sf

from tunesmith.examples.loops import SAMPLE_RATE, render_loop
from tunesmith.examples.songs import SONGS, make_songs, render_song, render_voice, sung_lines


def test_songs_are_written_with_their_sidecars_and_again_byte_for_byte(tmp_path):
    paths = make_songs(tmp_path / "songs")
    assert [p.name for p in paths] == [f"{s.stem}.wav" for s in SONGS]
    sung = {s.stem for s in SONGS if s.lyrics is not None}
    assert sung and len(sung) < len(SONGS)  # both kinds
    files = {p.name: p.read_bytes() for p in (tmp_path / "songs").iterdir()}
    for spec in SONGS:
        assert files[f"{spec.stem}.txt"].decode() == spec.caption + "\n"
        lyrics = files.get(f"{spec.stem}.lyrics.txt")
        assert (lyrics is not None) == (spec.stem in sung)
        if lyrics is not None:
            text = lyrics.decode("utf-8")
            assert text == spec.lyrics and "[Verse]" in text and "[Chorus]" in text
        info = sf.info(tmp_path / "songs" / f"{spec.stem}.wav")
        assert (info.samplerate, info.channels, info.subtype) == (SAMPLE_RATE, 2, "PCM_16")
        assert info.duration == spec.seconds

    make_songs(tmp_path / "songs")
    assert {p.name: p.read_bytes() for p in (tmp_path / "songs").iterdir()} == files


def test_a_sung_clip_sings_each_word_on_its_beat_and_an_instrumental_does_not():
    assert sung_lines("[Verse]\nla la\n\n[Chorus]\n") == ["la la"]
    spec = next(s for s in SONGS if s.lyrics is not None)
    voice = render_voice(spec)
    beat = round(60 / spec.bpm * SAMPLE_RATE)
    # The schedule: the first bar (4 beats) alone, then a word a beat, a beat's rest a line.
    sung_beats, position = set(), 4
    for line in sung_lines(spec.lyrics):
        sung_beats |= set(range(position, position + len(line.split())))
        position += len(line.split()) + 1
    beats = len(voice) // beat
    loud = 0.1 * np.abs(voice).max()
    heard = {i for i in range(beats) if np.abs(voice[i * beat : (i + 1) * beat]).max() > loud}
    assert heard == {i for i in sung_beats if i < beats} and len(heard) > 8

    instrumental = next(s for s in SONGS if s.lyrics is None)
    assert not render_voice(instrumental).any()
    assert np.allclose(render_song(instrumental), render_loop(instrumental.backing), atol=1e-6)
    assert not np.allclose(render_song(spec), render_loop(spec.backing), atol=1e-2)
