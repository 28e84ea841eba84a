"""Dense metrics and losses against independent computations (scikit-learn, SciPy, NumPy, hand).

Every scorer is fed a split in several batches, so the streaming accumulation is what is checked.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import ndimage, stats
from sklearn.metrics import confusion_matrix, jaccard_score

from vbstore.tasks import UndefinedMetric
from vbstore.tasks._dense_ops import (
    BinaryScorer,
    DepthScorer,
    MapScorer,
    NormalScorer,
    OrientationScorer,
    SegmentationScorer,
    gradient_loss,
    gradient_orientation,
    normal_loss,
    orientation_loss,
    shi_tomasi,
    silog_loss,
)

RNG = np.random.default_rng(0)


def _feed(scorer, preds, targets, step=2):
    for start in range(0, len(preds), step):
        scorer.update(preds[start:start + step], targets[start:start + step])
    return scorer.result()


def _logits(labels: np.ndarray, k: int) -> torch.Tensor:
    """Logits whose argmax is ``labels``."""
    return torch.nn.functional.one_hot(torch.as_tensor(labels), k).permute(0, 3, 1, 2).float()


def test_segmentation_matches_sklearn_and_skips_empty_and_ignored():
    k = 5  # class 4 occurs nowhere: it must not drag miou down
    truth = RNG.integers(0, 4, (6, 7, 9))
    pred = np.where(RNG.random(truth.shape) < 0.7, truth, RNG.integers(0, 4, truth.shape))
    truth[0, :2] = 255  # ignored pixels (VOC outlines), predicted anything
    truth[3] = 255  # an image with nothing scored is left out of miou_per_image
    got = _feed(SegmentationScorer("t", k, 255), _logits(pred, k), torch.as_tensor(truth))

    valid = truth != 255
    y, p = truth[valid], pred[valid]
    present = np.unique(np.concatenate([y, p]))
    assert got["miou"] == pytest.approx(jaccard_score(y, p, labels=present, average="macro"))
    cm = confusion_matrix(y, p, labels=range(k))
    assert got["pixel_acc"] == pytest.approx(np.trace(cm) / cm.sum())
    rows = cm.sum(axis=1)
    assert got["mean_acc"] == pytest.approx(np.mean(np.diag(cm)[rows > 0] / rows[rows > 0]))
    per_image = []
    for t, q in zip(truth, pred, strict=True):
        v = t != 255
        if v.any():
            labels = np.unique(np.concatenate([t[v], q[v]]))
            per_image.append(jaccard_score(t[v], q[v], labels=labels, average="macro"))
    assert got["miou_per_image"] == pytest.approx(np.mean(per_image))


def test_segmentation_by_hand_and_all_ignored():
    truth = np.array([[[0, 0, 1, 1]]])
    pred = np.array([[[0, 1, 1, 1]]])
    got = _feed(SegmentationScorer("t", 2, 255), _logits(pred, 2), torch.as_tensor(truth))
    # class 0: 1 / 2; class 1: 2 / 3
    assert got["miou"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert got["pixel_acc"] == pytest.approx(3 / 4)
    assert got["mean_acc"] == pytest.approx((1 / 2 + 1) / 2)
    with pytest.raises(UndefinedMetric, match="every pixel of the split is ignored"):
        _feed(SegmentationScorer("t", 2, 255), _logits(pred, 2), torch.full((1, 1, 4), 255))


def _mean_over_images(per_image):
    return {k: np.mean([m[k] for m in per_image]) for k in per_image[0]}


def test_binary_per_image_matches_sklearn_then_averaged():
    truth = RNG.integers(0, 2, (5, 8, 8))
    truth[1, 0] = -1  # not scored
    truth[2] = -1  # an image with nothing scored is left out
    truth[3] = 0  # no foreground in the target ...
    logits = torch.as_tensor(RNG.normal(size=(5, 1, 8, 8)) + (truth[:, None] - 0.5))
    logits[3] = -2.0  # ... nor in the prediction: nothing there, nothing claimed, 1.0
    logits[4, 0, 0, 0] = 0.0  # a probability of exactly 0.5 is foreground (VisBench's >=)
    got = _feed(BinaryScorer("t"), logits, torch.as_tensor(truth))
    from sklearn.metrics import f1_score
    per_image = []
    for t, q in zip(truth, logits.numpy()[:, 0] >= 0, strict=True):
        v = t >= 0
        if not v.any():
            continue
        y, p = t[v], q[v].astype(int)
        empty = not (y.any() or p.any())
        per_image.append({"iou": 1.0 if empty else jaccard_score(y, p),
                          "f1": 1.0 if empty else f1_score(y, p),
                          "pixel_acc": (y == p).mean()})
    assert len(per_image) == 4
    assert got == pytest.approx(_mean_over_images(per_image))
    with pytest.raises(UndefinedMetric, match="every pixel of the split is ignored"):
        _feed(BinaryScorer("t"), torch.full((1, 1, 2, 2), -3.0), torch.full((1, 2, 2), -1))


def test_binary_per_image_differs_from_pooled():
    # image 0: a large object found exactly; image 1: a small one missed entirely
    truth = np.zeros((2, 10, 10), int)
    truth[0, :8] = 1
    truth[1, 0, :2] = 1
    pred = truth.copy()
    pred[1] = 0
    got = _feed(BinaryScorer("t"), torch.as_tensor(pred[:, None] * 4.0 - 2.0),
                torch.as_tensor(truth))
    pooled = (truth & pred).sum() / (truth | pred).sum()  # 80 / 82, what op_version 1 reported
    assert got["iou"] == pytest.approx((1.0 + 0.0) / 2)
    assert pooled == pytest.approx(80 / 82)
    assert got["iou"] < pooled - 0.4


def _depth_by_hand(p, g):
    ratio = np.maximum(p / g, g / p)
    out = {f"d{k}": np.mean(ratio < 1.25**k) for k in (1, 2, 3)}
    out["abs_rel"] = np.mean(np.abs(p - g) / g)
    out["rmse"] = np.sqrt(np.mean((p - g) ** 2))
    return out


def test_depth_per_image_matches_numpy_then_averaged():
    gt = RNG.uniform(0.5, 8, (5, 1, 6, 6))
    gt[gt < 1.0] = 0  # invalid
    gt[2] = 0  # an image with no valid depth is left out
    pred = np.clip(gt * RNG.uniform(0.7, 1.5, gt.shape), 0.01, None)
    got = _feed(DepthScorer("t"), torch.as_tensor(pred, dtype=torch.float32),
                torch.as_tensor(gt, dtype=torch.float32), step=3)
    per_image = []
    for p_map, g_map in zip(pred.astype(np.float32).astype(float),
                            gt.astype(np.float32).astype(float), strict=True):
        v = g_map > 0
        if v.any():
            per_image.append(_depth_by_hand(p_map[v], g_map[v]))
    assert len(per_image) == 4
    assert got == pytest.approx(_mean_over_images(per_image))
    with pytest.raises(UndefinedMetric, match="valid depth"):
        _feed(DepthScorer("t"), torch.ones(1, 1, 2, 2), torch.zeros(1, 1, 2, 2))


def test_depth_per_image_differs_from_pooled():
    # image 0: 1 valid pixel, badly wrong; image 1: 16 valid pixels, exact
    gt = np.zeros((2, 1, 4, 4))
    gt[0, 0, 0, 0] = 2.0
    gt[1] = 3.0
    pred = np.where(gt > 0, gt, 1.0)
    pred[0, 0, 0, 0] = 8.0
    got = _feed(DepthScorer("t"), torch.as_tensor(pred), torch.as_tensor(gt))
    v = gt > 0
    pooled = _depth_by_hand(pred[v], gt[v])
    assert got["d1"] == pytest.approx(0.5)
    assert pooled["d1"] == pytest.approx(16 / 17)
    assert got["abs_rel"] == pytest.approx((3.0 + 0.0) / 2)
    assert pooled["abs_rel"] == pytest.approx(3.0 / 17)


def _angles(p, g):
    cos = (p * g).sum(-1) / np.linalg.norm(p, axis=-1) / np.linalg.norm(g, axis=-1)
    return np.degrees(np.arccos(np.clip(cos, -1, 1)))


def test_normals_per_image_match_numpy_angles_then_averaged():
    gt = RNG.normal(size=(4, 3, 10, 9))
    gt[0, :, :3] = 0  # invalid: the zero vector
    gt[2] = 0  # an image with no valid normal is left out
    pred = gt + RNG.normal(size=gt.shape) * 0.4
    pred_t = torch.as_tensor(np.concatenate([pred, np.zeros((4, 1, 10, 9))], 1))  # + kappa
    got = _feed(NormalScorer("t"), pred_t.float(), torch.as_tensor(gt).float(), step=3)
    per_image = []
    for p_map, g_map in zip(pred.astype(np.float32).astype(float),
                            gt.astype(np.float32).astype(float), strict=True):
        p, g = np.moveaxis(p_map, 0, -1), np.moveaxis(g_map, 0, -1)
        v = np.abs(g).sum(-1) > 0
        if not v.any():
            continue
        err = _angles(p[v], g[v])
        per_image.append({"mean": err.mean(), "median": np.median(err),
                          "rmse": np.sqrt(np.mean(err**2)),
                          **{f"d{k}": np.mean(err < t)
                             for k, t in zip((1, 2, 3), (11.25, 22.5, 30.0), strict=True)}})
    assert len(per_image) == 3
    assert got == pytest.approx(_mean_over_images(per_image), abs=1e-6)
    with pytest.raises(UndefinedMetric, match="no pixel of the split has a target normal"):
        _feed(NormalScorer("t"), torch.ones(1, 3, 2, 2), torch.zeros(1, 3, 2, 2))


def test_normal_median_of_an_even_count_averages_the_middle_pair():
    # errors 0, 90 degrees: numpy's median is 45
    gt = torch.tensor([[[[1.0, 1.0]], [[0.0, 0.0]], [[0.0, 0.0]]]])
    pred = torch.tensor([[[[1.0, 0.0]], [[0.0, 1.0]], [[0.0, 0.0]]]])
    scorer = NormalScorer("t")
    scorer.update(pred, gt)
    assert scorer.result()["median"] == pytest.approx(45.0, abs=1e-9)


def test_normals_per_image_median_differs_from_pooled():
    # image 0: one pixel at 90 degrees; image 1: three pixels at 0 degrees
    gt = torch.zeros(2, 3, 1, 3)
    gt[:, 0] = 1.0
    gt[0, :, :, 1:] = 0.0  # image 0 has one valid pixel
    pred = gt.clone()
    pred[0, :, 0, 0] = torch.tensor([0.0, 1.0, 0.0])
    got = _feed(NormalScorer("t"), pred, gt)
    assert got["median"] == pytest.approx(45.0)  # (90 + 0) / 2
    assert np.median([90.0, 0.0, 0.0, 0.0]) == 0.0  # the pooled median (op_version 1)
    assert got["mean"] == pytest.approx(45.0)  # pooled: 22.5


def test_map_correlation_matches_scipy_with_constant_cases():
    target = RNG.normal(size=(5, 1, 6, 6))
    pred = target * 0.5 + RNG.normal(size=target.shape)
    target[2] = 3.0  # constant target: no correlation, left out
    pred[4] = 1.0  # constant prediction of a varying map: scores 0
    got = _feed(MapScorer("t", "edge_correlation"), torch.as_tensor(pred), torch.as_tensor(target))
    rs = [stats.pearsonr(pred[i].ravel(), target[i].ravel())[0] for i in (0, 1, 3)] + [0.0]
    assert got["edge_correlation"] == pytest.approx(np.mean(rs))
    # mae and rmse per image, then averaged over every image (VisBench's reduction)
    diff = (pred - target).reshape(5, -1)
    assert got["mae"] == pytest.approx(np.abs(diff).mean(axis=1).mean())
    assert got["rmse"] == pytest.approx(np.sqrt((diff**2).mean(axis=1)).mean())


def test_map_rmse_per_image_differs_from_pooled():
    target = np.zeros((2, 1, 2, 2))
    target[:, 0, 0, 0] = 1.0
    pred = target.copy()
    pred[0] += 2.0  # image 0 off by 2 everywhere, image 1 exact
    got = _feed(MapScorer("t", "c"), torch.as_tensor(pred), torch.as_tensor(target))
    assert got["rmse"] == pytest.approx((2.0 + 0.0) / 2)
    assert np.sqrt(((pred - target) ** 2).mean()) == pytest.approx(np.sqrt(2.0))  # pooled
    with pytest.raises(UndefinedMetric, match="constant"):
        _feed(MapScorer("t", "c"), torch.rand(2, 1, 3, 3), torch.ones(2, 1, 3, 3))


def test_silog_by_hand():
    gt = torch.tensor([1.0, 2.0, 4.0, 5.0]).reshape(1, 1, 2, 2)
    pred = torch.tensor([2.0, 2.0, 2.0, 9.0]).reshape(1, 1, 2, 2)
    valid = torch.tensor([True, True, True, False]).reshape(1, 1, 2, 2)
    g = np.log([2.0, 1.0, 0.5])
    expected = 10 * math.sqrt(np.mean(g**2) - 0.85 * np.mean(g) ** 2)
    assert float(silog_loss(pred, gt, valid)) == pytest.approx(expected, rel=1e-5)
    # a prediction off by one global scale has (1 - 0.85) of its log-variance left
    assert float(silog_loss(gt * 3, gt, valid)) == pytest.approx(
        10 * math.sqrt(0.15) * math.log(3), rel=1e-5)


def test_gradient_loss_by_hand():
    gt = torch.ones(1, 1, 1, 3)
    pred = torch.tensor([1.0, math.e, 1.0]).reshape(1, 1, 1, 3)
    valid = torch.ones_like(gt, dtype=torch.bool)
    # scale 0: |1 - 0| + |0 - 1| over 2 pairs = 1; scale 1 (columns 0, 2): |0 - 0| = 0
    assert float(gradient_loss(pred, gt, valid)) == pytest.approx(1.0, rel=1e-5)
    # a global scale error has no gradient
    assert float(gradient_loss(gt * 7, gt, valid)) == pytest.approx(0.0, abs=1e-6)


def test_normal_losses_by_hand():
    gt = torch.tensor([0.0, 0.0, 1.0]).reshape(1, 3, 1, 1)
    pred = torch.tensor([1.0, 0.0, 1.0, 0.0]).reshape(1, 4, 1, 1)  # 45 degrees, raw kappa 0
    theta = math.pi / 4
    assert float(normal_loss(pred, gt, False)) == pytest.approx(theta, rel=1e-5)
    kappa = 1.01  # elu(0) + 1 + 0.01
    expected = -math.log(kappa**2 + 1) + kappa * theta + math.log(1 + math.exp(-kappa * math.pi))
    assert float(normal_loss(pred, gt, True)) == pytest.approx(expected, rel=1e-5)
    assert normal_loss(pred, torch.zeros_like(gt), True) is None


def test_shi_tomasi_matches_scipy():
    image = RNG.random((2, 3, 12, 14))
    image[1, :, :, :7] = 0.2  # a flat half: response 0
    got = shi_tomasi(torch.as_tensor(image, dtype=torch.float32), 1.2).numpy()
    for b in range(2):
        grey = (image[b].astype(np.float32).astype(float)
                * np.array([0.299, 0.587, 0.114])[:, None, None]).sum(0) * 255
        gx = ndimage.sobel(grey, axis=1, mode="mirror") / 8
        gy = ndimage.sobel(grey, axis=0, mode="mirror") / 8
        a, bb, c = (ndimage.gaussian_filter(v, 1.2, mode="mirror")
                    for v in (gx * gx, gx * gy, gy * gy))
        tensor = np.stack([np.stack([a, bb], -1), np.stack([bb, c], -1)], -2)
        low = np.linalg.eigvalsh(tensor)[..., 0]
        np.testing.assert_allclose(got[b, 0], np.log1p(np.clip(low, 0, None)), rtol=1e-4,
                                   atol=1e-4)
    assert got[1, 0, :, 0].max() < 1e-6  # flat within the window and the Sobel reach


def _numpy_orientation(image, sigma, min_gradient):
    """Orientation (radians, mod pi) and scored mask of one (3, H, W) image, with SciPy."""
    grey = (image.astype(np.float32).astype(float) * np.array([0.299, 0.587, 0.114])[:, None, None]
            ).sum(0) * 255
    if sigma > 0:
        grey = ndimage.gaussian_filter(grey, sigma, mode="mirror")
    gx = ndimage.sobel(grey, axis=1, mode="mirror") / 8
    gy = ndimage.sobel(grey, axis=0, mode="mirror") / 8
    return np.mod(np.arctan2(gy, gx), np.pi), np.hypot(gx, gy) > min_gradient


@pytest.mark.parametrize("sigma", [0.0, 1.3])
def test_gradient_orientation_matches_scipy(sigma):
    image = RNG.random((2, 3, 12, 14))
    image[1, :, :, :7] = 0.4  # a flat half: not scored
    got = gradient_orientation(torch.as_tensor(image, dtype=torch.float32), sigma, 6.0).numpy()
    for b in range(2):
        theta, strong = _numpy_orientation(image[b], sigma, 6.0)
        scored = np.abs(got[b]).sum(0) > 0
        np.testing.assert_array_equal(scored, strong)
        np.testing.assert_allclose(got[b, 0][strong], np.cos(2 * theta[strong]), atol=1e-5)
        np.testing.assert_allclose(got[b, 1][strong], np.sin(2 * theta[strong]), atol=1e-5)
    assert not scored[:, :4].any()  # flat within the window and the Sobel reach
    # a vertical step (dark left, light right) and its mirror have one orientation: 0 degrees
    step = torch.zeros(2, 3, 8, 8)
    step[0, :, :, 4:] = 1.0
    step[1, :, :, :4] = 1.0
    out = gradient_orientation(step, 0.0, 1.0)
    assert torch.allclose(out[:, :, :, 3:5], torch.tensor([1.0, 0.0]).reshape(1, 2, 1, 1)
                          .expand(2, 2, 8, 2))


def _doubled(theta):
    return torch.as_tensor(np.stack([np.cos(2 * theta), np.sin(2 * theta)], 1))


def test_orientation_scorer_matches_numpy_axial_differences():
    truth = RNG.uniform(0, np.pi, (5, 6, 7))
    pred = RNG.uniform(-np.pi, np.pi, (5, 6, 7))
    scored = RNG.random((5, 6, 7)) < 0.6
    scored[2] = False  # an image with nothing scored
    target = _doubled(truth) * torch.as_tensor(scored[:, None])
    scale = RNG.uniform(0.1, 5, (5, 1, 6, 7))  # the prediction's length does not matter
    got = _feed(OrientationScorer("t"), _doubled(pred) * torch.as_tensor(scale), target)
    d = np.abs(np.degrees(pred - truth)) % 180
    err = np.minimum(d, 180 - d)[scored]
    assert got["orientation_error"] == pytest.approx(err.mean())
    assert got["scored_fraction"] == pytest.approx(scored.mean())


def test_orientation_scorer_by_hand_and_nothing_scored():
    # truth 0, 90, 175 degrees; prediction 179 (1 off), 0 (90 off), zero vector (reads 0: 5 off)
    truth = np.radians([0.0, 90.0, 175.0]).reshape(1, 1, 3)
    target = _doubled(truth)
    pred = _doubled(np.radians([179.0, 0.0, 0.0]).reshape(1, 1, 3))
    pred[..., 2] = 0.0
    got = OrientationScorer("t")
    got.update(pred, target)
    assert got.result()["orientation_error"] == pytest.approx((1 + 90 + 5) / 3)
    assert got.result()["scored_fraction"] == 1.0
    with pytest.raises(UndefinedMetric, match="min_gradient"):
        _feed(OrientationScorer("t"), pred.repeat(2, 1, 1, 1), torch.zeros(2, 2, 1, 3))


def test_orientation_loss_by_hand():
    target = _doubled(np.radians([[[0.0, 30.0]]])).float()
    pred = _doubled(np.radians([[[45.0, 30.0]]])).float() * 3
    # 1 - cos(2 * 45 degrees) = 1 and 0, averaged
    assert float(orientation_loss(pred, target)) == pytest.approx(0.5, abs=1e-6)
    assert orientation_loss(pred, torch.zeros_like(target)) is None
