"""A run's step-by-step record: `events.jsonl` and underfit's `loss_by_timestep.bin`.

Opening the record for a run that starts at step S (0 for a fresh start, the saved state's
step on a resume) first cuts both files back to step S, so steps replayed after a kill are
written once, never twice, and a restart from scratch does not keep a dead run's steps. The
binary record is flushed every 10 steps (underfit's cadence) and at every checkpoint, so a
kill loses at most the last few records, which the resumed run writes again.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any

from tunesmith.store.atomic import atomic_write_text

RECORD = struct.Struct("<Iff")  # underfit's record: step, mean t of the batch, loss
FLUSH_EVERY = 10  # underfit flushes loss_by_timestep.bin every 10 steps


class History:
    def __init__(self, run_dir: Path, step: int) -> None:
        self.events_path = run_dir / "events.jsonl"
        self.records_path = run_dir / "loss_by_timestep.bin"
        _cut_events(self.events_path, step)
        _cut_records(self.records_path, step)
        self.events = open(self.events_path, "a", encoding="utf-8")
        self.records = open(self.records_path, "ab")

    def step(self, step: int, t_mean: float, loss: float, **fields: Any) -> None:
        self.records.write(RECORD.pack(step, t_mean, loss))
        if step % FLUSH_EVERY == 0:
            self.records.flush()
        self.event("step", step=step, loss=loss, t=t_mean, **fields)

    def event(self, kind: str, **fields: Any) -> None:
        record = {"event": kind, "time": time.time(), **fields}
        self.events.write(json.dumps(record, allow_nan=True) + "\n")
        self.events.flush()

    def flush(self) -> None:
        self.records.flush()
        self.events.flush()

    def close(self) -> None:
        self.records.close()
        self.events.close()


def _cut_events(path: Path, step: int) -> None:
    if not path.exists():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line a killed process left half-written
        if event.get("step", 0) <= step:
            kept.append(line + "\n")
    text = "".join(kept)
    if text != path.read_text(encoding="utf-8"):
        atomic_write_text(path, text)


def _cut_records(path: Path, step: int) -> None:
    if not path.exists():
        return
    data = path.read_bytes()
    whole = len(data) - len(data) % RECORD.size
    keep = 0
    for offset in range(0, whole, RECORD.size):
        if RECORD.unpack_from(data, offset)[0] > step:
            break
        keep = offset + RECORD.size
    if keep != len(data):
        with open(path, "r+b") as f:
            f.truncate(keep)
