"""Derivation records (key → output) and the per-key leases that stop duplicate work.

A derivation key is the BLAKE3 of the canonical JSON ``{"op", "op_version", "inputs",
"params"}``. A recorded key is only a hint: :meth:`~vbstore.Store.lookup` returns it only when the
output blob is present (and, for JSON, still hashes to its id).

Leases: the owner holds an exclusive ``flock`` on ``locks/<key>.lock`` and a row in ``leases``.
The kernel drops the flock when the owner dies however it dies, so a dead owner's lease is taken
over at once; waiters block on the same flock and then read the owner's output.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Generic, NamedTuple, TypeVar

from .. import canonical
from ..errors import CorruptObject, DiskFull, LeaseTimeout
from ._base import StoreBase
from ._ids import db_id
from ._kinds import encoding
from ._objects import HOST
from ._registry import now


def derivation_spec(
    op: str, op_version: int, inputs: Mapping[str, str], params: Mapping[str, Any]
) -> dict[str, Any]:
    """The canonical description of a derivation."""
    return {"op": op, "op_version": int(op_version), "inputs": dict(inputs), "params": dict(params)}


def derivation_key(spec: Mapping[str, Any]) -> str:
    return canonical.key_of(spec)


T = TypeVar("T")


class Made(NamedTuple, Generic[T]):
    """What a derivation's ``compute`` may return instead of a bare id: the output's id and what
    it built on the way (a typed record, extraction counts), handed back by :meth:`derive`
    so that the caller need not read the output back."""

    id: str
    value: T


class Derivation(NamedTuple, Generic[T]):
    """What :meth:`~vbstore.Store.derive` gave.

    Attributes:
        id: The output.
        computed: Whether this call computed it (else it was recorded, here or by a fetch).
        made: What ``compute`` returned beside the id (:class:`Made`); None when nothing was
            computed, or ``compute`` returned a bare id.
    """

    id: str
    computed: bool
    made: T | None = None


class DeriveMixin(StoreBase):
    """Derivation and lease methods of :class:`vbstore.Store`."""

    def lookup(self, key: str, valid: Callable[[str], bool] | None = None, *,
               check: bool = True, touch: bool = True) -> str | None:
        """The recorded output of ``key`` if it is present and intact, else None (a miss).

        ``valid(output)`` can add a deeper check (a featureset's packs are present, say).
        ``check=False`` returns the record as it stands (not touched, not verified): an id to
        show, never one to read. ``touch=False`` leaves the output's ``last_used`` alone (a
        write): for a caller that touches what it goes on to use itself, or reads it under a
        root that gc keeps anyway (a stored result and its inputs).
        """
        row = self.db.one("SELECT output FROM derivations WHERE key = ?", (key,))
        if self.reads is not None:
            self.reads.append(("derivations", key, row[0] if row else None))
        if row is None:
            return None
        output = row[0]
        if not check:
            return output
        row = self.db.one("SELECT kind FROM objects WHERE id = ?", (db_id(output),))
        kind = row[0] if row else None
        if touch:
            self.touch([output])  # first: gc re-checks last_used under its lock before deleting
        if not self.has(output):
            return None
        if kind is not None and encoding(kind) == "json":
            try:
                self.read_bytes(output, verify=True)
            except CorruptObject:
                if self.read_only:  # nothing to recompute into
                    raise
                from ._fsck import quarantine  # only for a damaged blob

                # the recompute then publishes good bytes
                quarantine(self, [output], None)
                return None
        if valid is not None and not valid(output):
            return None
        return output

    def record(
        self, spec: Mapping[str, Any], output: str, extra_edges: Mapping[str, Any] | None = None,
        origin: str = "computed", key: str | None = None,
    ) -> str:
        """Record ``spec → output`` and edges from output to each input; return the key.

        ``origin`` says where the answer came from: ``computed`` here, ``remote NAME`` (a
        binary cache), ``pulled from NAME``; ``get`` and ``why`` show it. ``key``: ``spec``'s
        key, when the caller already made it.
        """
        key = key or derivation_key(spec)
        edges = dict(spec["inputs"])
        edges.update(extra_edges or {})
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO derivations(key, op, output, spec, created, origin) "
                "VALUES (?,?,?,?,?,?) ON CONFLICT(key) DO UPDATE SET output=excluded.output, "
                "created=excluded.created, origin=excluded.origin",
                (key, spec["op"], output, canonical.dumps(spec).decode(), now(), origin),
            )
            self._insert_edges(conn, output, edges)
        return key

    def origin(self, key: str) -> str | None:
        """Where the recorded answer of ``key`` came from (see :meth:`record`); None when it was
        recorded before vbstore kept that, or is not recorded."""
        if not self._origins_kept():
            return None
        row = self.db.one("SELECT origin FROM derivations WHERE key = ?", (key,))
        return row[0] if row else None

    def origin_of(self, oid: str) -> str | None:
        """Where the newest derivation that produced ``oid`` came from, as :meth:`origin`."""
        if not self._origins_kept():
            return None
        row = self.db.one("SELECT origin FROM derivations WHERE output=? "
                          "ORDER BY created DESC LIMIT 1", (oid,))
        return row[0] if row else None

    def _origins_kept(self) -> bool:
        # a read-only store made before migration 6 has no origin column
        if self._has_origins is None:
            columns = self.db.query("PRAGMA table_info(derivations)")
            self._has_origins = any(c[1] == "origin" for c in columns)
        return self._has_origins

    def derivation_of(self, oid: str) -> dict[str, Any] | None:
        """The spec that produced ``oid`` (the newest, when several did)."""
        row = self.db.one(
            "SELECT spec FROM derivations WHERE output=? ORDER BY created DESC LIMIT 1", (oid,)
        )
        return json.loads(row[0]) if row else None

    def derive(
        self, spec: Mapping[str, Any], compute: Callable[[], str | Made[T]],
        extra_edges: Mapping[str, Any] | None = None, timeout: float | None = None,
        valid: Callable[[str], bool] | None = None,
        fetch: Callable[[str], str | None] | None = None,
        check: Callable[[str, Callable[[], str]], None] | None = None,
        key: str | None = None,
    ) -> Derivation[T]:
        """Return ``(output, computed, made)``, running ``compute`` only when no one has the
        answer.

        ``compute`` returns the output's id, or :class:`Made` (the id and what it built, given
        back as ``made``). ``key`` is ``spec``'s key when the caller already made it (a plan).

        When several processes ask at once, one computes under the lease and the others wait,
        then read its output. ``fetch(key)`` is asked before computing (a remote binary cache);
        whatever it returns must already be recorded under ``key``. ``check(output, source)``
        compares a recorded answer with the question before it is served (``source()`` names
        where the record came from) and raises when they differ.

        Raises:
            LeaseTimeout: ``timeout`` seconds passed waiting for another process.
            CorruptObject: from ``check``: the recorded answer declares another question.
        """
        key = key or derivation_key(spec)

        def found() -> str | None:
            hit = self.lookup(key, valid)
            if hit is not None and check is not None:
                check(hit, lambda: self.source(key))
            return hit

        hit = found()
        if hit is not None:
            return Derivation(hit, False)
        with self.lease(key, inputs=list(spec["inputs"].values()), timeout=timeout):
            hit = found()
            if hit is not None:
                return Derivation(hit, False)
            if fetch is not None and fetch(key) is not None:
                hit = found()
                if hit is not None:
                    return Derivation(hit, False)
            output = compute()
            if isinstance(output, Made):
                self.record(spec, output.id, extra_edges, key=key)
                return Derivation(output.id, True, output.value)
            self.record(spec, output, extra_edges, key=key)
            return Derivation(output, True)

    def source(self, key: str) -> str:
        """Where the recorded answer of ``key`` is read from, in words (for an error)."""
        origin = self.origin(key)
        return f"the store ({origin})" if origin else "the store"

    @contextmanager
    def lease(
        self, key: str, inputs: list[str] | None = None, timeout: float | None = None,
        since: float | None = None,
    ) -> Iterator[None]:
        """Hold the lease on ``key``; wait while a live process holds it.

        gc keeps what the lease's ``inputs`` reach and every object created or used since it
        began: ``since`` (a ``time.time()``) dates that back, to the start of the work it covers.
        """
        self.writable(f"compute {key[:12]}, which it does not hold")
        lock_path = self.root / "locks" / f"{key}.lock"
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            _acquire(fd, key, timeout)
            with self.db.write() as conn:
                conn.execute(
                    "INSERT OR REPLACE INTO leases(key, pid, host, heartbeat, inputs) "
                    "VALUES (?,?,?,?,?)",
                    (key, os.getpid(), HOST, now() if since is None else since,
                     json.dumps(inputs or [])),
                )
            try:
                yield
            finally:
                with self.db.write() as conn:
                    conn.execute("DELETE FROM leases WHERE key=? AND pid=?", (key, os.getpid()))
        finally:
            os.close(fd)  # releases the flock

    def live_leases(self) -> list[dict[str, Any]]:
        """Leases whose owner still holds the lock; dead owners' rows are dropped."""
        live, dead = [], []
        for key, pid, host, heartbeat, inputs in self.db.query(
            "SELECT key, pid, host, heartbeat, inputs FROM leases"
        ):
            if _held(self.root / "locks" / f"{key}.lock"):
                live.append({"key": key, "pid": pid, "host": host, "since": heartbeat,
                             "inputs": json.loads(inputs or "[]")})
            else:
                dead.append(key)
        if dead and not self.read_only:
            with contextlib.suppress(DiskFull), self.db.write() as conn:  # tidying: gc goes on
                conn.executemany("DELETE FROM leases WHERE key=?", [(k,) for k in dead])
        return live


def _acquire(fd: int, key: str, timeout: float | None) -> None:
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.01
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if deadline is not None and time.monotonic() > deadline:
                raise LeaseTimeout(
                    f"another process has been computing {key[:12]} for over {timeout:.0f} s",
                    hint="wait for it, or raise the timeout",
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.25)


def _held(lock_path) -> bool:
    """Whether a live process holds the flock on ``lock_path``."""
    try:
        fd = os.open(lock_path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
