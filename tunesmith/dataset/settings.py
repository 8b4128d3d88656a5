"""The dataset-level label settings: the `[dataset]` table of a dataset's `tunesmith.toml`.

    [dataset]
    default_language = "en"   # the language of every item's lyrics unless a sidecar says
    custom_tag = "lpz"        # Side-Step's trigger word for every item without its own
    tag_position = "prepend"  # where Side-Step puts it: prepend, append or replace
    genre_ratio = 30          # Side-Step: percent of items prompted with their genre

A dataset's language is declared, never detected (HOT-Step's rule: detectors guess wrong on
short or mixed lyrics, and a wrong language is trained in). `custom_tag`, `tag_position`
and `genre_ratio` are Side-Step's dataset metadata; set here they win over the `metadata`
of the folder's `dataset.json`, as Side-Step's own command-line values win over its file.
An unknown key, a language that is not a code like "en" or "pt-br", or a value of the wrong
type is an error naming the file and the key.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

FILE = "tunesmith.toml"
TAG_POSITIONS = ("prepend", "append", "replace")  # Side-Step's choices
# ISO 639 language code (two or three letters), optionally with a region or script subtag.
_LANGUAGE = re.compile(r"^[a-z]{2,3}(-[a-z0-9]{2,8})?$")
UNKNOWN_LANGUAGE = "unknown"  # ACE-Step's and Side-Step's word for an undeclared language


class SettingsError(ValueError):
    """A `[dataset]` table that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class DatasetSettings:
    """What `[dataset]` says; None where it says nothing."""

    default_language: str | None = None
    custom_tag: str | None = None
    tag_position: str | None = None
    genre_ratio: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_settings(folder: Path, data: bytes | None = None) -> DatasetSettings:
    """The `[dataset]` table of `folder/tunesmith.toml` (or of `data`, its bytes as read)."""
    path = folder / FILE
    if data is None:
        if not path.is_file():
            return DatasetSettings()
        data = path.read_bytes()
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{path}: not valid TOML ({exc})") from exc
    table = document.get("dataset", {})
    if not isinstance(table, dict):
        raise SettingsError(f"{path}: [dataset] must be a table, got {table!r}")
    return parse_settings(table, f"{path} [dataset]")


def parse_settings(table: dict[str, Any], where: str) -> DatasetSettings:
    allowed = {f.name for f in fields(DatasetSettings)}
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise SettingsError(
            f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
        )
    problems = []
    language = table.get("default_language")
    if language is not None and not (isinstance(language, str) and _LANGUAGE.match(language)):
        problems.append(f'default_language must be a language code like "en", got {language!r}')
    tag = table.get("custom_tag")
    if tag is not None and not isinstance(tag, str):
        problems.append(f"custom_tag must be a string, got {tag!r}")
    position = table.get("tag_position")
    if position is not None and position not in TAG_POSITIONS:
        problems.append(f"tag_position must be one of {', '.join(TAG_POSITIONS)}, got {position!r}")
    ratio = table.get("genre_ratio")
    if ratio is not None and (
        isinstance(ratio, bool) or not isinstance(ratio, int) or not 0 <= ratio <= 100
    ):
        problems.append(f"genre_ratio must be a whole percent from 0 to 100, got {ratio!r}")
    if problems:
        raise SettingsError(f"{where}: " + "; ".join(problems))
    return DatasetSettings(**table)
