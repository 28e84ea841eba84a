"""Reading box targets for a dense split: a row's boxes (and instance masks) on the backbone's
input, from a per-image box file or a COCO split's annotations.

Used by the ``boxes`` and ``instances`` target kinds (``._kinds_builtin``) through a
:class:`~vbstore.data.TargetReader`, which verifies every file against its manifest hash.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BadInput
from ._boxes import align_boxes, coco_index, coco_mask, is_coco, parse_boxes
from ._targets import align, decode_target


def read_boxes(reader: Any, position: int, *, masks: bool) -> np.ndarray:
    """Row ``position``'s boxes on the backbone's input: (n, 6), or with ``masks`` (n, 6 + H*W)
    with each box's instance mask flattened.

    Raises:
        BadInput: annotations that do not match their image, or no instance masks for ``masks``.
    """
    path, expected, size = reader.target_file(position)
    manifest = reader.manifest
    if is_coco(path):
        cache = reader.cache
        if (str(path), expected) not in cache:
            cache.clear()  # one COCO split's file indexed at a time
            cache[(str(path), expected)] = coco_index(reader.read(path, expected), path,
                                                      manifest.classes)
        boxes = cache[(str(path), expected)][Path(manifest.samples[position]["name"]).name]
    else:
        boxes = parse_boxes(reader.read(path, expected), path, manifest.classes)
    if (boxes.width, boxes.height) != tuple(size):
        raise BadInput("box annotations that do not match their image's size",
                       [(str(path), f"states {boxes.width}x{boxes.height}, the image is "
                                    f"{size[0]}x{size[1]}")],
                       hint="fix the annotation's width and height")
    rows, kept = align_boxes(boxes.rows, reader.geometry, size)
    reader.dropped[position] = int((~kept).sum())
    if not masks:
        return rows
    if boxes.segmentations is not None:
        segs = [seg for seg, keep in zip(boxes.segmentations, kept, strict=True) if keep]
        stack = np.stack([coco_mask(seg, boxes.width, boxes.height) for seg in segs]
                         ) if segs else np.zeros((0, boxes.height, boxes.width), bool)
        stack = align(stack.astype(np.uint8), reader.geometry, size, path) > 0
        return np.concatenate([rows, stack.reshape(len(rows), -1).astype(np.float32)], 1)
    if boxes.mask is None:
        raise BadInput("box annotations without instance masks", [(str(path), "no instances "
                       "file")], hint="instance_segmentation needs instance masks (the "
                       "scenes boxes or COCO polygons); use detection for boxes alone")
    mask_path, mask_hash = boxes.mask
    ids = decode_target(reader.read(mask_path, mask_hash), mask_path, "label_map", None)
    ids = align(ids, reader.geometry, size, mask_path)
    inst = ids[None] == boxes.instances[kept][:, None, None]
    return np.concatenate([rows, inst.reshape(len(rows), -1).astype(np.float32)], axis=1)
