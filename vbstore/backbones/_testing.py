"""Tiny registered backbones for tests: ``test_vit`` and ``test_cnn``.

They register through ``@register_backbone`` like any plugin, so a test parametrized over
``list_backbones("test_*")`` exercises the same build, weights and extract path users get, in
milliseconds. They have no pretrained weights: use ``weights="random"`` or a checkpoint.
torch is imported only when one is built.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ._registry import register_backbone

# Local imports: torch (and the torch-bound custom module) load when a test backbone is built, not
# when it is registered; so does its preprocessing config (_cfg's dataclass: ~0.5 ms of every
# cached `get`).

VIT_DIM, VIT_DEPTH, VIT_PATCH = 32, 3, 8
CNN_WIDTHS = (8, 16, 32)


@cache
def _nets() -> dict[str, type]:
    import torch
    from torch import nn

    class TinyViT(nn.Module):
        """Patch embedding, class token, learned positions, pre-norm blocks, final norm."""

        def __init__(self, img_size: int) -> None:
            super().__init__()
            self.patch_embed = nn.Conv2d(3, VIT_DIM, VIT_PATCH, stride=VIT_PATCH)
            self.cls_token = nn.Parameter(torch.randn(1, 1, VIT_DIM) * 0.02)
            self.pos_embed = nn.Parameter(
                torch.randn(1, 1 + (img_size // VIT_PATCH) ** 2, VIT_DIM) * 0.02
            )
            self.blocks = nn.ModuleList(
                nn.TransformerEncoderLayer(
                    VIT_DIM, 2, 2 * VIT_DIM, dropout=0.0, batch_first=True, norm_first=True
                )
                for _ in range(VIT_DEPTH)
            )
            self.norm = nn.LayerNorm(VIT_DIM)

        def forward_blocks(self, x: torch.Tensor) -> list[torch.Tensor]:
            x = self.patch_embed(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
            outs = []
            for block in self.blocks:
                x = block(x)
                outs.append(self.norm(x))
            return outs

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.forward_blocks(x)[-1][:, 0]

    class TinyCNN(nn.Module):
        """Three stride-2 conv/BN/ReLU stages."""

        def __init__(self) -> None:
            super().__init__()
            stages, width = [], 3
            for out in CNN_WIDTHS:
                stages.append(
                    nn.Sequential(
                        nn.Conv2d(width, out, 3, 2, 1, bias=False), nn.BatchNorm2d(out), nn.ReLU()
                    )
                )
                width = out
            self.stages = nn.ModuleList(stages)

        def forward_stages(self, x: torch.Tensor) -> list[torch.Tensor]:
            outs = []
            for stage in self.stages:
                x = stage(x)
                outs.append(x)
            return outs

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.forward_stages(x)[-1].mean(dim=(2, 3))

    return {"vit": TinyViT, "cnn": TinyCNN}


def _cfg(input_size: int | None) -> Any:
    from ._cfg import BackboneCfg

    size = input_size or 32
    return BackboneCfg(
        input_size=size,
        resize=size,
        mean=(0.5, 0.5, 0.5),
        std=(0.5, 0.5, 0.5),
        interpolation="bilinear",
    )


@register_backbone(default_pooling="cls", embed_dim=VIT_DIM)
def test_vit(*, pretrained: bool = False, input_size: int | None = None) -> Any:  # noqa: PT028 - a backbone, not a pytest test
    """Tiny 3-block ViT (patch 8, width 32, class token) for tests; 32 px by default."""
    from ._blocks import BlockSplit
    from .custom import CustomBackbone

    cfg = _cfg(input_size)
    return CustomBackbone(
        _nets()["vit"](cfg.input_size),
        cfg,
        name="test_vit",
        patch_size=VIT_PATCH,
        has_cls_token=True,
        feature_fn=lambda module, x: module.forward_blocks(x),
        block_split=lambda module: BlockSplit(list(module.blocks), "tokens", module.norm,
                                              indexes_layers=True),
    )


@register_backbone(default_pooling="gap", embed_dim=CNN_WIDTHS[-1])
def test_cnn(*, pretrained: bool = False, input_size: int | None = None) -> Any:  # noqa: PT028 - a backbone, not a pytest test
    """Tiny 3-stage CNN (widths 8/16/32, stride 2 each) for tests; 32 px by default."""
    from ._blocks import BlockSplit
    from .custom import CustomBackbone

    return CustomBackbone(
        _nets()["cnn"](),
        _cfg(input_size),
        name="test_cnn",
        feature_fn=lambda module, x: module.forward_stages(x),
        block_split=lambda module: BlockSplit(list(module.stages), "nchw", indexes_layers=True),
    )
