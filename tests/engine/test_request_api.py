"""The Python API takes request objects: ``vbstore.get(request)``; ``get_result`` and
``get_head`` are keyword builders of the same requests, and a plan names its shape's runner."""

from __future__ import annotations

import pytest

import vbstore
from vbstore.engine import (
    BackboneRequest,
    DataRef,
    HeadRequest,
    ProbeRequest,
    ResultRequest,
    plan,
)
from vbstore.errors import UsageError

BACKBONE = BackboneRequest("test_cnn", weights="random", input_size=32)


def test_a_result_request_and_its_keyword_form_are_one_result(store, shapes):
    request = ResultRequest(BACKBONE, ProbeRequest("knn", params={"k": 5}),
                            DataRef(shapes, split="val"), DataRef(shapes, split="train"))
    first = vbstore.get(request, store=store, progress=False)
    again = vbstore.get_result("test_cnn", "knn", shapes, shapes, store=store, split="val",
                               train_split="train", weights="random", input_size=32,
                               params={"k": 5}, progress=False)
    assert again.from_cache
    assert again.id == first.id


def test_a_head_request_trains_the_head_get_head_returns(store, shapes):
    request = HeadRequest(BACKBONE, ProbeRequest("classification", params={"epochs": 2}),
                          DataRef(shapes, split="train"))
    head = vbstore.get(request, store=store, progress=False)
    again = vbstore.get_head("test_cnn", "classification", shapes, store=store,
                             train_split="train", weights="random", input_size=32,
                             params={"epochs": 2}, progress=False)
    assert again.from_cache
    assert again.id == head.id


def test_a_head_request_for_a_zero_shot_task_is_refused(shapes):
    with pytest.raises(UsageError, match="zero-shot and has no head"):
        HeadRequest(BACKBONE, ProbeRequest("retrieval"), DataRef(shapes, split="train"))


@pytest.mark.parametrize(("task", "runner"), [("knn", "pooled"), ("retrieval", "zero_shot")])
def test_the_plan_holds_the_runner_of_the_task_shape(store, shapes, task, runner):
    train = DataRef(shapes, split="train") if task == "knn" else None
    the_plan = plan(ResultRequest(BACKBONE, ProbeRequest(task), DataRef(shapes, split="val"),
                                  train), store, dry_run=True)
    assert the_plan.runner.shape == runner  # the plan holds the runner itself
    assert the_plan.as_dict()["runner"] == runner
