"""Segmentation probes: ``semantic_segmentation`` (multi-class), ``generic_segmentation`` (binary).

Both follow VisBench's dense probes (upstream ``semantic_segmentation.py`` and
``generic_segmentation.py``) on probe3d's schedule (see :mod:`._dense`). Targets are label maps
read as raw palette indices (a VOC ``SegmentationClass`` PNG gives class indices, 255 on the
object outlines).

``semantic_segmentation``: ``num_classes`` logits per pixel, cross-entropy with ``ignore_index``
(255) left out of the loss *and* the metrics; ``miou`` from one confusion matrix over the split
(the literature's mIoU), ``miou_per_image``, ``pixel_acc``, ``mean_acc``.

``generic_segmentation``: one logit per pixel, foreground = any non-zero label (VisBench's
``load_mask`` rule: a mask stored 0/1 or 0/255 reads the same), with no ignore region unless
``ignore_index`` names one; masked binary cross-entropy (ignored pixels out); a pixel is
predicted foreground when its probability is at least 0.5; ``iou`` of the foreground, ``f1``
(Dice), ``pixel_acc``, each per image then averaged over images (VisBench's reduction). No
class-imbalance correction. op_version 2: per-image metrics and no default ignore region (before:
pooled over the split, 255 ignored by default, so a 0/255 mask was refused).

Head state: the head's ``state_dict`` (``conv.weight`` (K, C, 1, 1), ``conv.bias`` (K,) for
the linear head).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import UsageError, field_ref
from ._base import Metric, Param
from ._dense import DenseTask, dense_params
from ._errors import TaskInputError
from ._registry import register_task

if TYPE_CHECKING:
    import torch

# Local imports: torch and the helpers built on it (_metrics, _linear, _checks, _dense_ops, _text)
# load inside the functions that compute; importing a task only declares it, and a cached result
# reads nothing more.


@register_task(name="semantic_segmentation")
class SemanticSegmentation(DenseTask):
    """Multi-class segmentation probe (cross-entropy, 255 ignored); headline miou."""

    level = "high"
    op_version = 1
    target_kind = "label_map"
    protocol = "visbench_semantic_seg"
    trivial = "the majority class"
    params = dense_params(
        num_classes=Param(0, "number of classes, required (>= 2; 21 for VOC)", minimum=0),
        ignore_index=Param(255, "label left out of the loss and the metrics", minimum=0),
    )
    metrics = (
        Metric("miou", "higher", "mean IoU over classes, from one confusion matrix over the split"),
        Metric("miou_per_image", "higher",
               "mean IoU of each image's classes, averaged over images"),
        Metric("pixel_acc", "higher", "fraction of scored pixels labelled right"),
        Metric("mean_acc", "higher", "per-class pixel recall, averaged over the classes present"),
    )
    headline = "miou"

    def check_data(self, params: dict[str, Any], given: dict[str, Any], data: Any) -> list[str]:
        """Refuse at plan time, before a feature is extracted, what training and scoring would
        refuse after it (vbstore.engine._datachecks): no ``num_classes`` (or one), a label of
        either split outside ``0..num_classes-1`` that is not ``ignore_index``, and train label
        maps of one class (the probe would learn a constant). The fix names the class count
        the labels show."""
        k, ignore = params["num_classes"], params["ignore_index"]
        splits = [(role, split) for role, split in (("train", data.train), ("eval", data.eval))
                  if split is not None]
        if k < 2:
            seen = sorted(set().union(*(split.labels() for _, split in splits)) - {ignore})
            shown = f"the labels run {seen[0]}..{seen[-1]}: " if seen else ""
            count = seen[-1] + 1 if seen and seen[-1] >= 1 else 21
            raise UsageError(
                f"task {self.name!r} needs num_classes >= 2, got {k}",
                hint=f"{shown}pass the class count, e.g. "
                     f"{field_ref('param:num_classes', count)}{'' if seen else ' for VOC'}")
        for role, split in splits:
            scored = split.labels() - {ignore}
            outside = sorted(v for v in scored if v < 0 or v >= k)
            if outside:
                raise UsageError(
                    f"task {self.name!r}: {role} labels hold {outside[-1]}, outside 0..{k - 1} "
                    f"and not ignore_index {ignore} (in {split.holding(outside[-1])})",
                    hint=f"the labels run {min(scored)}..{max(scored)}: "
                         f"{field_ref('param:num_classes', max(scored) + 1)}, or set "
                         "ignore_index (an RGB label image is not "
                         "a label map: read the PNG as palette indices)")
        if data.train is not None and len(data.train.labels() - {ignore}) < 2:
            only = sorted(data.train.labels() - {ignore})
            raise UsageError(
                f"task {self.name!r}: every scored train pixel is class "
                f"{only[0] if only else 'none'}, so the probe would learn a constant",
                hint="train on label maps that hold at least two classes")
        return []

    def _outputs(self, params: dict[str, Any]) -> int:
        if params["num_classes"] < 2:
            raise UsageError(
                f"task {self.name!r} needs num_classes >= 2, got {params['num_classes']}",
                hint=f"pass the class count, e.g. {field_ref('param:num_classes', '21')} for VOC",
            )
        return params["num_classes"]

    def _prepare(self, target: torch.Tensor, params: dict[str, Any], role: str) -> torch.Tensor:
        import torch


        if target.is_floating_point():
            raise TaskInputError(f"{role} label maps must be integers, got {target.dtype}")
        target = target.to(torch.int64)
        scored = target[target != params["ignore_index"]]
        k = params["num_classes"]
        if len(scored) and (int(scored.min()) < 0 or int(scored.max()) >= k):
            bad = int(scored.max()) if int(scored.max()) >= k else int(scored.min())
            raise TaskInputError(
                f"task {self.name!r}: {role} labels hold {bad}, outside 0..{k - 1}"
                f" and not ignore_index {params['ignore_index']}",
                hint="raise num_classes, set ignore_index, or read the PNG as palette indices "
                     "(an RGB label image is not a label map)",
            )
        return target

    def _loss(self, pred: torch.Tensor, target: torch.Tensor, params: dict[str, Any]
              ) -> torch.Tensor | None:
        import torch.nn.functional as F

        if not (target != params["ignore_index"]).any():
            return None
        return F.cross_entropy(pred, target, ignore_index=params["ignore_index"])

    def _scorer(self, params: dict[str, Any]) -> Any:
        from ._dense_ops import SegmentationScorer

        return SegmentationScorer(self.name, self._outputs(params), params["ignore_index"])

    def _scorer_bytes(self, params: dict[str, Any]) -> int:
        # the split's confusion matrix, an image's, and their float64 copies: k x k each
        return 32 * params["num_classes"] ** 2

    def _trivial_sum(self, target: torch.Tensor, params: dict[str, Any]) -> torch.Tensor:
        import torch

        scored = target[target != params["ignore_index"]]
        return torch.bincount(scored, minlength=params["num_classes"]).to(torch.float64)

    def _trivial_predict(self, total: torch.Tensor | None, target: torch.Tensor,
                         params: dict[str, Any]) -> torch.Tensor:
        import torch

        assert total is not None  # _trivial_sum above returns a tensor for every batch
        logits = torch.zeros(len(target), params["num_classes"], *target.shape[-2:])
        logits[:, int(total.argmax())] = 1.0
        return logits


@register_task(name="generic_segmentation")
class GenericSegmentation(DenseTask):
    """Binary (foreground) segmentation probe (masked BCE, threshold 0.5); headline iou."""

    level = "mid"
    # 2: per-image metrics averaged over images; non-zero is foreground, no ignore by default
    op_version = 2
    target_kind = "label_map"
    protocol = "visbench_binary_seg"
    trivial = "the majority label (foreground or background)"
    params = dense_params(
        ignore_index=Param(-1, "label left out of the loss and the metrics (-1: none, every "
                           "non-zero label is foreground)", minimum=-1),
    )
    metrics = (
        Metric("iou", "higher", "intersection over union of an image's foreground, averaged "
               "over images"),
        Metric("f1", "higher", "F1 (Dice) of an image's foreground, averaged over images"),
        Metric("pixel_acc", "higher", "fraction of an image's scored pixels labelled right, "
               "averaged over images"),
    )
    headline = "iou"

    def _outputs(self, params: dict[str, Any]) -> int:
        return 1

    def _prepare(self, target: torch.Tensor, params: dict[str, Any], role: str) -> torch.Tensor:
        import torch


        if target.is_floating_point():
            raise TaskInputError(f"{role} masks must be integer label maps, got {target.dtype}")
        target = target.to(torch.int64)
        out = (target != 0).to(torch.int64)
        return torch.where(target == params["ignore_index"], torch.full_like(out, -1), out)

    def _loss(self, pred: torch.Tensor, target: torch.Tensor, params: dict[str, Any]
              ) -> torch.Tensor | None:
        import torch.nn.functional as F

        valid = target >= 0
        if not valid.any():
            return None
        return F.binary_cross_entropy_with_logits(pred[:, 0][valid], target[valid].float())

    def check_data(self, params: dict[str, Any], given: dict[str, Any], data: Any) -> list[str]:
        """Refuse, at plan time (before a feature is extracted or anything stored), train masks
        with no foreground: all zero, or every non-zero label ``ignore_index`` (a 0/255 mask
        read with ignore_index=255 has no foreground left to learn), which training would
        refuse after extraction (vbstore.engine._datachecks)."""
        ignore, train = params["ignore_index"], data.train
        if train is None or train.labels() - {0, ignore}:
            return []
        if ignore < 0 or ignore not in train.labels():
            raise UsageError(
                f"task {self.name!r}: every train label is 0, so no pixel is foreground",
                hint="train on masks that mark a foreground (any non-zero label)")
        raise UsageError(
            f"task {self.name!r}: every non-zero train label is ignore_index {ignore}, so no "
            "pixel is foreground",
            hint=f"masks stored as 0/{ignore} mark the foreground {ignore}: leave ignore_index "
                 "unset (non-zero is foreground)")

    def _no_signal(self, target: torch.Tensor, params: dict[str, Any]) -> str | None:
        if (target == 1).any():
            return None
        return (f"no train pixel is foreground (labels other than 0 and ignore_index "
                f"{params['ignore_index']})")

    def _scorer(self, params: dict[str, Any]) -> Any:
        from ._dense_ops import BinaryScorer

        return BinaryScorer(self.name)

    def _trivial_sum(self, target: torch.Tensor, params: dict[str, Any]) -> torch.Tensor:
        import torch

        return torch.tensor([float((target == 0).sum()), float((target == 1).sum())],
                            dtype=torch.float64)

    def _trivial_predict(self, total: torch.Tensor | None, target: torch.Tensor,
                         params: dict[str, Any]) -> torch.Tensor:
        import torch

        assert total is not None  # _trivial_sum above returns a tensor for every batch
        logit = 1.0 if total[1] > total[0] else -1.0
        return torch.full((len(target), 1, *target.shape[-2:]), logit)
