"""S3 remotes through s3fs against a moto server on 127.0.0.1, conditional ref writes included."""

from __future__ import annotations

import json

import boto3
import pytest
from remotes_support import AWS_SECRET, all_bytes, build_lineage, race_once, store_state

from vbstore.remotes import (
    RefUpdate,
    RemoteConflict,
    RemoteOffline,
    TamperedBlob,
    add_remote,
    fetch_derivation,
    list_remote_refs,
    open_remote,
    pull,
    push,
)
from vbstore.remotes._fsspec import S3Remote


@pytest.fixture
def s3(stores, s3_url):
    """Remote ``s3`` (a fresh bucket prefix on the moto server) configured in both stores."""
    url, endpoint = s3_url
    for store in stores:
        add_remote(store, "s3", url, {"endpoint_url": endpoint})
    bucket = url[len("s3://"):].split("/")[0]
    return boto3.client("s3", endpoint_url=endpoint), bucket


def test_round_trip_through_s3(stores, lineage, s3):
    a, b = stores
    client, bucket = s3
    assert push(a, "s3", "exp/result").uploaded
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]}
    assert f"team/objects/{lineage['head'][:2]}/{lineage['head'][2:]}" in keys
    assert "team/refs/exp/result.json" in keys
    assert list_remote_refs(b, "s3") == ["exp/result"]
    pulled = pull(b, "s3/exp/result")
    assert pulled.id == lineage["result"]
    assert len(pulled.downloaded) == 6
    assert b.children(lineage["head"]) == a.children(lineage["head"])
    assert b.read_bytes(lineage["pack"], verify=True) == a.read_bytes(lineage["pack"])
    assert fetch_derivation(b, lineage["train_key"]) == lineage["head"]


def test_ref_writes_are_conditional_on_the_etag(stores, lineage, s3):
    a, _ = stores
    push(a, "s3", "exp/result")
    with open_remote(a, "s3") as remote:
        data, etag = remote.read_ref("exp/result")
        assert etag
        remote.publish({}, RefUpdate("exp/result", data + b"\n", etag), "first writer wins")
        with pytest.raises(RemoteConflict, match="conditional write"):
            remote.publish({}, RefUpdate("exp/result", data, etag), "stale ETag")
        with pytest.raises(RemoteConflict):  # If-None-Match: * on a ref that now exists
            remote.publish({}, RefUpdate("exp/result", data, None), "create over existing")
        assert remote.read_ref("exp/result")[0] == data + b"\n"


def test_concurrent_push_conflicts_and_keeps_the_other_writer(stores, lineage, s3, monkeypatch,
                                                             tmp_path):
    from vbstore import Store

    a, b = stores
    with Store(tmp_path / "c") as c:
        add_remote(c, "s3", *_config(a))
        theirs = build_lineage(c, seed=3)
        race_once(monkeypatch, S3Remote, lambda: push(c, "s3", "exp/result"))
        with pytest.raises(RemoteConflict):
            push(a, "s3", "exp/result")
    assert pull(b, "s3/exp/result").id == theirs["result"]


def test_tampered_s3_object_is_refused(stores, lineage, s3):
    a, b = stores
    client, bucket = s3
    push(a, "s3", "exp/result")
    key = f"team/objects/{lineage['head'][:2]}/{lineage['head'][2:]}"
    client.put_object(Bucket=bucket, Key=key, Body=b"not the head")
    with pytest.raises(TamperedBlob):
        pull(b, "s3/exp/result")
    assert store_state(b) == ([], {}, 0, [])


def test_no_credentials_in_config_or_remote(stores, lineage, s3):
    a, _ = stores
    client, bucket = s3
    push(a, "s3", "exp/result")
    assert AWS_SECRET.encode() not in all_bytes(a.root)
    for item in client.list_objects_v2(Bucket=bucket)["Contents"]:
        body = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        assert AWS_SECRET.encode() not in body
        assert b"testing" not in body
    config = json.loads((a.root / "remotes.json").read_text())
    assert set(config["remotes"]["s3"]["options"]) == {"endpoint_url"}


def test_unreachable_endpoint_is_offline_at_once(stores, lineage):
    import socket
    import time

    a, _ = stores
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    add_remote(a, "dead", "s3://bucket/x", {"endpoint_url": f"http://127.0.0.1:{port}"})
    start = time.monotonic()
    with pytest.raises(RemoteOffline, match="unreachable"):
        push(a, "dead", "exp/result")
    assert time.monotonic() - start < 5
    assert fetch_derivation(a, "1" * 64) is None  # the binary cache treats it as a miss


def _config(store) -> tuple[str, dict[str, str]]:
    from vbstore.remotes import registry

    config = registry(store).get("s3")
    return config.url, dict(config.options)
