"""Box probes on the patch grid: ``detection`` and ``instance_segmentation``.

``detection`` is VisBench's single-scale, anchor-free reading of FCOS (Tian et al., 2019) on a
frozen backbone (the machinery and its constants: :mod:`._boxes`): the dense recipe's head
(:mod:`._dense`; ``linear`` = two 1x1-conv branches in one conv, class logits and four
log-distances per cell, class biases starting at the focal-loss prior 0.01) trained with sigmoid
focal loss (alpha 0.25, gamma 2) + 2 x GIoU loss
on probe3d's schedule; decoding keeps cells scoring >= ``score_threshold`` (0.05), per-class NMS
at IoU ``nms_iou`` (0.5), at most ``max_detections`` (100) per image. Boxes marked
``difficult`` are left out of training and ignored when scoring.

``instance_segmentation`` adds one foreground map per class to the same head (C more 1x1-conv
outputs on the same features): the mask of a kept box is its class's map, upsampled bilinearly
to the input, above probability 0.5, inside the box. The maps learn by binary cross-entropy
against, per class, the union of that class's instance masks, over the pixels inside that
class's ground-truth boxes (where the map is read).

Metrics: ``map_50`` (VOC all-point AP at IoU 0.5, averaged over classes with a non-difficult
box), ``map_50_95`` (pycocotools' COCO AP over IoU 0.5:0.95), ``classes_scored`` (a guard: two
runs compare only when it agrees), ``detections_per_image``; instance segmentation adds
``mask_map_50`` and ``mask_map_50_95`` (pycocotools ``segm``: AP at IoU 0.5 and over 0.5:0.95).

``min_box_size`` (VisBench's ``--min-box-size``; added later, so 0 is in no key) drops target
boxes narrower or shorter than that many pixels of the backbone's input, after its resize and
crop, from training and scoring alike; 0 keeps every box the crop leaves with area (VisBench's
default is 1).

``num_classes`` 0 (the default) takes the train split's class list; the head's own outputs say
it when a head is evaluated. Head state: the dense head's ``state_dict`` with C + 4 outputs
(class logits, then left, top, right, bottom), plus C mask logits for instance segmentation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from ..errors import UsageError, field_ref
from ._base import HeadState, Metric, Param, TargetKind
from ._dense import DenseTask, dense_params
from ._errors import TaskInputError
from ._registry import register_task

if TYPE_CHECKING:
    import torch

    from ._split import DenseSplit

# Local imports: torch and the box machinery load when the probe trains or scores; the task
# registry imports this module on every cached `get`.


class GridOutput(NamedTuple):
    """What the detection head predicts for a batch: its raw grid and the input size the grid
    decodes against (strides and clipping)."""

    raw: torch.Tensor
    image_hw: tuple[int, int]


BOX_METRICS = (
    Metric("map_50", "higher", "VOC all-point AP at IoU 0.5, mean over classes with a box"),
    Metric("map_50_95", "higher", "COCO AP over IoU 0.5:0.95 (pycocotools)"),
    Metric("classes_scored", "higher",
           "classes with a non-difficult eval box (a guard: compare runs only when equal)"),
    Metric("detections_per_image", "higher", "mean detections kept per image (diagnostic)"),
)


@register_task(name="detection")
class Detection(DenseTask):
    """Anchor-free single-scale detection probe (FCOS on the patch grid); headline map_50."""

    level = "high"
    op_version = 2  # 2: VisBench's protocol name (fcos_patch_grid before); the numbers as before
    shape = "boxes"
    target_kind: ClassVar[TargetKind] = "boxes"
    protocol = "visbench_anchor_free_det"
    trivial = "one fixed box per class (its mean box), scored by the class's frequency"
    params = dense_params(
        num_classes=Param(0, "number of classes; 0: the train split's class list", minimum=0),
        # the targets, training and scoring alike; added after results were stored
        min_box_size=Param(0.0, "drop target boxes narrower or shorter than this, in pixels of "
                           "the backbone's input after the crop (VisBench's default: 1)",
                           minimum=0.0, added=True),
        # decoding: evaluation only (a head does not depend on it); added after results were stored
        score_threshold=Param(0.05, "decoding: keep (cell, class) scores >= this", minimum=0.0,
                              maximum=1.0, added=True, scoring=True),
        nms_iou=Param(0.5, "decoding: per-class NMS IoU", minimum=0.0, maximum=1.0, added=True,
                      scoring=True),
        max_detections=Param(100, "decoding: detections kept per image", minimum=1, added=True,
                             scoring=True),
    )
    metrics: ClassVar[tuple[Metric, ...]] = BOX_METRICS
    headline = "map_50"
    _masks = False

    # the number of classes: from the class list when training, from the head when scoring

    def _with_classes(self, params: dict[str, Any], n: int | None, where: str) -> dict[str, Any]:
        if params["num_classes"] == 0:
            if not n:
                raise UsageError(f"task {self.name!r} found no class list in {where}",
                                 hint=f"pass {field_ref('param:num_classes', 'N')}")
            params = {**params, "num_classes": n}
        return params

    def _head_classes(self, head: HeadState) -> int:
        # the output layer of the dense heads: linear's conv, dpt's last conv (a stored head's
        # keys come back sorted, so it is found by name)
        bias = head.get("conv.bias", head.get("out.2.bias"))
        outputs = int(bias.shape[0]) if bias is not None else 0
        return (outputs - 4) // (2 if self._masks else 1)

    def check_map_grid(self, result: str) -> None:
        raise UsageError(f"result {result} is a {self.name} result: its predictions "
                         "are boxes, not maps, and cannot be drawn as a map grid",
                         hint="read them with task.predict_split (boxes per image)")

    def _fit_split(self, train: DenseSplit, params: dict[str, Any], seed: int,
                   class_names: list[str] | None) -> tuple[HeadState, dict[str, float]]:
        params = self._with_classes(params, len(class_names or []), "the train data")
        return super()._fit_split(train, params, seed, class_names)

    def _evaluate_split(self, head: HeadState | None, split: DenseSplit,
                        params: dict[str, Any]) -> dict[str, float]:
        assert head is not None  # a dense task trains a head, so evaluate always passes one
        params = self._with_classes(params, self._head_classes(head), "the head")
        return super()._evaluate_split(head, split, params)

    def predict_split(self, head_state: HeadState, split: DenseSplit,
                      params: Mapping[str, Any] | None = None, limit: int | None = None
                      ) -> list[tuple[int, torch.Tensor, torch.Tensor]]:
        """Decoded detections on the first ``limit`` rows: (row, ground truth (n, 6),
        detections (k, 6) ``x0, y0, x1, y1, score, class``) each.

        Raises:
            UsageError: a bad param or limit.
            TaskInputError: a split or head that does not fit.
        """
        from . import _boxes, _checks, _dense_train

        self._check_split(split, "eval", trained=True)
        params = self._with_classes(self.resolve_params(params),
                                    self._head_classes(head_state), "the head")
        if limit is not None and limit < 1:
            raise UsageError(f"limit must be at least 1, got {limit}")
        rows = len(split) if limit is None else min(limit, len(split))
        out: list[tuple[int, torch.Tensor, torch.Tensor]] = []
        c = params["num_classes"]
        for index, target, pred in _dense_train.predictions(
                self, _checks.head_in(head_state), split, params, min(rows, 64)):
            assert isinstance(pred, GridOutput)  # what _predict below returns
            found = _boxes.detect(pred.raw[:, :c + 4], pred.image_hw, *_decoding(params))
            out.extend((i, t[:, :6], d) for i, t, d in zip(index.tolist(), target, found,
                                                           strict=True))
            if len(out) >= rows:
                break
        return out[:rows]

    def baseline_split(self, split: DenseSplit, params: Mapping[str, Any] | None = None
                       ) -> dict[str, float]:
        """The metrics of the trivial predictor (see :class:`DenseTask`); ``num_classes`` 0
        counts the classes in the split's boxes."""
        params = self.resolve_params(params)
        if params["num_classes"] == 0:
            top = max((int(b.target[..., 4].max()) for b in split.batches(64)
                       if b.target.numel()), default=-1)
            params = {**params, "num_classes": top + 1}
        return super().baseline_split(split, params)

    # the hooks

    def _outputs(self, params: dict[str, Any]) -> int:
        c = params["num_classes"]
        if c < 1:
            raise UsageError(f"task {self.name!r} needs num_classes >= 1, got {c}",
                             hint=f"pass {field_ref('param:num_classes', 'N')}, or train on "
                                  "data with a class list")
        return 2 * c + 4 if self._masks else c + 4

    # box targets come as lists of per-image rows, and predictions as a grid plus its size:
    # the recipe passes both through to this task's own loss and scorer untouched
    def _init_head(self, output: torch.nn.Conv2d, params: dict[str, Any]) -> None:
        """FCOS's prior: class biases start at -log((1 - 0.01) / 0.01), so every cell starts as
        background with probability 0.99 (focal loss's initialisation)."""
        import torch

        from . import _boxes

        assert output.bias is not None  # the dense heads' output convs have a bias
        with torch.no_grad():
            output.bias[:params["num_classes"]] = -math.log((1 - _boxes.PRIOR) / _boxes.PRIOR)

    def _prepare(self, target: torch.Tensor, params: dict[str, Any], role: str  # type: ignore[override]
                 ) -> list[torch.Tensor]:
        out = []
        c = params["num_classes"]
        smallest = params.get("min_box_size", 0.0)
        for rows in target:
            rows = rows[rows[:, 4] >= 0]  # padding rows are -1
            if smallest > 0:  # VisBench's rule: both sides at least the size
                rows = rows[((rows[:, 2] - rows[:, 0]) >= smallest)
                            & ((rows[:, 3] - rows[:, 1]) >= smallest)]
            if len(rows) and int(rows[:, 4].max()) >= c:
                raise TaskInputError(
                    f"task {self.name!r}: {role} boxes have class {int(rows[:, 4].max())}, "
                    f"outside 0..{c - 1}",
                    hint="train and evaluate with one class list (classes.txt or "
                         f"{field_ref('classes')})")
            out.append(rows)
        return out

    def _predict(self, raw: torch.Tensor, size: tuple[int, int],  # type: ignore[override]
                 params: dict[str, Any]) -> GridOutput:
        return GridOutput(raw, tuple(size))  # type: ignore[arg-type]  # (h, w)

    def _loss(self, pred: GridOutput, target: list[torch.Tensor],  # type: ignore[override]
              params: dict[str, Any]) -> torch.Tensor:
        from . import _boxes

        c = params["num_classes"]
        learn = [t[t[:, 5] == 0] for t in target]  # difficult boxes: not taught
        loss = _boxes.detection_loss(pred.raw[:, :c + 4], [t[:, :6] for t in learn],
                                     pred.image_hw)
        if self._masks:
            loss = loss + _mask_loss(pred, learn, c)
        return loss

    def _no_signal(self, target: list[torch.Tensor], params: dict[str, Any]  # type: ignore[override]
                   ) -> str | None:
        if any((t[:, 5] == 0).any() for t in target):
            return None
        return "no train image has a (non-difficult) box left after the backbone's crop"

    def _scorer(self, params: dict[str, Any]) -> Any:
        from . import _boxes

        return _Scorer(_boxes.DetectionScorer(self.name, params["num_classes"], self._masks),
                       params["num_classes"], _decoding(params))

    def _trivial_sum(self, target: list[torch.Tensor], params: dict[str, Any]  # type: ignore[override]
                     ) -> torch.Tensor:
        import torch

        total = torch.zeros(params["num_classes"], 5, dtype=torch.float64)
        for rows in target:
            rows = rows[rows[:, 5] == 0].double()
            total.index_add_(0, rows[:, 4].long(),
                             torch.cat([rows[:, :4], torch.ones(len(rows), 1,
                                                                dtype=torch.float64)], 1))
        return total

    def _trivial_predict(self, total: torch.Tensor | None, target: list[torch.Tensor],  # type: ignore[override]
                         params: dict[str, Any]) -> list[torch.Tensor]:
        import torch

        assert total is not None  # _trivial_sum above returns a tensor for every batch
        present = total[:, 4] > 0
        classes = present.nonzero()[:, 0]
        boxes = total[classes, :4] / total[classes, 4:5]
        scores = total[classes, 4] / total[:, 4].sum()
        fixed = torch.cat([boxes, scores[:, None], classes[:, None].double()], 1).float()
        return [fixed.clone() for _ in target]


class _Scorer:
    """The task's scorer: decodes a batch (grid output or ready detections) into the split's
    :class:`._boxes.DetectionScorer`."""

    def __init__(self, inner: Any, n_classes: int, decoding: tuple[float, float, int]) -> None:
        self.inner, self.c, self.decoding = inner, n_classes, decoding

    def update(self, pred: GridOutput | list[torch.Tensor], target: list[torch.Tensor]) -> None:
        from . import _boxes

        if isinstance(pred, GridOutput):
            image_hw = pred.image_hw
            found = _boxes.detect(pred.raw[:, :self.c + 4], image_hw, *self.decoding)
            masks: list[torch.Tensor | None] = ([_boxes.box_masks(m[self.c + 4:], d, image_hw)
                      for m, d in zip(pred.raw, found, strict=True)]
                     if self.inner.masks else [None] * len(found))
        else:  # the trivial predictor: fixed boxes, each mask the whole box
            side = math.isqrt(target[0].shape[1] - 6) if self.inner.masks else 0
            if side * side != target[0].shape[1] - 6:
                raise TaskInputError("the trivial mask predictor reads square inputs only",
                                     hint="the engine's inputs are square; pad a TensorSplit")
            image_hw = (side, side)
            found = pred
            masks = [_box_fill(d, image_hw) if self.inner.masks else None for d in found]
        for d, t, m in zip(found, target, masks, strict=True):
            self.inner.add(d, t, m, image_hw)

    def result(self) -> dict[str, float]:
        return self.inner.result()


def _decoding(params: Mapping[str, Any]) -> tuple[float, float, int]:
    """The decode settings: score threshold, NMS IoU, detections per image (the declared
    defaults where ``params`` is not resolved)."""
    declared = Detection.params
    return (params.get("score_threshold", declared["score_threshold"].default),
            params.get("nms_iou", declared["nms_iou"].default),
            params.get("max_detections", declared["max_detections"].default))  # type: ignore[return-value]


def _box_fill(detections: torch.Tensor, image_hw: tuple[int, int]) -> torch.Tensor:
    import torch

    height, width = image_hw
    ys = torch.arange(height)[None, :, None] + 0.5
    xs = torch.arange(width)[None, None, :] + 0.5
    b = detections[:, :4, None, None]
    return (xs > b[:, 0]) & (xs < b[:, 2]) & (ys > b[:, 1]) & (ys < b[:, 3])


def _mask_loss(pred: GridOutput, target: list[torch.Tensor], c: int) -> torch.Tensor:
    """BCE of each class's foreground map (upsampled to the input) against the union of that
    class's instance masks, over the pixels inside that class's boxes only: where the map is
    read at scoring (as Mask R-CNN scores a mask inside its box), and where foreground and
    background are balanced enough for the 0.5 threshold to mean something."""
    import torch
    import torch.nn.functional as F

    height, width = pred.image_hw
    logits = F.interpolate(pred.raw[:, c + 4:], size=pred.image_hw, mode="bilinear",
                           align_corners=False)
    union = torch.zeros_like(logits)
    inside = torch.zeros_like(logits)
    ys = torch.arange(height, device=logits.device)[:, None] + 0.5
    xs = torch.arange(width, device=logits.device)[None, :] + 0.5
    for i, rows in enumerate(target):
        for row in rows:
            cls = int(row[4])
            mask = row[6:].reshape(height, width).to(union)
            box = (xs > row[0]) & (xs < row[2]) & (ys > row[1]) & (ys < row[3])
            union[i, cls] = torch.maximum(union[i, cls], mask)
            inside[i, cls] = torch.maximum(inside[i, cls], box.to(inside))
    if not inside.any():
        return logits.sum() * 0.0
    loss = F.binary_cross_entropy_with_logits(logits, union, reduction="none")
    return (loss * inside).sum() / inside.sum()


@register_task(name="instance_segmentation")
class InstanceSegmentation(Detection):
    """Detection plus a mask per kept box from a per-class foreground map; headline
    mask_map_50."""

    op_version = 1
    target_kind = "instances"
    # not VisBench's visbench_anchor_free_instance (one class-agnostic mask conv on RoIAligned
    # features): per-class foreground maps read inside each box, so its own name
    protocol = "fcos_patch_grid_class_masks"
    trivial = ("one fixed box per class (its mean box, the whole box as its mask), scored by "
               "the class's frequency")
    metrics = (
        Metric("mask_map_50", "higher", "COCO mask AP at IoU 0.5 (pycocotools segm)"),
        Metric("mask_map_50_95", "higher", "COCO mask AP over IoU 0.5:0.95 (pycocotools segm)"),
        *BOX_METRICS,
    )
    headline = "mask_map_50"
    _masks = True
