"""Box machinery of the anchor-free detection probe: assignment, losses, decoding, AP.

The protocol is VisBench's single-scale reading of FCOS (Tian et al., 2019) on a frozen patch
grid:

- a grid cell is assigned to a box when its centre falls strictly inside it, the box of
  smallest area winning where boxes overlap; unassigned cells are background;
- the head gives, per cell, one logit per class and four log-distances (left, top, right,
  bottom) in units of the cell's stride; class biases start at the focal-loss prior
  -log((1 - 0.01) / 0.01);
- loss: sigmoid focal loss (alpha 0.25, gamma 2) summed over every cell and class, plus 2 x the
  GIoU loss of the positive cells, both divided by the number of positive cells (at least 1);
- decoding: every (cell, class) scoring >= 0.05, per-class NMS at IoU 0.5, the 100 best kept.

Boxes are ``(x0, y0, x1, y1)`` in pixels of the backbone's input, absolute and 0-indexed. A
ground-truth row is ``(x0, y0, x1, y1, class, difficult)``.

Scoring: ``voc_ap`` is the all-point interpolated AP of the VOC development kit
(``VOCevaldet.m`` from 2010 on): a detection matches the ground truth of highest IoU in its
image; IoU >= 0.5 with an unclaimed non-difficult box is a true positive, with a difficult one
it is ignored, anything else is a false positive. ``coco_map`` is pycocotools' COCOeval
(ten IoU thresholds 0.5:0.95, 101 recall points, at most 100 detections), difficult boxes
passed as crowd regions so that detections on them are ignored.

Imported only inside task calls, because it imports torch.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torchvision.ops import batched_nms, generalized_box_iou_loss, sigmoid_focal_loss

from ._errors import UndefinedMetric

# Local imports: pycocotools loads when boxes or masks are scored.

FOCAL_ALPHA, FOCAL_GAMMA, GIOU_WEIGHT = 0.25, 2.0, 2.0
SCORE_THRESHOLD, NMS_IOU, MAX_DETECTIONS = 0.05, 0.5, 100
PRIOR = 0.01  # class biases start at -log((1 - p) / p): every cell background at first
MAX_LOG_DISTANCE = 8.0  # exp(8) cells: far beyond any image, keeps exp() finite early in training


def cell_centres(grid_hw: tuple[int, int], image_hw: tuple[int, int]
                 ) -> tuple[torch.Tensor, float, float]:
    """(h*w, 2) centres (x, y) of the grid cells in input pixels, row-major; and the strides."""
    (h, w), (height, width) = grid_hw, image_hw
    sx, sy = width / w, height / h
    ys, xs = torch.meshgrid((torch.arange(h) + 0.5) * sy, (torch.arange(w) + 0.5) * sx,
                            indexing="ij")
    return torch.stack([xs.reshape(-1), ys.reshape(-1)], dim=1), sx, sy


def assign(boxes: torch.Tensor, centres: torch.Tensor) -> torch.Tensor:
    """For each cell, the index of its box (centre strictly inside, smallest area), or -1.

    Args:
        boxes: (n, 4+) rows ``x0, y0, x1, y1, ...``.
        centres: (m, 2) cell centres ``x, y``.
    """
    if len(boxes) == 0:
        return torch.full((len(centres),), -1, dtype=torch.long)
    x, y = centres[:, 0:1], centres[:, 1:2]
    inside = (x > boxes[:, 0]) & (x < boxes[:, 2]) & (y > boxes[:, 1]) & (y < boxes[:, 3])
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    cost = torch.where(inside, area.expand_as(inside), torch.full_like(inside, torch.inf,
                                                                     dtype=area.dtype))
    best = cost.argmin(dim=1)
    return torch.where(inside.any(dim=1), best, torch.full_like(best, -1))


def decode_boxes(raw: torch.Tensor, centres: torch.Tensor, sx: float, sy: float) -> torch.Tensor:
    """(m, 4) log-distances of cells -> (m, 4) boxes ``x0, y0, x1, y1``."""
    d = raw.clamp(max=MAX_LOG_DISTANCE).exp() * torch.tensor([sx, sy, sx, sy], device=raw.device)
    c = centres.to(raw.device)
    return torch.stack([c[:, 0] - d[:, 0], c[:, 1] - d[:, 1], c[:, 0] + d[:, 2],
                        c[:, 1] + d[:, 3]], dim=1)


def detection_loss(out: torch.Tensor, targets: Sequence[torch.Tensor],
                   image_hw: tuple[int, int]) -> torch.Tensor:
    """Focal + 2 x GIoU loss of a batch of head outputs (B, C+4, h, w) against ground truth."""
    n_classes = out.shape[1] - 4
    centres, sx, sy = cell_centres((out.shape[2], out.shape[3]), image_hw)
    focal, giou, positives = out.new_zeros(()), out.new_zeros(()), 0
    for image_out, gt in zip(out, targets, strict=True):
        flat = image_out.reshape(n_classes + 4, -1).T  # (m, C+4)
        owner = assign(gt.cpu(), centres).to(out.device)
        labels = torch.zeros(len(flat), n_classes, device=out.device)
        pos = owner >= 0
        if pos.any():
            labels[pos, gt[owner[pos], 4].long()] = 1.0
            boxes = decode_boxes(flat[pos, n_classes:], centres[pos.cpu()], sx, sy)
            giou = giou + generalized_box_iou_loss(boxes, gt[owner[pos], :4].to(boxes),
                                                   reduction="sum")
            positives += int(pos.sum())
        focal = focal + sigmoid_focal_loss(flat[:, :n_classes], labels, alpha=FOCAL_ALPHA,
                                           gamma=FOCAL_GAMMA, reduction="sum")
    return (focal + GIOU_WEIGHT * giou) / max(positives, 1)


def detect(out: torch.Tensor, image_hw: tuple[int, int], score_threshold: float = SCORE_THRESHOLD,
           nms_iou: float = NMS_IOU, max_detections: int = MAX_DETECTIONS) -> list[torch.Tensor]:
    """Decoded detections per image: (k, 6) rows ``x0, y0, x1, y1, score, class``, best first
    (the decode settings are VisBench's ``--score-threshold``, ``--nms-iou``,
    ``--max-detections``)."""
    n_classes = out.shape[1] - 4
    centres, sx, sy = cell_centres((out.shape[2], out.shape[3]), image_hw)
    height, width = image_hw
    found = []
    for image_out in out:
        flat = image_out.reshape(n_classes + 4, -1).T
        scores = torch.sigmoid(flat[:, :n_classes])
        cell, cls = (scores >= score_threshold).nonzero(as_tuple=True)
        boxes = decode_boxes(flat[cell, n_classes:], centres[cell.cpu()], sx, sy)
        boxes[:, 0::2] = boxes[:, 0::2].clamp(0, width)
        boxes[:, 1::2] = boxes[:, 1::2].clamp(0, height)
        score = scores[cell, cls]
        keep = batched_nms(boxes, score, cls, nms_iou)[:max_detections]
        found.append(torch.cat([boxes[keep], score[keep, None], cls[keep, None].to(boxes)], 1))
    return found


def voc_ap(detections: Sequence[torch.Tensor], truths: Sequence[torch.Tensor], n_classes: int,
           iou_threshold: float = 0.5) -> dict[int, float]:
    """All-point VOC AP per class that has a non-difficult ground-truth box.

    Args:
        detections: Per image, (k, 6) ``x0, y0, x1, y1, score, class``.
        truths: Per image, (n, 6) ``x0, y0, x1, y1, class, difficult``.
    """
    dets = [d.detach().cpu().double().numpy().reshape(-1, 6) for d in detections]
    gts = [t.detach().cpu().double().numpy().reshape(-1, 6) for t in truths]
    aps = {}
    for c in range(n_classes):
        gt_c = [g[g[:, 4] == c] for g in gts]
        npos = sum(int((g[:, 5] == 0).sum()) for g in gt_c)
        if npos == 0:
            continue
        det_c = [d[d[:, 5] == c] for d in dets]
        # each detection's IoUs with the boxes of its image, one matrix per image
        ious = [_iou_matrix(d[:, :4], g[:, :4]) for d, g in zip(det_c, gt_c, strict=True)]
        order = [(-float(d[j, 4]), i, j) for i, d in enumerate(det_c) for j in range(len(d))]
        order.sort(key=lambda r: r[0])  # stable: equal scores keep image order
        claimed = [np.zeros(len(g), dtype=bool) for g in gt_c]
        tp, fp = [], []
        for _, i, j in order:
            row = ious[i][j] if len(gt_c[i]) else None
            if row is not None:
                best = int(row.argmax())
                if row[best] >= iou_threshold:
                    if gt_c[i][best, 5] != 0:
                        continue  # a difficult box: neither a hit nor a miss
                    if not claimed[i][best]:
                        claimed[i][best] = True
                        tp.append(1.0)
                        fp.append(0.0)
                        continue
            tp.append(0.0)
            fp.append(1.0)
        aps[c] = _all_point_ap(np.cumsum(tp), np.cumsum(fp), npos)
    return aps


def _iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(k, n) IoU of boxes ``a`` with boxes ``b`` (``x0, y0, x1, y1``)."""
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(rb - lt, 0, None).prod(-1)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def _all_point_ap(tp: np.ndarray, fp: np.ndarray, npos: int) -> float:
    if len(tp) == 0:
        return 0.0
    recall = np.concatenate([[0.0], tp / npos, [1.0]])
    precision = np.concatenate([[0.0], tp / np.maximum(tp + fp, 1e-12), [0.0]])
    precision = np.maximum.accumulate(precision[::-1])[::-1]  # the precision envelope
    steps = np.flatnonzero(recall[1:] != recall[:-1]) + 1
    return float(np.sum((recall[steps] - recall[steps - 1]) * precision[steps]))


def coco_map(detections: Sequence[torch.Tensor], truths: Sequence[torch.Tensor],
             n_classes: int) -> float:
    """COCO mAP over IoU 0.5:0.95 by pycocotools; -1.0 when no class has a ground-truth box."""
    def xywh(b: torch.Tensor) -> list[float]:
        x0, y0, x1, y1 = (float(v) for v in b[:4])
        return [x0, y0, x1 - x0, y1 - y0]

    annotations: list[dict[str, Any]] = []
    for i, boxes in enumerate(truths):
        for t in boxes:
            annotations.append({"id": len(annotations) + 1, "image_id": i,
                                "category_id": int(t[4]), "bbox": xywh(t),
                                "area": float((t[2] - t[0]) * (t[3] - t[1])),
                                "iscrowd": int(t[5] != 0)})
    results = [{"image_id": i, "category_id": int(d[5]), "bbox": xywh(d), "score": float(d[4])}
               for i, ds in enumerate(detections) for d in ds]
    if not any((t[:, 5] == 0).any() for t in truths if len(t)):
        return -1.0
    if not results:
        return 0.0
    return float(_cocoeval([{"id": i} for i in range(len(truths))], n_classes, annotations,
                           results, "bbox")[0])


def _cocoeval(images: list[dict[str, Any]], n_classes: int, annotations: list[dict[str, Any]],
              results: list[dict[str, Any]], iou_type: str) -> list[float]:
    """pycocotools' COCOeval ``stats`` (AP 0.5:0.95, AP 0.5, ...) of ``results`` against
    ``annotations``, its printed report swallowed."""
    from pycocotools.coco import COCO  # the scorer itself: only when boxes or masks are scored
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools reports by printing
        gt = COCO()
        gt.dataset = {"images": images, "categories": [{"id": c} for c in range(n_classes)],
                      "annotations": annotations}
        gt.createIndex()
        evaluation = COCOeval(gt, gt.loadRes(results), iou_type)
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return [float(v) for v in evaluation.stats]



def _rle(masks: torch.Tensor) -> list[dict[str, Any]]:
    """(k, H, W) boolean masks as pycocotools' run-length encoding."""
    from pycocotools import mask as mask_utils  # the scorer itself: only when masks are scored

    if len(masks) == 0:
        return []
    array = np.asfortranarray(masks.cpu().numpy().astype(np.uint8).transpose(1, 2, 0))
    return mask_utils.encode(array)


def coco_mask_map(detections: Sequence[torch.Tensor], det_masks: Sequence[list[dict[str, Any]]],
                  truths: Sequence[torch.Tensor], gt_masks: Sequence[list[dict[str, Any]]],
                  n_classes: int) -> tuple[float, float]:
    """pycocotools' mask AP (``segm``): (AP at IoU 0.5, AP over 0.5:0.95); -1.0 each when no
    class has a ground-truth mask. Masks are RLE dicts, one per detection / ground-truth row."""
    if not any((t[:, 5] == 0).any() for t in truths if len(t)):
        return -1.0, -1.0
    annotations: list[dict[str, Any]] = []
    for i, (boxes, rles) in enumerate(zip(truths, gt_masks, strict=True)):
        for t, rle in zip(boxes, rles, strict=True):
            annotations.append({"id": len(annotations) + 1, "image_id": i,
                                "category_id": int(t[4]), "segmentation": rle,
                                "area": float((t[2] - t[0]) * (t[3] - t[1])),
                                "bbox": [float(t[0]), float(t[1]), float(t[2] - t[0]),
                                         float(t[3] - t[1])],
                                "iscrowd": int(t[5] != 0)})
    results = [{"image_id": i, "category_id": int(d[5]), "segmentation": rle,
                "score": float(d[4])}
               for i, (ds, rles) in enumerate(zip(detections, det_masks, strict=True))
               for d, rle in zip(ds, rles, strict=True)]
    if not results:
        return 0.0, 0.0
    sizes = {}  # pycocotools reads each image's size for its masks: the masks' own
    for i, rles in enumerate([*gt_masks, *det_masks]):
        if rles:
            h, w = rles[0]["size"]
            sizes[i % len(truths)] = {"height": int(h), "width": int(w)}
    stats = _cocoeval([{"id": i, **sizes.get(i, {})} for i in range(len(truths))], n_classes,
                      annotations, results, "segm")
    return stats[1], stats[0]


def box_masks(mask_logits: torch.Tensor, detections: torch.Tensor,
              image_hw: tuple[int, int]) -> torch.Tensor:
    """(k, H, W) masks of kept detections: the detection's class map (grid logits upsampled
    bilinearly to the input) above probability 0.5, inside its box (pixel centres in the box).

    Args:
        mask_logits: (C, h, w) per-class foreground logits of one image.
        detections: (k, 6) ``x0, y0, x1, y1, score, class``.
    """
    height, width = image_hw
    if len(detections) == 0:
        return torch.zeros(0, height, width, dtype=torch.bool)
    classes = detections[:, 5].long()
    maps = torch.nn.functional.interpolate(mask_logits[classes][None], size=image_hw,
                                           mode="bilinear", align_corners=False)[0] > 0
    ys = torch.arange(height, device=maps.device)[None, :, None] + 0.5
    xs = torch.arange(width, device=maps.device)[None, None, :] + 0.5
    b = detections[:, :4, None, None].to(maps.device)
    inside = (xs > b[:, 0]) & (xs < b[:, 2]) & (ys > b[:, 1]) & (ys < b[:, 3])
    return (maps & inside).cpu()


class DetectionScorer:
    """Accumulates decoded detections (and masks) against ground truth over a split.

    ``update(pred, target)`` takes, per batch, either the head's grid output (decoded here:
    :func:`detect`, then :func:`box_masks` for masks) or ready detections (a trivial predictor);
    ``target`` is the prepared per-image list of ground-truth rows (with flattened masks after
    column 6 when ``masks``).
    """

    def __init__(self, task: str, n_classes: int, masks: bool) -> None:
        self.task, self.n_classes, self.masks = task, n_classes, masks
        self.detections: list[torch.Tensor] = []
        self.truths: list[torch.Tensor] = []
        self.det_rles: list[list[dict[str, Any]]] = []
        self.gt_rles: list[list[dict[str, Any]]] = []

    def add(self, detections: torch.Tensor, truth: torch.Tensor,
            det_masks: torch.Tensor | None, image_hw: tuple[int, int]) -> None:
        """One image: (k, 6) detections, (n, 6 [+ H*W]) ground truth, (k, H, W) masks."""
        self.detections.append(detections[:, :6].detach().float().cpu())
        self.truths.append(truth[:, :6].float().cpu())
        if self.masks:
            assert det_masks is not None  # a mask task predicts a mask per detection
            gt = truth[:, 6:].reshape(len(truth), *image_hw) > 0.5
            self.gt_rles.append(_rle(gt))
            self.det_rles.append(_rle(det_masks))

    def result(self) -> dict[str, float]:
        aps = voc_ap(self.detections, self.truths, self.n_classes)
        if not aps:
            raise UndefinedMetric(self.task, "map_50", "no eval image has a (non-difficult) box",
                                  hint="evaluate on a split with box annotations")
        out = {
            "map_50": float(np.mean(list(aps.values()))),
            "map_50_95": coco_map(self.detections, self.truths, self.n_classes),
            "classes_scored": float(len(aps)),
            "detections_per_image": float(np.mean([len(d) for d in self.detections])),
        }
        if self.masks:
            out["mask_map_50"], out["mask_map_50_95"] = coco_mask_map(
                self.detections, self.det_rles, self.truths, self.gt_rles, self.n_classes)
        return out
