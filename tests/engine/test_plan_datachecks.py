"""What the data can tell is checked in the plan: ``--dry-run`` refuses exactly what the run
would refuse, before a feature is extracted or anything is stored (class counts and label
ranges, one-class data, a mask with no foreground)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import vbstore
import vbstore.data
from vbstore.data import make_shapes, write_png
from vbstore.engine import plan, result_request
from vbstore.errors import BadInput, UsageError, VbstoreError

KW = dict(split="val", train_split="train", weights="random", input_size=32)


def _labels(root: Path, values: tuple[int, ...], n: int = 3) -> str:
    """A dense folder whose label maps hold ``values`` (a band each), train and val."""
    for split in ("train", "val"):
        (root / split / "images").mkdir(parents=True)
        (root / split / "masks").mkdir(parents=True)
        for i in range(n):
            mask = np.zeros((24, 24), np.uint8)
            for j, value in enumerate(values):
                mask[j * 24 // len(values):, :] = value
            write_png(root / split / "images" / f"s{i}.png",
                      np.stack([mask * 40, mask * 20 + i, 255 - mask * 30], -1).astype(np.uint8))
            write_png(root / split / "masks" / f"s{i}.png", mask)
    return str(root)


def _objects(store) -> list[Path]:
    return sorted(p for p in (store.root / "objects").rglob("*") if p.is_file())


def _refused_alike(task: str, data: str, params: dict, match: str,
                   error: type[VbstoreError] = UsageError) -> str:
    """The dry run and the run refuse ``params`` on ``data`` with one message, and the run
    stores nothing."""
    store = vbstore.Store()
    request = result_request("test_vit", task, data, data, params=params, **KW)
    with pytest.raises(error, match=match) as dry:
        plan(request, store, dry_run=True)
    before = _objects(store)
    with pytest.raises(error, match=match) as run:
        vbstore.get_result("test_vit", task, data, data, params=params, progress=False, **KW)
    assert run.value.args[0] == dry.value.args[0]
    assert _objects(store) == before  # refused before a manifest, a backbone or a feature
    return str(dry.value) + "; " + (dry.value.hint or "")


@pytest.fixture(scope="module")
def four(tmp_path_factory) -> str:
    return _labels(tmp_path_factory.mktemp("seg") / "four", (0, 1, 2, 3))


def test_semantic_segmentation_without_num_classes_is_refused_at_plan_time(four):
    said = _refused_alike("semantic_segmentation", four, {"epochs": 1}, "num_classes >= 2")
    assert "the labels run 0..3: pass the class count, e.g. -p num_classes=4" in said


def test_labels_outside_num_classes_are_refused_at_plan_time(four):
    said = _refused_alike("semantic_segmentation", four, {"num_classes": 2, "epochs": 1},
                          "train labels hold 3, outside 0..1 and not ignore_index 255")
    assert "-p num_classes=4" in said


def test_labels_that_fit_plan_and_run(four):
    result = vbstore.get_result("test_vit", "semantic_segmentation", four, four,
                                params={"num_classes": 4, "epochs": 1}, progress=False, **KW)
    assert 0.0 <= result.metrics["miou"] <= 1.0
    # ignore_index covers the label num_classes leaves out
    ignored = vbstore.get_result("test_vit", "semantic_segmentation", four, four,
                                 params={"num_classes": 3, "ignore_index": 3, "epochs": 1},
                                 progress=False, **KW)
    assert ignored.record.params["ignore_index"] == 3


def test_one_class_label_maps_are_refused(tmp_path):
    data = _labels(tmp_path / "one", (2,))
    _refused_alike("semantic_segmentation", data, {"num_classes": 3, "epochs": 1},
                   "every scored train pixel is class 2")


def test_masks_with_no_foreground_are_refused(tmp_path):
    data = _labels(tmp_path / "empty", (0,))
    _refused_alike("generic_segmentation", data, {"epochs": 1}, "every train label is 0")


@pytest.mark.parametrize("task", ["knn", "classification"])
def test_a_one_class_dataset_is_refused_not_scored(tmp_path_factory, task):
    """One class: every prediction is right, the probe and its baseline both 1.0. Refused."""
    root = make_shapes(tmp_path_factory.mktemp("one") / "circles", per_class=3, size=24,
                       shapes=("circle", "square"))
    for split in ("train", "val"):  # the squares gone: circles alone
        shutil.rmtree(root / split / "square")
    data = str(root)
    said = _refused_alike(task, data, {}, "the train data has 1 class \\('circle'\\)")
    assert "at least 2 classes" in said


def test_a_stored_result_is_answered_without_reading_its_label_maps(four, monkeypatch):
    """The checks that decode label maps run for a result still to compute, not for a stored one
    (a cached get reads no target file)."""
    params = {"num_classes": 4, "epochs": 1}
    first = vbstore.get_result("test_vit", "semantic_segmentation", four, four, params=params,
                               progress=False, **KW)

    def unread(files):
        raise AssertionError("a stored result's label maps were decoded")

    monkeypatch.setattr(vbstore.data, "label_values", unread)
    again = vbstore.get_result("test_vit", "semantic_segmentation", four, four, params=params,
                               progress=False, **KW)
    assert again.id == first.id
    assert again.from_cache
    # another request still reads them, and refuses what does not fit
    with pytest.raises(AssertionError, match="decoded"):
        plan(result_request("test_vit", "semantic_segmentation", four, four,
                            params={"num_classes": 5, "epochs": 1}, **KW),
             vbstore.Store(), dry_run=True)


def test_an_image_without_its_target_is_refused_alike(tmp_path):
    data = _labels(tmp_path / "missing", (0, 1, 2, 3))
    (Path(data) / "train" / "masks" / "s1.png").unlink()
    _refused_alike("semantic_segmentation", data, {"num_classes": 4, "epochs": 1},
                   "images and targets that do not pair", BadInput)


def test_k_above_the_train_split_is_refused_alike(tmp_path):
    data = str(make_shapes(tmp_path / "shapes", per_class=2, size=24))
    said = _refused_alike("knn", data, {"k": 50}, "k=50 neighbours, but the train split has 10")
    assert "give k at most 10" in said
