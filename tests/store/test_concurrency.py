"""Several real processes on one store: no duplicate work, no 'database is locked'."""

import os
import signal
import subprocess
import sys
import textwrap
import time

from vbstore import Store
from vbstore.store import derivation_spec, fsck

WRITE_SAME_BLOB = """
import random, sys
from vbstore import Store
blob = random.Random(0).randbytes(2 << 20)
with Store(sys.argv[1]) as s:
    print(s.put_bytes(blob, "blob"))
"""

RACE_DERIVATION = """
import os, sys, time
from vbstore import Store
from vbstore.store import derivation_spec
def suite_doc(name):
    return {"slug": "s", "name": name, "version": 1, "protocol": {"task": "knn",
            "data": {"kind": "external"}, "conditions": [{"name": "val", "sampleCount": 1}],
            "metrics": [{"key": "top1", "headline": True}]}}
with Store(sys.argv[1]) as s:
    def compute():
        with open(sys.argv[2], "a") as fh:
            fh.write(f"{os.getpid()}\\n")
        time.sleep(0.5)
        return s.put_json(suite_doc("computed"), "suite")
    print(s.derive(derivation_spec("slow_op", 1, {}, {"n": 7}), compute)[0])
"""


def _run(script: str, *args: str, n: int = 8) -> list[str]:
    """Start n processes at once; return what each printed (failing on any error)."""
    procs = [subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(n)]
    outs = [p.communicate(timeout=120) for p in procs]
    errors = [err for p, (_, err) in zip(procs, outs, strict=True) if p.returncode != 0]
    assert not errors, errors
    assert not any("database is locked" in err for _, err in outs)
    return [out.strip() for out, _ in outs]


def test_eight_processes_write_the_same_blob(tmp_path):
    Store(tmp_path).close()
    ids = _run(WRITE_SAME_BLOB, str(tmp_path))
    assert len(set(ids)) == 1
    with Store(tmp_path) as s:
        assert fsck(s).clean
        assert len(s.ls()) == 1


def test_eight_processes_race_on_one_derivation(tmp_path):
    Store(tmp_path).close()
    counter = tmp_path / "computations"
    ids = _run(RACE_DERIVATION, str(tmp_path), str(counter))
    assert len(set(ids)) == 1
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
            oid, computed, _ = s.derive(derivation_spec("op", 1, {}, {}),
                                        lambda: s.put_bytes(b"taken over"), timeout=10)
            assert computed
            assert time.monotonic() - start < 5
            assert s.read_bytes(oid) == b"taken over"
    finally:
        if owner.poll() is None:
            owner.kill()
