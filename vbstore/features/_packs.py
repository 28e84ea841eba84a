"""Feature packs: many images' features in one safetensors blob, written as extraction streams.

Tensor names are ``pooled.<layer>`` (N, C) float32 and ``dense.<layer>`` (N, C, H, W) in the
dense storage dtype, ``<layer>`` being the layer index as requested (``-1`` stays ``-1``).
``__metadata__`` holds ``vbstore.kind = pack``, ``format = vbstore.pack.v1``, the extractor key,
the layers, and ``images``: a JSON list of the image ids, row by row.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import torch

from ._rows import pack_tensor

# Local imports: safetensors loads when a pack is opened or written.

PACK_FORMAT = "vbstore.pack.v1"
PACK_BYTES = 64 << 20  # one pack is flushed at this size, so memory stays flat
PACK_ROWS = 4096


class PackWriter:
    """Buffers rows and writes a pack to the store each time the buffer fills."""

    def __init__(self, store, extractor: str, layers: Sequence[int], mode: str,
                 dense_dtype: torch.dtype, *, max_bytes: int | None = None,
                 max_rows: int | None = None) -> None:
        self.store = store
        # read at construction, not import, so a test's smaller packs reach every writer
        self.max_bytes = PACK_BYTES if max_bytes is None else max_bytes
        self.max_rows = PACK_ROWS if max_rows is None else max_rows
        self.extractor = extractor
        self.layers = list(layers)
        self.mode = mode
        self.dense_dtype = dense_dtype
        self.packs: list[str] = []
        self.rows: dict[str, tuple[str, int]] = {}
        self._images: list[str] = []
        self._parts: dict[str, list[torch.Tensor]] = {}
        self._bytes = 0

    def add(self, images: Sequence[str], out: dict[str, Any]) -> None:
        """Append a batch's features (the dict ``Backbone.extract`` returns)."""
        for layer in self.layers:
            feats = out["layers"][layer]
            if self.mode in ("pooled", "both"):
                self._append(f"pooled.{layer}", feats["pooled"].float())
            if self.mode in ("dense", "both"):
                self._append(f"dense.{layer}", feats["dense"].to(self.dense_dtype))
        self._images.extend(images)
        if self._bytes >= self.max_bytes or len(self._images) >= self.max_rows:
            self.flush()

    def _append(self, name: str, tensor: torch.Tensor) -> None:
        tensor = tensor.detach().to("cpu").contiguous()
        self._parts.setdefault(name, []).append(tensor)
        self._bytes += tensor.numel() * tensor.element_size()

    def flush(self) -> None:
        if not self._images:
            return
        tensors = {name: torch.cat(parts) for name, parts in self._parts.items()}
        compact = (",", ":")
        metadata = {"format": PACK_FORMAT, "extractor": self.extractor,
                    "layers": json.dumps(self.layers, separators=compact),
                    "images": json.dumps(self._images, separators=compact)}
        pack = self.store.put_tensors(tensors, "pack", metadata)
        self.store.feature_rows.add(self.extractor, pack, self._images)
        self.packs.append(pack)
        for row, image in enumerate(self._images):
            self.rows[image] = (pack, row)
        self._images, self._parts, self._bytes = [], {}, 0


def rows_per_pack(row_bytes: int, batch_size: int, max_bytes: int | None = None,
                  max_rows: int | None = None) -> int:
    """Rows in every full pack a :class:`PackWriter` fed whole batches of ``batch_size`` writes.

    The writer flushes after the first batch that reaches ``max_bytes`` or ``max_rows``, so pack
    boundaries depend only on the bytes of one row and the batch size; a distributed run that
    cuts its work at these boundaries writes the very packs a local run writes.
    """
    max_bytes = PACK_BYTES if max_bytes is None else max_bytes
    max_rows = PACK_ROWS if max_rows is None else max_rows
    by_bytes = -(-max_bytes // max(1, batch_size * row_bytes))
    by_rows = -(-max_rows // batch_size)
    return max(1, min(by_bytes, by_rows)) * batch_size


def row_bytes(out: dict[str, Any], layers: Sequence[int], mode: str,
              dense_dtype: torch.dtype) -> int:
    """Bytes one image adds to a :class:`PackWriter` buffer, from a batch's ``extract`` output."""
    total = 0
    for layer in layers:
        feats = out["layers"][layer]
        if mode in ("pooled", "both"):
            total += feats["pooled"][0].numel() * 4  # stored as float32
        if mode in ("dense", "both"):
            total += feats["dense"][0].numel() * torch.empty((), dtype=dense_dtype).element_size()
    return total


def read_pack_tensor(store, pack: str, name: str,
                     rows: Sequence[int] | None = None) -> torch.Tensor:
    """Rows of one tensor of a pack, read through mmap once the pack's hash is verified
    (``._rows.pack_tensor``: its errors)."""
    with pack_tensor(store, pack, name, "pt") as handle:
        if rows is None:
            return handle.get_tensor(name)
        index = torch.as_tensor(list(rows), dtype=torch.long)
        return handle.get_tensor(name).index_select(0, index)
