"""Frozen-prefix activations: the input of a backbone's first trainable block, stored once.

Fine-tuning the last N blocks never changes the blocks before them, so what they give an image
is as fixed as a frozen backbone's features. A ``prefix`` artifact holds it for every sample of
a manifest, in manifest order: one safetensors blob with one float32 tensor ``activations``
``(N, ...)`` and ``__metadata__`` ``vbstore.kind = prefix``, ``format = vbstore.prefix.v1``,
``backbone``, ``blocks`` (the trainable count the cut is made for), ``manifest`` and
``images`` (a JSON list of image ids, row by row). Its derivation is keyed by the backbone, the
manifest and the block count, so a second fine-tuning run (another lr, another seed) reads it
and runs only the last blocks.

The blob is written as the forward passes stream (header first, then each batch's bytes), and
read back a batch of rows at a time (``pread``, never the whole tensor): memory stays flat in
dataset size.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from ..errors import CorruptObject
from ..store import read_safetensors_header
from ._extract import _prefetch, decode_image

PREFIX_FORMAT = "vbstore.prefix.v1"
_DTYPE = "F32"


def _header(shape: Sequence[int], metadata: dict[str, str]) -> bytes:
    count = int(np.prod(shape)) * 4
    header = {"__metadata__": {**metadata, "vbstore.kind": "prefix", "format": PREFIX_FORMAT},
              "activations": {"dtype": _DTYPE, "shape": list(shape), "data_offsets": [0, count]}}
    raw = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    return struct.pack("<Q", len(raw)) + raw


def write_prefix(store, manifest, backbone_id: str, blocks: int,
                 prefix: Callable[[torch.Tensor], torch.Tensor], preprocess: Callable[..., Any],
                 *, batch_size: int = 32, workers: int = 2,
                 on_batch: Callable[[int], None] | None = None) -> str:
    """Run ``prefix`` (the frozen blocks) over every sample of ``manifest`` and store the
    activations as one ``prefix`` blob, streamed; return its id.

    Raises:
        BadInput: an image changed since the manifest was read, or cannot be decoded.
    """
    samples = manifest.samples
    images = [sample["image"] for sample in samples]
    metadata = {"backbone": backbone_id, "blocks": str(blocks), "manifest": manifest.id,
                "images": json.dumps(images, separators=(",", ":"))}

    def load(index: int) -> torch.Tensor:
        return decode_image(manifest.image_path(index), samples[index]["image"], preprocess)

    def chunks() -> Iterator[bytes]:
        first = True
        for chunk, batch in _prefetch(load, list(range(len(samples))), batch_size, workers):
            out = prefix(batch).detach().to("cpu", torch.float32).contiguous()
            if first:
                yield _header((len(samples), *out.shape[1:]), metadata)
                first = False
            yield out.numpy().tobytes()
            if on_batch is not None:
                on_batch(len(chunk))

    store.writable("store frozen-prefix activations")
    temp, oid, size = store.files.write_temp(chunks())
    store.put_temp(temp, oid, "prefix", size)
    store.add_edges(oid, {"backbone": backbone_id, "manifest": manifest.id})
    return oid


class PrefixRows:
    """A stored prefix, verified against its id once, read a batch of rows at a time.

    Rows are read with ``pread`` into a fresh array, not through a memory map: mapped pages
    would stay in the process's resident set once touched, so after one epoch it would hold
    the whole blob; read, they stay in the page cache only.
    """

    def __init__(self, store, oid: str) -> None:
        path = store.path(oid)
        if not store.verify(oid):
            raise CorruptObject(oid, str(path))
        header, offset = read_safetensors_header(path)
        entry = header["activations"]
        self.metadata: dict[str, str] = header.get("__metadata__") or {}
        self.images: list[str] = json.loads(self.metadata["images"])
        self.shape = tuple(int(n) for n in entry["shape"])
        self.rows_read = 0  # what this reader has read, counted for tests and benchmarks
        self._oid, self._path = oid, path
        self._start = offset + int(entry["data_offsets"][0])
        self._row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * 4

    def __len__(self) -> int:
        return self.shape[0]

    def rows(self, index: Sequence[int] | torch.Tensor, device: Any = "cpu") -> torch.Tensor:
        """The activations of rows ``index`` (any order), as a float32 tensor on ``device``.

        Raises:
            CorruptObject: the blob is shorter than its header says (changed since verified).
        """
        picked = np.asarray(index.cpu() if isinstance(index, torch.Tensor) else index,
                            dtype=np.int64).reshape(-1)
        if picked.size and not (0 <= picked.min() and picked.max() < len(self)):
            raise IndexError(f"prefix rows {picked.min()}..{picked.max()} of {len(self)}")
        out = np.empty((len(picked), *self.shape[1:]), dtype=np.float32)
        view = out.reshape(-1).data.cast("B")
        size, k = self._row_bytes, 0
        with open(self._path, "rb", buffering=0) as handle:
            while k < len(picked):  # one read per run of consecutive rows
                end = k + 1
                while end < len(picked) and picked[end] == picked[end - 1] + 1:
                    end += 1
                _read_into(handle.fileno(), view[k * size:end * size],
                           self._start + int(picked[k]) * size, self._oid, self._path)
                k = end
        self.rows_read += len(picked)
        return torch.from_numpy(out).to(device)

    def batches(self, batch_size: int, device: Any = "cpu") -> Iterator[tuple[range, torch.Tensor]]:
        """Every row in order, ``batch_size`` at a time."""
        for start in range(0, len(self), batch_size):
            rows = range(start, min(start + batch_size, len(self)))
            yield rows, self.rows(list(rows), device)


def _read_into(fd: int, view: memoryview, offset: int, oid: str, path) -> None:
    """Fill ``view`` from ``fd`` at ``offset``.

    Raises:
        CorruptObject: the file ends first (it changed since it was verified).
    """
    while view:
        got = os.preadv(fd, [view], offset)
        if got <= 0:
            raise CorruptObject(oid, str(path))
        view, offset = view[got:], offset + got
