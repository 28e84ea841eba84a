"""Golden values: derivation keys, tensor identity and float formatting never drift silently.

Every stored result is found again by its derivation key, so a change to how a key is built
throws away everyone's cache. These values were computed before the typed-engine change and
checked against the untyped engine on the same request; a change here must be an explicit
``op_version`` or ``RECORD_VERSION`` bump, documented in docs/formats.md.
"""

import numpy as np

from vbstore import canonical
from vbstore.engine._features import featureset_spec
from vbstore.engine._plan import head_spec, result_spec
from vbstore.features import ExtractorParams
from vbstore.store import derivation_key, tensor_identity
from vbstore.tasks import get_task

A, B, C, D = "a" * 64, "b" * 64, "c" * 64, "d" * 64
EXT = ExtractorParams(layers=(-1,), pooling="gap", mode="pooled", precision="fp32", input_size=32)


def test_result_keys():
    knn = get_task("knn")
    trained = result_spec(knn, knn.resolve_params({"k": 3}), A, B, C, None, [0], EXT, True)
    assert derivation_key(trained) == (
        "6b99d1dff944592c07a08166f1d9ea09fda87b5dcca551e645cc007a18012c5f"
    )
    with_head = result_spec(knn, knn.resolve_params({}), A, B, None, D, [0, 1], EXT, False)
    assert derivation_key(with_head) == (
        "bb2fec21ac1bd8c9475e6bbc773c18f27d061175566078781d3ef406dd5dc5a2"
    )


def test_head_and_featureset_keys():
    knn = get_task("knn")
    head = head_spec(knn, knn.resolve_params({}), C, 0)
    assert derivation_key(head) == (
        "cf37e3f1994cd5bc614f3f637ae2f5fb9d767026a24c1821ec19c2659fe781e4"
    )
    features = featureset_spec(A, B, EXT)
    assert derivation_key(features) == (
        "32f638a00d4eb5b94421f34810bcd926ec006e689bf836a258a1d85d82e19560"
    )


def test_tensor_identity():
    tensors = {"w": np.array([[1, 2], [3, 4]], np.float32), "b": np.array([7], np.int64)}
    assert tensor_identity(tensors) == (
        "f2633d255e04b1e93e3e47cd64cf290938597773dac296b24b5a180ba3420cc6"
    )


def test_float_formatting():
    doc = {"a": 0.1, "b": 1e-07, "c": 1.0, "d": 2.5e16, "e": -0.0, "f": 1 / 3}
    assert canonical.dumps(doc) == (
        b'{"a":0.1,"b":1e-07,"c":1.0,"d":2.5e+16,"e":-0.0,"f":0.3333333333333333}'
    )


def test_result_ids_hold_no_run():
    """Result ids: since registry migration 5 (docs/formats.md, "Result ids and the run log") a
    result document holds no ``timings``, ``device`` or ``features_from_cache`` (they are the
    registry's ``runs`` rows), so the id of every result computed since then changed once, and
    one computation has one id in any store. Derivation keys did not change (above), neither
    ``op_version`` nor ``RECORD_VERSION`` moved, and an old store's derivation rows still point
    at their old results."""
    from vbstore.records import ResultRecord

    record = ResultRecord(task="knn", op_version=1, metrics={"top1": 0.5}, params={"k": 20},
                          inputs={"backbone": A, "eval_manifest": B}, seed=0, seeds=[0],
                          versions={"vbstore": "0.1.0"}, comparable=True)
    doc = {**record.to_dict(), "kind": "result"}
    assert not {"timings", "device", "features_from_cache"} & set(doc)
    assert canonical.key_of(doc) == (
        "a209b85524ff200e9dd904c070baa730de0f49ebccf7a4b6fa05142064c380f3"  # its stored id
    )
