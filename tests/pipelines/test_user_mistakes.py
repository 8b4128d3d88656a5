"""A person's mistakes meet a build: what they are told, and what is left alone.

A build's console summary has a line per broken sidecar, and a caption saved as UTF-16 by
Notepad is read; an error nothing foresaw ends the training process in one line. (A missing
base model refused before a build: tests/faults.)
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pandas as pd

from pipelines.build import summary
from pipelines.definitions import ASSETS, resources
from tests.conftest import write_clip
from tunesmith.report import warning_lines

RUN = """\
[[runs]]
name = "mine"
family = "stable-audio-3"
base_model = "{base}"
"""


def materialize(instance, storage, stages: list[str]) -> dg.ExecuteInProcessResult:
    if not instance.has_dynamic_partition("datasets", "songs"):
        instance.add_dynamic_partitions("datasets", ["songs"])
    return dg.materialize(
        ASSETS,
        instance=instance,
        resources=resources(storage),
        partition_key="songs",
        selection=stages,
        raise_on_error=False,
    )


def test_the_console_has_a_line_per_broken_sidecar_and_reads_utf16(storage, instance, tiny_sa3):
    folder = Path(storage.datasets_root) / "songs"
    for i in range(4):
        write_clip(folder / f"clip{i}.wav", seconds=1.0)
    (folder / "clip0.txt").write_bytes(b"caf\xe9 loop")  # Latin-1, not UTF-8
    (folder / "clip1.json").write_text('{"prompt": "a loop",')  # cut short
    (folder / "clip2.json").write_text('{"prompt": "a loop", "bpm": "fast"}')
    (folder / "clip3.txt").write_bytes("a café loop".encode("utf-16"))  # Notepad's "Unicode"
    (folder / "tunesmith.toml").write_text(RUN.format(base=tiny_sa3))
    result = materialize(instance, storage, ["manifest", "labels"])
    assert result.success
    warnings = [line for line in summary(result) if line.strip().startswith("warning:")]
    for name in ("clip0.txt", "clip1.json", "clip2.json"):
        assert len([w for w in warnings if name in w]) == 1, warnings
    assert len(warnings) == 3, warnings
    labels = pd.read_parquet(Path(storage.out_root) / "songs" / "labels.parquet")
    assert labels.set_index("path").loc["clip3.wav", "caption"] == "a café loop"


def test_many_warnings_of_one_kind_are_one_line_naming_the_first_files():
    warnings = [
        f"c{i}.txt: not UTF-8 (byte 0xe9 at offset {i}); save it as UTF-8" for i in range(12)
    ] + ["x.json: bpm 'fast' is not a number of beats a minute; taken from the next source"]
    lines = warning_lines(warnings)
    assert lines == [
        "not UTF-8 (12 files): c0.txt, c1.txt, c2.txt, … (see report.json)",
        warnings[-1],
    ]


def test_an_error_nothing_foresaw_ends_the_training_process_in_one_line(tmp_path):
    from pipelines.train_child import _defect

    try:
        {}["missing"]
    except KeyError as exc:
        line = _defect(exc, tmp_path / "run" / "error.log")
    assert "\n" not in line and line.startswith("training failed on an unexpected error (KeyError")
    assert f"the traceback is in {tmp_path / 'run' / 'error.log'}" in line
    assert "Traceback" in (tmp_path / "run" / "error.log").read_text()


def test_an_xs_rank_above_a_layer_s_size_skips_the_run_with_that_reason(
    storage, instance, tiny_sa3
):
    folder = Path(storage.datasets_root) / "songs"
    for i in range(2):
        write_clip(folder / f"clip{i}.wav", seconds=1.0)
    run = RUN.format(base=tiny_sa3) + '[runs.adapter]\ntype = "lora-xs"\nrank = 512\n'
    (folder / "tunesmith.toml").write_text(run + "[runs.train]\nsteps = 2\n")
    result = materialize(instance, storage, ["manifest", "labels", "encoded", "adapters"])
    text = "\n".join(summary(result))
    assert "unexpected error" not in text, text
    assert "skipped run mine" in text and "got rank 512; lower the rank" in text, text
