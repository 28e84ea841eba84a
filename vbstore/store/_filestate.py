"""Hashes of files, cached under their (dev, inode, size, mtime_ns, ctime_ns).

A second hash of an unchanged folder costs one ``stat`` per file and one indexed query per
chunk of files; a touched or replaced file changes its state and is re-hashed. The same cache
lets a blob that is read many times (a feature pack) be verified once per state of its file
(:meth:`vbstore.Store.verified_path`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .. import _threads
from ..errors import BadInput, StoreIOError
from ._ids import db_id, hex_id
from ._layout import RACY_SECONDS  # a file modified this recently is never cached
from ._objects import read_and_hash

# Files are first hashed (and checked) in the calling thread, PROBE_FILES of them, each timed.
# Where they are fast (vbstore._threads: small images on a local disk or in the page cache),
# the rest are hashed there too: threads would fight for the GIL at every read, hash and
# decode. Slower files (larger images, a network filesystem) go to a pool of threads.
PROBE_FILES = 32

if TYPE_CHECKING:
    from ._base import StoreBase


class FileStates:
    """The file-state cache of one store: ``store.file_states``."""

    def __init__(self, store: StoreBase) -> None:
        self.store = store

    def hash(
        self, paths: Sequence[str | Path], threads: int | None = None,
        check: Callable[[Path, bytes | None, str], str | None] | None = None,
        what: str = "unusable files",
    ) -> list[str]:
        """BLAKE3 of each file's bytes, in order, skipping unchanged files via the cache.

        ``check(path, data, digest)`` runs on every file that is hashed afresh (not on cache
        hits) and returns a problem description or None; problem files are never cached.
        ``data`` is the bytes that were hashed, for a file under 1 MiB (read once for both),
        else None (the check reads the file itself); ``digest`` is the file's BLAKE3 (of
        ``data``, when given).

        Raises:
            StoreIOError: a file is missing or unreadable (named).
            BadInput: ``check`` found problems; lists the first offending paths and the count.
        """
        states = []
        for path in paths:
            try:
                st = os.stat(path)
            except OSError as exc:
                raise StoreIOError(f"cannot read {path}: {exc.strerror}",
                                   hint="check the path and its permissions") from None
            states.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        known = self._cached_states(states)
        hashes: list[str | None] = [known.get(s) for s in states]
        missing = [i for i, h in enumerate(hashes) if h is None]
        if missing:
            def one(i: int) -> tuple[str, str | None]:
                try:
                    digest, data = read_and_hash(paths[i])
                    return digest, check(Path(paths[i]), data, digest) if check else None
                except OSError as exc:
                    raise StoreIOError(f"cannot read {paths[i]}: {exc.strerror}",
                                       hint="check the path and its permissions") from None

            problems = []
            fresh: dict[int, str] = {}
            for i, (digest, problem) in zip(missing, self._hash_all(missing, one, threads),
                                            strict=True):
                hashes[i] = fresh[i] = digest
                if problem:
                    problems.append((str(paths[i]), problem))
            bad = {path for path, _ in problems}
            cutoff = time.time_ns() - int(RACY_SECONDS * 1e9)
            rows = [(*states[i], db_id(fresh[i])) for i in missing
                    if states[i][3] < cutoff and str(paths[i]) not in bad]
            # a cache: best effort, skipped on a read-only store
            if rows and not self.store.read_only:
                with self.store.db.write() as conn:
                    conn.executemany(
                        "INSERT OR REPLACE INTO file_state(dev, inode, size, mtime_ns, ctime_ns, "
                        "hash) VALUES (?,?,?,?,?,?)", rows,
                    )
            if problems:  # the good files stay cached: fixing one file re-reads only it
                raise BadInput(what, sorted(problems))
        return hashes  # type: ignore[return-value]

    @staticmethod
    def _hash_all(missing: list[int], one: Callable[[int], tuple[str, str | None]],
                  threads: int | None) -> Iterator[tuple[str, str | None]]:
        """``one(i)`` for each of ``missing``, in order: here while files are fast (see
        :data:`PROBE_FILES`), else on ``threads`` threads (None: 2 per CPU, at most 8)."""
        probe = missing[:PROBE_FILES] if threads is None else []
        seconds = []
        for i in probe:
            start = time.perf_counter()
            yield one(i)
            seconds.append(time.perf_counter() - start)
        rest = missing[len(probe):]
        if threads == 1 or _threads.fast(seconds, _threads.HASH_FAST_SECONDS):
            yield from map(one, rest)
            return
        if not rest:
            return
        workers = threads or min(8, (os.cpu_count() or 2) * 2)
        # a thread pool (with logging: ~4 ms of imports) only where blobs are hashed,
        # never on a cached `get`
        from concurrent.futures import ThreadPoolExecutor

        # files go to the threads in runs, not one by one: a future and its locks per file
        # cost about what hashing a small image does
        size = max(1, min(64, len(rest) // (4 * workers)))
        runs = [rest[at:at + size] for at in range(0, len(rest), size)]
        with ThreadPoolExecutor(workers) as pool:
            for run in pool.map(lambda run: [one(i) for i in run], runs):
                yield from run

    def _cached_states(self, states: list[tuple]) -> dict[tuple, str]:
        # one indexed query per device: (dev, inode) is the primary key, and json_each passes
        # any number of inodes as a single parameter; a whole-device range scan when most rows
        # are wanted anyway
        known: dict[tuple, str] = {}
        by_dev: dict[int, list[int]] = {}
        for state in states:
            by_dev.setdefault(state[0], []).append(state[1])
        for dev, inodes in by_dev.items():
            ((rows_for_dev,),) = self.store.db.query(
                "SELECT count(*) FROM file_state WHERE dev = ?", (dev,))
            # asking for most of them: one range scan is cheaper
            if 4 * len(inodes) >= rows_for_dev:
                rows = self.store.db.query(
                    "SELECT inode, size, mtime_ns, ctime_ns, hash FROM file_state WHERE dev = ?",
                    (dev,))
            else:
                rows = self.store.db.query(
                    "SELECT inode, size, mtime_ns, ctime_ns, hash FROM file_state "
                    "WHERE dev = ? AND inode IN (SELECT value FROM json_each(?))",
                    (dev, json.dumps(inodes)),
                )
            for ino, size, mtime, ctime, digest in rows:
                known[(dev, ino, size, mtime, ctime)] = hex_id(digest)
        return known
