"""The base of the shapes scored on image pairs with no training: ``views`` (each image
against a warped copy the engine derives) and ``keypoint_views`` (annotated keypoint pairs).

The engine calls ``task.evaluate_views(views, params)``; a task implements ``_evaluate_views``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._base import Task, unimplemented

# Local imports: _checks (torch) loads inside the call; importing a task only declares it.


class ViewsTask(Task):
    """Base of a task scored on each image against a warped copy (shape ``views``)."""

    shape = "views"

    def evaluate_views(self, views: Any, params: Mapping[str, Any] | None = None
                       ) -> dict[str, float]:
        """Score image pairs: for ``homography`` views a :class:`vbstore.tasks.WarpPairs`
        (each image's features, its warped copy's, the exact warp), for ``keypoints`` a
        :class:`vbstore.tasks.KeypointPairs`.

        Raises:
            UsageError: a bad param.
            TaskInputError: views that do not fit.
            UndefinedMetric: a metric would be NaN (the message names why).
        """
        from . import _checks

        params = self.resolve_params(params)
        return _checks.metrics_out(self, self._evaluate_views(views, params),
                                   self.metrics_for(params))

    @unimplemented
    def _evaluate_views(self, views: Any, params: dict[str, Any]) -> dict[str, float]:
        raise NotImplementedError(f"task {self.name!r} scores no derived views")


class KeypointViewsTask(ViewsTask):
    """Base of a task scored on annotated keypoint pairs (shape ``keypoint_views``)."""

    shape = "keypoint_views"
