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
  scores 0); ``auc@Tpx`` is the area under that recall curve over [0, T], divided by T, at
  every threshold, as VisBench computes it (probe3d's convention): the curve runs straight from
  (0, 0) through each error at the recall it reaches, not in steps. op_version 2; op_version 1
  integrated the step curve (the mean of ``max(0, 1 - error / T)``, lower by ``e / (2 n T)``,
  ``e`` the largest error within T, ``n`` the matches) and only at the largest threshold.
- ``units`` and ``thresholds`` are VisBench's: ``units="patch"`` measures each error in the
  backbone's patch spacing (in pixels of the original image, the mean of the two axes' spacing),
  thresholds default to 0.5, 1, 2, 4 patch widths then, and the names end in ``p``
  (``recall@0.5p``); ``thresholds`` (ascending, written ``%g``) replace the unit's defaults, and
  the metric names follow them (``recall@3px``). The headline is the recall at the smallest
  threshold. Patch units answer "how close, for what this grid resolves": one backbone against
  itself, never a ranking of two.
- ``ceiling_*`` are the same figures for the best the patch grid allows: each match's A patch
  paired with the B patch whose centre lands nearest it (the true correspondence snapped to the
  grid), so ``ceiling_recall@T >= recall@T``. They give context (a coarse grid cannot reach
  1 px) and are never ranked. ``num_matches`` is the count of matches over all pairs.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ._base import Metric, Param
from ._errors import TaskInputError
from ._registry import register_task
from ._shape_views import KeypointViewsTask, ViewsTask
from ._view_pairs import (
    DEFAULT_THRESHOLDS,
    THRESHOLDS,
    UNITS,
    KeypointPairs,
    WarpPairs,
    name_of,
    parse_thresholds,
    thresholds_of,
)

# Local imports: torch, numpy and the matching code load when the probe scores; the task
# registry imports this module on every cached `get`.


def correspondence_metrics(thresholds: tuple[float, ...], unit: str) -> tuple[Metric, ...]:
    """The metrics scored at ``thresholds`` in ``unit`` (``px`` or ``p``)."""
    words = "px" if unit == "px" else "patch widths"
    where = ("pixels of the original image" if unit == "px"
             else "the backbone's patch spacing in the original image")
    return (
        *(Metric(f"recall@{name_of(t, unit)}", "higher", f"share of matches within {t:g} "
                 f"{words} of the true correspondence ({where}), all pairs' matches pooled")
          for t in thresholds),
        *(Metric(f"auc@{name_of(t, unit)}", "higher", f"area under the recall curve (straight "
                 f"between errors) over [0, {t:g}] {words}, over {t:g}") for t in thresholds),
        *(Metric(f"ceiling_recall@{name_of(t, unit)}", "higher", f"recall@{name_of(t, unit)} "
                 "of the matches snapped to the patch grid's best cell (context, never ranked)")
          for t in thresholds),
        *(Metric(f"ceiling_auc@{name_of(t, unit)}", "higher", f"auc@{name_of(t, unit)} the "
                 "patch grid allows (context)") for t in thresholds),
        Metric("num_matches", "higher", "matches kept after the ratio test, over all pairs "
                                        "(diagnostic)"),
    )


_METRICS = correspondence_metrics(tuple(float(t) for t in THRESHOLDS), "px")


@register_task(name="correspondence")
class Correspondence(ViewsTask):
    """Zero-shot homography correspondence: dense patches matched to a warped view (probe3d)."""

    level = "mid"
    op_version = 2  # VisBench's auc@T, at every threshold (1: the step curve's, at the largest)
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
        "units": Param("pixel", "unit of the errors and thresholds: pixel (of the original "
                       "image) or patch (this backbone's patch spacing: one backbone against "
                       "itself, never to rank two)", choices=tuple(UNITS), added=True),
        "thresholds": Param("", "error thresholds, e.g. 1,2,5,10 (default: 1,2,5,10 pixels, or "
                            "0.5,1,2,4 patch widths); they name the metrics", added=True),
    })
    metrics = _METRICS
    headline = "recall@1px"

    def resolve_params(self, user_params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """See :meth:`Task.resolve_params`; ``thresholds`` in canonical form, ``""`` when they
        are the unit's defaults (the same question as leaving them out, the same id).

        Raises:
            UsageError: also a threshold that is not a number > 0, or is given twice.
        """
        given = dict(user_params or {})
        if "thresholds" in given:
            given["thresholds"] = parse_thresholds(given["thresholds"])
        params = super().resolve_params(given)
        units = params["units"]
        if params["thresholds"] and thresholds_of(params)[0] == tuple(
                float(t) for t in DEFAULT_THRESHOLDS[units]):
            params["thresholds"] = ""
        return params

    def metrics_for(self, params: Mapping[str, Any] | None = None) -> tuple[Metric, ...]:
        """The metrics ``units`` and ``thresholds`` name (the defaults: :attr:`metrics`)."""
        return correspondence_metrics(*thresholds_of(params or {}))

    def headline_for(self, params: Mapping[str, Any] | None = None) -> str:
        """The recall at the smallest threshold (the defaults: ``recall@1px``)."""
        thresholds, unit = thresholds_of(params or {})
        return f"recall@{name_of(min(thresholds), unit)}"

    def _evaluate_views(self, views: Any, params: dict[str, Any]) -> dict[str, float]:
        if not isinstance(views, WarpPairs):
            raise TaskInputError(f"correspondence scores WarpPairs, got {type(views).__name__}")
        from ._matching import score_pairs

        return score_pairs(views, params)


@register_task(name="keypoint_correspondence")
class KeypointCorrespondence(KeypointViewsTask):
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
