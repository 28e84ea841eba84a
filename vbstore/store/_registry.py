"""The SQLite registry beside the blobs: rows, edges, derivations, refs, aliases, file states.

One connection per :class:`Registry`, autocommit mode, WAL. Every write runs inside
``BEGIN IMMEDIATE`` (:meth:`Registry.write`) so two processes never deadlock upgrading a read
lock, and a busy timeout makes writers queue instead of failing with "database is locked".
Schema changes happen only through the numbered :data:`MIGRATIONS`.

A read-only registry (a shared cache on a read-only mount) is opened with ``mode=ro``, or, when
SQLite cannot create the WAL index beside it, as ``immutable``: it serves queries, and
:meth:`Registry.write` raises :class:`~vbstore.errors.StoreReadOnly` instead of touching it.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from ..errors import (
    DiskFull,
    NewerRegistry,
    StoreIOError,
    StoreLocked,
    StoreReadOnly,
    VbstoreError,
)
from ._ids import db_id
from ._layout import REGISTRY_VERSION

BUSY_TIMEOUT_MS = 60_000


def _m1_initial(db) -> None:
    db["objects"].create(
        {"id": str, "kind": str, "size": int, "created": float, "last_used": float,
         "verified_at": float, "evicted_at": float},
        pk="id", not_null={"kind", "size", "created", "last_used"},
    )
    db["objects"].create_index(["kind"])
    db["objects"].create_index(["last_used"])
    db["edges"].create(
        {"parent": str, "child": str, "role": str}, pk=("parent", "role", "child")
    )
    db["edges"].create_index(["child"])
    db["derivations"].create(
        {"key": str, "op": str, "output": str, "spec": str, "created": float},
        pk="key", not_null={"op", "output", "spec", "created"},
    )
    db["derivations"].create_index(["output"])
    db["refs"].create({"name": str, "id": str, "updated": float}, pk="name")
    db["aliases"].create({"spec": str, "id": str, "created": float}, pk="spec")
    db["file_state"].create(
        {"dev": int, "inode": int, "size": int, "mtime_ns": int, "ctime_ns": int, "hash": str},
        pk=("dev", "inode"),
    )
    db["feature_rows"].create(
        {"extractor": str, "image": str, "pack": str, "row": int},
        pk=("extractor", "image"),
    )
    db["feature_rows"].create_index(["pack"])
    db["leases"].create(
        {"key": str, "pid": int, "host": str, "heartbeat": float, "inputs": str},
        pk="key",
    )


def _m2_suites(db) -> None:
    # Indexes over suite and evaluation blobs, so a leaderboard reads rows, never blobs.
    db["suites"].create(
        {"slug": str, "version": int, "id": str, "protocol_digest": str, "created": float},
        pk=("slug", "version"), not_null={"id", "protocol_digest", "created"},
    )
    db["evaluations"].create(
        {"id": str, "suite": str, "checkpoint": str, "label": str, "weights": str, "state": str,
         "ranked": int, "evidence": str, "recorded": float, "scores": str, "reasons": str},
        pk="id", not_null={"suite", "checkpoint", "state", "ranked", "evidence", "recorded"},
    )
    # covers the leaderboard's per-checkpoint window without reading the scores
    db["evaluations"].create_index(["suite", "evidence", "checkpoint", "ranked", "recorded", "id"])


# The hot tables at 10^8 images: ids as 32-byte BLOBs, WITHOUT ROWID where the primary key is
# how rows are found (no rowid b-tree beside a key index), and feature rows naming their
# extractor and pack by small integers (the extractors and packs tables) instead of 64-hex text.
_M3_TABLES = {
    "objects": (
        "id BLOB NOT NULL PRIMARY KEY, kind TEXT NOT NULL, size INTEGER NOT NULL, "
        "created FLOAT NOT NULL, last_used FLOAT NOT NULL, verified_at FLOAT, evicted_at FLOAT",
        "vb_db_id(id), kind, size, created, last_used, verified_at, evicted_at FROM objects",
        # no index on last_used: every query reads max(created, last_used), which none can
        # use, and every touch of an object paid for updating it
        ["kind"],
    ),
    "edges": (
        "parent BLOB NOT NULL, child BLOB NOT NULL, role TEXT NOT NULL, "
        "PRIMARY KEY (parent, role, child)",
        "vb_db_id(parent), vb_db_id(child), role FROM edges",
        ["child"],
    ),
    "file_state": (
        "dev INTEGER NOT NULL, inode INTEGER NOT NULL, size INTEGER, mtime_ns INTEGER, "
        "ctime_ns INTEGER, hash BLOB, PRIMARY KEY (dev, inode)",
        "dev, inode, size, mtime_ns, ctime_ns, vb_db_id(hash) FROM file_state",
        [],
    ),
    "feature_rows": (
        "extractor INTEGER NOT NULL, image BLOB NOT NULL, pack INTEGER NOT NULL, "
        "row INTEGER NOT NULL, PRIMARY KEY (extractor, image)",
        # joined on the old text: one conversion per row (the image), not three
        "e.id, vb_db_id(f.image), p.id, f.row FROM feature_rows f "
        "JOIN extractors e ON e.key = f.extractor JOIN packs p ON p.oid = f.pack",
        ["pack"],
    ),
}


def _m3_compact(db) -> None:
    # runs inside the migration's one transaction: a failure leaves the store as it was
    conn = db.conn
    conn.create_function("vb_db_id", 1, _db_id_or_null, deterministic=True)
    conn.execute("CREATE TABLE extractors (id INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE)")
    conn.execute("CREATE TABLE packs (id INTEGER PRIMARY KEY, oid BLOB NOT NULL UNIQUE)")
    # numbered in hex order (= byte order), holding the hex text until the rows are copied
    conn.execute("INSERT INTO extractors(key) SELECT DISTINCT extractor FROM feature_rows "
                 "ORDER BY 1")
    conn.execute("INSERT INTO packs(oid) SELECT DISTINCT pack FROM feature_rows ORDER BY 1")
    for table, (columns, select, indexes) in _M3_TABLES.items():
        conn.execute(f"CREATE TABLE {table}_v3 ({columns}) WITHOUT ROWID")
        conn.execute(f"INSERT INTO {table}_v3 SELECT {select}")
        conn.execute(f"DROP TABLE {table}")
        conn.execute(f"ALTER TABLE {table}_v3 RENAME TO {table}")
        for column in indexes:
            conn.execute(f"CREATE INDEX idx_{table}_{column} ON {table}({column})")
    conn.execute("UPDATE extractors SET key = vb_db_id(key)")
    conn.execute("UPDATE packs SET oid = vb_db_id(oid)")


def _m4_answers(db) -> None:
    # The answer cache (vbstore/store/_answers.py): one row per `get result` command line, with
    # every file state and registry row its answer depended on. A cache only: gc empties it,
    # and the next full answer writes the row again.
    db.execute("CREATE TABLE answers (key TEXT NOT NULL PRIMARY KEY, deps TEXT NOT NULL, "
               "created FLOAT NOT NULL) WITHOUT ROWID")
    # the names under a data folder, shared by every answer that read it
    db.execute("CREATE TABLE answer_trees (id TEXT NOT NULL PRIMARY KEY, root TEXT NOT NULL, "
               "names TEXT NOT NULL) WITHOUT ROWID")


def _m5_runs(db) -> None:
    # When, where and how long each computation ran (vbstore/store/_runs.py): kept out of the
    # hashed documents, so one computation is one id in any store. A log: gc deletes an
    # object's rows with it.
    db.execute("CREATE TABLE runs (object BLOB NOT NULL, recorded FLOAT NOT NULL, "
               "host TEXT NOT NULL, device TEXT, seconds FLOAT, timings TEXT NOT NULL, "
               "features_from_cache INTEGER, PRIMARY KEY (object, recorded, host)) WITHOUT ROWID")


def _m6_origins(db) -> None:
    # Where each derivation's answer came from: ``computed`` here, ``remote NAME`` (a binary
    # cache answered), ``pulled from NAME`` (recorded with a pulled ref). NULL: recorded before
    # vbstore kept it.
    db.execute("ALTER TABLE derivations ADD COLUMN origin TEXT")


def _m7_board_variants(db) -> None:
    # A board ranks one row per checkpoint *and variant* (the settings its suite leaves open,
    # vbstore/suites/_settings.py): '' for evaluations indexed before. ``superseded_by``: a
    # correction names the evaluation it replaces, which then leaves the ranking (ranked 0)
    # and stays an attempt.
    db.execute("ALTER TABLE evaluations ADD COLUMN variant TEXT NOT NULL DEFAULT ''")
    db.execute("ALTER TABLE evaluations ADD COLUMN superseded_by TEXT")
    db.execute("DROP INDEX IF EXISTS idx_evaluations_suite_evidence_checkpoint_ranked_recorded_id")
    db.execute("CREATE INDEX idx_evaluations_board ON evaluations"
               "(suite, evidence, checkpoint, variant, ranked, recorded, id)")


def _m8_data_names(db) -> None:
    # The names a manifest's data was read under (vbstore/store/_names.py): a plain folder's
    # name is no part of its content. A log: gc deletes a manifest's rows with it.
    db.execute("CREATE TABLE data_names (object BLOB NOT NULL, name TEXT NOT NULL, "
               "recorded FLOAT NOT NULL, PRIMARY KEY (object, name)) WITHOUT ROWID")


def _m9_result_notes(db) -> None:
    # Free text a user attached to a result (vbstore/store/_notes.py, VisBench's ``notes``): no
    # part of the hashed document. A log: gc deletes an object's rows with it.
    db.execute("CREATE TABLE result_notes (object BLOB NOT NULL, text TEXT NOT NULL, "
               "recorded FLOAT NOT NULL, PRIMARY KEY (object, text)) WITHOUT ROWID")


def _m10_evaluation_uploads(db) -> None:
    # Visin's run metadata (vbstore/suites/_evaluate.py): the project an evaluation was recorded
    # in (also in its document; here for boards and listings to filter on without a blob), and
    # each upload uuid with the evaluation it named (no part of any document: a retry under the
    # same uuid is the same evaluation, a different one is refused). NULL: no project.
    db.execute("ALTER TABLE evaluations ADD COLUMN project TEXT")
    db.execute("CREATE TABLE evaluation_uuids (uuid TEXT PRIMARY KEY, id TEXT NOT NULL, "
               "recorded FLOAT NOT NULL)")


def _m11_verified_scores(db) -> None:
    # What each evaluation blob says that a board checks, recorded when the blob is judged and
    # indexed or re-hashed by a board (vbstore/store/_verified.py), keyed by the blob's id: a
    # board compares its rows with these instead of reading one blob per ranked row. A cache:
    # empty here, filled as blobs are verified; fsck compares each with its blob.
    db.execute("CREATE TABLE verified_scores (id TEXT NOT NULL PRIMARY KEY, suite TEXT NOT NULL, "
               "checkpoint TEXT NOT NULL, label TEXT, weights TEXT, state TEXT NOT NULL, "
               "ranked INTEGER NOT NULL, evidence TEXT NOT NULL, scores TEXT NOT NULL) "
               "WITHOUT ROWID")


def _db_id_or_null(value):
    return db_id(value) if isinstance(value, str) else value


# Append only: a released migration is never edited, a new one is added with the next number
# (and _layout.REGISTRY_VERSION with it: the answer cache reads the version from there).
MIGRATIONS: list[tuple[int, str, Callable]] = [
    (1, "initial tables", _m1_initial),
    (2, "suites and evaluations", _m2_suites),
    (3, "compact hot tables", _m3_compact),
    (4, "answer cache", _m4_answers),
    (5, "run log", _m5_runs),
    (6, "derivation origins", _m6_origins),
    (7, "board variants and corrections", _m7_board_variants),
    (8, "data names", _m8_data_names),
    (9, "result notes", _m9_result_notes),
    (10, "evaluation projects and upload uuids", _m10_evaluation_uploads),
    (11, "verified evaluation scores", _m11_verified_scores),
]
if MIGRATIONS[-1][0] != REGISTRY_VERSION:  # pragma: no cover - a developer's slip, at import
    raise ImportError(f"_layout.REGISTRY_VERSION is {REGISTRY_VERSION}, the last migration "
                      f"{MIGRATIONS[-1][0]}: set them equal")


# The oldest registry a read-only store is served from: migration 4 adds only the answer cache,
# which is never read or written on a read-only store, and migration 5 only the run log, which
# such a store reads as empty (a shared cache made before them still serves)
READABLE_FROM = 3


class Registry:
    """A connection to ``registry.db`` with migrations applied (checked, when ``read_only``)."""

    version: int  # the registry's migration number (PRAGMA user_version) once opened

    def __init__(self, path: Path, read_only: bool = False, new: bool = False) -> None:
        """Open (or, when ``new``, or in a folder holding no blobs yet, create) ``path``.

        Raises:
            StoreIOError: ``path`` is missing or empty but the store holds blobs (the registry
                was lost: ``vbstore fsck --rebuild``), or SQLite cannot open it.
        """
        self.path = path
        self.read_only = read_only
        if not read_only and not new and _lost(path):
            # starting an empty registry here would drop every ref and edge silently (and fsck
            # would then adopt the blobs without them, and call the store clean)
            raise StoreIOError(
                f"{path} is {'empty' if path.exists() else 'missing'}, but "
                f"{path.parent / 'objects'} holds blobs: the store's registry was lost",
                hint="run `vbstore fsck --rebuild`: it rebuilds the registry from the blobs "
                     "(refs and cached derivations do not come back)")
        try:
            if read_only:
                self.conn = _connect_read_only(path)
                version = self.conn.execute("PRAGMA user_version").fetchone()[0]
                _refuse_newer(path, version)
                self.version = version
                if version < READABLE_FROM:
                    raise StoreReadOnly(str(path.parent), "upgrade its registry to this vbstore")
                return
            try:
                self.conn = self._open(exclusive=False)
            except sqlite3.OperationalError:
                if not _no_wal_index(path):
                    raise
                # a full disk leaves no room for the WAL index (-shm) a first connection makes;
                # in exclusive locking mode SQLite keeps it in memory, so gc can still free space
                # (other processes wait for this one meanwhile)
                self.conn = self._open(exclusive=True)
        except sqlite3.Error as exc:
            raise store_error(exc, f"opening {path}", path.parent) from exc

    def _open(self, exclusive: bool) -> sqlite3.Connection:
        self.conn = sqlite3.connect(
            str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
            check_same_thread=False,
        )
        try:
            if exclusive:
                self.conn.execute("PRAGMA locking_mode=EXCLUSIVE")  # before the first access
            self.conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            if self.conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                with self.write():
                    pass
                self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self._migrate()
        except BaseException:
            self.conn.close()
            raise
        return self.conn

    def _migrate(self) -> None:
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        _refuse_newer(self.path, version)
        self.version = MIGRATIONS[-1][0]  # the version this connection leaves it at
        if version >= MIGRATIONS[-1][0]:
            return
        sqlite_utils = _sqlite_utils()  # only the first time a store is created or upgraded

        with self.write():
            version = self.conn.execute("PRAGMA user_version").fetchone()[0]
            db = sqlite_utils.Database(self.conn)
            for number, _title, apply in MIGRATIONS:
                if number > version:
                    apply(db)
                    self.conn.execute(f"PRAGMA user_version={number}")

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction, committed on success, rolled back on error.

        Raises:
            StoreLocked: another process held the write lock past the busy timeout.
            StoreReadOnly: the registry was opened read-only.
        """
        if self.read_only:
            raise StoreReadOnly(str(self.path.parent), "write to its registry")
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise store_error(exc, "starting a registry write", self.path.parent) from exc
        try:
            yield self.conn
            self.conn.execute("COMMIT")
        except BaseException as exc:
            if self.conn.in_transaction:  # SQLite may already have rolled back (disk full)
                self.conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise store_error(exc, "writing the registry", self.path.parent) from exc
            raise

    def query(self, sql: str, params: tuple | list = ()) -> list[tuple]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise store_error(exc, "reading the registry") from exc

    def one(self, sql: str, params: tuple | list = ()) -> tuple | None:
        try:
            return self.conn.execute(sql, params).fetchone()
        except sqlite3.Error as exc:
            raise store_error(exc, "reading the registry") from exc

    def close(self) -> None:
        self.conn.close()


def _refuse_newer(path: Path, version: int) -> None:
    """A registry a newer vbstore migrated has a layout this one would misread: refuse it."""
    if version > MIGRATIONS[-1][0]:
        raise NewerRegistry(str(path), version, MIGRATIONS[-1][0])


def _sqlite_utils() -> ModuleType:
    """``sqlite_utils``, imported without pandas.

    sqlite_utils imports pandas whenever it is installed (0.5-1 s, several under load: most of
    creating a store) only to store ``pandas.Timestamp`` values as TEXT, and the migrations
    store none. While it loads, ``import pandas`` fails as for a missing package; afterwards
    pandas imports as before (a thread importing pandas in those milliseconds would fail too).
    """
    if "sqlite_utils" in sys.modules or sys.modules.get("pandas") is not None:
        import sqlite_utils  # loaded already, or with the pandas the process has

        return sqlite_utils
    sys.modules["pandas"] = None  # type: ignore[assignment]  # then `import pandas` fails
    try:
        import sqlite_utils  # heavy: the first time a store is created or upgraded, and fsck
    finally:
        del sys.modules["pandas"]
    return sqlite_utils


def expected_schema() -> dict[str, set[str]]:
    """Every table, view and index the migrations make, by name: a table's or view's columns,
    an index's empty set (built in memory by running :data:`MIGRATIONS`; for fsck only)."""
    sqlite_utils = _sqlite_utils()  # fsck only: the cached path never pays for it

    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        db = sqlite_utils.Database(conn)
        for _number, _title, apply in MIGRATIONS:
            apply(db)
        return schema_of(conn)
    finally:
        conn.close()


def schema_of(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """The tables, views and indexes of ``conn`` (see :func:`expected_schema`)."""
    out: dict[str, set[str]] = {}
    for kind, name in conn.execute("SELECT type, name FROM sqlite_master WHERE type IN "
                                   "('table', 'view', 'index') AND name NOT LIKE 'sqlite_%'"):
        out[name] = ({row[1] for row in conn.execute(f'PRAGMA table_info("{name}")')}
                     if kind != "index" else set())
    return out


def schema_problems(conn: sqlite3.Connection) -> list[str]:
    """What the registry on ``conn`` lacks of the schema its migrations made (a dropped table
    passes SQLite's integrity check, yet every query on it fails)."""
    have, problems = schema_of(conn), []
    for name, columns in sorted(expected_schema().items()):
        if name not in have:
            problems.append(f"{name} is missing from the registry")
        elif columns - have[name]:
            problems.append(f"{name} lacks column(s) {', '.join(sorted(columns - have[name]))}")
    return problems


def now() -> float:
    return time.time()


def _lost(path: Path) -> bool:
    """Whether ``path`` is missing or empty while the store's ``objects/`` holds blobs."""
    try:
        if path.stat().st_size > 0:
            return False
    except FileNotFoundError:
        pass
    try:
        with os.scandir(path.parent / "objects") as fans:
            for fan in fans:
                if len(fan.name) == 2 and fan.is_dir(follow_symlinks=False):
                    with os.scandir(fan.path) as blobs:
                        if next(blobs, None) is not None:
                            return True
    except (FileNotFoundError, NotADirectoryError):
        pass
    return False


def _no_wal_index(path: Path) -> bool:
    """Whether ``path`` has no usable WAL index (-shm is 32 KiB at least): none was made."""
    try:
        return os.path.getsize(f"{path}-shm") < 32768
    except FileNotFoundError:
        return True


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only: ``mode=ro``, else ``immutable`` (no WAL index can be made)."""
    if not path.is_file():
        raise StoreReadOnly(str(path.parent), "create its registry")
    uri = path.resolve().as_uri()
    try:
        return _open_probed(f"{uri}?mode=ro")
    except sqlite3.OperationalError:  # a WAL database whose -shm file cannot be made beside it
        return _open_probed(f"{uri}?immutable=1")


def _open_probed(uri: str) -> sqlite3.Connection:
    conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                           check_same_thread=False)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opening is lazy
    except sqlite3.Error:
        conn.close()
        raise
    return conn


def store_error(exc: sqlite3.Error, doing: str, root: Path | None = None) -> VbstoreError:
    """The vbstore error for an SQLite failure, by its cause."""
    text = str(exc).lower()
    if "full" in text:
        return DiskFull(f"no space left on device while {doing}",
                        hint=f"{DiskFull.hint}; the registry is unchanged")
    if "locked" in text or "busy" in text:
        return StoreLocked(f"registry is locked ({doing})",
                           hint="another vbstore process is writing; retry")
    if "readonly" in text or "read-only" in text:
        return StoreReadOnly(str(root or "registry"), f"write to its registry ({doing})")
    if "not a database" in text or "malformed" in text:
        return StoreIOError(f"registry.db is damaged ({exc})",
                            hint="run `vbstore fsck --rebuild`: it rebuilds the registry from the "
                                 "blobs and keeps the damaged file aside")
    return StoreIOError(f"registry error while {doing}: {exc}",
                        hint="check the store's disk and permissions")
