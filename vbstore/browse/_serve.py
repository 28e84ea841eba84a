"""Serving a snapshot with Datasette on 127.0.0.1 (never on another interface)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import MissingDependency, UsageError
from ._snapshot import TABLES


def _metadata(path: Path) -> Path:
    """Datasette metadata: titles and descriptions, results sorted newest first."""
    tables = {name: {"description": description} for name, (_, description) in TABLES.items()}
    tables["results"]["sort_desc"] = "created"
    meta = {"title": "vbstore", "description": "The store's registry, read-only.",
            "databases": {path.stem: {"tables": tables}}}
    out = path.with_suffix(".metadata.json")
    out.write_text(json.dumps(meta, indent=2))
    return out


def serve(path: str | Path, port: int = 8001) -> subprocess.Popen:
    """Start Datasette on ``http://127.0.0.1:PORT`` serving ``path`` read-only; the process.

    Raises:
        MissingDependency: datasette is not installed.
    """
    if importlib.util.find_spec("datasette") is None:
        raise MissingDependency("datasette", "browse")
    path = Path(path)
    command = [sys.executable, "-m", "datasette", "serve", "--immutable", str(path),
               "--host", "127.0.0.1", "--port", str(port), "--metadata", str(_metadata(path)),
               "--setting", "default_page_size", "50"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=_die_with_parent())


def _die_with_parent() -> Callable[[], None] | None:
    """What the server child runs before exec so that the kernel sends it SIGTERM when its
    parent dies, even of SIGKILL: no Datasette outlives the ``vbstore browse`` that started it.
    Linux only (``prctl(PR_SET_PDEATHSIG)``); resolved here, so the child only calls it."""
    if sys.platform != "linux":
        return None
    import ctypes  # Linux only, and only when a server starts

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


class _Stopped(Exception):
    """SIGTERM or SIGHUP arrived while serving."""


@contextlib.contextmanager
def serving(process: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """Run the body while ``process`` serves; leaving it (normally, by Ctrl-C, SIGTERM or SIGHUP)
    stops the server and returns: a ``kill PID`` of vbstore no longer leaves Datasette
    listening. Signals are caught only on the main thread, where Python delivers them."""
    def stop(signum: int, frame: object) -> None:
        raise _Stopped(signum)

    caught = (signal.SIGTERM, signal.SIGHUP)
    main = threading.current_thread() is threading.main_thread()
    saved = {sig: signal.signal(sig, stop) for sig in caught} if main else {}
    try:
        yield process
    except (KeyboardInterrupt, _Stopped):
        pass
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_until_up(process: subprocess.Popen, url: str, timeout: float = 30.0) -> None:
    """Return once ``url`` answers; a server that exits or stays silent is an error.

    Raises:
        UsageError: the server exited (its error output is named) or did not answer in time.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            assert process.stderr is not None  # serve() starts it with stderr=PIPE
            error = process.stderr.read().decode(errors="replace").strip().splitlines()
            raise UsageError(f"datasette exited: {error[-1] if error else process.returncode}",
                             hint="is the port in use? choose another with --port")
        try:
            with urllib.request.urlopen(url, timeout=1):  # noqa: S310 - our own 127.0.0.1 URL
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)
    raise UsageError(f"datasette did not answer at {url} within {timeout:.0f} s")
