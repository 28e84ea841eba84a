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
        assert metrics[f"auc@{t}px"] == 1.0
    assert metrics["num_matches"] == 24.0  # 3 of 4 columns of A are in view in B, two pairs


def test_a_half_patch_offset_is_the_grid_s_ceiling():
    """A shift of 1.5 patches puts every true correspondence 4 px from the nearest B centre."""
    a = torch.randn(1, 16, 4, 4, generator=torch.Generator().manual_seed(1))
    metrics = get_task("correspondence").evaluate_views(
        pairs_of(a, shifted(a, 1), translation(1.5 * PATCH, 0)))
    n = metrics["num_matches"]
    assert n > 0
    for prefix in ("", "ceiling_"):
        assert metrics[f"{prefix}recall@1px"] == 0.0
        assert metrics[f"{prefix}recall@2px"] == 0.0
        assert metrics[f"{prefix}recall@5px"] == 1.0
        # the curve: straight from (0, 0) to (4, 1 / n), up to 1 at 4, flat to 10
        assert metrics[f"{prefix}auc@10px"] == pytest.approx((4 / n / 2 + 6) / 10)
        assert metrics[f"{prefix}auc@5px"] == pytest.approx((4 / n / 2 + 1) / 5)
        assert metrics[f"{prefix}auc@2px"] == 0.0


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


def test_recall_and_auc_against_a_hand_computation():
    """``auc@T`` is VisBench's: the area under the recall curve drawn straight from (0, 0)
    through each error at the recall it reaches, flat from the last error within T to T, over
    T; at every threshold."""
    errors = np.array([0.5, 1.0, 1.5, 3.0, 7.0, 12.0, np.nan])
    out = recall_auc(errors)
    assert list(out) == ["recall@1px", "recall@2px", "recall@5px", "recall@10px",
                         "auc@1px", "auc@2px", "auc@5px", "auc@10px"]
    assert out["recall@1px"] == pytest.approx(2 / 7)
    assert out["recall@2px"] == pytest.approx(3 / 7)
    assert out["recall@5px"] == pytest.approx(4 / 7)
    assert out["recall@10px"] == pytest.approx(5 / 7)
    # trapezoids of the curve through (0, 0), (0.5, 1/7), (1, 2/7), (1.5, 3/7), (3, 4/7),
    # (7, 5/7), then flat: each width times its mean height, in sevenths
    assert out["auc@1px"] == pytest.approx((0.5 * 0.5 + 0.5 * 1.5) / 7 / 1)
    assert out["auc@2px"] == pytest.approx((0.25 + 0.75 + 0.5 * 2.5 + 0.5 * 3) / 7 / 2)
    assert out["auc@5px"] == pytest.approx((0.25 + 0.75 + 1.25 + 1.5 * 3.5 + 2 * 4) / 7 / 5)
    assert out["auc@10px"] == pytest.approx((0.25 + 0.75 + 1.25 + 5.25 + 4 * 4.5 + 3 * 5)
                                            / 7 / 10)
    # VisBench's own example: one 2 px error under a 4 px threshold is 0.75 (0.5 in steps)
    assert recall_auc(np.array([2.0]), (4.0,))["auc@4px"] == 0.75


def test_auc_against_the_trapezoid_rule_with_ties_and_an_error_on_the_threshold():
    """An independent integration: NumPy's trapezoid rule over the curve's own points."""
    rng = np.random.default_rng(7)
    errors = np.concatenate([rng.gamma(2.0, 2.0, 300).round(1), [0.0, 0.0, 5.0, 5.0, np.inf]])
    thresholds = (0.5, 1.0, 2.0, 5.0, 10.0, 100.0)
    out = recall_auc(errors, thresholds)
    ordered = np.sort(errors)
    recall = np.arange(1, len(ordered) + 1) / len(ordered)
    for t in thresholds:
        k = int(np.sum(ordered <= t))  # an error equal to T counts, as in recall@T
        xs = np.concatenate([[0.0], ordered[:k], [t]])
        ys = np.concatenate([[0.0], recall[:k], [recall[k - 1]]])
        assert out[f"auc@{t:g}px"] == pytest.approx(np.trapezoid(ys, xs) / t, abs=1e-12), t
        # above op_version 1's step curve by e / 2nT, e the largest error within T: <= 1 / 2n
        step = np.mean(np.clip(1 - ordered / t, 0, None))
        gap = ordered[k - 1] / (2 * len(errors) * t)
        assert out[f"auc@{t:g}px"] - step == pytest.approx(gap, abs=1e-12)
        assert gap <= 1 / (2 * len(errors))
    assert recall_auc(np.array([3.0, np.nan]), (1.0, 2.0)) == {
        "recall@1px": 0.0, "recall@2px": 0.0, "auc@1px": 0.0, "auc@2px": 0.0}
    assert recall_auc(np.zeros(0), (1.0,)) == {"recall@1px": 0.0, "auc@1px": 0.0}


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


# units and thresholds (VisBench's --units, --thresholds)

def test_patch_units_measure_errors_in_patch_widths():
    """The half-patch offset of the test above: every error is 4 px, half an 8 px patch."""
    a = torch.randn(1, 16, 4, 4, generator=torch.Generator().manual_seed(1))
    metrics = get_task("correspondence").evaluate_views(
        pairs_of(a, shifted(a, 1), translation(1.5 * PATCH, 0)), {"units": "patch"})
    # VisBench's names: thresholds 0.5 1 2 4 patch widths, suffix p
    assert [k for k in metrics if k.startswith("recall@")] == [
        "recall@0.5p", "recall@1p", "recall@2p", "recall@4p"]
    n = metrics["num_matches"]
    for prefix in ("", "ceiling_"):
        assert metrics[f"{prefix}recall@0.5p"] == 1.0  # 4 / 8 = 0.5, within 0.5 inclusive
        assert metrics[f"{prefix}auc@4p"] == pytest.approx((0.5 / n / 2 + 3.5) / 4)
        assert metrics[f"{prefix}auc@0.5p"] == pytest.approx(1 / n / 2)
    shown = get_task("correspondence").evaluate_views(
        pairs_of(a, shifted(a, 1), translation(1.5 * PATCH, 0)),
        {"units": "patch", "thresholds": "0.25,0.75"})
    assert shown["recall@0.25p"] == 0.0
    assert shown["recall@0.75p"] == 1.0
    assert shown["auc@0.25p"] == 0.0
    assert shown["auc@0.75p"] == pytest.approx((0.5 / n / 2 + 0.25) / 0.75)


def test_a_patch_is_measured_in_the_original_image_s_pixels():
    """A 64 px image the backbone sees at 32 px: a grid cell (8 input px) is 16 px of the
    image. A shift of 1.5 cells (24 px) leaves each match 8 px, half a patch, off."""
    size = 64

    def halved(width, height):
        return (width // 2, height // 2), None

    a = torch.randn(1, 16, 4, 4, generator=torch.Generator().manual_seed(1))
    pairs = WarpPairs(TensorSplit([a], torch.zeros(1, 3, 32, 32), target_kind="image"),
                      TensorSplit([shifted(a, 1)], torch.zeros(1, 3, 32, 32), target_kind="image"),
                      np.stack([translation(24.0, 0)]), np.array([[size, size]]), halved, 32)
    task = get_task("correspondence")
    pixels = task.evaluate_views(pairs)
    assert (pixels["recall@5px"], pixels["recall@10px"]) == (0.0, 1.0)  # 8 px
    patches = task.evaluate_views(pairs, {"units": "patch", "thresholds": "0.4,0.5"})
    assert (patches["recall@0.4p"], patches["recall@0.5p"]) == (0.0, 1.0)  # 8 / 16 = 0.5


def test_thresholds_name_the_metrics_and_the_headline():
    a = torch.randn(1, 16, 4, 4, generator=torch.Generator().manual_seed(1))
    task = get_task("correspondence")
    params = {"thresholds": "4.5 3"}
    metrics = task.evaluate_views(pairs_of(a, shifted(a, 1), translation(1.5 * PATCH, 0)), params)
    assert list(metrics) == ["recall@3px", "recall@4.5px", "auc@3px", "auc@4.5px",
                             "ceiling_recall@3px", "ceiling_recall@4.5px", "ceiling_auc@3px",
                             "ceiling_auc@4.5px", "num_matches"]
    assert (metrics["recall@3px"], metrics["recall@4.5px"]) == (0.0, 1.0)  # every error 4 px
    assert metrics["auc@3px"] == 0.0
    assert metrics["auc@4.5px"] == pytest.approx((4 / metrics["num_matches"] / 2 + 0.5) / 4.5)
    assert task.headline_for(task.resolve_params(params)) == "recall@3px"
    assert task.headline_for({"units": "patch"}) == "recall@0.5p"
    # the defaults: the declared metrics and headline, unchanged
    assert task.metrics_for({}) == task.metrics
    assert task.headline_for({}) == task.headline == "recall@1px"


def test_recall_at_any_threshold_against_a_hand_computation():
    errors = np.array([0.25, 0.5, 0.75, 3.0, np.nan])
    out = recall_auc(errors, (0.5, 2.0), "p")
    # auc: the curve through (0, 0), (0.25, 0.2), (0.5, 0.4), (0.75, 0.6), flat to T
    assert out == pytest.approx({"recall@0.5p": 2 / 5, "recall@2p": 3 / 5,
                                 "auc@0.5p": (0.25 * 0.1 + 0.25 * 0.3) / 0.5,
                                 "auc@2p": (0.025 + 0.075 + 0.25 * 0.5 + 1.25 * 0.6) / 2})


@pytest.mark.parametrize(("given", "canonical"), [
    ("1,2,5,10", ""), ("10 5 2 1", ""), ([1, 2, 5, 10.0], ""), ("3", "3"), (3, "3"),
    ("0.5, 7", "0.5,7"), ([2.5, 1], "1,2.5"), ("1e-1", "0.1"), ("", "")])
def test_thresholds_have_one_canonical_form(given, canonical):
    """The unit's defaults, however written, are the same question as none (the same id)."""
    task = get_task("correspondence")
    params = task.resolve_params({"thresholds": given})
    assert params["thresholds"] == canonical
    assert ("thresholds" in task.keyed_params(params)) == bool(canonical)
    assert task.resolve_params({"units": "patch", "thresholds": "4 2 1 0.5"})["thresholds"] == ""
    assert task.resolve_params({"units": "patch", "thresholds": "1,2,5,10"})["thresholds"] \
        == "1,2,5,10"


def test_keys_leave_units_and_thresholds_out_at_their_defaults():
    task = get_task("correspondence")
    keyed = task.keyed_params(task.resolve_params({"units": "pixel", "thresholds": "1 2 5 10"}))
    assert keyed == {"max_matches": 1000, "max_warp": 0.2, "mutual": False, "ratio": 0.9,
                     "warp_seed": 0}
    assert task.keyed_params(task.resolve_params({"units": "patch"}))["units"] == "patch"


@pytest.mark.parametrize("bad", ["0", "-1", "a", "1,1", "nan", "inf", " , ", "1,,x", "1.0000001",
                                 [], [True], None])
def test_bad_thresholds_are_refused_in_one_line(bad):
    from vbstore.errors import UsageError

    task = get_task("correspondence")
    with pytest.raises(UsageError) as err:
        task.resolve_params({"thresholds": bad})
    assert "\n" not in str(err.value)
    assert "threshold" in str(err.value)


def test_units_must_be_pixel_or_patch():
    from vbstore.errors import UsageError

    with pytest.raises(UsageError, match="'pixel', 'patch'"):
        get_task("correspondence").resolve_params({"units": "inch"})


_PEER = """
import json, sys, torch
from visbench.metrics.correspondence import correspondence_recall, error_auc
from visbench.tasks.mid_level.correspondence import patch_spacing
errors, thresholds, unit = json.loads(sys.stdin.read())
e = torch.tensor(errors, dtype=torch.float64)
print(json.dumps({"recall": correspondence_recall(e, thresholds, unit=unit),
                  "auc": error_auc(e, thresholds, unit=unit),
                  "spacing": [patch_spacing((4, 4), (32, 32)), patch_spacing((4, 2), (32, 32))]}))
"""


@pytest.mark.slow
@pytest.mark.parametrize(("thresholds", "unit"), [((1, 2, 5, 10), "px"), ((0.5, 1, 2, 4), "p"),
                                                  ((0.25, 3, 7.5), "px")])
def test_recall_and_auc_names_and_values_are_visbenchs(visbench_site, thresholds, unit):
    """VisBench's own metric functions, run in their own process on the same errors (ties, and
    errors on a threshold, among them): the same recall and AUC names, at every threshold, and
    the same numbers, the same patch spacing. VisBench means and sorts in float32: equal to
    1e-6."""
    import json
    import os
    import subprocess
    import sys

    from vbstore.tasks._matching import patch_spacing

    rng = np.random.default_rng(0)
    errors = np.concatenate([rng.gamma(2.0, 2.0, 500), np.repeat(thresholds, 2), [0.0, 0.0]])
    peer = subprocess.run(
        [sys.executable, "-c", _PEER], input=json.dumps([errors.tolist(), thresholds, unit]),
        capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(visbench_site)})
    theirs = json.loads(peer.stdout)
    ours = recall_auc(errors, tuple(float(t) for t in thresholds), unit)
    recall = {k: v for k, v in ours.items() if k.startswith("recall@")}
    auc = {k: v for k, v in ours.items() if k.startswith("auc@")}
    assert list(recall) == list(theirs["recall"])
    assert list(auc) == list(theirs["auc"])
    assert recall == pytest.approx(theirs["recall"], abs=1e-6)
    assert auc == pytest.approx(theirs["auc"], abs=1e-6)
    assert theirs["spacing"] == [patch_spacing((4, 4), 32, (32, 32), identity_geometry),
                                 patch_spacing((4, 2), 32, (32, 32), identity_geometry)]
