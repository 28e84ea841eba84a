"""Ctrl-C on a driver extracting on Ray: exit 130, no worker writes after, the store consistent,
and a rerun finishes with the same featureset id."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from vbstore import Store
from vbstore.data import load_manifest
from vbstore.engine import get_features
from vbstore.features import RayExecutor
from vbstore.store import fsck

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
# the CLI, with packs of 8 rows as the small_packs fixture makes them in this process, and Ctrl-C
# acted on as in a terminal's foreground process: a run started in the background (a shell's `&`)
# hands SIGINT down ignored, and the driver then outlived its Ctrl-C every time
LAUNCH = ("import signal, sys\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
          "from vbstore.features import _packs\n_packs.PACK_ROWS = 8\n"
          "from vbstore.cli import cli\ncli(sys.argv[1:], prog_name='vbstore')")
PROGRESS = re.compile(r"extracting: (\d+)/40 images, \d+\.\d images/s over 2 workers")


def _holder(fifo: str, roots: list[int]) -> int | None:
    """The PID, among ``roots`` and their descendants, that has ``fifo`` open."""
    for root in roots:
        try:
            tree = [psutil.Process(root), *psutil.Process(root).children(recursive=True)]
        except psutil.Error:
            continue
        for proc in tree:
            try:
                if any(os.readlink(f"/proc/{proc.pid}/fd/{fd}") == fifo
                       for fd in os.listdir(f"/proc/{proc.pid}/fd")):
                    return proc.pid
            except (psutil.Error, OSError):
                continue
    return None


def _block_an_actor(fifo: str, real: bytes, driver: int, cluster: list[int], deadline: float
                    ) -> tuple[int, int]:
    """Feed ``fifo`` to the driver (it hashes the manifest's files) until a Ray actor opens it;
    return that actor's PID and the write end kept open, so the actor blocks mid-pack."""
    while time.monotonic() < deadline:
        try:
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # succeeds once someone reads
        except OSError:
            time.sleep(0.02)
            continue
        pid = None
        while pid is None and time.monotonic() < deadline:
            pid = _holder(fifo, [driver, *cluster])
            time.sleep(0.02)
        if pid is not None and pid not in {driver, *psutil.Process(driver).children(True)}:
            return pid, writer
        os.set_blocking(writer, True)
        os.write(writer, real)
        os.close(writer)
    raise AssertionError("no Ray actor ever read the swapped image")


def _pack_actors(cluster: list[int]) -> list[str]:
    titles = []
    for root in cluster:
        for proc in psutil.Process(root).children(recursive=True):
            try:
                title = " ".join(proc.cmdline())
            except psutil.Error:
                continue
            if "_PackActor" in title:
                titles.append(f"{proc.pid} {title}")
    return titles


def test_ctrl_c_stops_the_workers_and_leaves_the_store_consistent(tmp_path, ray_cluster,
                                                                   shapes_data, small_packs):
    data = tmp_path / "data"
    shutil.copytree(shapes_data, data)
    store_dir = tmp_path / "ray"
    with Store(tmp_path / "local") as here:
        local = get_features("test_vit", str(data), store=here, split="train", weights="random",
                             batch_size=small_packs, progress=False)
        manifest = load_manifest(here, str(data), split="train")
        target = str(manifest.image_path(len(manifest.doc["samples"]) - 3))  # in the last pack
    real = Path(target).read_bytes()
    os.replace(target, target + ".real")
    os.mkfifo(target)
    cluster = [p.pid for p in ray_cluster["processes"]]
    args = [sys.executable, "-c", LAUNCH, "--store", str(store_dir), "get", "features", "-b",
            "test_vit", "--weights", "random", "-d", str(data), "--split", "train",
            "--batch-size", str(small_packs), "--executor", "ray", "--ray-address",
            ray_cluster["address"]]
    log = tmp_path / "driver.err"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writer = None
    try:
        with open(log, "w") as err:
            driver = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True,
                                      cwd=ROOT, env=env)
        deadline = time.monotonic() + 180
        actor, writer = _block_an_actor(target, real, driver.pid, cluster, deadline)
        while not PROGRESS.search(log.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)  # the other actor's packs come in meanwhile
        lines = PROGRESS.findall(log.read_text())
        assert lines, log.read_text()[-3000:]  # the driver's progress, over both workers
        assert int(lines[-1]) < 40
        driver.send_signal(signal.SIGINT)  # Ctrl-C, mid-extraction
        try:  # a bound on a hang, not a speed check: on a loaded machine (load 10) 60 s was short
            driver.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            driver.kill()
            driver.communicate()
            pytest.fail("the driver outlived Ctrl-C by 3 min:\n" + log.read_text()[-3000:])
        assert driver.returncode == 130, log.read_text()[-3000:]
        assert "interrupted" in log.read_text()
        gone = time.monotonic() + 60  # Ray ends the job's workers once its driver is gone
        while (psutil.pid_exists(actor) or _pack_actors(cluster)) and time.monotonic() < gone:
            time.sleep(0.2)
        assert not psutil.pid_exists(actor), "the blocked actor outlived its driver"
        assert not _pack_actors(cluster), "a pack actor outlived its driver"
    finally:
        if writer is not None:
            os.close(writer)
        os.replace(target + ".real", target)
    before = sorted(p.name for p in (store_dir / "objects").rglob("*") if p.is_file())
    time.sleep(2)
    assert sorted(p.name for p in (store_dir / "objects").rglob("*") if p.is_file()) == before
    with Store(store_dir) as there:
        report = fsck(there)
        assert report.clean, report.as_dict()
    with Store(store_dir) as there:  # run again (here, on the same cluster): only the rest
        again = get_features("test_vit", str(data), store=there, split="train", weights="random",
                             batch_size=small_packs, progress=False,
                             executor=RayExecutor(address=ray_cluster["address"]))
    assert again.id == local.id
    assert 0 < again.stats["reused"] < 40  # the packs adopted before Ctrl-C were kept
    assert again.stats["extracted"] == 40 - again.stats["reused"]
