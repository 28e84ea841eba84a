"""Detection's ``min_box_size`` (VisBench's ``--min-box-size``): target boxes narrower or shorter
than it, on the backbone's input after the crop, leave training and scoring alike. Added after
detection results were stored: at 0 it is in no key."""

import pytest
import torch

from vbstore.errors import UsageError
from vbstore.tasks import get_task

ROWS = torch.tensor([[[0.0, 0.0, 0.5, 10.0, 0, 0],   # half a pixel wide
                      [0.0, 0.0, 10.0, 0.9, 1, 0],   # 0.9 px tall
                      [2.0, 2.0, 3.0, 3.0, 0, 0],    # exactly 1 x 1: kept at 1 (>=)
                      [0.0, 0.0, 8.0, 8.0, 1, 0],
                      [-1, -1, -1, -1, -1, -1]]])    # padding


@pytest.mark.parametrize("name", ["detection", "instance_segmentation"])
def test_the_default_is_in_no_key(name):
    task = get_task(name)
    assert "min_box_size" not in task.keyed_params(task.resolve_params())
    assert task.keyed_params(task.resolve_params({"min_box_size": 1}))["min_box_size"] == 1.0


def test_boxes_below_the_size_are_dropped_as_visbench_drops_them():
    task = get_task("detection")
    params = {**task.resolve_params({"min_box_size": 1.0}), "num_classes": 2}
    (kept,) = task._prepare(ROWS, params, "train")
    assert kept[:, :4].tolist() == [[2.0, 2.0, 3.0, 3.0], [0.0, 0.0, 8.0, 8.0]]
    (every,) = task._prepare(ROWS, {**params, "min_box_size": 0.0}, "eval")
    assert len(every) == 4  # 0: every box the crop left with area


def test_a_negative_size_is_refused():
    with pytest.raises(UsageError, match="min_box_size"):
        get_task("detection").resolve_params({"min_box_size": -1})
