"""analyze_audio against the synthesised `loops` dataset, whose tempo and key are known."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import mutagen.flac
import mutagen.wave
import numpy as np
import pytest
import soundfile as sf

from tunesmith.analysis import audio
from tunesmith.analysis.audio import PITCH_CLASSES, AudioDecodeError, analyze_audio
from tunesmith.examples.loops import LOOPS, make_loops, render_loop

KEYS = {
    "duration",
    "sample_rate",
    "channels",
    "bpm",
    "bpm_confidence",
    "tempo_confidence",
    "timesignature",
    "timesignature_confidence",
    "key",
    "scale",
    "key_strength",
    "key_confidence",
    "loudness_lufs",
    "tempo",
    "key_detail",
}
UNDERFIT_TAGS = {"title", "artist", "album", "genre", "label", "date", "composer", "bpm", "prompt"}


@pytest.fixture(scope="module")
def loops_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("loops")
    make_loops(folder)
    return folder


@pytest.fixture(scope="module")
def analyses(loops_dir: Path) -> dict[str, dict]:
    found = {spec.stem: analyze_audio(loops_dir / spec.filename) for spec in LOOPS}
    print(f"\n{'clip':14} {'bpm':>6} {'found':>7} {'conf':>5}  {'key':9} {'found':9} {'LUFS':>6}")
    for spec in LOOPS:
        a = found[spec.stem]
        print(
            f"{spec.stem:14} {spec.bpm:6.1f} {a['bpm']:7.2f} {a['bpm_confidence']:5.2f}  "
            f"{spec.key + ' ' + spec.scale:9} {a['key'] + ' ' + a['scale']:9} "
            f"{a['loudness_lufs']:6.1f}"
        )
    return found


def test_loops_cover_the_promised_range() -> None:
    assert len(LOOPS) >= 8
    assert min(s.bpm for s in LOOPS) >= 90 and max(s.bpm for s in LOOPS) <= 150
    assert sum(s.scale == "major" for s in LOOPS) >= 3
    assert sum(s.scale == "minor" for s in LOOPS) >= 3
    assert all(10 <= s.seconds <= 30 for s in LOOPS)
    assert all(s.key in PITCH_CLASSES for s in LOOPS)


def test_tempo_is_recovered_within_2_percent(analyses: dict[str, dict]) -> None:
    # Half or double tempo is 50% off, so an octave error counts as wrong here.
    misses = [s.stem for s in LOOPS if abs(analyses[s.stem]["bpm"] - s.bpm) > 0.02 * s.bpm]
    assert 1 - len(misses) / len(LOOPS) >= 7 / 8, misses


def test_key_and_scale_are_recovered(analyses: dict[str, dict]) -> None:
    found = {s.stem: (analyses[s.stem]["key"], analyses[s.stem]["scale"]) for s in LOOPS}
    misses = [s.stem for s in LOOPS if found[s.stem] != (s.key, s.scale)]
    assert 1 - len(misses) / len(LOOPS) >= 6 / 8, misses


def test_format_fields_match_the_loops(analyses: dict[str, dict]) -> None:
    for spec in LOOPS:
        found = analyses[spec.stem]
        assert set(found) == KEYS
        assert found["duration"] == pytest.approx(spec.seconds, abs=1 / 44100)
        assert (found["sample_rate"], found["channels"]) == (44100, 2)
        assert found["scale"] in ("major", "minor")
        assert -40 < found["loudness_lufs"] < 0


def test_mono_file_reports_one_channel(tmp_path: Path) -> None:
    spec = LOOPS[0]
    sf.write(tmp_path / "mono.wav", render_loop(spec).mean(axis=1), 44100, subtype="PCM_16")
    found = analyze_audio(tmp_path / "mono.wav")
    assert (found["channels"], found["sample_rate"]) == (1, 44100)
    assert found["bpm"] == pytest.approx(spec.bpm, rel=0.02)


def test_other_sample_rate_is_resampled_for_tempo(tmp_path: Path) -> None:
    # The same samples labelled 48 kHz play 48000/44100 times faster: so must the beat.
    spec = LOOPS[0]
    sf.write(tmp_path / "fast.wav", render_loop(spec), 48000, subtype="PCM_16")
    found = analyze_audio(tmp_path / "fast.wav")
    assert found["sample_rate"] == 48000
    assert found["duration"] == pytest.approx(spec.seconds * 44100 / 48000, abs=1 / 48000)
    assert found["bpm"] == pytest.approx(spec.bpm * 48000 / 44100, rel=0.02)


@pytest.mark.parametrize(("channels", "expected_lufs"), [(1, -23.0), (2, -20.0)])
def test_loudness_of_a_1khz_sine_matches_bs1770(
    tmp_path: Path, channels: int, expected_lufs: float
) -> None:
    # BS.1770: a 0 dBFS 1 kHz sine in one channel reads -3.01 LKFS; this one is at -20 dBFS.
    t = np.arange(5 * 48000) / 48000
    sine = 0.1 * np.sin(2 * np.pi * 1000 * t)
    sf.write(tmp_path / "sine.wav", np.stack([sine] * channels, axis=1), 48000, subtype="FLOAT")
    assert analyze_audio(tmp_path / "sine.wav")["loudness_lufs"] == pytest.approx(
        expected_lufs, abs=0.1
    )


def test_half_amplitude_reads_6db_lower(loops_dir: Path, analyses: dict, tmp_path: Path) -> None:
    spec = LOOPS[1]
    audio, rate = sf.read(loops_dir / spec.filename, dtype="float32")
    sf.write(tmp_path / "half.wav", 0.5 * audio, rate, subtype="FLOAT")
    drop = (
        analyses[spec.stem]["loudness_lufs"] - analyze_audio(tmp_path / "half.wav")["loudness_lufs"]
    )
    assert drop == pytest.approx(20 * np.log10(2), abs=0.5)


def test_very_short_and_silent_files_do_not_crash(tmp_path: Path) -> None:
    sf.write(tmp_path / "blip.wav", render_loop(LOOPS[0])[:22050], 44100, subtype="PCM_16")
    blip = analyze_audio(tmp_path / "blip.wav")
    assert blip["duration"] == pytest.approx(0.5)
    assert blip["bpm"] >= 0.0
    sf.write(tmp_path / "silence.wav", np.zeros((3 * 44100, 2)), 44100, subtype="PCM_16")
    silence = analyze_audio(tmp_path / "silence.wav")
    assert (silence["bpm"], silence["bpm_confidence"]) == (0.0, 0.0)
    assert (silence["timesignature"], silence["timesignature_confidence"]) == ("", 0.0)


def _zero_bytes(path: Path) -> None:
    path.write_bytes(b"")


def _half_a_wav(path: Path) -> None:
    sf.write(path, render_loop(LOOPS[0])[:44100], 44100, subtype="PCM_16")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _half_an_aiff(path: Path) -> None:
    sf.write(path, render_loop(LOOPS[0])[:44100], 44100, subtype="PCM_16", format="AIFF")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _half_of(fmt: str):
    """A whole clip written as `fmt` (its header says how long it is), then cut in half: a
    download or copy stopped short, which decoders read without complaint."""

    def make(path: Path) -> None:
        sf.write(path, render_loop(LOOPS[0])[: 4 * 44100], 44100, format=fmt)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])

    return make


def _text(path: Path) -> None:
    path.write_text("these are not the samples you are looking for\n" * 20)


@pytest.mark.parametrize(
    ("name", "make", "reason"),
    [
        ("empty.wav", _zero_bytes, "empty"),
        ("cut.wav", _half_a_wav, "truncated"),
        ("cut.aiff", _half_an_aiff, "truncated"),
        ("cut.mp3", _half_of("MP3"), "ends early: its header says 4.0 s, and 2.0 s decode"),
        ("cut.flac", _half_of("FLAC"), "ends early: its header says 4.0 s, and 2.0 s decode"),
        ("notes.wav", _text, "could not decode"),
    ],
)
def test_bad_files_raise_decode_error_naming_the_file(
    tmp_path: Path, name: str, make, reason: str
) -> None:
    make(tmp_path / name)
    with pytest.raises(AudioDecodeError, match=reason) as caught:
        analyze_audio(tmp_path / name)
    assert name in str(caught.value)


@pytest.mark.parametrize(
    ("name", "fmt", "subtype"),
    [
        ("whole.mp3", "MP3", None),
        ("whole.flac", "FLAC", None),
        ("whole.ogg", "OGG", "VORBIS"),
        # codecs Essentia's FFmpeg lacks, which libsndfile decodes: handed to AudioLoader they
        # would corrupt the process (the next file's analysis crashes)
        ("whole.opus", "OGG", "OPUS"),
        ("opus_in.ogg", "OGG", "OPUS"),
        ("adpcm.wav", "WAV", "MS_ADPCM"),
        ("ima.wav", "WAV", "IMA_ADPCM"),
    ],
)
def test_a_whole_compressed_file_is_analysed_and_not_called_short(
    tmp_path: Path, name: str, fmt: str, subtype: str | None
) -> None:
    """The header's length against the decoded one leaves room for the encoder's padding."""
    rate = 48000 if subtype == "OPUS" else 44100  # Opus codes at 48 kHz only (libsndfile)
    audio = render_loop(LOOPS[0])[: 4 * 44100]
    if rate != 44100:
        audio = np.stack(
            [
                np.interp(np.arange(4 * rate) * 44100 / rate, np.arange(len(audio)), c)
                for c in audio.T
            ],
            axis=1,
        )
    sf.write(tmp_path / name, audio, rate, format=fmt, subtype=subtype)
    found = analyze_audio(tmp_path / name)
    assert analyze_audio(tmp_path / name) == found  # the process is whole
    assert found["duration"] == pytest.approx(4.0, abs=0.1)
    assert found["sample_rate"] == rate and found["channels"] == 2
    assert found["bpm"] == pytest.approx(LOOPS[0].bpm, rel=0.04)


@pytest.mark.parametrize(("codec", "named"), [("flac", "FLAC"), ("libopus", "Opus")])
def test_an_mp4_holding_a_codec_the_decoder_lacks_is_named_and_the_next_file_decodes(
    tmp_path: Path, codec: str, named: str
) -> None:
    whole = tmp_path / "whole.wav"
    sf.write(whole, render_loop(LOOPS[0])[: 4 * 44100], 44100)
    odd = tmp_path / "odd.m4a"
    subprocess.run(
        [
            "ffmpeg",
            "-loglevel",
            "error",
            "-i",
            whole,
            "-c:a",
            codec,
            "-strict",
            "-2",
            "-f",
            "mp4",
            odd,
        ],
        check=True,
    )
    with pytest.raises(AudioDecodeError, match=f"holds {named} audio in an MP4") as caught:
        analyze_audio(odd)
    assert "odd.m4a" in str(caught.value) and "expected AAC, ALAC" in str(caught.value)
    assert analyze_audio(whole)["duration"] == pytest.approx(4.0, abs=0.1)


def test_an_mp4_the_decoder_reads_is_never_called_one_it_lacks(tmp_path: Path) -> None:
    # a damaged AAC file fails for another reason: its message must not blame the codec
    whole = tmp_path / "whole.wav"
    sf.write(whole, render_loop(LOOPS[0])[:44100], 44100)
    for codec in ("aac", "alac", "flac"):
        made = tmp_path / f"{codec}.m4a"
        subprocess.run(
            ["ffmpeg", "-loglevel", "error", "-i", whole, "-c:a", codec, "-strict", "-2",
             "-f", "mp4", made],
            check=True,
        )  # fmt: skip
    assert audio._unread_mp4_codec(tmp_path / "aac.m4a") is None
    assert audio._unread_mp4_codec(tmp_path / "alac.m4a") is None
    assert audio._unread_mp4_codec(tmp_path / "flac.m4a") == "FLAC"


def test_labels_are_the_promised_mix(loops_dir: Path) -> None:
    by_labels = {
        kind: [s for s in LOOPS if s.labels == kind]
        for kind in ("txt", "json", "json+txt", "id3", "flac")
    }
    assert all(len(specs) >= 1 for specs in by_labels.values()), by_labels
    for spec in LOOPS:
        has_json = (loops_dir / f"{spec.stem}.json").exists()
        has_txt = (loops_dir / f"{spec.stem}.txt").exists()
        assert (has_json, has_txt) == (
            spec.labels in ("json", "json+txt"),
            spec.labels in ("txt", "json+txt"),
        ), spec.stem
        if has_json:
            tags = json.loads((loops_dir / f"{spec.stem}.json").read_text())
            assert set(tags) <= UNDERFIT_TAGS and all(isinstance(v, str) for v in tags.values())
        if has_txt:
            assert len((loops_dir / f"{spec.stem}.txt").read_text().splitlines()) == 1
        if spec.labels == "json+txt":
            assert tags["prompt"] != (loops_dir / f"{spec.stem}.txt").read_text().strip()
        if spec.labels == "id3":
            id3 = mutagen.wave.WAVE(loops_dir / spec.filename).tags
            assert id3["TIT2"].text == [spec.title] and id3["TCON"].text == [spec.genre]
            assert id3["TBPM"].text == [f"{spec.bpm:g}"] and id3["TPE1"].text
        elif spec.labels == "flac":
            vorbis = mutagen.flac.FLAC(loops_dir / spec.filename)
            assert vorbis["title"] == [spec.title] and vorbis["bpm"] == [f"{spec.bpm:g}"]
            assert vorbis["genre"] == [spec.genre] and vorbis["artist"]
        else:
            assert mutagen.wave.WAVE(loops_dir / spec.filename).tags is None


def test_second_run_writes_the_same_bytes(loops_dir: Path, tmp_path: Path) -> None:
    def digests(folder: Path) -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}

    before = digests(loops_dir)
    make_loops(loops_dir)
    assert digests(loops_dir) == before
    assert not [name for name in before if name.startswith(".")]  # no temporary files left


def test_the_downmix_is_the_mean_of_the_channels_to_the_bit() -> None:
    from tunesmith.analysis.audio import downmix

    rng = np.random.default_rng(0)
    for channels in (1, 2, 6):
        samples = rng.standard_normal((4410, channels)).astype(np.float32)
        mixed = downmix(samples)
        assert mixed.dtype == np.float32
        assert np.array_equal(mixed, samples.mean(axis=1).astype(np.float32))
