"""Directory and S3 remotes: one fsspec code path, two ways to swap a ref safely.

Blobs and derivation records go through the same fsspec calls on both (``cat_file``,
``open``, ``exists``, ``put_file``/``pipe_file``, ``find``). Blobs are content-addressed, so a
duplicate or concurrent upload of one is harmless. Only the ref update must be conditional:

- directory: under an exclusive ``flock`` on ``refs/.lock``, compare the current ref's content
  hash with the one read when the push began, then write a temp file and rename it over the ref;
- S3: ``PutObject`` with ``If-Match: <ETag read before>`` (or ``If-None-Match: *`` to create),
  which S3 evaluates atomically; a 412 or 409 answer is a :class:`RemoteConflict`.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import re
import socket
import stat
import time
import uuid
from abc import abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import blake3

from .._progress import progress
from ..errors import VbstoreError
from ._base import RefUpdate, Remote, bounded, document_limit, local_digest, probe_url
from ._config import RemoteConfig
from ._errors import RemoteConflict, RemoteError, UnsafeRemotePath, redact
from ._paths import check_ref

# Local imports: fsspec, s3fs and botocore load when such a remote is opened.

CHUNK = 1 << 20
_BATCH = 64
# A push's temp file in a directory remote: ``<final name>.<writer>-<pid>-<uuid4 hex>.tmp``. The
# writer is this machine and PID namespace (see _writer), so the next push from the same place
# removes a temp whose pid is dead at once; a temp of another place (or of a version before
# writers were named: ``<final name>.<uuid4 hex>.tmp``) is removed once unchanged this long.
# A live push keeps its temp's mtime fresh by writing to it, and renames it when done.
STALE_TEMP_SECONDS = 600
_TEMP = re.compile(r"\.(?:([0-9a-f]{16})-([0-9]{1,10})-)?[0-9a-f]{32}\.tmp\Z")


@functools.cache
def _writer() -> str:
    """Who writes a temp file, as 16 hex digits: the host, its boot and the PID namespace, so a
    pid in a temp's name can be checked for life only where it means the same process."""
    parts = [socket.gethostname()]
    with contextlib.suppress(OSError):
        parts.append(Path("/proc/sys/kernel/random/boot_id").read_text().strip())
    with contextlib.suppress(OSError):
        parts.append(str(os.stat("/proc/self/ns/pid").st_ino))
    return blake3.blake3("\0".join(parts).encode()).hexdigest()[:16]


def temp_name(full: str) -> str:
    """The temp file a push writes ``full`` through (renamed into place when complete)."""
    return f"{full}.{_writer()}-{os.getpid()}-{uuid.uuid4().hex}.tmp"


def _dead(pid: int) -> bool:
    """Whether no process ``pid`` runs here (a pid that cannot be asked counts as alive)."""
    if pid <= 0:  # 0 and -1 would ask a process group
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # PermissionError: alive, another user's
        return False
    return False


class FsspecRemote(Remote):
    """The shared body of directory and S3 remotes; ``self.fs`` is an fsspec filesystem."""

    #: Exceptions of the client library that mean "this remote operation failed".
    client_errors: tuple[type[BaseException], ...] = (OSError, ValueError)

    def __init__(self, config: RemoteConfig, fs, root: str) -> None:
        super().__init__(config)
        self.fs = fs
        self.root = root.rstrip("/")

    def full(self, path: str) -> str:
        return f"{self.root}/{path}"

    @contextmanager
    def _failing(self, what: str) -> Iterator[None]:
        """Turn a filesystem error into one :class:`RemoteError` line naming the remote."""
        try:
            yield
        except VbstoreError:  # already one of ours (ValueError below must not swallow it)
            raise
        except self.client_errors as exc:
            raise RemoteError(f"{what} on remote {self.name!r} failed: {redact(str(exc))}",
                              hint="check the remote URL, permissions and credentials") from None

    def read(self, path: str, revision: str | None = None,
             limit: int | None = None) -> bytes | None:
        self.resolve(revision)
        full = self.full(path)
        with self._failing(f"reading {path}"):
            try:
                with self.fs.open(full, "rb") as handle:
                    return _read_bounded(handle, limit, path, self.name)
            except FileNotFoundError:
                return None

    def download(self, path: str, revision: str | None = None) -> Iterable[bytes] | None:
        self.resolve(revision)
        with self._failing(f"opening {path}"):
            try:
                handle = self.fs.open(self.full(path), "rb")
            except FileNotFoundError:
                return None
        return self._chunks(handle, path)

    def _chunks(self, handle, path: str) -> Iterator[bytes]:
        with handle, self._failing(f"downloading {path}"):
            while chunk := handle.read(CHUNK):
                yield chunk

    def existing(self, paths: Iterable[str], revision: str | None = None) -> set[str]:
        self.resolve(revision)
        with self._failing("listing objects"):
            return {p for p in paths if self.fs.exists(self.full(p))}

    def list_refs(self, revision: str | None = None) -> list[str]:
        self.resolve(revision)
        base = self.full("refs") + "/"
        with self._failing("listing refs"):
            try:
                found = self.fs.find(base)
            except FileNotFoundError:
                return []
        names = []
        for item in found:
            rel = item[len(base):] if item.startswith(base) else ""
            if rel.endswith(".json"):
                try:
                    names.append(check_ref(rel[: -len(".json")]))
                except UnsafeRemotePath:
                    continue  # not ours: never hand it on as a name
        return sorted(names)

    def publish(self, files: Mapping[str, Path | bytes], ref: RefUpdate | None,
                message: str) -> str | None:
        # blobs first: a ref must never point at something not yet uploaded
        self._upload(files)
        if ref is not None:
            self._swap_ref(ref)
        return None

    @abstractmethod
    def _upload(self, files: Mapping[str, Path | bytes]) -> None:
        """Write every file (remote path → local file or bytes); blobs are idempotent."""

    @abstractmethod
    def _swap_ref(self, ref: RefUpdate) -> None:
        """Apply ``ref`` only if the ref's version is still ``ref.expected``.

        Raises:
            RemoteConflict: it is not.
        """


class DirRemote(FsspecRemote):
    """A plain directory (local disk or a mounted share)."""

    def __init__(self, config: RemoteConfig) -> None:
        import fsspec

        root = urlsplit(config.url).path
        super().__init__(config, fsspec.filesystem("file"), root)

    def full(self, path: str) -> str:
        full = super().full(path)
        # a symlink inside the remote must not lead out of it
        real_root = os.path.realpath(self.root)
        real = os.path.realpath(full)
        if real != real_root and not real.startswith(real_root + os.sep):
            raise UnsafeRemotePath("path (leaves the remote through a link)", path)
        return full

    def _open_regular(self, path: str):
        """``path`` opened for reading, or None when absent; only a regular file is read (a
        FIFO would block the read forever, a device never end).

        Raises:
            RemoteError: the path is something else than a regular file.
        """
        full = self.full(path)
        with self._failing(f"opening {path}"):
            try:  # non-blocking: opening a FIFO must not wait for a writer
                fd = os.open(full, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            except FileNotFoundError:
                return None
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise RemoteError(f"{path} on remote {self.name!r} is not a regular file",
                                  hint="remove it from the remote (vbstore reads only regular "
                                       "files there); the local store is unchanged")
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")

    def read(self, path: str, revision: str | None = None,
             limit: int | None = None) -> bytes | None:
        self.resolve(revision)
        handle = self._open_regular(path)
        if handle is None:
            return None
        with handle, self._failing(f"reading {path}"):
            return _read_bounded(handle, limit, path, self.name)

    def download(self, path: str, revision: str | None = None) -> Iterable[bytes] | None:
        self.resolve(revision)
        handle = self._open_regular(path)
        return None if handle is None else self._chunks(handle, path)

    def begin_push(self) -> str | None:
        self.remove_stale_temps()
        return None

    def remove_stale_temps(self, older_than: float = STALE_TEMP_SECONDS) -> list[str]:
        """Remove the temp files killed pushes left; return their paths relative to the remote.

        A temp written from this machine and PID namespace by a process that no longer runs
        goes at once; any other goes once unchanged for ``older_than`` seconds (a younger one
        may be a running push's on another machine)."""
        removed, cutoff, here = [], time.time() - older_than, _writer()
        for folder in ("objects", "derivations", "refs"):
            for dirpath, _, names in os.walk(os.path.join(self.root, folder)):
                for name in names:
                    match = _TEMP.search(name)
                    if not match:
                        continue
                    full = os.path.join(dirpath, name)
                    dead = match.group(1) == here and _dead(int(match.group(2)))
                    try:
                        if dead or os.lstat(full).st_mtime < cutoff:
                            os.unlink(full)
                            removed.append(os.path.relpath(full, self.root))
                    except OSError:
                        continue  # taken by another push's cleanup, or not ours to remove
        return removed

    def _upload(self, files: Mapping[str, Path | bytes]) -> None:
        with progress(f"pushing to {self.name}", len(files), "file") as shown:
            for path in sorted(files):
                with self._failing(f"uploading {path}"):
                    self._put(path, files[path])
                shown.update(1)

    def _put(self, path: str, source: Path | bytes) -> None:
        # temp + rename, so a reader never sees a half-written blob under its final name
        full = self.full(path)
        self.fs.makedirs(os.path.dirname(full), exist_ok=True)
        temp = temp_name(full)
        try:
            if isinstance(source, bytes):
                self.fs.pipe_file(temp, source)
            else:
                self.fs.put_file(str(source), temp)
            os.replace(temp, full)
        finally:
            if os.path.exists(temp):
                os.unlink(temp)

    def read_ref(self, name: str, revision: str | None = None,
                 limit: int | None = None) -> tuple[bytes | None, str | None]:
        data = self.read(f"refs/{check_ref(name)}.json", revision,
                         limit=limit or document_limit())
        return data, (blake3.blake3(data).hexdigest() if data is not None else None)

    def _swap_ref(self, ref: RefUpdate) -> None:
        path = f"refs/{check_ref(ref.name)}.json"
        refs_dir = os.path.dirname(self.full("refs/.lock"))
        with self._failing(f"updating {path}"):
            os.makedirs(refs_dir, exist_ok=True)
            fd = os.open(os.path.join(refs_dir, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                data, version = self.read_ref(ref.name)
                if data == ref.data:  # another push set it to exactly this meanwhile: done
                    return
                if version != ref.expected:
                    raise RemoteConflict(
                        f"ref {ref.name!r} on remote {self.name!r} changed while this push ran",
                        hint="pull it to see the other change, then push again")
                self._put(path, ref.data)
            finally:
                os.close(fd)


class S3Remote(FsspecRemote):
    """An S3 (or S3-compatible) bucket prefix, through s3fs."""

    def __init__(self, config: RemoteConfig) -> None:
        import s3fs

        opts = config.options
        client_kwargs = {"region_name": opts["region"]} if opts.get("region") else {}
        # fsspec reuses one instance per set of arguments: botocore loads its S3 model once
        fs = s3fs.S3FileSystem(
            endpoint_url=opts.get("endpoint_url"), client_kwargs=client_kwargs,
            use_listings_cache=False,
            config_kwargs={"connect_timeout": 5, "read_timeout": 60,
                           "retries": {"max_attempts": 2}},
        )
        super().__init__(config, fs, config.url[len("s3://"):])
        from botocore.exceptions import BotoCoreError, ClientError

        self.client_errors = (OSError, ValueError, BotoCoreError, ClientError)

    def existing(self, paths: Iterable[str], revision: str | None = None) -> set[str]:
        # one HEAD per path, but many in flight at once on s3fs's event loop
        import asyncio

        from fsspec.asyn import sync

        self.resolve(revision)
        wanted = list(paths)

        async def check() -> set[str]:
            found: set[str] = set()
            for i in range(0, len(wanted), _BATCH):
                batch = wanted[i : i + _BATCH]
                flags = await asyncio.gather(*(self.fs._exists(self.full(p)) for p in batch))
                found.update(p for p, flag in zip(batch, flags, strict=True) if flag)
            return found

        with self._failing("listing objects"):
            return sync(self.fs.loop, check)

    def unchanged(self, files: Mapping[str, Path | bytes], revision: str | None = None) -> set[str]:
        # a single-part upload's ETag is the MD5 of its bytes: compare without downloading;
        # a multipart ETag ("...-N") says nothing of the content, so those are read back
        import asyncio

        from fsspec.asyn import sync

        self.resolve(revision)
        paths = sorted(files)

        async def infos() -> dict[str, object]:
            found: dict[str, object] = {}
            for i in range(0, len(paths), _BATCH):
                batch = paths[i : i + _BATCH]
                got = await asyncio.gather(*(self.fs._info(self.full(p)) for p in batch),
                                           return_exceptions=True)
                found.update(zip(batch, got, strict=True))
            return found

        with self._failing("checking objects"):
            found = sync(self.fs.loop, infos)
        same, unsure = set(), {}
        for path, info in found.items():
            if isinstance(info, FileNotFoundError):
                continue
            if isinstance(info, BaseException):
                with self._failing(f"checking {path}"):
                    raise info
            etag = str(info.get("ETag") or "").strip('"')
            if etag and "-" not in etag:
                if etag == local_digest(files[path], hashlib.md5):
                    same.add(path)
            else:
                unsure[path] = files[path]
        return same | super().unchanged(unsure, revision)

    def _upload(self, files: Mapping[str, Path | bytes]) -> None:
        # s3fs uploads a list of files (and a dict of bytes) concurrently; in batches, so the
        # progress lines can say how far it is
        paths = sorted(files)
        with progress(f"pushing to {self.name}", len(paths), "file") as shown, \
                self._failing("uploading"):
            for i in range(0, len(paths), _BATCH):
                batch = paths[i : i + _BATCH]
                local = [p for p in batch if not isinstance(files[p], bytes)]
                data = {self.full(p): files[p] for p in batch if isinstance(files[p], bytes)}
                if local:
                    self.fs.put([str(files[p]) for p in local], [self.full(p) for p in local])
                if data:
                    self.fs.pipe(data)
                shown.update(len(batch))

    def check_online(self) -> None:
        region = self.config.options.get("region")
        default = f"https://s3.{region}.amazonaws.com" if region else "https://s3.amazonaws.com"
        probe_url(self.name, self.config.options.get("endpoint_url") or default)

    def read_ref(self, name: str, revision: str | None = None,
                 limit: int | None = None) -> tuple[bytes | None, str | None]:
        self.resolve(revision)
        full = self.full(f"refs/{check_ref(name)}.json")
        self.fs.invalidate_cache(full)
        with self._failing(f"reading ref {name}"):
            try:
                # one open gives the bytes and the ETag of the same version (s3fs pins reads to it)
                with self.fs.open(full, "rb") as handle:
                    data = _read_bounded(handle, limit or document_limit(), f"ref {name}",
                                         self.name)
                    return data, handle.details.get("ETag")
            except FileNotFoundError:
                return None, None

    def _swap_ref(self, ref: RefUpdate) -> None:
        bucket, _, key = self.full(f"refs/{check_ref(ref.name)}.json").partition("/")
        condition = {"IfMatch": ref.expected} if ref.expected else {"IfNoneMatch": "*"}
        try:
            self.fs.call_s3("put_object", Bucket=bucket, Key=key, Body=ref.data,
                            ContentType="application/json", **condition)
        except Exception as exc:
            code = _s3_code(exc)
            # 412: the condition failed; 409: a concurrent conditional write won the race;
            # NoSuchKey under If-Match: the ref was deleted meanwhile
            if code in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409") or (
                    ref.expected and code in ("NoSuchKey", "404")) or isinstance(
                    exc, FileExistsError):
                raise RemoteConflict(
                    f"ref {ref.name!r} on remote {self.name!r} changed while this push ran "
                    "(S3 refused the conditional write)",
                    hint="pull it to see the other change, then push again") from None
            raise RemoteError(
                f"updating ref {ref.name!r} on remote {self.name!r} failed: {redact(str(exc))}",
                hint="check the bucket and credentials") from None


def _read_bounded(handle, limit: int | None, path: str, remote: str) -> bytes:
    """Read a whole file, refusing one over ``limit`` bytes without reading past it."""
    if limit is None:
        return handle.read()
    parts = []
    # in chunks: read(limit + 1) would allocate the whole limit up front
    for chunk in bounded(iter(lambda: handle.read(CHUNK), b""), limit, path, remote):
        parts.append(chunk)
    return b"".join(parts)


def _s3_code(exc: BaseException) -> str | None:
    """The S3 error code of a botocore error, also when s3fs wrapped it in an OSError."""
    for candidate in (exc, exc.__cause__, exc.__context__):
        response = getattr(candidate, "response", None)
        if isinstance(response, dict):
            error = response.get("Error", {})
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return str(error.get("Code") or status)
    return None
