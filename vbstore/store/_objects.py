"""Blobs on disk: ``objects/ab/cdef...``, mode 0444, published atomically.

Publishing follows one order so that a crash at any instant leaves no partial blob visible:
write to a unique temp file in ``tmp/`` (same filesystem), hashing as the bytes go out; fsync;
``os.replace`` into place; fsync the fan-out directory. The caller inserts the registry row
afterwards, inside the same registry write lock as the rename, so ``gc`` never races a publish.
"""

from __future__ import annotations

import errno
import os
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import blake3

from ..errors import DiskFull, StoreIOError

CHUNK = 1 << 20
DEAD_TEMP_AGE = 24 * 3600.0  # a temp this old is dead whoever wrote it (another host's)
SMALL_FILE = 1 << 20
HOST = os.uname().nodename  # socket.gethostname()'s answer, without importing socket


def _io_error(exc: OSError, what: str) -> StoreIOError:
    if exc.errno == errno.ENOSPC or exc.errno == errno.EDQUOT:
        return DiskFull(f"no space left on device while {what}",
                        hint=f"{DiskFull.hint}; nothing partial was kept")
    return StoreIOError(f"{what} failed: {exc.strerror or exc}",
                        hint="check the store's permissions and disk")


class ObjectFiles:
    """The blob and temp-file layout of one store directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.objects = root / "objects"
        self._objects = os.fspath(self.objects)
        self.tmp = root / "tmp"

    def path(self, oid: str) -> Path:
        return self.objects / oid[:2] / oid[2:]  # _layout.object_path's layout

    def fspath(self, oid: str) -> str:
        """:meth:`path` as a string, for loops over millions of blobs (no Path objects)."""
        return f"{self._objects}/{oid[:2]}/{oid[2:]}"

    def exists(self, oid: str) -> bool:
        return os.path.isfile(self.fspath(oid))

    def temp_path(self) -> Path:
        # pid and host in the name let fsck tell a dead writer's leftovers from a live one's
        return self.tmp / f"{HOST}.{os.getpid()}.{uuid.uuid4().hex}.tmp"

    def write_temp(
        self, chunks: Iterable[bytes | memoryview], known_id: str | None = None,
        sync: bool = True,
    ) -> tuple[Path, str, int]:
        """Write ``chunks`` to a fresh temp file, fsynced; return (path, blake3 hex, size).

        The bytes are hashed as they are written, unless the caller already hashed exactly
        these immutable bytes and passes ``known_id``. With ``sync`` False the caller flushes
        many temp files at once (:meth:`flush`) before it publishes any of them.

        Raises:
            DiskFull: the disk filled up; the temp file is already removed.
            StoreIOError: any other write failure; the temp file is already removed.
        """
        temp = self.temp_path()
        hasher = None if known_id else blake3.blake3()
        size = 0
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise _io_error(exc, f"creating {temp}") from exc
        try:
            try:
                for chunk in chunks:
                    view = memoryview(chunk)
                    if hasher is not None:
                        hasher.update(view)
                    size += len(view)
                    while view:
                        written = os.write(fd, view)
                        view = view[written:]
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.chmod(temp, 0o444)
        except OSError as exc:
            _unlink_quietly(temp)
            raise _io_error(exc, "writing a blob") from exc
        except BaseException:
            _unlink_quietly(temp)
            raise
        if known_id:
            return temp, known_id, size
        assert hasher is not None  # made above whenever no known_id is given
        return temp, hasher.hexdigest(), size

    def publish(self, temp: Path, oid: str, sync: bool = True) -> bool:
        """Move a verified temp file into place; return False when the blob already existed.

        With ``sync`` False the fan-out directory is not flushed: the caller :meth:`flush`-es
        once after many renames.
        """
        target = self.fspath(oid)  # strings, not Paths: a board pull publishes 100k of these
        if os.path.isfile(target):
            _unlink_quietly(temp)
            return False
        try:
            try:
                os.replace(temp, target)
            except FileNotFoundError:  # first blob of this fan-out directory
                os.makedirs(os.path.dirname(target), exist_ok=True)
                _fsync_dir(self.objects)
                os.replace(temp, target)
            if sync:
                _fsync_dir(os.path.dirname(target))
        except OSError as exc:
            _unlink_quietly(temp)
            raise _io_error(exc, f"publishing {oid[:12]}") from exc
        return True

    def flush(self, paths: Iterable[Path]) -> None:
        """Make what was written to ``paths`` (files, or directories renamed into) durable.

        Many at once: their fsyncs run side by side on a few threads, so the filesystem's
        journal commits them in a few groups instead of once each (a 1000-blob batch costs
        ~0.1 ms a blob where one fsync after another costs milliseconds each). Only these
        paths are flushed: a ``syncfs`` would also write back every other process's dirty
        data on a shared disk.

        Raises:
            StoreIOError: a flush failed (the data may not be on disk).
        """
        paths = list(paths)
        try:
            if len(paths) <= 2:
                for path in paths:
                    _fsync_path(path)
                return
            # a thread pool (with logging: ~4 ms of imports) only where blobs are batched
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(_FLUSH_THREADS, len(paths))) as pool:
                for _ in pool.map(_fsync_path, paths):
                    pass
        except OSError as exc:
            raise _io_error(exc, "flushing blobs to disk") from exc

    def iter_files(self) -> Iterator[tuple[str, Path]]:
        """Every blob file as (id, path), including ones the registry does not know."""
        files, _ = self.scan()
        for oid, path in files.items():
            yield oid, Path(path)

    def scan(self) -> tuple[dict[str, str], list[str]]:
        """One pass over ``objects/``: ``{id: path}`` of every blob file, and the ids of
        symlinks (never written by vbstore). The directory entries' types are enough: no
        file is stat'ed."""
        files: dict[str, str] = {}
        links: list[str] = []
        if not self.objects.is_dir():
            return files, links
        for fan in sorted(os.scandir(self.objects), key=lambda e: e.name):
            if len(fan.name) != 2 or not fan.is_dir(follow_symlinks=False):
                continue
            for entry in os.scandir(fan.path):
                # a symlink is never a blob: following it would read outside the store
                if entry.is_file(follow_symlinks=False):
                    files[fan.name + entry.name] = entry.path
                elif entry.is_symlink():
                    links.append(fan.name + entry.name)
        return files, links

    def remove_dead_temps(self, dry_run: bool = False) -> list[tuple[str, int]]:
        """Remove (unless ``dry_run``) the temp files of dead writers: ``(name, bytes)`` of each.

        A temp file is dead when its writer (named in it, on this host) is gone, or when it is
        older than a day (a writer on another host of a shared store). fsck and gc both call
        this: gc is the way out of a full disk, and a writer killed mid-write leaves its
        partial pack here.
        """
        removed: list[tuple[str, int]] = []
        if not self.tmp.is_dir():  # a read-only store made without one
            return removed
        for entry in os.scandir(self.tmp):
            parts = entry.name.rsplit(".", 3)  # host.pid.uuid.tmp (the host may hold dots)
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:  # its writer just published it
                continue
            dead = time.time() - st.st_mtime > DEAD_TEMP_AGE
            if len(parts) == 4 and parts[0] == HOST and parts[1].isdigit():
                dead = dead or not _pid_alive(int(parts[1]))
            if not dead:
                continue
            if not dry_run:
                try:
                    os.unlink(entry.path)
                except FileNotFoundError:
                    continue
            removed.append((entry.name, st.st_size))
        return removed


def hash_and_stat(path: str) -> tuple[str, os.stat_result]:
    """BLAKE3 of a file and its ``fstat``, from one open that refuses a symlink."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        st = os.fstat(fd)
        if st.st_size >= SMALL_FILE:
            return hash_file(path), st
        hasher = blake3.blake3()
        while chunk := os.read(fd, SMALL_FILE):
            hasher.update(chunk)
        return hasher.hexdigest(), st
    finally:
        os.close(fd)


def read_and_hash(path: Path | str) -> tuple[str, bytes | None]:
    """BLAKE3 of a file's bytes, and the bytes themselves when the file is small (one read,
    so a check can decode what was hashed without opening the file again); None for a large
    file, hashed as :func:`hash_file` does."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size < SMALL_FILE:
            data = handle.read()
            return blake3.blake3(data).hexdigest(), data
    return hash_file(path), None


def hash_file(path: Path | str) -> str:
    """BLAKE3 of a file's bytes, read through mmap (large files hash on several threads)."""
    size = os.path.getsize(path)
    if size < SMALL_FILE:  # mmap setup costs more than it saves on small files
        with open(path, "rb") as handle:
            return blake3.blake3(handle.read()).hexdigest()
    hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)
    hasher.update_mmap(path)
    return hasher.hexdigest()


def read_chunks(handle: BinaryIO) -> Iterator[bytes]:
    while chunk := handle.read(CHUNK):
        yield chunk


_FLUSH_THREADS = 16  # fsyncs in flight at once: enough for the journal to group them


def _fsync_path(path: Path | str) -> None:
    """fsync a file or a directory (opened read-only, which Linux allows for both)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path | str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_quietly(path: Path) -> None:
    try:
        path.chmod(0o600)
        path.unlink()
    except FileNotFoundError:
        pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
