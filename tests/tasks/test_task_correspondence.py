"""correspondence: exact warps give exact matches, the grid's ceiling, and the metric arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vbstore.data import apply_homography, random_homography, warp_image
from vbstore.tasks import TensorSplit, WarpPairs, get_task
from vbstore.tasks._matching import recall_auc

SIZE, PATCH = 32, 8  # a 4 x 4 grid over a 32 px image that the backbone sees whole


def identity_geometry(width, height):
    return (width, height), None


def translation(dx, dy):
    return np.array([[1.0, 0, dx], [0, 1.0, dy], [0, 0, 1.0]])


def pairs_of(a, b, homography, n=1):
    return WarpPairs(TensorSplit([a], torch.zeros(n, 3, SIZE, SIZE), target_kind="image"),
                     TensorSplit([b], torch.zeros(n, 3, SIZE, SIZE), target_kind="image"),
                     np.stack([homography] * n), np.array([[SIZE, SIZE]] * n),
                     identity_geometry, SIZE)


def shifted(a, cells):
    """B's cell (r, c) shows A's cell (r, c - cells); the cells shifted in are new noise."""
    b = torch.randn(a.shape, generator=torch.Generator().manual_seed(99))
    b[..., cells:] = a[..., :-cells]
    return b


def test_an_exact_translation_by_whole_patches_is_matched_exactly():
    a = torch.randn(2, 16, 4, 4, generator=torch.Generator().manual_seed(0))
    metrics = get_task("correspondence").evaluate_views(
        pairs_of(a, shifted(a, 1), translation(PATCH, 0), n=2))
    for t in (1, 2, 5, 10):
        assert metrics[f"recall@{t}px"] == 1.0
        assert metrics[f"ceiling_recall@{t}px"] == 1.0
    assert metrics["auc@10px"] == 1.0
    assert metrics["num_matches"] == 24.0  # 3 of 4 columns of A are in view in B, two pairs


def test_a_half_patch_offset_is_the_grid_s_ceiling():
    """A shift of 1.5 patches puts every true correspondence 4 px from the nearest B centre."""
    a = torch.randn(1, 16, 4, 4, generator=torch.Generator().manual_seed(1))
    metrics = get_task("correspondence").evaluate_views(
        pairs_of(a, shifted(a, 1), translation(1.5 * PATCH, 0)))
    assert metrics["num_matches"] > 0
    for prefix in ("", "ceiling_"):
        assert metrics[f"{prefix}recall@1px"] == 0.0
        assert metrics[f"{prefix}recall@2px"] == 0.0
        assert metrics[f"{prefix}recall@5px"] == 1.0
        assert metrics[f"{prefix}auc@10px"] == pytest.approx(0.6)  # 1 - 4 / 10


def test_random_features_rarely_match_and_ceiling_bounds_recall():
    g = torch.Generator().manual_seed(2)
    homography = random_homography("ab" * 32, (SIZE, SIZE), 0, 0.2)
    a, b = torch.randn(8, 16, 4, 4, generator=g), torch.randn(8, 16, 4, 4, generator=g)
    metrics = get_task("correspondence").evaluate_views(pairs_of(a, b, homography, n=8),
                                                         {"ratio": 1.0})
    assert metrics["recall@1px"] < 0.2
    for t in (1, 2, 5, 10):
        assert metrics[f"recall@{t}px"] <= metrics[f"ceiling_recall@{t}px"]


def test_ratio_test_and_match_cap():
    a = torch.randn(1, 16, 4, 4, generator=torch.Generator().manual_seed(3))
    task = get_task("correspondence")
    capped = task.evaluate_views(pairs_of(a, shifted(a, 1), translation(PATCH, 0)),
                                 {"max_matches": 5})
    assert capped["num_matches"] == 5.0
    noise = torch.randn(1, 16, 4, 4, generator=torch.Generator().manual_seed(4))
    none = task.evaluate_views(pairs_of(a, noise, translation(PATCH, 0)), {"ratio": 1e-3})
    assert none["num_matches"] == 0.0
    assert none["recall@10px"] == 0.0
    twice = a[..., [0, 0, 1, 1]]  # every feature of B twice: d1 = d2, and a tie fails the test
    assert task.evaluate_views(pairs_of(a, twice, translation(PATCH, 0)))["num_matches"] == 0.0


def test_recall_and_auc_against_a_hand_computation_and_numeric_integration():
    errors = np.array([0.5, 1.0, 1.5, 3.0, 7.0, 12.0, np.nan])
    out = recall_auc(errors)
    assert out["recall@1px"] == pytest.approx(2 / 7)
    assert out["recall@2px"] == pytest.approx(3 / 7)
    assert out["recall@5px"] == pytest.approx(4 / 7)
    assert out["recall@10px"] == pytest.approx(5 / 7)
    grid = np.linspace(0, 10, 100001)
    curve = [(np.nan_to_num(errors, nan=np.inf) <= t).mean() for t in grid]
    assert out["auc@10px"] == pytest.approx(np.trapezoid(curve, grid) / 10, abs=1e-4)


def test_warp_image_of_a_whole_pixel_translation_is_a_shift():
    image = np.random.default_rng(0).integers(0, 256, (12, 10, 3), dtype=np.uint8)
    out = warp_image(image, translation(3, 2))
    np.testing.assert_array_equal(out[2:, 3:], image[:-2, :-3])
    assert not out[:2].any()
    assert not out[:, :3].any()


def test_random_homographies_move_corners_within_max_warp_and_repeat():
    h1 = random_homography("cd" * 32, (40, 20), 7, 0.2)
    np.testing.assert_array_equal(h1, random_homography("cd" * 32, (40, 20), 7, 0.2))
    assert not np.allclose(h1, random_homography("cd" * 32, (40, 20), 8, 0.2))
    corners = np.array([[0.0, 0], [40, 0], [40, 20], [0, 20]])
    moved = apply_homography(h1, corners) - corners
    assert np.all(np.abs(moved[:, 0]) <= 0.2 * 40 + 1e-9)
    assert np.all(np.abs(moved[:, 1]) <= 0.2 * 20 + 1e-9)


def test_matches_of_every_pair_are_pooled():
    """probe3d's convention: one pair with three matches weighs three times one with one."""
    from vbstore.tasks._matching import summarise

    out = summarise([np.array([0.5]), np.array([5.0, 5.0, 5.0]), np.zeros(0)],
                    [np.array([0.5]), np.array([0.5, 5.0, 5.0]), np.zeros(0)])
    assert out["recall@1px"] == 0.25
    assert out["ceiling_recall@1px"] == 0.5
    assert out["num_matches"] == 4.0
    assert summarise([np.zeros(0)], [np.zeros(0)])["recall@10px"] == 0.0


def test_keypoint_pck_against_a_hand_computation():
    """Two pairs on a 4 x 4 grid of 8 px patches; the target's features are the source's
    shifted right by one patch, so each keypoint lands one patch (8 px) right of its cell."""
    from vbstore.tasks import KeypointPairs

    a = torch.randn(1, 16, 4, 4, generator=torch.Generator().manual_seed(5))
    feats = torch.cat([a, shifted(a, 1)])
    split = TensorSplit([feats], torch.zeros(2, 3, SIZE, SIZE), target_kind="image")
    src = [[5.0, 5.0], [13.0, 20.0], [40.0, 5.0]]  # the last is outside the image: not scored
    trg = [[12.0, 4.0], [25.0, 20.0], [0.0, 0.0]]  # predictions: (12, 4) and (20, 20)
    pairs = [[0, 1, src, trg, [0.0, 0.0, 32.0, 20.0]],  # alpha * 32: 3.2 px, 1.6 px at 0.05
             [0, 1, src[:1], [[12.0, 4.0]], [0.0, 0.0, 10.0, 10.0]]]
    metrics = get_task("keypoint_correspondence").evaluate_views(
        KeypointPairs(split, pairs, np.array([[SIZE, SIZE]] * 2), identity_geometry, SIZE))
    # errors: 0 (box 32), 5 (box 32), 0 (box 10) -> within 3.2 px: 2 of 3; within 1.6 px: 2 of 3
    # (a box must lie inside its 32 px image: one past it is refused where PCK is scored)
    assert metrics["num_keypoints"] == 3.0
    assert metrics["pck@0.1"] == pytest.approx(2 / 3)
    assert metrics["pck@0.05"] == pytest.approx(2 / 3)
