"""Map-regression probes: ``edge``, ``occlusion_edge``, ``keypoints2d`` and ``corner``.

Each regresses one value per pixel with an L1 loss on probe3d's schedule (see :mod:`._dense`),
nothing masked, and reports the per-image Pearson correlation of prediction and target averaged
over images (the headline: it ignores a map's scale), plus ``mae`` and ``rmse``, each an image's
then averaged over images (VisBench's reduction; op_version 2, over every pixel of the split
before). Protocol names as VisBench records them: ``visbench_edge_regression``,
``visbench_occlusion_edge_regression``, ``visbench_keypoint2d_regression``,
``visbench_shi_tomasi_regression`` (op_version 1: ``taskonomy_*`` and ``shi_tomasi_corner``).
The first three are Taskonomy domains (Zamir et al., 2018, "Taskonomy: Disentangling Task
Transfer Learning": ``edge_texture``, ``edge_occlusion``, ``keypoints2d``); ``corner`` needs no
labels. Their levels follow the low/mid/high taxonomy of visual-probing studies (edges,
keypoints and corners low; occlusion edges, which need 3D, mid).

- ``edge``: an edge-magnitude map (e.g. Taskonomy texture edges, the scenes ``edges``).
- ``occlusion_edge``: an occlusion-edge map, regressed in log space by default
  (``target_transform`` ``log1p``: target log(1 + v), recorded with the params); metrics are in
  that space too.
- ``keypoints2d``: a keypoint-response map.
- ``corner``: derived from the image the backbone saw: log1p of the Shi-Tomasi response (Shi &
  Tomasi, 1994, "Good Features to Track"), the smaller eigenvalue of the structure tensor of the
  BT.601 luma (0..255), Sobel derivatives / 8, Gaussian window of ``corner_sigma`` pixels,
  mirrored borders.

``target_scale`` divides stored map values (the engine applies it when decoding). Head state:
the head's ``state_dict``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ._base import Metric, Param
from ._dense import DenseTask, dense_params
from ._errors import TaskInputError
from ._registry import register_task

if TYPE_CHECKING:
    import torch

# Local imports: torch and the helpers built on it (_metrics, _linear, _checks, _dense_ops, _text)
# load inside the functions that compute; importing a task only declares it, and a cached result
# reads nothing more.

_SCALE = Param(1.0, "divides the stored map values", above=0.0)


class _MapTask(DenseTask):
    """L1 regression of a one-channel map; metrics: correlation, mae, rmse."""

    correlation: ClassVar[str]

    def _outputs(self, params: dict[str, Any]) -> int:
        return 1

    def _prepare(self, target: torch.Tensor, params: dict[str, Any], role: str) -> torch.Tensor:
        from ._dense_ops import check_finite

        check_finite(target, self.name, role)
        return target.float()

    def _loss(self, pred: torch.Tensor, target: torch.Tensor, params: dict[str, Any]
              ) -> torch.Tensor | None:
        import torch.nn.functional as F

        return F.l1_loss(pred, target)

    def _scorer(self, params: dict[str, Any]) -> Any:
        from ._dense_ops import MapScorer

        return MapScorer(self.name, self.correlation)


def _metrics(correlation: str, what: str) -> tuple[Metric, ...]:
    return (
        Metric(correlation, "higher", f"Pearson correlation with the {what} per image, averaged"),
        Metric("mae", "lower", "mean absolute error over an image's pixels, averaged over images"),
        Metric("rmse", "lower", "root mean squared error over an image's pixels, averaged over "
               "images"),
    )


@register_task(name="edge")
class Edge(_MapTask):
    """Edge-magnitude regression (L1); headline edge_correlation."""

    level = "low"
    op_version = 2  # 2: VisBench's protocol name; mae, rmse per image then averaged
    target_kind = "scalar_map"
    protocol = "visbench_edge_regression"
    correlation = "edge_correlation"
    params = dense_params(target_scale=_SCALE)
    metrics = _metrics(correlation, "edge map")
    headline = correlation


@register_task(name="occlusion_edge")
class OcclusionEdge(_MapTask):
    """Occlusion-edge regression in log space (L1); headline occlusion_edge_correlation."""

    level = "mid"
    op_version = 2  # 2: VisBench's protocol name; mae, rmse per image then averaged
    target_kind = "scalar_map"
    protocol = "visbench_occlusion_edge_regression"
    correlation = "occlusion_edge_correlation"
    params = dense_params(
        target_scale=_SCALE,
        target_transform=Param("log1p", "log1p: regress log(1 + v); none: v as stored",
                               choices=("log1p", "none")),
    )
    metrics = _metrics(correlation, "occlusion-edge map")
    headline = correlation

    def _prepare(self, target: torch.Tensor, params: dict[str, Any], role: str) -> torch.Tensor:
        import torch

        target = super()._prepare(target, params, role)
        if params["target_transform"] == "none":
            return target
        if (target < 0).any():
            raise TaskInputError(f"task {self.name!r}: {role} occlusion edges hold negative "
                                 "values, which log1p cannot take",
                                 hint="use target_transform=none")
        return torch.log1p(target)


@register_task(name="keypoints2d")
class Keypoints2d(_MapTask):
    """Keypoint-response regression (L1); headline keypoint_correlation."""

    level = "low"
    op_version = 2  # 2: VisBench's protocol name; mae, rmse per image then averaged
    target_kind = "scalar_map"
    protocol = "visbench_keypoint2d_regression"
    correlation = "keypoint_correlation"
    params = dense_params(target_scale=_SCALE)
    metrics = _metrics(correlation, "keypoint map")
    headline = correlation


@register_task(name="corner")
class Corner(_MapTask):
    """Shi-Tomasi corner-response regression from the image (L1); headline corner_correlation."""

    level = "low"
    op_version = 2  # 2: VisBench's protocol name; mae, rmse per image then averaged
    target_kind = "image"
    protocol = "visbench_shi_tomasi_regression"
    correlation = "corner_correlation"
    params = dense_params(
        corner_sigma=Param(1.0, "Gaussian window of the structure tensor, pixels", above=0.0),
    )
    metrics = _metrics(correlation, "Shi-Tomasi response")
    headline = correlation

    def _prepare(self, target: torch.Tensor, params: dict[str, Any], role: str) -> torch.Tensor:
        from ._dense_ops import shi_tomasi

        if target.ndim != 4 or target.shape[1] != 3:
            raise TaskInputError(f"task {self.name!r}: {role} images must be (B, 3, H, W), got "
                                 f"{tuple(target.shape)}")
        return shi_tomasi(super()._prepare(target, params, role), params["corner_sigma"])
