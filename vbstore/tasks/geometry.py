"""3D probes of probe3d (El Banani et al., 2024, "Probing the 3D Awareness of Visual Foundation
Models"): monocular ``depth`` and ``surface_normal``, on probe3d's schedule (see :mod:`._dense`).

``depth``: the head predicts ``n_bins`` (256) logits per grid cell over uniform bins spanning
[``min_depth``, ``max_depth``] (0.001 to 10 m); the prediction is the softmax expectation of
the bin centres (AdaBins-style, Bhat et al., 2021), computed on the grid and upsampled
(bilinear) to the target size. Loss over valid pixels (gt > 0): 10 x the scale-invariant log
loss with variance weight 0.85 (Eigen et al., 2014, as AdaBins weighs it) + 0.5 x a four-scale
gradient-matching loss on the log-depth difference (Li & Snavely, 2018). Metrics over the valid
pixels of each image, averaged over images (probe3d's and VisBench's reduction; op_version 2,
pooled over the split's pixels before): ``d1``, ``d2``, ``d3`` (max(pred/gt, gt/pred) < 1.25^k),
``abs_rel``, ``rmse`` (metres). A 16-bit depth PNG needs ``target_scale`` (stored units per
metre, 1000 for millimetres); ``.npy`` depth is read in metres.

``surface_normal``: three direction channels, L2-normalised; with ``uncertainty_aware`` (the
default) a fourth channel gives the concentration of Bae et al.'s (2021) aleatoric angular loss,
otherwise the loss is the plain mean angle. Valid pixels: a non-zero target normal (a black
pixel of an RGB normal map). Metrics in degrees over the valid pixels of each image, averaged
over images (op_version 2; pooled before): ``mean``, ``median``, ``rmse``, and ``d1``, ``d2``,
``d3`` = fraction within 11.25, 22.5 and 30 degrees.
``normal_source`` is recorded verbatim (which normals the data carries, e.g. geonet).

Head state: the head's ``state_dict``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ._base import Metric, Param
from ._dense import DenseTask, dense_params
from ._errors import TaskInputError
from ._registry import register_task

if TYPE_CHECKING:
    import torch

# Local imports: torch and the helpers built on it (_metrics, _linear, _checks, _dense_ops, _text)
# load inside the functions that compute; importing a task only declares it, and a cached result
# reads nothing more.

DEPTH_BINS = 256
_NOT_GIVEN = 0.0


@register_task(name="depth")
class Depth(DenseTask):
    """Monocular depth probe (256 bins, SILog + gradient loss); headline d1."""

    level = "mid"
    op_version = 2  # 2: metrics per image, then averaged (VisBench's reduction)
    target_kind = "depth_map"
    protocol = "probe3d"
    trivial = "the mean depth"
    params = dense_params(
        target_scale=Param(_NOT_GIVEN, "stored depth units per metre (1000 for a mm PNG, 512 for"
                           " Taskonomy); 0 = not given, .npy metres only", minimum=0.0),
        min_depth=Param(0.001, "depth of the first bin, metres", above=0.0),
        max_depth=Param(10.0, "depth of the last bin, metres", above=0.0),
        n_bins=Param(DEPTH_BINS, "depth bins the head predicts over (VisBench's --n-bins)",
                     minimum=2, added=True),
    )
    metrics = (
        Metric("d1", "higher", "fraction of an image's valid pixels with max(pred/gt, gt/pred) "
               "< 1.25, averaged over images"),
        Metric("d2", "higher", "... < 1.25^2"),
        Metric("d3", "higher", "... < 1.25^3"),
        Metric("abs_rel", "lower", "mean |pred - gt| / gt over an image's valid pixels, averaged "
               "over images"),
        Metric("rmse", "lower", "root mean squared error over an image's valid pixels, metres, "
               "averaged over images"),
    )
    headline = "d1"

    def _outputs(self, params: dict[str, Any]) -> int:
        if params["max_depth"] <= params["min_depth"]:
            raise UsageError(f"task {self.name!r}: max_depth must exceed min_depth, got "
                             f"{params['max_depth']:g} <= {params['min_depth']:g}")
        return params["n_bins"]

    def _prepare(self, target: torch.Tensor, params: dict[str, Any], role: str) -> torch.Tensor:
        from ._dense_ops import check_finite

        check_finite(target, self.name, role)
        if (target < 0).any():
            raise TaskInputError(f"task {self.name!r}: {role} depth holds negative values",
                                 hint="depth is in metres, 0 where unknown")
        return target.float()

    def _predict(self, raw: torch.Tensor, size: tuple[int, int], params: dict[str, Any]
                 ) -> torch.Tensor:
        import torch

        from ._dense_ops import upsample

        centres = torch.linspace(params["min_depth"], params["max_depth"], params["n_bins"],
                                 device=raw.device)
        depth = (raw.softmax(dim=1) * centres.reshape(1, -1, 1, 1)).sum(dim=1, keepdim=True)
        return upsample(depth, size)

    def _loss(self, pred: torch.Tensor, target: torch.Tensor, params: dict[str, Any]
              ) -> torch.Tensor | None:
        from ._dense_ops import gradient_loss, silog_loss

        valid = target > 0
        if not valid.any():
            return None
        return silog_loss(pred, target, valid) + 0.5 * gradient_loss(pred, target, valid)

    def _scorer(self, params: dict[str, Any]) -> Any:
        from ._dense_ops import DepthScorer

        return DepthScorer(self.name)

    def _trivial_sum(self, target: torch.Tensor, params: dict[str, Any]) -> torch.Tensor:
        import torch

        valid = target[target > 0].to(torch.float64)
        return torch.stack([valid.sum(), torch.tensor(float(len(valid)), dtype=torch.float64)])

    def _trivial_predict(self, total: torch.Tensor | None, target: torch.Tensor,
                         params: dict[str, Any]) -> torch.Tensor:
        import torch

        assert total is not None  # _trivial_sum above returns a tensor for every batch
        mean = float(total[0] / total[1]) if total[1] > 0 else params["min_depth"]
        return torch.full_like(target, mean)


@register_task(name="surface_normal")
class SurfaceNormal(DenseTask):
    """Surface-normal probe (uncertainty-aware angular loss); headline d1 (within 11.25 deg)."""

    level = "mid"
    op_version = 2  # 2: metrics per image, then averaged (VisBench's reduction)
    target_kind = "normal_map"
    protocol = "probe3d"
    trivial = "the mean normal"
    params = dense_params(
        uncertainty_aware=Param(True, "Bae et al.'s aleatoric loss (false: plain angular loss)"),
        normal_source=Param("", "where the data's normals come from (e.g. geonet), recorded"),
    )
    metrics = (
        Metric("d1", "higher", "fraction of an image's valid pixels within 11.25 degrees, "
               "averaged over images"),
        Metric("d2", "higher", "... within 22.5 degrees"),
        Metric("d3", "higher", "... within 30 degrees"),
        Metric("mean", "lower", "an image's mean angular error, degrees, averaged over images"),
        Metric("median", "lower", "an image's median angular error, degrees, averaged over "
               "images"),
        Metric("rmse", "lower", "an image's root mean squared angular error, degrees, averaged "
               "over images"),
    )
    headline = "d1"

    def _outputs(self, params: dict[str, Any]) -> int:
        return 4 if params["uncertainty_aware"] else 3

    def _prepare(self, target: torch.Tensor, params: dict[str, Any], role: str) -> torch.Tensor:
        from ._dense_ops import check_finite

        check_finite(target, self.name, role)
        return target.float()

    def _loss(self, pred: torch.Tensor, target: torch.Tensor, params: dict[str, Any]
              ) -> torch.Tensor | None:
        from ._dense_ops import normal_loss

        return normal_loss(pred, target, params["uncertainty_aware"])

    def _scorer(self, params: dict[str, Any]) -> Any:
        from ._dense_ops import NormalScorer

        return NormalScorer(self.name)

    def _trivial_sum(self, target: torch.Tensor, params: dict[str, Any]) -> torch.Tensor:
        import torch

        # the normals as stored, summed (an invalid pixel's zero vector adds nothing)
        return target.to(torch.float64).sum(dim=(0, 2, 3))

    def _trivial_predict(self, total: torch.Tensor | None, target: torch.Tensor,
                         params: dict[str, Any]) -> torch.Tensor:
        assert total is not None  # _trivial_sum above returns a tensor for every batch
        return total.to(target).reshape(1, 3, 1, 1).expand_as(target)
