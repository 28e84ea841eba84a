"""Intermediate blocks through forward hooks, for models without a native multi-layer API.

One forward pass feeds every requested block's hook; the pass stops right after the deepest
requested block, so asking for an early layer does not pay for the rest of the network.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from ._base import LayerOut


class _StopForward(Exception):
    """Raised by the deepest requested block's hook to end the forward pass early."""


def run_hooked(
    model: Callable[[torch.Tensor], object],
    blocks: Sequence[torch.nn.Module],
    indices: tuple[int, ...],
    images: torch.Tensor,
) -> dict[int, torch.Tensor]:
    """Run ``model(images)`` once, capturing the outputs of ``blocks[i]``, ``i`` in ``indices``."""
    captured: dict[int, torch.Tensor] = {}
    deepest = max(indices)
    handles = []
    for index in indices:

        def hook(
            _module: torch.nn.Module, _inputs: object, output: torch.Tensor, index: int = index
        ) -> None:
            captured[index] = output
            if index == deepest:
                raise _StopForward

        handles.append(blocks[index].register_forward_hook(hook))
    try:
        model(images)
    except _StopForward:
        pass
    finally:
        for handle in handles:
            handle.remove()
    missing = [i for i in indices if i not in captured]
    if missing:
        raise RuntimeError(f"blocks {missing} never ran in the forward pass")
    return captured


def to_layer(
    output: torch.Tensor,
    layout: str,
    *,
    num_prefix_tokens: int = 0,
    has_cls_token: bool = False,
    norm: torch.nn.Module | None = None,
) -> LayerOut:
    """Read one block output as a dense map (+ class token).

    Args:
        output: the block's output.
        layout: ``nchw``, ``nhwc`` (Swin stages) or ``tokens`` ((B, N, C), prefix tokens first).
        num_prefix_tokens: class/register tokens before the patch grid (``tokens`` only).
        has_cls_token: token 0 is a class token (``tokens`` only).
        norm: the model's final norm, applied to token outputs as ViT probing practice does.
    """
    if layout == "nchw":
        return LayerOut(output)
    if layout == "nhwc":
        return LayerOut(output.permute(0, 3, 1, 2))
    tokens = norm(output) if norm is not None else output
    patches = tokens[:, num_prefix_tokens:]
    side = math.isqrt(patches.shape[1])
    if side * side != patches.shape[1]:
        raise RuntimeError(f"{patches.shape[1]} patch tokens are not a square grid")
    dense = patches.transpose(1, 2).reshape(tokens.shape[0], tokens.shape[2], side, side)
    return LayerOut(dense, tokens[:, 0] if has_cls_token else None)
