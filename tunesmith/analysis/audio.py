"""Tempo, key and loudness of one audio file, measured with Essentia.

`analyze_audio` decodes the file with Essentia's AudioLoader (FFmpeg: wav, aiff, flac, ogg,
mp3, ...) at its native rate and reports:

- tempo from RhythmExtractor2013 ("multifeature") on a mono mix resampled to 44.1 kHz, the
  only rate it works at. `bpm_confidence` is that method's confidence, 0 to 5.32 (not 0..1;
  Essentia calls above 3.5 excellent). bpm and confidence are 0.0 when no tempo is found.
- key and scale from KeyExtractor on the same mono mix; see KEY_PROFILE for the profile.
  `key_strength` is the profile correlation; near 0 (silence, drums only) the key is noise.
- integrated loudness (EBU R128 / ITU-R BS.1770) on the file's channels at the native rate.

Key names use one fixed spelling whatever the scale: C C# D Eb E F F# G Ab A Bb B (Essentia's
own, so that D# minor is reported as "Eb" minor, and Gb major as "F#" major).

Not handled: files with more than two channels (AudioLoader refuses them), tempo changes
(one global BPM), key changes (one global key). The truncation check reads RIFF/WAVE and
AIFF/AIFC chunk headers only; RF64 and compressed formats rely on the decoder.
"""

from __future__ import annotations

import importlib.metadata
import math
import struct
from pathlib import Path

import essentia
import numpy as np

ANALYZER_VERSION = "1"

ANALYSIS_SAMPLE_RATE = 44100  # RhythmExtractor2013 requires 44.1 kHz (its documentation)
MIN_TEMPO, MAX_TEMPO = 40, 208  # RhythmExtractor2013's defaults, made explicit
# "bgate": Essentia's default, built from Beatport's global-key set (electronic music, as
# loops usually are). On synthesised clips in 12 keys it tied for best with "edma" and
# "krumhansl" over six progressions; "edmm" called major keys minor, "temperley" and
# "diatonic" failed more often on progressions that do not start on the tonic.
KEY_PROFILE = "bgate"

ANALYSIS_PARAMS: dict = {
    "essentia": importlib.metadata.version("essentia"),  # the wheel, e.g. 2.1b6.dev1389
    "decoder": "AudioLoader",
    "analysis_sample_rate": ANALYSIS_SAMPLE_RATE,
    "mono_mix": "MonoMixer(type=mix)",
    "resample": {"algorithm": "Resample", "quality": 1},
    "rhythm": {
        "algorithm": "RhythmExtractor2013",
        "method": "multifeature",
        "min_tempo": MIN_TEMPO,
        "max_tempo": MAX_TEMPO,
    },
    "key": {"algorithm": "KeyExtractor", "profile": KEY_PROFILE, "spelling": "C# Eb F# Ab Bb"},
    "loudness": {"algorithm": "LoudnessEBUR128", "hop_seconds": 0.1, "output": "integrated"},
}

PITCH_CLASSES = ("C", "C#", "D", "Eb", "E", "F", "F#", "G", "Ab", "A", "Bb", "B")
_ENHARMONIC = {"Db": "C#", "D#": "Eb", "Gb": "F#", "G#": "Ab", "A#": "Bb"}


class AudioDecodeError(ValueError):
    """The file is empty, truncated or not audio that Essentia can decode."""


def analyze_audio(path: Path) -> dict:
    """Duration, native format, tempo, key and integrated loudness of one audio file.

    Returns a dict with exactly: duration (s), sample_rate (native, Hz), channels, bpm,
    bpm_confidence, key, scale ("major"/"minor"), key_strength, loudness_lufs.
    Raises AudioDecodeError naming the file when it is empty, truncated or undecodable.
    """
    essentia.log.infoActive = False  # importing .standard prints an INFO line about SVMs
    import essentia.standard as es  # slow to import: only when a file is really analysed

    path = Path(path)
    _check_container(path)
    try:
        stereo, sample_rate, channels, *_ = es.AudioLoader(filename=str(path))()
    except RuntimeError as err:
        raise AudioDecodeError(f"{path}: could not decode as audio: {err}") from err
    if len(stereo) == 0:
        raise AudioDecodeError(f"{path}: decoded to zero samples; expected audio")

    # For a mono file AudioLoader returns [x, 0]: the stereo meter then sums one channel,
    # which is exactly BS.1770's mono measurement (duplicating x would read 3 dB louder).
    loudness = es.LoudnessEBUR128(sampleRate=sample_rate, hopSize=0.1)(stereo)[2]

    mono = es.MonoMixer(type="mix")(stereo, channels)
    if sample_rate != ANALYSIS_SAMPLE_RATE:
        mono = es.Resample(
            inputSampleRate=sample_rate, outputSampleRate=ANALYSIS_SAMPLE_RATE, quality=1
        )(mono)
    bpm, confidence = _tempo(mono)
    key, scale, strength = es.KeyExtractor(
        profileType=KEY_PROFILE, sampleRate=ANALYSIS_SAMPLE_RATE
    )(mono)
    return {
        "duration": len(stereo) / float(sample_rate),
        "sample_rate": int(sample_rate),
        "channels": int(channels),
        "bpm": bpm,
        "bpm_confidence": confidence,
        "key": _ENHARMONIC.get(key, key),
        "scale": scale,
        "key_strength": float(strength),
        "loudness_lufs": float(loudness),
    }


def _tempo(mono: np.ndarray) -> tuple[float, float]:
    """(bpm, confidence), or (0.0, 0.0) where RhythmExtractor2013 finds no tempo.

    On clips under ~1 s it returns bpm 0 itself; on silence it returns a bpm far above
    MAX_TEMPO with confidence 0, so anything outside [MIN_TEMPO, MAX_TEMPO] counts as none.
    """
    import essentia.standard as es

    bpm, _, confidence, _, _ = es.RhythmExtractor2013(
        method="multifeature", minTempo=MIN_TEMPO, maxTempo=MAX_TEMPO
    )(mono)
    if not (math.isfinite(bpm) and MIN_TEMPO <= bpm <= MAX_TEMPO):
        return 0.0, 0.0
    return float(bpm), float(confidence)


def _check_container(path: Path) -> None:
    """Raise AudioDecodeError for an empty file, or a WAV/AIFF whose chunks overrun the file.

    Decoders read a truncated data chunk without complaint and return fewer samples, which
    would give a wrong duration (and a cache entry that looks valid), so the chunk headers
    are checked here. Other formats are left to the decoder.
    """
    size = path.stat().st_size  # a missing or unreadable file is an OSError, not bad audio
    with path.open("rb") as f:
        head = f.read(12)
    if size == 0:
        raise AudioDecodeError(f"{path}: the file is empty (0 bytes); expected audio")
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        _check_chunks(path, size, "<", b"data", "WAV")
    elif head[:4] == b"FORM" and head[8:12] in (b"AIFF", b"AIFC"):
        _check_chunks(path, size, ">", b"SSND", "AIFF")
    elif head[:4] in (b"RIFF", b"FORM") and len(head) < 12:
        raise AudioDecodeError(f"{path}: truncated inside the {len(head)}-byte file header")


def _check_chunks(path: Path, size: int, endian: str, data_id: bytes, kind: str) -> None:
    """Walk the chunks after the 12-byte header up to the audio data chunk."""
    offset = 12
    with path.open("rb") as f:
        while True:
            f.seek(offset)
            header = f.read(8)
            if len(header) < 8:
                raise AudioDecodeError(
                    f"{path}: {kind} file ends at byte {size} before its "
                    f"{data_id.decode()!r} chunk; the file is truncated or not {kind}"
                )
            chunk_id, chunk_size = header[:4], struct.unpack(endian + "I", header[4:])[0]
            # 0xFFFFFFFF: a streamed WAV whose length was never filled in; read to the end.
            if chunk_id == data_id and chunk_size == 0xFFFFFFFF and kind == "WAV":
                return
            end = offset + 8 + chunk_size
            if end > size:
                raise AudioDecodeError(
                    f"{path}: truncated {kind}: chunk {chunk_id.decode('latin-1')!r} at byte "
                    f"{offset} claims {chunk_size} bytes but only {size - offset - 8} remain"
                )
            if chunk_id == data_id:
                return
            offset = end + (chunk_size & 1)  # chunks are padded to an even length
