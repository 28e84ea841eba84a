"""Several real processes on one store: no duplicate work, no 'database is locked'."""

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import time

from vbstore import Store
from vbstore.store import derivation_spec

BLOB = os.urandom(2 << 20)


def _write_same_blob(root, barrier, queue):
    barrier.wait()
    try:
        with Store(root) as s:
            queue.put(("ok", s.put_bytes(BLOB, "blob")))
    except Exception as exc:  # reported to the parent, which fails the test
        queue.put(("error", repr(exc)))


def _race_derivation(root, counter, barrier, queue):
    barrier.wait()
    try:
        with Store(root) as s:
            spec = derivation_spec("slow_op", 1, {}, {"n": 7})

            def compute():
                with open(counter, "a") as fh:
                    fh.write(f"{os.getpid()}\n")
                time.sleep(0.5)
                return s.put_json({"name": "computed", "version": "1"}, "suite")

            oid, _ = s.derive(spec, compute)
            queue.put(("ok", oid))
    except Exception as exc:
        queue.put(("error", repr(exc)))


def _run(target, args, n=8):
    ctx = mp.get_context("fork")
    barrier, queue = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, barrier, queue)) for _ in range(n)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
    return results


def test_eight_processes_write_the_same_blob(tmp_path):
    Store(tmp_path).close()
    results = _run(_write_same_blob, (tmp_path,))
    assert [r[0] for r in results] == ["ok"] * 8, results
    assert len({r[1] for r in results}) == 1
    with Store(tmp_path) as s:
        assert s.fsck().clean
        assert len(s.ls()) == 1


def test_eight_processes_race_on_one_derivation(tmp_path):
    Store(tmp_path).close()
    counter = tmp_path / "computations"
    results = _run(_race_derivation, (tmp_path, counter))
    assert [r[0] for r in results] == ["ok"] * 8, results
    assert len({r[1] for r in results}) == 1
    assert len(counter.read_text().splitlines()) == 1


def test_dead_lease_owner_is_taken_over(tmp_path):
    Store(tmp_path).close()
    script = textwrap.dedent(f"""
        import time
        from vbstore import Store
        from vbstore.store import derivation_spec, derivation_key
        s = Store({str(tmp_path)!r})
        key = derivation_key(derivation_spec("op", 1, {{}}, {{}}))
        with s.lease(key):
            print("held", flush=True)
            time.sleep(60)
    """)
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "held"
        with Store(tmp_path) as s:
            assert len(s.live_leases()) == 1
            os.kill(owner.pid, signal.SIGKILL)
            owner.wait(10)
            assert s.live_leases() == []
            start = time.monotonic()
            oid, computed = s.derive(derivation_spec("op", 1, {}, {}),
                                     lambda: s.put_bytes(b"taken over"), timeout=10)
            assert computed and time.monotonic() - start < 5
            assert s.read_bytes(oid) == b"taken over"
    finally:
        if owner.poll() is None:
            owner.kill()
