"""Remote URLs and options, ref names, and the model card: the parts that need no server."""

from __future__ import annotations

import math

import pytest
import yaml

from vbstore.errors import UsageError
from vbstore.remotes import UnsafeRemotePath, add_remote, list_remotes, parse_url, write_model_card
from vbstore.remotes._errors import redact
from vbstore.remotes._paths import check_ref, object_path, split_target


def test_urls_are_normalised(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert parse_url("rel/dir") == ("dir", f"file://{tmp_path}/rel/dir")
    assert parse_url(f"file://{tmp_path}/x/") == ("dir", f"file://{tmp_path}/x")
    assert parse_url("s3://my-bucket/a/b/") == ("s3", "s3://my-bucket/a/b")
    assert parse_url("hf://user/repo") == ("hf", "hf://user/repo")


@pytest.mark.parametrize("url", [
    "", "ftp://host/x", "file://otherhost/x", "s3://Bad_Bucket/x", "s3://bkt/a/../b",
    "s3://key:secret@bkt/p", "hf://user", "hf://user/repo/extra", "hf://u/r?token=abc",
])
def test_bad_urls_are_refused(url):
    with pytest.raises(UsageError):
        parse_url(url)


def test_options_are_checked_and_secrets_never_stored(tmp_path):
    with pytest.raises(UsageError, match="unknown option"):
        add_remote(tmp_path, "x", "s3://bkt/p", {"endpont_url": "http://h"})
    for key in ("aws_secret_access_key", "token", "HF_TOKEN", "password"):
        with pytest.raises(UsageError, match="credential"):
            add_remote(tmp_path, "x", "hf://u/r", {key: "v"})
    add_remote(tmp_path, "x", "hf://u/r", {"branch": "dev"})
    assert [(r.name, dict(r.options)) for r in list_remotes(tmp_path)] == [("x", {"branch": "dev"})]


@pytest.mark.parametrize("name", ["main", "heads/linear-v1.2", "x@1+2", "team/exp/result_3"])
def test_good_ref_names(name):
    assert check_ref(name) == name
    assert split_target(f"r/{name}") == ("r", name)


def test_a_bad_remote_name_says_what_a_remote_name_is(tmp_path):
    for name in ("bad name", "a/b"):
        with pytest.raises(UnsafeRemotePath, match="unsafe remote name") as info:
            add_remote(tmp_path, name, str(tmp_path / "r"))
        assert "one word of letters, digits and . _ -" in str(info.value)
        assert "/" not in info.value.hint  # a remote name has no '/': REMOTE/REF splits at it


@pytest.mark.parametrize("target", ["cnn-linear", "team/", ""])
def test_a_pull_target_without_its_remote_says_so(target):
    with pytest.raises(UnsafeRemotePath, match="is not REMOTE/NAME") as info:
        split_target(target)
    assert "name the remote and the ref" in str(info.value)


@pytest.mark.parametrize("name", [
    "", "/a", "a/", "a//b", "../a", "a/..", "a/./b", ".hidden", "a b", "a\nb", "a\\b",
    "deadbeef", "x" * 201, "a/.b", "a..b",
])
def test_bad_ref_names(name):
    with pytest.raises(UnsafeRemotePath):
        check_ref(name)


def test_object_paths_fan_out_and_refuse_non_ids():
    oid = "ab" + "c" * 62
    assert object_path(oid) == f"objects/ab/{'c' * 62}"
    for bad in ("../" + "a" * 61, "A" * 64, "a" * 63):
        with pytest.raises(UnsafeRemotePath):
            object_path(bad)


def test_model_card_front_matter_is_yaml_and_cannot_be_broken_out_of():
    card = write_model_card({
        "name": "probe | with pipes", "backbone": {"name": "timm:vit_small", "id": "ab12"},
        "task": "linear", "metrics": {"top1": 0.8125, "loss": 1e-05, "n": 3},
        "pooling": "cls\n---\nlibrary_name: evil", "classes": [f"c{i}" for i in range(20)],
        "tags": ["imagenet"],
    })
    _, front, body = card.split("---\n", 2)
    meta = yaml.safe_load(front)
    assert meta["library_name"] == "vbstore"
    assert meta["metrics"] == {"top1": 0.8125, "loss": 1e-05, "n": 3}
    assert isinstance(meta["metrics"]["loss"], float)  # YAML 1.1 needs the '.' in 1.0e-05
    assert meta["tags"] == ["vbstore", "probe-head", "linear", "imagenet"]
    assert meta["backbone"] == "timm:vit_small"
    assert "probe \\| with pipes" in body
    assert "20 items" in body
    assert "| pooling | cls --- library_name: evil |" in body


def test_model_card_refuses_credentials_and_non_finite_metrics(monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-value")
    with pytest.raises(UsageError, match="credential"):
        write_model_card({"name": "x", "notes": ["s3cr3t-value"]})
    with pytest.raises(UsageError, match="finite"):
        write_model_card({"name": "x", "metrics": {"top1": math.nan}})
    assert redact("key s3cr3t-value here") == "key *** here"


def test_the_probe_reaches_the_proxy_when_one_applies(monkeypatch):
    import socket

    from vbstore.remotes import RemoteOffline, forget_unreachable
    from vbstore.remotes._base import probe_url

    with socket.socket() as listener, socket.socket() as unused:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        unused.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        live, dead = listener.getsockname()[1], unused.getsockname()[1]
        probe_url("x", f"http://127.0.0.1:{live}")
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{dead}")
        with pytest.raises(RemoteOffline, match=str(dead)):
            probe_url("x", f"http://127.0.0.1:{live}")
        forget_unreachable()
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        probe_url("x", f"http://127.0.0.1:{live}")
        monkeypatch.setenv("VBSTORE_REMOTE_PROBE_TIMEOUT", "0")  # off: not even the dead host
        probe_url("x", f"http://127.0.0.1:{dead}")


def test_declared_offline_stops_remotes_and_downloads_alike(monkeypatch):
    """One probe for both: VBSTORE_OFFLINE refuses any host but loopback, without a connection."""
    import socket

    from vbstore.backbones._errors import WeightsUnavailable
    from vbstore.backbones._fetch import _require_network
    from vbstore.remotes import RemoteOffline, forget_unreachable
    from vbstore.remotes._base import probe_url

    def no_network(*args, **kwargs):
        raise AssertionError("declared offline: nothing may connect")

    forget_unreachable()
    monkeypatch.setenv("VBSTORE_OFFLINE", "1")
    monkeypatch.setattr(socket, "create_connection", no_network)
    with pytest.raises(RemoteOffline, match="VBSTORE_OFFLINE=1"):
        probe_url("team", "https://s3.example.com/bucket")
    with pytest.raises(WeightsUnavailable, match="VBSTORE_OFFLINE=1"):
        _require_network("https://huggingface.co/x", "weights", "hf")
    monkeypatch.setenv("VBSTORE_PROBE_TIMEOUT", "0")
    probe_url("local", "http://127.0.0.1:9")  # loopback is not the network
