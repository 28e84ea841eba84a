"""CustomBackbone reads geometry from one dummy pass, and refuses to guess when it cannot tell."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from vbstore.backbones import AmbiguousBackbone, BackboneCfg, CustomBackbone
from vbstore.store._tensors import tensor_identity

CFG = BackboneCfg(input_size=32, resize=32)


class Tokens(nn.Module):
    """Patch-8 tokens with ``prefix`` extra tokens in front: (B, prefix + 16, 12) at 32 px."""

    def __init__(self, prefix: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, 12, 8, 8)
        self.prefix = nn.Parameter(torch.randn(1, prefix, 12)) if prefix else None

    def forward(self, x):
        t = self.proj(x).flatten(2).transpose(1, 2)
        return (
            t if self.prefix is None else torch.cat([self.prefix.expand(len(x), -1, -1), t], dim=1)
        )


class Flat(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 5)

    def forward(self, x):
        return self.fc(x.mean(dim=(2, 3)))


class Pair(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, 2, 1)

    def forward(self, x):
        y = self.conv(x)
        return y, y.mean(dim=(2, 3))


@pytest.mark.parametrize(
    ("module", "kwargs", "argument"),
    [
        (Tokens(prefix=1), {}, "has_cls_token="),  # 17 tokens: a class token, or not a grid?
        (Tokens(prefix=5), {"has_cls_token": True}, "patch_size="),  # 20 - 1 is not a square either
        (Tokens(prefix=1), {"patch_size": 16}, "patch_size="),  # 17 tokens cannot be a 2x2 grid
        (Flat(), {}, "feature_fn="),
        (Pair(), {}, "feature_fn="),
        (
            nn.Conv2d(3, 4, 3, 2, 1),
            {"feature_fn": lambda m, x: m(x).permute(0, 2, 3, 1)[:, :, :3]},
            "feature_fn=",
        ),
    ],
)
def test_ambiguous_outputs_name_the_argument(module, kwargs, argument):
    with pytest.raises(AmbiguousBackbone) as info:
        CustomBackbone(module, CFG, **kwargs)
    assert info.value.argument == argument
    assert argument in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("module", "kwargs", "prefix", "cls"),
    [
        (Tokens(prefix=0), {}, 0, False),
        (Tokens(prefix=1), {"has_cls_token": True}, 1, True),
        (Tokens(prefix=5), {"patch_size": 8}, 5, True),  # class + 4 registers
        (Tokens(prefix=5), {"patch_size": 8, "has_cls_token": False}, 5, False),
    ],
)
def test_token_outputs_become_patch_grids(module, kwargs, prefix, cls):
    backbone = CustomBackbone(module, CFG, name="tok", **kwargs)
    assert (backbone.num_prefix_tokens, backbone.has_cls_token, backbone.patch_size) == (
        prefix,
        cls,
        8,
    )
    images = torch.randn(2, 3, 32, 32)
    out = backbone.extract(images, pooling="mean")
    assert out["dense"].shape == (2, 12, 4, 4)
    with torch.inference_mode():
        expected = module.proj(images)
    torch.testing.assert_close(out["dense"], expected)
    assert backbone.default_pooling == ("cls" if cls else "mean")


def test_feature_fn_lists_give_layers_and_a_cnn_pools_by_gap():
    stages = nn.ModuleList([nn.Conv2d(3, 4, 3, 2, 1), nn.Conv2d(4, 8, 3, 2, 1)])

    def features(module, x):
        outs = []
        for stage in module:
            x = stage(x)
            outs.append(x)
        return outs

    backbone = CustomBackbone(stages, CFG, name="two_stage", feature_fn=features)
    assert backbone.num_blocks == 2
    assert backbone.default_pooling == "gap"
    geometry = backbone.geometry()
    assert (geometry["layer_dims"], geometry["layer_strides"], geometry["embed_dim"]) == (
        [4, 8],
        [2, 4],
        8,
    )
    out = backbone.extract(torch.randn(1, 3, 32, 32), layers=[0, 1])
    assert out["layers"][0]["grid_hw"] == (16, 16)
    assert out["layers"][1]["grid_hw"] == (8, 8)


def test_a_direct_module_is_identified_by_its_tensors():
    module = Tokens(prefix=0)
    backbone = CustomBackbone(module, CFG, name="tok")
    record = backbone.weights_record()
    assert record["tensor_hash"] == tensor_identity(module.state_dict())
    assert record["origin"] == "checkpoint"
    assert record["path"] is None
    assert backbone.spec_params()["checkpoint"] == record["tensor_hash"]
    assert backbone.record()["source"] == "custom"
    assert backbone.record()["architecture"] == "tok"


def test_a_torchvision_weights_transform_is_read_into_the_cfg():
    """The seed's example, ``CustomBackbone(trunk, preprocess=weights.transforms())``: torchvision's
    ImageClassification has crop_size/resize_size, not input_size (it crashed with
    AttributeError)."""
    from torchvision.models import ResNet18_Weights

    transform = ResNet18_Weights.IMAGENET1K_V1.transforms()
    trunk = nn.Sequential(nn.Conv2d(3, 8, 8, 8), nn.ReLU())
    backbone = CustomBackbone(trunk, preprocess=transform, name="trunk")
    assert backbone.cfg == BackboneCfg(input_size=224, resize=256, crop="center",
                                       interpolation="bilinear")
    assert backbone.patch_size is None
    assert backbone.default_pooling == "gap"


def test_a_transform_without_its_sizes_is_refused():
    from vbstore.errors import UsageError

    with pytest.raises(UsageError, match="neither a BackboneCfg nor a torchvision"):
        CustomBackbone(nn.Conv2d(3, 8, 8, 8), preprocess=lambda image: image)
