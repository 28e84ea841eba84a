"""Hub remotes: the real huggingface_hub client against the test server in ``hub_server.py``."""

from __future__ import annotations

import json
import time

import pytest
import yaml
from remotes_support import HF_SECRET, all_bytes, build_lineage, race_once, store_state

from vbstore.remotes import (
    RemoteConflict,
    RemoteNotFound,
    RemoteOffline,
    TamperedBlob,
    add_remote,
    fetch_derivation,
    list_remote_refs,
    pull,
    push,
    registry,
    write_model_card,
)
from vbstore.remotes._hub import HubRemote

REPO = "tester/probe-heads"


@pytest.fixture
def remote(stores, hub):
    for store in stores:
        add_remote(store, "hub", f"hf://{REPO}", cache=True)  # a Hub remote: pull only if not
    return hub


def _commits(hub) -> list[str]:
    """Commit messages on main, newest first."""
    with hub.state.lock:
        repo = hub.state.repos[REPO]
        sha, messages = repo.branches["main"], []
        while sha:
            messages.append(repo.commits[sha].message)
            sha = repo.commits[sha].parent
    return messages


def test_push_creates_the_repo_in_one_commit_and_pull_round_trips(stores, lineage, remote):
    a, b = stores
    card = write_model_card({"name": "linear probe", "backbone": "timm:vit_small", "task": "linear",
                             "metrics": {"top1": 0.75}, "remote_ref": "hub/exp/result"})
    result = push(a, "hub", "exp/result", extra_files={"README.md": card.encode(),
                                                        "vbstore.json": b"{}"})
    message = f"vbstore: push exp/result -> {lineage['result'][:12]} (result)"
    assert _commits(remote) == [message, "initial commit"]
    assert result.revision == remote.head(REPO)
    files = remote.files(REPO)
    assert f"objects/{lineage['pack'][:2]}/{lineage['pack'][2:]}" in files
    assert "refs/exp/result.json" in files
    assert "README.md" in files
    front = yaml.safe_load(files["README.md"].decode().split("---")[1])
    assert front["library_name"] == "vbstore"
    assert front["metrics"] == {"top1": 0.75}
    assert front["backbone"] == "timm:vit_small"
    assert "linear" in front["tags"]

    assert list_remote_refs(b, "hub") == ["exp/result"]
    pulled = pull(b, "hub/exp/result")
    assert pulled.id == lineage["result"]
    assert pulled.revision == result.revision
    assert b.children(lineage["head"]) == a.children(lineage["head"])
    assert registry(b).pulled()["exp/result"]["revision"] == result.revision
    assert not push(a, "hub", "exp/result").changed  # nothing new: no second commit
    assert len(_commits(remote)) == 2


def test_concurrent_commit_fails_the_push_with_a_conflict(stores, lineage, remote, monkeypatch):
    a, _ = stores
    push(a, "hub", "exp/result")
    build_lineage(a, seed=4)
    race_once(monkeypatch, HubRemote,
              lambda: remote.state.commit_directly(REPO, {"notes.txt": b"someone else"}))
    before = remote.files(REPO)["refs/exp/result.json"]
    with pytest.raises(RemoteConflict, match="another commit"):
        push(a, "hub", "exp/result")
    assert remote.files(REPO)["refs/exp/result.json"] == before


def test_pull_by_revision_pins_the_commit(stores, lineage, remote):
    a, b = stores
    first = push(a, "hub", "exp/result").revision
    newer = build_lineage(a, seed=5)
    second = push(a, "hub", "exp/result").revision
    assert first != second
    assert pull(b, "hub/exp/result", revision=first).id == lineage["result"]
    assert registry(b).pulled()["exp/result"]["revision"] == first
    assert pull(b, "hub/exp/result", as_name="latest").id == newer["result"]
    with pytest.raises(RemoteNotFound, match="revision"):
        pull(b, "hub/exp/result", revision="f" * 40)


def test_binary_cache_over_the_hub(stores, lineage, remote):
    a, b = stores
    push(a, "hub", "exp/result")
    assert fetch_derivation(b, lineage["eval_key"]) == lineage["result"]
    assert b.lookup(lineage["eval_key"]) == lineage["result"]
    assert b.has(lineage["head"])
    assert b.children(lineage["head"]) == a.children(lineage["head"])


def test_tampered_file_on_the_hub_is_refused(stores, lineage, remote):
    a, b = stores
    push(a, "hub", "exp/result")
    path = f"objects/{lineage['manifest'][:2]}/{lineage['manifest'][2:]}"
    remote.state.commit_directly(REPO, {path: b'{"kind":"manifest","layout":"x","samples":[]}'})
    with pytest.raises(TamperedBlob):
        pull(b, "hub/exp/result")
    assert store_state(b) == ([], {}, 0, [])


def test_offline_is_a_clear_error_at_once_and_the_store_is_untouched(stores, lineage, remote,
                                                                    monkeypatch):
    a, b = stores
    push(a, "hub", "exp/result")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(RemoteOffline, match="HF_HUB_OFFLINE"):
        pull(b, "hub/exp/result")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    remote.stop()  # the endpoint is gone: no network
    with pytest.raises(RemoteOffline, match="unreachable"):
        pull(b, "hub/exp/result")
    with pytest.raises(RemoteOffline):
        push(a, "hub", "exp/result")
    assert fetch_derivation(b, lineage["eval_key"]) is None  # a cache miss, not an error
    assert time.monotonic() - start < 5
    assert store_state(b) == ([], {}, 0, [])


def test_the_token_is_sent_but_never_stored(stores, lineage, remote):
    a, b = stores
    push(a, "hub", "exp/result", extra_files={"README.md": write_model_card(
        {"name": "x", "task": "linear"}).encode()})
    pull(b, "hub/exp/result")
    assert f"Bearer {HF_SECRET}" in remote.state.authorizations
    everything = b"".join(remote.files(REPO).values())
    for root in (a.root, b.root):
        everything += all_bytes(root)
    assert HF_SECRET.encode() not in everything
    with pytest.raises(Exception, match="credential"):
        write_model_card({"name": "x", "note": f"token={HF_SECRET}"})
    config = json.loads((a.root / "remotes.json").read_text())
    assert config["remotes"]["hub"] == {"url": f"hf://{REPO}", "scheme": "hf", "options": {},
                                       "cache": True}
