"""``orientation``: does a backbone's feature grid encode which way the image's edges run?

A low-level probe that needs no labels: the target is derived from the image the backbone saw
(target kind ``image``), the axial gradient orientation t = atan2(gy, gx) modulo 180 degrees of
the BT.601 luma (0..255) after a Gaussian of ``orientation_sigma`` pixels, Sobel derivatives
divided by 8, mirrored borders (see ``_dense_ops.gradient_orientation``), scored only where the
gradient magnitude exceeds ``min_gradient`` (luma levels per pixel): a flat region has no
orientation. Axial data are regressed on the doubled angle (Mardia & Jupp, "Directional
Statistics", 2000): the head predicts (cos 2t, sin 2t), and the loss is the mean of
1 - cos(2 (predicted - target)) over scored pixels, on probe3d's schedule (see :mod:`._dense`).

Metrics over the scored pixels of the split: ``orientation_error``, the mean angle between the
predicted and target axes in degrees (0 to 90; a random guess averages 45), and
``scored_fraction``, the fraction of all pixels scored (a property of the data and
``min_gradient``, reported so that two errors over different pixel sets are not compared
blindly). Its level follows the low/mid/high taxonomy of visual-probing studies.

Head state: the head's ``state_dict``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._base import Metric, Param
from ._dense import DenseTask, dense_params
from ._errors import TaskInputError
from ._registry import register_task

if TYPE_CHECKING:
    import torch

# Local imports: torch and the helpers built on it (_metrics, _linear, _checks, _dense_ops, _text)
# load inside the functions that compute; importing a task only declares it, and a cached result
# reads nothing more.


@register_task(name="orientation")
class Orientation(DenseTask):
    """Edge-orientation regression from the image; headline orientation_error (degrees)."""

    level = "low"
    op_version = 1
    target_kind = "image"
    protocol = "gradient_orientation"
    trivial = "the mean orientation"
    params = dense_params(
        orientation_sigma=Param(1.0, "Gaussian smoothing of the luma before Sobel, pixels "
                                "(0 = none)", minimum=0.0),
        min_gradient=Param(8.0, "score pixels whose luma gradient exceeds this, levels (of "
                           "255) per pixel", minimum=0.0),
    )
    metrics = (
        Metric("orientation_error", "lower",
               "mean angle between predicted and target edge axes over scored pixels, degrees "
               "(0-90; chance 45)"),
        Metric("scored_fraction", "higher",
               "fraction of pixels scored (gradient above min_gradient); set by the data"),
    )
    headline = "orientation_error"

    def _outputs(self, params: dict[str, Any]) -> int:
        return 2

    def _prepare(self, target: torch.Tensor, params: dict[str, Any], role: str) -> torch.Tensor:
        from ._dense_ops import check_finite, gradient_orientation

        if target.ndim != 4 or target.shape[1] != 3:
            raise TaskInputError(f"task {self.name!r}: {role} images must be (B, 3, H, W), got "
                                 f"{tuple(target.shape)}")
        check_finite(target, self.name, role)
        return gradient_orientation(target, params["orientation_sigma"], params["min_gradient"])

    def _loss(self, pred: torch.Tensor, target: torch.Tensor, params: dict[str, Any]
              ) -> torch.Tensor | None:
        from ._dense_ops import orientation_loss

        return orientation_loss(pred, target)

    def _scorer(self, params: dict[str, Any]) -> Any:
        from ._dense_ops import OrientationScorer

        return OrientationScorer(self.name)

    def _trivial_sum(self, target: torch.Tensor, params: dict[str, Any]) -> torch.Tensor:
        import torch

        return target.to(torch.float64).sum(dim=(0, 2, 3))

    def _trivial_predict(self, total: torch.Tensor | None, target: torch.Tensor,
                         params: dict[str, Any]) -> torch.Tensor:
        assert total is not None  # _trivial_sum above returns a tensor for every batch
        # the axial mean: the orientation of the summed doubled-angle vectors
        return total.to(target).reshape(1, 2, 1, 1).expand_as(target)

