"""Remembered checks: a key names the files as they are, and any change forgets the verdict."""

import json
import os
import time
from pathlib import Path

import pytest

from tunesmith.store import verdicts


def _old_file(path: Path, text: str) -> Path:
    path.write_text(text)
    past = time.time_ns() - 10_000_000_000
    os.utime(path, ns=(past, past))
    return path


def test_a_verdict_is_recalled_until_a_file_changes(tmp_path):
    record = tmp_path / "checks.json"
    (tmp_path / "run").mkdir()
    adapter = _old_file(tmp_path / "run" / "a.safetensors", "weights")
    twin = _old_file(tmp_path / "run" / "a_kohya.safetensors", "twin")
    key = verdicts.files_key("check a", verdicts.files_beside(adapter))
    assert key is not None and not verdicts.passed(record, key)
    verdicts.remember(record, key, {"tunesmith.base_model": "x"})
    assert verdicts.passed(record, key)
    assert verdicts.recalled(record, key) == {"tunesmith.base_model": "x"}
    assert verdicts.files_key("check a", verdicts.files_beside(adapter)) == key
    assert verdicts.files_key("another check", [adapter, twin]) != key

    _old_file(twin, "edited")  # same age, other size: the twin beside the adapter changed
    assert verdicts.files_key("check a", verdicts.files_beside(adapter)) != key
    key = verdicts.files_key("check a", verdicts.files_beside(adapter))
    _old_file(tmp_path / "run" / "b.safetensors", "a new neighbour")
    assert verdicts.files_key("check a", verdicts.files_beside(adapter)) != key


def test_files_written_just_now_or_missing_give_no_key(tmp_path):
    fresh = tmp_path / "fresh.safetensors"
    fresh.write_text("racily clean")
    assert verdicts.files_key("check", [fresh]) is None
    assert verdicts.files_key("check", [tmp_path / "missing"]) is None
    gone = verdicts.files_beside(tmp_path / "no such run" / "a.safetensors")
    assert verdicts.files_key("check", gone) is None
    verdicts.remember(tmp_path / "checks.json", None)
    assert not (tmp_path / "checks.json").exists()
    assert not verdicts.passed(tmp_path / "checks.json", None)


def test_a_damaged_or_older_record_only_costs_the_checks(tmp_path):
    record = tmp_path / "checks.json"
    record.write_text("{not json")
    assert not verdicts.passed(record, "k")
    verdicts.remember(record, "k")
    assert verdicts.passed(record, "k")
    record.write_text(json.dumps(["fingerprint"]))  # passes only, as the planner check kept them
    assert verdicts.passed(record, "fingerprint") and verdicts.recalled(record, "fingerprint")


def test_the_record_keeps_the_newest_keys(tmp_path, monkeypatch):
    monkeypatch.setattr(verdicts, "MAX_KEYS", 3)
    record = tmp_path / "checks.json"
    for key in "abcd":
        verdicts.remember(record, key)
    verdicts.remember(record, "b")  # remembered again: the newest
    assert [k for k, _ in json.loads(record.read_text())] == ["c", "d", "b"]


def test_a_checked_file_is_checked_once_and_a_failure_every_time(tmp_path):
    record, calls = tmp_path / "checks.json", []
    (tmp_path / "run").mkdir()
    adapter = _old_file(tmp_path / "run" / "a.safetensors", "weights")

    def check():
        calls.append(1)
        return {"lineage": "x"}

    for _ in range(2):
        assert verdicts.checked_files(record, "sdxl files", adapter, check) == {"lineage": "x"}
    assert len(calls) == 1

    def refuse():
        calls.append(1)
        raise ValueError(f"{adapter}: no lineage")

    for _ in range(2):
        with pytest.raises(ValueError, match="no lineage"):
            verdicts.checked_files(record, "other files", adapter, refuse)
    assert len(calls) == 3
