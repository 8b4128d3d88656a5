"""Duration, format, tempo, key and loudness of one audio file, measured with Essentia.

`analyze_audio` decodes the file with Essentia's AudioLoader (FFmpeg: wav, aiff, flac, ogg,
mp3, m4a, ...) at its native rate; a file in a codec AudioLoader lacks (Opus, ADPCM) or with
more than two channels is read with libsndfile instead (the channels are then mixed down).
It reports:

- a chromagram (`analysis.chroma`, full band and bass) that the tempo's level, the metre and
  the key read the harmony from;
- tempo (`analysis.tempo`): RhythmExtractor2013 ("multifeature") on a mono mix resampled to
  44.1 kHz, the only rate it works at, at the metrical level `analysis.meter` chooses from
  the music (where its chords change, how its beat divides, what recurs). `bpm_confidence`
  is the tracker's own confidence, 0 to 5.32 (not 0..1; Essentia calls above 3.5
  excellent); `tempo_confidence` is the 0..1 confidence of the final bpm. bpm and both
  confidences are 0.0 when no tempo is found.
- time signature (`analysis.meter`): ACE-Step 1.5's value, "3", "4" or "6" (12/8 is "4"),
  chosen with the tempo's level. `timesignature_confidence` is 0..1.
- key and scale (`analysis.key`): the 24 keys weighed on the chroma's profile, KeyExtractor's
  answer, how the song starts and ends, and the chords it plays. `key_strength` is
  KeyExtractor's profile correlation (near 0 on silence or drums only: the key is noise);
  `key_confidence` is 0..1.
- integrated loudness (EBU R128 / ITU-R BS.1770) on the file's channels at the native rate;
  for more than two channels, on the mono mix (BS.1770 would weight surround channels by
  1.41 and leave out the LFE, which needs a channel layout libsndfile does not report).

Key names use one fixed spelling whatever the scale: C C# D Eb E F F# G Ab A Bb B (Essentia's
own, so that D# minor is reported as "Eb" minor, and Gb major as "F#" major).

Not handled: tempo changes (one global BPM), key changes (one global key), metre changes
and odd metres (5/4, 7/8). A file cut short is refused: a WAV or AIFF whose chunks overrun
the file, and a compressed file that decodes shorter than its header says (MP3, FLAC, MP4;
an Ogg or Opus file states no length of its own, and RF64's chunks are not read).
"""

from __future__ import annotations

import importlib.metadata
import struct
from pathlib import Path

import essentia
import numpy as np
import soundfile as sf

from tunesmith.analysis import activation as activation_analysis
from tunesmith.analysis import chroma as chroma_analysis
from tunesmith.analysis import key as key_analysis
from tunesmith.analysis import meter as meter_analysis
from tunesmith.analysis import tempo as tempo_analysis
from tunesmith.analysis.chroma import PITCH_CLASSES
from tunesmith.analysis.key import KEY_PROFILE
from tunesmith.media.sniff import sniff

__all__ = [
    "ANALYSIS_PARAMS",
    "ANALYZER_VERSION",
    "PITCH_CLASSES",
    "AudioDecodeError",
    "analyze_audio",
]

ANALYZER_VERSION = "4"

ANALYSIS_SAMPLE_RATE = 44100  # RhythmExtractor2013 requires 44.1 kHz (its documentation)

# The decoded audio may be shorter than the header says by the encoder's delay and padding
# (a few thousand samples, which decoders trim or not); more than both of these is a cut file.
SHORT_BY_SECONDS = 0.25
SHORT_BY_FRACTION = 0.02

ANALYSIS_PARAMS: dict = {
    "essentia": importlib.metadata.version("essentia"),  # the wheel, e.g. 2.1b6.dev1389
    "decoder": "AudioLoader; libsndfile for other codecs and above two channels",
    "analysis_sample_rate": ANALYSIS_SAMPLE_RATE,
    "mono_mix": "mean of the channels",
    "resample": {"algorithm": "Resample", "quality": 1},
    "chroma": {
        "algorithm": "HPCP",
        "frame": chroma_analysis.FRAME,
        "hop": chroma_analysis.HOP,
        "bands_hz": {
            "full": chroma_analysis.FULL_BAND,
            "bass": chroma_analysis.BASS_BAND,
            "low": chroma_analysis.LOW_BAND,
        },
    },
    "rhythm": {
        "algorithm": "RhythmExtractor2013",
        "method": "multifeature",
        "min_tempo": meter_analysis.MIN_TEMPO,
        "max_tempo": meter_analysis.MAX_TEMPO,
        "onset_strength": "log spectral flux, full band and under "
        f"{meter_analysis.LOW_BAND_HZ:g} Hz, hop {meter_analysis.HOP}",
        "level_model": meter_analysis.model_digest(),
        "activation_network": activation_analysis.network_digest(),
        "levels": {m: [str(f) for f in fs] for m, fs in meter_analysis.FACTORS.items()},
        # the decision (analysis.meter.decision): a record made by another is measured again
        "choice": "tempo by its summed probability, then the time signature at that tempo",
        "review_probability": {
            "tempo": tempo_analysis.REVIEW_PROBABILITY,
            "timesignature": meter_analysis.REVIEW_PROBABILITY,
        },
    },
    "key": {
        "algorithm": "KeyExtractor",
        "profile": KEY_PROFILE,
        "spelling": "C# Eb F# Ab Bb",
        "weights": key_analysis.WEIGHTS,
        "review_probability": key_analysis.REVIEW_PROBABILITY,
    },
    "loudness": {"algorithm": "LoudnessEBUR128", "hop_seconds": 0.1, "output": "integrated"},
    # a record made before files cut short were refused is measured again
    "length_check": {"short_by_seconds": SHORT_BY_SECONDS, "short_by_fraction": SHORT_BY_FRACTION},
}


class AudioDecodeError(ValueError):
    """The file is empty, truncated or not audio that Essentia can decode."""


def analyze_audio(path: Path) -> dict:
    """Duration, native format, tempo, key and integrated loudness of one audio file.

    Returns a dict with exactly: duration (s), sample_rate (native, Hz), channels, bpm,
    bpm_confidence, tempo_confidence, timesignature ("" when there is no tempo),
    timesignature_confidence, key, scale ("major"/"minor"), key_strength, key_confidence,
    loudness_lufs, and `tempo` and `key_detail`, what the estimators said on the way (see
    analysis.tempo.Tempo, whose `metre` is analysis.meter.Metre, and analysis.key.Key).
    Raises AudioDecodeError naming the file when it is empty, truncated or undecodable.
    """
    essentia.log.infoActive = False  # importing .standard prints an INFO line about SVMs
    import essentia.standard as es  # slow to import: only when a file is really analysed

    path = Path(path)
    _check_container(path)
    samples, sample_rate, channels = _decode(path)
    if len(samples) == 0:
        raise AudioDecodeError(f"{path}: decoded to zero samples; expected audio")
    _check_length(path, len(samples) / float(sample_rate))

    mono = downmix(samples)
    # For a mono file the stereo meter gets [x, 0]: it then sums one channel, which is
    # exactly BS.1770's mono measurement (duplicating x would read 3 dB louder).
    if channels == 2:
        metered = samples
    else:
        metered = np.stack([mono, np.zeros_like(mono)], axis=1)
    loudness = es.LoudnessEBUR128(sampleRate=sample_rate, hopSize=0.1)(metered)[2]

    mono = analysis_mono(mono, sample_rate)
    chroma = chroma_analysis.chroma(mono)
    tracked = tempo_analysis.track(mono)
    tempo = tempo_analysis.estimate_tempo(mono, chroma, tracked)
    key = key_analysis.estimate_key(mono, chroma, tracked.ticks, bar_seconds(tempo))
    return {
        "duration": len(samples) / float(sample_rate),
        "sample_rate": int(sample_rate),
        "channels": int(channels),
        "bpm": tempo.bpm,
        "bpm_confidence": tempo.beat_confidence,
        "tempo_confidence": tempo.confidence,
        "timesignature": tempo.metre.get("timesignature", "") if tempo.bpm else "",
        "timesignature_confidence": float(tempo.metre.get("confidence", 0.0)),
        "key": key.key,
        "scale": key.scale,
        "key_strength": key.strength,
        "key_confidence": key.confidence,
        "loudness_lufs": float(loudness),
        "tempo": tempo.as_dict(),
        "key_detail": key.as_dict(),
    }


def downmix(samples: np.ndarray) -> np.ndarray:
    """The mean of the channels of float32 `samples` [N, channels], float32. Channel by
    channel: numpy's mean along a row of two is about 40 times slower on a long song, and for
    up to six channels this gives its very bits."""
    total = samples[:, 0].astype(np.float32)  # a copy: `samples` is left alone
    for channel in range(1, samples.shape[1]):
        total += samples[:, channel]
    total /= np.float32(samples.shape[1])
    return total


def analysis_mono(mono: np.ndarray, sample_rate: int) -> np.ndarray:
    """The mono mix at ANALYSIS_SAMPLE_RATE, float32."""
    import essentia.standard as es

    if sample_rate != ANALYSIS_SAMPLE_RATE:
        mono = es.Resample(
            inputSampleRate=sample_rate, outputSampleRate=ANALYSIS_SAMPLE_RATE, quality=1
        )(mono)
    return np.asarray(mono, dtype=np.float32)


def bar_seconds(tempo: tempo_analysis.Tempo) -> float:
    """The bar's length at the tempo in the metre found (0 when there is no tempo)."""
    if tempo.bpm <= 0:
        return 0.0
    metre = meter_analysis.METRES.get(tempo.metre.get("metre", "4/4"), meter_analysis.METRES["4/4"])
    return metre.beats * 60.0 / tempo.bpm


# The codecs Essentia's AudioLoader decodes, as libsndfile names them. A file libsndfile reads
# in another (Opus, ADPCM WAV, ...) or with more than two channels is decoded by libsndfile:
# AudioLoader's FFmpeg lacks those codecs and refuses more than two channels, and once it has
# failed to open a codec it lacks, the process's heap is corrupt (the next call crashes), so it
# is never handed one. What libsndfile cannot open (MP4/M4A) goes to AudioLoader: it reads
# AAC, ALAC, AC-3, E-AC-3 and MP3 there, and fails on FLAC or Opus in MP4 without harm to the
# process (each tried here, then 20 decodes of other files after the failure).
AUDIOLOADER_CODECS = frozenset(
    {"PCM_S8", "PCM_U8", "PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE", "ULAW", "ALAW"}
    | {"VORBIS", "MPEG_LAYER_III"}
)


def _decode(path: Path) -> tuple[np.ndarray, int, int]:
    """float32 samples [N, channels] at the native rate, the rate and the channel count."""
    import essentia.standard as es

    # libsndfile says which codec the file holds, except in an MP3 (always one AudioLoader
    # reads; libsndfile's MP3 decoder prints its own warnings to the console) or an MP4
    # (which libsndfile does not open).
    info = None
    with path.open("rb") as f:
        container = sniff(f.read(16))
    if container not in ("MP3", "MP4"):
        try:
            info = sf.info(str(path))
        except (sf.LibsndfileError, RuntimeError):
            pass
    if info is not None and (info.channels > 2 or info.subtype not in AUDIOLOADER_CODECS):
        try:
            data, rate = sf.read(path, dtype="float32", always_2d=True)
        except (sf.LibsndfileError, RuntimeError) as exc:
            raise AudioDecodeError(f"{path}: could not decode as audio ({exc})") from exc
        return data, int(rate), int(data.shape[1])
    try:
        stereo, sample_rate, channels, *_ = es.AudioLoader(filename=str(path))()
    except RuntimeError as err:
        codec = _unread_mp4_codec(path) if container == "MP4" else None
        if codec:
            raise AudioDecodeError(
                f"{path}: it holds {codec} audio in an MP4 container, which the decoder does "
                "not read; expected AAC, ALAC, AC-3 or MP3 in an .m4a or .mp4 (convert it, "
                "e.g. to .flac or .opus)"
            ) from err
        raise AudioDecodeError(f"{path}: could not decode as audio: {err}") from err
    # AudioLoader returns a mono file as [x, 0]; keep the one real channel.
    samples = stereo[:, :1] if channels == 1 else stereo
    return np.asarray(samples, dtype=np.float32), int(sample_rate), int(channels)


# The MP4 audio codecs AudioLoader reads, by the prefix of their sample entry: AAC and MP3
# ("mp4a.40.2", "mp4a.6B", ...), ALAC, AC-3 and E-AC-3.
AUDIOLOADER_MP4_CODECS = ("mp4a", "alac", "ac-3", "ec-3")


def _unread_mp4_codec(path: Path) -> str | None:
    """The codec of an MP4 file's audio track (mutagen's description: "FLAC", "Opus", ...)
    where it is not one AudioLoader reads; None for one it reads (a file that failed for
    another reason, a damaged one) or a file mutagen cannot read."""
    import mutagen.mp4

    try:
        info = mutagen.mp4.MP4(path).info
    except (mutagen.MutagenError, ValueError):
        return None
    if not info.codec or info.codec.lower().startswith(AUDIOLOADER_MP4_CODECS):
        return None
    return {"OPUS": "Opus"}.get(info.codec_description, info.codec_description or info.codec)


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


def _check_length(path: Path, decoded: float) -> None:
    """Raise AudioDecodeError for a compressed file that decodes shorter than its header says
    (an MP3's Xing or VBRI frame count, FLAC's STREAMINFO, an MP4's duration): a download or
    copy cut short, which decoders read without complaint. mutagen reads the headers (the
    library the tags are written with); a format whose header states no length is left to
    the decoder, as is a header mutagen cannot read (the audio itself decoded)."""
    import mutagen

    try:
        found = mutagen.File(path)
    except (mutagen.MutagenError, ValueError):
        return
    declared = float(getattr(getattr(found, "info", None), "length", 0.0) or 0.0)
    missing = declared - decoded
    if missing > SHORT_BY_SECONDS and missing > SHORT_BY_FRACTION * declared:
        raise AudioDecodeError(
            f"{path}: the file ends early: its header says {declared:.1f} s, and {decoded:.1f} "
            "s decode (a download or copy cut short?); expected the whole file"
        )


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
