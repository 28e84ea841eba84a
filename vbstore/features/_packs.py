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

from ..errors import CorruptObject, VbstoreError

PACK_FORMAT = "vbstore.pack.v1"
PACK_BYTES = 64 << 20  # one pack is flushed at this size, so memory stays flat
PACK_ROWS = 4096


class PackWriter:
    """Buffers rows and writes a pack to the store each time the buffer fills."""

    def __init__(self, store, extractor: str, layers: Sequence[int], mode: str,
                 dense_dtype: torch.dtype) -> None:
        self.store = store
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
        if self._bytes >= PACK_BYTES or len(self._images) >= PACK_ROWS:
            self.flush()

    def _append(self, name: str, tensor: torch.Tensor) -> None:
        tensor = tensor.detach().to("cpu").contiguous()
        self._parts.setdefault(name, []).append(tensor)
        self._bytes += tensor.numel() * tensor.element_size()

    def flush(self) -> None:
        if not self._images:
            return
        tensors = {name: torch.cat(parts) for name, parts in self._parts.items()}
        compact = {"separators": (",", ":")}
        metadata = {"format": PACK_FORMAT, "extractor": self.extractor,
                    "layers": json.dumps(self.layers, **compact),
                    "images": json.dumps(self._images, **compact)}
        pack = self.store.put_tensors(tensors, "pack", metadata)
        self.store.add_feature_rows(self.extractor, pack, self._images)
        self.packs.append(pack)
        for row, image in enumerate(self._images):
            self.rows[image] = (pack, row)
        self._images, self._parts, self._bytes = [], {}, 0


def read_pack_tensor(store, pack: str, name: str, rows: Sequence[int] | None = None) -> torch.Tensor:
    """Rows of one tensor of a pack, read through mmap once the pack's hash is verified.

    Raises:
        CorruptObject: the pack does not hash to its id or cannot be parsed.
        VbstoreError: the pack has no tensor ``name``.
    """
    from safetensors import SafetensorError
    from safetensors.torch import safe_open

    path = store.verified_path(pack)
    try:
        with safe_open(str(path), framework="pt") as handle:
            if name not in handle.keys():
                raise VbstoreError(f"pack {pack[:12]} holds no {name}",
                                   hint="these features were extracted with other layers or mode")
            if rows is None:
                return handle.get_tensor(name)
            index = torch.as_tensor(list(rows), dtype=torch.long)
            return handle.get_tensor(name).index_select(0, index)
    except SafetensorError as exc:
        raise CorruptObject(pack, str(path)) from exc
