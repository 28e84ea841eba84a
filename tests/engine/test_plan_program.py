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


def _recording(the_plan, made):
    """``the_plan`` with each step's maker wrapped to note ``(op, role)`` when execute calls it."""
    def wrap(step):
        inner = step.make

        def make(p, run, s):
            made.append((s.op, s.role))
            return inner(p, run, s)

        return replace(step, make=make)

    the_plan.steps[:] = [wrap(s) if s.make is not None else s for s in the_plan.steps]
    return the_plan


def test_execute_walks_the_plan_steps_in_order(store, shapes):
    """Execute makes each step through the maker it carries, top-down, then scores: the plan
    is the program, not a key cache (a step's maker replaced is the one that runs)."""
    request = knn_request(shapes)
    request = replace(request, probe=replace(request.probe, seeds=2))
    made: list[tuple[str, str]] = []
    the_plan = _recording(plan(request, store), made)
    # what the planner resolved itself (backbone, the request's manifests) and the result
    # (derived around the walk) carry no maker
    assert [(s.op, s.role) for s in the_plan.steps if s.make is None] == [
        ("backbone", ""), ("manifest", "eval"), ("manifest", "train"), ("result", "")]
    result = execute(the_plan, progress=False)
    assert made == [("featureset", "eval"), ("featureset", "train"),
                    ("head", "seed 0"), ("head", "seed 1")]
    assert result.record.inputs["head.1"]
    # a cached answer walks nothing
    made.clear()
    again = execute(_recording(plan(request, store), made), progress=False)
    assert (again.id, again.from_cache, made) == (result.id, True, [])


def test_a_step_is_made_by_the_maker_it_carries(store, shapes):
    the_plan = plan(knn_request(shapes), store)
    i = next(i for i, s in enumerate(the_plan.steps) if (s.op, s.role) == ("head", "seed 0"))

    def refuse(p, run, step):
        raise UsageError(f"made by the plan's step {step.op} ({step.role})")

    the_plan.steps[i] = replace(the_plan.steps[i], make=refuse)
    with pytest.raises(UsageError, match=r"made by the plan's step head \(seed 0\)"):
        execute(the_plan, progress=False)


def test_a_head_plan_and_a_views_plan_are_walked_too(store, shapes):
    made: list[tuple[str, str]] = []
    head_plan = vbstore.engine.plan_head(vbstore.engine.HeadRequest(
        BackboneRequest("test_vit", weights="random", input_size=32),
        ProbeRequest("knn", params={"k": 3}), DataRef(shapes, split="train")), store)
    head = vbstore.engine.execute_head(_recording(head_plan, made), progress=False)
    assert made == [("featureset", "train"), ("head", "seed 0")]
    assert head.id == head_plan.store.lookup(  # the walked head step's key
        next(s for s in plan(knn_request(shapes), store).steps if s.op == "head").key)
    made.clear()
    views = ResultRequest(BackboneRequest("test_vit", weights="random", input_size=32),
                          ProbeRequest("correspondence"), DataRef(shapes, split="val"))
    execute(_recording(plan(views, store), made), progress=False)
    assert made == [("featureset", "eval"), ("manifest", "views"), ("featureset", "views")]
