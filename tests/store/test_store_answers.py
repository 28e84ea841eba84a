"""The answer cache as a store feature: what it records, what it gives back, and every change
that makes it miss (the command line's use of it: tests/cli/test_answers.py)."""

from __future__ import annotations

import json
import os
import time

import pytest

from vbstore import Store
from vbstore.store import _answers as cache
from vbstore.store import derivation_key, derivation_spec, gc

KEY = "k" * 64
RESULT = {"kind": "result", "task": "knn", "op_version": 1, "metrics": {"top1": 0.5},
          "params": {}, "inputs": {}}


def settled():
    time.sleep(2 * cache.RACY_NS / 1e9)


@pytest.fixture
def setup(tmp_path):
    """A store holding a result found through a derivation, a data folder, and the result's
    answer recorded (its lookup watched, as ``get result`` does)."""
    data = tmp_path / "data"
    (data / "val").mkdir(parents=True)
    for name in ("a.png", "b.png"):
        (data / "val" / name).write_bytes(name.encode())
    store = Store(tmp_path / "store")
    spec = derivation_spec("result", 1, {"eval_manifest": "e" * 64}, {})
    oid = store.put_json(RESULT, "result")
    store.record(spec, oid)
    store.runs.record(oid, device="cpu:test", seconds=1.5, timings={"evaluate_s": 1.0},
                      features_from_cache=True)
    settled()

    def record(result=oid, **kw):
        store.answers.watch()
        assert store.lookup(derivation_key(spec)) == oid
        options = {"started_ns": time.time_ns(), "folders": {str(data): {}}, "samples": 2,
                   "extra": {"json": False}, **kw}
        return store.answers.record(KEY, result, **options)

    yield store, data, oid, record, spec
    store.close()


def test_a_recorded_answer_comes_back_with_its_newest_run(setup):
    store, _, oid, record, _ = setup
    assert record()
    found = cache.lookup(str(store.root), KEY)
    assert found is not None
    assert (found.oid, found.doc, found.extra) == (oid, RESULT, {"json": False})
    assert found.run == store.runs.last(oid).as_dict()
    assert cache.lookup(str(store.root), "x" * 64) is None  # another key: nothing


@pytest.mark.parametrize("change", ["touched", "added", "removed", "renamed"])
def test_any_change_under_a_data_folder_misses(setup, change):
    store, data, _, record, _ = setup
    assert record()
    image = data / "val" / "a.png"
    if change == "touched":
        os.utime(image, ns=(0, 0))
    elif change == "added":
        (data / "val" / "c.png").write_bytes(b"c")
    elif change == "removed":
        image.unlink()
    else:
        image.rename(data / "val" / "z.png")
    assert cache.lookup(str(store.root), KEY) is None


def test_a_changed_registry_row_misses(setup):
    store, _, _, record, spec = setup
    assert record()
    with store.db.write() as conn:
        conn.execute("UPDATE derivations SET output = ? WHERE key = ?",
                     ("f" * 64, derivation_key(spec)))
    assert cache.lookup(str(store.root), KEY) is None


def test_a_changed_named_file_and_a_damaged_blob_miss(setup, tmp_path):
    store, _, oid, record, _ = setup
    checkpoint = tmp_path / "weights.safetensors"
    checkpoint.write_bytes(b"one")
    settled()
    assert record(files=[str(checkpoint)])
    assert cache.lookup(str(store.root), KEY) is not None
    checkpoint.write_bytes(b"two")
    assert cache.lookup(str(store.root), KEY) is None
    checkpoint.unlink()
    assert record()  # recorded again, without the file
    blob = store.path(oid)
    blob.chmod(0o644)
    blob.write_bytes(blob.read_bytes().replace(b"0.5", b"0.6"))
    assert cache.lookup(str(store.root), KEY) is None


def test_a_newer_run_shows_at_the_next_lookup(setup):
    store, _, oid, record, _ = setup
    assert record()
    time.sleep(0.01)
    store.runs.record(oid, device="cuda:test", seconds=0.5)
    assert cache.lookup(str(store.root), KEY).run["device"] == "cuda:test"


def test_what_is_not_recorded(setup):
    store, data, oid, record, _ = setup
    assert not store.answers.record(KEY, oid, started_ns=time.time_ns(), folders={}, samples=0)
    assert not record(started_ns=time.time_ns() - 10**12)  # racy: changed since it started
    assert not record(result="0" * 64)  # not found through the lookups watched
    # a folder far larger than what the answer read: a marker, until its own listing changes
    for i in range(cache.SPARE + 10):
        os.close(os.open(data / f"{i}", os.O_CREAT | os.O_WRONLY))
    assert not record()
    deps = json.loads(store.db.one("SELECT deps FROM answers WHERE key=?", (KEY,))[0])
    assert deps["skip"][0][0] == str(data)
    assert store.answers.skipped(KEY)
    assert cache.lookup(str(store.root), KEY) is None
    os.unlink(data / "0")
    assert not store.answers.skipped(KEY)


def test_gc_empties_the_cache_and_an_older_registry_is_not_read(setup):
    store, _, _, record, _ = setup
    assert record()
    gc(store)
    assert store.db.query("SELECT * FROM answers") == []
    assert store.db.query("SELECT * FROM answer_trees") == []
    assert cache.lookup(str(store.root), KEY) is None
    assert record()
    with store.db.write() as conn:
        conn.execute("PRAGMA user_version=4")  # a registry the full command would migrate
    assert cache.lookup(str(store.root), KEY) is None


def test_a_computed_answer_is_recorded_with_the_rows_it_wrote(tmp_path):
    """A caller that found no row, computed and wrote it, records the row as it stands (the
    first repeat after a computation is answered); without ``wrote`` it records nothing."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.png").write_bytes(b"a")
    store = Store(tmp_path / "store")
    spec = derivation_spec("result", 1, {"eval_manifest": "e" * 64}, {})
    key = derivation_key(spec)
    settled()
    store.answers.watch()
    started = time.time_ns()
    assert store.lookup(key) is None  # nothing yet: the caller computes
    oid = store.put_json(RESULT, "result")
    store.record(spec, oid)
    options = {"started_ns": started, "folders": {str(data): {}}, "samples": 1}
    assert not store.answers.record(KEY, oid, **options)  # a row that appeared: not the caller's
    store.answers.watch()
    assert store.lookup(key) == oid
    store.reads[0] = ("derivations", key, None)  # as the computing caller saw it
    assert store.answers.record(KEY, oid, wrote=[key], **options)
    assert cache.lookup(str(store.root), KEY).oid == oid
    with store.db.write() as conn:  # the row it wrote, changed: a miss
        conn.execute("UPDATE derivations SET output = ? WHERE key = ?", ("f" * 64, key))
    assert cache.lookup(str(store.root), KEY) is None
    store.close()


def test_the_modules_an_answer_names_are_the_ones_checked(setup, tmp_path):
    store, _, _, record, _ = setup
    module = tmp_path / "answer_dep_mod.py"
    module.write_text("X = 1\n")
    other = tmp_path / "answer_other_mod.py"
    other.write_text("Y = 1\n")
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        import answer_dep_mod  # noqa: F401
        import answer_other_mod  # noqa: F401
    finally:
        sys.path.remove(str(tmp_path))
    settled()
    assert record(modules=["answer_dep_mod", "vbstore"])
    deps = json.loads(store.db.one("SELECT deps FROM answers WHERE key=?", (KEY,))[0])
    assert str(module) in deps["modules"]
    assert str(other) not in deps["modules"]
    assert sys.executable in deps["modules"]
    other.write_text("Y = 2\n")  # not named: still answered
    assert cache.lookup(str(store.root), KEY) is not None
    module.write_text("X = 2\n")
    assert cache.lookup(str(store.root), KEY) is None
    del sys.modules["answer_dep_mod"], sys.modules["answer_other_mod"]
