"""The suite's order of files (tests/conftest.py's SLOWEST_FIRST) names files that exist."""

from pathlib import Path

from tests.conftest import SLOWEST_FIRST

ROOT = Path(__file__).resolve().parent.parent


def test_every_file_handed_out_first_exists() -> None:
    assert len(set(SLOWEST_FIRST)) == len(SLOWEST_FIRST)
    assert [name for name in SLOWEST_FIRST if not (ROOT / name).is_file()] == []
