import errno
import os

import pytest
from store_support import suite_doc

from vbstore.errors import DiskFull


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
    with pytest.raises(DiskFull, match="no space left.*nothing partial was kept"):
        store.put_bytes(os.urandom(5 << 20))
    with pytest.raises(DiskFull):
        store.put_json(suite_doc("n"), "suite")
    monkeypatch.undo()
    assert _snapshot(store) == before
    assert store.fsck().clean


def test_flipped_byte_is_reported_and_fsck_fails(store):
    good = store.put_bytes(b"good" * 1000)
    bad = store.put_bytes(b"bad!" * 1000)
    path = store.files.path(bad)
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[1234] ^= 0x40
    path.write_bytes(bytes(data))
    report = store.fsck(jobs=4)
    assert report.corrupt == [bad]
    assert not report.clean
    assert good not in report.corrupt


def test_fsck_reconciles_rows_files_temps_and_edges(store):
    kept = store.put_bytes(b"kept")
    orphan = store.put_bytes(b"orphan")
    with store.db.write() as conn:  # a crash between rename and row insert looks like this
        conn.execute("DELETE FROM objects WHERE id=?", (orphan,))
    gone = store.put_bytes(b"gone")
    os.chmod(store.files.path(gone), 0o644)
    os.unlink(store.files.path(gone))
    dead_temp = store.root / "tmp" / "otherhost.999999.abc.tmp"
    dead_temp.write_bytes(b"partial")
    os.utime(dead_temp, (0, 0))
    store.add_edges(kept, {"input": "f" * 64})

    report = store.fsck()
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
    assert store.info(out).evicted_at is not None and store.fsck().clean
    again = store.put_json(suite_doc("n"), "suite")
    assert again == out and store.verify(out) and store.info(out).evicted_at is None

    other = store.put_bytes(b"blob nobody looked up")
    path = store.files.path(other)
    os.chmod(path, 0o644)
    path.write_bytes(b"tampered")
    report = store.fsck(repair=True)
    assert report.repaired == [other] and report.corrupt == [other]
    assert (store.root / "quarantine" / other).exists()
    assert store.fsck().clean


def test_fsck_adopts_orphans_with_their_own_kind(store):
    np = pytest.importorskip("numpy")
    pack = store.put_tensors({"pooled.-1": np.zeros((1, 2), dtype=np.float32)}, "pack",
                             {"format": "vbstore.pack.v1", "extractor": "e" * 64, "layers": "[-1]",
                              "images": '["' + "a" * 64 + '"]'})
    suite = store.put_json(suite_doc("n"), "suite")
    with store.db.write() as conn:  # a crash between rename and row insert, twice
        conn.execute("DELETE FROM objects")
    assert sorted(store.fsck().adopted) == sorted([pack, suite])
    assert store.info(pack).kind == "pack" and store.info(suite).kind == "suite"
