"""Every trained probe learns on generated scenes when the features hold the signal.

With the seeded random ``test_vit``/``test_cnn`` several probes cannot beat a constant, so these
runs use ``test_pixels`` (fixed filters: pixels, gradients, context, position; nothing learned)
through the real engine (``vbstore.get_result``: scenes, manifests, packs, a stored head) and
put each headline beside the task's own trivial predictor scored on the same val split.

Schedule: probe3d's default (10 epochs at lr 5e-4) is 40 steps on 32 train images, too few for
the head to leave its random init (the L1 maps, the normals) or its focal prior (the box head
detects nothing), so every probe here runs 50 epochs at lr 5e-3 (200 steps). At the default
schedule on 256 train images (320 steps) detection, edges, occlusion edges and keypoints beat
their trivial predictors too (docs/tasks.md): the step count, not the scene size, is what
they need.
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

# task -> the least margin over the trivial predictor, in the headline's units: about half of
# what was measured (50 epochs, lr 5e-3; benchmarks/signal_bench.py), so that only a probe that
# learned nothing fails
CASES = {
    "semantic_segmentation": 0.13,  # miou 0.379 vs 0.117
    "depth": 0.2,  # d1 0.638 vs 0.194
    "surface_normal": 0.18,  # d1 0.377 vs 0.003
    "orientation": 10.0,  # orientation_error 18.3 vs 41.8 degrees
    "edge": 0.2,  # edge_correlation 0.445 vs 0
    "occlusion_edge": 0.035,  # 0.072 vs 0
    "keypoints2d": 0.03,  # 0.067 vs 0
    "corner": 0.3,  # corner_correlation 0.690 vs 0
    "detection": 0.01,  # map_50 0.040 vs 0.017
    "generic_segmentation": 0.05,  # iou 0.004 (per image; 0.006 pooled) vs 0: see below
    "instance_segmentation": 0.01,  # mask_map_50 0.025 vs 0.024: see below
}
# Two probes do not clear their margin with these features (docs/tasks.md, "Measured with
# test_pixels"): the features, not the probes, fall short. On pretrained features both learn:
# efficientnet_lite0 reaches iou 0.638 (random Lite0 0.174, trivial 0.000) and mask_map_50 0.070
# (random 0.000, trivial 0.016) on the same scenes (tests/engine/test_probe_signal_lite.py).
# Strict: the day one passes here, its mark must go.
KNOWN_SHORT = {
    "generic_segmentation": "objects differ from floor and walls in neither colour nor a linear "
                            "function of local gradients: BCE at threshold 0.5 never predicts "
                            "the minority foreground",
    "instance_segmentation": "mask AP follows the weak box AP, and the trivial whole-box mask is "
                             "already a good mask for a box or a sphere",
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
@pytest.mark.parametrize("task", [
    pytest.param(t, marks=pytest.mark.xfail(strict=True, reason=KNOWN_SHORT[t]))
    if t in KNOWN_SHORT else t for t in CASES])
def test_each_trained_dense_and_box_probe_beats_its_trivial_predictor(shared_store, task):
    metrics, trivial = _probe_and_trivial(shared_store, task)
    least = CASES[task]
    headline = get_task(task).headline
    value, base = metrics[headline], trivial[headline]
    assert _margin(task, value, base) >= least, (task, headline, value, base)


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
