"""Garbage collection, disk usage and eviction by size.

Roots are refs, results, suites, the inputs of live leases and what running computations have
written so far; everything reachable from a root through edges is kept. Nothing younger than the
grace period is collected, so an artifact written a moment before its parent is recorded is
never lost.

Rows go first, files after. The sweep runs in registry write transactions of a few thousand ids:
each deletes (and commits) one batch's rows while a helper thread unlinks the files of the batch
the previous transaction deleted, and the sweeping thread joins in once its statements are done
(``os.unlink`` releases the GIL, so on a free core the kernel's unlinks, about half of gc's
work, overlap the registry's). Every unlink ends before the transaction it runs under releases
the lock, and a put re-registers a blob only under that lock after checking that its file is
there: a put of the same bytes either registered its row before the unlink began, which then
spares the file (the sweep probes for such rows whenever another write landed since its last
commit), or finds the file gone and writes it again. An interrupted gc leaves at worst blobs
without rows (``fsck`` adopts them), never rows without blobs.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import DiskFull, StoreLocked
from ._answers import Answers
from ._ids import db_id, hex_id
from ._kinds import EVICTABLE, ROOT_KINDS
from ._registry import now
from ._rows import forget_pack_rows

if TYPE_CHECKING:
    from ._base import StoreBase
    from ._reports import GcReport

DEFAULT_GRACE = 3600.0
_BATCH = 500  # ids per statement (old SQLite builds allow 999 parameters)
_TRANSACTION = 4 * _BATCH  # ids per write transaction: a few ms of holding the lock
# threads unlinking a batch's files while the sweeping thread deletes the next batch's rows (and
# then unlinks too): on two cores a second helper measured no faster, only more GIL hand-offs
_HELPERS = 1
_CHUNK = 200  # files taken at a time by a thread
# still collectable: unused since the cutoff, and no parent used since then either
_COLLECTABLE = ("max(created, last_used) < ? AND NOT EXISTS (SELECT 1 FROM edges e "
                "JOIN objects p ON p.id = e.parent "
                "WHERE e.child = objects.id AND max(p.created, p.last_used) >= ?)")


@dataclass
class _Walked:
    """What the registry held when gc walked it, for a sweep that finds it unchanged since
    (:func:`_changes` equal to ``changes``): then these sets say which of the doomed rows
    have rows elsewhere to drop, instead of a probe per row in each table."""

    changes: tuple
    # each only for the doomed (not kept) ids, in the registry's form, mostly empty
    parents: set  # ids with edges to children
    built_on: dict  # id -> hex ids of the featuresets built on it
    outputs: set  # ids some derivation names as its output
    aliased: set  # ids some alias names

    @classmethod
    def read(cls, db, changes: tuple, keep: set) -> _Walked:
        built_on: dict = defaultdict(list)
        for parent, child in db.query(
                "SELECT e.parent, e.child FROM edges e JOIN objects o ON o.id = e.parent "
                "WHERE o.kind='featureset'"):
            if child not in keep:
                built_on[child].append(hex_id(parent))
        return cls(changes,
                   {p for (p,) in db.query("SELECT DISTINCT parent FROM edges") if p not in keep},
                   built_on, _doomed(db.query("SELECT output FROM derivations"), keep),
                   _doomed(db.query("SELECT id FROM aliases"), keep))

    def forget(self, conn, keys: list, packs: list) -> None:
        """:func:`forget_lookups` and the edges delete, for rows as they were walked."""
        outputs = [fs for key in keys if key in self.built_on for fs in self.built_on[key]]
        if self.outputs:
            outputs += [hex_id(key) for key in keys if key in self.outputs]
        if outputs:
            conn.execute("DELETE FROM derivations WHERE output IN "
                         "(SELECT value FROM json_each(?))", (json.dumps(outputs),))
        aliased = [hex_id(key) for key in keys if key in self.aliased] if self.aliased else []
        if aliased:
            conn.execute("DELETE FROM aliases WHERE id IN (SELECT value FROM json_each(?))",
                         (json.dumps(aliased),))
        forget_pack_rows(conn, packs)
        conn.execute(f"DELETE FROM runs WHERE object IN ({_marks(keys)})", keys)  # noqa: S608
        conn.execute(f"DELETE FROM data_names WHERE object IN ({_marks(keys)})", keys)  # noqa: S608
        conn.execute(f"DELETE FROM result_notes WHERE object IN ({_marks(keys)})", keys)  # noqa: S608
        parents = [key for key in keys if key in self.parents] if self.parents else []
        if parents:
            conn.execute(f"DELETE FROM edges WHERE parent IN ({_marks(parents)})", parents)  # noqa: S608


def _doomed(rows: list[tuple], keep: set) -> set:
    """The registry ids of the hex ids in ``rows`` that are not kept (``keep``: registry ids)."""
    keys = {db_id(oid) for (oid,) in rows if oid is not None}
    return keys - keep


def reachable(
    store: StoreBase, young_since: float | None = None, roots_only_pinned: bool = False,
    registry_ids: bool = False,
) -> set:
    """Every id reachable through edges from a root.

    Roots are refs, results, suites, the inputs of live leases and every object created or
    used since the oldest live lease began (the outputs in progress), and, with
    ``young_since``, every object created or used since then: a fresh artifact's inputs
    are needed as much as the artifact itself. ``roots_only_pinned`` keeps refs and what
    live leases need only (what size eviction must never touch). ``registry_ids`` returns
    the ids in the registry's form (:func:`~vbstore.store.db_id`), sparing gc a
    conversion per object.
    """
    keys = _reachable_keys(store, young_since, roots_only_pinned)
    return keys if registry_ids else {hex_id(key) for key in keys}


def _reachable_keys(store: StoreBase, young_since: float | None, roots_only_pinned: bool,
                    unrooted: set | frozenset = frozenset()) -> set:
    roots = {db_id(r[0]) for r in store.db.query("SELECT id FROM refs")}
    leases = store.live_leases()
    for lease in leases:
        roots |= {db_id(oid) for oid in lease["inputs"]}
    # a running computation publishes outputs (packs, heads) long before it records the
    # derivation that makes them reachable, however long it runs: every object written or
    # used since the oldest live lease began may be one of them
    since = min([lease["since"] for lease in leases]
                + ([young_since] if young_since is not None else []), default=None)
    kinds = () if roots_only_pinned else ROOT_KINDS
    if since is not None or kinds:
        marks = ",".join("?" * len(kinds))
        roots |= {r[0] for r in store.db.query(
            f"SELECT id FROM objects WHERE kind IN ({marks}) "  # noqa: S608 - marks is a fixed "?" list
            "OR max(created, last_used) >= ?", (*kinds, math.inf if since is None else since))}
    roots -= unrooted  # what ``forget`` asks about: the walk without these roots
    # breadth first, in SQL: each round reads the children of the objects it just reached
    # that have any (an index range each), never a map of the whole edges table
    parents = {parent for (parent,) in store.db.query("SELECT DISTINCT parent FROM edges")}
    seen = set(roots)
    frontier = list(seen & parents)
    while frontier:
        found: set = set()
        for i in range(0, len(frontier), _BATCH):
            some = frontier[i : i + _BATCH]
            found.update(child for (child,) in store.db.query(
                f"SELECT child FROM edges WHERE parent IN ({_marks(some)})", some))  # noqa: S608
        found -= seen
        seen |= found
        frontier = list(found & parents)
    return seen


def gc(store: StoreBase, grace: float = DEFAULT_GRACE, dry_run: bool = False,
       max_size: int | None = None) -> GcReport:
    """Remove unreachable objects older than ``grace`` seconds, then evict down to ``max_size``.

    On a full disk the registry has no room even to journal a deletion: every blob this gc
    will remove (unreachable, or evicted by size) is then unlinked first, each re-checked
    under the registry lock, and the rows are written in the space that freed. A crash in
    between leaves rows without blobs, which lookups treat as misses and the next gc removes.
    """
    if not dry_run:
        store.writable("collect garbage (`gc --dry-run` says what would go)")
    from ._reports import GcReport  # loads with its first report (_reports says why)

    report = GcReport(dry_run=dry_run)
    # first, as it needs no registry write: a writer killed mid-write (a partial pack) left
    # these behind, and on a full disk they may be what frees room for the rest
    report._temps = store.files.remove_dead_temps(dry_run=dry_run)
    if not dry_run and store.db.one("SELECT 1 FROM answers LIMIT 1"):
        # the answer cache (_answers.py), refilled by the next gets; every answer is
        # re-checked anyway, so on a full disk it stays as it is
        with contextlib.suppress(DiskFull):
            Answers(store).clear()
    cutoff = now() - grace
    # the registry as the walk will see it: while no write lands after this, the walk's
    # verdicts stand and the sweep need not re-check each row
    version = store.db.one("PRAGMA data_version")
    assert version is not None  # a pragma always answers one row
    seen = version[0], store.db.conn.total_changes  # as _changes reads them
    keep = reachable(store, young_since=cutoff, registry_ids=True)
    rows = store.db.query("SELECT id, kind, CASE WHEN evicted_at IS NULL THEN size ELSE 0 END "
                          "FROM objects")
    doomed = [row for row in rows if row[0] not in keep]
    # what `du` counts afterwards: present objects kept (an evicted row holds no blob)
    evicted = {r[0] for r in store.db.query(
        "SELECT id FROM objects WHERE evicted_at IS NOT NULL")}
    report.kept = sum(1 for row in rows if row[0] in keep and row[0] not in evicted)
    del rows, evicted
    walked = None if dry_run else _Walked.read(store.db, seen, keep)
    del keep
    chosen = [] if max_size is None else _eviction(
        store, max_size, cutoff, {row[0] for row in doomed}, report)
    report.kept -= len(chosen)  # evicted now: no longer present
    if dry_run:
        report._rows, report.evicted = doomed, chosen
        return report
    pending: list = []
    try:
        _sweep(store, doomed, chosen, cutoff, report, walked, pending)
    except DiskFull:
        base = os.fspath(store.files.objects)
        with store.db.write() as conn:  # reads only: needs no space, and puts wait
            _unlink_keys(base, _absent(conn, pending))  # rows deleted before it filled
            _unlink_where(conn, base, [row[0] for row in doomed], _COLLECTABLE,
                          (cutoff, cutoff))
            _unlink_where(conn, base, [db_id(o["id"]) for o in chosen],
                          "max(created, last_used) < ?", (cutoff,))
        _sweep(store, doomed, chosen, cutoff, report, None, [])
    return report


def _sweep(store: StoreBase, doomed: list[tuple], chosen: list[dict[str, Any]], cutoff: float,
           report: GcReport, walked: _Walked | None, pending: list) -> None:
    """Delete the objects of ``doomed`` (registry rows, id first) and evict ``chosen``; safe
    to run again (rows are re-checked unless nothing but this sweep wrote since ``walked``).

    ``pending`` holds the ids whose rows a committed transaction deleted and whose files
    the next one has yet to unlink: what the caller must still unlink should this raise.
    """
    # a thread pool (with logging: ~4 ms of imports) only where gc removes blobs,
    # never on a cached `get`
    from concurrent.futures import ThreadPoolExecutor

    since = None if walked is None else walked.changes
    folders = _open_folders(os.fspath(store.files.objects)) if doomed else {}
    try:
        with ThreadPoolExecutor(_HELPERS) as pool:
            # one transaction more than there are batches: the last unlinks the last batch
            for start in range(0, len(doomed) + _TRANSACTION, _TRANSACTION):
                batch = doomed[start : start + _TRANSACTION]
                if not batch and not pending:
                    break
                since, walked = _sweep_step(store, batch, cutoff, report, walked, since,
                                            pending, (pool, folders))
    finally:
        for folder in folders.values():
            os.close(folder)
    if chosen:
        report.evicted += _mark_evicted(store, chosen, cutoff)
        _unlink_unregistered(store, [o["id"] for o in report.evicted], evicted_only=True)


def _sweep_step(store: StoreBase, batch: list[tuple], cutoff: float, report: GcReport,
                walked: _Walked | None, since: tuple | None, pending: list,
                unlinkers: tuple) -> tuple[tuple, _Walked | None]:
    """One write transaction: unlink the files of ``pending`` while the rows of ``batch``
    are deleted; then ``pending`` is what this one deleted. ``unlinkers`` is the thread
    pool and the fan-out folders' descriptors (:func:`_open_folders`).

    ``since`` is :func:`_changes` as this gc last left the registry. While it still holds,
    no other write has landed: nothing re-registered ``pending`` (its files go without a
    probe) and, with ``walked``, every row of ``batch`` is as the walk saw it, collectable,
    and is deleted without a re-check. Once another write landed, no batch trusts the walk
    again. Returns the new ``since`` and ``walked``.
    """
    with store.db.write() as conn:
        quiet = since is not None and _changes(conn) == since
        if not quiet:
            walked = None
        keys = pending if quiet else _absent(conn, pending)
        pool, folders = unlinkers
        base = os.fspath(store.files.objects)
        # small chunks, taken by whichever thread is free: the helper from the start, this
        # thread once its statements are done
        chunks = iter([keys[i : i + _CHUNK] for i in range(0, len(keys), _CHUNK)])
        helping = [pool.submit(_unlink_chunks, base, chunks, folders)
                   for _ in range(_HELPERS)] if keys else []
        try:
            gone = _delete_rows(store, conn, batch, cutoff, walked)
            _unlink_chunks(base, chunks, folders)
        finally:  # every unlink ends before the lock is released, whatever happened
            errors = _join(helping)
            pending.clear()
        if errors:  # a blob that could not be unlinked: this batch's rows stay
            raise errors[0]
        since = _changes(conn)  # read under the lock: no other writer is between
    pending += [row[0] for row in gone]
    report._rows += gone
    return since, walked


def _delete_rows(store: StoreBase, conn, batch: list[tuple], cutoff: float,
                 walked: _Walked | None) -> list[tuple]:
    """Delete the rows of ``batch`` that are still collectable (all of them, unchecked,
    with ``walked``) and every row pointing at them; return the deleted ones."""
    keys = [row[0] for row in batch]
    if walked is not None:
        for i in range(0, len(keys), _BATCH):
            some = keys[i : i + _BATCH]
            conn.execute(f"DELETE FROM objects WHERE id IN ({_marks(some)})", some)  # noqa: S608
            walked.forget(conn, some, [row[0] for row in batch[i : i + _BATCH]
                                       if row[1] == "pack"])
        return batch
    collected: set = set()
    for i in range(0, len(keys), _BATCH):
        some = keys[i : i + _BATCH]
        # a put or lookup may have used it since we looked
        # ...and so may a parent recorded since the reachability walk
        rows = conn.execute(
            f"SELECT id, kind FROM objects WHERE id IN ({_marks(some)}) "  # noqa: S608
            f"AND {_COLLECTABLE}", (*some, cutoff, cutoff)).fetchall()
        gone = [key for key, _ in rows]
        if not gone:
            continue
        conn.execute(f"DELETE FROM objects WHERE id IN ({_marks(gone)})", gone)  # noqa: S608
        forget_lookups(conn, gone, [key for key, kind in rows if kind == "pack"])
        conn.execute(f"DELETE FROM edges WHERE parent IN ({_marks(gone)})", gone)  # noqa: S608
        collected.update(gone)
    return [row for row in batch if row[0] in collected]


def _unlink_unregistered(store: StoreBase, oids: list[str], evicted_only: bool = False) -> None:
    """Unlink the blobs of ``oids`` whose row is (still) gone, or (still) evicted."""
    with store.db.write() as conn:  # a concurrent put re-registers under this same lock
        for i in range(0, len(oids), _BATCH):
            some = [db_id(oid) for oid in oids[i : i + _BATCH]]
            rows = dict(conn.execute(
                f"SELECT id, evicted_at FROM objects WHERE id IN ({_marks(some)})",  # noqa: S608
                some))
            _unlink_keys(os.fspath(store.files.objects),
                         [key for key in some if key not in rows
                          or (evicted_only and rows[key] is not None)])


def forget_lookups(conn, keys: list, packs: list | None = None) -> None:
    """Drop every row that would point a lookup at these objects (registry ids) or at a
    featureset built from one of them; ``packs``, when known, are those that are packs."""
    featuresets = [hex_id(r[0]) for r in conn.execute(
        "SELECT DISTINCT e.parent FROM edges e JOIN objects o ON o.id = e.parent "  # noqa: S608
        f"WHERE e.child IN ({_marks(keys)}) AND o.kind='featureset'", keys)]
    oids = [hex_id(key) for key in keys]
    conn.execute("DELETE FROM derivations WHERE output IN (SELECT value FROM json_each(?))",
                 (json.dumps(oids + featuresets),))
    conn.execute("DELETE FROM aliases WHERE id IN (SELECT value FROM json_each(?))",
                 (json.dumps(oids),))
    conn.execute(f"DELETE FROM runs WHERE object IN ({_marks(keys)})", keys)  # noqa: S608
    forget_pack_rows(conn, keys if packs is None else packs)


def _eviction(store: StoreBase, max_size: int, cutoff: float, gone: set,
              report: GcReport) -> list[dict[str, Any]]:
    """What to evict so the store fits ``max_size`` once ``gone`` (registry ids) is removed."""
    total = sum(size for key, size in store.db.query(
        "SELECT id, size FROM objects WHERE evicted_at IS NULL") if key not in gone)
    working_set = max((s for (s,) in store.db.query(
        "SELECT sum(o.size) FROM edges e JOIN objects o ON o.id = e.child "
        "WHERE o.kind='pack' GROUP BY e.parent")), default=0) or 0
    if working_set > max_size:
        report.warnings.append(
            f"--max-size {human_bytes(max_size)} is smaller than one feature set "
            f"({human_bytes(working_set)}): "
            "the next run will have to recompute its features"
        )
    if total <= max_size:
        return []
    # what a ref names or a running computation needs, directly or through its inputs
    pinned = _reachable_keys(store, None, roots_only_pinned=True)
    order = " ".join(f"WHEN '{k}' THEN {i}" for i, k in enumerate(EVICTABLE))
    marks = ",".join("?" * len(EVICTABLE))
    # marks is a fixed "?" list; order is built from the EVICTABLE kind constants
    candidates = store.db.query(
        f"SELECT id, kind, size FROM objects WHERE kind IN ({marks}) AND evicted_at IS NULL "  # noqa: S608
        f"AND max(created, last_used) < ? ORDER BY CASE kind {order} END, last_used",
        (*EVICTABLE, cutoff),
    )
    chosen = []
    for key, kind, size in candidates:
        if total <= max_size:
            break
        if key in pinned or key in gone:
            continue
        chosen.append({"id": hex_id(key), "kind": kind, "size": size})
        total -= size
    if total > max_size:
        report.warnings.append(
            f"the store stays at {human_bytes(total)}, above --max-size "
            f"{human_bytes(max_size)}: the rest is "
            "used within --grace, needed by a ref or a running computation, or not "
            "recomputable (weights, manifests, results, suites); --grace 0 also evicts "
            "features used recently"
        )
    return chosen


def _mark_evicted(store: StoreBase, chosen: list[dict[str, Any]],
                  cutoff: float) -> list[dict[str, Any]]:
    evicted = []
    with store.db.write() as conn:
        for obj in chosen:
            if conn.execute(
                "UPDATE objects SET evicted_at=? WHERE id=? AND evicted_at IS NULL "
                "AND max(created, last_used) < ?",
                (now(), db_id(obj["id"]), cutoff),
            ).rowcount:
                forget_lookups(conn, [db_id(obj["id"])])
                evicted.append(obj)
    return evicted


def feature_packs(store: StoreBase, backbones: list[str] | None = None) -> list[dict[str, Any]]:
    """The present feature packs (``id``, ``kind``, ``size``) of the featuresets built by
    ``backbones`` (backbone object ids; None: every pack): what VisBench calls its feature
    cache."""
    if backbones is None:
        rows = store.db.query("SELECT id, kind, size FROM objects WHERE kind='pack' AND "
                              "evicted_at IS NULL ORDER BY id")
    else:
        keys = [db_id(oid) for oid in backbones]
        rows = store.db.query(  # _marks is a fixed "?" list
            "SELECT DISTINCT o.id, o.kind, o.size FROM edges f JOIN edges p ON "  # noqa: S608
            "p.parent = f.parent AND p.role = 'pack' JOIN objects o ON o.id = p.child "
            f"WHERE f.role = 'backbone' AND f.child IN ({_marks(keys)}) AND o.kind = 'pack' "
            "AND o.evicted_at IS NULL ORDER BY o.id", keys) if keys else []
    return [{"id": hex_id(key), "kind": kind, "size": size} for key, kind, size in rows]


def evict_features(store: StoreBase, backbones: list[str] | None = None) -> list[dict[str, Any]]:
    """Evict the feature packs of ``backbones`` (None: every pack), VisBench's ``cache
    clear``: their blobs go, their rows stay marked evicted, and the next request that needs
    them extracts them again. A ref does not keep them (they are recomputable); a running
    computation does, so this refuses while one holds a lease.

    Raises:
        StoreLocked: a computation is running in this store.
    """
    store.writable("evict features")
    leases = store.live_leases()
    if leases:
        raise StoreLocked(
            f"{len(leases)} computation{'s' if len(leases) != 1 else ''} running in "
            f"{store.root}: its features may be in use",
            hint="clear the feature cache once it has finished")
    chosen = feature_packs(store, backbones)
    evicted = _mark_evicted(store, chosen, now() + 1)  # whenever last used
    _unlink_unregistered(store, [o["id"] for o in evicted], evicted_only=True)
    return evicted


def du(store: StoreBase) -> dict[str, Any]:
    """Bytes and counts per kind, for present and evicted objects."""
    kinds = {}
    for kind, count, size, evicted in store.db.query(
        "SELECT kind, count(*), sum(CASE WHEN evicted_at IS NULL THEN size ELSE 0 END), "
        "sum(evicted_at IS NOT NULL) FROM objects GROUP BY kind ORDER BY kind"
    ):
        kinds[kind] = {"count": count - evicted, "bytes": size, "evicted": evicted}
    db_bytes = sum(
        os.path.getsize(p) for p in store.root.glob("registry.db*") if p.is_file()
    )
    return {
        "store": str(store.root),
        "kinds": kinds,
        "objects": sum(k["count"] for k in kinds.values()),
        "bytes": sum(k["bytes"] for k in kinds.values()),
        "registry_bytes": db_bytes,
    }


def human_bytes(size: float) -> str:
    """``5242880`` -> ``5.0 MiB``: sizes in messages as people write them (--max-size 5M)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def _unlink_where(conn, base: str, keys: list, condition: str, params: tuple) -> None:
    """Unlink the blob of each of ``keys`` (registry ids) whose row still meets ``condition``
    (SQL on objects)."""
    for i in range(0, len(keys), _BATCH):
        some = keys[i : i + _BATCH]
        _unlink_keys(base, [key for (key,) in conn.execute(
            f"SELECT id FROM objects WHERE id IN ({_marks(some)}) AND {condition}",  # noqa: S608
            (*some, *params))])


def _absent(conn, keys: list) -> list:
    """Those of ``keys`` (registry ids) without a row in ``objects``."""
    present: set = set()
    for i in range(0, len(keys), _BATCH):
        some = keys[i : i + _BATCH]
        present.update(key for (key,) in conn.execute(
            f"SELECT id FROM objects WHERE id IN ({_marks(some)})", some))  # noqa: S608
    return [key for key in keys if key not in present]


def _unlink_keys(base: str, keys: list, folders: dict[str, int] | None = None) -> None:
    """Unlink the blob of each of ``keys`` (registry ids) from the objects folder ``base``,
    as :meth:`~vbstore.store.ObjectFiles.fspath` names it, relative to the fan-out folder's
    descriptor in ``folders`` when there is one (the kernel then resolves one name, not the
    whole path: ~10 % of an unlink on tmpfs)."""
    folders = folders or {}
    for key in keys:
        oid = key.hex() if isinstance(key, bytes) else key  # hex_id, inline: no call per blob
        folder = folders.get(oid[:2])
        try:
            if folder is None:
                os.unlink(f"{base}/{oid[:2]}/{oid[2:]}")
            else:
                os.unlink(oid[2:], dir_fd=folder)
        except FileNotFoundError:
            pass


def _unlink_chunks(base: str, chunks, folders: dict[str, int]) -> None:
    """:func:`_unlink_keys` for each chunk of keys left in the iterator ``chunks`` (several
    threads share one: ``next`` on a list iterator is atomic)."""
    for keys in chunks:
        _unlink_keys(base, keys, folders)


def _open_folders(base: str) -> dict[str, int]:
    """A descriptor of each fan-out folder of ``base`` (vbstore never removes one); fewer,
    or none, when descriptors run out (those blobs are then unlinked by path)."""
    folders: dict[str, int] = {}
    try:
        with os.scandir(base) as entries:
            for entry in entries:
                if len(entry.name) == 2 and entry.is_dir():
                    folders[entry.name] = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        pass
    return folders


def _join(futures: list) -> list[BaseException]:
    """Wait for every future, even through Ctrl-C (raised once all are done): an unlink must
    not outlive the write lock it runs under. Returns the errors they raised."""
    interrupted = None
    for future in futures:
        while True:
            try:
                future.exception()
                break
            except KeyboardInterrupt as exc:
                interrupted = exc
    if interrupted is not None:
        raise interrupted
    return [error for error in (future.exception() for future in futures) if error is not None]


def _changes(conn) -> tuple[int, int]:
    """What moves when a write is committed: by another connection (``data_version``) or by
    this one (``total_changes``). Read under the write lock (or before a walk), two equal
    values mean no write landed in between."""
    return conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes


def _marks(values: list) -> str:
    """``?,?,...``: one placeholder per value (batches stay far below SQLite's limit)."""
    return ",".join("?" * len(values))
