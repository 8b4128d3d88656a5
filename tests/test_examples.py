"""`tunesmith examples` (what `make demo` runs first) leaves an unchanged example untouched."""

import time
from pathlib import Path

from tunesmith.examples import make_examples


def test_writing_the_examples_twice_touches_no_file(tmp_path: Path):
    make_examples(tmp_path)
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    time.sleep(0.05)
    make_examples(tmp_path)
    after = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before and len(before) > 20
