"""The `[dataset]` table of tunesmith.toml, and [[runs]] living beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunesmith.dataset.settings import DatasetSettings, SettingsError, read_settings
from tunesmith.train.config import load_runs


def write(folder: Path, text: str) -> Path:
    (folder / "tunesmith.toml").write_text(text)
    return folder


def test_no_file_or_no_table_says_nothing(tmp_path: Path) -> None:
    assert read_settings(tmp_path) == DatasetSettings()
    write(tmp_path, '[[runs]]\nname = "a"\nfamily = "sdxl"\n')
    assert read_settings(tmp_path) == DatasetSettings()


def test_every_key_is_read(tmp_path: Path) -> None:
    write(
        tmp_path,
        '[dataset]\ndefault_language = "pt-br"\ncustom_tag = "lpz"\n'
        'tag_position = "append"\ngenre_ratio = 30\n',
    )
    assert read_settings(tmp_path) == DatasetSettings("pt-br", "lpz", "append", 30)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('language = "en"', "unknown key(s) language; allowed: custom_tag, default_language"),
        ('default_language = "English"', 'default_language must be a language code like "en"'),
        ('tag_position = "middle"', "tag_position must be one of prepend, append, replace"),
        ("genre_ratio = 130", "genre_ratio must be a whole percent from 0 to 100"),
        ("custom_tag = 3", "custom_tag must be a string"),
    ],
)
def test_a_bad_table_is_an_error_naming_file_and_key(tmp_path: Path, body: str, message) -> None:
    write(tmp_path, f"[dataset]\n{body}\n")
    with pytest.raises(SettingsError, match="tunesmith.toml") as caught:
        read_settings(tmp_path)
    assert message in str(caught.value)


def test_a_dataset_table_alone_gives_the_default_runs(tmp_path: Path) -> None:
    write(tmp_path, '[dataset]\ndefault_language = "en"\n')
    (run,) = load_runs(tmp_path, "audio")
    (no_file,) = load_runs(tmp_path / "missing", "audio")
    assert run == no_file


def test_runs_beside_a_dataset_table_are_read(tmp_path: Path) -> None:
    write(tmp_path, '[dataset]\ncustom_tag = "x"\n\n[[runs]]\nname = "a"\nfamily = "sdxl"\n')
    (run,) = load_runs(tmp_path, "image")
    assert (run.name, run.family) == ("a", "sdxl")
