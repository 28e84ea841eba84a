"""A number is never wrong silently: damaged inputs are refused, repaired inputs recomputed."""

import os
import time

import pytest
import torch

import vbstore
from vbstore.errors import CorruptObject, NotReproduced
from vbstore.store import derivation_key, fsck, gc

KW = dict(split="val", train_split="train", weights="random", input_size=32, progress=False)


def _damage(store, oid: str, finite: bool = True) -> None:
    """Overwrite values in the middle of a blob (finite floats, or NaN bytes) as bit rot would."""
    path = store.files.path(oid)
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    junk = (b"\x00\x00\x80\x3f" if finite else b"\xff\xff\xff\x7f") * 64  # 1.0 or NaN
    middle = len(data) - len(junk) - 16
    data[middle : middle + len(junk)] = junk
    path.write_bytes(bytes(data))
    os.chmod(path, 0o444)


def _packs(store, result, role="eval"):
    features = result.record.inputs[f"{role}_features"]
    return store.read_json(features)["packs"]


@pytest.mark.parametrize("finite", [True, False])
def test_a_damaged_pack_is_an_integrity_error_not_a_number(store, shapes, finite):
    first = vbstore.get_result("test_cnn", "knn", shapes, shapes, store=store, params={"k": 5},
                               **KW)
    _damage(store, _packs(store, first)[0], finite)
    # another k reuses the cached features: they must be verified before the task sees them
    with pytest.raises(CorruptObject, match="fsck --repair") as caught:
        vbstore.get_result("test_cnn", "knn", shapes, shapes, store=store, params={"k": 3}, **KW)
    assert caught.value.exit_code == 10
    assert [r.id for r in store.ls("result")] == [first.id]  # nothing wrong was stored


def test_a_pack_is_hashed_once_until_its_file_changes(store, shapes, monkeypatch):
    import vbstore.store._filestate as fs

    features = vbstore.get_features("test_cnn", shapes, store=store, split="val", weights="random",
                                    input_size=32, progress=False)
    pack = store.read_json(features.id)["packs"][0]
    path = store.files.path(pack)
    past = time.time() - 10  # out of the racy window, as any pack older than a moment is
    os.utime(path, (past, past))
    calls = []
    real = fs.read_and_hash
    monkeypatch.setattr(fs, "read_and_hash", lambda p: calls.append(p) or real(p))
    for _ in range(3):
        features.features.pooled()
    assert len(calls) == 1  # verified once, then remembered under the file's state
    os.chmod(path, 0o644)
    path.write_bytes(path.read_bytes())  # same bytes, new state: verified again
    features.features.pooled()
    assert len(calls) == 2


def test_repair_invalidates_everything_built_on_the_damaged_pack(store, shapes):
    first = vbstore.get_result("test_cnn", "classification", shapes, shapes, store=store, **KW)
    good = first.metrics["top1"]
    pack = _packs(store, first, "train")[0]  # the head is built on it, the result on the head
    # as a damaged pack read without verification did: a wrong result stored under the key
    spec = store.derivation_of(first.id)
    edges = {}
    for role, child in store.children(first.id):
        edges.setdefault(role, []).append(child)
    wrong_doc = {**store.read_json(first.id), "metrics": {"top1": 0.0, "top5": 0.0}}
    wrong = store.put_json(wrong_doc, "result", edges=edges)
    store.record(spec, wrong)
    _damage(store, pack)
    report = fsck(store, repair=True)
    assert report.repaired == [pack]
    built_on_it = [first.record.inputs["train_features"], first.record.inputs["head"],
                   first.id, wrong]
    for oid in built_on_it:  # nothing built on the pack is served any more
        assert store.db.one("SELECT 1 FROM derivations WHERE output=?", (oid,)) is None, oid
    eval_features = first.record.inputs["eval_features"]  # ...and what is not, still is
    assert store.db.one("SELECT 1 FROM derivations WHERE output=?", (eval_features,))
    again = vbstore.get_result("test_cnn", "classification", shapes, shapes, store=store, **KW)
    assert not again.from_cache
    assert again.id != wrong
    assert again.metrics["top1"] == good
    assert store.verify(pack)


def test_a_recompute_that_does_not_reproduce_raises(store, shapes):
    first = vbstore.get_result("test_cnn", "classification", shapes, shapes, store=store, **KW)
    spec = store.derivation_of(first.id)
    wrong_doc = {**store.read_json(first.id), "metrics": {**first.metrics, "top1": 0.01}}
    wrong = store.put_json(wrong_doc, "result")
    store.record(spec, wrong)
    with pytest.raises(NotReproduced, match="did not reproduce") as caught:
        vbstore.get_result("test_cnn", "classification", shapes, shapes, store=store,
                           recompute=True, **KW)
    error = caught.value
    assert error.previous == wrong
    assert store.read_json(error.new)["metrics"] == first.metrics
    assert error.max_abs_diff == pytest.approx(abs(first.metrics["top1"] - 0.01))
    assert error.exit_code == 12
    assert store.lookup(derivation_key(spec)) == error.new  # the fresh numbers are served


def test_features_verification_survives_torch_reads(store, shapes):
    features = vbstore.get_features("test_vit", shapes, store=store, split="val", weights="random",
                                    input_size=32, progress=False, mode="both")
    x = features.features.pooled()
    assert torch.isfinite(x).all()
    _damage(store, store.read_json(features.id)["packs"][0])
    with pytest.raises(CorruptObject):
        features.features.dense()


@pytest.mark.slow
def test_gc_with_no_grace_never_breaks_a_running_get(tmp_path, shapes):
    import json
    import subprocess
    import sys

    from vbstore import Store

    root = tmp_path / "store"
    args = [sys.executable, "-m", "vbstore", "--store", str(root), "get", "result", "-b",
            "test_cnn", "-t", "classification", "-d", shapes, "--split", "val", "--train-data",
            shapes, "--train-split", "train", "--weights", "random", "--input-size", "32",
            "--json"]
    Store(root).close()
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    with Store(root) as store:
        # once the gets are under way (they hold a lease), they outlive any grace period
        while not store.live_leases() and any(p.poll() is None for p in procs):
            time.sleep(0.01)
        while any(p.poll() is None for p in procs):
            gc(store, grace=0)
            time.sleep(0.02)
    outs = [p.communicate() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    answer = json.loads(outs[0][0])
    with Store(root) as store:
        assert fsck(store).clean
        for oid in answer["record"]["inputs"].values():
            assert store.has(oid), oid


def test_seeds_report_their_spread_as_what_it_is(store, shapes):
    result = vbstore.get_result("test_cnn", "classification", shapes, shapes, store=store, seeds=2,
                                **KW)
    record = result.record
    per_seed = [m["top1"] for m in record.per_seed]
    top1 = record.aggregate["top1"]
    assert top1["over"] == "seeds"
    assert (top1["min"], top1["max"]) == (min(per_seed), max(per_seed))
    assert set(record.train_aggregate) == set(record.train_metrics)
    assert record.train_aggregate["train_top1"]["n"] == 2
    assert not any("ignores the seed" in w for w in record.warnings or [])
    knn = vbstore.get_result("test_cnn", "knn", shapes, shapes, store=store, seeds=2, **KW)
    assert any("knn ignores the seed" in w for w in knn.record.warnings)
