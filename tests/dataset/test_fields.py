"""Per-field precedence, provenance and review flags, one rule a test (no audio decoded here:
the analysis record is the resolver's input, written out as the analysis writes it)."""

from __future__ import annotations

import json

import pytest

from tunesmith.dataset.fields import CONFIDENCE_FLOOR, DatasetLevel, parse_key, resolve
from tunesmith.dataset.sidecars import LabelError, Source, candidates, read_sidecar

ANALYSIS = {
    "bpm": 70.2,
    "tempo_confidence": 0.8,
    "key": "A",
    "scale": "minor",
    "key_confidence": 0.75,
}
LEVEL = DatasetLevel()


def sources(**files: str | bytes) -> list[Source]:
    """Sources from sidecar bytes, keyed by source name ("caption_txt" for caption.txt)."""
    found = []
    for name, data in files.items():
        name = name.replace("_txt", ".txt")
        raw = data.encode() if isinstance(data, str) else data
        found.append(read_sidecar(name, f"song.{name}", raw))
    return found


def source_of(resolved, name: str) -> str:
    return resolved.fields[name]["source"]


def test_caption_precedence_json_caption_txt_txt_dataset_json_embedded_filename() -> None:
    every = [
        Source("json", "song.json", {"caption": "from json"}),
        Source("caption.txt", "song.caption.txt", {"caption": "from caption.txt"}),
        Source("txt", "song.txt", {"caption": "from txt"}),
        Source("dataset.json", "dataset.json", {"caption": "from dataset.json"}),
        Source("embedded", "song.wav", {}, {"title": "Tagged", "artist": "Someone"}),
    ]
    expected = ["json", "caption.txt", "txt", "dataset.json", "embedded"]
    for i, name in enumerate(expected):
        resolved = resolve("my_song-2.wav", "audio", every[i:], ANALYSIS, LEVEL)
        assert source_of(resolved, "caption") == name
    assert resolved.values["caption"] == "Title: Tagged, Artist: Someone"
    resolved = resolve("my_song-2.wav", "audio", [], ANALYSIS, LEVEL)
    assert (resolved.values["caption"], source_of(resolved, "caption")) == (
        "my song 2",
        "filename",
    )


def test_tags_merge_with_the_higher_source_winning_per_tag() -> None:
    resolved = resolve(
        "a.wav",
        "audio",
        [
            Source("embedded", "a.wav", {}, {"title": "Old", "artist": "Band"}),
            Source("json", "a.json", {}, {"title": "New"}),
        ],
        ANALYSIS,
        LEVEL,
    )
    assert json.loads(resolved.values["tags"]) == {"title": "New", "artist": "Band"}


def test_underfits_sibling_folders_are_candidates() -> None:
    found = candidates("audio/take 1.wav")
    assert found["json"] == ["audio/take 1.json", "json/take 1.json"]
    assert found["txt"] == ["audio/take 1.txt", "txt/take 1.txt"]
    assert found["caption.txt"] == ["audio/take 1.caption.txt"]
    assert candidates("top.wav")["json"] == ["top.json"]  # no folder above the dataset's


def test_a_written_bpm_wins_and_an_octave_contradiction_is_flagged() -> None:
    resolved = resolve("a.wav", "audio", sources(json='{"bpm": "140"}'), ANALYSIS, LEVEL)
    assert resolved.values["bpm"] == 140.0
    assert resolved.fields["bpm"] == {"source": "json", "analysis": 70.2, "confidence": 0.8}
    (flag,) = resolved.review
    assert flag["field"] == "bpm" and "70.2 (an octave apart)" in flag["reason"]
    agreeing = resolve("a.wav", "audio", sources(json='{"bpm": 71}'), ANALYSIS, LEVEL)
    assert agreeing.review == []  # within 4%


def test_analysis_fills_what_nobody_wrote_and_low_confidence_is_flagged() -> None:
    resolved = resolve("a.wav", "audio", [], ANALYSIS, LEVEL)
    assert (resolved.values["bpm"], source_of(resolved, "bpm")) == (70.2, "analysis")
    assert (resolved.values["keyscale"], source_of(resolved, "keyscale")) == ("A minor", "analysis")
    assert resolved.review == []
    unsure = {**ANALYSIS, "tempo_confidence": CONFIDENCE_FLOOR - 0.01}
    (flag,) = resolve("a.wav", "audio", [], unsure, LEVEL).review
    assert flag["field"] == "bpm" and "under the floor" in flag["reason"]


def test_a_written_key_wins_and_a_different_analysed_key_is_flagged() -> None:
    resolved = resolve("a.wav", "audio", sources(json='{"keyscale": "C major"}'), ANALYSIS, LEVEL)
    assert (resolved.values["key"], resolved.values["scale"]) == ("C", "major")
    assert resolved.values["keyscale"] == "C major" and source_of(resolved, "keyscale") == "json"
    assert [f["field"] for f in resolved.review] == ["keyscale"]


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("E minor", ("E", "minor")),
        ("Bbm", ("Bb", "minor")),
        ("A# min", ("Bb", "minor")),
        ("f#", ("F#", "major")),
        ("Db major", ("C#", "major")),
        ("CM", ("C", "major")),
        ("8A", None),
        ("minor", None),
    ],
)
def test_keys_are_read_in_the_spellings_people_use(text: str, key) -> None:
    assert parse_key(text) == key


def test_time_signature_is_assumed_4_4_and_says_so() -> None:
    resolved = resolve("a.wav", "audio", [], ANALYSIS, LEVEL)
    assert (resolved.values["timesignature"], source_of(resolved, "timesignature")) == (
        "4",
        "assumed",
    )
    written = resolve("a.wav", "audio", sources(json='{"timesignature": "3"}'), ANALYSIS, LEVEL)
    assert (written.values["timesignature"], source_of(written, "timesignature")) == ("3", "json")


def test_lyrics_keep_their_structure_tags_and_only_their_presence_says_not_instrumental() -> None:
    lyrics = "[verse]\nwalking home\n\n[chorus]\nla la"
    resolved = resolve("a.wav", "audio", sources(lyrics_txt=lyrics + "\n"), ANALYSIS, LEVEL)
    assert resolved.values["lyrics"] == lyrics
    assert (resolved.values["is_instrumental"], source_of(resolved, "is_instrumental")) == (
        False,
        "lyrics.txt",
    )
    none = resolve("a.wav", "audio", sources(caption_txt="a loop"), ANALYSIS, LEVEL)
    assert (none.values["lyrics"], none.values["is_instrumental"]) == ("", None)
    assert source_of(none, "is_instrumental") == "none"
    marked = resolve("a.wav", "audio", sources(lyrics_txt="[Instrumental]"), ANALYSIS, LEVEL)
    assert (marked.values["lyrics"], marked.values["is_instrumental"]) == ("", True)


def test_language_is_declared_never_detected() -> None:
    undeclared = resolve("a.wav", "audio", sources(lyrics_txt="hola"), ANALYSIS, LEVEL)
    assert (undeclared.values["language"], source_of(undeclared, "language")) == (
        "unknown",
        "assumed",
    )
    level = DatasetLevel(default_language="es")
    declared = resolve("a.wav", "audio", sources(lyrics_txt="hola"), ANALYSIS, level)
    assert (declared.values["language"], source_of(declared, "language")) == (
        "es",
        "tunesmith.toml",
    )
    own = resolve("a.wav", "audio", sources(json='{"language": "pt"}'), ANALYSIS, level)
    assert (own.values["language"], source_of(own, "language")) == ("pt", "json")


def test_side_steps_key_value_txt_is_read_field_by_field() -> None:
    text = (
        "caption: A dreamy lo-fi track\ngenre: ambient, lo-fi\nbpm: 85\nkey: C minor\n"
        "signature: 4/4\nlanguage: en\nis_instrumental: false\n"
        "lyrics:\n[Verse]\nRain: on the pane\n\n[Chorus]\nDrifting\n"
    )
    (txt,) = sources(txt=text)
    assert txt.values == {
        "caption": "A dreamy lo-fi track",
        "bpm": "85",
        "keyscale": "C minor",
        "timesignature": "4/4",
        "language": "en",
        "is_instrumental": "false",
        "lyrics": "[Verse]\nRain: on the pane\n\n[Chorus]\nDrifting",
    }
    assert txt.tags == {"genre": "ambient, lo-fi"}
    (plain,) = sources(txt="bright piano: a loop for late nights\n")
    assert plain.values == {"caption": "bright piano: a loop for late nights"}


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("txt", "caf\xe9 loop".encode("latin-1"), "song.txt: not UTF-8 (byte 0xe9 at offset 3)"),
        ("json", b'{"prompt": "half', "song.json: not valid JSON"),
        ("json", b'["a", "list"]', "song.json: expected a JSON object of tags, got list"),
        ("lyrics.txt", b"\xc3\x28", "song.lyrics.txt: not UTF-8"),
        ("txt", b"\xff\xfe\x00", "song.txt: starts with a UTF-16-LE byte-order mark but is not"),
    ],
)
def test_a_broken_sidecar_is_an_error_naming_it(name: str, data: bytes, message: str) -> None:
    with pytest.raises(LabelError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_sidecar(name, f"song.{name}", data)


def test_an_unreadable_value_is_a_warning_and_the_next_source_gives_it() -> None:
    resolved = resolve(
        "a.wav",
        "audio",
        [
            Source("json", "a.json", {"bpm": "fast"}),
            Source("dataset.json", "dataset.json", {"bpm": 72}),
        ],
        ANALYSIS,
        LEVEL,
    )
    assert (resolved.values["bpm"], source_of(resolved, "bpm")) == (72.0, "dataset.json")
    (warning,) = resolved.warnings
    assert warning.startswith("a.json: bpm 'fast' is not a number of beats a minute")


def test_pictures_get_a_caption_and_tags_only() -> None:
    resolved = resolve("p.png", "image", sources(txt="a red square"), {}, LEVEL)
    assert set(resolved.values) == {"caption", "tags"} and set(resolved.fields) == {"caption"}
