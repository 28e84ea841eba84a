"""Sweeps on a real two-node Ray cluster: units as Ray tasks, two drivers, each derivation once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vbstore import Store
from vbstore.data import load_manifest
from vbstore.engine import read_backbones_file, sweep
from vbstore.store import fsck

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
COMPUTED_OPS = ("featureset", "head", "result")


def _driver(store: Path, backbones: Path, data: str, address: str, *extra: str
            ) -> subprocess.Popen:
    """``vbstore sweep --executor ray`` as its own process: a second driver of the cluster."""
    args = [sys.executable, "-m", "vbstore", "--store", str(store), "sweep", "--backbones",
            str(backbones), "--tasks", "knn,retrieval", "-d", data, "--split", "val",
            "--train-data", data, "--train-split", "train", "--executor", "ray",
            "--ray-address", address, *extra]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _finish(driver: subprocess.Popen) -> tuple[str, str]:
    out, err = driver.communicate(timeout=400)
    assert driver.returncode == 0, err[-3000:]
    return out, err


def test_two_drivers_sweep_one_grid_computing_each_derivation_once(tmp_path, ray_cluster,
                                                                    shapes_data):
    backbones = tmp_path / "backbones.txt"
    backbones.write_text("test_cnn weights=random input_size=32\n"
                         "test_vit weights=random input_size=32 seed=1\n")
    shared = tmp_path / "shared"
    Store(shared).close()  # the registry exists before either driver starts
    address = ray_cluster["address"]
    drivers = [_driver(shared, backbones, shapes_data, address, "--json", "--ray-workers", "1")
               for _ in range(2)]  # one unit at a time each: the drivers run side by side
    rows = [row for driver in drivers for row in json.loads(_finish(driver)[0])]
    assert len(rows) == 8
    assert not [row for row in rows if "error" in row]
    assert sorted(row["done"] for row in rows) == [1, 1, 2, 2, 3, 3, 4, 4]
    assert {row["total"] for row in rows} == {4}

    computed = [key for row in rows for key in row["computed"]]
    assert len(computed) == len(set(computed)), "a derivation was computed twice"
    with Store(shared) as store:
        derivations = {key for key, op in store.db.query("SELECT key, op FROM derivations")
                       if op in COMPUTED_OPS}
        assert set(computed) == derivations  # each one computed, by exactly one of the drivers
        ops = [op for _, op in store.db.query("SELECT key, op FROM derivations")]
        assert ops.count("featureset") == 4  # 2 backbones x 2 splits
        assert ops.count("result") == 4
        images = sum(len(load_manifest(store, shapes_data, split=s)) for s in ("train", "val"))
        assert sum(row["extracted"] for row in rows) == 2 * images  # each image once per backbone
        report = fsck(store)
        assert report.clean, report.as_dict()

        with Store(tmp_path / "local") as local:  # the same grid, swept here without Ray
            here = {(r["label"], r["task"]): r for r in sweep(
                read_backbones_file(backbones), ["knn", "retrieval"], shapes_data, shapes_data,
                store=local, split="val", train_split="train", progress=False)}
            for row in rows:
                other = here[(row["label"], row["task"])]
                assert row["metrics"] == other["metrics"]
                mine = store.read_json(row["id"])["inputs"]
                theirs = local.read_json(other["id"])["inputs"]
                assert {k: mine.get(k) for k in ("eval_features", "train_features")} == {
                    k: theirs.get(k) for k in ("eval_features", "train_features")}

    out, err = _finish(_driver(shared, backbones, shapes_data, address))  # all stored now
    assert "[4/4] " in out
    assert out.count("cached") == 4
    assert "sweep: 4/4 units done, 0 images extracted on the cluster" in err
