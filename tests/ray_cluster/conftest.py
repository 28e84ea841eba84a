"""A real two-node Ray cluster on loopback, for the Ray executor tests.

These tests are collected only inside a loopback-only network namespace (``VBSTORE_RAY_NETNS``),
where ``tests/engine/test_executor.py::test_ray_suite_in_loopback_namespace`` runs them: Ray
then binds nothing reachable from outside and cannot collide with another Ray on the machine.
Each ``ray start --block`` process is started here and ended by its PID, with every process it
spawned (found by parentage, never by name).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PORT = 6390
ADDRESS = f"127.0.0.1:{PORT}"
AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing-secret",
       "AWS_DEFAULT_REGION": "us-east-1"}


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    ray = Path(sys.executable).parent / "ray"
    with open(log, "ab") as out:
        return subprocess.Popen([str(ray), "start", *args], env=env, stdout=out,
                                stderr=subprocess.STDOUT)


def _wait_port(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


def _end(processes: list[subprocess.Popen]) -> None:
    """Terminate each started process and every descendant, by PID."""
    import psutil

    tree: list[psutil.Process] = []
    for proc in processes:
        try:
            parent = psutil.Process(proc.pid)
            tree += [parent, *parent.children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
    for proc in tree:
        try:
            proc.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(tree, timeout=5)  # a node ignoring SIGTERM held teardown 15 s
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=5)


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory):
    """``ray start --head`` plus a second ``ray start --address`` node, one CPU each."""
    import ray

    temp = tempfile.mkdtemp(prefix="vbr", dir="/tmp")  # short: Ray's socket paths have a limit
    log = tmp_path_factory.mktemp("ray") / "ray.log"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
           "PYTHONPATH": str(ROOT), **AWS}
    common = ["--num-cpus", "1", "--num-gpus", "0", "--object-store-memory", str(100 << 20),
              "--node-ip-address", "127.0.0.1", "--disable-usage-stats", "--block"]
    started = [_start(["--head", "--port", str(PORT), "--include-dashboard", "false",
                       "--temp-dir", temp, *common], env, log)]
    try:
        _wait_port(PORT, time.monotonic() + 90)
        started.append(_start(["--address", ADDRESS, "--resources", json.dumps({"second": 1}),
                               *common], env, log))
        os.environ.update({"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"})
        ray.init(address=ADDRESS, log_to_driver=False)
        deadline = time.monotonic() + 90
        while sum(1 for n in ray.nodes() if n["Alive"]) < 2:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        yield {"address": ADDRESS, "processes": started, "log": log}
    finally:
        ray.shutdown()
        _end(started)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture
def small_packs(monkeypatch):
    """Packs of 8 rows (batches of 4), so a few dozen images make several packs."""
    from vbstore.features import _packs

    monkeypatch.setattr(_packs, "PACK_ROWS", 8)
    return 4


@pytest.fixture(scope="session")
def shapes_data(shapes_folder):
    """Generated shapes: 5 classes x 8 images per split, 32 px (tests copy it before a change)."""
    return shapes_folder(8, 5)


@pytest.fixture(scope="session")
def moto_endpoint():
    """A moto S3 server on 127.0.0.1 (inside the namespace, where the workers reach it)."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()
