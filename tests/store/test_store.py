import json
import multiprocessing as mp
import os
import time

import pytest

from tunesmith.store import Store, canonical_json, content_key
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
        assert sorted(f.name for f in entry.iterdir()) == ["a.bin", "value.json"]
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


def test_gc_leaves_a_fresh_temporary_folder_and_removes_a_stale_one(tmp_path):
    store = Store(tmp_path)
    shard = store.objects / "ab"
    fresh, stale = shard / f"{TMP_PREFIX}fresh", shard / f"{TMP_PREFIX}stale"
    fresh.mkdir(parents=True)
    stale.mkdir()
    old = time.time() - 2 * 3600
    os.utime(stale, (old, old))
    store.gc()
    assert fresh.exists() and not stale.exists()


def test_atomic_write_json_replaces_whole_file(tmp_path):
    path = tmp_path / "sub" / "report.json"
    atomic_write_json(path, {"a": 1})
    atomic_write_json(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]


def test_bad_key_is_refused(tmp_path):
    with pytest.raises(ValueError, match="64 hex"):
        Store(tmp_path).path("../../etc/passwd")
