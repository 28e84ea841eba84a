"""A task on data with another kind of targets is refused as that, before anything is stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import vbstore
from vbstore.cli import cli
from vbstore.data import TargetsSeen, target_kind
from vbstore.engine._targets import check_targets
from vbstore.errors import UsageError
from vbstore.tasks import get_task

SCENES = "scenes:per_split=4,size=32"
KW = dict(split="val", train_split="train", weights="random", input_size=32, progress=False)


def _objects(store) -> list[Path]:
    return [p for p in (store.root / "objects").rglob("*") if p.is_file()]


def test_semantic_segmentation_on_depth_maps_names_the_target_and_the_task(tmp_path):
    for extra in ([], ["-p", "num_classes=4"]):  # without num_classes it used to ask for that
        result = CliRunner().invoke(cli, [
            "--store", str(tmp_path / "s"), "get", "result", "-b", "test_cnn", "--weights",
            "random", "--input-size", "32", "-t", "semantic_segmentation", "-d", SCENES,
            "--split", "val", "--train-data", SCENES, "--train-split", "train",
            "--target", "depth", *extra])
        assert result.exit_code == 2, result.output
        assert result.output.count("\n") == 1, result.output
        assert ("task 'semantic_segmentation' needs label maps (a class index per pixel) as "
                "targets, but the targets of --data are depth maps (depth)") in result.output
        assert "--target labels" in result.output
        assert "run a task made for depth maps: depth" in result.output
        assert "num_classes" not in result.output
    with vbstore.Store(tmp_path / "s") as store:
        assert _objects(store) == []  # not a manifest, not a backbone


@pytest.mark.parametrize(("task", "target", "need", "have", "fix"), [
    ("depth", "labels", "depth maps", "label maps (labels)", "data_options={'target': 'depth'}"),
    ("knn", "depth", "one class label per image", "depth maps (depth)", "tasks made for"),
    ("surface_normal", "edges", "surface-normal maps", "continuous per-pixel maps (edges)",
     "data_options={'target': 'normals'}"),
    ("detection", "normals", "boxes", "surface-normal maps (normals)",
     "data_options={'target': 'boxes'}"),
])
def test_any_task_on_another_kind_of_targets_is_refused(store, task, target, need, have, fix):
    with pytest.raises(UsageError) as caught:
        vbstore.get_result("test_cnn", task, SCENES, SCENES, store=store,
                           data_options={"target": target}, **KW)
    message = str(caught.value)
    # the Python API names its arguments, not the command line's flags
    assert f"task {task!r} needs {need} as targets, but the targets of data= are {have}" \
        in message
    assert fix.replace("tasks made for", "a task made for") in message
    assert caught.value.exit_code == 2
    assert _objects(store) == []


def test_the_training_split_is_checked_too_and_named(store):
    request = vbstore.engine.ResultRequest(  # eval on label maps, train on depth maps
        vbstore.engine.BackboneRequest("test_cnn", weights="random", input_size=32),
        vbstore.engine.ProbeRequest("semantic_segmentation", params={"num_classes": 4}),
        vbstore.engine.DataRef(SCENES, split="val", options={"target": "labels"}),
        vbstore.engine.DataRef(SCENES, split="train", options={"target": "depth"}))
    with pytest.raises(UsageError, match="the targets of --train-data are depth maps"):
        vbstore.engine.plan(request, store)
    assert _objects(store) == []  # the eval manifest was listed, not stored: nothing was


def test_target_kinds_of_known_folders_and_what_each_task_reads():
    assert target_kind("depth") == target_kind("depth_zbuffer") == "depth_map"
    assert target_kind("labels_40") == target_kind("SegmentationClass") == "label_map"
    assert target_kind("class") == "class_index"
    assert target_kind("my_targets") is None  # not judged
    unknown = TargetsSeen("my_targets", None, {})
    check_targets(get_task("semantic_segmentation"), unknown, "--data")  # passes
    single = TargetsSeen("class", "class_index", {})
    check_targets(get_task("multilabel"), single, "--data")  # one-hot rows are multi-hot
    with pytest.raises(UsageError, match="see what each task reads"):
        check_targets(get_task("depth"), TargetsSeen("image", "image", {}), "--data")
