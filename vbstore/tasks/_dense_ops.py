"""Per-pixel losses, streamed metric accumulators and derived targets of the dense probes.

Every accumulator sees the split one batch at a time (``update(pred, target)``) and keeps only
fixed-size state — a confusion matrix, float64 running sums of per-image metrics — so scoring
memory does not grow with the split; ``result()`` returns the metrics or raises
:class:`UndefinedMetric` naming why one cannot be defined.

Imported only inside task calls, because it imports torch.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._errors import TaskInputError, UndefinedMetric

NORMAL_THRESHOLDS = (11.25, 22.5, 30.0)
DEPTH_THRESHOLDS = (1.25, 1.25**2, 1.25**3)


def upsample(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Bilinear resize of a (B, C, h, w) map to ``size`` (half-pixel centres)."""
    if tuple(x.shape[-2:]) == tuple(size):
        return x
    return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


def check_finite(target: torch.Tensor, task: str, role: str) -> None:
    if not torch.isfinite(target).all():
        raise TaskInputError(f"task {task!r}: {role} targets hold NaN or Inf",
                             hint="fix or drop those target files")


# ---- losses -----------------------------------------------------------------------------------

def silog_loss(pred: torch.Tensor, gt: torch.Tensor, valid: torch.Tensor, variance: float = 0.85
               ) -> torch.Tensor:
    """Scale-invariant log loss (Eigen et al., 2014) as AdaBins weighs it:
    10 * sqrt(mean(g^2) - variance * mean(g)^2), g = log(pred) - log(gt) over valid pixels."""
    g = torch.log(pred[valid]) - torch.log(gt[valid])
    return 10.0 * torch.sqrt((g * g).mean() - variance * g.mean() ** 2 + 1e-12)


def gradient_loss(pred: torch.Tensor, gt: torch.Tensor, valid: torch.Tensor, scales: int = 4
                  ) -> torch.Tensor:
    """Multi-scale gradient matching (Li & Snavely, 2018) on the log-depth difference
    r = log(pred) - log(gt): at each scale (stride 2^k), the mean |dr/dx| + |dr/dy| over pairs
    of valid neighbours, summed over scales."""
    r = torch.where(valid, torch.log(pred.clamp_min(1e-6)) - torch.log(gt.clamp_min(1e-6)),
                    torch.zeros_like(pred))
    total = pred.new_zeros(())
    for k in range(scales):
        step = 2**k
        rs, ms = r[..., ::step, ::step], valid[..., ::step, ::step]
        mx = ms[..., :, 1:] & ms[..., :, :-1]
        my = ms[..., 1:, :] & ms[..., :-1, :]
        n = mx.sum() + my.sum()
        if n == 0:
            continue
        gx = (rs[..., :, 1:] - rs[..., :, :-1]).abs()[mx].sum()
        gy = (rs[..., 1:, :] - rs[..., :-1, :]).abs()[my].sum()
        total = total + (gx + gy) / n
    return total


def orientation_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor | None:
    """Angular regression of axial orientations over scored pixels (non-zero target): the mean
    of 1 - cos(2 (a - b)), a and b the predicted and target orientations, i.e. 1 minus the dot
    product of the L2-normalised predicted doubled-angle vector with the target's (von Mises on
    the doubled angle). None when no pixel is scored."""
    valid = target.abs().sum(dim=1) > 0
    if not valid.any():
        return None
    cos = (F.normalize(pred[:, :2], dim=1) * target).sum(dim=1)[valid]
    return (1.0 - cos).mean()


def normal_loss(pred: torch.Tensor, gt: torch.Tensor, uncertainty: bool) -> torch.Tensor | None:
    """Angular loss over valid pixels (non-zero target normals).

    ``uncertainty``: the aleatoric loss of Bae et al. (2021) — channel 4 gives the concentration
    kappa = elu(x) + 1 + 0.01 of an angular von Mises-Fisher-like distribution and the loss is
    -log(kappa^2 + 1) + kappa * theta + log(1 + exp(-kappa * pi)); else the mean angle theta.
    """
    valid = gt.abs().sum(dim=1) > 0
    if not valid.any():
        return None
    direction = F.normalize(pred[:, :3], dim=1)
    target = F.normalize(gt, dim=1)
    cos = (direction * target).sum(dim=1)[valid].clamp(-1 + 1e-4, 1 - 1e-4)  # finite acos gradient
    theta = torch.acos(cos)
    if not uncertainty:
        return theta.mean()
    kappa = (F.elu(pred[:, 3]) + 1.0 + 0.01)[valid]
    nll = -torch.log(kappa**2 + 1) + kappa * theta + torch.log1p(torch.exp(-kappa * math.pi))
    return nll.mean()


# ---- metrics ----------------------------------------------------------------------------------

class SegmentationScorer:
    """Multi-class segmentation: one confusion matrix over the split, plus per-image mIoU.

    ``miou`` averages the IoU of the classes that occur (in the targets or the predictions) over
    the split; ``miou_per_image`` averages, over images with a scored pixel, the mean IoU of the
    classes occurring in that image; ``pixel_acc`` is the fraction of scored pixels labelled
    right; ``mean_acc`` averages per-class recall over the classes present in the targets.
    Pixels labelled ``ignore_index`` are not scored.
    """

    def __init__(self, task: str, num_classes: int, ignore_index: int) -> None:
        self.task, self.k, self.ignore = task, num_classes, ignore_index
        self.matrix = torch.zeros(num_classes, num_classes, dtype=torch.int64)
        self.image_miou_sum, self.images = 0.0, 0

    def update(self, logits: torch.Tensor, target: torch.Tensor) -> None:
        pred = logits.argmax(dim=1)
        k = self.k
        for p, t in zip(pred, target, strict=True):
            valid = t != self.ignore
            if not valid.any():
                continue
            cm = torch.bincount(t[valid] * k + p[valid], minlength=k * k).reshape(k, k).cpu()
            self.matrix += cm
            iou = _iou(cm)
            self.image_miou_sum += float(iou[~iou.isnan()].mean())
            self.images += 1

    def result(self) -> dict[str, float]:
        if self.images == 0:
            raise UndefinedMetric(self.task, "miou", "every pixel of the split is ignored",
                                  hint="check the labels and ignore_index")
        m = self.matrix.to(torch.float64)
        iou = _iou(self.matrix)
        recall = m.diag() / m.sum(dim=1)
        return {
            "miou": float(iou[~iou.isnan()].mean()),
            "miou_per_image": self.image_miou_sum / self.images,
            "pixel_acc": float(m.diag().sum() / m.sum()),
            "mean_acc": float(recall[~recall.isnan()].mean()),
        }


def _iou(cm: torch.Tensor) -> torch.Tensor:
    """Per-class IoU of a confusion matrix (rows: truth); NaN for a class absent from both."""
    m = cm.to(torch.float64)
    union = m.sum(dim=0) + m.sum(dim=1) - m.diag()
    return torch.where(union > 0, m.diag() / union.clamp_min(1), torch.full_like(union, math.nan))


class _PerImage:
    """Per-image metrics averaged over the images of the split (VisBench's and probe3d's
    reduction): each image with a scored pixel counts once, whatever its share of the split's
    pixels. An image with no scored pixel is left out (VisBench counts it as 0 in every metric,
    which would flatter the lower-is-better ones; see docs/tasks.md)."""

    first: str = ""
    undefined: tuple[str, str] = ("", "")

    def __init__(self, task: str) -> None:
        self.task = task
        self.sums: dict[str, float] = {}
        self.images = 0

    def _add(self, metrics: dict[str, float]) -> None:
        for name, value in metrics.items():
            self.sums[name] = self.sums.get(name, 0.0) + value
        self.images += 1

    def result(self) -> dict[str, float]:
        if self.images == 0:
            why, hint = self.undefined
            raise UndefinedMetric(self.task, self.first, why, hint=hint)
        return {name: total / self.images for name, total in self.sums.items()}


class BinaryScorer(_PerImage):
    """Foreground/background segmentation per image, averaged over images: ``iou`` of the
    foreground, ``f1`` (Dice) and ``pixel_acc``. ``pred`` holds logits; foreground is a logit
    >= 0 (a probability >= 0.5, VisBench's threshold). ``target`` holds 1 (foreground), 0
    (background) and -1 (not scored). An image with no foreground in either the target or the
    prediction scores ``iou`` = ``f1`` = 1 (nothing there, nothing claimed), as in VisBench."""

    first = "iou"
    undefined = ("every pixel of the split is ignored", "check the masks and ignore_index")

    def update(self, logits: torch.Tensor, target: torch.Tensor) -> None:
        for score, truth_map in zip(logits[:, 0], target, strict=True):
            valid = truth_map >= 0
            if not valid.any():
                continue
            pred = (score >= 0)[valid]
            truth = truth_map[valid] == 1
            tp = int((pred & truth).sum())
            union = int((pred | truth).sum())
            correct = int((pred == truth).sum())
            self._add({
                "iou": tp / union if union else 1.0,
                "f1": 2 * tp / (tp + union) if union else 1.0,
                "pixel_acc": correct / int(valid.sum()),
            })


class DepthScorer(_PerImage):
    """Depth per image over its valid pixels (gt > 0), averaged over images: ``d1``-``d3`` =
    fraction with max(pred/gt, gt/pred) < 1.25^k, ``abs_rel`` = mean |pred - gt| / gt, ``rmse``
    = sqrt of the image's mean squared error, metres."""

    first = "d1"
    undefined = ("no pixel of the split has a valid depth (gt > 0)",
                 "check the depth files and target_scale")

    def update(self, pred: torch.Tensor, gt: torch.Tensor) -> None:
        for p_map, g_map in zip(pred, gt, strict=True):
            valid = g_map > 0
            if not valid.any():
                continue
            p, g = p_map[valid].to(torch.float64), g_map[valid].to(torch.float64)
            ratio = torch.maximum(p / g, g / p)
            metrics = {f"d{i + 1}": float((ratio < t).to(torch.float64).mean())
                       for i, t in enumerate(DEPTH_THRESHOLDS)}
            metrics["abs_rel"] = float(((p - g).abs() / g).mean())
            metrics["rmse"] = math.sqrt(float(((p - g) ** 2).mean()))
            self._add(metrics)


class NormalScorer(_PerImage):
    """Angular error in degrees per image over its valid pixels (non-zero target normal),
    averaged over images: ``mean``, ``median`` (exact; the mean of the two middle errors of an
    even count), ``rmse``, and ``d1``-``d3`` = fraction within 11.25, 22.5 and 30 degrees.
    Prediction and target are L2-normalised first."""

    first = "mean"
    undefined = ("no pixel of the split has a target normal",
                 "an all-black normal map is all invalid")

    def update(self, pred: torch.Tensor, gt: torch.Tensor) -> None:
        for p_map, g_map in zip(pred[:, :3], gt, strict=True):
            valid = g_map.abs().sum(dim=0) > 0
            if not valid.any():
                continue
            p = F.normalize(p_map.to(torch.float64), dim=0).permute(1, 2, 0)[valid]
            g = F.normalize(g_map.to(torch.float64), dim=0).permute(1, 2, 0)[valid]
            # atan2(|p x g|, p . g) is accurate at small angles, where acos is not
            err = torch.rad2deg(torch.atan2(torch.linalg.cross(p, g).norm(dim=1),
                                            (p * g).sum(dim=1)))
            ordered = err.sort().values
            n = len(ordered)
            metrics = {"mean": float(err.mean()),
                       "median": float((ordered[(n - 1) // 2] + ordered[n // 2]) / 2),
                       "rmse": math.sqrt(float((err**2).mean()))}
            metrics.update({f"d{i + 1}": float((err < t).to(torch.float64).mean())
                            for i, t in enumerate(NORMAL_THRESHOLDS)})
            self._add(metrics)


class MapScorer:
    """Regression of a map, nothing masked, per image then averaged over images (VisBench's
    reduction): ``<name>`` = Pearson correlation of prediction and target, ``mae`` and ``rmse``
    (the square root of the image's mean squared error).

    An image whose target is constant has no correlation and is left out of the correlation's
    average (VisBench counts it as 0); a constant prediction of a varying target scores 0 (it
    explains none of the variation). ``mae`` and ``rmse`` average over every image.
    """

    def __init__(self, task: str, correlation: str) -> None:
        self.task, self.name = task, correlation
        self.corr_sum, self.images = 0.0, 0
        self.maps, self.abs, self.rms = 0, 0.0, 0.0

    def update(self, pred: torch.Tensor, target: torch.Tensor) -> None:
        p = pred.reshape(len(pred), -1).to(torch.float64)
        t = target.reshape(len(target), -1).to(torch.float64)
        diff = p - t
        self.maps += len(diff)
        self.abs += float(diff.abs().mean(dim=1).sum())
        self.rms += float((diff**2).mean(dim=1).sqrt().sum())
        for pi, ti in zip(p, t, strict=True):
            if ti.max() == ti.min():
                continue
            self.images += 1
            if pi.max() == pi.min():
                continue
            pc, tc = pi - pi.mean(), ti - ti.mean()
            self.corr_sum += float((pc * tc).sum() / (pc.norm() * tc.norm()))

    def result(self) -> dict[str, float]:
        if self.images == 0:
            raise UndefinedMetric(self.task, self.name, "every target map of the split is constant",
                                  hint="score a split whose maps vary")
        return {self.name: self.corr_sum / self.images, "mae": self.abs / self.maps,
                "rmse": self.rms / self.maps}


class OrientationScorer:
    """Axial orientation error in degrees over the scored pixels of the split.

    ``pred`` and ``target`` hold doubled-angle vectors (cos 2t, sin 2t); a target's zero vector
    marks a pixel not scored. Each orientation is atan2(sin, cos) / 2 (a zero prediction reads
    as 0); the error is the angle between two axes, min(d, 180 - d) with d = |a - b| mod 180, so
    it lies in [0, 90] and a random guess averages 45. ``orientation_error`` is its mean;
    ``scored_fraction`` the fraction of all pixels that were scored.
    """

    def __init__(self, task: str) -> None:
        self.task = task
        self.n = self.pixels = 0
        self.total = 0.0

    def update(self, pred: torch.Tensor, target: torch.Tensor) -> None:
        valid = target.abs().sum(dim=1) > 0
        self.pixels += valid.numel()
        p, t = pred.to(torch.float64), target.to(torch.float64)
        a = torch.atan2(p[:, 1], p[:, 0])[valid] / 2
        b = torch.atan2(t[:, 1], t[:, 0])[valid] / 2
        d = torch.remainder(a - b, math.pi)
        err = torch.rad2deg(torch.minimum(d, math.pi - d))
        self.n += len(err)
        self.total += float(err.sum())

    def result(self) -> dict[str, float]:
        if self.n == 0:
            raise UndefinedMetric(self.task, "orientation_error",
                                  "no pixel of the split has a gradient above min_gradient",
                                  hint="lower min_gradient, or score images with texture")
        return {"orientation_error": self.total / self.n, "scored_fraction": self.n / self.pixels}


# ---- derived targets --------------------------------------------------------------------------

def gaussian_kernel(sigma: float) -> torch.Tensor:
    """A normalised 1-D Gaussian, radius round(4 sigma) (SciPy's default truncation)."""
    radius = int(4.0 * sigma + 0.5)
    x = torch.arange(-radius, radius + 1, dtype=torch.float64)
    k = torch.exp(-0.5 * (x / sigma) ** 2)
    return k / k.sum()


def _filter(x: torch.Tensor, kernel_y: torch.Tensor, kernel_x: torch.Tensor) -> torch.Tensor:
    """Separable correlation of (B, 1, H, W) with mirrored borders (d c b | a b c d)."""
    ry, rx = len(kernel_y) // 2, len(kernel_x) // 2
    x = F.pad(x, (rx, rx, ry, ry), mode="reflect")
    x = F.conv2d(x, kernel_y.to(x).reshape(1, 1, -1, 1))
    return F.conv2d(x, kernel_x.to(x).reshape(1, 1, 1, -1))


def shi_tomasi(image: torch.Tensor, sigma: float) -> torch.Tensor:
    """log1p of the Shi-Tomasi corner response of (B, 3, H, W) RGB in [0, 1]: the smaller
    eigenvalue of the structure tensor of the BT.601 luma in 0..255 units, Sobel derivatives
    (divided by 8: per-pixel slopes), a Gaussian window of ``sigma`` pixels. (B, 1, H, W)."""
    weights = torch.tensor([0.299, 0.587, 0.114], dtype=torch.float64, device=image.device)
    grey = (image.to(torch.float64) * weights.reshape(1, 3, 1, 1)).sum(dim=1, keepdim=True) * 255
    smooth = torch.tensor([1.0, 2.0, 1.0], dtype=torch.float64) / 8
    slope = torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64)
    gx = _filter(grey, smooth, slope)
    gy = _filter(grey, slope, smooth)
    window = gaussian_kernel(sigma)
    a, b, c = (_filter(v, window, window) for v in (gx * gx, gx * gy, gy * gy))
    low = (a + c) / 2 - torch.sqrt(((a - c) / 2) ** 2 + b * b)
    return torch.log1p(low.clamp_min(0)).to(torch.float32)


def gradient_orientation(image: torch.Tensor, sigma: float, min_gradient: float) -> torch.Tensor:
    """The axial gradient orientation of (B, 3, H, W) RGB in [0, 1], where the gradient is strong.

    The BT.601 luma in 0..255 units, smoothed by a Gaussian of ``sigma`` pixels (none at 0,
    radius round(4 sigma), mirrored borders), differentiated with Sobel / 8 (per-pixel slopes;
    x to the right, y down the rows); t = atan2(gy, gx) modulo 180 degrees (a dark-to-light and
    a light-to-dark edge have one orientation). Returns (B, 2, H, W) float32 doubled-angle
    vectors (cos 2t, sin 2t) = ((gx^2 - gy^2) / m^2, 2 gx gy / m^2) where the gradient magnitude
    m = |(gx, gy)| exceeds ``min_gradient``, the zero vector (not scored) elsewhere.
    """
    weights = torch.tensor([0.299, 0.587, 0.114], dtype=torch.float64, device=image.device)
    grey = (image.to(torch.float64) * weights.reshape(1, 3, 1, 1)).sum(dim=1, keepdim=True) * 255
    if sigma > 0:
        window = gaussian_kernel(sigma)
        grey = _filter(grey, window, window)
    smooth = torch.tensor([1.0, 2.0, 1.0], dtype=torch.float64) / 8
    slope = torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64)
    gx = _filter(grey, smooth, slope)
    gy = _filter(grey, slope, smooth)
    m2 = gx * gx + gy * gy
    strong = m2 > min_gradient**2
    safe = torch.where(strong, m2, torch.ones_like(m2))
    doubled = torch.cat([(gx * gx - gy * gy) / safe, 2 * gx * gy / safe], dim=1)
    return torch.where(strong, doubled, torch.zeros_like(doubled)).to(torch.float32)
