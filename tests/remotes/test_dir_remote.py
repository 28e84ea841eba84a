"""Directory remotes: round trips, the binary cache, and every refusal a hostile remote meets."""

from __future__ import annotations

import os
import pickle

import pytest
from remotes_support import build_lineage, race_once, store_state

from vbstore import canonical
from vbstore.errors import CorruptObject
from vbstore.remotes import (
    Entry,
    RemoteConflict,
    RemoteNotFound,
    TamperedBlob,
    UnsafeRemotePath,
    add_remote,
    fetch_derivation,
    fetch_object,
    list_remote_refs,
    pull,
    push,
)
from vbstore.remotes._closure import ref_document
from vbstore.remotes._fsspec import DirRemote
from vbstore.store import fsck


@pytest.fixture
def remote_dir(stores, tmp_path):
    """Remote ``d`` (a directory) configured in both stores."""
    a, b = stores
    add_remote(a, "d", str(tmp_path / "remote"))
    add_remote(b, "d", f"file://{tmp_path / 'remote'}")
    return tmp_path / "remote"


def test_push_then_pull_gives_same_ids_bytes_and_lineage(stores, lineage, remote_dir):
    a, b = stores
    pushed = push(a, "d", "exp/result")
    assert pushed.changed
    assert len(pushed.uploaded) == 6
    assert pushed.derivations == 2
    assert (remote_dir / "refs" / "exp" / "result.json").is_file()

    pulled = pull(b, "d/exp/result", lineage=True)  # the cache answers under it too
    assert pulled.id == lineage["result"]
    assert b.refs() == {"exp/result": lineage["result"]}
    assert sorted(o.id for o in b.ls()) == sorted(o.id for o in a.ls())
    for oid in [lineage["result"], lineage["head"], lineage["pack"], *lineage["images"]]:
        assert b.read_bytes(oid, verify=True) == a.read_bytes(oid)
        assert b.children(oid) == a.children(oid)
        assert b.info(oid).kind == a.info(oid).kind
    assert b.lookup(lineage["train_key"]) == lineage["head"]
    assert b.derivation_of(lineage["result"]) == a.derivation_of(lineage["result"])
    assert fsck(b).clean


def test_second_push_changes_nothing_and_second_pull_downloads_nothing(stores, lineage, remote_dir):
    a, b = stores
    push(a, "d", "exp/result")
    before = sorted(p for p in remote_dir.rglob("*"))
    again = push(a, "d", "exp/result")
    assert not again.changed
    assert again.already_there == 6
    assert not again.uploaded
    assert sorted(p for p in remote_dir.rglob("*")) == before
    pull(b, "d/exp/result")
    assert pull(b, "d/exp/result").downloaded == []


def test_fetched_derivation_is_a_cache_hit_in_the_other_store(stores, lineage, remote_dir):
    a, b = stores
    push(a, "d", "exp/result")
    assert fetch_derivation(b, lineage["train_key"]) == lineage["head"]
    # the closure came along: the head's inputs are present and its lineage recorded
    assert b.has(lineage["pack"])
    assert b.has(lineage["manifest"])
    spec = a.derivation_of(lineage["head"])

    def must_not_run():
        raise AssertionError("the binary cache should have answered")

    assert b.derive(spec, must_not_run) == (lineage["head"], False, None)
    assert fetch_derivation(b, "0" * 64) is None


def test_push_an_id_needs_a_name_and_unknown_ref_is_not_found(stores, lineage, remote_dir):
    a, b = stores
    with pytest.raises(Exception, match="--as NAME"):
        push(a, "d", lineage["head"][:10])
    assert push(a, "d", lineage["head"][:10], name="heads/linear").ref == "heads/linear"
    assert list_remote_refs(b, "d") == ["heads/linear"]
    with pytest.raises(RemoteNotFound):
        pull(b, "d/heads/other")


def test_tampered_blob_is_refused_and_nothing_is_kept(stores, lineage, remote_dir):
    a, b = stores
    push(a, "d", "exp/result")
    victim = remote_dir / "objects" / lineage["pack"][:2] / lineage["pack"][2:]
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0xFF
    victim.write_bytes(bytes(data))
    empty = store_state(b)
    with pytest.raises(TamperedBlob, match="hash"):
        pull(b, "d/exp/result")
    assert store_state(b) == empty
    assert list((b.root / "tmp").iterdir()) == []
    assert fetch_derivation(b, lineage["train_key"]) is None  # a cache answer that fails: a miss
    assert store_state(b) == empty


def test_pickle_posing_as_safetensors_is_refused(stores, remote_dir):
    _, b = stores
    payload = pickle.dumps({"weight": [1.0, 2.0]})
    oid = canonical.digest(payload)  # the hash is right; the content is not what it claims
    (remote_dir / "objects" / oid[:2]).mkdir(parents=True)
    (remote_dir / "objects" / oid[:2] / oid[2:]).write_bytes(payload)
    entry = Entry(oid, "head", len(payload), (), None)
    (remote_dir / "refs").mkdir()
    (remote_dir / "refs" / "evil.json").write_bytes(ref_document("evil", entry, [entry]))
    with pytest.raises(TamperedBlob, match="claims kind head"):
        pull(b, "d/evil")
    assert store_state(b) == ([], {}, 0, [])


@pytest.mark.parametrize("target", ["d/../outside", "d//etc/passwd", "d/refs/..", "d/a\\b", "d"])
def test_refs_that_leave_the_remote_are_refused(stores, remote_dir, target):
    with pytest.raises(UnsafeRemotePath):
        pull(stores[1], target)


def test_ids_and_links_that_leave_the_remote_are_refused(stores, lineage, remote_dir, tmp_path):
    a, b = stores
    push(a, "d", "exp/result")
    ref = remote_dir / "refs" / "exp" / "result.json"
    doc = ref.read_text().replace(lineage["pack"], "../../../../etc/passwd")
    doc = doc.replace('"name":"exp/result"', '"name":"bad"')
    (remote_dir / "refs" / "bad.json").write_text(doc)
    with pytest.raises(UnsafeRemotePath):
        pull(b, "d/bad")
    outside = tmp_path / "outside.json"
    outside.write_bytes(ref.read_bytes())
    os.symlink(outside, remote_dir / "refs" / "link.json")
    with pytest.raises(UnsafeRemotePath, match="link"):
        pull(b, "d/link")
    with pytest.raises(UnsafeRemotePath):
        push(a, "d", "exp/result", name="../escape")
    with pytest.raises(UnsafeRemotePath):
        push(a, "d", "exp/result", extra_files={"../README.md": b"x"})
    assert store_state(b)[0] == []


def test_concurrent_push_to_one_ref_conflicts(stores, lineage, remote_dir, monkeypatch, tmp_path):
    a, b = stores
    other = build_lineage(b, seed=1)
    race_once(monkeypatch, DirRemote, lambda: push(b, "d", "exp/result"))
    with pytest.raises(RemoteConflict, match="changed while this push ran"):
        push(a, "d", "exp/result")
    # the other writer's ref stands; nothing was overwritten
    assert "exp/result" in list_remote_refs(a, "d")
    assert pull(a, "d/exp/result", as_name="theirs").id == other["result"]


def test_concurrent_pushes_of_the_same_ref_both_succeed(stores, lineage, remote_dir,
                                                       monkeypatch):
    # two machines pushing the same head at once: the ref ends as each of them wants it, so
    # neither is a conflict (the second used to fail with "changed while this push ran")
    a, b = stores
    assert build_lineage(b) == lineage  # the same artifacts, the same ids
    race_once(monkeypatch, DirRemote, lambda: push(b, "d", "exp/result"))
    push(a, "d", "exp/result")
    assert pull(a, "d/exp/result", as_name="theirs").id == lineage["result"]


def test_pull_refuses_to_move_a_local_ref_unless_forced(stores, lineage, remote_dir):
    a, b = stores
    push(a, "d", "exp/result")
    build_lineage(b, seed=2)  # b has its own exp/result
    with pytest.raises(RemoteConflict, match="--as NAME"):
        pull(b, "d/exp/result")
    assert pull(b, "d/exp/result", force=True).id == lineage["result"]
    assert b.refs()["exp/result"] == lineage["result"]


def test_fetch_object_repairs_a_damaged_blob(stores, lineage, remote_dir):
    a, _ = stores
    push(a, "d", "exp/result")
    path = a.path(lineage["pack"])
    os.chmod(path, 0o644)
    path.write_bytes(b"rot")
    with pytest.raises(CorruptObject):
        fetch_object(a, lineage["pack"])  # the damaged copy must be moved aside first
    report = fsck(a, repair=True)
    assert lineage["pack"] in report.repaired
    assert not a.has(lineage["pack"])
    assert fetch_object(a, lineage["pack"]) == "d"
    assert a.verify(lineage["pack"])
    assert a.info(lineage["pack"]).kind == "pack"
    assert a.info(lineage["pack"]).evicted_at is None


def test_a_blob_refetched_by_repair_is_present_and_verified(stores, lineage, remote_dir):
    a, _ = stores
    push(a, "d", "exp/result")
    pack = lineage["pack"]
    path = a.path(pack)
    os.chmod(path, 0o644)
    path.write_bytes(b"rot")
    report = fsck(a, repair=True, refetch=lambda oid: fetch_object(a, oid) is not None)
    assert report.refetched == [pack]
    info = a.info(pack)
    assert a.verify(pack)
    assert info.evicted_at is None
    assert info.verified_at is not None  # its bytes were hashed as they arrived


def test_push_skips_inputs_that_are_not_present(stores, lineage, remote_dir):
    a, b = stores
    image = lineage["images"][0]
    os.chmod(a.path(image), 0o644)
    os.unlink(a.path(image))
    result = push(a, "d", "exp/result")
    assert result.skipped == [image]
    pulled = pull(b, "d/exp/result")
    assert not b.has(image)
    assert ("image", image) not in b.children(lineage["manifest"])
    assert pulled.id == lineage["result"]
    assert fsck(b).clean
