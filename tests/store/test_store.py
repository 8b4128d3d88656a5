import json
import multiprocessing as mp
import os
import time

import pytest

from tunesmith.store import DamagedEntry, Store, canonical_json, content_key
from tunesmith.store.atomic import TMP_PREFIX, atomic_write_json


def test_key_is_sha256_of_canonical_json():
    import hashlib

    parts = {"stage": "labels", "version": 1, "params": {"b": 2, "a": "é"}}
    assert canonical_json(parts) == '{"params":{"a":"é","b":2},"stage":"labels","version":1}'
    expected = hashlib.sha256(canonical_json(parts).encode()).hexdigest()
    assert content_key(**parts) == expected
    # key order never changes the key
    assert content_key(version=1, stage="labels", params={"a": "é", "b": 2}) == expected


def test_write_then_read(tmp_path):
    store = Store(tmp_path)
    key = content_key(x=1)
    assert not store.has(key) and store.read_json(key) is None
    store.write_json(key, {"caption": "a loop"})
    assert store.has(key)
    assert store.read_json(key) == {"caption": "a loop"}


def test_failed_write_publishes_nothing(tmp_path):
    store = Store(tmp_path)
    key = content_key(x=2)
    with pytest.raises(RuntimeError):
        with store.writing(key) as tmp:
            (tmp / "half.npy").write_bytes(b"\0" * 10)
            raise RuntimeError("killed mid-write")
    assert not store.has(key)
    assert not list(store.path(key).parent.iterdir())


def _writer(root, keys, barrier, tag):
    store = Store(root)
    barrier.wait()
    for key in keys:
        with store.writing(key) as tmp:
            # a slow multi-file entry, so the two writers overlap
            (tmp / "a.bin").write_bytes(key.encode() * 1000)
            time.sleep(0.001)
            (tmp / "value.json").write_text(json.dumps({"key": key}))


def test_two_processes_writing_one_key_leave_one_good_entry(tmp_path):
    keys = [content_key(i=i) for i in range(60)]
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_writer, args=(tmp_path, keys, barrier, t)) for t in "ab"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    store = Store(tmp_path)
    for key in keys:
        entry = store.path(key)
        assert sorted(f.name for f in entry.iterdir()) == [".files.json", "a.bin", "value.json"]
        assert store.verify([key]) == []
        assert (entry / "a.bin").read_bytes() == key.encode() * 1000
        assert store.read_json(key) == {"key": key}
    leftovers = [p for p in store.objects.rglob(f"{TMP_PREFIX}*")]
    assert leftovers == []


def test_gc_removes_only_unreferenced_entries(tmp_path):
    store = Store(tmp_path)
    keep, drop = content_key(k=1), content_key(k=2)
    store.write_json(keep, 1)
    store.write_json(drop, 2)
    store.set_roots("loops/labels", [keep])
    dry = store.gc(dry_run=True)
    assert (dry.removed, dry.kept) == (1, 1) and store.has(drop)
    result = store.gc()
    assert (result.removed, result.kept) == (1, 1)
    assert result.bytes_freed > 0
    assert store.has(keep) and not store.has(drop)


def _hold_writer(root, key, ready, release):
    store = Store(root)
    with store.writing(key) as tmp:
        (tmp / "audio.wav").write_bytes(b"x" * 1000)
        ready.set()
        release.wait(30)


def test_sweep_removes_a_dead_writers_folder_and_keeps_a_live_one(tmp_path):
    """By lock, not by age: a fresh leftover of a killed writer goes at once."""
    ctx = mp.get_context("spawn")
    # One event each: a process killed while waiting on a shared event would wedge it.
    live_ready, dead_ready, release, never = (ctx.Event() for _ in range(4))
    live = ctx.Process(target=_hold_writer, args=(tmp_path, content_key(w=1), live_ready, release))
    dead = ctx.Process(target=_hold_writer, args=(tmp_path, content_key(w=2), dead_ready, never))
    live.start(), dead.start()
    assert live_ready.wait(60) and dead_ready.wait(60)
    os.kill(dead.pid, 9)  # SIGKILL mid-write: its temporary folder stays behind
    dead.join(10)
    store = Store(tmp_path)
    before = [p.parent for p in store.objects.rglob(f"{TMP_PREFIX}*/audio.wav")]
    assert len(before) == 2
    for folder in before:  # both past the creation-to-lock grace: only the lock decides
        os.utime(folder, (time.time() - 10, time.time() - 10))
    removed = store.sweep()
    assert [p.parent.name for p in removed] == [content_key(w=2)[:2]]
    release.set()
    live.join(30)
    assert live.exitcode == 0 and store.has(content_key(w=1)) and not store.has(content_key(w=2))
    assert list(store.objects.rglob(f"{TMP_PREFIX}*")) == []


def _entry_with_file(store: Store, data: bytes = b"RIFF" + bytes(range(256)) * 8) -> str:
    key = content_key(file=data[:8].hex(), n=len(data))
    with store.writing(key) as tmp:
        (tmp / "audio.wav").write_bytes(data)
        (tmp / "value.json").write_text('{"side": "base"}')
    return key


def test_a_truncated_entry_is_evicted_with_a_warning_naming_it(tmp_path):
    store = Store(tmp_path)
    key = _entry_with_file(store)
    wav = store.path(key) / "audio.wav"
    wav.write_bytes(wav.read_bytes()[:100])
    assert not store.has(key)
    assert not store.path(key).exists()
    assert len(store.evictions) == 1 and str(store.path(key)) in store.evictions[0]
    assert "audio.wav is 100 bytes" in store.evictions[0]


def test_sizes_are_checked_once_per_store_object_and_a_removed_entry_is_seen(tmp_path):
    key = content_key(label=2)
    Store(tmp_path).write_json(key, {"caption": "a loop"})
    stage = Store(tmp_path)
    assert stage.has(key) and stage.read_json(key) == {"caption": "a loop"}
    value = stage.path(key) / "value.json"
    value.write_text(value.read_text() + " ")  # damaged after this stage checked it
    assert stage.has(key)  # the same stage trusts its check
    assert not Store(tmp_path).has(key)  # the next stage's store sees it, and evicts it
    assert not stage.has(key)  # gone: the folder is checked every time


def test_a_truncated_value_is_evicted_not_a_json_error(tmp_path):
    store = Store(tmp_path)
    key = content_key(label=1)
    store.write_json(key, {"caption": "a loop at 120 bpm"})
    value = store.path(key) / "value.json"
    value.write_text(value.read_text()[:10])
    assert store.read_json(key) is None
    assert "value.json is 10 bytes" in store.evictions[0]


def test_an_entry_without_a_record_is_not_trusted(tmp_path):
    store = Store(tmp_path)
    key = content_key(legacy=1)
    store.write_json(key, 1)
    (store.path(key) / ".files.json").unlink()
    assert not store.has(key) and "no .files.json" in store.evictions[0]


def test_publish_checks_the_hash_and_a_flipped_byte_evicts(tmp_path):
    store = Store(tmp_path)
    key = _entry_with_file(store)
    out = tmp_path / "out" / "demo0.wav"
    assert store.publish(key, "audio.wav", out)
    wav = store.path(key) / "audio.wav"
    flipped = bytearray(wav.read_bytes())
    flipped[200:264] = bytes(b ^ 0xFF for b in flipped[200:264])
    wav.write_bytes(bytes(flipped))
    assert store.has(key)  # same size: only a hash sees it
    with pytest.raises(DamagedEntry, match="damaged"):
        store.publish(key, "audio.wav", tmp_path / "out" / "other.wav")
    assert not store.path(key).exists() and not (tmp_path / "out" / "other.wav").exists()


def test_verify_finds_a_flipped_byte(tmp_path):
    store = Store(tmp_path)
    good, bad = _entry_with_file(store), _entry_with_file(store, b"RIFF" + b"\1" * 4000)
    wav = store.path(bad) / "audio.wav"
    wav.write_bytes(wav.read_bytes()[:-1] + b"\2")
    problems = store.verify([good, bad])
    assert len(problems) == 1 and bad in problems[0]
    assert store.has(good) and not store.path(bad).exists()


def test_an_edited_output_never_changes_the_cache(tmp_path):
    store = Store(tmp_path)
    key = _entry_with_file(store)
    out = tmp_path / "out" / "demo0.wav"
    store.publish(key, "audio.wav", out)
    original = (store.path(key) / "audio.wav").read_bytes()
    assert out.read_bytes() == original
    assert not store.publish(key, "audio.wav", out)  # unchanged output: left alone
    with open(out, "r+b") as f:  # an in-place edit, as an audio editor saves
        f.write(b"EDIT")
    assert (store.path(key) / "audio.wav").read_bytes() == original
    assert store.publish(key, "audio.wav", out)  # the edited output is restored
    assert out.read_bytes() == original


def test_a_hard_linked_output_from_an_older_version_is_replaced_by_a_copy(tmp_path):
    store = Store(tmp_path)
    key = _entry_with_file(store)
    out = tmp_path / "out" / "demo0.wav"
    out.parent.mkdir()
    os.link(store.path(key) / "audio.wav", out)
    assert store.publish(key, "audio.wav", out)
    assert not os.path.samefile(out, store.path(key) / "audio.wav")


def test_written_files_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        path = tmp_path / "adapter.safetensors"
        atomic_write_json(path, {"a": 1})
        assert path.stat().st_mode & 0o777 == 0o644
    finally:
        os.umask(old)


def test_atomic_write_json_replaces_whole_file(tmp_path):
    path = tmp_path / "sub" / "report.json"
    atomic_write_json(path, {"a": 1})
    atomic_write_json(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]


def test_bad_key_is_refused(tmp_path):
    with pytest.raises(ValueError, match="64 hex"):
        Store(tmp_path).path("../../etc/passwd")
