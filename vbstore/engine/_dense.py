"""The dense split a dense task trains and is scored on: feature packs + targets, in batches.

Rows are read straight from the packs through a memory map (only the rows of one batch are
copied), targets are decoded per batch and given the backbone's resize and crop, so memory does
not grow with the dataset. Every pack is verified against its id before its first row is read
(``Store.verified_path``: hashed once per state of the file),
and every target file against the hash its manifest recorded: no damaged or edited byte reaches
a metric.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..backbones import BackboneCfg
from ..data import get_target_kind, read_verified
from ..errors import CorruptObject, VbstoreError, field_ref
from ..store import read_safetensors_header
from ..tasks import DenseBatch

_NUMPY = {"F16": np.float16, "F32": np.float32, "BF16": np.uint16}


class PackSplit:
    """A :class:`vbstore.tasks.DenseSplit` over a stored featureset and its manifest.

    Args:
        store: The store holding the featureset and its packs.
        featureset_id: A featureset extracted with dense maps (mode ``dense`` or ``both``).
        manifest: The featureset's manifest (a ``ManifestView``, rows in the same order).
        preprocessing: The backbone record's ``preprocessing`` (its resize and crop).
        target_kind: What ``DenseBatch.target`` holds: a per-pixel kind, whose ``read`` the
            split calls as a :class:`~vbstore.data.TargetReader` (this object).
        target_scale: Divides stored target values (depth PNG in mm: 1000).
        device: Where batches are delivered.
    """

    def __init__(self, store, featureset_id: str, manifest, preprocessing: dict[str, Any],
                 target_kind: str, target_scale: float | None, device: str) -> None:
        doc = store.read_json(featureset_id)
        self.layers = tuple(doc["extractor"]["layers"])
        self._init_targets(store, manifest, preprocessing, target_kind, target_scale, device)
        self._rows = [tuple(r) for r in doc["rows"]]
        self._packs = doc["packs"]
        self._maps: dict[int, list[np.ndarray]] = {}
        first = self._pack(self._rows[0][0]) if self._rows else []
        self.channels = tuple(int(m.shape[1]) for m in first)
        self.grid_hw = (int(first[0].shape[2]), int(first[0].shape[3])) if first else (0, 0)

    def _init_targets(self, store, manifest, preprocessing: dict[str, Any], target_kind: str,
                      target_scale: float | None, device: str) -> None:
        """What reading and aligning the targets needs (a split over features made another
        way, fine-tuning's, shares it)."""
        self.target_kind = target_kind
        # None for a kind that is not per pixel: its feature maps are read alone (pairs)
        self._read_target = get_target_kind(target_kind).read
        self.device = torch.device(device)
        self._store, self.manifest, self.scale = store, manifest, target_scale
        self._cfg = BackboneCfg(**{**preprocessing, "mean": tuple(preprocessing["mean"]),
                                   "std": tuple(preprocessing["std"])})
        self.target_hw = (self._cfg.input_size, self._cfg.input_size)
        # file states already checked against the manifest: training reads every file once per
        # epoch, and only a file whose state changed is hashed again
        self._checked: dict[str, tuple[int, ...]] = {}
        self.dropped: dict[int, int] = {}  # boxes the crop left without area, per row
        self.cache: dict[Any, Any] = {}  # a kind's reader keeps what it indexed once here

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def boxes_dropped(self) -> int:
        """Boxes cut off by the crop (no area left) in the rows read so far."""
        return sum(self.dropped.values())

    def _pack(self, index: int) -> list[np.ndarray]:
        """The dense maps of one pack, one per layer, memory-mapped after verifying the pack."""
        if index not in self._maps:
            oid = self._packs[index]
            path = self._store.verified_path(oid)  # hashed once per state of the file
            header, offset = read_safetensors_header(path)
            maps: list[np.ndarray] = []
            for layer in self.layers:
                entry = header.get(f"dense.{layer}")
                if entry is None:
                    raise VbstoreError(f"pack {oid[:12]} holds no dense maps of layer {layer}",
                                       hint=f"extract with {field_ref('mode')} dense (a dense "
                                            "task does so "
                                            "itself)")
                start, end = entry["data_offsets"]
                maps.append(np.memmap(path, dtype=_NUMPY[entry["dtype"]], mode="r",
                                      offset=offset + start, shape=tuple(entry["shape"])))
                if end - start != maps[-1].nbytes:
                    raise CorruptObject(oid, str(path))
            self._maps[index] = maps
        return self._maps[index]

    def feats(self, positions: list[int]) -> list[torch.Tensor]:
        """The feature maps of rows ``positions`` (no target decoded), one per layer."""
        return self._feats(positions)

    def _feats(self, positions: list[int]) -> list[torch.Tensor]:
        out = []
        for layer in range(len(self.layers)):
            rows = []
            for position in positions:
                pack, row = self._rows[position]
                rows.append(self._pack(pack)[layer][row])
            stacked = torch.from_numpy(np.stack(rows))
            if stacked.dtype == torch.int16 or stacked.dtype == torch.uint16:
                stacked = stacked.view(torch.bfloat16)
            out.append(stacked.to(self.device, torch.float32))
        return out

    def name(self, position: int) -> str:
        """The manifest name of row ``position``."""
        return self.manifest.samples[position]["name"]

    @property
    def geometry(self):
        """The backbone's resize and crop (``BackboneCfg.geometry``), which targets follow."""
        return self._cfg.geometry

    def target_source(self, position: int) -> str:
        """The file row ``position``'s target is read from (its image when the sample has no
        target file), for messages that name it."""
        if "target" not in self.manifest.samples[position]:
            return str(self.manifest.image_path(position))
        return str(self.manifest.target_path(position))

    def image(self, position: int) -> np.ndarray:
        """(3, H, W) float32: the RGB row ``position``'s image became for the backbone, in
        [0, 1] (resized and cropped, before normalisation)."""
        with self._open_image(position) as image:
            x = self._cfg(image).numpy()
        mean = np.asarray(self._cfg.mean, np.float32)[:, None, None]
        std = np.asarray(self._cfg.std, np.float32)[:, None, None]
        return np.clip(x * std + mean, 0.0, 1.0)

    def target_file(self, position: int) -> tuple[Path, str, tuple[int, int]]:
        """Row ``position``'s target file, its manifest hash, and its image's (width, height).

        Raises:
            VbstoreError: the sample has no target file (a layout without targets).
        """
        sample = self.manifest.samples[position]
        with self._open_image(position) as image:
            size = image.size
        if "target" not in sample:
            raise VbstoreError(f"sample {sample['name']} has no target file",
                               hint="a dense task needs the dense or stems layout "
                                    f"({field_ref('target', 'NAME')})")
        return self.manifest.target_path(position), sample["target"], size

    def _open_image(self, position: int):
        sample = self.manifest.samples[position]
        data = self.read(self.manifest.image_path(position), sample["image"])
        from PIL import Image  # decoding images only when a dense split is read

        return Image.open(io.BytesIO(data))

    def _target(self, position: int) -> np.ndarray:
        if self._read_target is None:
            raise VbstoreError(f"{self.target_kind} targets are not per pixel: a dense split "
                               "reads only their feature maps")
        return self._read_target(self, position)

    def read(self, path: Path, expected: str) -> bytes:
        """The bytes of ``path``, hashed against the manifest once per state of the file (a
        state unchanged across the read, so bytes written meanwhile are never trusted)."""
        key, before = str(path), _state(path)
        if before is not None and self._checked.get(key) == before:
            data = path.read_bytes()
            if _state(path) == before:
                return data
        data = read_verified(path, expected)  # BadInput: missing, or not the manifest's bytes
        if before is not None and _state(path) == before:
            self._checked[key] = before
        return data

    def batches(self, batch_size: int, *, shuffle: bool = False, seed: int = 0
                ) -> Iterator[DenseBatch]:
        """Batches covering every row once (see :class:`vbstore.tasks.DenseSplit`)."""
        order = (torch.randperm(len(self), generator=torch.Generator().manual_seed(seed))
                 if shuffle else torch.arange(len(self)))
        for start in range(0, len(self), batch_size):
            index = order[start:start + batch_size]
            positions = index.tolist()
            target = torch.from_numpy(_stack([self._target(p) for p in positions]))
            yield DenseBatch(self._feats(positions), target.to(self.device), index)


def _stack(targets: list[np.ndarray]) -> np.ndarray:
    """Per-image targets as one array; box rows padded to the longest with rows of -1."""
    if targets and targets[0].ndim == 2 and len({len(t) for t in targets}) > 1:
        n = max(len(t) for t in targets)
        targets = [np.concatenate([t, np.full((n - len(t), t.shape[1]), -1, t.dtype)])
                   for t in targets]
    return np.stack(targets)


def _state(path: Path) -> tuple[int, ...] | None:
    """What changes when a file is rewritten: (dev, inode, size, mtime, ctime); None if absent."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
