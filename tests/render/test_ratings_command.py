"""`tunesmith ratings DATASET FILE`: an exported file is copied into its run's folder once;
a file that cannot be counted is refused in one line naming it, exit 1, nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.cli import main
from tests.render.test_ratings import export
from tunesmith.render.ratings import FOLDER, read_choices, stored_name, tally

HISTORY = [{"step": s, "loss": 1.0 - s / 400} for s in (0, 50, 100, 150, 200)]


@pytest.fixture
def roots(tmp_path, monkeypatch) -> dict[str, Path]:
    """Roots with a dataset `loops` whose last build trained run `my-style` (its report's
    adapters section, as the adapters stage writes it)."""
    found = {name: tmp_path / name for name in ("datasets", "out", "store", "models")}
    for name, path in found.items():
        path.mkdir()
        monkeypatch.setenv(f"TUNESMITH_{name.upper()}", str(path))
    (found["datasets"] / "loops").mkdir()
    run_dir = found["out"] / "loops" / "adapters" / "my-style-0123456789"
    run_dir.mkdir(parents=True)
    report = {"stages": {"adapters": {"runs": [
        {"run": "my-style", "run_dir": str(run_dir), "history": HISTORY, "best_step": 200}
    ]}}}  # fmt: skip
    (found["out"] / "loops" / "report.json").write_text(json.dumps(report))
    found["run_dir"] = run_dir
    return found


def exported(tmp_path: Path, **head) -> Path:
    path = tmp_path / "Downloads" / "audition-my-style.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(export({"demo0": "A", "demo1": "B", "demo2": None}, **head)))
    return path


def test_a_file_is_handed_back_once_and_counted_once(roots, tmp_path, capsys):
    path = exported(tmp_path)
    assert main(["ratings", "loops", str(path)]) == 0
    target = roots["run_dir"] / FOLDER / stored_name(read_choices(path))
    assert target.read_bytes() == path.read_bytes()
    said = capsys.readouterr().out
    assert said == (
        f"{path}: 2 choice(s) on run 'my-style' at step 200 handed back as {target}; the next "
        "build counts them (`tunesmith run loops`)\n"
    )
    first = tally(roots["run_dir"], "my-style", "loops", {s["step"] for s in HISTORY})
    mtime = target.stat().st_mtime_ns

    assert main(["ratings", "loops", str(path)]) == 0
    assert "already handed back" in capsys.readouterr().out
    assert sorted(p.name for p in (roots["run_dir"] / FOLDER).iterdir()) == [target.name]
    assert target.stat().st_mtime_ns == mtime
    again = tally(roots["run_dir"], "my-style", "loops", {s["step"] for s in HISTORY})
    assert again.checkpoints == first.checkpoints
    assert [(c["adapter"], c["base"], c["choices"]) for c in again.checkpoints] == [(1, 1, 2)]


@pytest.mark.parametrize(
    "head, said",
    [
        (
            {"run": "other"},
            "choices on run 'other', which dataset 'loops' has no trained run of "
            "(its runs: my-style)",
        ),
        (
            {"step": 175},
            "choices on step 175, which run 'my-style' has no checkpoint at "
            "(validated at steps 0, 50, 100, 150, 200)",
        ),
        ({"dataset": "faces"}, "choices on dataset 'faces', not 'loops'"),
        ({"run_folder": "my-style-ffffffffff"}, "run 'my-style' was trained again since"),
        ({"format": "v2"}, "format is 'v2'; expected the JSON an audition page's Export"),
    ],  # fmt: skip
    ids=["run", "step", "dataset", "folder", "format"],
)
def test_a_file_that_cannot_be_counted_is_refused_and_nothing_written(roots, tmp_path, head, said):
    path = exported(tmp_path, **head)
    with pytest.raises(SystemExit) as refused:
        main(["ratings", "loops", str(path)])
    message = str(refused.value.code)
    assert message.startswith(f"{path}: ") and said in message and "\n" not in message
    assert not (roots["run_dir"] / FOLDER).exists()


def test_a_malformed_file_exits_1_with_one_line_and_no_traceback(roots, tmp_path):
    path = tmp_path / "audition-my-style.json"
    path.write_text('{"format": "tunesmith-audition-choices/1", "run": "my-style", "prompts": [')
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "ratings", "loops", str(path)],
        env=os.environ.copy(),  # the roots the fixture set
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"{path}: not JSON (") and "Traceback" not in done.stderr
    assert not (roots["run_dir"] / FOLDER).exists()


def test_an_unknown_dataset_is_one_line(roots, tmp_path):
    with pytest.raises(SystemExit, match="no dataset 'nothing'"):
        main(["ratings", "nothing", str(exported(tmp_path))])
