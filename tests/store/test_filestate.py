import os
import time

import pytest

from vbstore.canonical import digest


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "images"
    root.mkdir()
    paths = []
    for i in range(200):
        path = root / f"{i:04d}.bin"
        path.write_bytes(os.urandom(64) + str(i).encode())
        paths.append(path)
    past = time.time() - 10  # older than the racy window
    for path in paths:
        os.utime(path, (past, past))
    return paths


def _count_hashes(monkeypatch):
    import vbstore.store._filestate as fs

    calls = []
    real = fs.read_and_hash

    def counting(path):
        calls.append(path)
        return real(path)

    monkeypatch.setattr(fs, "read_and_hash", counting)
    return calls


def test_warm_hash_is_served_from_file_state(store, folder, monkeypatch):
    calls = _count_hashes(monkeypatch)
    cold = store.file_states.hash(folder)
    assert cold == [digest(p.read_bytes()) for p in folder]
    assert len(calls) == 200
    calls.clear()
    assert store.file_states.hash(folder) == cold
    assert calls == []


def test_touched_and_replaced_files_are_rehashed(store, folder, monkeypatch):
    store.file_states.hash(folder)
    calls = _count_hashes(monkeypatch)
    folder[3].write_bytes(b"new content")
    past = time.time() - 5
    os.utime(folder[3], (past, past))
    replacement = folder[7].with_suffix(".new")
    replacement.write_bytes(folder[7].read_bytes()[::-1])
    os.replace(replacement, folder[7])
    os.utime(folder[7], (past, past))
    os.utime(folder[9])  # touched, same content
    hashes = store.file_states.hash(folder)
    assert sorted(map(str, calls)) == sorted(map(str, [folder[3], folder[7], folder[9]]))
    assert hashes[3] == digest(b"new content")
    assert hashes[7] == digest(folder[7].read_bytes())


def test_missing_file_is_named(store, tmp_path):
    from vbstore.errors import StoreIOError

    with pytest.raises(StoreIOError, match=r"nope\.jpg"):
        store.file_states.hash([tmp_path / "nope.jpg"])


@pytest.fixture(params=["here", "threads"])
def where(request, monkeypatch):
    """Each file hashed in the calling thread (every file as fast as a small local image), or
    all but the probe's on threads (every file as slow as a network filesystem's)."""
    import vbstore._threads

    monkeypatch.setattr(vbstore._threads, "HASH_FAST_SECONDS",
                        3600.0 if request.param == "here" else 0.0)
    return request.param


def test_fast_files_are_hashed_here_slow_ones_on_threads(store, folder, where, thread_submits):
    """Threads fight for the GIL over small fast files: where the probe's median file is fast,
    no thread is started; otherwise the files past the probe go to the pool in runs."""
    from vbstore.store._filestate import PROBE_FILES

    hashes = store.file_states.hash(folder)
    assert hashes == [digest(p.read_bytes()) for p in folder]  # every digest in its place
    if where == "here":
        assert thread_submits == []
    else:
        assert 1 < len(thread_submits) <= (200 - PROBE_FILES) // 8


def test_check_runs_on_fresh_files_only_and_reports_all_problems(store, folder, where):
    from vbstore.errors import BadInput

    def reject_odd(path, data, digest_):
        assert data == path.read_bytes()  # the bytes hashed, read once for both
        assert digest_ == digest(data)  # and their hash
        return "odd" if int(path.stem) % 2 else None

    with pytest.raises(BadInput, match=r"100 unusable files: .*0001.bin: odd.*and 95 more"):
        store.file_states.hash(folder, check=reject_odd)
    evens = folder[::2]
    store.file_states.hash(evens, check=reject_odd)
    seen = []
    store.file_states.hash(evens, check=lambda p, data, digest: seen.append(p))
    assert seen == []  # cached: not checked again


def test_files_reach_the_threads_in_runs_and_come_back_in_order(store, folder, thread_submits):
    """A future per file costs about what hashing a small file does: 200 files are hashed in
    a few dozen runs, every digest in its file's place."""
    hashes = store.file_states.hash(folder, threads=2)
    assert hashes == [digest(p.read_bytes()) for p in folder]
    assert 1 < len(thread_submits) <= 200 // 8
