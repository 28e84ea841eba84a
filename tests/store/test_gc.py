
import os
import threading
import time

import blake3
import pytest
from store_support import suite_doc

from vbstore.store import db_id, derivation_key, derivation_spec, du, fsck, gc

PACK_META = {"format": "vbstore.pack.v1", "extractor": "e" * 64, "layers": "[-1]", "images": "[]"}


def put_pack(store, tensors, edges=None):
    return store.put_tensors(tensors, "pack", PACK_META, edges=edges)


def _old(store, *oids, age=7200.0):
    """Backdate objects as if written ``age`` seconds ago."""
    with store.db.write() as conn:
        for oid in oids:
            conn.execute("UPDATE objects SET created=created-?, last_used=last_used-? WHERE id=?",
                         (age, age, db_id(oid)))

def _bulk_files(store, label: bytes, n: int) -> list[str]:
    """Write ``n`` read-only blob files (``label %d``) straight into ``objects/``, unregistered:
    a bulk load, as fsynced puts of thousands would say nothing more."""
    assert store.db is not None  # the registry first, as a put makes it before its blob
    ids = []
    for i in range(n):
        data = label + b" %d" % i
        oid = blake3.blake3(data).hexdigest()
        path = store.files.path(oid)
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
        os.chmod(path, 0o444)
        ids.append(oid)
    return ids



def test_gc_keeps_roots_and_what_they_need(store):
    weights = store.put_bytes(b"weights")
    pack = put_pack(store, {"x": __import__("numpy").zeros(3)}, edges={"w": weights})
    result = store.put_json({"task": "t", "op_version": 1, "metrics": {"a": 1.0}, "params": {},
                             "inputs": {"pack": pack}}, "result", edges={"pack": pack})
    tagged = store.put_bytes(b"tagged")
    store.tag("keep-me", tagged)
    junk = store.put_bytes(b"junk")
    _old(store, weights, pack, result, tagged, junk)

    dry = gc(store, dry_run=True)
    assert [o["id"] for o in dry.removed] == [junk]
    assert store.has(junk)

    report = gc(store)
    assert [o["id"] for o in report.removed] == [junk]
    assert not store.has(junk)
    for oid in (weights, pack, result, tagged):
        assert store.has(oid)
    assert fsck(store).clean


def test_grace_period_protects_young_objects(store):
    young = store.put_bytes(b"young")
    assert gc(store).removed == []
    assert store.has(young)
    assert [o["id"] for o in gc(store, grace=0).removed] == [young]


def test_gc_spares_inputs_of_a_running_computation(store):
    feature = store.put_bytes(b"features in use")
    _old(store, feature)
    spec = derivation_spec("op", 1, {"features": feature}, {})
    inside, release = threading.Event(), threading.Event()
    outcome = {}

    def compute():
        inside.set()
        release.wait(10)
        return store.put_bytes(b"output")

    from vbstore import Store

    worker_store = Store(store.root)  # its own connection, as another process would have

    def run():
        outcome["oid"] = worker_store.derive(spec, compute)[0]

    thread = threading.Thread(target=run)
    thread.start()
    assert inside.wait(10)
    report = gc(store, grace=0)
    assert feature not in [o["id"] for o in report.removed]
    assert store.has(feature)
    release.set()
    thread.join(10)
    assert store.lookup(derivation_key(spec)) == outcome["oid"]
    worker_store.close()


def test_max_size_evicts_lru_packs_only_and_lookup_misses(store):
    np = pytest.importorskip("numpy")
    manifest = store.put_json({"layout": "folder", "samples": []}, "manifest")
    packs = []
    for i in range(3):
        pack = put_pack(store, {"x": np.full(25_000, i, dtype=np.float32)})
        spec = derivation_spec("pack", 1, {"manifest": manifest}, {"i": i})
        store.record(spec, pack)
        packs.append((pack, derivation_key(spec)))
    result = store.put_json({"task": "t", "op_version": 1, "metrics": {}, "params": {},
                             "inputs": {}}, "result",
                            edges={f"p{i}": p for i, (p, _) in enumerate(packs)})
    _old(store, manifest, result, *[p for p, _ in packs])
    _old(store, packs[1][0], age=9000)  # least recently used
    report = gc(store, max_size=250_000)
    assert [o["id"] for o in report.evicted] == [packs[1][0]]
    assert not store.has(packs[1][0])
    assert store.lookup(packs[1][1]) is None
    assert store.lookup(packs[0][1]) == packs[0][0]
    assert store.has(manifest)
    assert store.has(result)
    assert store.info(packs[1][0]).evicted_at is not None
    assert fsck(store).clean  # an evicted row is not a missing blob


def test_max_size_warns_when_cap_is_below_one_working_set(store):
    np = pytest.importorskip("numpy")
    pack = put_pack(store, {"x": np.zeros(50_000, dtype=np.float32)})
    store.put_json({"extractor": {}, "extractor_key": pack, "manifest": pack, "backbone": pack,
                    "packs": [pack], "rows": [[0, 0]]}, "featureset", edges={"pack": pack})
    report = gc(store, max_size=1000, dry_run=True)
    assert any("smaller than one feature set" in w for w in report.warnings)


def test_max_size_says_when_the_store_cannot_shrink_to_it(store):
    np = pytest.importorskip("numpy")
    put_pack(store, {"x": np.zeros(50_000, dtype=np.float32)})  # young: within --grace
    report = gc(store, max_size=1000, dry_run=True)
    assert report.evicted == []
    assert any("above --max-size 1000 B" in w and "--grace 0" in w for w in report.warnings)
    assert not any("above --max-size" in w for w in gc(store, max_size=10**9).warnings)


def test_gc_of_many_objects_is_batched(store):
    ids = [store.put_bytes(str(i).encode()) for i in range(1200)]
    _old(store, *ids)
    assert len(gc(store).removed) == 1200
    assert store.ls() == []
    assert not any(store.files.iter_files())


def test_old_inputs_of_a_young_artifact_are_kept(store):
    old_input = store.put_bytes(b"features computed long ago")
    _old(store, old_input)
    young = store.put_json(suite_doc("fresh"), "suite")  # stands for any fresh parent
    with store.db.write() as conn:  # make it a plain young non-root artifact
        conn.execute("UPDATE objects SET kind='blob' WHERE id=?", (db_id(young),))
    store.add_edges(young, {"input": old_input})
    assert gc(store).removed == []
    assert store.has(old_input)
    assert fsck(store).clean


def test_max_size_never_evicts_what_a_ref_needs(store):
    np = pytest.importorskip("numpy")
    pack = put_pack(store, {"x": np.zeros(20_000, dtype=np.float32)})
    doc = {"extractor": {}, "extractor_key": pack, "manifest": pack, "backbone": pack,
           "packs": [pack], "rows": [[0, 0]]}
    featureset = store.put_json(doc, "featureset", edges={"pack": pack})
    store.tag("keep", featureset)
    _old(store, pack, featureset)
    report = gc(store, grace=0, max_size=0)
    assert report.evicted == []
    assert store.has(pack)


def test_a_parent_recorded_during_gc_keeps_its_old_input(store, monkeypatch):
    from vbstore.store import _gc

    child = store.put_bytes(b"old and unreachable")
    _old(store, child)
    real = _gc.reachable

    def walk_then_a_writer_arrives(*args, **kwargs):
        seen = real(*args, **kwargs)
        store.put_bytes(b"new parent", edges={"input": child})  # after the walk, before the sweep
        return seen

    monkeypatch.setattr(_gc, "reachable", walk_then_a_writer_arrives)
    assert gc(store).removed == []
    assert store.has(child)
    assert fsck(store).clean


def test_gc_spares_outputs_a_running_computation_has_published(store):
    from vbstore import Store

    spec = derivation_spec("op", 1, {}, {})
    with store.lease(derivation_key(spec)), Store(store.root) as other:
        pack = put_pack(store, {"x": __import__("numpy").zeros(3)})  # written, not yet recorded
        assert gc(other, grace=0).removed == []
        assert gc(other, grace=0, max_size=0).evicted == []
        assert store.has(pack)
    with Store(store.root) as other:  # the lease ended and nothing recorded the pack: garbage
        assert [o["id"] for o in gc(other, grace=0).removed] == [pack]


def test_gc_across_transactions_removes_exactly_the_unreachable(store):
    """Over 2000 ids per write transaction and 500 per statement: nothing kept is touched."""
    old = time.time() - 7200
    rows, edges = [], []
    ids = _bulk_files(store, b"object", 4600)
    for i, oid in enumerate(ids):
        kind = "result" if i % 100 == 0 and i < 2300 else ("pack" if i % 7 == 0 else "blob")
        rows.append((db_id(oid), kind, len(b"object %d" % i), old, old))
        if i < 2300 and i % 100:
            edges.append((db_id(ids[i - i % 100]), db_id(oid), "input"))
    with store.db.write() as conn:
        conn.executemany(
            "INSERT INTO objects(id, kind, size, created, last_used) VALUES (?,?,?,?,?)", rows)
        conn.executemany("INSERT INTO edges(parent, child, role) VALUES (?,?,?)", edges)
    kept_pack, doomed_pack = ids[7], ids[2303]  # both packs (i % 7 == 0)
    store.feature_rows.add("e" * 64, kept_pack, ["a" * 64])
    store.feature_rows.add("e" * 64, doomed_pack, ["b" * 64])
    store.record(derivation_spec("made", 1, {}, {}), ids[4000])
    _old(store, kept_pack, doomed_pack)

    removed = {o["id"] for o in gc(store).removed}
    assert removed == set(ids[2300:])
    assert {o.id for o in store.ls()} == set(ids[:2300])
    assert {oid for oid, _ in store.files.iter_files()} == set(ids[:2300])
    assert store.feature_rows.find("e" * 64, ["a" * 64, "b" * 64]) == {"a" * 64: (kept_pack, 0)}
    assert store.db.one("SELECT count(*) FROM packs")[0] == 1
    assert store.lookup(derivation_key(derivation_spec("made", 1, {}, {}))) is None
    report = fsck(store)  # intact, but for the row the stand-in pack (not safetensors) holds
    assert [m["table"] for m in report.mismatched] == ["feature_rows"]
    assert report.faults == 1


@pytest.mark.parametrize("writer", ["same", "other"])
def test_a_put_between_delete_and_unlink_keeps_its_blob(store, monkeypatch, writer):
    """The unlink skips its probe only when no write landed since the rows went: a put
    re-registering the blob in between (this connection or another) keeps the file."""
    from vbstore import Store
    from vbstore.store import _gc

    ids = [store.put_bytes(b"old %d" % i) for i in range(3)]
    _old(store, *ids)
    real = _gc._sweep_step
    other = Store(store.root) if writer == "other" else store

    def a_put_arrives_first(on, batch, cutoff, report, walked, since, pending, unlinkers):
        if pending:  # the rows went in the last transaction, the files go in this one
            other.put_bytes(b"old 1")  # its row is gone, its blob not yet: the put re-registers it
        return real(on, batch, cutoff, report, walked, since, pending, unlinkers)

    monkeypatch.setattr(_gc, "_sweep_step", a_put_arrives_first)
    assert len(gc(store).removed) == 3  # the rows went; the put brought one back
    assert [o.id for o in store.ls()] == [ids[1]]
    assert store.path(ids[1]).read_bytes() == b"old 1"
    assert not store.files.exists(ids[0])
    assert not store.files.exists(ids[2])
    assert fsck(store).clean
    if other is not store:
        other.close()


def test_a_write_after_the_walk_makes_every_later_batch_recheck(store, monkeypatch):
    """A parent recorded while gc sweeps (between two transactions) keeps its old input:
    once another write landed, no batch trusts the walk."""
    from vbstore import Store
    from vbstore.store import _gc

    ids = [store.put_bytes(b"old %d" % i) for i in range(6)]
    _old(store, *ids)
    monkeypatch.setattr(_gc, "_TRANSACTION", 1)
    late = sorted(ids)[-1]  # swept in the last transaction (ids go in registry order)
    real = _gc._sweep_step
    calls = []

    def a_writer_arrives(on, batch, *args):
        if len(calls) == 1:  # after the first batch went
            with Store(store.root) as other:
                other.put_bytes(b"new parent", edges={"input": late})
        calls.append(batch)
        return real(on, batch, *args)

    monkeypatch.setattr(_gc, "_sweep_step", a_writer_arrives)
    assert {o["id"] for o in gc(store).removed} == set(ids) - {late}
    assert store.has(late)
    assert len(calls) == 6  # six batches; the last deleted nothing, so no seventh to unlink
    assert fsck(store).clean


def test_every_unlink_runs_under_the_write_lock(store, monkeypatch):
    """The files of a batch are unlinked from worker threads while the next transaction holds
    the registry's write lock: no other writer (a put re-registering one) can interleave."""
    import sqlite3

    from vbstore.store import _gc

    ids = [store.put_bytes(b"old %d" % i) for i in range(25)]
    _old(store, *ids)
    monkeypatch.setattr(_gc, "_TRANSACTION", 10)
    real = _gc._unlink_keys
    seen = []

    def unlink_and_look(base, keys, *args):
        other = sqlite3.connect(store.db.path, timeout=0)
        try:
            other.execute("BEGIN IMMEDIATE")
            locked = False
        except sqlite3.OperationalError as exc:
            locked = "locked" in str(exc)
        other.close()
        seen.append((len(keys), store.db.conn.in_transaction, locked))
        return real(base, keys, *args)

    monkeypatch.setattr(_gc, "_unlink_keys", unlink_and_look)
    assert gc(store).removed_count == 25
    assert sum(n for n, _, _ in seen) == 25
    assert all(inside and locked for _, inside, locked in seen), seen
    assert not any(store.files.iter_files())
    assert fsck(store).clean


class _FailsOnce:
    """A registry connection whose ``nth`` ``DELETE FROM objects`` fails (an I/O error)."""

    def __init__(self, conn, nth):
        self._conn, self._left = conn, nth

    def execute(self, sql, *args):
        if sql.startswith("DELETE FROM objects"):
            self._left -= 1
            if self._left == 0:
                raise __import__("sqlite3").OperationalError("disk I/O error")
        return self._conn.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._conn, name)


def test_a_batch_that_fails_leaves_no_row_without_its_blob(store, monkeypatch):
    """The second transaction fails while it unlinks the first batch's files: those go (their
    rows were committed), the failed batch keeps its rows and files, fsck stays clean."""
    from vbstore.errors import StoreIOError
    from vbstore.store import _gc

    ids = sorted(store.put_bytes(b"old %d" % i) for i in range(6))  # swept in registry order
    _old(store, *ids)
    monkeypatch.setattr(_gc, "_TRANSACTION", 2)
    real = store.db.conn
    store.db.conn = _FailsOnce(real, 2)
    with pytest.raises(StoreIOError):
        gc(store)
    store.db.conn = real
    assert [store.files.exists(oid) for oid in ids] == [False, False, True, True, True, True]
    assert sorted(o.id for o in store.ls()) == ids[2:]
    assert fsck(store).clean
    assert gc(store).removed_count == 4


def test_the_report_totals_need_no_entry_per_object(store):
    np = pytest.importorskip("numpy")
    blobs = [store.put_bytes(b"x" * size) for size in (10, 20)]
    pack = put_pack(store, {"x": np.zeros(4, dtype=np.float32)})
    _old(store, *blobs, pack)
    pack_size = store.info(pack).size
    dry = gc(store, dry_run=True)
    report = gc(store)
    for r in (dry, report):
        assert r.removed_count == 3
        assert r.removed_bytes == r.freed_bytes == 30 + pack_size
        assert r.removed_by_kind == {"blob": {"count": 2, "bytes": 30},
                                     "pack": {"count": 1, "bytes": pack_size}}
    assert sorted(o["id"] for o in report.removed) == sorted([*blobs, pack])
    summary = report.as_dict(itemize=False)
    assert "removed" not in summary
    assert summary["removed_count"] == 3
    assert report.as_dict()["removed"] == report.removed


def test_puts_racing_a_gc_never_lose_their_blob(store, monkeypatch):
    """Another connection puts back, while gc sweeps, blobs gc is removing: each blob put
    stays (row and file: the put made it young), whatever transaction it landed between."""
    from vbstore import Store
    from vbstore.store import _gc

    monkeypatch.setattr(_gc, "_TRANSACTION", 100)  # many transactions to land between
    old = time.time() - 7200
    ids = _bulk_files(store, b"garbage", 3000)
    rows = [(db_id(oid), "blob", len(b"garbage %d" % i), old, old) for i, oid in enumerate(ids)]
    with store.db.write() as conn:
        conn.executemany(
            "INSERT INTO objects(id, kind, size, created, last_used) VALUES (?,?,?,?,?)", rows)
    order = [i * 1237 % 3000 for i in range(3000)]  # a fixed shuffle: 1237 is prime to 3000
    ready, done, put = threading.Event(), threading.Event(), []

    def put_back():
        with Store(store.root) as other:
            ready.set()
            for i in order:
                if done.is_set():
                    return
                put.append(other.put_bytes(b"garbage %d" % i))

    thread = threading.Thread(target=put_back)
    thread.start()
    assert ready.wait(10)
    report = gc(store)
    done.set()
    thread.join(30)
    assert put  # the race happened
    assert not set(put) & {o["id"] for o in gc(store, dry_run=True).removed}
    for oid in put:
        assert store.has(oid), oid
    assert {o.id for o in store.ls()} == set(put)
    assert report.removed_count + len(put) >= 3000
    assert fsck(store).clean


def test_adopting_a_blob_gc_unlinks_meanwhile_registers_nothing(store, monkeypatch):
    # a worker re-published a blob gc is removing (an older copy of the same id): gc's unlink
    # lands between adopt's hash and its lock; adopt must refuse rather than leave a bare row
    from vbstore.errors import ObjectNotFound
    from vbstore.store import _store

    oid = store.put_bytes(b"pack bytes")
    with store.db.write() as conn:  # unregistered again, as a worker's fresh file is
        conn.execute("DELETE FROM objects")
    real = _store.hash_file

    def hash_then_unlinked(path):
        digest = real(path)
        os.unlink(path)  # what gc's sweep does to the file of the old row
        return digest

    monkeypatch.setattr(_store, "hash_file", hash_then_unlinked)
    with pytest.raises(ObjectNotFound, match="no object matches"):
        store.adopt(oid, "blob")
    assert not store.has(oid)
    assert fsck(store).clean


def _dead_pid() -> int:
    """The pid of a process that has exited (its writer died)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(proc.stdout)


def test_gc_removes_the_temp_files_of_dead_writers(store):
    # a writer killed mid-write (kill -9, power loss) leaves its temp file behind; gc, the way
    # out of a full disk, must free it, not only fsck
    from vbstore.store._objects import HOST

    dead = store.files.tmp / f"{HOST}.{_dead_pid()}.{'a' * 32}.tmp"
    dead.write_bytes(b"x" * 5000)
    live = store.files.tmp / f"{HOST}.{os.getpid()}.{'b' * 32}.tmp"  # a write in progress
    live.write_bytes(b"y" * 10)
    report = gc(store, dry_run=True)
    assert report.temp_removed == [dead.name]
    assert dead.exists()
    assert report.freed_bytes == 5000
    report = gc(store)
    assert report.temp_removed == [dead.name]
    assert report.freed_bytes == 5000
    assert not dead.exists()
    assert live.exists()
    assert report.as_dict()["temp_removed"] == [dead.name]


def test_kept_counts_what_du_counts_and_sizes_read_in_units(store):
    from vbstore.store._gc import human_bytes

    store.tag("k", store.put_bytes(b"kept"))
    store.put_bytes(b"gone")
    pack = store.put_bytes(b"x" * 5000, "pack")
    store.tag("p", pack)
    with store.db.write() as conn:  # an evicted pack: a registry row, no blob
        conn.execute("UPDATE objects SET evicted_at = 1 WHERE id = ?", (db_id(pack),))
    report = gc(store, grace=0)
    assert report.kept == du(store)["objects"] == 1
    assert human_bytes(5242880) == "5.0 MiB"
    assert human_bytes(1000) == "1000 B"
