"""Multi-label linear probe: one sigmoid per label, trained with binary cross-entropy.

The multi-label counterpart of :mod:`.classification` (VOC07 / COCO / NUS-WIDE style linear
evaluation), with the same recipe and parameters (:mod:`._linear`): standardised features,
AdamW with cosine decay, seeded init and shuffling. Targets are multi-hot (N, K) 0/1.

``mean_average_precision`` is the macro average over labels of scikit-learn-style
(non-interpolated) average precision, each label ranking the eval images by its score. A label
with no positive eval image has no AP and is left out; if no label has one, the metric is
undefined and the task says so. (CLIP_benchmark averages over every label instead, counting a
label without positives as 0.)

Head state: ``weight`` (K, C), ``bias`` (K,), ``mean`` (C,), ``std`` (C,), float32.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._base import HeadState, Metric
from ._errors import TaskInputError, UndefinedMetric
from ._registry import register_task
from ._shape_pooled import PooledTask
from .classification import LINEAR_PARAMS

if TYPE_CHECKING:
    import numpy as np

# Local imports: numpy and the helpers built on it (_linear, _arrays) load inside the functions
# that compute; importing a task only declares it, and a cached result reads nothing more.


def macro_average_precision(scores: Any, targets: Any) -> float | None:
    """Mean AP over the labels with a positive; ``None`` when no label has one. numpy arrays
    (the probe's scores) are ranked by ``._arrays``; torch tensors (the zero-shot multi-label
    task's) by ``._metrics``."""
    if not hasattr(scores, "detach"):
        from ._arrays import macro_average_precision as in_numpy

        return in_numpy(scores, targets)
    from ._metrics import average_precision

    present = targets.sum(dim=0) > 0
    if not present.any():
        return None
    ap = average_precision(scores[:, present].T.contiguous(), targets[:, present].T.contiguous())
    return float(ap.mean())


@register_task(name="multilabel")
class MultiLabel(PooledTask):
    """Linear probe with per-label sigmoids; metric mean_average_precision."""

    level = "high"
    op_version = 2  # 2: the recipe in numpy (._linear: its own draws and float32 arithmetic)
    array = "numpy"  # trained and scored on the stored rows without torch
    target_kind = "multi_hot"
    shape = "pooled"
    stochastic = True
    params = LINEAR_PARAMS
    metrics = (Metric("mean_average_precision", "higher", "macro AP over labels with a positive"),)
    train_metrics = (
        Metric("train_mean_average_precision", "higher", "mAP on the train split; low: underfit"),
        Metric("train_loss", "lower", "mean binary cross-entropy on the train split"),
    )
    headline = "mean_average_precision"
    finetune_loss = "binary_cross_entropy"

    def _fit(
        self,
        feats: Any,
        targets: np.ndarray,
        params: dict[str, Any],
        seed: int,
        class_names: list[str] | None,
    ) -> tuple[HeadState, dict[str, float]]:
        from . import _linear

        head, loss = _linear.train(
            feats,
            targets,
            n_out=targets.shape[1],
            loss="binary_cross_entropy",
            seed=seed,
            task=self.name,
            **params,
        )
        train_map = macro_average_precision(_linear.logits(head, feats), targets)
        if train_map is None:
            raise UndefinedMetric(
                self.name, "train_mean_average_precision", "no label has a positive train image"
            )
        return head, {"train_mean_average_precision": train_map, "train_loss": loss}

    def _evaluate(
        self, head: HeadState, feats: Any, targets: np.ndarray, params: dict[str, Any]
    ) -> dict[str, float]:
        from . import _linear

        head = _linear.check_head(head, self.name, feats.shape[1])
        n_labels = head["weight"].shape[0]
        if n_labels != targets.shape[1]:
            raise TaskInputError(
                f"eval targets have {targets.shape[1]} labels; the head has {n_labels}",
                hint="evaluate on data with the head's label set",
            )
        value = macro_average_precision(_linear.logits(head, feats), targets)
        if value is None:
            raise UndefinedMetric(
                self.name, "mean_average_precision", "no label has a positive eval image"
            )
        return {"mean_average_precision": value}
