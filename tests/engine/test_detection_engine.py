"""The box probes through the engine on generated scenes: packs, aligned boxes and instance
masks, a stored head, a cached second answer."""

from __future__ import annotations

import pytest

import vbstore
from vbstore.heads import head_record
from vbstore.tasks import get_task

SCENES = "scenes:per_split=6,size=32"
KW = dict(split="val", train_split="train", weights="random", progress=False,
          data_options={"target": "boxes"}, params={"epochs": 2})


@pytest.mark.slow
@pytest.mark.parametrize(("task", "protocol"), [("detection", "fcos_patch_grid"),
                                                ("instance_segmentation",
                                                 "fcos_patch_grid_class_masks")])
def test_box_probes_run_end_to_end_on_scenes_and_are_cached(task, protocol):
    first = vbstore.get_result("test_vit", task, SCENES, SCENES, **KW)
    assert first.record.protocol == protocol
    assert set(first.metrics) == {m.name for m in get_task(task).metrics}
    assert first.metrics["classes_scored"] == 2  # box and sphere
    assert first.record.data["eval"]["boxes_dropped"] == 0  # square scenes: nothing cropped
    assert "train_loss" in first.record.train_metrics
    record = head_record(vbstore.Store(), first.record.inputs["head"])  # its compatibility
    assert record["task"] == task and record["class_names"] == ["box", "sphere"]
    assert record["feature_mode"] == "dense"
    second = vbstore.get_result("test_vit", task, SCENES, SCENES, **KW)
    assert second.from_cache and second.id == first.id
