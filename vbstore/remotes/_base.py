"""What every remote offers the transfer code, and the fast check that a remote is reachable.

A remote is read and written through a handful of calls: read a file (optionally at a pinned
revision), say which of many files exist, read a ref together with a version token, and publish
a set of files plus one ref update. ``publish`` is where the kinds differ: a directory and S3
upload blobs first and then swap the ref conditionally; the Hub makes everything one commit.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import blake3

from .._net import forget, unreachable_reason
from ..errors import UsageError
from . import _closure
from ._config import RemoteConfig
from ._errors import RemoteError, RemoteOffline

CHUNK = 1 << 20


def probe_url(remote: str, url: str) -> None:
    """Probe the first hop of ``url`` (see :mod:`vbstore._net`).

    Raises:
        RemoteOffline: it did not answer in time, or the machine is declared offline.
    """
    reason = unreachable_reason(url)
    if reason is not None:
        raise RemoteOffline(remote, reason)


def forget_unreachable() -> None:
    """Drop the memory of probed hosts (tests, or after the network comes back)."""
    forget()


@dataclass(frozen=True)
class RefUpdate:
    """Set ``refs/<name>.json`` to ``data`` only if its version is still ``expected``.

    ``expected`` is what :meth:`Remote.read_ref` returned when the operation began: an ETag on
    S3, a content hash in a directory, the commit read before the push on the Hub; None when the
    ref did not exist.
    """

    name: str
    data: bytes
    expected: str | None


def local_digest(local: Path | bytes, algorithm) -> str:
    """The hex digest of a local file or bytes under ``algorithm`` (a hashlib-like constructor)."""
    hasher = algorithm()
    if isinstance(local, bytes):
        hasher.update(local)
    else:
        with open(local, "rb") as handle:
            while chunk := handle.read(CHUNK):
                hasher.update(chunk)
    return hasher.hexdigest()


def bounded(chunks: Iterable[bytes], limit: int, what: str, remote: str) -> Iterator[bytes]:
    """Pass ``chunks`` on, failing as soon as more than ``limit`` bytes came (a hostile remote
    may serve a "small" file that never ends)."""
    taken = 0
    try:
        for chunk in chunks:
            taken += len(chunk)
            if taken > limit:
                raise RemoteError(f"{what} on remote {remote!r} is larger than {limit} bytes",
                                  hint="the remote is damaged or not a vbstore remote")
            yield chunk
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()  # stop the download now, not when the generator is collected


def document_limit() -> int:
    """The most bytes a ref or derivation record may have (read at call time: tests lower it)."""
    return _closure.MAX_DOCUMENT_BYTES


class Remote(ABC):
    """One configured remote, opened for a single operation (use it as a context manager)."""

    #: Whether ``revision=`` pins a commit on this kind of remote.
    has_revisions = False

    def __init__(self, config: RemoteConfig) -> None:
        self.config = config
        self.name = config.name

    def __enter__(self) -> Remote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release clients and temporary files."""

    def check_online(self) -> None:  # noqa: B027 (optional hook)
        """Raise :class:`RemoteOffline` at once when the remote cannot be reached."""

    def resolve(self, revision: str | None) -> str | None:
        """The immutable revision that reads should pin (a commit sha), or None without history.

        Raises:
            UsageError: a revision was given to a remote that has none.
        """
        if revision is not None:
            raise UsageError(f"remote {self.name!r} ({self.config.scheme}) has no revisions",
                             hint="--revision pins a commit on Hugging Face Hub remotes only")
        return None

    def begin_push(self) -> str | None:
        """Prepare for a push (create the repository if needed); return the base revision."""
        return None

    @abstractmethod
    def read(self, path: str, revision: str | None = None,
             limit: int | None = None) -> bytes | None:
        """The bytes of ``path``, or None when it does not exist.

        Raises:
            RemoteError: the file is larger than ``limit`` or the remote failed.
        """

    @abstractmethod
    def download(self, path: str, revision: str | None = None) -> Iterable[bytes] | None:
        """The bytes of ``path`` as chunks (for large blobs), or None when it does not exist."""

    @abstractmethod
    def existing(self, paths: Iterable[str], revision: str | None = None) -> set[str]:
        """Which of ``paths`` exist on the remote."""

    def unchanged(self, files: Mapping[str, Path | bytes], revision: str | None = None) -> set[str]:
        """Which of ``files`` (remote path → local file or bytes) the remote holds byte for byte.

        A push uploads every other one again, so a file planted under an id is overwritten.
        This default reads each remote file back and compares BLAKE3 digests; S3 and the Hub
        compare the checksums their listings carry instead.
        """
        same = set()
        for path, local in files.items():
            chunks = self.download(path, revision)
            if chunks is None:
                continue
            hasher = blake3.blake3()
            for chunk in chunks:
                hasher.update(chunk)
            if hasher.hexdigest() == local_digest(local, blake3.blake3):
                same.add(path)
        return same

    @abstractmethod
    def read_ref(self, name: str, revision: str | None = None,
                 limit: int | None = None) -> tuple[bytes | None, str | None]:
        """``(bytes or None, version)`` of ``refs/<name>.json`` for a later conditional update.

        ``limit`` (default: :func:`document_limit`) bounds the bytes read: a shared board's
        listing may be larger than one object's closure.
        """

    @abstractmethod
    def publish(self, files: Mapping[str, Path | bytes], ref: RefUpdate | None,
                message: str) -> str | None:
        """Upload ``files`` (remote path → local file or bytes), then apply ``ref``.

        Returns the new revision where the remote has revisions.

        Raises:
            RemoteConflict: the ref (or, on the Hub, the branch) moved since it was read.
        """

    @abstractmethod
    def list_refs(self, revision: str | None = None) -> list[str]:
        """The names of the refs on the remote."""

    def describe(self) -> str:
        return f"{self.name} ({self.config.url})"
