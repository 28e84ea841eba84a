"""The detection probe's box machinery against hand computations and pycocotools."""

from __future__ import annotations

import math

import pytest
import torch

from vbstore.tasks import _boxes


def _gt(*rows):
    return torch.tensor(rows, dtype=torch.float32).reshape(-1, 6)


def _det(*rows):
    return torch.tensor(rows, dtype=torch.float32).reshape(-1, 6)


def test_voc_ap_matches_a_hand_computation():
    # class 0: three boxes over two images, one difficult; five detections
    truths = [_gt([0, 0, 10, 10, 0, 0], [20, 20, 30, 30, 0, 0], [40, 40, 50, 50, 0, 1]),
              _gt([0, 0, 10, 10, 0, 0])]
    detections = [
        _det([0, 0, 10, 10, 0.9, 0],     # TP (image 0, box 0)
             [0, 0, 10, 10, 0.8, 0],     # FP: box 0 already claimed
             [40, 40, 50, 50, 0.7, 0],   # on the difficult box: ignored
             [60, 60, 70, 70, 0.6, 0]),  # FP: nothing there
        _det([1, 0, 11, 10, 0.5, 0]),    # TP (IoU 90/110 >= 0.5)
    ]
    # ranked: TP, FP, (ignored), FP, TP; npos = 3
    # precision 1, 1/2, 1/3, 2/4 at recall 1/3, 1/3, 1/3, 2/3; envelope: 1 up to 1/3, 1/2 to 2/3
    expected = (1 / 3) * 1.0 + (1 / 3) * 0.5
    aps = _boxes.voc_ap(detections, truths, n_classes=2)
    assert aps == {0: pytest.approx(expected)}  # class 1 has no box: not scored


def test_coco_map_from_pycocotools_over_ten_thresholds():
    truths = [_gt([0, 0, 10, 10, 0, 0]), _gt([0, 0, 20, 20, 1, 0])]
    perfect = [_det([0, 0, 10, 10, 0.9, 0]), _det([0, 0, 20, 20, 0.8, 1])]
    assert _boxes.coco_map(perfect, truths, 2) == pytest.approx(1.0)
    # IoU 70/100 = 0.7: a hit at thresholds 0.50..0.70 (5 of 10) for class 0
    shifted = [_det([0, 0, 10, 7, 0.9, 0]), _det([0, 0, 20, 20, 0.8, 1])]
    assert _boxes.coco_map(shifted, truths, 2) == pytest.approx((0.5 + 1.0) / 2)
    assert _boxes.coco_map([_det(), _det()], truths, 2) == 0.0
    # a detection on a difficult (crowd) box costs nothing
    difficult = [_gt([0, 0, 10, 10, 0, 0], [30, 30, 40, 40, 0, 1]), _gt([0, 0, 20, 20, 1, 0])]
    extra = [_det([0, 0, 10, 10, 0.9, 0], [30, 30, 40, 40, 0.95, 0]), perfect[1]]
    assert _boxes.coco_map(extra, difficult, 2) == pytest.approx(1.0)


def test_assignment_puts_a_cell_on_the_smallest_box_containing_its_centre():
    centres, sx, sy = _boxes.cell_centres((4, 4), (32, 32))  # centres at 4, 12, 20, 28
    assert (sx, sy) == (8.0, 8.0)
    boxes = torch.tensor([[0.0, 0.0, 32.0, 32.0], [8.0, 8.0, 16.0, 16.0], [25.0, 25.0, 26.0, 26.0]])
    owner = _boxes.assign(boxes, centres).reshape(4, 4)
    expected = torch.zeros(4, 4, dtype=torch.long)
    expected[1, 1] = 1  # centre (12, 12) is inside both: the small box wins
    assert torch.equal(owner, expected)  # the tiny box holds no centre: no cell
    assert (_boxes.assign(torch.zeros(0, 4), centres) == -1).all()


def _head_output(boxes, n_classes, grid=(4, 4), size=(32, 32)):
    """Logits and log-distances that say exactly ``boxes`` (x0, y0, x1, y1, class)."""
    centres, sx, sy = _boxes.cell_centres(grid, size)
    out = torch.full((n_classes + 4, grid[0] * grid[1]), -20.0)
    owner = _boxes.assign(boxes, centres)
    for cell in range(len(centres)):
        if owner[cell] < 0:
            continue
        x0, y0, x1, y1, cls = boxes[owner[cell]].tolist()
        cx, cy = centres[cell].tolist()
        out[int(cls), cell] = 10.0
        out[n_classes:, cell] = torch.log(torch.tensor([(cx - x0) / sx, (cy - y0) / sy,
                                                        (x1 - cx) / sx, (y1 - cy) / sy]))
    return out.reshape(1, n_classes + 4, *grid)


def test_decoding_recovers_the_boxes_and_nms_keeps_one_per_object():
    boxes = torch.tensor([[1.0, 2.0, 15.0, 14.0, 1.0], [17.0, 16.0, 31.0, 30.0, 0.0]])
    found = _boxes.detect(_head_output(boxes, 2), (32, 32))[0]
    assert len(found) == 2  # four cells per box, three suppressed each
    got = sorted(found.tolist(), key=lambda r: r[5])
    assert got[0][:4] == pytest.approx([17, 16, 31, 30], abs=1e-4)
    assert got[1][:4] == pytest.approx([1, 2, 15, 14], abs=1e-4)
    assert [r[5] for r in got] == [0.0, 1.0]
    assert got[0][4] == pytest.approx(1 / (1 + math.exp(-10)))


def test_loss_is_low_for_the_exact_answer_and_learns():
    truth = [_gt([1, 2, 15, 14, 1, 0], [17, 16, 31, 30, 0, 0])]
    exact = _boxes.detection_loss(_head_output(truth[0][:, :5], 2), truth, (32, 32))
    assert float(exact) < 1e-4
    raw = torch.zeros(1, 6, 4, 4, requires_grad=True)
    loss = _boxes.detection_loss(raw, truth, (32, 32))
    loss.backward()
    assert float(loss.detach()) > 1.0
    assert raw.grad.abs().sum() > 0
