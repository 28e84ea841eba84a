"""The fields a VisBench record carries, in vbstore's result record: schema version, dataset name
and parameters, the pooling asked for, notes; and no time in the hashed document."""

from __future__ import annotations

import vbstore
from vbstore.engine import BackboneRequest, DataRef, ProbeRequest, ResultRequest, get
from vbstore.records import RESULT_SCHEMA_VERSION

KW = dict(split="val", weights="random", input_size=32, progress=False)


def test_a_result_names_its_dataset_pooling_and_schema_and_holds_no_time(tmp_path):
    from vbstore.data import make_shapes

    folder = make_shapes(tmp_path / "my_shapes", per_class=2, seed=0, size=32)
    result = vbstore.get_result("test_cnn", "retrieval", str(folder), limit=2, **KW)
    record = result.record
    assert record.schema_version == RESULT_SCHEMA_VERSION == 2
    assert record.dataset == "my_shapes"  # the folder's own name, not this machine's path
    assert record.dataset_params == {"limit": 2}
    assert record.pooling_requested == "default"
    assert record.extractor["pooling"] != "default"  # resolved, beside what was asked
    assert record.notes is None
    doc = result.record.to_dict()
    assert not {"timestamp", "timings", "device", "created"} & set(doc)
    assert result.run is not None  # the time lives in the registry's run log


def test_a_named_source_names_itself_and_its_options():
    name, params = DataRef("scenes:per_split=6,size=32", split="val",
                           options={"target": "depth"}).described()
    assert (name, params) == ("scenes", {"per_split": "6", "size": "32", "target": "depth"})
    assert DataRef("sklearn:digits").described() == ("sklearn:digits", {})


def test_notes_go_to_the_registry_and_a_named_pooling_makes_its_own_result(tmp_path):
    """Notes are no part of what was computed: the same computation with notes is the same
    result (answered from the store, nothing computed again), and the notes are the registry's,
    newest first, deleted with the result by gc."""
    from vbstore.data import make_shapes

    folder = str(make_shapes(tmp_path / "s", per_class=2, seed=0, size=32))
    store = vbstore.Store()

    def request(**kw):
        notes = kw.pop("notes", None)
        return ResultRequest(BackboneRequest("test_cnn", weights="random", input_size=32, **kw),
                             ProbeRequest("retrieval"), DataRef(folder, split="val"),
                             notes=notes)

    plain = get(request(), store=store, progress=False)
    assert store.notes.of(plain.id) == []
    noted = get(request(notes="rerun for the paper"), store=store, progress=False)
    assert (noted.id, noted.from_cache) == (plain.id, True)  # the same computation, stored
    assert noted.record.notes is None  # the document holds no notes
    assert store.notes.of(plain.id) == ["rerun for the paper"]
    get(request(notes="second look"), store=store, progress=False)
    get(request(notes="  "), store=store, progress=False)  # empty notes say nothing
    assert store.notes.of(plain.id) == ["second look", "rerun for the paper"]
    from vbstore.engine import run_fields

    assert run_fields(store, plain.id, plain.record)["notes"] == (
        "second look; rerun for the paper")
    other = "mean" if plain.record.extractor["pooling"] != "mean" else "gap"
    named = get(request(pooling=other), progress=False)
    assert named.record.pooling_requested == named.record.extractor["pooling"] == other
    assert named.id != plain.id


def test_a_pooling_equal_to_the_backbone_default_is_the_same_result(tmp_path):
    """Issue #27: a setting equal to its default is the same identity as leaving it out."""
    from vbstore.data import make_shapes

    folder = str(make_shapes(tmp_path / "s", per_class=2, seed=0, size=32))

    def request(**kw):
        return ResultRequest(BackboneRequest("test_vit", weights="random", input_size=32, **kw),
                             ProbeRequest("retrieval"), DataRef(folder, split="val"))

    plain = get(request(), progress=False)
    assert plain.record.extractor["pooling"] == "cls"
    named = get(request(pooling="cls"), progress=False)
    assert named.id == plain.id
    assert named.from_cache
    assert named.record.pooling_requested == "default"


def test_a_record_filed_under_other_notes_or_pooling_does_not_answer():
    """The answer check (records/answer.py) compares the notes (a key made before notes left
    it) and the named pooling a key holds with what the record says."""
    from vbstore.records import StoreReader, answer_differences

    doc = {"kind": "result", "op_version": 1, "notes": "first", "pooling_requested": "cls"}
    reader = StoreReader(None, {"r" * 64: doc})

    def spec(**params):
        return {"op": "result", "op_version": 1, "inputs": {}, "params": params}

    assert answer_differences(spec(notes="first", pooling_requested="cls"), "r" * 64,
                              reader) == []
    assert answer_differences(spec(notes="second"), "r" * 64, reader) == [
        'it says notes "first", the question "second"']
    assert answer_differences(spec(pooling_requested="gap"), "r" * 64, reader) == [
        'it says pooling_requested "cls", the question "gap"']


def test_a_recompute_compares_map_with_a_result_stored_as_mean_average_precision(tmp_path):
    """A result stored before retrieval's mAP took VisBench's name still answers its key and a
    --recompute compares its mean average precision under the new name (a wrong stored value
    is caught, not skipped for want of a common key)."""
    import pytest

    from vbstore.data import make_shapes
    from vbstore.engine import plan, result_request
    from vbstore.errors import NotReproduced

    store = vbstore.Store(tmp_path / "store")
    folder = str(make_shapes(tmp_path / "s", per_class=3, seed=0, size=32))
    first = vbstore.get_result("test_cnn", "retrieval", folder, store=store, **KW)
    the_plan = plan(result_request("test_cnn", "retrieval", folder, split="val",
                                   weights="random", input_size=32), store)
    old = store.read_json(first.id)
    metrics = {("mean_average_precision" if k == "mAP" else k): v
               for k, v in old["metrics"].items()}
    stored = store.put_json({**old, "metrics": metrics}, "result")  # as vbstore wrote it before
    store.record(the_plan.spec, stored)
    again = vbstore.get_result("test_cnn", "retrieval", folder, store=store, **KW)
    assert again.id == stored
    assert again.metrics["mAP"] == first.metrics["mAP"]
    assert vbstore.get_result("test_cnn", "retrieval", folder, store=store, recompute=True,
                              **KW).reproduced["reproduced"]
    wrong = store.put_json({**old, "metrics": {**metrics, "mean_average_precision": 0.0}},
                           "result")
    store.record(the_plan.spec, wrong)
    with pytest.raises(NotReproduced):
        vbstore.get_result("test_cnn", "retrieval", folder, store=store, recompute=True, **KW)
