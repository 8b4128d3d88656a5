import json

from tunesmith.train.history import RECORD, History


def _write(run_dir, steps):
    history = History(run_dir, 0)
    for step in range(1, steps + 1):
        history.step(step, 0.5, 1.0 / step)
        if step % 5 == 0:
            history.event("validation", step=step, loss=0.1)
    history.close()


def test_a_resume_cuts_both_records_back_to_the_saved_step(tmp_path):
    _write(tmp_path, 12)
    with open(tmp_path / "events.jsonl", "a") as f:
        f.write('{"event": "step", "step": 13, "lo')  # a line a killed process left half-written
    history = History(tmp_path, 10)
    history.step(11, 0.25, 0.5)
    history.close()
    data = (tmp_path / "loss_by_timestep.bin").read_bytes()
    steps = [RECORD.unpack_from(data, i)[0] for i in range(0, len(data), RECORD.size)]
    assert steps == list(range(1, 12))
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["event"] == "step"] == list(range(1, 12))
    assert [e["step"] for e in events if e["event"] == "validation"] == [5, 10]
    assert events[-1]["step"] == 11 and events[-1]["loss"] == 0.5


def test_a_fresh_start_drops_a_dead_runs_records(tmp_path):
    _write(tmp_path, 7)  # killed before its first checkpoint: the next run starts over
    History(tmp_path, 0).close()
    assert (tmp_path / "loss_by_timestep.bin").read_bytes() == b""
    assert (tmp_path / "events.jsonl").read_text() == ""
