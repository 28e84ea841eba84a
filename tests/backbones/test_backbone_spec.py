"""Spec strings: one parser, and every refusal names its fix; spec_params as an alias key."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vbstore import canonical
from vbstore.backbones import (
    BackboneSpec,
    CheckpointNotFound,
    InvalidSpec,
    UnknownBackbone,
    parse_spec,
    spec_params,
)
from vbstore.errors import UsageError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("torchvision:resnet18", BackboneSpec("torchvision", "torchvision", "resnet18")),
        (
            "torchvision:resnet50@IMAGENET1K_V2",
            BackboneSpec("torchvision", "torchvision", "resnet50", "IMAGENET1K_V2"),
        ),
        (
            "timm:vit_small_patch14_dinov2.lvd142m",
            BackboneSpec("timm", "timm", "vit_small_patch14_dinov2.lvd142m"),
        ),
        ("dinov2:dinov2_vitg14_reg", BackboneSpec("dinov2", "dinov2", "dinov2_vitg14_reg")),
        (
            "open_clip:ViT-B-32@laion2b_s34b_b79k",
            BackboneSpec("open_clip", "open_clip", "ViT-B-32", "laion2b_s34b_b79k"),
        ),
        ("  test_vit ", BackboneSpec("test_vit", "custom", "test_vit")),
    ],
)
def test_valid_specs(text, expected):
    parsed = parse_spec(text)
    assert parsed == expected
    assert parse_spec(str(parsed)) == parsed


@pytest.mark.parametrize(
    ("text", "error", "fix"),
    [
        ("", InvalidSpec, "timm:resnet50"),
        ("resnet101", UnknownBackbone, "timm:resnet101"),
        ("tset_vit", UnknownBackbone, "did you mean test_vit"),
        (
            "tensorflow:resnet50",
            UnknownBackbone,
            "known sources: dinov2, open_clip, timm, torchvision",
        ),
        ("timm", InvalidSpec, "write timm:ARCH"),
        ("timm:", InvalidSpec, "write timm:ARCH"),
        ("timm:resnet50@a1_in1k", InvalidSpec, "write timm:resnet50.a1_in1k"),
        ("open_clip:ViT-B-32@", InvalidSpec, "drop the '@'"),
        ("hf-hub:timm/resnet50.a1_in1k", InvalidSpec, "--weights PATH"),
        ("timm:hf-hub:timm/resnet50", InvalidSpec, "--weights PATH"),
        ("/models/resnet50.pth", InvalidSpec, "--weights PATH"),
        ("test_vit:big", InvalidSpec, "write just test_vit"),
        ("test_vit@v2", InvalidSpec, "--weights"),
        ("dinov2:dinov2_vits16", UnknownBackbone, "did you mean dinov2:dinov2_vits14"),
    ],
)
def test_invalid_specs_name_the_fix(text, error, fix):
    with pytest.raises(error) as info:
        parse_spec(text)
    assert fix in str(info.value)
    assert info.value.exit_code == (9 if error is UnknownBackbone else 2)
    assert isinstance(info.value, KeyError if error is UnknownBackbone else ValueError)
    if error is UnknownBackbone:  # says where to look: the listing, or the known names inline
        assert "vbstore list backbones" in str(info.value) or "known" in str(info.value)


_ARCH = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,30}", fullmatch=True)


@given(
    arch=_ARCH, tag=st.none() | st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_\-]{0,20}", fullmatch=True)
)
def test_spec_strings_round_trip(arch, tag):
    text = f"open_clip:{arch}" + (f"@{tag}" if tag else "")
    parsed = parse_spec(text)
    assert (parsed.arch, parsed.tag) == (arch, tag)
    assert str(parsed) == text


def test_spec_params_are_canonical_and_merge_tag_spellings():
    by_spec = spec_params("open_clip:ViT-B-32@laion2b_s34b_b79k")
    by_weights = spec_params("open_clip:ViT-B-32", weights="laion2b_s34b_b79k")
    assert (
        by_spec
        == by_weights
        == {
            "source": "open_clip",
            "arch": "ViT-B-32",
            "tag": "laion2b_s34b_b79k",
            "weights": "pretrained",
            "checkpoint": None,
            "seed": None,
            "use_projection": False,
            "input_size": None,
        }
    )
    assert canonical.key_of(by_spec) == canonical.key_of(by_weights)
    assert spec_params("open_clip:ViT-B-32@openai", use_projection=True)["use_projection"] is True
    with pytest.raises(InvalidSpec, match="two tags"):
        spec_params("open_clip:ViT-B-32@openai", weights="laion2b_s34b_b79k")


def test_spec_params_seed_only_counts_for_random_weights():
    assert spec_params("test_vit", weights="random")["seed"] == 0
    assert spec_params("test_vit", weights="random", seed=4)["seed"] == 4
    assert spec_params("timm:resnet50")["seed"] is None
    with pytest.raises(UsageError, match="--backbone-seed only applies with --weights random"):
        spec_params("timm:resnet50", seed=4)  # a seed beside pretrained weights was ignored
    assert spec_params("test_vit", weights="random", seed=4) != spec_params(
        "test_vit", weights="random", seed=5
    )
    with pytest.raises(InvalidSpec, match="seed"):
        spec_params("test_vit", weights="random", seed=-1)


def test_spec_params_refuse_arguments_that_cannot_apply(tmp_path):
    with pytest.raises(InvalidSpec, match="CLIP backbones only"):
        spec_params("timm:resnet50", use_projection=True)
    with pytest.raises(InvalidSpec, match="input_size"):
        spec_params("timm:resnet50", input_size=0)
    with pytest.raises(CheckpointNotFound):
        spec_params("timm:resnet50", weights=tmp_path / "missing.pth")
    (tmp_path / "weights.onnx").write_bytes(b"x")
    with pytest.raises(InvalidSpec, match="safetensors"):
        spec_params("timm:resnet50", weights=tmp_path / "weights.onnx")
