"""Taskonomy's folders through the engine: the same files read as Taskonomy and as a dense split
give the same numbers, and its no-depth sentinel is out of the metric."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
from PIL import Image

import vbstore
from vbstore.data import make_scenes

KW = dict(weights="random", progress=False, params={"target_scale": 512.0, "epochs": 2})


def _taskonomy_and_dense(tmp: Path) -> tuple[Path, Path]:
    """scenes depth re-encoded in Taskonomy's units (1/512 m), a corner of each map 65535."""
    scenes = make_scenes(tmp / "scenes", per_split=4, seed=2, size=32)
    taskonomy, dense = tmp / "taskonomy", tmp / "dense"
    rows = ["id,train,val,test"]
    for split in ("train", "val"):
        building = f"{split}house"
        rows.append(f"{building},{int(split == 'train')},{int(split == 'val')},0")
        for i, image in enumerate(sorted((scenes / split / "images").glob("*.png"))):
            mm = np.asarray(Image.open(scenes / split / "depth" / image.name)).astype(np.float64)
            units = np.round(mm / 1000 * 512).astype(np.uint16)
            units[:3, :3] = 65535
            for domain, write in (("rgb", None), ("depth_zbuffer", units)):
                path = taskonomy / domain / building / f"point_{i}_view_0_domain_{domain}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                if write is None:
                    shutil.copyfile(image, path)
                else:
                    Image.fromarray(write).save(path)
            (dense / split / "images").mkdir(parents=True, exist_ok=True)
            (dense / split / "depth").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(image, dense / split / "images" / f"{i}.png")
            Image.fromarray(units).save(dense / split / "depth" / f"{i}.png")
    (taskonomy / "splits.csv").write_text("\n".join(rows) + "\n")
    return taskonomy, dense


def test_taskonomy_depth_matches_the_same_files_as_a_dense_split(tmp_path):
    taskonomy, dense = _taskonomy_and_dense(tmp_path)
    options = {"target": "depth_zbuffer", "splits": str(taskonomy / "splits.csv")}
    by_taskonomy = vbstore.get_result("test_vit", "depth", str(taskonomy), str(taskonomy),
                                      split="val", train_split="train", data_options=options,
                                      **KW)
    by_dense = vbstore.get_result("test_vit", "depth", str(dense), str(dense), split="val",
                                  train_split="train", data_options={"target": "depth"}, **KW)
    assert by_taskonomy.metrics == by_dense.metrics
    assert 0 < by_taskonomy.metrics["d1"] <= 1
    # were 65535 a depth (128 m), the corners alone would put the rmse above 11 m
    assert by_taskonomy.metrics["rmse"] < 5
    assert by_taskonomy.record.protocol == "probe3d"


def test_another_target_of_the_same_images_says_its_features_came_from_the_store(forwards):
    """A new featureset assembled from stored rows ran no forward pass, and the record says so."""
    data = "scenes:per_split=4,size=32"
    kw = dict(split="val", train_split="train", weights="random", progress=False)
    first = vbstore.get_result("test_vit", "semantic_segmentation", data, data,
                               data_options={"target": "labels"},
                               params={"num_classes": 4, "epochs": 1}, **kw)
    assert not first.run.features_from_cache
    ran = len(forwards)
    second = vbstore.get_result("test_vit", "generic_segmentation", data, data,
                                data_options={"target": "masks"}, params={"epochs": 1}, **kw)
    assert len(forwards) == ran
    assert second.run.features_from_cache
