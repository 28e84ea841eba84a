"""The one network probe: is a host answering now, asked in a second or two.

Hub clients retry for ~50 s without a network, so before any download or remote call vbstore
opens one TCP connection to the host the request would reach first (the proxy when one applies),
on a daemon thread because DNS resolution ignores socket timeouts. A host that did not answer is
remembered for a while, so a run that asks many times pays the timeout once.
``VBSTORE_OFFLINE=1`` (or ``HF_HUB_OFFLINE=1``) declares the machine offline: nothing but
loopback is tried.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import urllib.request
from urllib.parse import urlsplit

OFFLINE_VARS = ("VBSTORE_OFFLINE", "HF_HUB_OFFLINE")
LOOPBACK = ("127.0.0.1", "localhost", "::1")
# a host that did not answer is not asked again this long; one that did is asked each time (a
# connect to a live host costs milliseconds, and a host that went away must be noticed)
UNREACHABLE_MEMORY_S = 30.0
_TRUE = {"1", "on", "yes", "true"}
_memory: dict[tuple[str, int], tuple[float, str]] = {}
_lock = threading.Lock()


def probe_timeout() -> float:
    """Seconds a probe may take (``VBSTORE_PROBE_TIMEOUT``, or the older
    ``VBSTORE_REMOTE_PROBE_TIMEOUT``; default 2; 0 turns probing off)."""
    raw = os.environ.get(
        "VBSTORE_PROBE_TIMEOUT", os.environ.get("VBSTORE_REMOTE_PROBE_TIMEOUT", "2")
    )
    try:
        return float(raw)
    except ValueError:
        return 2.0


def offline_reason() -> str | None:
    """Why the environment declares itself offline (``VBSTORE_OFFLINE=1``...), or None."""
    for var in OFFLINE_VARS:
        if os.environ.get(var, "").strip().lower() in _TRUE:
            return f"{var}={os.environ[var]}"
    return None


def first_hop(url: str) -> tuple[str, int]:
    """The host and port a request to ``url`` connects to first: the proxy when one applies."""
    parts = urlsplit(url if "://" in url else f"https://{url}")
    host, port = parts.hostname or "", parts.port or (80 if parts.scheme == "http" else 443)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(host):
        via = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        host, port = via.hostname or "", via.port or (443 if via.scheme == "https" else 80)
    return host, port


def unreachable_reason(url: str) -> str | None:
    """None when the first hop of ``url`` answers now; else why not, in a few words."""
    host, port = first_hop(url)
    declared = offline_reason()
    if declared and host not in LOOPBACK:
        return f"offline ({declared})"
    timeout = probe_timeout()
    if timeout <= 0:
        return None
    key = (host, port)
    with _lock:
        remembered = _memory.get(key)
    if remembered is not None and remembered[0] > time.monotonic():
        return f"{host}:{port} is unreachable (no answer a moment ago)"
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
            _memory.pop(key, None)
        return None
    error = outcome[0] if outcome else None
    reason = f"{host}:{port} is unreachable" + (
        f" ({getattr(error, 'strerror', None) or error})"
        if error
        else f" (no answer within {timeout:.1f} s)"
    )
    with _lock:
        _memory[key] = (time.monotonic() + UNREACHABLE_MEMORY_S, reason)
    return reason


def forget() -> None:
    """Drop remembered answers (tests, or after the network changed)."""
    with _lock:
        _memory.clear()
