"""Probes learn on generated scenes from ``test_pixels`` (fixed filters: pixels, gradients,
context, position; nothing learned), through the real engine (``vbstore.get_result``: scenes,
manifests, packs, a stored head), each headline beside the task's own trivial predictor scored
on the same val split: what these features teach that no other test covers.

Every trained dense and box probe beating its trivial predictor on these scenes (the same 32 +
32 rooms of 64 px, the same 200 head steps) is asserted once, on efficientnet_lite0's ImageNet
features and against random weights too, by tests/engine/test_probe_signal_lite.py; the
figures with ``test_pixels`` are in docs/tasks.md ("Measured with test_pixels",
``benchmarks/signal_bench.py``).
"""

from __future__ import annotations

import pytest
import torch

import vbstore
from vbstore.data import load_manifest
from vbstore.engine import baseline_metrics, open_dense_result, scenes_setup
from vbstore.tasks.relative_pose import trivial_metrics

BACKBONE = "test_pixels"
PER_SPLIT, SIZE = 32, 64
# 200 steps on 32 images: probe3d's default 40 leave the heads near their init (docs/tasks.md)
LONGER = {"epochs": 50, "lr": 5e-3}


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory):
    """One store for every case: scenes are written once and the images' features extracted
    once (every dense task reads the same images)."""
    with vbstore.Store(tmp_path_factory.mktemp("signal") / "store") as store:
        yield store


def _scenes(task: str, per_split: int) -> tuple[str, dict, dict]:
    if task in ("detection", "instance_segmentation"):
        return f"scenes:per_split={per_split},size={SIZE},seed=0", {"target": "boxes"}, {}
    return scenes_setup(task, per_split, SIZE, 0)


def _probe_and_trivial(store, task: str) -> tuple[dict, dict]:
    data, options, params = _scenes(task, PER_SPLIT)
    result = vbstore.get_result(BACKBONE, task, data, data, store=store, split="val",
                                train_split="train", weights="default", params={**params, **LONGER},
                                data_options=options, progress=False)
    assert result.record.weights_kind == "fixed"  # test_pixels' own filters, nothing learned
    trivial = baseline_metrics(open_dense_result(store, result.id, data, split="val",
                                                 data_options=options))
    return result.metrics, trivial


@pytest.mark.slow
def test_instance_segmentation_learns_its_boxes(shared_store):
    """What instance segmentation does learn with these features: where the objects are."""
    metrics, trivial = _probe_and_trivial(shared_store, "instance_segmentation")
    assert metrics["map_50"] >= trivial["map_50"] + 0.01, (metrics, trivial)
    assert metrics["mask_map_50"] >= trivial["mask_map_50"], (metrics, trivial)


@pytest.mark.slow
def test_relative_pose_beats_the_mean_pose(shared_store):
    data = f"scenes:per_split=128,size={SIZE},seed=0"
    result = vbstore.get_result(BACKBONE, "relative_pose", data, data, store=shared_store,
                                split="val", train_split="train", weights="default",
                                progress=False)

    def pairs(split: str) -> torch.Tensor:
        view = load_manifest(shared_store, data, split=split, layout="pairs")
        return torch.tensor(view.doc["pairs"], dtype=torch.float64)

    trivial = trivial_metrics(pairs("train"), pairs("val"))
    # measured: rotation_error 10.8 vs 14.1 degrees, translation_error 58.6 vs 67.4
    assert result.metrics["rotation_error"] < trivial["rotation_error"] - 1.0
    assert result.metrics["translation_error"] < trivial["translation_error"] - 4.0


def test_test_pixels_features_are_its_named_filters():
    """Block 0 holds each cell's pixels: a flat image gives its colour and zero gradients."""
    from vbstore.backbones import build_backbone

    backbone = build_backbone(BACKBONE, weights="default", input_size=16)
    image = torch.full((1, 3, 16, 16), 0.25)
    image[:, :, :, 8:] = -0.5  # a vertical step: Sobel x fires at the boundary, Sobel y never
    dense = backbone.extract(image, layers=[0, 1])["layers"]
    local = torch.nn.functional.pixel_shuffle(dense[0]["dense"], 4)  # back to (1, 10, 16, 16)
    assert torch.allclose(local[0, :3, :, :7], torch.tensor(0.25))
    assert torch.allclose(local[0, :3, :, 9:], torch.tensor(-0.5))
    assert torch.all(local[0, 3, :, 7:9] < 0)  # brightness falls to the right
    assert torch.allclose(local[0, 4], torch.tensor(0.0))  # nothing changes down the rows
    context = dense[1]["dense"]
    assert context.shape == (1, 202, 4, 4)
    xy = context[0, 40:42]  # after 4 x 10 means: the cell's position, x then y, in [-1, 1]
    assert xy[0, 0].tolist() == pytest.approx([-1, -1 / 3, 1 / 3, 1])
    assert xy[1, :, 0].tolist() == pytest.approx([-1, -1 / 3, 1 / 3, 1])
    random = build_backbone(BACKBONE, weights="random")
    assert random.weights_record()["origin"] == "random"
    assert random.weights_record()["tensor_hash"] != backbone.weights_record()["tensor_hash"]
