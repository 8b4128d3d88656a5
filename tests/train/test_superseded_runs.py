"""Run folders of earlier settings: which the adapters stage lists, and what `gc --runs` removes
(only a listed folder that is still a superseded run folder of its dataset)."""

from pathlib import Path

from tunesmith.report import read_report, update_report
from tunesmith.train.stage import remove_superseded, superseded


def folder(path: Path, size: int = 10) -> Path:
    (path / "state").mkdir(parents=True)
    (path / "state" / "weights.safetensors").write_bytes(b"x" * size)
    return path


def test_only_a_configured_runs_other_folders_are_superseded_and_removed(tmp_path):
    out = tmp_path / "out" / "loops"
    adapters = out / "adapters"
    now = folder(adapters / "loops-dora-1e48e82ed0")
    before = folder(adapters / "loops-dora-0123456789", 25)
    other = folder(adapters / "loops-dora-2-aaaaaaaaaa")  # the run "loops-dora-2", not configured
    gone = folder(adapters / "old-run-bbbbbbbbbb")  # a run no longer in the config
    folder(adapters / ".tmp-loops-dora-cccccccccc")  # a writer's temporary folder
    folder(adapters / "notes")
    current = {"loops-dora": now}
    assert superseded(adapters, current) == [before]
    assert superseded(tmp_path / "nothing", current) == []

    outside = folder(tmp_path / "elsewhere" / "loops-dora-dddddddddd")
    update_report(
        out,
        lambda r: r.setdefault("stages", {}).update(
            {
                "adapters": {
                    "runs": [{"run": "loops-dora", "run_dir": str(now)}],
                    "superseded": [
                        {"path": str(p), "bytes": 0} for p in (before, now, other, outside)
                    ],
                }
            }
        ),
    )
    assert remove_superseded(tmp_path / "out", dry_run=True) == [(before, 25)]
    assert before.is_dir() and "superseded" in read_report(out)["stages"]["adapters"]
    assert remove_superseded(tmp_path / "out") == [(before, 25)]
    assert not before.exists()
    assert all(p.is_dir() for p in (now, other, gone, outside))
    assert "superseded" not in read_report(out)["stages"]["adapters"]
    assert remove_superseded(tmp_path / "out") == []
