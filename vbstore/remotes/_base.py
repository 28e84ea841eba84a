"""What every remote offers the transfer code, and the fast check that a remote is reachable.

A remote is read and written through a handful of calls: read a file (optionally at a pinned
revision), say which of many files exist, read a ref together with a version token, and publish
a set of files plus one ref update. ``publish`` is where the kinds differ: a directory and S3
upload blobs first and then swap the ref conditionally; the Hub makes everything one commit.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import UsageError
from ._config import RemoteConfig
from ._errors import RemoteOffline

# A remote found unreachable is not probed again for this long, so a `get` that asks the
# binary cache about many derivations pays the probe once, not once per derivation.
UNREACHABLE_MEMORY_S = 30.0
_unreachable: dict[tuple[str, int], float] = {}
_lock = threading.Lock()


def probe_timeout() -> float:
    """Seconds a reachability probe may take (``VBSTORE_REMOTE_PROBE_TIMEOUT``, default 2)."""
    try:
        return float(os.environ.get("VBSTORE_REMOTE_PROBE_TIMEOUT", "2"))
    except ValueError:
        return 2.0


def probe_url(remote: str, url: str) -> None:
    """Probe the host that a request to ``url`` would first connect to.

    That is the proxy when ``HTTPS_PROXY``/``HTTP_PROXY`` applies (and ``NO_PROXY`` does not),
    else the URL's own host. ``VBSTORE_REMOTE_PROBE_TIMEOUT=0`` turns the probe off.

    Raises:
        RemoteOffline: the connection failed or did not finish in time.
    """
    if probe_timeout() <= 0:
        return
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(host):
        via = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        host, port = via.hostname or "", via.port or (443 if via.scheme == "https" else 80)
    probe(remote, host, port)


def probe(remote: str, host: str, port: int) -> None:
    """Open (and close) one TCP connection to ``host:port`` within the probe timeout.

    DNS resolution has no timeout of its own, so the connect runs on a daemon thread and the
    caller stops waiting when the timeout passes.

    Raises:
        RemoteOffline: the connection failed or did not finish in time.
    """
    key = (host, port)
    with _lock:
        until = _unreachable.get(key)
    if until is not None and until > time.monotonic():
        raise RemoteOffline(remote, f"{host}:{port} did not answer a moment ago")
    timeout = probe_timeout()
    outcome: list[BaseException | None] = []

    def connect() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            outcome.append(None)
        except OSError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=connect, daemon=True, name=f"vbstore-probe-{host}")
    worker.start()
    worker.join(timeout + 0.2)
    if outcome and outcome[0] is None:
        with _lock:
            _unreachable.pop(key, None)
        return
    with _lock:
        _unreachable[key] = time.monotonic() + UNREACHABLE_MEMORY_S
    reason = f"cannot connect to {host}:{port}" + (
        f" ({outcome[0].strerror or outcome[0]})" if outcome and outcome[0] else
        f" within {timeout:.1f} s")
    raise RemoteOffline(remote, reason)


def forget_unreachable() -> None:
    """Drop the memory of unreachable hosts (tests, or after the network comes back)."""
    with _lock:
        _unreachable.clear()


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

    def close(self) -> None:
        """Release clients and temporary files."""

    def check_online(self) -> None:
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

    @abstractmethod
    def read_ref(self, name: str, revision: str | None = None) -> tuple[bytes | None, str | None]:
        """``(bytes or None, version)`` of ``refs/<name>.json`` for a later conditional update."""

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
