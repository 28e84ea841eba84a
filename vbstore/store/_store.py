"""The :class:`Store`: blobs + registry, and the operations every other layer builds on.

The store itself is the object database: its folder, blobs put and read (and re-hashed), the
registry and its transactions, edges, refs, aliases and, from :mod:`._derive`, derivations and
leases (how a derived artifact is named). What is kept beside the blobs is a view over the
registry, each in its own module: ``store.answers`` (the answer cache), ``store.runs`` (the run
log), ``store.notes``, ``store.data_names``, ``store.feature_rows``, ``store.file_states``.
What keeps a store whole is a function of it: :func:`~vbstore.store.gc`,
:func:`~vbstore.store.forget`, :func:`~vbstore.store.fsck`,
:func:`~vbstore.store.rebuild_registry` (``vbstore.store``'s face lists them all).
"""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from .. import canonical
from ..errors import (
    AmbiguousPrefix,
    BlobMissing,
    CorruptObject,
    ObjectNotFound,
    StoreIOError,
    StoreReadOnly,
    UsageError,
    VbstoreError,
)
from . import _kinds, _layout, _schemas
from ._answers import Answers
from ._base import Edges, ObjectInfo
from ._derive import DeriveMixin
from ._filestate import FileStates
from ._ids import db_id, hex_id, prefix_range
from ._names import DataNames
from ._notes import Notes
from ._objects import CHUNK, ObjectFiles, hash_file, read_chunks
from ._registry import Registry, now
from ._rows import FeatureRows
from ._runs import RunLog
from ._tensors import check_safetensors_bytes, to_safetensors_bytes

_HEX = re.compile(r"^[0-9a-f]+\Z")
_REF_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/@+-]*\Z")
MIN_PREFIX = 4
OVERLAP_SIZE = 4 << 20


def _discard(temp: Path) -> None:
    os.chmod(temp, 0o600)
    os.unlink(temp)


def _read_only(root: Path) -> bool:
    """Whether the store folder or its registry refuses writes (read-only mount, no permission)."""
    registry = root / "registry.db"
    return root.is_dir() and (not os.access(root, os.W_OK)
                              or (registry.exists() and not os.access(registry, os.W_OK)))


def default_root() -> Path:
    """``VBSTORE_HOME``, else ``~/.cache/vbstore``."""
    return Path(_layout.default_home())


class Store(DeriveMixin):
    """A content-addressed object store with its SQLite registry.

    ```python
    store = Store("/tmp/s")
    oid = store.put_json({"kind": "suite", ...}, kind="suite")
    store.read_json(oid)
    ```

    A read-only store (a shared cache on a read-only mount) serves reads; what must write
    raises :class:`~vbstore.errors.StoreReadOnly`, and what only keeps the store tidy (a
    blob's ``last_used``, the file-state cache, dead leases) is skipped.

    The registry's side tables are views (``store.answers``, ``store.runs``, ``store.notes``,
    ``store.data_names``, ``store.feature_rows``, ``store.file_states``); gc, forget, fsck
    and the registry rebuild are functions of the store (``vbstore.store.gc(store)``...).
    """

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root).expanduser() if root is not None else default_root()
        self.read_only = _read_only(self.root)
        if not self.read_only:
            try:
                for sub in ("objects", "tmp", "locks"):
                    (self.root / sub).mkdir(parents=True, exist_ok=True)
            except PermissionError:  # an unwritable parent: nothing to read either
                raise StoreReadOnly(str(self.root), "create it") from None
            except (NotADirectoryError, FileExistsError):  # a file where a folder must be
                raise StoreIOError(
                    f"the store {self.root} cannot be made: a file stands where a folder must be",
                    hint="point --store or VBSTORE_HOME at a folder (or a path to create one at)",
                ) from None
            except OSError as exc:
                if exc.errno != errno.EROFS:
                    raise
                raise StoreReadOnly(str(self.root), "create it") from None
        self.files = ObjectFiles(self.root)
        self._db: Registry | None = None
        # ("derivations" | "aliases", key, the id it gave or None) of each lookup, between
        # answers.watch and answers.record (the answer cache); None otherwise
        self.reads: list[tuple[str, str, str | None]] | None = None
        self._has_origins: bool | None = None  # whether the registry's derivations keep origins

    @property
    def db(self) -> Registry:
        if self._db is None:
            self._db = Registry(self.root / "registry.db", read_only=self.read_only)
        return self._db

    def writable(self, doing: str) -> None:
        """Raise :class:`~vbstore.errors.StoreReadOnly` (naming ``doing``) on a read-only store."""
        if self.read_only:
            raise StoreReadOnly(str(self.root), doing)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- views over the registry's side tables (made on each use: they hold no state) ------

    @property
    def answers(self) -> Answers:
        """The answer cache (:mod:`._answers`)."""
        return Answers(self)

    @property
    def runs(self) -> RunLog:
        """The run log: when, where and how long each result was computed (:mod:`._runs`)."""
        return RunLog(self)

    @property
    def notes(self) -> Notes:
        """The notes users attached to results (:mod:`._notes`)."""
        return Notes(self)

    @property
    def data_names(self) -> DataNames:
        """The names each manifest's data was read under (:mod:`._names`)."""
        return DataNames(self)

    @property
    def feature_rows(self) -> FeatureRows:
        """Which pack row holds an image's features under an extractor (:mod:`._rows`)."""
        return FeatureRows(self)

    @property
    def file_states(self) -> FileStates:
        """File hashes cached under their states (:mod:`._filestate`)."""
        return FileStates(self)

    # ---- writing -------------------------------------------------------------------------

    def put_bytes(self, data: bytes, kind: str = "blob", edges: Edges | None = None) -> str:
        """Store ``data`` as a blob of ``kind``; return its id. Existing blobs are not rewritten."""
        _kinds.check_kind(kind)
        data = bytes(data)  # immutable, so the bytes hashed are the bytes written
        view = memoryview(data)
        chunks = (view[i : i + CHUNK] for i in range(0, len(view), CHUNK))
        if len(data) < OVERLAP_SIZE:
            oid = canonical.digest(data)
            if self._touch_existing(oid, kind, len(data), edges):
                return oid
            self.writable("store a new blob")
            temp, _, size = self.files.write_temp(chunks, known_id=oid)
        else:
            self.writable("store a new blob")
            # large blobs: hash on another thread (BLAKE3 drops the GIL) while the write runs
            # a thread pool (with logging: ~4 ms of imports) only where blobs are hashed,
            # never on a cached `get`
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(1) as pool:
                pending = pool.submit(canonical.digest, data)
                temp, _, size = self.files.write_temp(chunks, known_id="-")
                oid = pending.result()
            if self._touch_existing(oid, kind, size, edges):
                _discard(temp)
                return oid
        self._publish(temp, oid, kind, size, edges)
        return oid

    def put_many(self, blobs: Iterable[tuple[bytes, str, Edges | None]],
                 then: Callable[[Any], None] | None = None) -> list[str]:
        """Store many small blobs ``(bytes, kind, edges)`` with one flush to disk for all of
        them; return their ids. ``then(conn)`` writes its own rows in the same registry
        transaction that registers the blobs, so they stand or fall together.

        The order of one put, batched: every temp file is written, all are flushed at once,
        renamed into place, the renames flushed at once, then the rows committed. A kill at any
        instant leaves at worst whole blobs without rows (``fsck`` adopts them; whoever wrote
        them writes them again and finds them there), never a row without its blob. A blob
        already here is not rewritten. The caller checked what each blob is (kind, schema).

        Raises:
            StoreReadOnly: the store is read-only.
            DiskFull, StoreIOError: a write or flush failed; nothing was registered.
        """
        self.writable("store new blobs")
        items = []
        for data, kind, edges in blobs:
            _kinds.check_kind(kind)
            data = bytes(data)  # immutable, so the bytes hashed are the bytes written
            items.append((canonical.digest(data), data, kind, edges))
        temps: dict[str, Path] = {}
        try:
            for oid, data, _kind, _edges in items:
                if oid not in temps and not self.files.exists(oid):
                    temps[oid] = self.files.write_temp([data], known_id=oid, sync=False)[0]
            self.files.flush(temps.values())
            with self.db.write() as conn:
                for oid, data, _kind, _edges in items:  # gc unlinks under this lock too
                    if oid not in temps and not self.files.exists(oid):
                        temps[oid] = self.files.write_temp([data], known_id=oid)[0]
                published = {self.files.objects / oid[:2] for oid, temp in temps.items()
                             if self.files.publish(temp, oid, sync=False)}
                self.files.flush(published)
                for oid, data, kind, edges in items:
                    self._upsert(conn, oid, kind, len(data))
                    self._insert_edges(conn, oid, edges)
                if then is not None:
                    then(conn)
        finally:
            for temp in temps.values():  # published ones are gone already
                if temp.exists():
                    _discard(temp)
        return [oid for oid, *_ in items]

    def put_file(self, path: str | Path, kind: str = "blob", edges: Edges | None = None) -> str:
        """Copy a file into the store, hashing as it is copied; return its id."""
        _kinds.check_kind(kind)
        if _kinds.encoding(kind) != "raw":
            data = Path(path).read_bytes()
            return self.put_parsed(data, kind, edges)
        self.writable("store a new blob")
        with open(path, "rb") as handle:
            temp, oid, size = self.files.write_temp(read_chunks(handle))
        if self._touch_existing(oid, kind, size, edges):
            _discard(temp)
            return oid
        self._publish(temp, oid, kind, size, edges)
        return oid

    def adopt(self, oid: str, kind: str, edges: Edges | None = None) -> str:
        """Register a blob another process published into ``objects/`` without the registry
        (a Ray worker on a shared filesystem), after re-hashing it.

        Raises:
            ObjectNotFound: no file for ``oid``.
            CorruptObject: the file does not hash to ``oid`` (left in place for ``fsck``).
        """
        _kinds.check_kind(kind)
        path = self.path(oid)
        if hash_file(path) != oid:
            raise CorruptObject(oid, str(path))
        with self.db.write() as conn:
            # gc unlinks under this lock: a blob of the same id it removed between the hash and
            # here must not leave a row without its file
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                raise ObjectNotFound(oid, hint="the file went away while it was adopted (a gc "
                                               "of an older copy); write it again") from None
            self._upsert(conn, oid, kind, size)
            self._insert_edges(conn, oid, edges)
        return oid

    def put_temp(self, temp: Path, oid: str, kind: str, size: int) -> str:
        """Publish a temp file written by ``self.files.write_temp`` that the caller verified
        (it hashes to ``oid`` and is what ``kind`` says), without reading it again.

        Used by transfers that stream a blob to disk: the file is moved, never copied.
        """
        _kinds.check_kind(kind)
        if self._touch_existing(oid, kind, size, None):
            _discard(temp)
        else:
            self._publish(temp, oid, kind, size, None)
        return oid

    def put_parsed(self, data: bytes, kind: str, edges: Edges | None = None) -> str:
        """Store bytes of a JSON or safetensors kind after checking they are what they claim."""
        if _kinds.encoding(kind) == "json":
            try:
                document = json.loads(data)
            except ValueError as exc:
                raise UsageError(f"not a JSON document: {exc}") from None
            return self.put_json(document, kind, edges)
        if _kinds.encoding(kind) == "safetensors":
            check_safetensors_bytes(data, kind)
        return self.put_bytes(data, kind, edges)

    def put_json(self, document: Mapping[str, Any], kind: str, edges: Edges | None = None) -> str:
        """Validate ``document`` against its kind's schema and store its canonical encoding.

        Raises:
            NonCanonical: a NaN, Infinity or non-string key, with its field.
            SchemaError: the document does not match ``schemas/<kind>.schema.json``.
        """
        if _kinds.encoding(kind) != "json":
            raise UsageError(f"{kind} is not a JSON kind",
                             hint=f"JSON kinds: {', '.join(_kinds.JSON_KINDS)}")
        document = dict(document)
        if document.setdefault("kind", kind) != kind:
            raise UsageError(f"document says kind {document['kind']!r} but was put as {kind!r}")
        data = canonical.dumps(document)
        oid = canonical.digest(data)
        # a blob already present was validated when it was first written
        if not self._touch_existing(oid, kind, len(data), edges):
            _schemas.validate(kind, document)
            self.put_bytes(data, kind, edges)
        return oid

    def put_tensors(
        self, tensors: Mapping[str, Any], kind: str, metadata: Mapping[str, str] | None = None,
        edges: Edges | None = None,
    ) -> str:
        """Serialise tensors (torch or numpy) as safetensors, ``vbstore.kind`` in the metadata."""
        if _kinds.encoding(kind) != "safetensors":
            raise UsageError(f"{kind} is not a tensor kind")
        data = to_safetensors_bytes(tensors, kind, metadata or {})
        if _schemas.has_schema(f"{kind}.metadata"):
            _schemas.validate(f"{kind}.metadata", {**(metadata or {}), "vbstore.kind": kind})
        return self.put_bytes(data, kind, edges)

    def _touch_existing(self, oid: str, kind: str, size: int, edges: Edges | None) -> bool:
        if not self.files.exists(oid):
            return False
        if self.read_only:  # already there: its row and last_used are only housekeeping
            return True
        with self.db.write() as conn:
            if not self.files.exists(oid):  # gc removed it while we looked
                return False
            self._upsert(conn, oid, kind, size)
            self._insert_edges(conn, oid, edges)
        return True

    def _publish(self, temp: Path, oid: str, kind: str, size: int, edges: Edges | None) -> None:
        # rename and row happen under one registry write lock, so gc cannot interleave
        with self.db.write() as conn:
            self.files.publish(temp, oid)
            self._upsert(conn, oid, kind, size)
            self._insert_edges(conn, oid, edges)

    @staticmethod
    def _upsert(conn, oid: str, kind: str, size: int) -> None:
        t = now()
        conn.execute(
            "INSERT INTO objects(id, kind, size, created, last_used) VALUES (?,?,?,?,?) "
            "ON CONFLICT(id) DO UPDATE SET last_used=excluded.last_used, evicted_at=NULL, "
            "kind=CASE WHEN objects.kind='blob' THEN excluded.kind ELSE objects.kind END",
            (db_id(oid), kind, size, t, t),
        )

    @staticmethod
    def _insert_edges(conn, parent: str, edges: Edges | None) -> None:
        key = db_id(parent)
        conn.executemany(
            "INSERT OR IGNORE INTO edges(parent, child, role) VALUES (?,?,?)",
            [(key, db_id(child), role) for role, children in (edges or {}).items()
             for child in ([children] if isinstance(children, str) else children)],
        )

    def add_edges(self, parent: str, edges: Edges) -> None:
        """Record that ``parent`` was made from / refers to each child under ``role``."""
        with self.db.write() as conn:
            self._insert_edges(conn, parent, edges)

    # ---- reading -------------------------------------------------------------------------

    def has(self, oid: str) -> bool:
        """Whether the blob is present (its row alone is not enough)."""
        return len(oid) == 64 and self.files.exists(oid)

    def path(self, oid: str) -> Path:
        """The read-only path of a present blob.

        Raises:
            ObjectNotFound: no such blob on disk.
        """
        path = self.files.path(oid)
        if not path.is_file():
            raise self._not_found(oid)
        return path

    def open(self, oid: str) -> BinaryIO:
        """Open a blob for reading (not verified: use :meth:`verify` or :meth:`read_json`).

        Raises:
            ObjectNotFound: no such blob; a :class:`~vbstore.errors.BlobMissing` when the
                registry lists it (its blob was removed or lost).
        """
        try:
            return open(self.files.path(oid), "rb")
        except FileNotFoundError:
            raise self._not_found(oid) from None

    def _not_found(self, oid: str) -> ObjectNotFound:
        """The error for an absent blob: the registry says whether it should be there."""
        try:
            row = self.db.one("SELECT kind, evicted_at FROM objects WHERE id=?", (db_id(oid),))
        except (VbstoreError, ValueError):  # a damaged registry, an id that is not hex
            row = None
        return ObjectNotFound(oid) if row is None else BlobMissing(oid, row[0], row[1] is not None)

    def read_bytes(self, oid: str, verify: bool = False) -> bytes:
        """The blob's bytes; with ``verify`` they are re-hashed first.

        Raises:
            ObjectNotFound: no such blob.
            CorruptObject: ``verify`` and the bytes no longer hash to ``oid``.
        """
        with self.open(oid) as handle:
            data = handle.read()
        if verify and canonical.digest(data) != oid:
            raise CorruptObject(oid, str(self.files.path(oid)))
        return data

    def read_json(self, oid: str) -> dict[str, Any]:
        """A JSON artifact, always re-hashed before it is returned."""
        return json.loads(self.read_bytes(oid, verify=True))

    def verify(self, oid: str) -> bool:
        """Re-hash a blob; True when it matches its id."""
        try:
            return hash_file(self.path(oid)) == oid
        except ObjectNotFound:
            return False

    def verified_path(self, oid: str) -> Path:
        """The path of blob ``oid`` after checking its bytes still hash to ``oid``.

        Read through mmap, a blob's values reach a task without passing any hash; this hashes
        the file once and remembers the answer under the file's state, so the next read costs a
        ``stat`` and a query, and any write to the file (which changes its state) re-hashes it.

        Raises:
            ObjectNotFound: no such blob.
            CorruptObject: its bytes no longer hash to ``oid`` (the hint names ``fsck --repair``).
        """
        path = self.path(oid)
        if self.file_states.hash([path])[0] != oid:
            raise CorruptObject(oid, str(path))
        return path

    def info(self, oid: str) -> ObjectInfo:
        row = self.db.one(
            "SELECT id, kind, size, created, last_used, verified_at, evicted_at FROM objects "
            "WHERE id = ?", (db_id(oid),),
        )
        if row is None:
            raise ObjectNotFound(oid)
        return ObjectInfo(hex_id(row[0]), *row[1:])

    def touch(self, oids: Iterable[str]) -> None:
        """Mark objects as used now (for least-recently-used eviction)."""
        ids = list(oids)
        if ids and not self.read_only:  # best effort: a read-only store keeps its old times
            with self.db.write() as conn:
                conn.executemany("UPDATE objects SET last_used=? WHERE id=?",
                                 [(now(), db_id(i)) for i in ids])

    # ---- names ---------------------------------------------------------------------------

    def resolve(self, name: str) -> str:
        """A full id from a full id, a ref name or a unique hex prefix (at least 4 digits).

        Raises:
            ObjectNotFound: nothing matches.
            AmbiguousPrefix: the prefix matches several objects.
        """
        row = self.db.one("SELECT id FROM refs WHERE name = ?", (name,))
        if row:
            return row[0]
        lowered = name.lower()
        if not _HEX.match(lowered) or not MIN_PREFIX <= len(lowered) <= 64:
            slug, at, version = name.rpartition("@")
            suite = self.db.one("SELECT id FROM suites WHERE slug = ? AND version = ?",
                                (slug, version)) if at and version.isdigit() else None
            raise ObjectNotFound(name, hint=(
                f"{name} is a suite: `vbstore suite show {name}`, or give its id {suite[0][:12]}"
                if suite else "give a ref name (`vbstore tag`) or at least 4 hex digits of an id"))
        if len(lowered) == 64 and (self.files.exists(lowered) or self.db.one(
                "SELECT 1 FROM objects WHERE id=?", (db_id(lowered),))):
            return lowered
        rows = self.db.query(
            "SELECT id FROM objects WHERE id BETWEEN ? AND ? ORDER BY id LIMIT 6",
            prefix_range(lowered[:64]),
        )
        if not rows:
            raise ObjectNotFound(name)
        if len(rows) > 1:
            raise AmbiguousPrefix(name, [hex_id(r[0]) for r in rows])
        return hex_id(rows[0][0])

    def tag(self, name: str, oid: str) -> None:
        """Point ref ``name`` at ``oid`` (a root for gc)."""
        if not _REF_NAME.match(name) or ".." in name or _HEX.match(name):
            raise UsageError(
                f"bad ref name {name!r}",
                hint="use letters, digits and . _ / @ + - (not only hex digits, no '..')",
            )
        if not self.db.one("SELECT 1 FROM objects WHERE id=?", (db_id(oid),)):
            raise ObjectNotFound(oid)
        self.writable(f"point {name} at {oid[:12]}")
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO refs(name, id, updated) VALUES (?,?,?) ON CONFLICT(name) DO UPDATE "
                "SET id=excluded.id, updated=excluded.updated", (name, oid, now()),
            )

    def untag(self, name: str) -> None:
        with self.db.write() as conn:
            if conn.execute("DELETE FROM refs WHERE name=?", (name,)).rowcount == 0:
                raise ObjectNotFound(name, hint="list refs with: vbstore tag")

    def refs(self) -> dict[str, str]:
        return dict(self.db.query("SELECT name, id FROM refs ORDER BY name"))

    def ls(self, kind: str | None = None) -> list[ObjectInfo]:
        sql = "SELECT id, kind, size, created, last_used, verified_at, evicted_at FROM objects"
        if kind is None:
            rows = self.db.query(sql + " ORDER BY created, id")
        else:
            _kinds.check_kind(kind)
            rows = self.db.query(sql + " WHERE kind=? ORDER BY created, id", (kind,))
        return [ObjectInfo(hex_id(r[0]), *r[1:]) for r in rows]

    def children(self, oid: str) -> list[tuple[str, str]]:
        """(role, child) pairs: what ``oid`` was made from."""
        return [(role, hex_id(child)) for role, child in self.db.query(
            "SELECT role, child FROM edges WHERE parent=? ORDER BY role, child", (db_id(oid),))]

    def parents(self, oid: str) -> list[tuple[str, str]]:
        """(role, parent) pairs: what was made from ``oid``."""
        return [(role, hex_id(parent)) for role, parent in self.db.query(
            "SELECT role, parent FROM edges WHERE child=? ORDER BY role, parent", (db_id(oid),))]

    # ---- aliases -------------------------------------------------------------------------

    def alias(self, spec: Mapping[str, Any]) -> str | None:
        """The id a spec (e.g. a backbone request) resolved to before, if its blob is present."""
        key = canonical.key_of(spec)
        row = self.db.one("SELECT id FROM aliases WHERE spec=?", (key,))
        if self.reads is not None:
            self.reads.append(("aliases", key, row[0] if row else None))
        return row[0] if row and self.has(row[0]) else None

    def set_alias(self, spec: Mapping[str, Any], oid: str) -> None:
        """Remember that ``spec`` resolves to ``oid`` (a shortcut: skipped on a read-only store)."""
        if self.read_only:
            return
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO aliases(spec, id, created) VALUES (?,?,?) ON CONFLICT(spec) DO "
                "UPDATE SET id=excluded.id", (canonical.key_of(spec), oid, now()),
            )
