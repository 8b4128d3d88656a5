"""What a file really holds, read from its first bytes, against what its name says.

Only the formats tunesmith reads are recognised. A file whose content does not match its
extension is refused with a message that says both, since a mislabelled file otherwise
fails deep inside a decoder with an error that names neither.
"""

from __future__ import annotations

from pathlib import Path

# extension → format name
BY_EXTENSION = {
    ".wav": "WAV",
    ".flac": "FLAC",
    ".mp3": "MP3",
    ".ogg": "Ogg",
    ".opus": "Ogg",
    ".m4a": "MP4",
    ".aiff": "AIFF",
    ".aif": "AIFF",
    ".png": "PNG",
    ".jpg": "JPEG",
    ".jpeg": "JPEG",
    ".webp": "WebP",
    ".bmp": "BMP",
    ".gif": "GIF",
    ".tif": "TIFF",
    ".tiff": "TIFF",
    ".avif": "AVIF",
}
AUDIO_FORMATS = frozenset({"WAV", "FLAC", "MP3", "Ogg", "MP4", "AIFF"})


class MediaError(ValueError):
    """A media file that cannot be used; the message names the file and the problem."""


class ChangedDuringBuild(MediaError):
    """A file whose bytes are not the ones the manifest hashed: it was edited mid-build."""


def ensure_unchanged(path: Path, sha256: str, label: str) -> None:
    """Refuse what was read from `path` unless the file still has the manifest's hash.

    Called after reading, so a result is never stored under the key of bytes it was not made
    from; the next build's manifest sees the new bytes and the item is rebuilt then.
    """
    from tunesmith.store import sha256_file

    if sha256_file(path) != sha256:
        raise ChangedDuringBuild(
            f"{label}: changed during the build (its bytes are not the ones the manifest "
            "hashed); skipped now, it is rebuilt on the next build"
        )


def sniff(head: bytes) -> str | None:
    """The format of a file from its first 16 bytes, or None if not one we know."""
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "WAV"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WebP"
    if head[:4] == b"FORM" and head[8:12] in (b"AIFF", b"AIFC"):
        return "AIFF"
    if head[:4] == b"fLaC":
        return "FLAC"
    if head[:4] == b"OggS":
        return "Ogg"
    if head[4:8] == b"ftyp":  # ISO media: AVIF pictures and MP4 audio share the box
        return "AVIF" if head[8:12] in (b"avif", b"avis") else "MP4"
    # MP3: an ID3v2 tag, or a bare MPEG audio frame sync (11 set bits).
    if head[:3] == b"ID3" or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return "MP3"
    if head[:8] == b"\x89PNG\r\n\x1a\n":
        return "PNG"
    if head[:3] == b"\xff\xd8\xff":
        return "JPEG"
    if head[:2] == b"BM":
        return "BMP"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "GIF"
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "TIFF"
    return None


def check_format(path: Path, label: str | None = None) -> str:
    """The format of `path`, after checking its content is what its extension says.

    `label` is how the file is named in messages (its path inside the dataset).
    """
    name = label or str(path)
    expected = BY_EXTENSION.get(path.suffix.lower())
    if expected is None:
        raise MediaError(f"{name}: unsupported extension {path.suffix!r}")
    with open(path, "rb") as f:
        head = f.read(16)
    if not head:
        raise MediaError(f"{name}: empty file (0 bytes), expected {expected} data")
    found = sniff(head)
    if found != expected:
        what = f"{found} data" if found else f"unrecognised bytes {head[:8]!r}"
        raise MediaError(f"{name}: the extension says {expected}, but the content is {what}")
    return found
