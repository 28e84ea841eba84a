"""The compiled checks of long arrays' items (vbstore/store/_fastschema.py) against jsonschema:
they may only say yes where jsonschema does, and a refused document is still refused by
jsonschema with its own error."""

from __future__ import annotations

import copy
import json
import random

import jsonschema
import pytest

from vbstore.errors import SchemaError
from vbstore.store._fastschema import compile_schema, long_arrays
from vbstore.store._schemas import schema_text, validate

H = "ab" * 32
SAMPLES = [
    {"name": "a/x.png", "image": H, "label": 0},
    {"name": "b.png", "image": H, "labels": [0, 3], "condition": "fog"},
    {"name": "c.png", "image": H, "target": H, "target_name": "t/c.png"},
    {"name": "d.png", "image": H, "captions": ["a cat", "a dog"]},
]
BAD_VALUES = [None, True, False, 0, -1, 1.0, 1.5, "", "x", "A" * 64, H.upper(), [], [1, 1],
              [0, True], [1.0, 1], ["a"], [""], {}, {"k": 1}]


def mutations(sample, rng):
    """The sample with one field dropped, replaced by an odd value, or a field added."""
    out = []
    for key in sample:
        out.append({k: v for k, v in sample.items() if k != key})
        for value in rng.sample(BAD_VALUES, 6):
            out.append({**sample, key: copy.deepcopy(value)})
    for key in ("label", "labels", "target", "target_name", "captions", "other"):
        out.append({**sample, key: copy.deepcopy(rng.choice(BAD_VALUES))})
    return out


@pytest.mark.parametrize("kind", ["manifest", "result"])
def test_the_compiled_items_check_says_yes_only_where_jsonschema_does(kind):
    schema = json.loads(schema_text(kind))
    arrays = long_arrays(schema)
    rng = random.Random(0)  # noqa: S311 - test data, not a secret
    for name, check in arrays.items():
        items = schema["properties"][name]["items"]
        validator = jsonschema.Draft202012Validator(items)
        cases = [copy.deepcopy(s) for s in SAMPLES] if kind == "manifest" else [{}]
        for sample in list(cases):
            cases += mutations(sample, rng)
        cases += copy.deepcopy(BAD_VALUES)
        agree = [(case, check(case), validator.is_valid(case)) for case in cases]
        assert [a for a in agree if a[1] != a[2]] == []
        assert any(ok for _, ok, _ in agree)
        assert not all(ok for _, ok, _ in agree)


def test_the_manifest_samples_are_compiled():
    assert set(long_arrays(json.loads(schema_text("manifest")))) >= {"samples"}


def test_a_keyword_not_compiled_leaves_it_to_jsonschema():
    assert compile_schema({"type": "string", "format": "date"}) is None
    assert compile_schema({"type": ["string", "null"]}) is None
    schema = {"properties": {"xs": {"type": "array", "items": {"type": "integer"}},
                             "ys": {"type": "array", "items": {"type": "integer"},
                                    "uniqueItems": True},
                             "zs": {"type": "array", "items": {"type": "integer"}}},
              "if": {"properties": {"zs": {"minItems": 3}}}}
    assert set(long_arrays(schema)) == {"xs"}  # ys: a whole-array keyword; zs: named elsewhere


def test_a_stored_manifest_takes_the_quick_path_and_a_bad_sample_is_still_refused(tmp_path):
    from vbstore import Store
    from vbstore.data import load_manifest, make_shapes
    from vbstore.store._schemas import _valid_quickly

    with Store(tmp_path / "store") as store:
        view = load_manifest(store, make_shapes(tmp_path / "shapes", per_class=3, size=16),
                             split="train")
        doc = store.read_json(view.id)
    assert len(doc["samples"]) > 2
    assert _valid_quickly("manifest", doc)
    validate("manifest", doc)
    doc["samples"][2]["image"] = "nothex"
    assert not _valid_quickly("manifest", doc)
    with pytest.raises(SchemaError, match=r"samples\[2\]\.image"):
        validate("manifest", doc)
