"""Reading a featureset's pooled rows back as a numpy array, without torch.

What a task that scores stored rows in numpy reads (``tasks._rows``; retrieval): the same
rows, in the same manifest order and the same float32 bits as :class:`._read.Features`, each
pack verified against its id first, read through ``safetensors.numpy``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import CorruptObject, VbstoreError
from ..records import FeaturesetRecord

# Local imports: safetensors loads when a pack is opened.


@contextmanager
def pack_tensor(store, pack: str, name: str, framework: str) -> Iterator[Any]:
    """The open safetensors handle of ``pack``, verified against its id and checked to hold
    tensor ``name`` (``framework``: ``np`` here, ``pt`` for ``._packs.read_pack_tensor``).

    Raises:
        CorruptObject: the pack does not hash to its id or cannot be parsed.
        VbstoreError: the pack has no tensor ``name``.
    """
    from safetensors import SafetensorError, safe_open

    path = store.verified_path(pack)
    try:
        with safe_open(str(path), framework=framework) as handle:
            if name not in handle.keys():
                raise VbstoreError(f"pack {pack[:12]} holds no {name}",
                                   hint="these features were extracted with other layers or mode")
            yield handle
    except SafetensorError as exc:
        raise CorruptObject(pack, str(path)) from exc


def read_pack_rows(store, pack: str, name: str, rows: Sequence[int]) -> np.ndarray:
    """Rows of one tensor of a pack (``._packs.read_pack_tensor``, in numpy), read once the
    pack's hash is verified (:func:`pack_tensor`)."""
    with pack_tensor(store, pack, name, "np") as handle:
        return handle.get_tensor(name)[np.asarray(rows, dtype=np.int64)]


def pooled_rows(store, featureset_id: str, layer: int | None = None) -> np.ndarray:
    """(N, C) float32 pooled features of ``layer`` (default: the last requested), in manifest
    order: what ``Features(store, featureset_id).pooled(layer)`` holds, as numpy."""
    record = FeaturesetRecord.from_dict(store.read_json(featureset_id))
    name = f"pooled.{record.extractor['layers'][-1] if layer is None else layer}"
    by_pack: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for position, (pack_index, row) in enumerate(record.rows):
        by_pack[pack_index].append((position, row))
    out: np.ndarray | None = None
    for pack_index, items in by_pack.items():
        part = read_pack_rows(store, record.packs[pack_index], name, [r for _, r in items])
        if out is None:
            out = np.empty((len(record.rows), *part.shape[1:]), dtype=part.dtype)
        out[[p for p, _ in items]] = part
    if out is None:
        raise ValueError("empty featureset")
    return out
