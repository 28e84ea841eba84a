"""Cutting a backbone at a block, for fine-tuning its last blocks (docs/finetune.md).

A :class:`BlockSplit` names the sequence of blocks fine-tuning counts (``blocks``), how the
last block's output reads as the features ``extract`` gives for the last layer (``layout`` and
the final ``norm``), and nothing else: the frozen *prefix* (everything before block ``cut``)
is run by the backbone's own forward, stopped at the input of ``blocks[cut]``, and the
trainable *suffix* is ``blocks[cut:]`` applied in order, then the tail. Each adapter says how
its family splits (``Backbone.block_split``); a custom backbone passes ``block_split=`` or
cannot be fine-tuned.

A split must be faithful: ``suffix(prefix(x))`` is the last layer ``extract`` gives.
:func:`check_split` measures that on one image before any prefix is stored, and refuses a
family whose forward does more between its blocks than the split knows of.

A dense probe may read several layers (a dpt head): where a split's layers are its blocks one
for one (``indexes_layers``), layer ``i`` is block ``i``'s output, tapped inside the suffix
(:func:`suffix_taps`, :func:`run_suffix_layers`); a layer before the cut would be a frozen
map beside fine-tuned ones, and :func:`check_blocks` refuses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import UsageError, field_ref
from ._base import Backbone, LayerOut
from ._hooks import to_layer


@dataclass(frozen=True)
class BlockSplit:
    """How a backbone's last layer is made of blocks.

    Attributes:
        blocks: The blocks fine-tuning counts, shallowest first; each takes the previous one's
            output as its only input, and the last one's output is the last layer.
        layout: ``nchw``, ``nhwc`` or ``tokens`` (as ``vbstore.backbones._hooks.to_layer``).
        norm: The final norm applied to token outputs (ViTs), else None.
        indexes_layers: ``extract``'s layer ``i`` is the output of ``blocks[i]`` (read through
            ``layout`` and ``norm``) for every ``i``, so a dense probe may read several layers
            of the trainable blocks; otherwise only the last layer is known to be the last
            block's output.
    """

    blocks: Sequence[torch.nn.Module]
    layout: str = "nchw"
    norm: torch.nn.Module | None = None
    indexes_layers: bool = False


class _Stop(Exception):
    """Raised by the pre-hook of the first trainable block: the prefix is done."""


def check_blocks(backbone: Backbone, blocks: int, layers: Sequence[int] = (-1,)
                 ) -> tuple[BlockSplit, int]:
    """The split of ``backbone`` and the index of its first trainable block.

    ``layers`` (as requested, negative from the end) must all be outputs of the trainable
    blocks: a layer in the frozen prefix would feed a fine-tuned head frozen features.

    Raises:
        UsageError: the backbone says nothing of its blocks, or has fewer than ``blocks``; a
            layer lies in the frozen prefix, or its layers are not its blocks.
    """
    split = backbone.block_split()
    if split is None:
        raise UsageError(
            f"{backbone.name} does not say how its blocks split, so it cannot be fine-tuned",
            hint=f"drop {field_ref('finetune_blocks')}, or build a CustomBackbone with "
                 "block_split=...")
    depth = len(split.blocks)
    if not 1 <= blocks <= depth:
        raise UsageError(f"{field_ref('finetune_blocks', blocks)} is out of range: "
                         f"{backbone.name} has "
                         f"{depth} blocks", hint=f"use 1..{depth}")
    cut = depth - blocks
    resolved = backbone.resolve_layers(layers)
    if resolved != (backbone.num_blocks - 1,):
        if not split.indexes_layers or backbone.num_blocks != depth:
            raise UsageError(f"{backbone.name}'s layers are not its blocks one for one, so a "
                             "fine-tuned probe reads its last layer only",
                             hint=f"drop {field_ref('layers')} (a dense probe: "
                                  f"{field_ref('param:head', 'linear')})")
        frozen = sorted(layer for layer in resolved if layer < cut)
        if frozen:
            raise UsageError(
                f"layer {frozen[0]} lies in the frozen blocks (0..{cut - 1}): a fine-tuned "
                "head reads the outputs of the blocks it trains",
                hint=f"use {field_ref('finetune_blocks', depth - frozen[0])}, or "
                     f"{field_ref('layers')} from {cut} on")
    return split, cut


def suffix_taps(backbone: Backbone, split: BlockSplit, cut: int, layers: Sequence[int]
                ) -> list[int]:
    """The index, among the trainable blocks ``blocks[cut:]``, of each of ``layers`` (checked
    by :func:`check_blocks`), in request order: the last layer is the last block's output in
    every split, another layer ``i`` block ``i``'s (``indexes_layers``)."""
    last = backbone.num_blocks - 1
    return [(len(split.blocks) - 1 if layer == last else layer) - cut
            for layer in backbone.resolve_layers(layers)]


def run_prefix(backbone: Backbone, split: BlockSplit, cut: int,
               images: torch.Tensor) -> torch.Tensor:
    """The input of ``split.blocks[cut]`` for a preprocessed batch (no gradient)."""
    captured: list[torch.Tensor] = []

    def hook(_module: torch.nn.Module, args: tuple) -> None:
        captured.append(args[0])
        raise _Stop

    handle = split.blocks[cut].register_forward_pre_hook(hook)
    backbone.module.eval()
    try:
        with torch.inference_mode():
            backbone._forward(images.to(backbone.device, backbone.dtype),
                              (backbone.num_blocks - 1,))
    except _Stop:
        pass
    finally:
        handle.remove()
    if not captured:
        raise UsageError(
            f"block {cut} of {backbone.name}'s block split never ran in its forward pass, so "
            "the backbone cannot be cut there",
            hint="make block_split= name modules its forward runs, in order, or drop "
                 f"{field_ref('finetune_blocks')}")
    return captured[0].detach()


def run_suffix_layers(backbone: Backbone, split: BlockSplit,
                      blocks: Sequence[torch.nn.Module], x: torch.Tensor,
                      taps: Sequence[int]) -> list[LayerOut]:
    """The layers (dense map and class token, as ``extract`` reads them) that the outputs of
    ``blocks[i]`` for ``i`` in ``taps`` are, from prefix activations ``x`` through ``blocks``
    (the trainable blocks, or a fine-tuned copy of them); gradients flow when enabled."""
    outs = []
    for block in blocks:
        x = block(x)
        outs.append(x)
    return [to_layer(outs[i], split.layout, num_prefix_tokens=backbone.num_prefix_tokens,
                     has_cls_token=backbone.has_cls_token, norm=split.norm) for i in taps]


def suffix_features(backbone: Backbone, split: BlockSplit, blocks: Sequence[torch.nn.Module],
                    x: torch.Tensor, taps: Sequence[int], pooling: str) -> list[dict[str, Any]]:
    """:func:`run_suffix_layers` as ``extract`` gives each layer: ``{"dense", "pooled"}``
    (``pooled`` None for pooling ``none``), what a feature pack is written from."""
    return [{"dense": out.dense, "pooled": Backbone._pool(out, pooling)}
            for out in run_suffix_layers(backbone, split, blocks, x, taps)]


def run_suffix_layer(backbone: Backbone, split: BlockSplit, blocks: Sequence[torch.nn.Module],
                     x: torch.Tensor) -> LayerOut:
    """The last layer of prefix activations ``x`` through ``blocks`` (see
    :func:`run_suffix_layers`)."""
    return run_suffix_layers(backbone, split, blocks, x, [len(blocks) - 1])[0]


def run_suffix(backbone: Backbone, split: BlockSplit, blocks: Sequence[torch.nn.Module],
               x: torch.Tensor, pooling: str) -> torch.Tensor:
    """The pooled last-layer features of prefix activations ``x`` through ``blocks`` (see
    :func:`run_suffix_layer`)."""
    out = run_suffix_layer(backbone, split, blocks, x)
    pooled = Backbone._pool(out, pooling)
    if pooled is None:
        raise UsageError("fine-tuning trains on pooled features",
                         hint=f"drop {field_ref('pooling', 'none')}")
    return pooled


def check_split(backbone: Backbone, split: BlockSplit, cut: int, pooling: str,
                layers: Sequence[int] = (-1,)) -> None:
    """Refuse a split whose prefix and suffix do not give ``extract``'s ``layers`` (the last
    one's pooled vector too).

    Raises:
        UsageError: the two differ on one zero image (the family does more between blocks).
    """
    size = backbone.cfg.input_size
    images = torch.zeros(1, 3, size, size)
    want = backbone.extract(images, layers=list(layers), pooling=pooling)
    with torch.inference_mode():
        outs = run_suffix_layers(backbone, split, split.blocks[cut:],
                                 run_prefix(backbone, split, cut, images),
                                 suffix_taps(backbone, split, cut, layers))
    # the pooled vector a pooled probe reads and the maps a dense probe reads
    pairs = [(Backbone._pool(outs[-1], pooling), want["pooled"])]
    pairs += [(out.dense, want["layers"][layer]["dense"])
              for out, layer in zip(outs, layers, strict=True)]
    if not all((got is None and wanted is None) or (
            got is not None and wanted is not None and got.shape == wanted.shape
            and torch.allclose(got.float(), wanted.float(), rtol=1e-3, atol=1e-4))
            for got, wanted in pairs):
        raise UsageError(
            f"{backbone.name} cut at block {cut} does not give its own last layer back, so its "
            "blocks cannot be fine-tuned as the split says",
            hint=f"drop {field_ref('finetune_blocks')}, or give a CustomBackbone a block_split= "
                 "that holds")
