"""``fsck``: prove the store is intact, or say exactly what is not.

Re-hashes every blob on a thread pool (BLAKE3 releases the GIL), reconciles registry rows with
files, removes temp files that dead writers left, and reports dangling edges. Faults (a corrupt
blob, a registered blob that is missing, a dangling edge) make the report unclean; adopting an
intact blob a crash left without its row, marking present again an intact blob whose row says
evicted (put back by hand after a repair), or removing dead temp files, is routine housekeeping.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import sqlite3
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import DiskFull, NewerRegistry, VbstoreError
from ._crosscheck import cross_check, forget_rows
from ._gc import forget_lookups
from ._ids import db_id, hex_id
from ._kinds import KINDS
from ._objects import DEAD_TEMP_AGE, hash_and_stat, hash_file
from ._registry import now, schema_problems
from ._tensors import read_safetensors_header

if TYPE_CHECKING:
    from ._base import StoreBase
    from ._reports import FsckReport

_BATCH = 500  # ids per statement (old SQLite builds allow 999 parameters)


def sniff_kind(path) -> str:
    """The kind of an unregistered blob, read from its own content (JSON field or header)."""
    try:
        with open(path, "rb") as handle:
            if handle.read(1) == b"{":
                handle.seek(0)
                kind = json.loads(handle.read()).get("kind")
                return kind if kind in KINDS else "blob"
        header, _ = read_safetensors_header(path)
        kind = (header.get("__metadata__") or {}).get("vbstore.kind")
        return kind if kind in KINDS else "blob"
    except Exception:  # any undecodable content is just a blob
        return "blob"


def fsck(store: StoreBase, jobs: int | None = None, repair: bool = False,
         refetch: Callable[[str], bool] | None = None,
         answers: Callable[[dict[str, Any], str], list[str]] | None = None,
         index: Callable[[list[str]], list[str]] | None = None) -> FsckReport:
    """Check every blob and row.

    With ``repair``, damaged blobs are moved to ``quarantine/``; ``refetch(oid)`` may bring
    each back (from a remote), otherwise it is forgotten so the next ``get`` recomputes it.
    Rows that carry numbers (feature rows, evaluation scores and, given ``answers``,
    derivation outputs: see :mod:`._crosscheck`) are compared with their blobs; a row that
    disagrees is a fault, which ``repair`` forgets. An evaluation blob stored whole that
    the leaderboard index lacks (a killed board pull's) is a fault too; ``repair`` hands them to
    ``index(ids)`` (vbstore.suites' ``index_stored``, which judges each as a pull does),
    which returns the ids it indexed.
    A read-only store is checked without any housekeeping (``repair`` is refused). A
    damaged registry (SQLite's integrity check fails, or it cannot be opened) is reported
    and left untouched; :func:`~vbstore.store.rebuild_registry` makes a new one from the blobs.
    """
    if repair:
        store.writable("repair it")
    start = time.perf_counter()
    from ._reports import FsckReport  # loads with its first report (_reports says why)

    report = FsckReport()
    tidy = not store.read_only
    report.temp_removed = [name for name, _ in store.files.remove_dead_temps()] if tidy else []
    report.locks_removed = _remove_stale_locks(store) if tidy else []
    report.registry_errors = registry_errors(store)
    # a damaged registry is neither read nor written; the blobs are still checked
    damaged = bool(report.registry_errors)
    # a symlink under objects/ is refused, never followed (it could read anything)
    # rows before files: a blob published in between is then an extra file (adopted or
    # already registered), never a "missing" one
    rows = {} if damaged else {hex_id(key): (key, evicted) for key, evicted in
                               store.db.query("SELECT id, evicted_at FROM objects")}
    files, report.unsafe = store.files.scan()

    verified = []
    # a thread pool (with logging: ~4 ms of imports) only where blobs are hashed,
    # never on a cached `get`
    from concurrent.futures import ThreadPoolExecutor

    workers = jobs or min(8, (os.cpu_count() or 2))
    items = list(files.items())
    # a few hundred files per task: one future per file would cost more than hashing it
    step = max(1, min(256, len(items) // (4 * workers)))
    with ThreadPoolExecutor(workers) as pool:
        for oid, digest, st in itertools.chain.from_iterable(pool.map(
                _check_files, (items[i : i + step] for i in range(0, len(items), step)))):
            if st == -1:
                continue
            size = st.st_size if st else 0
            report.checked += 1
            report.bytes += size
            if tidy and st and st.st_mode & 0o222 and digest == oid:  # blobs are 0444
                os.chmod(files[oid], 0o444)
                report.modes_fixed.append(oid)
            if digest != oid:
                report.corrupt.append(oid)
            elif damaged:
                continue
            elif oid not in rows:
                report.adopted.append(oid)
            elif rows[oid][1] is not None:  # whole on disk, yet its row says evicted
                report.revived.append(oid)
            else:
                verified.append(rows[oid][0])  # its registry id, as the row holds it
    if damaged:  # writing through a damaged index would spread the damage
        report.seconds = time.perf_counter() - start
        return report
    for oid, (_key, evicted) in rows.items():
        if oid not in files and evicted is None and not store.files.exists(oid):
            still = store.db.one("SELECT evicted_at FROM objects WHERE id=?", (db_id(oid),))
            if still is not None and still[0] is None:  # not collected meanwhile
                report.missing.append(oid)
    registered = {key for key, _ in rows.values()}
    known = set(rows) | set(files)
    for parent, child, role in store.db.query("SELECT parent, child, role FROM edges"):
        if parent in registered and child in registered:  # most edges: no hex needed
            continue
        parent, child = hex_id(parent), hex_id(child)
        if parent not in known or child not in known:
            report.dangling_edges.append({"parent": parent, "child": child, "role": role})
    report.mismatched = cross_check(store, answers)
    if not tidy:
        report.unindexed = unindexed(store)
        report.seconds = time.perf_counter() - start
        return report
    adopted = [(oid, sniff_kind(files[oid]), os.path.getsize(files[oid]))
               for oid in report.adopted if os.path.exists(files[oid])]
    try:
        _record_checked(store, verified, report.revived, rows, adopted)
    except DiskFull:
        if repair:  # a repair must write what it does; nothing was changed
            raise
        # the check is whole: only its bookkeeping (verification times, adopted rows) needs
        # space, and a full disk is where fsck is wanted most
        report.unrecorded = True
        report.unindexed = unindexed(store)
        report.seconds = time.perf_counter() - start
        return report
    report.unindexed = unindexed(store)  # after adopting: a killed pull left no rows
    if repair:
        with store.db.write() as conn:
            forget_rows(conn, report.mismatched)
        if index is not None and report.unindexed:
            done = set(index(report.unindexed))
            report.indexed = [oid for oid in report.unindexed if oid in done]
            report.unindexed = [oid for oid in report.unindexed if oid not in done]
        for oid in report.unsafe:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(store.files.path(oid))  # the link only, never its target
        report.repaired, report.refetched = quarantine(store, report.corrupt + report.missing,
                                                       refetch)
    report.seconds = time.perf_counter() - start
    return report


def _record_checked(store: StoreBase, verified: list[Any], revived: list[str],
                    rows: dict[str, Any], adopted: list[tuple[str, str, int]]) -> None:
    """Record what fsck verified, revived and adopted, in one transaction."""
    with store.db.write() as conn:
        t = now()
        # in key order: the b-tree is walked once, not sought at random; a few hundred ids
        # per statement, not one statement per id
        verified.sort()
        for i in range(0, len(verified), _BATCH):
            some = verified[i : i + _BATCH]
            conn.execute(f"UPDATE objects SET verified_at=? WHERE id IN "  # noqa: S608
                         f"({','.join('?' * len(some))})", (t, *some))
        # a blob put back after it was moved aside or evicted (by hand, or by a writer
        # that skips the registry) is present again: its row must say so, or show, du and
        # gc would count it gone. Re-checked under the lock: gc may have evicted it again.
        conn.executemany(
            "UPDATE objects SET verified_at=?, evicted_at=NULL WHERE id=?",
            [(t, rows[oid][0]) for oid in revived if store.files.exists(oid)],
        )
        conn.executemany(  # re-checked under the lock: gc may have unlinked it meanwhile
            "INSERT OR IGNORE INTO objects(id, kind, size, created, last_used) "
            "VALUES (?,?,?,?,?)",
            [(db_id(oid), kind, size, t, t) for oid, kind, size in adopted
             if store.files.exists(oid)],
        )


def quarantine(store: StoreBase, oids: list[str], refetch) -> tuple[list[str], list[str]]:
    """Move damaged blobs out of ``objects/``; re-fetch them or forget them.

    A blob that is not re-fetched is forgotten with everything built on it: every
    derivation whose output reaches it through edges (the featuresets holding a pack, the
    heads trained on them, the results of those heads) is dropped, so the next ``get``
    recomputes them instead of serving a number that may have come from the damaged bytes.
    A re-fetched blob has its exact bytes back, and every read verifies them, so what was
    built on it stands.
    """
    repaired, refetched = [], []
    for oid in oids:
        with store.db.write() as conn:  # re-checked under the lock: it may be whole again
            if store.files.exists(oid) and hash_file(store.files.path(oid)) == oid:
                continue
            move_aside(store, oid)
        repaired.append(oid)
        if refetch is not None and refetch(oid):
            refetched.append(oid)
            with store.db.write() as conn:  # its bytes were hashed as they arrived
                conn.execute("UPDATE objects SET verified_at=? WHERE id=?",
                             (now(), db_id(oid)))
            continue
        with store.db.write() as conn:
            if store.files.exists(oid):  # republished whole meanwhile
                continue
            # kept as an evicted row, so edges to it stay explainable, not dangling
            conn.execute("UPDATE objects SET evicted_at=? WHERE id=?", (now(), db_id(oid)))
            forget_lookups(conn, [db_id(oid)])
            _forget_built_on(conn, oid)
    return repaired, refetched


def move_aside(store: StoreBase, oid: str) -> None:
    """Move a damaged blob to ``quarantine/`` so a recompute or re-fetch can publish it again.

    Raises:
        StoreReadOnly: the store is read-only (its damaged blob stays where it is).
    """
    store.writable(f"move the damaged blob {oid[:12]} aside")
    aside = store.root / "quarantine"
    aside.mkdir(exist_ok=True)
    try:
        os.replace(store.files.path(oid), aside / oid)
    except FileNotFoundError:
        pass


def registry_errors(store: StoreBase) -> list[str]:
    """SQLite's own integrity check of ``registry.db`` (pages, indexes, constraints), then
    its tables, views and indexes against the schema the migrations make.

    Raises:
        NewerRegistry: a newer vbstore wrote it: not damage, and not to be rebuilt.
    """
    try:
        rows = store.db.query("PRAGMA integrity_check(20)")
    except NewerRegistry:
        raise
    except VbstoreError as exc:  # so damaged it cannot even be opened or read
        return [str(exc.args[0]) if exc.args else str(exc)]
    problems = [row[0] for row in rows]
    if problems != ["ok"]:
        return problems
    try:
        return schema_problems(store.db.conn)
    except sqlite3.Error as exc:
        return [f"the registry's schema cannot be read ({exc})"]


def _remove_stale_locks(store: StoreBase) -> list[str]:
    """Remove ``locks/*.lock`` files nobody holds and nobody touched for a day."""
    removed = []
    for entry in os.scandir(store.root / "locks"):
        if not entry.name.endswith(".lock") or not entry.is_file(follow_symlinks=False):
            continue
        try:
            if time.time() - entry.stat().st_mtime <= DEAD_TEMP_AGE:
                continue
            fd = os.open(entry.path, os.O_RDWR)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held: its owner is alive
        except BlockingIOError:
            continue
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                removed.append(entry.name)
        finally:
            os.close(fd)
    return removed


def unindexed(store) -> list[str]:
    """Evaluation blobs present here that the ``evaluations`` table does not list (what a board
    pull killed between storing and indexing left), in id order. The original of a re-judged
    evaluation is indexed as its copy (the ``rejudged_from`` edge to it). Suites are not
    listed: a suite version already here keeps another document of it unindexed on purpose."""
    rows = {hex_id(r[0]) for r in store.db.query("SELECT id FROM evaluations")}
    rows |= {hex_id(r[0]) for r in store.db.query(
        "SELECT child FROM edges WHERE role='rejudged_from'")}
    return sorted(oid for oid in (hex_id(r[0]) for r in store.db.query(
        "SELECT id FROM objects WHERE kind='evaluation' AND evicted_at IS NULL"))
        if oid not in rows and store.files.exists(oid))


def _check_files(items: list[tuple[str, str]]) -> list[tuple[str, str | None, Any]]:
    """``(id, digest, stat)`` per file; stat -1 when a concurrent gc removed it, None when it
    cannot be read."""
    out: list[tuple[str, str | None, Any]] = []
    for oid, path in items:
        try:
            out.append((oid, *hash_and_stat(path)))
        except FileNotFoundError:
            out.append((oid, None, -1))
        except OSError:
            out.append((oid, None, None))
    return out


def _forget_built_on(conn, oid: str) -> None:
    """Drop the derivation records and aliases of everything that reaches ``oid`` through edges."""
    built_on = [hex_id(row[0]) for row in conn.execute(
        "WITH RECURSIVE up(id) AS (SELECT parent FROM edges WHERE child = ? "
        "UNION SELECT e.parent FROM edges e JOIN up ON e.child = up.id) SELECT id FROM up",
        (db_id(oid),))]
    conn.executemany("DELETE FROM derivations WHERE output = ?", [(i,) for i in built_on])
    conn.executemany("DELETE FROM aliases WHERE id = ?", [(i,) for i in built_on])
