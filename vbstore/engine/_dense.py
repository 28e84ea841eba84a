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
from ..data import (
    align,
    align_boxes,
    coco_index,
    coco_mask,
    decode_target,
    is_coco,
    parse_boxes,
    read_verified,
)
from ..errors import BadInput, CorruptObject, VbstoreError
from ..store import read_safetensors_header
from ..tasks import BOX_TARGETS, DenseBatch

_NUMPY = {"F16": np.float16, "F32": np.float32, "BF16": np.uint16}


class PackSplit:
    """A :class:`vbstore.tasks.DenseSplit` over a stored featureset and its manifest.

    Args:
        store: The store holding the featureset and its packs.
        featureset_id: A featureset extracted with dense maps (mode ``dense`` or ``both``).
        manifest: The featureset's manifest (a ``ManifestView``, rows in the same order).
        preprocessing: The backbone record's ``preprocessing`` (its resize and crop).
        target_kind: What ``DenseBatch.target`` holds (see ``vbstore.tasks.DENSE_TARGETS``).
        target_scale: Divides stored target values (depth PNG in mm: 1000).
        device: Where batches are delivered.
    """

    def __init__(self, store, featureset_id: str, manifest, preprocessing: dict[str, Any],
                 target_kind: str, target_scale: float | None, device: str) -> None:
        doc = store.read_json(featureset_id)
        self.layers = tuple(doc["extractor"]["layers"])
        self.target_kind = target_kind
        self.device = torch.device(device)
        self._store, self._manifest, self._scale = store, manifest, target_scale
        self._cfg = BackboneCfg(**{**preprocessing, "mean": tuple(preprocessing["mean"]),
                                   "std": tuple(preprocessing["std"])})
        self.target_hw = (self._cfg.input_size, self._cfg.input_size)
        self._rows = [tuple(r) for r in doc["rows"]]
        self._packs = doc["packs"]
        self._maps: dict[int, list[np.ndarray]] = {}
        # file states already checked against the manifest: training reads every file once per
        # epoch, and only a file whose state changed is hashed again
        self._checked: dict[str, tuple[int, ...]] = {}
        self._dropped: dict[int, int] = {}  # boxes the crop left without area, per row
        self._coco: dict[tuple[str, str], Any] = {}  # a COCO split's file, indexed once
        first = self._pack(self._rows[0][0]) if self._rows else []
        self.channels = tuple(int(m.shape[1]) for m in first)
        self.grid_hw = (int(first[0].shape[2]), int(first[0].shape[3])) if first else (0, 0)

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def boxes_dropped(self) -> int:
        """Boxes cut off by the crop (no area left) in the rows read so far."""
        return sum(self._dropped.values())

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
                                       hint="extract with --mode dense (a dense task does so "
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
        return self._manifest.samples[position]["name"]

    def target_file(self, position: int) -> str:
        """The file row ``position``'s target is read from (its image when the target is
        computed from the pixels), for messages that name it."""
        if self.target_kind == "image" or "target" not in self._manifest.samples[position]:
            return str(self._manifest.image_path(position))
        return str(self._manifest.target_path(position))

    def image(self, position: int) -> np.ndarray:
        """(3, H, W) float32: the RGB row ``position``'s image became for the backbone, in
        [0, 1] (resized and cropped, before normalisation)."""
        return self._decode(position, want_image=True)

    def _target(self, position: int) -> np.ndarray:
        return self._decode(position, want_image=self.target_kind == "image")

    def _read(self, path: Path, expected: str) -> bytes:
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

    def _decode(self, position: int, want_image: bool) -> np.ndarray:
        sample = self._manifest.samples[position]
        image_bytes = self._read(self._manifest.image_path(position), sample["image"])
        from PIL import Image  # decoding images only when a dense split is read

        with Image.open(io.BytesIO(image_bytes)) as image:
            if want_image:  # the RGB the backbone saw, before normalisation
                x = self._cfg(image).numpy()
                mean = np.asarray(self._cfg.mean, np.float32)[:, None, None]
                std = np.asarray(self._cfg.std, np.float32)[:, None, None]
                return np.clip(x * std + mean, 0.0, 1.0)
            size = image.size
        if "target" not in sample:
            raise VbstoreError(f"sample {sample['name']} has no target file",
                               hint="a dense task needs the dense or stems layout (--target NAME)")
        path = self._manifest.target_path(position)
        if self.target_kind in BOX_TARGETS:
            return self._boxes(position, path, sample["target"], size)
        array = decode_target(self._read(path, sample["target"]), path, self.target_kind,
                              self._scale)
        return align(array, self._cfg.geometry, size, path)

    def _boxes(self, position: int, path: Path, expected: str, size: tuple[int, int]
               ) -> np.ndarray:
        """Row ``position``'s boxes on the backbone's input: (n, 6), or (n, 6 + H*W) with each
        box's instance mask for ``instances`` targets."""
        if is_coco(path):
            if (str(path), expected) not in self._coco:
                self._coco = {(str(path), expected): coco_index(self._read(path, expected), path,
                                                                self._manifest.classes)}
            boxes = self._coco[(str(path), expected)][Path(self._manifest.samples[position]
                                                           ["name"]).name]
        else:
            boxes = parse_boxes(self._read(path, expected), path, self._manifest.classes)
        if (boxes.width, boxes.height) != tuple(size):
            raise BadInput("box annotations that do not match their image's size",
                           [(str(path), f"states {boxes.width}x{boxes.height}, the image is "
                                        f"{size[0]}x{size[1]}")],
                           hint="fix the annotation's width and height")
        rows, kept = align_boxes(boxes.rows, self._cfg.geometry, size)
        self._dropped[position] = int((~kept).sum())
        if self.target_kind == "boxes":
            return rows
        if boxes.segmentations is not None:
            segs = [seg for seg, keep in zip(boxes.segmentations, kept, strict=True) if keep]
            masks = np.stack([coco_mask(seg, boxes.width, boxes.height) for seg in segs]
                             ) if segs else np.zeros((0, boxes.height, boxes.width), bool)
            masks = align(masks.astype(np.uint8), self._cfg.geometry, size, path) > 0
            return np.concatenate([rows, masks.reshape(len(rows), -1).astype(np.float32)], 1)
        if boxes.mask is None:
            raise BadInput("box annotations without instance masks", [(str(path), "no instances "
                           "file")], hint="instance_segmentation needs instance masks (the "
                           "scenes boxes or COCO polygons); use detection for boxes alone")
        mask_path, mask_hash = boxes.mask
        ids = decode_target(self._read(mask_path, mask_hash), mask_path, "label_map", None)
        ids = align(ids, self._cfg.geometry, size, mask_path)
        masks = ids[None] == boxes.instances[kept][:, None, None]
        return np.concatenate([rows, masks.reshape(len(rows), -1).astype(np.float32)], axis=1)

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
