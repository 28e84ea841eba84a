"""Requests, plans and --dry-run: what a user sees before spending compute."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

import vbstore
from vbstore.cli import cli
from vbstore.engine import (
    BackboneRequest,
    DataRef,
    ProbeRequest,
    ResultRequest,
    execute,
    plan,
    result_request,
)
from vbstore.errors import NotReproduced, UsageError
from vbstore.store import derivation_key, fsck, gc

KW = dict(split="val", train_split="train", weights="random", input_size=32, progress=False)
ARGS = ["-b", "test_cnn", "-t", "knn", "--split", "val", "--train-split", "train",
        "--weights", "random", "--input-size", "32"]


def _request(shapes, **params):
    return result_request("test_cnn", "knn", shapes, shapes, params=params, split="val",
                          train_split="train", weights="random", input_size=32)


@pytest.mark.parametrize(("flag", "expected"), [
    ("seed=3",
     "'seed' is not a parameter of task 'knn' but an option of vbstore itself; use --seed"),
    ("weights=x", "use --weights instead"),
    ("kk=3", "task 'knn' has no parameter 'kk'"),
    ("epochs=3", "task 'knn' has no parameter 'epochs'"),  # a parameter of another task
])
def test_task_parameter_mistakes_are_one_line_errors(tmp_path, shapes, flag, expected):
    result = CliRunner().invoke(cli, ["--store", str(tmp_path), "get", "result", *ARGS,
                                      "-d", shapes, "--train-data", shapes, "-p", flag])
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_requests_are_frozen_and_validated():
    probe = ProbeRequest("knn", params={"k": 3})
    with pytest.raises(TypeError):
        probe.params["k"] = 4  # type: ignore[index]
    with pytest.raises(AttributeError):
        probe.seed = 2  # type: ignore[misc]
    with pytest.raises(UsageError, match="--seeds must be an integer >= 1"):
        ProbeRequest("knn", seeds=0)
    with pytest.raises(UsageError, match=r"--layers names a layer twice"):
        BackboneRequest("test_cnn", layers=(-1, -1))
    with pytest.raises(UsageError, match="zero-shot and takes no training data"):
        ResultRequest(BackboneRequest("test_cnn"), ProbeRequest("retrieval"), DataRef("x"),
                      DataRef("y"))
    with pytest.raises(UsageError, match="trains a head on training data"):
        ResultRequest(BackboneRequest("test_cnn"), ProbeRequest("knn"), DataRef("x"))


@pytest.mark.parametrize("weights", ["default", "pretrained", "ckpt/model.safetensors"])
def test_a_backbone_seed_needs_random_weights(weights):
    with pytest.raises(UsageError, match=(
            f"--backbone-seed only applies with --weights random, not --weights {weights}")):
        BackboneRequest("test_vit", weights=weights, seed=5)
    with pytest.raises(UsageError, match="--backbone-seed only applies"):
        result_request("test_vit", "knn", "x", "y", weights=weights, backbone_seed=0)
    assert BackboneRequest("test_vit", weights=weights).seed is None  # not given: no error
    assert BackboneRequest("test_vit", weights="random", seed=5).seed == 5


def test_plan_counts_the_work_then_says_everything_is_stored(store, shapes):
    request = _request(shapes, k=3)
    cold = plan(request, store, dry_run=True)
    steps = {(s.op, s.role): s for s in cold.steps}
    assert cold.ref is None  # the backbone was never built: a dry run does not build it
    assert steps[("backbone", "")].status == "compute"
    for role in ("eval", "train"):
        samples = steps[("manifest", role)].work["samples"]
        assert samples > 0
        assert steps[("featureset", role)].work["forward_passes"] == samples
    assert steps[("result", "")].status == "compute"
    result = execute(plan(request, store), progress=False)
    warm = plan(request, store, dry_run=True)
    assert warm.cached
    assert [s.status for s in warm.steps if s.op in ("featureset", "head")] == ["unneeded"] * 3
    assert warm.steps[-1].id == result.id
    other = plan(_request(shapes, k=5), store, dry_run=True)  # same features, another k
    statuses = {(s.op, s.role): s.status for s in other.steps}
    assert statuses[("featureset", "eval")] == statuses[("featureset", "train")] == "stored"
    assert statuses[("head", "seed 0")] == "compute"
    assert statuses[("result", "")] == "compute"


def test_dry_run_computes_nothing_and_imports_no_torch_when_cached(tmp_path, shapes):
    args = ["--store", str(tmp_path), "get", "result", *ARGS, "-d", shapes, "--train-data", shapes]
    code = ("import sys, vbstore.cli\n"
            "try:\n    vbstore.cli.cli(sys.argv[1:], standalone_mode=False)\n"
            "finally:\n    print('TORCH' if 'torch' in sys.modules else 'NO-TORCH')")

    def dry() -> tuple[str, str]:
        done = subprocess.run([sys.executable, "-c", code, *args, "--dry-run"], capture_output=True,
                              text=True, check=True)
        return done.stdout.rsplit("\n", 2)[0], done.stdout.strip().rsplit("\n", 1)[1]

    cold, imported = dry()
    assert "backbone" in cold
    assert "to compute: 30 forward passes" in cold
    assert imported == "NO-TORCH"
    assert vbstore.Store(tmp_path).ls("result") == []
    computed = CliRunner().invoke(cli, args)  # in this process: what runs next is under test
    assert computed.exit_code == 0, computed.output
    first, imported = dry()
    second, _ = dry()
    assert first == second
    assert imported == "NO-TORCH"
    assert "result                 stored" in first


def test_dry_run_json(tmp_path, shapes):
    result = CliRunner().invoke(cli, ["--store", str(tmp_path), "get", "result", *ARGS,
                                      "-d", shapes, "--train-data", shapes, "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [s["op"] for s in data["steps"]] == ["backbone", "manifest", "manifest", "featureset",
                                                "featureset", "head", "result"]


def test_recompute_that_differs_is_an_error_and_keeps_both(store, shapes):
    first = vbstore.get_result("test_cnn", "classification", shapes, shapes, store=store,
                               params={"epochs": 3}, **KW)
    again = vbstore.get_result("test_cnn", "classification", shapes, shapes, store=store,
                               params={"epochs": 3}, recompute=True, **KW)
    assert again.reproduced["reproduced"]
    # a stored result whose numbers differ from what its inputs give now
    the_plan = plan(result_request("test_cnn", "classification", shapes, shapes,
                                   params={"epochs": 3}, split="val", train_split="train",
                                   weights="random", input_size=32), store)
    forged = {**store.read_json(first.id), "metrics": {"top1": 0.0, "top5": 0.0}}
    forged_id = store.put_json(forged, "result")
    store.record(the_plan.spec, forged_id)
    with pytest.raises(NotReproduced, match="did not reproduce") as caught:
        vbstore.get_result("test_cnn", "classification", shapes, shapes, store=store,
                           params={"epochs": 3}, recompute=True, **KW)
    assert caught.value.exit_code == 12
    assert store.lookup(derivation_key(the_plan.spec)) == caught.value.new != forged_id
    assert store.has(forged_id)


def test_a_gc_between_plan_and_execute_does_not_fail_the_command(tmp_path, shapes):
    # `vbstore gc --grace 0` (the documented way out of a full disk) run while a `get result`
    # starts: the backbone, weights and manifests its plan resolved are unreachable from any
    # root until the result is recorded, and gc took them before the command leased anything;
    # execute failed with `no object matches <weights id>` (exit 9)
    store = vbstore.Store(tmp_path / "fresh")
    expected = vbstore.get_result("test_cnn", "knn", shapes, shapes, store=store, **KW)
    store = vbstore.Store(tmp_path / "raced")
    the_plan = plan(_request(shapes), store)
    assert gc(store, grace=0).removed_count >= 4  # backbone, weights, both manifests
    result = execute(the_plan, progress=False)
    assert result.record.metrics == expected.record.metrics
    assert fsck(store).clean


def test_a_gc_while_a_backbone_is_first_stored_keeps_it(tmp_path, shapes, monkeypatch):
    store = vbstore.Store(tmp_path / "s")
    record = vbstore.Store.record

    def gc_first(self, spec, output, extra_edges=None):
        if spec["op"] == "backbone":  # stored, not yet recorded: reachable from nothing
            # the manifests plan read first may go (execute plans again); the backbone and
            # its weights, stored under their alias's lease, stay
            gc(self, grace=0)
            assert self.has(output)
            assert self.has(self.read_json(output)["weights"])
        return record(self, spec, output, extra_edges)

    monkeypatch.setattr(vbstore.Store, "record", gc_first)
    the_plan = plan(_request(shapes), store)
    assert store.has(the_plan.backbone.id)
    assert store.has(the_plan.backbone.doc["weights"])
    monkeypatch.undo()
    expected = vbstore.get_result("test_cnn", "knn", shapes, shapes,
                                  store=vbstore.Store(tmp_path / "fresh"), **KW)
    assert execute(the_plan, progress=False).record.metrics == expected.record.metrics
    assert fsck(store).clean


def test_a_gc_right_after_get_head_plans_does_not_fail_it(tmp_path, shapes, monkeypatch):
    from vbstore.engine import _results

    store = vbstore.Store(tmp_path / "s")
    planned, removed = _results.plan_head, []

    def plan_then_gc(request, store, **kwargs):
        the_plan = planned(request, store, **kwargs)
        if not removed:  # once: a gc between the plan and the run's first lease
            removed.append(gc(store, grace=0).removed_count)
        return the_plan

    monkeypatch.setattr(_results, "plan_head", plan_then_gc)
    head = vbstore.get_head("test_cnn", "classification", shapes, store=store,
                            train_split="train", weights="random", input_size=32,
                            params={"epochs": 2}, progress=False)
    assert removed[0] >= 3  # backbone, weights, manifest
    assert store.has(head.id)
    assert fsck(store).clean


def test_a_lost_weights_blob_is_named_not_taken_for_a_gc(tmp_path, shapes):
    from vbstore.errors import BlobMissing

    store = vbstore.Store(tmp_path / "s")
    first = vbstore.get_result("test_cnn", "knn", shapes, shapes, store=store, **KW)
    weights = store.read_json(first.record.inputs["backbone"])["weights"]
    path = store.path(weights)
    path.chmod(0o644)
    path.unlink()  # a stray rm: the registry still lists it
    with pytest.raises(BlobMissing, match="fsck --repair"):
        vbstore.get_result("test_cnn", "knn", shapes, shapes, store=store,
                           params={"k": 3}, **KW)
    assert fsck(store, repair=True).missing == [weights]
    again = vbstore.get_result("test_cnn", "knn", shapes, shapes, store=store,
                               params={"k": 3}, **KW)
    assert again.record.inputs["backbone"] == first.record.inputs["backbone"]
    assert fsck(store).clean


def test_an_input_size_equal_to_the_default_is_the_same_identity(shapes):
    # test_vit preprocesses to 32 px by default: saying so changes nothing, another size does
    kw = dict(split="val", train_split="train", weights="random", progress=False)
    first = vbstore.get_result("test_vit", "knn", shapes, shapes, **kw)
    said = vbstore.get_result("test_vit", "knn", shapes, shapes, input_size=32, **kw)
    assert said.id == first.id
    assert said.from_cache  # no forward pass, no second featureset
    other = vbstore.get_result("test_vit", "knn", shapes, shapes, input_size=48, **kw)
    assert other.id != first.id
    assert other.record.extractor["input_size"] is None  # the backbone's id names its size
