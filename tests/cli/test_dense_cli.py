"""Dense probes from the command line: the demo beside its trivial baseline, and the picture."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from vbstore import Store
from vbstore.cli import cli

SCENES = "scenes:per_split=4,size=32,seed=0"
# test_pixels at the scenes size: no crop, so the trivial predictor reads every target pixel (the
# default efficientnet_lite0 is run by tests/cli/test_engine_cli.py's slow demo test)
DEMO = ("demo", "--task", "depth", "--per-split", "4", "--size", "32", "--backbone", "test_pixels",
        "--input-size", "32")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """One depth demo in a store of its own: (store root, the demo's JSON summary)."""
    root = tmp_path_factory.mktemp("dense_cli") / "s"
    out = CliRunner().invoke(cli, ["--store", str(root), *DEMO, "--json"])
    assert out.exit_code == 0, out.output
    return root, json.loads(out.stdout)


def _run(root, *args):
    return CliRunner().invoke(cli, ["--store", str(root), *args])


def _val_depth(root) -> np.ndarray:
    """The val depth PNGs of the demo's scenes, in metres (an independent reading)."""
    with Store(root) as store:
        folder = store.root / "datasets"
    (scenes,) = folder.glob("scenes-*per_split4-seed0-size32")
    files = sorted((scenes / "val" / "depth").glob("*.png"))
    return np.stack([np.asarray(Image.open(f), dtype=np.float64) / 1000 for f in files])


def test_dense_demo_runs_offline_and_reads_against_its_trivial_baseline(demo):
    root, summary = demo
    assert (summary["task"], summary["metric"]) == ("depth", "d1")
    assert (summary["backbone"], summary["weights"], summary["note"]) == (
        "test_pixels", "fixed", None)  # its own filters: not random, not pretrained
    assert summary["cached"]
    assert summary["random_result"] != summary["result"]
    assert (summary["trivial"], summary["direction"]) == ("the mean depth", "higher")
    # the trivial predictor by hand: the split's mean valid depth, scored with delta < 1.25
    gt = _val_depth(root)
    valid = gt > 0
    mean = gt[valid].mean()
    ratio = np.maximum(mean / gt[valid], gt[valid] / mean)
    assert summary["trivial_value"] == pytest.approx((ratio < 1.25).mean())
    assert summary["over_trivial"] == pytest.approx(summary["value"] - summary["trivial_value"])
    assert summary["over_random"] == pytest.approx(summary["value"] - summary["random_value"])
    text = _run(root, *DEMO).output
    assert "trivial: the mean depth" in text
    assert "test_pixels (fixed weights)" in text
    assert "test_pixels (random weights, seed 0)" in text
    assert "vbstore draw" in text


def test_demo_refuses_a_task_it_cannot_run(demo):
    root, _ = demo
    out = _run(root, "demo", "--task", "zeroshot_classification")
    assert out.exit_code == 2
    assert "choose one of: retrieval, classification, knn, corner, depth" in out.output
    assert len(out.output.strip().splitlines()) <= 2


def test_draw_writes_a_grid_from_the_stored_head(demo, tmp_path):
    root, summary = demo
    path = tmp_path / "grid.png"
    out = _run(root, "draw", summary["result"][:12], "-d", SCENES, "--split", "val", "--target",
               "depth", "-n", "3", "-o", str(path), "--json")
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["samples"] == ["images/0000.png", "images/0001.png", "images/0002.png"]
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert image.height > image.width  # three rows of three panels
    wrong = _run(root, "draw", summary["result"], "-d", SCENES, "--split", "train", "--target",
                 "depth", "-o", str(tmp_path / "x.png"))
    assert wrong.exit_code == 2
    assert "was scored on" in wrong.output
    assert not (tmp_path / "x.png").exists()


def test_draw_samples_are_the_predictions_the_result_scored(demo):
    """Every val sample through the stored head, scored by hand: the record's numbers."""
    from vbstore.engine import dense_samples, open_dense_result

    root, summary = demo
    with Store(root) as store:
        view = open_dense_result(store, summary["result"], SCENES, split="val",
                                 data_options={"target": "depth"})
        samples = dense_samples(view, 10)
    assert len(samples) == 4
    gt = np.stack([s.target for s in samples]).astype(np.float64)
    pred = np.stack([s.prediction for s in samples]).astype(np.float64)
    np.testing.assert_allclose(gt, _val_depth(root), atol=1e-6)
    valid = gt > 0
    ratio = np.maximum(pred[valid] / gt[valid], gt[valid] / pred[valid])
    assert summary["metrics"]["d1"] == pytest.approx((ratio < 1.25).mean(), abs=1e-6)
    # rmse per image, then averaged over images (depth op_version 2, VisBench's reduction)
    per_image = [np.sqrt(((p[v] - g[v]) ** 2).mean()) for p, g, v in zip(pred, gt, valid,
                                                                         strict=True)]
    assert summary["metrics"]["rmse"] == pytest.approx(np.mean(per_image), rel=1e-5)
    assert samples[0].image.shape == (32, 32, 3)


def test_draw_without_matplotlib_names_the_extra(demo, tmp_path, monkeypatch):
    import sys

    root, summary = demo
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = _run(root, "draw", summary["result"], "-d", SCENES, "--split", "val", "--target",
               "depth", "-o", str(tmp_path / "g.png"))
    assert out.exit_code == 2
    assert "vbstore[plot]" in out.output
