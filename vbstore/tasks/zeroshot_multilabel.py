"""Zero-shot multi-label classification for CLIP models (CLIP_benchmark's ``voc2007_multilabel``).

Each class gets the prompt-ensemble embedding of :mod:`.zeroshot_classification` (same
``language``, ``templates`` and ``classnames`` parameters); each image
scores every class by cosine similarity, and each label ranks the eval images by its score.
``mean_average_precision`` is the macro average over labels of non-interpolated average
precision (scikit-learn's definition), the metric name CLIP_benchmark writes. As in the
trained :mod:`.multilabel` task, a label with no positive eval image has no AP and is left out
(CLIP_benchmark counts it as 0); if no label has one, the metric is undefined and the task says
so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._base import Metric
from ._errors import TaskInputError, UndefinedMetric
from ._prompts import PROMPT_PARAMS, Multilingual
from ._registry import register_task

if TYPE_CHECKING:
    import torch

# Local imports: torch and the helpers built on it (_metrics, _linear, _checks, _dense_ops, _text)
# load inside the functions that compute; importing a task only declares it, and a cached result
# reads nothing more.


@register_task(name="zeroshot_multilabel")
class ZeroShotMultiLabel(Multilingual):
    """CLIP zero-shot multi-label classification from class prompts; mean_average_precision."""

    level = "high"
    op_version = 1
    target_kind = "multi_hot"
    shape = "text"
    stochastic = False
    params = PROMPT_PARAMS
    metrics = (
        Metric("mean_average_precision", "higher",
               "macro AP over labels with a positive, images ranked by prompt similarity"),
    )
    headline = "mean_average_precision"

    def _evaluate_zero_shot(
        self,
        feats: torch.Tensor,
        targets: torch.Tensor,
        params: dict[str, Any],
        context: dict[str, Any],
    ) -> dict[str, float]:
        from ._checks import context_class_names
        from ._metrics import l2_normalise
        from .multilabel import macro_average_precision
        from .zeroshot_classification import text_classifier

        names = context_class_names(
            self.name, context, "evaluate on a multi-label manifest (a list with a labels column)")
        if targets.ndim != 2 or targets.shape[1] != len(names):
            raise TaskInputError(
                f"eval targets must be multi-hot (N, {len(names)}), got {tuple(targets.shape)}"
            )
        text = text_classifier(params, context, names, feats.shape[1], feats.device)
        value = macro_average_precision(l2_normalise(feats) @ text.T, targets)
        if value is None:
            raise UndefinedMetric(
                self.name, "mean_average_precision", "no label has a positive eval image"
            )
        return {"mean_average_precision": value}
