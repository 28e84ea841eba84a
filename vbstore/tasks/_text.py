"""Calling a CLIP text tower from a zero-shot task, with its output checked.

Imported only inside task calls, because it imports torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ._errors import TaskInputError
from ._metrics import l2_normalise

# Strings per text-encoder call: bounds the encoder's memory whatever the class/caption count.
TEXT_BATCH = 1024


def encode(
    text_encoder: Callable[[list[str]], Any], texts: Sequence[str], dim: int, device: torch.device
) -> torch.Tensor:
    """Embed ``texts`` with ``text_encoder`` and L2-normalise each embedding.

    Returns:
        (len(texts), dim) float32 on ``device``.

    Raises:
        TaskInputError: the encoder returned something other than a finite (n, dim) tensor.
    """
    chunks = []
    for start in range(0, len(texts), TEXT_BATCH):
        batch = list(texts[start : start + TEXT_BATCH])
        out = text_encoder(batch)
        if not isinstance(out, torch.Tensor) or out.ndim != 2 or len(out) != len(batch):
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise TaskInputError(
                f"text_encoder must return a ({len(batch)}, D) tensor for {len(batch)} strings, "
                f"got {shape}"
            )
        if out.shape[1] != dim:
            raise TaskInputError(
                f"text embeddings have {out.shape[1]} dims but image features have {dim}",
                hint="use the text tower of the same CLIP model as the image features",
            )
        out = out.detach().to(device=device, dtype=torch.float32)
        if not torch.isfinite(out).all():
            raise TaskInputError("text_encoder returned NaN or Inf")
        chunks.append(out)
    return l2_normalise(torch.cat(chunks))


def strings(value: Any, what: str) -> list[str]:
    """A list of strings, or a TaskInputError naming ``what``."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TaskInputError(f"{what} must be a list of strings, got {type(value).__name__}")
    if not all(isinstance(v, str) for v in value):
        raise TaskInputError(f"{what} must hold only strings")
    return list(value)
