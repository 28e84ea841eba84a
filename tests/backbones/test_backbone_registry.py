"""The registry: one decorator for built-ins and plugins, listings, and cheap imports."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from vbstore.backbones import (
    BackboneAlreadyRegistered,
    backbone_rows,
    build_backbone,
    get_entry,
    list_backbones,
    register_backbone,
)

REPO = Path(__file__).resolve().parents[2]


def test_registering_a_name_twice_raises(plugin):
    def my_twice_net(*, pretrained=False, input_size=None):
        return torch.nn.Conv2d(3, 4, 3)

    plugin(my_twice_net)
    with pytest.raises(BackboneAlreadyRegistered, match="my_twice_net") as info:
        register_backbone(my_twice_net)
    assert isinstance(info.value, ValueError)
    with pytest.raises(
        BackboneAlreadyRegistered,
        match=r"already registered by vbstore\.backbones\._builtins\.timm",
    ):

        @register_backbone
        def timm(request):  # a plugin cannot shadow a built-in source
            raise AssertionError

    assert get_entry("timm").source == "timm"


def test_a_plugin_builds_through_the_same_path(plugin, make_batch):
    def my_conv_net(*, pretrained=False, input_size=None):
        """Two strided convolutions."""
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, 2, 1), torch.nn.Conv2d(4, 6, 3, 2, 1))

    plugin(my_conv_net, embed_dim=6)
    assert "my_conv_net" in list_backbones("my_*")
    first = build_backbone("my_conv_net", weights="random", seed=1)
    second = build_backbone("my_conv_net", weights="random", seed=1, input_size=64)
    assert first.weights_record() == second.weights_record()
    assert (first.source, first.arch, first.default_pooling) == ("custom", "my_conv_net", "gap")
    assert (first.cfg.input_size, second.cfg.input_size) == (224, 64)
    out = first.extract(make_batch(first))
    assert out["pooled"].shape == (2, 6)
    assert out["grid_hw"] == (56, 56)
    row = next(r for r in backbone_rows("my_conv_net"))
    assert row == {
        "name": "my_conv_net",
        "spec": "my_conv_net",
        "source": "custom",
        "extra": None,
        "installed": True,
        "offline": True,
        "default_pooling": None,
        "embed_dim": 6,
        "description": "Two strided convolutions.",
    }


def test_list_backbones_filters_with_fnmatch():
    assert list_backbones("test_*") == ["test_cnn", "test_pixels", "test_vit"]
    assert list_backbones("*clip*") == ["open_clip"]
    assert list_backbones("TEST_*") == []
    assert {"dinov2", "open_clip", "timm", "torchvision", "test_vit"} <= set(list_backbones())


def test_rows_expand_catalogs_and_check_extras_without_importing(monkeypatch):
    rows = backbone_rows("dinov2:*_reg")
    assert [(r["spec"], r["embed_dim"]) for r in rows] == [
        ("dinov2:dinov2_vitb14_reg", 768),
        ("dinov2:dinov2_vitg14_reg", 1536),
        ("dinov2:dinov2_vitl14_reg", 1024),
        ("dinov2:dinov2_vits14_reg", 384),
    ]
    [clip] = backbone_rows("open_clip")
    assert (clip["spec"], clip["extra"], clip["installed"]) == ("open_clip:ARCH@TAG", "clip", True)
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "open_clip" else object()
    )
    assert backbone_rows("open_clip")[0]["installed"] is False
    [timm_row] = backbone_rows("timm")
    assert (timm_row["spec"], timm_row["embed_dim"], timm_row["default_pooling"]) == (
        "timm:ARCH",
        None,
        None,
    )


def test_listing_and_specs_do_not_import_torch():
    code = (
        "import sys\n"
        "import vbstore.backbones as b\n"
        "b.list_backbones(); b.backbone_rows(); b.parse_spec('open_clip:ViT-B-32@openai')\n"
        "b.spec_params('timm:resnet50', weights='random', seed=1)\n"
        "heavy = [m for m in ('torch', 'timm', 'open_clip', 'torchvision') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
