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


def test_captioning_keys():
    """captioning (issue 26, new in this release): the model writes, nothing is extracted, so
    its result key names no extractor; its captions are keyed by backbone, data and decoding."""
    from vbstore.engine._captions import captions_spec

    task = get_task("captioning")
    params = task.resolve_params({})
    spec = result_spec(task, params, A, B, None, None, [0], None, False)
    assert not {"extractor", "features_op_version"} & set(spec["params"])
    assert derivation_key(spec) == (
        "3b3c61cb2ad8a58604f7783b2fccec7bb729d14b93a491927418035572c39e8e"
    )
    assert derivation_key(captions_spec(A, B, task.decoding(params))) == (
        "619d451752d1c943e72d4b7177e2bfce46d8a32ac88e849987ee5a25484e0848"
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


# Issue 23 (docs/formats.md, "VisBench's numbers under VisBench's names"): these versions moved
# to 2 because the numbers (or the record) under VisBench's names changed; every other task kept
# its version, so its keys (test_result_keys above: knn) are as they were.
OP_VERSIONS = {
    # 2: VisBench's defaults (200 epochs, wd 1e-4, standardize off; no top5 <= 5); 3 (issue 36):
    # the linear recipe in numpy, its own draws and rounding (multilabel 1 -> 2 with it)
    "classification": 3,
    "corner": 2, "edge": 2, "keypoints2d": 2, "occlusion_edge": 2,  # per image; visbench_* names
    "depth": 2, "surface_normal": 2, "generic_segmentation": 2,  # per image; non-zero = foreground
    "detection": 2,  # protocol visbench_anchor_free_det
    "correspondence": 2,  # VisBench's auc@T: the recall curve interpolated, at every threshold
    "instance_segmentation": 1, "keypoint_correspondence": 1, "knn": 1,
    "multilabel": 2, "orientation": 1, "relative_pose": 1, "retrieval": 1,
    "semantic_segmentation": 1, "similarity": 1, "zeroshot_classification": 1,
    "zeroshot_multilabel": 1, "zeroshot_retrieval": 1,
    "linear_probe": 1, "image_caption_selection": 1, "captioning": 1,  # issue 26's, new at 1
    # issue 35's VisBench questions: new, with the versions of the probe they share
    "scene_classification": 3, "fine_grained_classification": 3, "vehicle_classification": 3,
    "scene_parsing": 1,
}


def test_op_versions_after_visbenchs_numbers():
    from vbstore.tasks import list_tasks

    assert {name: get_task(name).op_version for name in list_tasks()} == OP_VERSIONS


def test_result_keys_of_the_bumped_defaults():
    """The keys a default request of a bumped task has now (a new derivation: the old ones,
    op_version 1 and the old defaults, still answer the requests they answered)."""
    dense = ExtractorParams(layers=(-1,), pooling="mean", mode="dense", precision="fp32",
                            input_size=32)
    for name, extractor, key in (
        ("classification", EXT,  # op_version 3 (b999c072... at op_version 2: see below)
         "e5dcf5490ae3af7856542acc1d614c087007aebbfc7a0d5afaee3bc4bb5f9fb6"),
        ("depth", dense, "01fe29486ee83fcdda1b08bb0a6327c83220a5017eb8dcf56a7f76612af60666"),
        ("generic_segmentation", dense,
         "394cfc8027c9d6152f304eb03b7fd9f36411cbdddd0ba706b889db2f04f2f140"),
    ):
        task = get_task(name)
        spec = result_spec(task, task.resolve_params({}), A, B, C, None, [0], extractor, True)
        assert derivation_key(spec) == key, name


def test_classification_result_key_moved_with_its_op_version():
    """classification's op_version 3 (the recipe in numpy, issue 36): a default request is a new
    derivation; the key op_version 2's result is stored under is the one pinned before."""
    task = get_task("classification")
    spec = result_spec(task, task.resolve_params({}), A, B, C, None, [0], EXT, True)
    assert derivation_key({**spec, "op_version": 2}) == (  # the key before the bump
        "b999c072679764a89a2f69ef2d83577da2fd1e9612f8c5c97bdb80ee03bb29dd"
    )


def test_correspondence_result_key_moved_with_its_op_version():
    """correspondence's op_version 2 (VisBench's ``auc@T``, docs/formats.md): a default request
    is a new derivation (the first key); the key an op_version 1 store holds its result under
    (the second, computed before the bump) is another, so that result is never read as op_version
    2's numbers."""
    dense = ExtractorParams(layers=(-1,), pooling="mean", mode="dense", precision="fp32",
                            input_size=32)
    task = get_task("correspondence")
    spec = result_spec(task, task.resolve_params({}), A, B, None, None, [0], dense, True)
    assert derivation_key(spec) == (
        "50e936172139459f884092f0b3b18f4c53094b7bb0e0daf0644f2192bc699ae4"
    )
    assert derivation_key({**spec, "op_version": 1}) == (  # the key before the bump
        "859dccd8bed81843b4fdd9c1e18744290bb031a2ce173d33fa98556c1df3e4c7"
    )


def test_a_named_pooling_enters_the_key_only_when_given_and_notes_never():
    """Notes are the registry's (Store.add_note): the key and the document hold only what was
    computed and from what."""
    import inspect

    knn = get_task("knn")
    params = knn.resolve_params({"k": 3})
    plain = result_spec(knn, params, A, B, C, None, [0], EXT, True, pooling_requested=None)
    assert derivation_key(plain) == (  # test_result_keys' key: unchanged
        "6b99d1dff944592c07a08166f1d9ea09fda87b5dcca551e645cc007a18012c5f"
    )
    named = result_spec(knn, params, A, B, C, None, [0], EXT, True, pooling_requested="mean")
    assert derivation_key(named) != derivation_key(plain)
    assert "notes" not in inspect.signature(result_spec).parameters
