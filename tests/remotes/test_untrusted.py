"""A remote is untrusted: bounded streaming pulls, cache answers tied to what they claim to be,
pull-only remotes, planted files overwritten on push, heads checked before they get a name, and
no credentials written down. Every remote here is real: a directory, moto S3, the Hub test server.
"""

from __future__ import annotations

import json
import logging
import stat
import tempfile
import tracemalloc

import numpy as np
import pytest
from click.testing import CliRunner
from remotes_support import store_state

from vbstore import canonical
from vbstore.cli import cli
from vbstore.errors import UsageError
from vbstore.remotes import (
    Entry,
    RemoteError,
    TamperedBlob,
    _closure,
    add_remote,
    fetch_derivation,
    list_remotes,
    pull,
    push,
    remote_has_derivation,
)
from vbstore.remotes._closure import ref_document
from vbstore.remotes._fsspec import DirRemote
from vbstore.remotes._hub import HubRemote
from vbstore.store import derivation_key, derivation_spec

REPO = "tester/untrusted"


@pytest.fixture
def remote_dir(stores, tmp_path):
    """Remote ``d`` (a directory) configured in both stores."""
    for store in stores:
        add_remote(store, "d", str(tmp_path / "remote"))
    return tmp_path / "remote"


def _blob(root, oid: str):
    return root / "objects" / oid[:2] / oid[2:]


def _plant(path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.chmod(0o644)
    path.write_bytes(data)


def _counting_download(monkeypatch, remote_class) -> dict[str, int]:
    """Count the bytes a pull takes from ``remote_class.download``."""
    taken = {"bytes": 0}
    original = remote_class.download

    def download(self, *args, **kwargs):
        chunks = original(self, *args, **kwargs)
        if chunks is None:
            return None

        def counted():
            for chunk in chunks:
                taken["bytes"] += len(chunk)
                yield chunk

        return counted()

    monkeypatch.setattr(remote_class, "download", download)
    return taken


# ---- size bounds -----------------------------------------------------------------------------

def test_pull_stops_reading_a_blob_at_its_listed_size(stores, lineage, remote_dir, monkeypatch):
    a, b = stores
    push(a, "d", "exp/result")
    image = lineage["images"][0]  # listed at 64 bytes
    _plant(_blob(remote_dir, image), b"\0" * (16 << 20))
    taken = _counting_download(monkeypatch, DirRemote)
    with pytest.raises(TamperedBlob, match="larger than its listed size"):
        pull(b, "d/exp/result")
    assert taken["bytes"] < 2 << 20  # one chunk past the listing, not 16 MiB
    assert store_state(b) == ([], {}, 0, [])
    assert list((b.root / "tmp").iterdir()) == []


def test_pull_never_holds_a_whole_blob_in_memory(stores, remote_dir):
    a, b = stores
    rng = np.random.default_rng(0)
    raw = a.put_bytes(rng.bytes(24 << 20), "blob")
    pack = a.put_tensors({"pooled.-1": rng.standard_normal((6 << 20) // 4).astype(np.float32)},
                         "pack", {"format": "vbstore.pack.v1", "extractor": "e" * 64,
                                  "layers": "[-1]", "images": "[]"})
    a.tag("big/raw", raw)
    a.tag("big/pack", pack)
    push(a, "d", "big/raw")
    push(a, "d", "big/pack")
    tracemalloc.start()
    try:
        pull(b, "d/big/raw")
        pull(b, "d/big/pack")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert b.verify(raw)
    assert b.verify(pack)
    assert peak < 8 << 20, f"peak {peak >> 20} MiB while pulling two 24 MiB blobs"


def test_oversized_refs_and_records_are_refused(stores, lineage, remote_dir, monkeypatch):
    a, b = stores
    push(a, "d", "exp/result")
    ref_file = remote_dir / "refs" / "exp" / "result.json"
    _plant(ref_file, ref_file.read_bytes() + b" " * 4096)  # still a valid document
    monkeypatch.setattr(_closure, "MAX_DOCUMENT_BYTES", 4096)
    with pytest.raises(RemoteError, match="larger than 4096 bytes"):
        pull(b, "d/exp/result")
    assert store_state(b) == ([], {}, 0, [])


def test_oversized_ref_on_s3_is_refused(stores, lineage, s3_url, monkeypatch):
    a, b = stores
    url, endpoint = s3_url
    for store in stores:
        add_remote(store, "s3", url, {"endpoint_url": endpoint})
    push(a, "s3", "exp/result")
    monkeypatch.setattr(_closure, "MAX_DOCUMENT_BYTES", 64)
    with pytest.raises(RemoteError, match="larger than 64 bytes"):
        pull(b, "s3/exp/result")


@pytest.fixture
def hub_remote(stores, hub):
    for store in stores:
        add_remote(store, "hub", f"hf://{REPO}")
    return hub


def test_hub_downloads_stream_into_the_store_not_the_system_temp(stores, lineage, hub_remote,
                                                                  monkeypatch, tmp_path):
    a, b = stores
    push(a, "hub", "exp/result")
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    seen = []
    original = type(b.files).write_temp

    def write_temp(self, chunks, known_id=None):
        result = original(self, chunks, known_id)
        seen.append(sorted(p.name for p in system_tmp.rglob("*")))
        return result

    monkeypatch.setattr(type(b.files), "write_temp", write_temp)
    pull(b, "hub/exp/result")
    assert seen
    assert all(entry == [] for entry in seen)

    image = lineage["images"][0]
    hub_remote.state.commit_directly(REPO, {f"objects/{image[:2]}/{image[2:]}": b"\0" * (8 << 20)})
    _, c = stores[0], type(b)(tmp_path / "c")
    add_remote(c, "hub", f"hf://{REPO}")
    taken = _counting_download(monkeypatch, HubRemote)
    with pytest.raises(TamperedBlob, match="larger than its listed size"):
        pull(c, "hub/exp/result")
    assert taken["bytes"] < 2 << 20
    c.close()


# ---- what a pull may record ----------------------------------------------------------------

def _unrelated_result(store) -> tuple[str, str]:
    """A result and its derivation key that have nothing to do with the lineage's head."""
    result = store.put_json({"task": "linear", "op_version": 2, "metrics": {"top1": 0.99},
                             "params": {}, "inputs": {}}, "result")
    spec = derivation_spec("result", 2, {}, {"task": "linear", "planted": True})
    store.record(spec, result)
    store.tag("other/result", result)
    return result, derivation_key(spec)


def test_pulling_a_head_plants_no_cache_answer_for_an_unrelated_result(stores, lineage, remote_dir):
    a, b = stores
    other, other_key = _unrelated_result(a)
    a.tag("heads/mine", lineage["head"])
    push(a, "d", "heads/mine")
    push(a, "d", "other/result")
    # a hostile ref: the head, plus a fake edge to an unrelated result that carries its derivation
    listed = {e.id: e for e in _closure.closure(a, lineage["head"])}
    for entry in _closure.closure(a, other):
        listed.setdefault(entry.id, entry)
    head = listed[lineage["head"]]
    listed[head.id] = Entry(head.id, head.kind, head.size, (*head.edges, ("eval", other)),
                            head.derivation)
    _plant(remote_dir / "refs" / "evil-head.json",
           ref_document("evil-head", listed[head.id], sorted(listed.values(), key=lambda e: e.id)))

    pulled = pull(b, "d/evil-head")
    assert pulled.id == lineage["head"]
    assert b.lookup(lineage["train_key"]) == lineage["head"]  # the head's own derivation: kept
    assert b.lookup(other_key) is None  # a result can never be an input of a head


def test_a_derivation_is_recorded_only_for_the_kind_its_op_produces(stores, lineage, remote_dir):
    a, b = stores
    a.tag("heads/mine", lineage["head"])
    push(a, "d", "heads/mine")
    # the head listed as the output of a "result" derivation: a cache answer of the wrong kind
    spec = derivation_spec("result", 2, {}, {"task": "linear", "planted": True})
    head = next(e for e in _closure.closure(a, lineage["head"]) if e.id == lineage["head"])
    lying = Entry(head.id, head.kind, head.size, head.edges,
                  {"key": derivation_key(spec), "spec": spec})
    _plant(remote_dir / "refs" / "lying.json", ref_document("lying", lying, [lying]))
    pull(b, "d/lying")
    assert b.lookup(derivation_key(spec)) is None


def test_a_no_cache_remote_serves_pulls_but_is_never_asked_as_a_cache(stores, lineage, tmp_path):
    a, b = stores
    add_remote(a, "d", str(tmp_path / "remote"))
    add_remote(b, "d", str(tmp_path / "remote"), cache=False)
    push(a, "d", "exp/result")
    assert [c.cache for c in list_remotes(b)] == [False]
    assert remote_has_derivation(b, lineage["eval_key"]) is None
    assert fetch_derivation(b, lineage["eval_key"]) is None
    assert store_state(b) == ([], {}, 0, [])
    pulled = pull(b, "d/exp/result")
    assert pulled.id == lineage["result"]
    assert pulled.derivations == 0  # a stranger's lineage is no cache answer
    assert b.lookup(lineage["eval_key"]) is None


def test_remote_add_no_cache_on_the_command_line(tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["--store", str(tmp_path / "s"), "remote", "add", "--no-cache",
                                 "team", str(tmp_path / "r"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["cache"] is False
    listed = runner.invoke(cli, ["--store", str(tmp_path / "s"), "remote", "list"])
    assert "pull only" in listed.output


def test_a_tampered_cache_answer_is_a_miss_with_a_warning(stores, lineage, remote_dir, caplog):
    a, b = stores
    push(a, "d", "exp/result")
    victim = _blob(remote_dir, lineage["result"])
    data = bytearray(victim.read_bytes())
    data[-2] ^= 0x01
    _plant(victim, bytes(data))
    empty = store_state(b)
    with caplog.at_level(logging.WARNING, logger="vbstore.remotes"):
        assert fetch_derivation(b, lineage["eval_key"]) is None
    assert "tampered" in caplog.text or "hash" in caplog.text
    assert store_state(b) == empty


def test_an_unsafe_cache_record_is_a_miss_with_a_warning(stores, lineage, remote_dir, caplog):
    a, b = stores
    push(a, "d", "exp/result")
    path = remote_dir / "derivations" / f"{lineage['eval_key']}.json"
    doc = json.loads(path.read_bytes())
    doc["output"] = "../../etc/passwd"
    _plant(path, canonical.dumps(doc))
    with caplog.at_level(logging.WARNING, logger="vbstore.remotes"):
        assert fetch_derivation(b, lineage["eval_key"]) is None
    assert "skipped" in caplog.text
    assert store_state(b) == ([], {}, 0, [])


# ---- push overwrites what it finds planted -------------------------------------------------

def test_push_replaces_a_planted_blob_and_record_on_a_directory(stores, lineage, remote_dir):
    a, b = stores
    head = lineage["head"]
    _plant(_blob(remote_dir, head), b"garbage under a good name")
    key_path = remote_dir / "derivations" / f"{lineage['train_key']}.json"
    _plant(key_path, b"{}")
    pushed = push(a, "d", "exp/result")
    assert head in pushed.uploaded
    assert _blob(remote_dir, head).read_bytes() == a.read_bytes(head)
    assert json.loads(key_path.read_bytes())["output"] == head
    assert pull(b, "d/exp/result").id == lineage["result"]


def test_push_replaces_a_planted_object_on_s3(stores, lineage, s3_url):
    import boto3

    a, b = stores
    url, endpoint = s3_url
    for store in stores:
        add_remote(store, "s3", url, {"endpoint_url": endpoint})
    bucket = url[len("s3://"):].split("/")[0]
    head = lineage["head"]
    key = f"team/objects/{head[:2]}/{head[2:]}"
    boto3.client("s3", endpoint_url=endpoint).put_object(Bucket=bucket, Key=key, Body=b"planted")
    pushed = push(a, "s3", "exp/result")
    assert head in pushed.uploaded
    assert pull(b, "s3/exp/result").id == lineage["result"]


def test_push_replaces_a_planted_object_on_the_hub(stores, lineage, hub_remote):
    a, b = stores
    head = lineage["head"]
    hub_remote.state.create(REPO)
    hub_remote.state.commit_directly(REPO, {f"objects/{head[:2]}/{head[2:]}": b"planted"})
    pushed = push(a, "hub", "exp/result")
    assert head in pushed.uploaded
    assert pull(b, "hub/exp/result").id == lineage["result"]


# ---- pull head: kind first, record checked --------------------------------------------------

def _vb(tmp_path, store: str, *args: str):
    return CliRunner().invoke(cli, ["--store", str(tmp_path / store), *args])


def test_pull_head_refuses_a_claimed_head_before_any_local_ref_changes(stores, lineage,
                                                                       remote_dir, tmp_path):
    a, b = stores
    push(a, "d", "exp/result")
    pull(b, "d/exp/result")  # b already holds the manifest: its bytes are not checked again
    manifest = lineage["manifest"]
    entry = Entry(manifest, "head", a.info(manifest).size, (), None)
    _plant(remote_dir / "refs" / "evil.json", ref_document("evil", entry, [entry]))
    b.close()
    result = _vb(tmp_path, "b", "pull", "head", "d/evil")
    assert result.exit_code != 0
    assert "evil" not in type(b)(tmp_path / "b").refs()


def test_pull_head_missing_a_compat_field_is_a_mismatch(stores, remote_dir, tmp_path):
    a, _ = stores
    compat = {"backbone": "b" * 64, "weights": "a" * 64, "extractor_key": "e" * 64,
              "layers": [-1], "feature_mode": "pooled", "embed_dim": 4, "task": "linear",
              "task_op_version": 1}  # no pooling
    head = a.put_tensors({"weight": np.ones((3, 4), np.float32)}, "head",
                         {"format": "vbstore.head.v1",
                          "vbstore.compat": canonical.dumps(compat).decode()})
    a.tag("heads/partial", head)
    push(a, "d", "heads/partial")
    stores[1].close()
    refused = _vb(tmp_path, "b", "pull", "head", "d/heads/partial")
    assert refused.exit_code == 11, refused.output
    assert "pooling" in refused.output
    assert type(a)(tmp_path / "b").refs() == {}
    warned = _vb(tmp_path, "b", "pull", "head", "d/heads/partial", "--no-strict")
    assert warned.exit_code == 0, warned.output
    assert "pooling" in warned.output


# ---- credentials ---------------------------------------------------------------------------

@pytest.mark.parametrize("endpoint", [
    "http://:secret@127.0.0.1:9000",
    "http://user@127.0.0.1:9000",
    "http://127.0.0.1:9000/?X-Amz-Signature=abc&X-Amz-Credential=k",
    "http://127.0.0.1:9000/#token",
])
def test_credentials_in_endpoint_url_are_refused(stores, endpoint):
    with pytest.raises(UsageError, match=r"credential|query"):
        add_remote(stores[0], "s3", "s3://bucket/x", {"endpoint_url": endpoint})
    assert list_remotes(stores[0]) == []


def test_remotes_file_is_private(stores, tmp_path):
    add_remote(stores[0], "d", str(tmp_path / "r"))
    mode = stat.S_IMODE((stores[0].root / "remotes.json").stat().st_mode)
    assert mode == 0o600
