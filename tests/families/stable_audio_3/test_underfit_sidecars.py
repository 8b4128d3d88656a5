"""The `encoded` sidecars, field by field against underfit's pre-encoder.

`underfit_sidecar` is what underfit's `dataset_processing/pre_encode.py` writes for a file,
rewritten from its code: `path` (the source, absolute), `relpath` (the .npy under the latent
folder), `src_relpath`, `seconds_total` = round(actual_samples / 44100, 3), `seconds_start` 0,
`audio_samples` = actual_samples (the length after torchaudio's resampler, ceil(44100·N/rate),
at most 600 s aligned down to 4096), then the tags of `extract_tags` (a `<stem>.json` sidecar:
every non-empty key as text; else a `<stem>.txt`: {"prompt": its text}; else the embedded
title/artist/album/genre/label/date/composer/bpm, read here with mutagen where underfit uses
audio_metadata). `latent_shape` and `padding_mask` are left out of the comparison: underfit
pads every file to its 600 s cap, tunesmith stops at the last whole frame (checked on its own).

`tag_prompt` and `path_prompt` are underfit's `dataset_processing/prompt_templates.py` tag
template (shuffle off) and path template (hideExt on).
"""

from __future__ import annotations

import json
import math
from pathlib import Path, PurePosixPath

import mutagen.flac
import numpy as np
import pytest
import soundfile as sf

from tests.conftest import write_clip
from tunesmith.backends.placement import Placement
from tunesmith.dataset.labels import build_labels
from tunesmith.dataset.manifest import build_manifest
from tunesmith.families.stable_audio_3 import FAMILY
from tunesmith.families.stable_audio_3.data import load_items
from tunesmith.families.stable_audio_3.encoded import audio_samples
from tunesmith.families.stable_audio_3.prompts import full_prompt
from tunesmith.family import EncodeRequest
from tunesmith.store import Store

UNDERFIT_FIELDS = [
    "path",
    "relpath",
    "src_relpath",
    "seconds_total",
    "seconds_start",
    "audio_samples",
    "latent_shape",
    "padding_mask",
]
TAG_KEYS = ["title", "artist", "album", "genre", "label", "date", "composer", "bpm"]
DISPLAY = {
    "title": "Title",
    "artist": "Artist",
    "album": "Album",
    "genre": "Genre",
    "label": "Label",
    "date": "Year",
    "composer": "Composer",
    "bpm": "BPM",
    "prompt": "Prompt",
}
MAX_SAMPLES = int(600 * 44100) // 4096 * 4096


def underfit_sidecar(input_dir: Path, rel: str) -> dict:
    source = input_dir / rel
    info = sf.info(source)
    actual = min(math.ceil(44100 * info.frames / info.samplerate), MAX_SAMPLES)
    meta = {
        "path": str(source),
        "relpath": str(PurePosixPath(rel).with_suffix(".npy")),
        "src_relpath": rel,
        "seconds_total": round(actual / 44100, 3),
        "seconds_start": 0,
        "audio_samples": actual,
    }
    return {**meta, **underfit_tags(source)}


def underfit_tags(source: Path) -> dict[str, str]:
    sidecar, caption = source.with_suffix(".json"), source.with_suffix(".txt")
    if sidecar.exists():
        loaded = json.loads(sidecar.read_text())
        return {k: str(v) for k, v in loaded.items() if v and isinstance(v, str | int | float)}
    if caption.exists() and caption.read_text().strip():
        return {"prompt": caption.read_text().strip()}
    embedded = mutagen.File(source) or {}
    return {k: str(embedded[k][0]) for k in TAG_KEYS if k in embedded and embedded[k]}


def tag_prompt(sidecar: dict) -> str:
    parts = [f"{DISPLAY[k]}: {str(sidecar[k]).strip()}" for k in DISPLAY if sidecar.get(k)]
    return ", ".join(parts)


def path_prompt(sidecar: dict) -> str:
    relpath = sidecar.get("relpath", "")
    return relpath.rsplit(".", 1)[0] if relpath else ""


@pytest.fixture(scope="module")
def encoded(tiny_sa3, tmp_path_factory):
    """Three items: a caption .txt (in a sub-folder), an underfit .json of tags, a 48 kHz FLAC
    with embedded tags only (its caption composed from them)."""
    root = tmp_path_factory.mktemp("sidecars")
    folder = root / "songs"
    write_clip(folder / "sub" / "a.wav", seconds=2.0)
    (folder / "sub" / "a.txt").write_text("a bright loop")
    write_clip(folder / "b.wav", seconds=1.5, bpm=90)
    (folder / "b.json").write_text(json.dumps({"title": "Bee", "genre": "house", "bpm": 120}))
    t = np.arange(62401) / 48000  # 1.3 s and one sample: 44.1 kHz length 57330.9 → 57331
    tone = (0.3 * np.sin(2 * np.pi * 330 * t)).astype(np.float32)
    sf.write(folder / "c.flac", np.stack([tone, tone], 1), 48000, format="FLAC")
    flac = mutagen.flac.FLAC(folder / "c.flac")
    flac.update({"title": "Sea", "genre": "ambient", "bpm": "80"})
    flac.save()
    store = Store(root / "store")
    manifest, _ = build_manifest(folder, root / "hashes.json")
    labels = build_labels(folder, manifest, store).frame
    cpu = Placement("torch", "cpu", "float32", "test")
    request = EncodeRequest(
        folder, labels, [], [tiny_sa3], root / "out", store, cpu, root / "fp.json"
    )
    built = FAMILY.encode(request)
    assert len(built.frame) == 3, built.result
    return folder, built.frame.set_index("path")


@pytest.mark.parametrize("rel", ["sub/a.wav", "b.wav", "c.flac"])
def test_each_field_is_underfits(encoded, rel):
    folder, frame = encoded
    row = frame.loc[rel]
    ours = json.loads(Path(row["sidecar"]).read_text())
    theirs = underfit_sidecar(folder, rel)
    assert list(ours)[: len(UNDERFIT_FIELDS)] == UNDERFIT_FIELDS  # underfit's order
    compared = {k: v for k, v in ours.items() if k not in ("latent_shape", "padding_mask")}
    assert compared == theirs
    # The latents stop at the last whole frame; every frame is audio.
    latents = np.load(row["latents"])
    assert ours["latent_shape"] == list(latents.shape)
    assert latents.shape[1] == ours["audio_samples"] // 4096
    assert ours["padding_mask"] == [1] * latents.shape[1]
    assert Path(row["sidecar"]).with_suffix(".npy") == Path(row["latents"])


def test_audio_samples_is_the_source_length_not_the_aligned_one(encoded):
    _, frame = encoded
    sidecar = json.loads(Path(frame.loc["c.flac", "sidecar"]).read_text())
    assert sidecar["audio_samples"] == 57331 and sidecar["seconds_total"] == 1.3
    assert audio_samples(57331, 4096) == 57331
    assert audio_samples(601 * 44100, 4096) == MAX_SAMPLES == 26456064  # underfit's cap


def test_underfits_templates_make_tunesmiths_prompts(encoded):
    """underfit's tag template on the sidecar is the prompt tunesmith validates with (all its
    pieces in order), each tag once; its path template has the file to work with."""
    _, frame = encoded
    expected = {
        "sub/a.wav": ("Prompt: a bright loop", "sub/a"),
        "b.wav": ("Title: Bee, Genre: house, BPM: 120", "b"),
        "c.flac": ("Title: Sea, Genre: ambient, BPM: 80", "c"),  # no Prompt: the same tags again
    }
    for rel, (prompt, path) in expected.items():
        row = frame.loc[rel]
        sidecar = json.loads(Path(row["sidecar"]).read_text())
        assert tag_prompt(sidecar) == prompt == full_prompt(json.loads(row["pieces"]))
        assert path_prompt(sidecar) == path
    assert "prompt" not in json.loads(Path(frame.loc["c.flac", "sidecar"]).read_text())


def test_training_reads_the_table_and_the_sidecars(encoded):
    _, frame = encoded
    items = {item.path: item for item in load_items(frame.reset_index())}
    assert items["c.flac"].pieces == ("Title: Sea", "Genre: ambient", "BPM: 80")
    assert items["sub/a.wav"].pieces == ("Prompt: a bright loop",)
    assert items["c.flac"].seconds_total == 1.3 and items["c.flac"].padding_mask.all()
