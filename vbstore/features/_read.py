"""Reading a featureset back as tensors, row-aligned with its manifest's samples."""

from __future__ import annotations

from collections import defaultdict

import torch

from ..records import FeaturesetRecord
from ._packs import read_pack_tensor


class Features:
    """A stored featureset: ``pooled(layer)`` and ``dense(layer)`` in manifest order.

    ```python
    feats = Features(store, featureset_id)
    x = feats.pooled()          # (N, C) float32, last requested layer
    ```
    """

    def __init__(self, store, featureset_id: str) -> None:
        self.store = store
        self.id = featureset_id
        self.record = FeaturesetRecord.from_dict(store.read_json(featureset_id))
        self.extractor = self.record.extractor
        self.layers = list(self.extractor["layers"])

    def __len__(self) -> int:
        return len(self.record.rows)

    def _gather(self, name: str) -> torch.Tensor:
        by_pack: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for position, (pack_index, row) in enumerate(self.record.rows):
            by_pack[pack_index].append((position, row))
        out: torch.Tensor | None = None
        for pack_index, items in by_pack.items():
            part = read_pack_tensor(self.store, self.record.packs[pack_index], name,
                                    [r for _, r in items])
            if out is None:
                out = torch.empty((len(self), *part.shape[1:]), dtype=part.dtype)
            out[torch.as_tensor([p for p, _ in items])] = part
        if out is None:
            raise ValueError("empty featureset")
        return out

    def _layer(self, layer: int | None) -> int:
        return self.layers[-1] if layer is None else layer

    def pooled(self, layer: int | None = None) -> torch.Tensor:
        """(N, C) float32 pooled features of ``layer`` (default: the last requested)."""
        return self._gather(f"pooled.{self._layer(layer)}")

    def dense(self, layer: int | None = None) -> torch.Tensor:
        """(N, C, H, W) dense features of ``layer`` in their storage dtype."""
        return self._gather(f"dense.{self._layer(layer)}")
