"""``vbstore cache stats|clear [--backbone B] [--yes]``: VisBench's feature-cache commands over
the store's feature packs. Clearing evicts them (rows kept, blobs gone); the next request that
needs them extracts them again, and the results made from them stay."""

import json

TINY = ["--weights", "random", "--input-size", "32"]


def _retrieval(run, shapes, backbone):
    out = run("get", "result", "-b", backbone, *TINY, "-t", "retrieval", "-d", shapes,
              "--split", "val", "--json")
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def _packs(run, backbone=None):
    flags = ["--backbone", backbone] if backbone else []
    return json.loads(run("cache", "stats", *flags, "--json").stdout)["packs"]


def test_clear_one_backbone_asks_first_then_evicts_only_its_features(run, shapes):
    cnn = _retrieval(run, shapes, "test_cnn")
    _retrieval(run, shapes, "test_vit")
    assert (_packs(run, "test_cnn"), _packs(run, "custom:test_vit"), _packs(run)) == (1, 1, 2)
    asked = run("cache", "clear", "--backbone", "test_cnn")
    assert asked.exit_code == 1
    assert "Re-run with --yes" in asked.output
    assert _packs(run) == 2  # nothing went
    done = run("cache", "clear", "--backbone", "test_cnn", "--yes", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["packs"] == 1
    assert (_packs(run, "test_cnn"), _packs(run, "test_vit")) == (0, 1)
    # the result stays; a request that needs the features extracts them again
    again = _retrieval(run, shapes, "test_cnn")
    assert (again["id"], again["from_cache"]) == (cnn["id"], True)
    knn = run("get", "result", "-b", "test_cnn", *TINY, "-t", "knn", "-d", shapes, "--split",
              "val", "--train-data", shapes, "--train-split", "train", "--json")
    assert json.loads(knn.stdout)["features"]["eval"]["extracted"] > 0
    assert _packs(run, "test_cnn") == 2  # val again, and train


def test_clear_everything_and_an_unknown_backbone(run, shapes):
    _retrieval(run, shapes, "test_cnn")
    unknown = run("cache", "clear", "--backbone", "resnet_nope", "--yes")
    assert unknown.exit_code == 2
    assert "stored: custom:test_cnn" in unknown.output
    assert run("cache", "clear", "--yes").exit_code == 0
    assert _packs(run) == 0
