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
@pytest.mark.parametrize(("task", "protocol"), [("detection", "visbench_anchor_free_det"),
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
    assert record["task"] == task
    assert record["class_names"] == ["box", "sphere"]
    assert record["feature_mode"] == "dense"
    second = vbstore.get_result("test_vit", task, SCENES, SCENES, **KW)
    assert second.from_cache
    assert second.id == first.id


def _coco_split(root, split, n, category="square"):
    import json

    import numpy as np

    from vbstore.data import write_png

    rng = np.random.default_rng(len(split))
    images, anns = [], []
    for i in range(n):
        pixels = np.full((28, 40, 3), 60, np.uint8)
        x, y = int(rng.integers(8, 24)), int(rng.integers(2, 14))
        pixels[y:y + 10, x:x + 10] = (220, 40, 40)
        write_png(root / split / f"{i:03d}.png", pixels)
        images.append({"id": i + 1, "file_name": f"{i:03d}.png", "width": 40, "height": 28})
        anns.append({"id": len(anns) + 1, "image_id": i + 1, "category_id": 1, "iscrowd": 0,
                     "bbox": [x, y, 10, 10],
                     "segmentation": [[x, y, x + 10, y, x + 10, y + 10, x, y + 10]]})
        # a sliver in the columns the centre crop cuts off: dropped, and counted
        anns.append({"id": len(anns) + 1, "image_id": i + 1, "category_id": 1, "iscrowd": 0,
                     "bbox": [0, 0, 4, 6], "segmentation": [[0, 0, 4, 0, 4, 6, 0, 6]]})
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    (root / "annotations" / f"instances_{split}.json").write_text(json.dumps(
        {"images": images, "annotations": anns, "categories": [{"id": 1, "name": category}]}))


@pytest.mark.slow
def test_instance_segmentation_reads_coco_polygons_through_the_crop(tmp_path):
    root = tmp_path / "coco"
    _coco_split(root, "train", 4)
    _coco_split(root, "val", 3)
    kw = dict(split="val", train_split="train", weights="random", progress=False,
              params={"epochs": 1})
    result = vbstore.get_result("test_vit", "instance_segmentation", str(root), str(root), **kw)
    assert result.record.data["eval"]["boxes_dropped"] == 3  # one sliver per val image
    assert result.metrics["classes_scored"] == 1
    assert 0.0 <= result.metrics["mask_map_50"] <= 1.0


def test_eval_boxes_with_another_class_list_are_refused(tmp_path):
    from vbstore.errors import UsageError

    _coco_split(tmp_path / "a", "train", 2)
    _coco_split(tmp_path / "b", "val", 2, category="circle")
    with pytest.raises(UsageError, match="box class indices would not agree"):
        vbstore.get_result("test_vit", "detection", str(tmp_path / "b"), str(tmp_path / "a"),
                           split="val", train_split="train", weights="random", progress=False,
                           params={"epochs": 1})
