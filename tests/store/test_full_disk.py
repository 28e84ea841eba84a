"""gc frees space on a full disk: opening the registry and deleting rows need no new space first,
and the disk-full hint names the command that works."""

import os
import sqlite3

from store_support import run_on_small_disk, suite_doc

from vbstore.store import db_id, fsck, gc

FULL = r"""
import json, os, sys
from click.testing import CliRunner
from vbstore import Store
from vbstore.cli import cli

mount, suite_doc = sys.argv[1], json.loads(sys.argv[2])
root = os.path.join(mount, "store")

def fill():  # whatever space is left, to the byte
    fd = os.open(os.path.join(mount, "filler"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    for size in (1 << 16, 4096, 512, 1):
        try:
            while True:
                os.write(fd, b"x" * size)
        except OSError:
            pass
    os.close(fd)

def run(*args):
    result = CliRunner().invoke(cli, ["--store", root, *args])
    return {"code": result.exit_code, "output": result.output}

with Store(root) as store:  # closed cleanly: the next process must make a new WAL index
    suite = store.put_json(suite_doc, "suite")
    pack = store.put_bytes(os.urandom(600_000), "pack")
    store.add_edges(suite, {"features": pack})  # reachable: only eviction by size frees it
    for _ in range(6):
        store.put_bytes(os.urandom(200_000))  # unreachable leftovers
fill()
out = {"ls": run("ls", "suite"), "put": run("put", "--json", "/proc/version")}
out["gc"] = run("gc", "--grace", "0")  # as the hint says
out["put_after_gc"] = run("put", "/proc/version")
fill()
out["evict"] = run("gc", "--grace", "0", "--max-size", "1K")
out["put_after_evict"] = run("put", "/proc/cpuinfo")
out["fsck"] = run("fsck")
print(json.dumps(out))
"""


def test_gc_frees_space_on_a_really_full_disk():
    import json

    out = run_on_small_disk("4m", FULL, json.dumps(suite_doc("n")))
    assert out["ls"]["code"] == 0, out["ls"]  # opening the registry needs no new space
    full = json.loads(out["put"]["output"])
    assert full["exit_code"] == 7
    assert "vbstore gc" in full["hint"]
    assert "--grace 0" in full["hint"]
    assert out["gc"]["code"] == 0, out["gc"]
    assert "removed 6 unreachable objects" in out["gc"]["output"]
    assert out["put_after_gc"]["code"] == 0, out["put_after_gc"]
    assert out["evict"]["code"] == 0, out["evict"]
    assert "evicted 1" in out["evict"]["output"]
    assert out["put_after_evict"]["code"] == 0, out["put_after_evict"]
    assert out["fsck"]["code"] == 0, out["fsck"]


FSCK_ON_FULL = r"""
import json, os, sys
from click.testing import CliRunner
from vbstore import Store
from vbstore.cli import cli

mount, suite_doc = sys.argv[1], json.loads(sys.argv[2])
root = os.path.join(mount, "store")
with Store(root) as store:
    store.put_json(suite_doc, "suite")
    bad = store.put_bytes(os.urandom(300_000))
path = os.path.join(root, "objects", bad[:2], bad[2:])
os.chmod(path, 0o644)
with open(path, "r+b") as f:  # one flipped byte: fsck must still find it
    first = f.read(1)
    f.seek(0)  # the byte read, not the next one (which is 0 once in 256 random blobs already)
    f.write(b"\0" if first != b"\0" else b"\1")
os.chmod(path, 0o444)
fd = os.open(os.path.join(mount, "filler"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
for size in (1 << 16, 4096, 512, 1):  # whatever space is left, to the byte
    try:
        while True:
            os.write(fd, b"x" * size)
    except OSError:
        pass
os.close(fd)
out = {}
for name, args in {"fsck": ["fsck"], "json": ["fsck", "--json"]}.items():
    result = CliRunner().invoke(cli, ["--store", root, *args])
    out[name] = {"code": result.exit_code, "output": result.output}
print(json.dumps(out))
"""


def test_fsck_checks_a_store_on_a_really_full_disk():
    import json

    out = run_on_small_disk("4m", FSCK_ON_FULL, json.dumps(suite_doc("n")))
    assert out["fsck"]["code"] == 1, out["fsck"]  # the fault, not a refusal (exit 7)
    assert "CORRUPT" in out["fsck"]["output"]
    assert "the disk is full: the check is complete" in out["fsck"]["output"]
    report = json.loads(out["json"]["output"])
    assert report["unrecorded"] is True
    assert len(report["corrupt"]) == 1
    assert report["checked"] == 2


class _FullUntilFreed:
    """A registry connection on a full disk: deleting or evicting rows fails with SQLite's own
    error until some blob file has been unlinked (which frees the space the journal needs)."""

    def __init__(self, conn, files):
        self._conn, self._files = conn, files
        self.refused = 0

    def execute(self, sql, *args):
        writes = sql.startswith(("DELETE FROM objects", "UPDATE objects SET evicted_at"))
        if writes and all(os.path.exists(f) for f in self._files):
            self.refused += 1
            raise sqlite3.OperationalError("database or disk is full")
        return self._conn.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._conn, name)


def test_gc_unlinks_first_when_the_registry_cannot_journal(store):
    suite = store.put_json(suite_doc("n"), "suite")
    pack = store.put_bytes(b"features" * 100, "pack")
    store.add_edges(suite, {"features": pack})
    leftovers = [store.put_bytes(f"leftover {i}".encode()) for i in range(3)]
    fresh = store.put_bytes(b"written a moment ago")
    with store.db.write() as conn:  # the leftovers are old; `fresh` is not
        conn.executemany("UPDATE objects SET created=0, last_used=0 WHERE id=?",
                         [(db_id(o),) for o in [*leftovers, pack, suite]])
    paths = [str(store.files.path(o)) for o in [*leftovers, pack, fresh]]
    full = _FullUntilFreed(store.db.conn, paths)
    store.db.conn = full
    report = gc(store, grace=60)
    assert full.refused == 1
    assert sorted(o["id"] for o in report.removed) == sorted(leftovers)
    assert not any(store.files.exists(o) for o in leftovers)
    assert store.has(fresh)  # re-checked under the lock: young blobs are never unlinked
    assert store.has(pack)

    full = _FullUntilFreed(full._conn, [str(store.files.path(pack))])
    store.db.conn = full
    report = gc(store, grace=60, max_size=1)
    assert full.refused == 1
    assert [o["id"] for o in report.evicted] == [pack]
    assert not store.has(pack)
    assert store.info(pack).evicted_at is not None
    store.db.conn = full._conn
    assert fsck(store).clean

