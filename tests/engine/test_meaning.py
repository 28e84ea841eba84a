"""An answer is checked against its question (issue 21): a derivation's output is served or
recorded only when what it declares (task, parameters, inputs, extractor, rows) is what was
asked, locally, from a pulled ref or from a remote's binary cache; every derivation row says
where it came from.

Each test is the attack the issue reproduced, with test_vit random weights and digits.
"""

from __future__ import annotations

import json
import logging

import pytest
from click.testing import CliRunner

from vbstore import Store
from vbstore.cli import cli
from vbstore.engine import get_result, plan
from vbstore.engine._results import result_request
from vbstore.errors import MisfiledAnswer
from vbstore.remotes import add_remote, pull, push
from vbstore.store import derivation_key

LIMIT = 12  # per class: 120 train and 120 eval images, enough for k=20 to differ from k=5


def _ask(store, k: int):
    return get_result("test_vit", "knn", "sklearn:digits", "sklearn:digits", split="val",
                      train_split="train", limit=LIMIT, train_limit=LIMIT, weights="random",
                      params={"k": k}, store=store, progress=False)


def _key(store, k: int) -> str:
    request = result_request("test_vit", "knn", "sklearn:digits", "sklearn:digits", split="val",
                             train_split="train", limit=LIMIT, train_limit=LIMIT,
                             weights="random", params={"k": k})
    return derivation_key(plan(request, store).derivation)


def _state(store) -> tuple:
    files = sorted(p.name for p in (store.root / "objects").rglob("*") if p.is_file())
    rows = store.db.query("SELECT key, output FROM derivations ORDER BY key")
    return files, rows, store.refs()


@pytest.fixture(scope="module")
def truth(tmp_path_factory):
    """k=5 and k=20 computed honestly in a store of their own."""
    with Store(tmp_path_factory.mktemp("truth") / "store") as store:
        five, twenty = _ask(store, 5), _ask(store, 20)
        assert five.id != twenty.id
        assert twenty.record.params["k"] == 20
        yield {"root": store.root, "5": five, "20": twenty,
               "key5": _key(store, 5), "key20": _key(store, 20)}


def _copy_store(truth, tmp_path) -> Store:
    import shutil

    shutil.copytree(truth["root"], tmp_path / "copy")
    return Store(tmp_path / "copy")


def _forged(store, truth) -> str:
    """A whole, schema-valid result record describing another backbone, data and 0.99."""
    doc = store.read_json(truth["20"].id)
    doc["backbone"] = {"spec": "torchvision:resnet50", "source": "torchvision",
                       "architecture": "resnet50"}
    doc["inputs"] = {**doc["inputs"], "backbone": "b" * 64, "eval_manifest": "c" * 64,
                     "train_manifest": "d" * 64}
    doc["data"]["eval"]["manifest"], doc["data"]["train"]["manifest"] = "c" * 64, "d" * 64
    doc["metrics"] = {**doc["metrics"], "top1": 0.99}
    return store.put_json(doc, "result")


def test_a_local_row_pointed_at_another_answer_is_refused(truth, tmp_path):
    with _copy_store(truth, tmp_path) as store:
        with store.db.write() as conn:
            conn.execute("UPDATE derivations SET output=? WHERE key=?",
                         (truth["20"].id, truth["key5"]))
        with pytest.raises(MisfiledAnswer, match=r"from the store.*k.*20"):
            _ask(store, 5)
    # the command line says it in one line, exit 10
    out = CliRunner().invoke(cli, [
        "--store", str(tmp_path / "copy"), "get", "result", "-b", "test_vit", "--weights",
        "random", "-t", "knn", "-d", "sklearn:digits", "--split", "val", "--limit", str(LIMIT),
        "--train-data", "sklearn:digits", "--train-split", "train", "--train-limit", str(LIMIT),
        "-p", "k=5"])
    assert out.exit_code == 10, out.output
    assert "answers another question" in out.output
    # fsck says so, and --repair forgets the row: the next get computes the true answer
    out = CliRunner().invoke(cli, ["--store", str(tmp_path / "copy"), "fsck"])
    assert out.exit_code == 1, out.output
    assert "MISMATCH derivations" in out.output
    out = CliRunner().invoke(cli, ["--store", str(tmp_path / "copy"), "fsck", "--repair"])
    assert out.exit_code == 0, out.output
    with Store(tmp_path / "copy") as store:
        assert _ask(store, 5).metrics == truth["5"].metrics


def test_a_binary_cache_answer_describing_another_computation_is_a_miss(truth, tmp_path,
                                                                        caplog):
    remote = tmp_path / "remote"
    with _copy_store(truth, tmp_path) as a:
        forged = _forged(a, truth)
        # the remote's record for the k=20 question names the forged result
        spec = json.loads(a.db.one("SELECT spec FROM derivations WHERE key=?",
                                   (truth["key20"],))[0])
        a.record(spec, forged)
        a.tag("exp", forged)
        add_remote(a, "d", str(remote))
        push(a, "d", "exp")
    assert (remote / "derivations" / f"{truth['key20']}.json").is_file()
    with Store(tmp_path / "b") as b:
        add_remote(b, "d", str(remote))
        with caplog.at_level(logging.WARNING, logger="vbstore.remotes"):
            result = _ask(b, 20)
        assert "answers another question" in caplog.text
        assert result.source == "computed"
        assert result.metrics["top1"] == truth["20"].metrics["top1"]
        assert not b.has(forged)
        assert b.db.one("SELECT count(*) FROM derivations WHERE output=?", (forged,))[0] == 0


def test_a_pulled_ref_filed_under_another_question_is_refused_whole(truth, tmp_path):
    remote = tmp_path / "remote"
    with _copy_store(truth, tmp_path) as a:
        forged = _forged(a, truth)
        spec = json.loads(a.db.one("SELECT spec FROM derivations WHERE key=?",
                                   (truth["key20"],))[0])
        a.record(spec, forged)
        a.tag("exp", forged)
        add_remote(a, "d", str(remote))
        push(a, "d", "exp")
    with Store(tmp_path / "b") as b:
        add_remote(b, "d", str(remote))
        before = _state(b)
        with pytest.raises(MisfiledAnswer, match="remote 'd'"):
            pull(b, "d/exp")
        assert _state(b) == before


def test_a_pulled_featureset_with_shuffled_rows_is_never_served(truth, tmp_path):
    remote = tmp_path / "remote"
    with _copy_store(truth, tmp_path) as a:
        five = truth["5"]
        features = five.record.inputs["eval_features"]
        doc = a.read_json(features)
        doc["rows"] = doc["rows"][1:] + doc["rows"][:1]  # every row one image off
        shuffled = a.put_json(doc, "featureset", edges={"pack": doc["packs"]})
        spec = a.derivation_of(features)
        a.record(spec, shuffled)
        a.add_edges(five.id, {"eval_features": [shuffled]})
        a.tag("exp5", five.id)
        add_remote(a, "d", str(remote))
        push(a, "d", "exp5")
    with Store(tmp_path / "b") as b:
        add_remote(b, "d", str(remote))
        got = pull(b, "d/exp5")  # records the root's own answer only
        assert got.derivations == 1
        assert b.lookup(derivation_key(spec), check=False) is None
        result = _ask(b, 20)
        assert result.source == "computed"
        assert result.metrics["top1"] == truth["20"].metrics["top1"]
        again = _ask(b, 5)  # the pulled answer, and where it came from
        assert again.source == "store"
        assert again.id == five.id
        assert again.origin == "cached in the store (pulled from d)"
    with Store(tmp_path / "c") as c:
        add_remote(c, "d", str(remote))
        before = _state(c)
        with pytest.raises(MisfiledAnswer, match="another image"):
            pull(c, "d/exp5", lineage=True)
        assert _state(c) == before


def test_every_derivation_row_says_where_it_came_from(truth, tmp_path):
    remote = tmp_path / "remote"
    with _copy_store(truth, tmp_path) as a:
        assert a.origin(truth["key5"]) == "computed"
        a.tag("exp", truth["20"].id)
        add_remote(a, "d", str(remote))
        push(a, "d", "exp")
    with Store(tmp_path / "b") as b:
        add_remote(b, "d", str(remote))
        fetched = _ask(b, 20)
        assert fetched.source == "remote"
        assert fetched.remote == "d"
        assert b.origin(truth["key20"]) == "remote d"
        cached = _ask(b, 20)
        assert cached.origin == "cached in the store (fetched from remote d)"
        assert cached.as_dict()["recorded"] == "remote d"
    out = CliRunner().invoke(cli, ["--store", str(tmp_path / "b"), "why", truth["20"].id])
    assert out.exit_code == 0, out.output
    assert "(result v1, remote d)" in out.output


def test_a_hub_remote_is_pull_only_unless_asked(tmp_path):
    with Store(tmp_path / "s") as store:
        assert add_remote(store, "hub", "hf://someone/repo").cache is False
        assert add_remote(store, "hub2", "hf://someone/repo", cache=True).cache is True
        assert add_remote(store, "dir", str(tmp_path / "r")).cache is True


def test_a_backbone_alias_is_checked_without_refusing_timm_tags():
    from vbstore.records import StoreReader, answer_differences
    from vbstore.store import derivation_spec

    spec = derivation_spec("backbone", 1, {}, {"source": "timm",
                                               "arch": "vit_small_patch14_dinov2",
                                               "tag": "lvd142m", "weights": "pretrained"})
    tagged = {"kind": "backbone", "source": "timm",
              "architecture": "vit_small_patch14_dinov2.lvd142m"}
    other = {"kind": "backbone", "source": "torchvision", "architecture": "resnet50"}
    reader = StoreReader(None, {"a" * 64: tagged, "b" * 64: other})
    assert answer_differences(spec, "a" * 64, reader) == []
    assert len(answer_differences(spec, "b" * 64, reader)) == 2
