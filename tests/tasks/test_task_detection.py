"""The detection and instance-segmentation probes: scoring against independent computations
(a hand VOC AP, pycocotools called directly), and learning a learnable signal."""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import pytest
import torch
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from vbstore.tasks import TensorSplit, _boxes, get_task


def _rows(*rows):
    return torch.tensor(rows, dtype=torch.float32).reshape(-1, 6)


def _pycoco(gts, dets, kind, size=None):
    """COCO AP (stats[0], stats[1]) by pycocotools from plain COCO dicts, built here."""
    annotations, results = [], []
    for i, rows in enumerate(gts):
        for r in rows:
            x0, y0, x1, y1, c = (float(v) for v in r[:5])
            ann = {"id": len(annotations) + 1, "image_id": i, "category_id": int(c),
                   "bbox": [x0, y0, x1 - x0, y1 - y0], "area": (x1 - x0) * (y1 - y0),
                   "iscrowd": 0}
            if kind == "segm":
                m = np.zeros(size, np.uint8, order="F")
                m[int(y0):int(y1), int(x0):int(x1)] = 1
                ann["segmentation"] = mask_utils.encode(m)
            annotations.append(ann)
    for i, (rows, masks) in enumerate(dets):
        for r, m in zip(rows, masks, strict=True):
            x0, y0, x1, y1, s, c = (float(v) for v in r)
            res = {"image_id": i, "category_id": int(c), "score": s}
            if kind == "segm":
                res["segmentation"] = mask_utils.encode(np.asfortranarray(m.astype(np.uint8)))
            else:
                res["bbox"] = [x0, y0, x1 - x0, y1 - y0]
            results.append(res)
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        shape = {"height": size[0], "width": size[1]} if size else {}
        coco.dataset = {"images": [{"id": i, **shape} for i in range(len(gts))],
                        "categories": [{"id": 0}, {"id": 1}], "annotations": annotations}
        coco.createIndex()
        ev = COCOeval(coco, coco.loadRes(results), kind)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return float(ev.stats[0]), float(ev.stats[1])


def test_the_task_scorer_gives_hand_voc_ap_and_pycocotools_coco_ap():
    """The path a result takes (the task's scorer on ready detections) against a hand VOC AP
    and pycocotools run on COCO dicts built independently."""
    task = get_task("detection")
    truths = [_rows([0, 0, 10, 10, 0, 0], [20, 20, 30, 30, 0, 0], [2, 2, 12, 12, 1, 0]),
              _rows([0, 0, 10, 10, 0, 0])]
    dets = [_rows([0, 0, 10, 10, 0.9, 0], [0, 0, 10, 10, 0.8, 0], [60, 60, 70, 70, 0.6, 0],
                  [2, 2, 12, 9, 0.7, 1]),
            _rows([1, 0, 11, 10, 0.5, 0])]
    scorer = task._scorer({"num_classes": 2})
    scorer.update(dets, truths)
    got = scorer.result()
    # class 0: TP, FP, FP, TP over npos 3: precision 1, 1/2, 1/3, 1/2 at recall 1/3, .., 2/3
    ap0 = (1 / 3) * 1.0 + (1 / 3) * 0.5
    ap1 = 1.0  # IoU 70/100 >= 0.5
    assert got["map_50"] == pytest.approx((ap0 + ap1) / 2)
    assert got["classes_scored"] == 2
    assert got["detections_per_image"] == pytest.approx(2.5)
    expected, _ = _pycoco(truths, [(d, [None] * len(d)) for d in dets], "bbox")
    assert got["map_50_95"] == pytest.approx(expected)


def test_mask_ap_is_pycocotools_segm_on_the_same_masks():
    size = (16, 16)
    truths = [_rows([0, 0, 8, 8, 0, 0], [8, 8, 16, 16, 1, 0])]
    gt_masks = torch.zeros(2, *size)
    gt_masks[0, :8, :8] = 1
    gt_masks[1, 8:, 8:] = 1
    target = [torch.cat([truths[0], gt_masks.reshape(2, -1)], 1)]
    dets = _rows([0, 0, 8, 8, 0.9, 0], [8, 8, 16, 16, 0.8, 1])
    masks = torch.zeros(2, *size, dtype=torch.bool)
    masks[0, :8, :4] = True  # half the box: IoU 0.5
    masks[1, 8:, 8:] = True  # exact
    scorer = _boxes.DetectionScorer("instance_segmentation", 2, masks=True)
    scorer.add(dets, target[0], masks, size)
    got = scorer.result()
    ap, ap50 = _pycoco(truths, [(dets, masks.numpy())], "segm", size)
    assert got["mask_map_50_95"] == pytest.approx(ap)
    assert got["mask_map_50"] == pytest.approx(ap50)
    assert got["mask_map_50"] == pytest.approx(1.0)  # IoU 0.5 is a hit at 0.5
    assert got["mask_map_50_95"] == pytest.approx((0.1 + 1.0) / 2)  # hit at 1 of 10 thresholds
    assert got["map_50"] == pytest.approx(1.0)  # the boxes themselves are exact


def _learnable(n, seed, masks=False, size=32, grid=8, c=2):
    """Features that hold, on the grid, each cell's class and its FCOS distances: a linear head
    can read both, so a working probe must score high."""
    g = torch.Generator().manual_seed(seed)
    centres, sx, sy = _boxes.cell_centres((grid, grid), (size, size))
    feats = torch.randn(n, 8 + c, grid, grid, generator=g) * 0.1
    width = 6 + (size * size if masks else 0)
    target = torch.full((n, 2, width), -1.0)
    for i in range(n):
        x0, y0 = torch.randint(0, size // 2, (2,), generator=g).tolist()
        w, h = torch.randint(8, size // 2, (2,), generator=g).tolist()
        cls = i % c
        box = torch.tensor([x0, y0, x0 + w, y0 + h], dtype=torch.float32)
        target[i, 0, :6] = torch.tensor([*box.tolist(), cls, 0])
        if masks:
            m = torch.zeros(size, size)
            m[y0:y0 + h, x0:x0 + w] = 1
            target[i, 0, 6:] = m.reshape(-1)
        pos = _boxes.assign(box[None], centres) >= 0
        d = torch.stack([centres[:, 0] - box[0], centres[:, 1] - box[1],
                         box[2] - centres[:, 0], box[3] - centres[:, 1]], 1)
        d = torch.log(d.clamp(min=1e-3) / torch.tensor([sx, sy, sx, sy]))
        f = feats[i].reshape(8 + c, -1)
        f[cls, pos] += 3.0
        f[c:c + 4, pos] = d[pos].T
        f[c + 4, :] = 1.0
    return TensorSplit([feats], target, target_kind="instances" if masks else "boxes",
                       target_hw=(size, size))


@pytest.mark.parametrize(("name", "headline"), [("detection", "map_50"),
                                                ("instance_segmentation", "mask_map_50")])
def test_probe_learns_a_learnable_signal_and_beats_the_trivial_predictor(name, headline):
    task = get_task(name)
    masks = name == "instance_segmentation"
    train, val = _learnable(16, 0, masks), _learnable(8, 1, masks)
    params = {"epochs": 15, "lr": 3e-2, "batch_size": 4}
    head, _ = task.fit_split(train, params, seed=0, class_names=["a", "b"])
    assert head["conv.weight"].shape[0] == (8 if masks else 6)  # C + 4 (+ C masks)
    got = task.evaluate_split(head, val, {})  # num_classes read from the head
    trivial = task.baseline_split(val)
    assert got[headline] > trivial[headline] + 0.3
    assert got["map_50"] > 0.9  # the features hold each cell's class and distances
    assert got["classes_scored"] == trivial["classes_scored"] == 2
    assert got["detections_per_image"] <= _boxes.MAX_DETECTIONS
    found = task.predict_split(head, val, limit=3)
    assert [row for row, _, _ in found] == [0, 1, 2]
    assert all(d.shape[1] == 6 for _, _, d in found)


def test_difficult_boxes_are_neither_taught_nor_scored():
    task = get_task("detection")
    rows = [_rows([0, 0, 8, 8, 0, 1])]  # only a difficult box
    assert task._no_signal(rows, {"num_classes": 1}) is not None
    scorer = task._scorer({"num_classes": 1})
    truth = torch.cat([rows[0], _rows([9, 9, 12, 12, 0, 0])])
    scorer.update([_rows([0, 0, 8, 8, 0.9, 0])], [truth])
    assert scorer.result()["map_50"] == pytest.approx(0.0)  # the hit on the difficult box: ignored


def test_box_classes_outside_num_classes_are_refused():
    from vbstore.errors import TaskInputError

    task = get_task("detection")
    with pytest.raises(TaskInputError, match=r"class 3, outside 0\.\.1"):
        task._prepare(torch.tensor([[[0, 0, 4, 4, 3, 0]]], dtype=torch.float32),
                      {"num_classes": 2}, "eval")


@pytest.mark.parametrize("name", ["detection", "instance_segmentation"])
def test_box_probes_train_on_the_dense_schedule_with_the_focal_prior(name):
    task = get_task(name)
    params = task.resolve_params()
    assert (params["epochs"], params["lr"], params["batch_size"], params["warmup_epochs"],
            params["weight_decay"], params["head"]) == (10, 5e-4, 8, 1.5, 1e-4, "linear")
    assert task.protocol == {"detection": "visbench_anchor_free_det",  # VisBench's name
                             "instance_segmentation": "fcos_patch_grid_class_masks"}[name]
    head, _ = task.fit_split(_learnable(4, 0, name != "detection"), {"epochs": 1, "lr": 1e-9},
                             seed=0, class_names=["a", "b"])
    prior = -math.log(0.99 / 0.01)
    assert head["conv.bias"][:2].tolist() == pytest.approx([prior, prior], abs=1e-5)


def test_decode_settings_are_visbenchs_flags():
    """--score-threshold, --nms-iou, --max-detections reach the decoder the scorer uses."""
    task = get_task("detection")
    out = torch.zeros(1, 2 + 4, 4, 4)
    out[0, 0] = torch.linspace(-3, 3, 16).reshape(4, 4)  # class 0 scores 0.05..0.95
    out[0, 2:] = math.log(4.0)  # every cell a 8 px box: the 4 x 4 cells overlap their neighbours
    decode = {"num_classes": 2}
    default = _boxes.detect(out, (16, 16))[0]
    assert len(default) == len(_boxes.detect(out, (16, 16), *task_decoding(task, decode))[0])
    one = _boxes.detect(out, (16, 16), *task_decoding(task, {**decode, "max_detections": 1}))[0]
    assert len(one) == 1
    assert one[0, 4] == default[0, 4]
    strict = _boxes.detect(out, (16, 16), *task_decoding(task, {**decode,
                                                                "score_threshold": 0.9}))[0]
    assert len(strict) < len(default)
    assert bool((strict[:, 4] >= 0.9).all())
    loose = _boxes.detect(out, (16, 16), *task_decoding(task, {**decode, "nms_iou": 1.0}))[0]
    assert len(loose) > len(default)  # nothing suppressed
    truth = [_rows([0, 0, 8, 8, 0, 0])]
    scorer = task._scorer(task.resolve_params({"num_classes": 2, "max_detections": 1}))
    scorer.update(_GridLike(out), truth)
    assert scorer.result()["detections_per_image"] == 1


def task_decoding(task, params):
    from vbstore.tasks.detection import _decoding

    return _decoding(task.resolve_params(params))


def _GridLike(raw):
    from vbstore.tasks.detection import GridOutput

    return GridOutput(raw, (16, 16))
