"""The plan is the program: execute derives under the keys the plan made, a computed result is
returned as computed (never read back), and features go request -> plan -> execute too."""

from dataclasses import replace

import pytest

import vbstore
from vbstore.engine import (
    BackboneRequest,
    DataRef,
    FeaturesRequest,
    ProbeRequest,
    ResultRequest,
    execute,
    execute_features,
    plan,
    plan_features,
)
from vbstore.errors import UsageError
from vbstore.records import ResultRecord
from vbstore.tasks import get_task

FAKE = "f" * 64  # a key no spec hashes to


def knn_request(shapes, **params):
    return ResultRequest(BackboneRequest("test_vit", weights="random", input_size=32),
                         ProbeRequest("knn", params={"k": 3, **params}),
                         DataRef(shapes, split="val"), DataRef(shapes, split="train"))


def test_execute_derives_under_the_keys_the_plan_made(store, shapes):
    """A step's key is the plan's: execute records each derivation under it, never a key of
    its own making (a tampered key shows it)."""
    the_plan = plan(knn_request(shapes), store)
    keys = {(s.op, s.role): s.key for s in the_plan.steps}
    assert keys[("featureset", "eval")]
    assert keys[("featureset", "train")]
    assert keys[("result", "")]
    assert keys[("head", "seed 0")] is None  # its features are not extracted yet
    i = next(i for i, s in enumerate(the_plan.steps) if (s.op, s.role) == ("featureset", "eval"))
    the_plan.steps[i] = replace(the_plan.steps[i], key=FAKE)
    result = execute(the_plan, progress=False)
    assert store.lookup(FAKE) == result.record.inputs["eval_features"]
    assert FAKE in result.computed
    assert keys[("result", "")] in result.computed
    assert store.lookup(keys[("result", "")]) == result.id


def test_a_head_over_stored_features_is_keyed_by_the_plan(store, shapes):
    execute(plan(knn_request(shapes), store), progress=False)
    the_plan = plan(knn_request(shapes, k=5), store)  # the same features, another head
    i = next(i for i, s in enumerate(the_plan.steps) if (s.op, s.role) == ("head", "seed 0"))
    head = the_plan.steps[i]
    assert head.status == "compute"
    assert head.key
    assert [s.get("key") for s in the_plan.as_dict()["steps"] if s["op"] == "head"] == [head.key]
    the_plan.steps[i] = replace(head, key=FAKE)
    result = execute(the_plan, progress=False)
    assert store.lookup(FAKE) == result.record.inputs["head"]
    assert store.lookup(head.key) is None  # recorded under the plan's key only


def test_a_computed_result_is_returned_as_computed_not_read_back(store, shapes, monkeypatch):
    read = []
    real = type(store).read_json

    def reading(self, oid, *args, **kwargs):
        read.append(oid)
        return real(self, oid, *args, **kwargs)

    monkeypatch.setattr(type(store), "read_json", reading)
    result = execute(plan(knn_request(shapes), store), progress=False)
    assert not result.from_cache
    assert result.id not in read  # written once, never read back on the way out
    monkeypatch.undo()
    stored = ResultRecord.from_dict(store.read_json(result.id))
    assert result.record == stored  # what was returned is exactly what was stored
    assert result.record.to_dict() == store.read_json(result.id)


@pytest.mark.parametrize(("task", "params"), [("classification", {"epochs": 2}),
                                              ("retrieval", {})])
def test_the_returned_record_is_the_stored_one_for_other_shapes(store, shapes, task, params):
    takes_train = get_task(task).shape_spec.trains_head
    request = ResultRequest(BackboneRequest("test_vit", weights="random", input_size=32),
                            ProbeRequest(task, params=params, seeds=2),
                            DataRef(shapes, split="val"),
                            DataRef(shapes, split="train") if takes_train else None)
    result = execute(plan(request, store), progress=False)
    assert result.record.to_dict() == store.read_json(result.id)


def test_features_go_request_plan_execute(store, shapes, forwards):
    request = FeaturesRequest(BackboneRequest("test_vit", weights="random", input_size=32),
                              DataRef(shapes, split="val"))
    first_plan = plan_features(request, store)
    assert [(s.op, s.status) for s in first_plan.steps] == [
        ("backbone", "stored"), ("manifest", "stored"), ("featureset", "compute")]
    step = first_plan.featureset
    assert step.key
    assert step.work["forward_passes"] == 30
    first = execute_features(first_plan, progress=False)
    assert not first.from_cache
    assert first.stats["extracted"] == 30
    assert store.lookup(step.key) == first.id
    forwards.clear()
    again = plan_features(request, store)
    assert (again.featureset.status, again.featureset.id) == ("stored", first.id)
    got = vbstore.get(request, store=store, progress=False)  # the one entry point
    assert (got.id, got.from_cache, forwards) == (first.id, True, [])
    keywords = vbstore.get_features("test_vit", shapes, split="val", weights="random",
                                    input_size=32, store=store, progress=False)
    assert keywords.id == first.id
    with pytest.raises(UsageError, match="featureset is not recomputed"):
        vbstore.get(request, store=store, recompute=True)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["depth", "detection", "correspondence", "relative_pose",
                                  "similarity"])
def test_the_returned_record_is_the_stored_one_for_every_shape(store, task):
    """dense, boxes, views, pairs and triplets: the record returned is the stored document."""
    from vbstore.engine import demo_setup, result_request

    s = demo_setup(task, 4, 32, 0)
    epochs = {"epochs": 1} if "epochs" in get_task(task).params else {}
    request = result_request("test_vit", task, s.data, s.data if s.train_split else None,
                             split=s.split, train_split=s.train_split, weights="random",
                             input_size=32, params={**s.params, **epochs}, data_options=s.options)
    result = execute(plan(request, store), progress=False)
    assert not result.from_cache
    assert result.record.to_dict() == store.read_json(result.id)
    assert result.record == ResultRecord.from_dict(store.read_json(result.id))


def test_a_trained_head_is_returned_as_made(store, shapes, monkeypatch):
    from vbstore import heads
    from vbstore.heads import _record

    read = []
    real = heads.head_record
    spy = lambda s, oid: read.append(oid) or real(s, oid)  # noqa: E731
    monkeypatch.setattr(heads, "head_record", spy)  # what the engine imports
    monkeypatch.setattr(_record, "head_record", spy)  # what head_compat reads through
    trained = vbstore.get_head("test_vit", "knn", shapes, train_split="train", weights="random",
                               input_size=32, store=store, progress=False)
    assert not trained.from_cache
    assert trained.id not in read  # not read back
    assert trained.record == heads.head_compat(store, trained.id)
    again = vbstore.get_head("test_vit", "knn", shapes, train_split="train", weights="random",
                             input_size=32, store=store, progress=False)
    assert (again.from_cache, again.record) == (True, trained.record)
