"""The executor choice: nothing changes without one, flags are checked, pack boundaries agree."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from vbstore.cli import cli
from vbstore.errors import UsageError
from vbstore.features import RayExecutor, make_executor

ROOT = Path(__file__).resolve().parents[2]


def test_without_executor_ray_is_never_imported(tmp_path, shapes):
    code = ("import sys, vbstore.cli\n"
            "try:\n    vbstore.cli.cli(sys.argv[1:], standalone_mode=False)\n"
            "finally:\n    print('RAY', 'ray' in sys.modules)")
    args = ["--store", str(tmp_path / "s"), "get", "features", "-b", "test_vit", "--weights",
            "random", "-d", shapes, "--split", "val"]
    for _ in range(2):  # extracted, then cached
        run = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert run.returncode == 0, run.stderr
        assert "RAY False" in run.stdout, run.stdout


def test_executor_flags_are_checked(tmp_path, shapes):
    assert make_executor(None) is None
    assert make_executor("local") is None
    assert make_executor("ray", "auto") == RayExecutor(address="auto")
    with pytest.raises(UsageError, match="need --executor ray"):
        make_executor(None, "auto")
    with pytest.raises(UsageError, match="at least 1"):
        RayExecutor(workers=0)
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "s"), "get", "features", "-b",
                                      "test_vit", "--weights", "random", "-d", shapes,
                                      "--split", "val", "--ray-address", "auto"])
    assert result.exit_code == 2
    assert "add --executor ray" in result.output


@pytest.mark.parametrize(("mode", "batch_size", "max_bytes", "max_rows"), [
    ("pooled", 4, 1 << 30, 8), ("pooled", 3, 1 << 30, 8), ("both", 4, 5000, 4096),
    ("dense", 5, 7000, 4096)])
def test_rows_per_pack_predicts_the_local_writer(mode, batch_size, max_bytes, max_rows):
    """Ray cuts work at rows_per_pack: it must be exactly where PackWriter flushes."""
    import torch

    from vbstore.features._packs import PackWriter, row_bytes, rows_per_pack

    class NoRows:
        def add(self, *args):
            pass

    class Sink:
        def __init__(self):
            self.sizes = []
            self.feature_rows = NoRows()

        def put_tensors(self, tensors, kind, metadata):
            self.sizes.append(next(iter(tensors.values())).shape[0])
            return f"{len(self.sizes):064x}"

    out = {"layers": {-1: {"pooled": torch.zeros(batch_size, 32),
                           "dense": torch.zeros(batch_size, 32, 4, 4)}}}
    sink = Sink()
    writer = PackWriter(sink, "k", [-1], mode, torch.float16, max_bytes=max_bytes,
                        max_rows=max_rows)
    for i in range(12):
        writer.add([f"{i}.{j}" for j in range(batch_size)], out)
    writer.flush()
    one = {"layers": {-1: {k: v[:1] for k, v in out["layers"][-1].items()}}}
    per_pack = rows_per_pack(row_bytes(one, [-1], mode, torch.float16), batch_size, max_bytes,
                             max_rows)
    total = 12 * batch_size
    tail = [total % per_pack] if total % per_pack else []
    assert sink.sizes == [per_pack] * (total // per_pack) + tail


def test_a_tampered_pack_in_the_sink_is_refused(tmp_path):
    """The driver adopts a worker's pack only when its bytes hash to its id."""
    from vbstore import Store
    from vbstore.features._ray import _adopt
    from vbstore.remotes import TamperedBlob, add_remote, object_path

    with Store(tmp_path / "s") as store:
        add_remote(store, "sink", str(tmp_path / "remote"))
        oid = "ab" * 32
        path = tmp_path / "remote" / object_path(oid)
        path.parent.mkdir(parents=True)
        path.write_bytes(b"not the pack")
        with pytest.raises(TamperedBlob):
            _adopt(store, ("remote", store_remote(store, "sink")), oid)
        assert not store.has(oid)


def store_remote(store, name):
    from vbstore.remotes import registry

    return registry(store).get(name)


class _Ended(Exception):
    """SIGTERM reached the runner (make test's Ctrl-C ends its serial pass so)."""


def _end_on_sigterm(signum, frame):
    raise _Ended(f"signal {signum}")


def _end_group(run: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(run.pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.serial  # a two-node Ray cluster: one at a time, in a pytest of its own, never a worker
def test_ray_suite_in_loopback_namespace():
    """Run tests/ray_cluster (a real two-node Ray) inside a loopback-only network namespace."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.fail("the Ray tests need `unshare` and `ip` (util-linux, iproute2)")
    unshare = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--map-root-user", "--net"]
    inner = (f"ip link set lo up && exec {sys.executable} -m pytest -q -x -p no:cacheprovider "
             f"{ROOT / 'tests' / 'ray_cluster'}")
    # its own process group: a run past the limit, or one this runner must leave (SIGTERM,
    # Ctrl-C), is ended whole, with the Ray nodes it started (a timeout that killed `unshare`
    # alone left both nodes running); the limit leaves room for a loaded machine, where the
    # suite took 10 min for its first two tests (load 25)
    previous = signal.signal(signal.SIGTERM, _end_on_sigterm)
    run = subprocess.Popen([*unshare, "sh", "-c", inner], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True,
                           env={**os.environ, "VBSTORE_RAY_NETNS": "1", "PYTHONPATH": str(ROOT)})
    try:
        out, err = run.communicate(timeout=1800)
    except subprocess.TimeoutExpired:
        _end_group(run)
        out, err = run.communicate()
        pytest.fail(f"the Ray suite ran past 30 min:\n{out[-6000:]}{err[-3000:]}")
    finally:  # on SIGTERM or Ctrl-C too: nothing the run started outlives it
        signal.signal(signal.SIGTERM, previous)
        if run.poll() is None:
            _end_group(run)
            run.communicate()
    assert run.returncode == 0, out[-6000:] + err[-3000:]
    assert " passed" in out, out[-2000:]
    assert "skipped" not in out, out[-2000:]
