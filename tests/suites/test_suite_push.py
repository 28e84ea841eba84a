import json

import pytest
from suites_support import road_test

from vbstore.errors import SchemaError, SuiteConflict, SuiteNotFound, UsageError
from vbstore.suites import get_suite, list_suites, protocol_digest, push_suite, read_suite_file


def test_push_is_idempotent_and_a_changed_protocol_is_refused(store):
    first, new = push_suite(store, road_test())
    again, new_again = push_suite(store, road_test())
    assert new
    assert not new_again
    assert again.id == first.id
    assert again.ref == "road-test@1"
    changed = road_test(params={"lr": 0.01})
    with pytest.raises(SuiteConflict) as info:
        push_suite(store, changed)
    assert '"version": 2' in str(info.value)
    assert info.value.exit_code == 11
    assert get_suite(store, "road-test@1").params == {"lr": 0.001}  # unchanged
    second, _ = push_suite(store, {**changed, "version": 2})
    assert get_suite(store, "road-test").id == second.id  # latest version without @
    assert [s["ref"] for s in list_suites(store)] == ["road-test@1", "road-test@2"]
    with pytest.raises(SuiteConflict) as info:  # the next free version, not version + 1
        push_suite(store, road_test(params={"lr": 0.5}))
    assert info.value.next_version == 3


def test_defaults_filled_and_digest_is_sha256_of_sorted_compact_json(store):
    suite, _ = push_suite(store, road_test())
    protocol = suite.protocol
    assert protocol["aggregation"] == "equal-mean-of-conditions"
    assert protocol["metrics"][1]["headline"] is False
    assert suite.weights == "pretrained"
    assert "params" not in protocol  # vbstore's own fields are in the extension block
    import hashlib

    expected = hashlib.sha256(
        json.dumps(protocol, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    ).hexdigest()
    assert suite.digest == protocol_digest(protocol) == expected
    # key order in the file does not change the digest
    reordered = json.loads(json.dumps(road_test()["protocol"]))
    reordered = dict(reversed(list(reordered.items())))
    assert push_suite(store, {**road_test(), "protocol": reordered})[0].id == suite.id


def test_integer_versions_and_slugs_are_the_format(store):
    with pytest.raises(SchemaError):
        push_suite(store, {**road_test(), "version": "1"})
    with pytest.raises(SchemaError):
        push_suite(store, {**road_test(), "slug": "Road Test"})
    two = road_test()
    two["protocol"]["metrics"][1]["headline"] = True
    with pytest.raises(UsageError, match="exactly one headline"):
        push_suite(store, two)
    with pytest.raises(SuiteNotFound) as info:
        get_suite(store, "road-test@9")
    assert info.value.exit_code == 9


def test_yaml_suite_file(tmp_path, store):
    yaml = pytest.importorskip("yaml")
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(road_test()))
    assert (
        push_suite(store, read_suite_file(path))[0].digest
        == push_suite(store, road_test())[0].digest
    )


def test_suite_new_pins_a_templates_file_by_content(store, tmp_path):
    """A suite written from a templates file carries its content id, never the local path."""
    from vbstore.data import make_shapes
    from vbstore.suites import new_suite

    data = str(make_shapes(tmp_path / "shapes", per_class=2, seed=0, size=16))
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("a photo of a {c}.\nart of the {c}.\n")
    doc = new_suite(store, slug="zs", task="zeroshot_classification", data=data, split="val",
                    params={"templates": str(prompts)})
    pinned = doc["vbstore"]["params"]["templates"]
    assert str(prompts) not in json.dumps(doc)
    assert json.loads(store.read_bytes(pinned)) == ["a photo of a {c}.", "art of the {c}."]
    moved = tmp_path / "elsewhere.txt"
    moved.write_text(prompts.read_text())
    again = new_suite(store, slug="zs", task="zeroshot_classification", data=data, split="val",
                      params={"templates": str(moved)})
    assert again["protocol"] == doc["protocol"]
    assert again["vbstore"] == doc["vbstore"]


def test_suite_new_refuses_a_slug_push_would_refuse(store, tmp_path):
    from vbstore.data import make_shapes
    from vbstore.suites import new_suite

    data = str(make_shapes(tmp_path / "shapes", per_class=2, seed=0, size=16))
    with pytest.raises(SchemaError, match="at slug"):
        new_suite(store, slug="Bad_Slug", task="knn", data=data, split="val")
    doc = new_suite(store, slug="good-slug", task="knn", data=data, split="val")
    assert push_suite(store, doc)[1]
