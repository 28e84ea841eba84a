"""Pretrained files and hub code are checked against their pins before use (issue 21)."""

from __future__ import annotations

import hashlib
import os

import pytest

from vbstore.backbones import _fetch, _pins, build_backbone
from vbstore.backbones.dinov2 import DINOV2_COMMIT
from vbstore.errors import TamperedWeights


def test_a_cached_file_is_used_when_it_hashes_to_its_pin_and_hashed_once(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    data = b"weights" * 1000
    name = f"tiny-{hashlib.sha256(data).hexdigest()[:8]}.pth"
    checkpoints = tmp_path / "torch" / "hub" / "checkpoints"
    checkpoints.mkdir(parents=True)
    (checkpoints / name).write_bytes(data)
    assert _fetch.url_file(f"https://example.invalid/{name}", what="w") == checkpoints / name
    hashed = []
    real = hashlib.sha256
    monkeypatch.setattr(_pins.hashlib, "sha256", lambda *a: hashed.append(1) or real(*a))
    _fetch.url_file(f"https://example.invalid/{name}", what="w")  # the same file state
    assert hashed == []
    (checkpoints / name).write_bytes(b"other" * 1000)  # a new state is hashed again
    with pytest.raises(TamperedWeights):
        _fetch.url_file(f"https://example.invalid/{name}", what="w")
    assert hashed


def test_a_pin_in_the_url_folder_is_checked_too(tmp_path):
    sha = hashlib.sha256(b"x").hexdigest()
    assert _pins.expected_from_url(f"https://h/clip/models/{sha}/ViT-B-32.pt") == sha
    assert _pins.expected_from_url("https://h/dinov2/dinov2_vits14_pretrain.pth") is None


def test_a_hub_cache_file_must_hash_to_its_blob_name(tmp_path):
    good, bad = b"good bytes", b"planted bytes"
    blobs = tmp_path / "models--a--b" / "blobs"
    snapshot = tmp_path / "models--a--b" / "snapshots" / ("0" * 40)
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for name, content, claimed in (("ok.safetensors", good, good),
                                   ("planted.safetensors", bad, good + b"!")):
        blob = blobs / hashlib.sha256(claimed).hexdigest()
        blob.write_bytes(content)
        os.symlink(blob, snapshot / name)
    assert _fetch._checked_hub_file(snapshot / "ok.safetensors", "w") == snapshot / "ok.safetensors"
    with pytest.raises(TamperedWeights, match="not the pinned"):
        _fetch._checked_hub_file(snapshot / "planted.safetensors", "w")


def test_planted_dinov2_hub_code_is_never_executed(monkeypatch, tmp_path):
    """Issue 21: a hubconf.py planted where torch.hub caches the pinned commit was executed."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("VBSTORE_OFFLINE", "1")
    monkeypatch.delitem(_pins._seen, f"code:github:facebookresearch/dinov2@{DINOV2_COMMIT}",
                        raising=False)
    repo = tmp_path / "torch" / "hub" / f"facebookresearch_dinov2_{DINOV2_COMMIT}"
    repo.mkdir(parents=True)
    marker = tmp_path / "executed"
    (repo / "hubconf.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    with pytest.raises(TamperedWeights, match="not fetched by vbstore"):
        build_backbone("dinov2:dinov2_vits14", weights="random")
    assert not marker.exists()


def test_hub_code_changed_after_vbstore_fetched_it_is_refused(monkeypatch, tmp_path, fake_dinov2):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("VBSTORE_OFFLINE", "1")
    repo = fake_dinov2(tmp_path / "torch")  # as vbstore's fetch leaves it
    assert build_backbone("dinov2:dinov2_vits14", weights="random").num_blocks == 3
    marker = tmp_path / "executed"
    with open(repo / "hubconf.py", "a") as handle:
        handle.write(f"\nopen({str(marker)!r}, 'w').write('ran')\n")
    with pytest.raises(TamperedWeights, match="other code"):
        build_backbone("dinov2:dinov2_vits14", weights="random")
    assert not marker.exists()


def _planted_pyc(source: os.PathLike[str], target: str, code: str) -> None:
    """Compile ``code`` as unchecked-hash bytecode at ``target`` (Python runs it in place of
    ``source`` without looking at the source again)."""
    import py_compile

    planted = os.path.join(os.path.dirname(target), "planted_src.py")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(planted, "w") as handle:
        handle.write(code)
    py_compile.compile(planted, cfile=target, doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    os.remove(planted)


def test_planted_bytecode_beside_pinned_hub_code_is_never_run(monkeypatch, tmp_path, fake_dinov2):
    """Issue 32: the pin hashed only ``*.py``, so a planted ``__pycache__/hubconf.*.pyc`` ran."""
    import importlib.util

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("VBSTORE_OFFLINE", "1")
    repo = fake_dinov2(tmp_path / "torch")
    marker = tmp_path / "executed"
    _planted_pyc(repo / "hubconf.py", importlib.util.cache_from_source(str(repo / "hubconf.py")),
                 f"open({str(marker)!r}, 'w').write('ran')\n")
    assert build_backbone("dinov2:dinov2_vits14", weights="random").num_blocks == 3
    assert not marker.exists()
    assert not list(repo.rglob("*.pyc"))  # the planted one removed, none written


def test_sourceless_bytecode_in_pinned_hub_code_is_refused(monkeypatch, tmp_path, fake_dinov2):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("VBSTORE_OFFLINE", "1")
    repo = fake_dinov2(tmp_path / "torch")
    marker = tmp_path / "executed"
    _planted_pyc(repo / "helper.py", str(repo / "helper.pyc"),
                 f"open({str(marker)!r}, 'w').write('ran')\n")
    with pytest.raises(TamperedWeights, match=r"could run besides the pinned source \(helper.pyc"):
        build_backbone("dinov2:dinov2_vits14", weights="random")
    assert not marker.exists()
