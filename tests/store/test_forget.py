"""Forgetting a result on purpose: ``vbstore forget`` takes it out of gc's roots, and what only
it kept goes with the next gc."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import vbstore
from vbstore.cli import cli
from vbstore.errors import UsageError
from vbstore.store import forget, fsck, gc

KW = dict(split="val", train_split="train", weights="random", input_size=32, progress=False)


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    from vbstore.data import make_shapes

    return str(make_shapes(tmp_path_factory.mktemp("d") / "shapes", per_class=3, size=24))


def _ids(store) -> set[str]:
    return {info.id for info in store.ls()}


def test_forget_removes_the_result_and_releases_what_only_it_kept(shapes):
    store = vbstore.Store()
    first = vbstore.get_result("test_cnn", "knn", shapes, shapes, params={"k": 3}, **KW)
    other = vbstore.get_result("test_cnn", "knn", shapes, shapes, params={"k": 5}, **KW)
    held = _ids(store)
    # the features and manifests are shared: forgetting one result releases its head alone
    planned = forget(store, [first.id[:10]], dry_run=True)
    assert [f["id"] for f in planned.forgotten] == [first.id]
    assert [(o["kind"], o["id"]) for o in planned.released] == [
        ("head", first.record.inputs["head"])]
    assert _ids(store) == held  # a dry run removes nothing
    done = forget(store, [first.id])
    assert done.as_dict() == {**planned.as_dict(), "dry_run": False}
    assert _ids(store) == held - {first.id}  # the head stays until gc removes it
    assert gc(store, grace=0).removed_count == 1
    assert not store.has(first.id)
    # the last result that kept them releases the features, manifests and backbone
    last = forget(store, [other.id])
    kinds = {o["kind"] for o in last.released}
    assert {"featureset", "pack", "manifest", "backbone"} <= kinds
    assert last.released_bytes > 0
    assert gc(store, grace=0).removed_count == len(last.released)
    assert _ids(store) == set()
    report = fsck(store)
    assert report.faults == 0, report
    # the same question again computes the same result
    again = vbstore.get_result("test_cnn", "knn", shapes, shapes, params={"k": 3}, **KW)
    assert again.id == first.id
    assert not again.from_cache


def test_forget_refuses_what_is_still_kept_or_not_a_result(shapes):
    store = vbstore.Store()
    result = vbstore.get_result("test_cnn", "knn", shapes, shapes, params={"k": 2}, **KW)
    store.tag("mine", result.id)
    with pytest.raises(UsageError, match="ref 'mine' names result") as err:
        forget(store, [result.id])
    assert err.value.hint == "remove the ref first: vbstore tag -d mine"
    store.untag("mine")
    manifest = result.record.inputs["eval_manifest"]
    with pytest.raises(UsageError, match="is a manifest, not a result"):
        forget(store, [manifest])
    assert store.has(result.id)


def test_the_cli_forgets_and_the_answer_cache_no_longer_serves_it(shapes, tmp_path):
    runner = CliRunner()

    def run(*args):
        return runner.invoke(cli, ["--store", str(tmp_path / "s"), *args])

    args = ["get", "result", "-b", "test_cnn", "--weights", "random", "--input-size", "32",
            "-t", "knn", "-d", shapes, "--split", "val", "--train-data", shapes,
            "--train-split", "train", "-p", "k=3", "--json"]
    made = json.loads(run(*args).stdout)
    oid = made["id"]
    dry = run("forget", oid[:12], "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert f"would forget result {oid[:12]}  knn" in dry.output
    assert "only it kept" in dry.output
    assert run("show", oid, "--json").exit_code == 0
    gone = run("forget", oid[:12], "--json")
    assert gone.exit_code == 0, gone.output
    assert json.loads(gone.output)["forgotten"][0]["id"] == oid
    assert run("show", oid).exit_code == 9
    again = json.loads(run(*args).stdout)
    assert again["id"] == oid
    assert again["from_cache"] is False
    assert run("forget", "0" * 12).exit_code == 9
    # a result an evaluation cites stays with it
    suite_file = tmp_path / "suite.json"
    assert run("suite", "new", "--slug", "f", "-t", "knn", "-d", shapes, "--split", "val",
               "-p", "k=3", "--weights", "random", "-o", str(suite_file)).exit_code == 0
    assert run("suite", "push", str(suite_file)).exit_code == 0
    assert run("evaluate", oid, "--suite", "f@1").exit_code == 0
    cited = run("forget", oid)
    assert cited.exit_code == 2
    assert "is a source of evaluation" in cited.output
