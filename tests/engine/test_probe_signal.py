"""Every trained probe learns on generated scenes when the features hold the signal.

With the seeded random ``test_vit``/``test_cnn`` several probes cannot beat a constant, so these
runs use ``test_pixels`` (fixed filters: pixels, gradients, context, position; nothing learned)
through the real engine (``vbstore.get_result``: scenes, manifests, packs, a stored head) and
put each headline beside the task's own trivial predictor scored on the same val split.

Schedules: probe3d's default (10 epochs at lr 5e-4) is 40 steps on 32 train images; that is
enough where the target is dense (segmentation, depth, normals, orientation) but not for the L1
maps or the box head, so those run 50 epochs at lr 5e-3 (200 steps). At the default schedule
on 256 train images (320 steps) detection, edges, occlusion edges and keypoints beat their
trivial predictors too (docs/tasks.md): the step count, not the scene size, is what they need.
"""

from __future__ import annotations

import pytest
import torch

import vbstore
from vbstore.data import load_manifest
from vbstore.engine import baseline_metrics, open_dense_result, scenes_setup
from vbstore.tasks import get_task
from vbstore.tasks.relative_pose import trivial_metrics

BACKBONE = "test_pixels"
PER_SPLIT, SIZE = 32, 64
LONGER = {"epochs": 50, "lr": 5e-3}  # 200 steps on 32 images (see the module docstring)

# task -> (extra params, the least margin over the trivial predictor, in the headline's units;
# about half of what was measured, so that only a probe that learned nothing fails)
CASES = {
    "semantic_segmentation": ({}, 0.03),  # miou 0.164 vs 0.117
    "generic_segmentation": ({}, 0.05),  # iou 0.089 vs 0
    "depth": ({}, 0.1),  # d1 0.374 vs 0.194
    "surface_normal": ({}, 0.04),  # d1 0.089 vs 0.003
    "orientation": ({}, 3.0),  # orientation_error 35.1 vs 41.8 degrees
    "edge": (LONGER, 0.2),  # edge_correlation 0.435 vs 0
    "occlusion_edge": (LONGER, 0.04),  # 0.086 vs 0
    "keypoints2d": (LONGER, 0.03),  # 0.064 vs 0
    "corner": (LONGER, 0.3),  # 0.682 vs 0
    "detection": (LONGER, 0.01),  # map_50 0.037 vs 0.017
    "instance_segmentation": (LONGER, 0.01),  # mask_map_50 0.000 vs 0.000
}


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


def _margin(task: str, value: float, base: float) -> float:
    spec = get_task(task)
    direction = next(m.direction for m in spec.metrics if m.name == spec.headline)
    return value - base if direction == "higher" else base - value


@pytest.mark.slow
@pytest.mark.parametrize("task", list(CASES))
def test_each_trained_dense_and_box_probe_beats_its_trivial_predictor(shared_store, task):
    extra, least = CASES[task]
    data, options, params = _scenes(task, PER_SPLIT)
    result = vbstore.get_result(BACKBONE, task, data, data, store=shared_store, split="val",
                                train_split="train", weights="default", params={**params, **extra},
                                data_options=options, progress=False)
    assert result.record.weights_kind == "pretrained"  # test_pixels' own fixed filters
    trivial = baseline_metrics(open_dense_result(shared_store, result.id, data, split="val",
                                                 data_options=options))
    headline = get_task(task).headline
    value, base = result.metrics[headline], trivial[headline]
    assert _margin(task, value, base) >= least, (task, headline, value, base)


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
    # measured: rotation_error 12.4 vs 14.1 degrees, translation_error 59.3 vs 67.4
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
    xy = context[0, -2:]  # the cell's position, x then y, in [-1, 1]
    assert xy[0, 0].tolist() == pytest.approx([-1, -1 / 3, 1 / 3, 1])
    assert xy[1, :, 0].tolist() == pytest.approx([-1, -1 / 3, 1 / 3, 1])
    random = build_backbone(BACKBONE, weights="random")
    assert random.weights_record()["origin"] == "random"
    assert random.weights_record()["tensor_hash"] != backbone.weights_record()["tensor_hash"]
