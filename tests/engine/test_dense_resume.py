"""Killing a dense training half-way loses nothing: the re-run completes, gives the numbers an
uninterrupted run gives, and leaves the store clean."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from vbstore.cli._root import cli

ROOT = Path(__file__).resolve().parents[2]
SCENES = "scenes:per_split=8,size=32"
ARGS = ["run", "depth", "-b", "test_vit", "--weights", "random", "-d", SCENES, "--split", "val",
        "--train-data", SCENES, "--train-split", "train", "--target", "depth",
        "--target-scale", "1000", "--epochs", "400", "--json"]


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "VBSTORE_HOME": str(home), "PYTHONPATH": str(ROOT)}


def _vbstore(home: Path, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "vbstore", *args], env=_env(home),
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _in_process(home: Path, *args: str) -> dict:
    """The same command line in this process (its store ``home``), on one thread as a
    subprocess here runs (OMP_NUM_THREADS=1, tests/conftest.py)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = CliRunner().invoke(cli, ["--store", str(home), *args], catch_exceptions=False)
    finally:
        torch.set_num_threads(threads)
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def _training(home: Path) -> bool:
    """Both featuresets are stored and a lease is held: the head is being trained."""
    db = home / "registry.db"
    if not db.exists():
        return False
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            features = conn.execute(
                "SELECT count(*) FROM derivations WHERE op = 'featureset'").fetchone()[0]
            heads = conn.execute("SELECT count(*) FROM derivations WHERE op = 'head'").fetchone()[0]
            leases = conn.execute("SELECT count(*) FROM leases").fetchone()[0]
    except sqlite3.OperationalError:  # the schema is still being created
        return False
    return features == 2 and heads == 0 and leases > 0


@pytest.mark.slow
def test_killed_dense_training_resumes_to_the_uninterrupted_result(tmp_path):
    killed_home, clean_home = tmp_path / "killed", tmp_path / "clean"
    process = subprocess.Popen([sys.executable, "-m", "vbstore", *ARGS], env=_env(killed_home),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not _training(killed_home):
        assert process.poll() is None, "the run ended before training could be interrupted"
        assert time.monotonic() < deadline, "training never started"
        time.sleep(0.05)
    time.sleep(0.3)
    assert process.poll() is None, "training ended before it was killed; raise --epochs"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()

    resumed = _vbstore(killed_home, *ARGS)
    assert resumed["run"]["features_from_cache"] is True  # the packs survived the kill
    uninterrupted = _in_process(clean_home, *ARGS)
    assert resumed["record"]["metrics"] == uninterrupted["record"]["metrics"]
    assert resumed["record"]["train_metrics"] == uninterrupted["record"]["train_metrics"]
    assert resumed["record"]["inputs"]["head"] == uninterrupted["record"]["inputs"]["head"]
    assert _vbstore(killed_home, *ARGS)["from_cache"]
    report = _vbstore(killed_home, "fsck", "--json")
    assert report["clean"], report
    assert (report["corrupt"], report["missing"], report["dangling_edges"]) == ([], [], [])
