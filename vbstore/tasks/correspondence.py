"""Geometric correspondence, zero-shot: match an image's patches to a warped copy of it.

The protocol is probe3d's homography correspondence (El Banani et al., 2024), as VisBench runs
it: no annotation is needed.

- Each image (view A) is paired with a copy of itself warped by a seeded random homography
  (view B: its corners moved by up to ``max_warp`` of the side; see ``vbstore.data`` warped
  views). The engine derives view B as a dataset of its own, so its features are stored and
  reused like any others.
- The dense features of the last requested layer are L2-normalised. Each patch of A whose true
  position in B lies inside the part of B the backbone saw is a query; its nearest neighbour
  in B is a match when Lowe's ratio test passes: ``d1 / d2 < ratio`` (0.9), ``d`` the L2
  distance of the normalised features (a tie, ``d1 = d2``, fails). With ``mutual`` the A patch
  must also be its match's nearest neighbour in A. At most ``max_matches`` (1000) matches are
  kept per pair, the most distinctive (lowest ratio) first.
- A match's error is in pixels of the original image (view A): the distance from the A
  patch's centre to the B patch's centre taken back through the exact homography. Patch
  centres are mapped through the backbone's own resize and crop.
- ``recall@Tpx`` is the share of matches within T pixels, the matches of every pair pooled
  (probe3d's and VisBench's convention: a pair with more matches weighs more; no match at all
  scores 0); ``auc@10px`` is the area under that recall curve for T in [0, 10], divided by 10
  (the mean of ``max(0, 1 - error / 10)``).
- ``ceiling_*`` are the same figures for the best the patch grid allows: each match's A patch
  paired with the B patch whose centre lands nearest it (the true correspondence snapped to the
  grid), so ``ceiling_recall@T >= recall@T``. They give context (a coarse grid cannot reach
  1 px) and are never ranked. ``num_matches`` is the count of matches over all pairs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from ._base import Metric, Param, Task
from ._errors import TaskInputError
from ._registry import register_task

if TYPE_CHECKING:
    import numpy as np
    import torch

# Local imports: torch, numpy and the matching code load when the probe scores; the task
# registry imports this module on every cached `get`.

THRESHOLDS = (1, 2, 5, 10)  # as _matching's: the declaration must not import numpy
AUC_PX = 10
Geometry = Callable[[int, int], "tuple[tuple[int, int], tuple[int, int, int, int] | None]"]


class FeatureRows(Protocol):
    """Dense feature maps by row: a ``PackSplit`` or a ``TensorSplit``."""

    grid_hw: tuple[int, int]

    def __len__(self) -> int: ...

    def feats(self, positions: list[int]) -> list[torch.Tensor]: ...


@dataclass(frozen=True)
class WarpPairs:
    """What ``correspondence`` scores: each image's features, its view's, and the exact warp.

    Attributes:
        a: Dense features of the images (view A), in manifest order.
        b: Dense features of their warped views (view B), row i warping row i.
        homographies: (N, 3, 3): original pixel coordinates of A -> those of B.
        sizes: (N, 2): each image's (width, height); a view has its image's size.
        geometry: The backbone's resize and crop, ``(w, h) -> ((new_w, new_h), box or None)``.
        input_size: The side of the backbone's square input.
    """

    a: FeatureRows
    b: FeatureRows
    homographies: np.ndarray
    sizes: np.ndarray
    geometry: Geometry
    input_size: int


_METRICS = (
    *(Metric(f"recall@{t}px", "higher", f"share of matches within {t} px of the true "
             "correspondence (pixels of the original image), all pairs' matches pooled")
      for t in THRESHOLDS),
    Metric(f"auc@{AUC_PX}px", "higher", "area under recall@T px for T in [0, 10], over 10"),
    *(Metric(f"ceiling_recall@{t}px", "higher", f"recall@{t}px of the matches snapped to the "
             "patch grid's best cell (context, never ranked)") for t in THRESHOLDS),
    Metric(f"ceiling_auc@{AUC_PX}px", "higher", "auc@10px the patch grid allows (context)"),
    Metric("num_matches", "higher", "matches kept after the ratio test, over all pairs "
                                    "(diagnostic)"),
)


@dataclass(frozen=True)
class KeypointPairs:
    """What ``keypoint_correspondence`` scores: dense features and annotated keypoint pairs.

    Attributes:
        feats: Dense features of the manifest's images, in manifest order.
        pairs: ``[src, trg, src_kps, trg_kps, trg_bndbox]`` per pair: row indices into
            ``feats``, matching lists of ``[x, y]`` pixels, the target's ``[x1, y1, x2, y2]``.
        sizes: (N, 2): each image's (width, height).
        geometry: The backbone's resize and crop, as for :class:`WarpPairs`.
        input_size: The side of the backbone's square input.
    """

    feats: FeatureRows
    pairs: list
    sizes: np.ndarray
    geometry: Geometry
    input_size: int


@register_task(name="correspondence")
class Correspondence(Task):
    """Zero-shot homography correspondence: dense patches matched to a warped view (probe3d)."""

    level = "mid"
    op_version = 1
    shape = "views"
    target_kind = "image"
    stochastic = False
    protocol = "probe3d_homography_correspondence"
    layout = ("any folder of images: a flat folder root[/<split>]/<image>, root/<split>/images/, "
              "an image folder or a list; no annotation (views are warped copies)")
    sample_ci_skip = ("each draw would match every pair again (cost); the metrics are means "
                      "over pairs")
    params = MappingProxyType({
        "warp_seed": Param(0, "seeds every image's random homography (with its content hash)",
                           minimum=0),
        "max_warp": Param(0.2, "largest corner shift, as a fraction of the side", minimum=0.0,
                          maximum=0.45),
        "ratio": Param(0.9, "Lowe's ratio test: keep a match when d1 / d2 < ratio", above=0.0,
                       maximum=1.0),
        "max_matches": Param(1000, "matches kept per pair, lowest ratio first", minimum=1),
        "mutual": Param(False, "also require the A patch to be its match's nearest neighbour"),
    })
    metrics = _METRICS
    headline = "recall@1px"

    def _evaluate_views(self, views: Any, params: dict[str, Any]) -> dict[str, float]:
        if not isinstance(views, WarpPairs):
            raise TaskInputError(f"correspondence scores WarpPairs, got {type(views).__name__}")
        from ._matching import score_pairs

        return score_pairs(views, params)


@register_task(name="keypoint_correspondence")
class KeypointCorrespondence(Task):
    """Zero-shot semantic correspondence on annotated keypoint pairs (SPair-71k): PCK."""

    level = "mid"
    op_version = 1
    shape = "keypoint_views"
    target_kind = "image"
    stochastic = False
    protocol = "spair_pck_bbox"
    layout = ("SPair-71k: root/PairAnnotation/<split>/*.json (src_imname, trg_imname, category, "
              "src_kps, trg_kps, trg_bndbox) and root/JPEGImages/<category>/<image>")
    sample_ci_skip = "each draw would transfer every keypoint again (cost)"
    metrics = (
        Metric("pck@0.1", "higher", "share of source keypoints whose nearest-neighbour patch in "
                                    "the target lands within 0.1 x the target box's longer side"),
        Metric("pck@0.05", "higher", "the same within 0.05 x the box's longer side"),
        Metric("num_keypoints", "higher", "keypoints scored (those inside the source's view; "
                                          "diagnostic)"),
    )
    headline = "pck@0.1"

    def _evaluate_views(self, views: Any, params: dict[str, Any]) -> dict[str, float]:
        from ._matching import score_keypoints

        if not isinstance(views, KeypointPairs):
            raise TaskInputError(f"keypoint_correspondence scores KeypointPairs, got "
                                 f"{type(views).__name__}")
        return score_keypoints(views)
