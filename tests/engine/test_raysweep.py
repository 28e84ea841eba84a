"""Sweeps on Ray without a cluster: what a unit does on a worker, what the driver prints,
and that stored units never touch Ray (the cluster tests are in tests/ray_cluster)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from vbstore import Store
from vbstore.cli import cli
from vbstore.cli._executoropts import progress_line
from vbstore.cli.results_cmds import sweep_progress_line
from vbstore.engine import get_features, plan, result_request
from vbstore.engine._raysweep import machine, run_unit
from vbstore.features import ExtractProgress
from vbstore.store import derivation_key

ROOT = Path(__file__).resolve().parents[2]
TINY = {"weights": "random", "input_size": 32}


def _request(shapes, task="knn"):
    return result_request("test_vit", task, shapes, shapes, split="val", train_split="train",
                          **TINY)


def test_a_unit_only_tries_a_result_another_process_computes(tmp_path, shapes, forwards):
    """wait=False: busy at once while the lease is held (nothing computed); wait=True computes,
    and the unit names every derivation it computed."""
    request = _request(shapes)
    with Store(tmp_path / "s") as store:
        key = derivation_key(plan(request, store).derivation)
        forwards.clear()  # the backbone's first build probes it once
        with store.lease(key):  # another process computing this very result
            assert run_unit(str(store.root), request, False) == {"busy": True}
        assert forwards == []
        out = run_unit(str(store.root), request, True)
        assert not out["from_cache"]
        assert out["computed"][-1] == key
        ops = dict(store.db.query("SELECT key, op FROM derivations"))
        assert sorted(ops[k] for k in out["computed"]) == ["featureset", "featureset", "head",
                                                           "result"]
        assert out["extracted"] == 60  # 30 train + 30 val images, each through one forward
        assert forwards[-2:] == [30, 30]
        again = run_unit(str(store.root), request, False)
        assert again["from_cache"]
        assert again["computed"] == []
        assert again["id"] == out["id"]


def test_a_worker_off_the_stores_machine_or_path_says_so(tmp_path, shapes):
    with Store(tmp_path / "s") as store:
        out = run_unit(str(store.root), _request(shapes), True, "other-host/boot")
        assert "is not on the store's machine (other-host)" in out["error"]
        assert store.ls("result") == []
    out = run_unit(str(tmp_path / "elsewhere"), _request(shapes), True, machine())
    assert "cannot see the store" in out["error"]
    assert not (tmp_path / "elsewhere").exists()  # no empty store made on the worker


def test_progress_is_reported_through_a_callback(tmp_path, shapes):
    seen: list[ExtractProgress] = []
    with Store(tmp_path / "s") as store:
        get_features("test_vit", shapes, store=store, split="val", batch_size=8,
                     progress=seen.append, **{"weights": "random"})
    assert [p.done for p in seen] == [8, 16, 24, 30]
    assert {p.total for p in seen} == {30}
    assert all(p.workers == 1 and p.images_per_s > 0 for p in seen)


def test_progress_lines_name_images_rates_and_units():
    assert progress_line(ExtractProgress(16, 40, 2.0, 2)) == (
        "extracting: 16/40 images, 8.0 images/s over 2 workers")
    assert progress_line(ExtractProgress(3, 9, 0.0)) == "extracting: 3/9 images, 0.0 images/s"
    assert sweep_progress_line(3, 8, 120, 10.0) == (
        "sweep: 3/8 units done, 120 images extracted on the cluster, 12.0 images/s")


def test_a_stored_sweep_never_imports_ray_even_with_the_executor(tmp_path, shapes):
    """Without --executor Ray is never imported; with it, units already stored are answered by
    the driver itself (here the address is unreachable, so touching Ray would fail)."""
    backbones = tmp_path / "backbones.txt"
    backbones.write_text("test_vit weights=random input_size=32\n")
    code = ("import sys, vbstore.cli\n"
            "try:\n    vbstore.cli.cli(sys.argv[1:], standalone_mode=False)\n"
            "finally:\n    print('RAY', 'ray' in sys.modules)")
    args = ["--store", str(tmp_path / "s"), "sweep", "--backbones", str(backbones), "--tasks",
            "knn", "-d", shapes, "--split", "val", "--train-data", shapes, "--train-split",
            "train", "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for extra in ([], ["--executor", "ray", "--ray-address", "127.0.0.1:9"]):
        run = subprocess.run([sys.executable, "-c", code, *args, *extra], capture_output=True,
                             text=True, env=env)
        assert run.returncode == 0, run.stderr[-2000:]
        assert "RAY False" in run.stdout, run.stdout
        rows = json.loads(run.stdout.rsplit("RAY", 1)[0])
        assert [(r["done"], r["total"], r["from_cache"]) for r in rows] == [(1, 1, bool(extra))]


def test_a_sweep_on_ray_refuses_a_sink(tmp_path, shapes):
    backbones = tmp_path / "backbones.txt"
    backbones.write_text("test_vit weights=random\n")
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "s"), "sweep", "--backbones",
                                      str(backbones), "--tasks", "knn", "-d", shapes, "--split",
                                      "val", "--train-data", shapes, "--train-split", "train",
                                      "--executor", "ray", "--ray-sink", "team-s3"])
    assert result.exit_code == 2
    assert "drop --ray-sink" in result.output
