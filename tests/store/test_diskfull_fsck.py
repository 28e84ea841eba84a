
import errno
import os

import pytest
from store_support import suite_doc

from vbstore.errors import DiskFull
from vbstore.store import db_id, fsck


def _snapshot(store):
    return (sorted(store.db.query("SELECT * FROM objects")),
            sorted(store.db.query("SELECT * FROM edges")),
            sorted(p.name for p in (store.root / "tmp").iterdir()),
            sorted(o for o, _ in store.files.iter_files()))


def test_disk_full_is_a_clear_error_and_changes_nothing(store, monkeypatch):
    store.put_bytes(b"existing")
    before = _snapshot(store)
    real_write = os.write
    written = {"n": 0}

    def full_after_a_while(fd, data):
        written["n"] += 1
        if written["n"] > 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr("vbstore.store._objects.os.write", full_after_a_while)
    with pytest.raises(DiskFull, match=r"no space left.*nothing partial was kept"):
        store.put_bytes(os.urandom(5 << 20))
    with pytest.raises(DiskFull):
        store.put_json(suite_doc("n"), "suite")
    monkeypatch.undo()
    assert _snapshot(store) == before
    assert fsck(store).clean


def test_flipped_byte_is_reported_and_fsck_fails(store):
    good = store.put_bytes(b"good" * 1000)
    bad = store.put_bytes(b"bad!" * 1000)
    path = store.files.path(bad)
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[1234] ^= 0x40
    path.write_bytes(bytes(data))
    report = fsck(store, jobs=4)
    assert report.corrupt == [bad]
    assert not report.clean
    assert good not in report.corrupt


def test_fsck_reconciles_rows_files_temps_and_edges(store):
    kept = store.put_bytes(b"kept")
    orphan = store.put_bytes(b"orphan")
    with store.db.write() as conn:  # a crash between rename and row insert looks like this
        conn.execute("DELETE FROM objects WHERE id=?", (db_id(orphan),))
    gone = store.put_bytes(b"gone")
    os.chmod(store.files.path(gone), 0o644)
    os.unlink(store.files.path(gone))
    dead_temp = store.root / "tmp" / "otherhost.999999.abc.tmp"
    dead_temp.write_bytes(b"partial")
    os.utime(dead_temp, (0, 0))
    store.add_edges(kept, {"input": "f" * 64})

    report = fsck(store)
    assert report.adopted == [orphan]
    assert store.info(orphan).kind == "blob"
    assert report.missing == [gone]
    assert report.dangling_edges == [{"parent": kept, "child": "f" * 64, "role": "input"}]
    assert report.temp_removed == ["otherhost.999999.abc.tmp"]
    assert report.faults == 2


def test_repair_moves_corrupt_blob_aside_and_forgets_its_derivation(store):
    from vbstore.store import derivation_key, derivation_spec

    out = store.put_json(suite_doc("n"), "suite")
    spec = derivation_spec("op", 1, {}, {})
    store.record(spec, out)
    path = store.files.path(out)
    os.chmod(path, 0o644)
    path.write_bytes(path.read_bytes().replace(b"n", b"m", 1))
    assert store.lookup(derivation_key(spec)) is None  # a corrupt hit is a miss...
    assert (store.root / "quarantine" / out).exists()  # ...moved aside, so a recompute republishes
    assert store.info(out).evicted_at is not None
    assert fsck(store).clean
    again = store.put_json(suite_doc("n"), "suite")
    assert again == out
    assert store.verify(out)
    assert store.info(out).evicted_at is None

    other = store.put_bytes(b"blob nobody looked up")
    path = store.files.path(other)
    os.chmod(path, 0o644)
    path.write_bytes(b"tampered")
    report = fsck(store, repair=True)
    assert report.repaired == [other]
    assert report.corrupt == [other]
    assert (store.root / "quarantine" / other).exists()
    assert fsck(store).clean


def test_fsck_adopts_orphans_with_their_own_kind(store):
    np = pytest.importorskip("numpy")
    pack = store.put_tensors({"pooled.-1": np.zeros((1, 2), dtype=np.float32)}, "pack",
                             {"format": "vbstore.pack.v1", "extractor": "e" * 64, "layers": "[-1]",
                              "images": '["' + "a" * 64 + '"]'})
    suite = store.put_json(suite_doc("n"), "suite")
    with store.db.write() as conn:  # a crash between rename and row insert, twice
        conn.execute("DELETE FROM objects")
    assert sorted(fsck(store).adopted) == sorted([pack, suite])
    assert store.info(pack).kind == "pack"
    assert store.info(suite).kind == "suite"


def test_fsck_runs_sqlite_integrity_check(store):
    """A damaged index page is a fault, not "intact"."""
    for i in range(300):
        store.put_bytes(f"blob {i}".encode() * 20)
    store.close()
    db = store.root / "registry.db"
    import sqlite3

    with sqlite3.connect(db) as conn:  # a fresh, fully checkpointed file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE type='index' "
                            "AND tbl_name='objects' LIMIT 1").fetchone()
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    assert root is not None
    data = bytearray(db.read_bytes())
    start = (root[0] - 1) * page_size
    # the index page's cell area (cells grow from the end of the page), not the file header
    data[start + page_size // 2 : start + page_size] = os.urandom(page_size // 2)
    db.write_bytes(bytes(data))
    report = fsck(store)
    assert not report.clean
    assert report.registry_errors


def test_fsck_refuses_symlinked_blobs_and_fixes_writable_modes(store, tmp_path):
    oid = store.put_bytes(b"kept")
    outside = tmp_path / "outside"
    outside.write_bytes(b"a file outside the store")
    from vbstore import canonical

    linked = canonical.digest(outside.read_bytes())
    target = store.files.path(linked)
    target.parent.mkdir(exist_ok=True)
    target.symlink_to(outside)
    store.files.path(oid).chmod(0o644)
    report = fsck(store)
    assert report.unsafe == [linked]
    assert not report.clean
    assert linked not in report.adopted
    assert report.modes_fixed == [oid]
    assert (store.files.path(oid).stat().st_mode & 0o777) == 0o444
    fsck(store, repair=True)
    assert not target.is_symlink()
    assert outside.read_bytes() == b"a file outside the store"  # never followed, never touched


def test_fsck_removes_stale_lock_files(store):
    import time

    stale = store.root / "locks" / ("a" * 64 + ".lock")
    stale.write_bytes(b"")
    old = time.time() - 2 * 24 * 3600
    os.utime(stale, (old, old))
    fresh = store.root / "locks" / ("b" * 64 + ".lock")
    fresh.write_bytes(b"")
    report = fsck(store)
    assert report.locks_removed == [stale.name]
    assert not stale.exists()
    assert fresh.exists()  # young: its owner may be about to lock it


def test_fsck_stamps_every_verified_row_and_only_those(store):
    """Over 500 ids per statement: each blob that hashed right gets verified_at, a corrupt
    one does not; an edge to a blob adopted in the same run is not dangling."""
    ids = sorted(store.put_bytes(b"blob %d" % i) for i in range(1100))
    bad = ids[600]
    path = store.files.path(bad)
    os.chmod(path, 0o644)
    path.write_bytes(b"not what it was")
    os.chmod(path, 0o444)
    orphan = store.put_bytes(b"orphan with a parent")
    store.add_edges(ids[0], {"input": orphan})
    with store.db.write() as conn:
        conn.execute("DELETE FROM objects WHERE id=?", (db_id(orphan),))

    report = fsck(store)
    assert report.corrupt == [bad]
    assert report.adopted == [orphan]
    assert report.dangling_edges == []
    stamped = {o.id for o in store.ls() if o.verified_at is not None}
    assert stamped == set(ids) - {bad}
