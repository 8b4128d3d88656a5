"""The `[metrics]` table of a dataset's `tunesmith.toml`: which embedding models measure it.

    [metrics]
    clap = "larger_clap_music"       # audio: a transformers ClapModel folder
    clip = "clip-vit-large-patch14"  # pictures: a transformers CLIPModel folder
    dino = "dinov2-small"            # pictures, optional: a transformers Dinov2Model folder
    enabled = true                   # false: measure nothing for this dataset

A name or relative path is under the models root (as a base model is); an absolute path is
taken as it is. A key
left out takes the family's default below; a folder that is not there skips the measures with
one line saying what to put where, never fails the build. Only the key the dataset's media
uses is read: `clap` for audio, `clip` and `dino` for pictures.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path

FILE = "tunesmith.toml"
# What a family measures with when the dataset names nothing, by the media it trains on: the
# CLAP checkpoint trained on music (the general `laion/clap-htsat-unfused` works too), and the
# CLIP of SDXL's own first text encoder. No DINOv2 unless named: it adds a model to load for
# a second opinion on the same question.
DEFAULTS = {
    "audio": {"clap": "larger_clap_music"},
    "image": {"clip": "clip-vit-large-patch14"},
}
KINDS = {"clap": "audio", "clip": "image", "dino": "image"}  # the media each model measures
# Where each comes from, for the line that says what to put where.
PUBLISHED = {
    "clap": "laion/larger_clap_music or laion/clap-htsat-unfused",
    "clip": "openai/clip-vit-large-patch14",
    "dino": "facebook/dinov2-small",
}


class MetricsError(ValueError):
    """A `[metrics]` table that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class MetricsSettings:
    clap: str | None = None
    clip: str | None = None
    dino: str | None = None
    enabled: bool = True

    def for_media(self, media: str) -> dict[str, str]:
        """model kind → the folder name or path it is read from, for one media."""
        if not self.enabled:
            return {}
        chosen = {**DEFAULTS.get(media, {})}
        for kind, value in ((f.name, getattr(self, f.name)) for f in fields(self)):
            if KINDS.get(kind) == media and value:
                chosen[kind] = value
        return chosen


def read_metrics(folder: Path) -> MetricsSettings:
    """The `[metrics]` table of `folder/tunesmith.toml`; the defaults where there is none."""
    path = folder / FILE
    if not path.is_file():
        return MetricsSettings()
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise MetricsError(f"{path}: not valid TOML ({exc})") from exc
    table = document.get("metrics", {})
    where = f"{path} [metrics]"
    if not isinstance(table, dict):
        raise MetricsError(f"{where}: must be a table, got {table!r}")
    allowed = {f.name for f in fields(MetricsSettings)}
    problems = [f"unknown key {k!r}" for k in sorted(set(table) - allowed)]
    for key, value in table.items():
        if key == "enabled" and not isinstance(value, bool):
            problems.append(f"enabled must be true or false, got {value!r}")
        elif key in KINDS and not (isinstance(value, str) and value):
            problems.append(f"{key} must be a model folder's name or path, got {value!r}")
    if problems:
        raise MetricsError(f"{where}: " + "; ".join(problems) + f"; allowed: {sorted(allowed)}")
    return replace(MetricsSettings(), **table)


def model_folder(value: str, models_root: Path) -> Path:
    """A `[metrics]` value as a folder: absolute as given, else under the models root (as a
    run's base model)."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else models_root / path
