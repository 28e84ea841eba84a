"""Data options belong to the data: a target kind's options (target_scale) are checked at plan
time, before anything is stored, and a dataset may state them itself (targets.json)."""

from __future__ import annotations

import re
import shutil

import pytest

import vbstore
from vbstore import Store
from vbstore.data import get_target_kind, make_scenes
from vbstore.engine import BackboneRequest, DataRef, ProbeRequest, ResultRequest, plan
from vbstore.errors import UsageError

DEPTH = {"target": "depth"}
KW = dict(split="val", train_split="train", weights="random", progress=False)


@pytest.fixture(scope="module")
def unstated(tmp_path_factory):
    """A scenes folder without its targets.json: 16-bit depth PNGs in an unknown unit."""
    root = make_scenes(tmp_path_factory.mktemp("d") / "scenes", per_split=3, size=32)
    (root / "targets.json").unlink()
    return str(root)


def test_depth_without_a_scale_is_refused_before_anything_is_stored(unstated, forwards):
    store = Store()
    before = {o.id for o in store.ls()}
    # the Python API names the argument (params=...), as vbstore/_api.py words it
    with pytest.raises(UsageError, match=re.escape("params={'target_scale': 1000}")):
        vbstore.get_result("test_vit", "depth", unstated, unstated, store=store,
                           data_options=DEPTH, params={"epochs": 1}, **KW)
    assert forwards == []  # no backbone ran
    assert {o.id for o in store.ls()} == before  # no manifest, featureset or head stored


def test_a_dry_run_refuses_it_too(unstated):
    request = ResultRequest(BackboneRequest("test_vit", weights="random"),
                            ProbeRequest("depth", params={"epochs": 1}),
                            DataRef(unstated, split="val", options=DEPTH),
                            DataRef(unstated, split="train", options=DEPTH))
    with pytest.raises(UsageError, match="depth PNGs"):
        plan(request, dry_run=True)


def test_the_scale_as_a_data_option_gives_the_key_of_the_task_parameter(unstated):
    """-p target_scale=1000 and DataRef(options={"target_scale": 1000}) are one request."""
    def planned(params, options):
        return plan(ResultRequest(BackboneRequest("test_vit", weights="random"),
                                  ProbeRequest("depth", params=params),
                                  DataRef(unstated, split="val", options=options),
                                  DataRef(unstated, split="train", options=options)),
                    dry_run=True)

    as_param = planned({"target_scale": 1000.0, "epochs": 1}, DEPTH)
    as_data = planned({"epochs": 1}, {**DEPTH, "target_scale": 1000})
    assert as_param.task_params == as_data.task_params
    assert as_param.task_params["target_scale"] == 1000.0


def test_scenes_state_their_depth_unit(tmp_path):
    """Generated scenes say their depth PNGs are millimetres: no -p target_scale, and the same
    result as the request that passes it."""
    scenes = "scenes:per_split=4,size=32"
    stated = vbstore.get_result("test_vit", "depth", scenes, scenes, data_options=DEPTH,
                                params={"epochs": 1}, **KW)
    given = vbstore.get_result("test_vit", "depth", scenes, scenes, data_options=DEPTH,
                               params={"epochs": 1, "target_scale": 1000.0}, **KW)
    assert stated.record.params["target_scale"] == 1000.0
    assert given.from_cache
    assert given.id == stated.id


def test_train_and_eval_stating_different_scales_are_refused(unstated, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(unstated, other)
    (other / "targets.json").write_text('{"depth": {"target_scale": 512}}')
    (tmp_path / "mm").mkdir()
    with pytest.raises(UsageError, match="different target_scale"):
        plan(ResultRequest(BackboneRequest("test_vit", weights="random"),
                           ProbeRequest("depth", params={"epochs": 1}),
                           DataRef(str(other), split="val", options=DEPTH),
                           DataRef(unstated, split="train",
                                   options={**DEPTH, "target_scale": 1000})), dry_run=True)


def test_the_kinds_declare_their_options():
    assert get_target_kind("depth_map").option_names() == ("target_scale",)
    assert get_target_kind("label_map").option_names() == ("ignore_index",)
    assert get_target_kind("class_index").option_names() == ()
