"""`tunesmith examples` (what `make demo` runs first) leaves an unchanged example untouched."""

import time
from pathlib import Path

import pytest

from tunesmith.examples import make_examples


@pytest.mark.slow
def test_writing_the_examples_twice_touches_no_file(tmp_path: Path):
    make_examples(tmp_path)
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    time.sleep(0.05)
    make_examples(tmp_path)
    after = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before and len(before) > 20


@pytest.mark.slow
def test_a_second_examples_command_checks_and_writes_nothing_but_a_change_is_restored(
    tmp_path: Path,
):
    """`tunesmith examples` remembers the state it left (the code that writes the examples, the
    libraries' versions, every file's bytes): run again on that state it renders no audio and
    imports no model library; a deleted or edited file is written again."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = dict(
        os.environ,
        TUNESMITH_DATASETS=str(tmp_path / "datasets"),
        TUNESMITH_MODELS=str(tmp_path / "models"),
        TUNESMITH_STORE=str(tmp_path / "store"),
        TUNESMITH_OUT=str(tmp_path / "out"),
        PYTHONPATH=str(root),
    )
    probe = (
        "import sys, runpy; sys.argv = ['tunesmith', 'examples']\n"
        "try:\n    runpy.run_module('pipelines.cli', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('imported', sorted(m for m in ('torch', 'diffusers', 'transformers') "
        "if m in sys.modules))\n"
    )

    def examples() -> str:
        done = subprocess.run(
            [sys.executable, "-c", probe],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    first = examples()
    assert "imported ['diffusers', 'torch', 'transformers']" in first
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file() and "store" not in p.parts)
    state = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in files}
    second = examples()
    assert "imported []" in second and "example loops:" in second
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in files} == state

    loop = next(p for p in files if p.suffix == ".wav")
    loop.unlink()
    toml = next(p for p in files if p.name == "tunesmith.toml")
    toml.write_text("# edited\n")
    weights = next(p for p in files if p.suffix == ".safetensors" and "tiny-sdxl" in str(p))
    weights.unlink()
    assert "imported ['diffusers', 'torch', 'transformers']" in examples()
    for path in (loop, toml, weights):
        assert path.read_bytes() == state[path][1], path
