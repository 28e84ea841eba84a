"""Parsing a remote's document is bounded before it amplifies, and a remote file is read only
when it is a regular file (issue 21's PoCs: a 63 MiB ref or cached derivation of ``{}``s cost
1.7 GB of memory on a plain ``get``; a FIFO at an object path hung ``get``; a killed push left
its ``.tmp`` on a directory remote for good)."""

from __future__ import annotations

import logging
import os
import threading
import time
import tracemalloc
from pathlib import Path

import pytest
from remotes_support import store_state

from vbstore.remotes import RemoteError, TamperedBlob, _limits, fetch_derivation, pull, push


@pytest.fixture
def remote_dir(stores, tmp_path):
    from vbstore.remotes import add_remote

    for store in stores:
        add_remote(store, "d", str(tmp_path / "remote"))
    return tmp_path / "remote"


def _plant(path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.chmod(0o644)
    path.write_bytes(data)


def _empties(size: int) -> bytes:
    head = b'{"format":"vbstore.derivation/1","closure":['
    return head + b"{}," * ((size - len(head)) // 3) + b"{}]}"


def test_a_cached_derivation_of_empty_objects_is_refused_before_it_is_parsed(
        stores, lineage, remote_dir, caplog):
    a, b = stores
    push(a, "d", "exp/result")
    _plant(remote_dir / "derivations" / f"{lineage['eval_key']}.json", _empties(15 << 20))
    tracemalloc.start()
    try:
        with caplog.at_level(logging.WARNING, logger="vbstore.remotes"):
            assert fetch_derivation(b, lineage["eval_key"]) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "JSON values" in caplog.text
    assert peak < 64 << 20, f"peak {peak >> 20} MiB for a 15 MiB document"
    assert store_state(b) == ([], {}, 0, [])


def test_a_63_mib_ref_is_refused_at_16_mib(stores, lineage, remote_dir):
    a, b = stores
    push(a, "d", "exp/result")
    _plant(remote_dir / "refs" / "exp" / "result.json", _empties(63 << 20))
    with pytest.raises(RemoteError, match=f"larger than {16 << 20} bytes"):
        pull(b, "d/exp/result")
    assert store_state(b) == ([], {}, 0, [])


def test_a_closure_and_a_record_are_capped_by_their_counts(stores, lineage, remote_dir,
                                                          monkeypatch):
    a, b = stores
    push(a, "d", "exp/result")
    monkeypatch.setattr(_limits, "MAX_CLOSURE_ENTRIES", 2)
    with pytest.raises(TamperedBlob, match=r"its closure lists \d+ objects, over the 2 allowed"):
        pull(b, "d/exp/result")
    monkeypatch.undo()
    monkeypatch.setattr(_limits, "DEFAULT_RECORD_VALUES", 3)  # a result record holds more
    with pytest.raises(TamperedBlob, match=r"result .* holds over 3 JSON values"):
        pull(b, "d/exp/result")
    assert store_state(b) == ([], {}, 0, [])


def _in_time(call, seconds=20.0):
    """``call()``'s exception (or None) if it returns within ``seconds``; fails if it hangs."""
    outcome: list = []

    def run():
        try:
            call()
            outcome.append(None)
        except Exception as exc:  # handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still blocked after {seconds} s"
    return outcome[0]


def test_a_fifo_at_an_object_path_is_refused_not_waited_on(stores, lineage, remote_dir, tmp_path):
    a, b = stores
    push(a, "d", "exp/result")
    blob = remote_dir / "objects" / lineage["result"][:2] / lineage["result"][2:]
    blob.chmod(0o644)
    blob.unlink()
    os.mkfifo(blob)
    error = _in_time(lambda: pull(b, "d/exp/result"))
    assert isinstance(error, RemoteError)
    assert "is not a regular file" in str(error)
    assert store_state(b) == ([], {}, 0, [])
    derivation = remote_dir / "derivations" / f"{lineage['eval_key']}.json"
    derivation.unlink()
    os.mkfifo(derivation)
    assert _in_time(lambda: fetch_derivation(b, lineage["eval_key"])) is None


def test_the_next_push_removes_what_a_killed_push_left(stores, lineage, remote_dir):
    from vbstore.remotes._fsspec import STALE_TEMP_SECONDS

    a, _ = stores
    push(a, "d", "exp/result")
    folder = remote_dir / "objects" / lineage["head"][:2]
    stale = folder / f"{lineage['head'][2:]}.{'a' * 32}.tmp"
    fresh = folder / f"{lineage['head'][2:]}.{'b' * 32}.tmp"
    other = folder / "notes.tmp"  # not a push's temp file: never touched
    for path in (stale, fresh, other):
        path.write_bytes(b"half a blob")
    old = time.time() - STALE_TEMP_SECONDS - 60
    os.utime(stale, (old, old))
    os.utime(other, (old, old))
    push(a, "d", "exp/result")
    assert not stale.exists()
    assert fresh.exists()  # younger than the limit: perhaps a running push's
    assert other.exists()


def test_a_killed_pushs_temp_goes_with_the_next_push_not_an_hour_later(stores, lineage,
                                                                        remote_dir):
    """Issue 32: a SIGKILLed push's ``.tmp`` stayed on a directory remote for an hour."""
    import signal
    import subprocess
    import sys

    from vbstore.remotes._fsspec import temp_name

    a, _ = stores
    push(a, "d", "exp/result")
    final = str(remote_dir / "objects" / lineage["head"][:2] / lineage["head"][2:])
    # a push from this machine, killed while it writes its temp file
    code = (f"import os, signal; from vbstore.remotes._fsspec import temp_name; "
            f"t = temp_name({final!r}); open(t, 'wb').write(b'half a blob'); print(t, flush=True);"
            f"os.kill(os.getpid(), signal.SIGKILL)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL
    killed = Path(done.stdout.strip())
    running = Path(temp_name(final))  # this process's own: alive, a running push
    elsewhere = Path(f"{final}.{'c' * 16}-{1}-{'d' * 32}.tmp")  # another machine's pid 1
    for path in (running, elsewhere):
        path.write_bytes(b"half a blob")
    assert killed.exists()
    push(a, "d", "exp/result")
    assert not killed.exists()  # fresh, but its writer is dead
    assert running.exists()
    assert elsewhere.exists()  # fresh, and its writer cannot be asked: kept for now
    running.unlink()


@pytest.mark.parametrize("endpoint", ["http:////:pw@host", "http:///x@host:9000", "ftp://host",
                                      "host:9000"])
def test_an_endpoint_that_hides_a_password_or_is_not_http_is_refused(stores, endpoint):
    """The PoC: ``http:////:pw@host`` has an empty netloc, so the '@' check missed it and
    remotes.json stored the password."""
    from vbstore.errors import UsageError
    from vbstore.remotes import add_remote, list_remotes

    with pytest.raises(UsageError, match=r"endpoint_url"):
        add_remote(stores[0], "s3", "s3://bucket/x", {"endpoint_url": endpoint})
    assert list_remotes(stores[0]) == []
    assert not (stores[0].root / "remotes.json").exists() or b"pw" not in (
        stores[0].root / "remotes.json").read_bytes()
