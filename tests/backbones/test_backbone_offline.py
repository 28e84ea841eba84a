"""Without a network, asking for pretrained weights fails within seconds, naming the ways out."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from vbstore.backbones import WeightsUnavailable, build_backbone

PRETRAINED = [
    "timm:vit_tiny_patch16_224",
    "torchvision:resnet18",
    "open_clip:ViT-B-32@laion2b_s34b_b79k",
    "dinov2:dinov2_vits14",
]


@pytest.fixture(scope="module", autouse=True)
def _libraries_imported():
    # time the fetch logic, not the first import of timm/open_clip
    import open_clip  # noqa: F401
    import timm  # noqa: F401


def _assert_fast_and_clear(spec: str, limit_s: float = 5.0) -> WeightsUnavailable:
    start = time.monotonic()
    with pytest.raises(WeightsUnavailable) as info:
        build_backbone(spec)
    elapsed = time.monotonic() - start
    assert elapsed < limit_s, f"{spec} took {elapsed:.1f} s to fail"
    error = info.value
    assert isinstance(error, ConnectionError)
    assert error.exit_code == 6
    message = str(error)
    assert "cache" in message
    assert "offline" in message
    if not spec.startswith(
        "dinov2:"
    ):  # DINOv2 needs its hub code for any weights: see its own hint
        assert "--weights random" in message
        assert "checkpoint" in message
    return error


@pytest.mark.parametrize("spec", PRETRAINED)
def test_declared_offline_fails_fast(spec, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    error = _assert_fast_and_clear(spec)
    assert "HF_HUB_OFFLINE=1" in str(error)


def test_dinov2_offline_names_the_timm_equivalent(monkeypatch):
    monkeypatch.setenv("VBSTORE_OFFLINE", "1")
    error = _assert_fast_and_clear("dinov2:dinov2_vits14")
    assert "timm:vit_small_patch14_dinov2.lvd142m" in str(error)
    assert "torch.hub" in str(error)


def _no_network(monkeypatch) -> threading.Event:
    """The worst kind of no network: name resolution that never answers."""
    for var in (
        "HF_HUB_OFFLINE",
        "VBSTORE_OFFLINE",
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
    ):
        monkeypatch.delenv(var, raising=False)
    released = threading.Event()

    def hang(*_args, **_kwargs):
        released.wait(30)
        raise socket.gaierror("resolution hung")

    monkeypatch.setattr(socket, "getaddrinfo", hang)
    return released


@pytest.mark.parametrize("spec", PRETRAINED)
def test_hanging_dns_fails_fast(spec, monkeypatch):
    monkeypatch.setenv("VBSTORE_PROBE_TIMEOUT", "0.2")  # the mechanism, quickly
    released = _no_network(monkeypatch)
    try:
        error = _assert_fast_and_clear(spec, limit_s=2.0)
    finally:
        released.set()
    assert "unreachable" in str(error)


def test_hanging_dns_fails_within_the_default_probe_time(monkeypatch):
    released = _no_network(monkeypatch)
    try:
        _assert_fast_and_clear("timm:vit_tiny_patch16_224", limit_s=5.0)
    finally:
        released.set()


def test_refused_connection_fails_fast(monkeypatch):
    for var in (
        "HF_HUB_OFFLINE",
        "VBSTORE_OFFLINE",
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
    ):
        monkeypatch.delenv(var, raising=False)
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    error = _assert_fast_and_clear("timm:vit_tiny_patch16_224", limit_s=3.0)
    assert f"127.0.0.1:{port}" in str(error)


def test_random_and_checkpoints_never_touch_the_network(monkeypatch, tmp_path):
    def no_network(*_args, **_kwargs):
        raise AssertionError("the network was used")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    backbone = build_backbone("timm:test_vit", weights="random", input_size=32)
    path = tmp_path / "w.pth"
    import torch

    torch.save(backbone.module.state_dict(), path)
    assert (
        build_backbone("timm:test_vit", weights=path, input_size=32).weights_record()["origin"]
        == "checkpoint"
    )
