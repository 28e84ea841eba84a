"""Box annotations: parsed from VOC XML, COCO or per-image JSON, then given the image's geometry.

Two per-image formats, both read as ``(x0, y0, x1, y1, class, difficult)`` rows in pixels of the
image, absolute and 0-indexed (``x1``/``y1`` exclusive: a box's width is ``x1 - x0``):

- VOC XML (``Annotations/<stem>.xml``): ``<size>``, then one ``<object>`` per box with
  ``<name>``, ``<difficult>`` and ``<bndbox>`` in VOC's 1-based inclusive pixels, so
  ``xmin - 1`` becomes ``x0`` and ``xmax`` stays ``x1`` (the convention of the VOC devkit's
  readers in torchvision and detectron2).
- JSON (the dense layout's box folder, what ``scenes`` writes)::

      {"width": 64, "height": 64,
       "objects": [{"box": [x0, y0, x1, y1], "class": "sphere", "instance": 2,
                    "difficult": false}],
       "instances": {"file": "../instances/0000.png", "blake3": "<hash of that file>"}}

  ``instance`` and ``difficult`` are optional; ``instances`` names an instance-id PNG (relative
  to the JSON's folder; pixel value = instance id, 0 = none) with its BLAKE3, so the masks an
  instance probe reads are verified through the annotation the manifest verified.
- COCO (``annotations/instances_<split>.json`` for the images of ``<split>/``): one file for the
  whole split, indexed once; ``bbox`` ``[x, y, w, h]`` becomes ``x0, y0, x0 + w, y0 + h``, a
  crowd region (``iscrowd`` 1) counts as difficult (not taught, ignored when scored, as
  pycocotools does), ``segmentation`` (polygons or RLE) is kept for the instance masks
  (:func:`coco_mask`), the class list defaults to the categories' names in id order.

Every file is checked when its manifest is built (nothing is stored otherwise): an empty or
malformed file, a class name outside the class list, a box outside the image or without area.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BadInput, field_ref

if TYPE_CHECKING:
    import numpy as np

# Local imports: numpy, xml.etree and pycocotools load when boxes or COCO masks are decoded; the
# loader imports this module for its layout checks on every cached `get`.

VOC_CLASSES = (
    "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow",
    "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa",
    "train", "tvmonitor",
)
BOX_SUFFIXES = (".json", ".xml")


class _Bad(Exception):
    """One problem with one annotation file (turned into a BadInput naming the file)."""

    def __init__(self, why: str, hint: str) -> None:
        super().__init__(why)
        self.why, self.hint = why, hint


@dataclass(frozen=True)
class Boxes:
    """The boxes of one image, in its own pixels.

    Attributes:
        width: The image width the annotation states.
        height: The image height the annotation states.
        rows: (n, 6) float64 ``x0, y0, x1, y1, class, difficult``.
        instances: (n,) int64 instance id of each box in the mask file (0: none).
        mask: (path, blake3) of the instance-id PNG, or None.
        segmentations: COCO ``segmentation`` of each box (polygons or RLE), or None.
    """

    width: int
    height: int
    rows: np.ndarray
    instances: np.ndarray
    mask: tuple[Path, str] | None = None
    segmentations: list | None = None


def parse_boxes(data: bytes, path: Path, classes: Sequence[str]) -> Boxes:
    """An annotation file's bytes as :class:`Boxes`, class names indexed by ``classes``.

    Raises:
        BadInput: an empty or malformed file, an unknown class, a box outside the image.
    """
    try:
        if not data.strip():
            raise _Bad("an empty annotation file",
                       "write the image's annotation into it, or leave the image out")
        reader = _voc if path.suffix.lower() == ".xml" else _json
        return reader(data, path, {name: i for i, name in enumerate(classes)})
    except _Bad as bad:
        raise BadInput("unusable box annotations", [(str(path), bad.why)], hint=bad.hint) from None


def check_box_files(classes: Sequence[str]) -> Callable[[list[tuple[str, Path]]], None]:
    """A check of every annotation file of a split (run when its manifest is built), given
    (image name, annotation path) pairs; a COCO file is read once and must list every image.

    Raises (from the returned call):
        BadInput: the first unusable file, named with its fix.
    """

    def check(pairs: list[tuple[str, Path]]) -> None:
        indexes: dict[Path, dict[str, Boxes]] = {}
        for image, path in pairs:
            if path not in indexes:
                try:
                    data = path.read_bytes()
                except OSError as exc:
                    raise BadInput("unreadable box annotations",
                                   [(str(path), exc.strerror or str(exc))]) from None
                if not is_coco(path):
                    parse_boxes(data, path, classes)
                    continue
                indexes[path] = coco_index(data, path, classes)
            if Path(image).name not in indexes[path]:
                raise BadInput("images missing from their COCO annotations",
                               [(str(path), f"lists no image {Path(image).name!r}")],
                               hint="remove the image from the split folder, or annotate it")

    return check


def is_coco(path: Path) -> bool:
    """Whether ``path`` is a whole split's COCO file (``annotations/instances_<split>.json``)."""
    return path.parent.name == "annotations" and path.suffix.lower() == ".json"


def coco_classes(data: bytes, path: Path) -> list[str]:
    """The category names of a COCO file, in category-id order.

    Raises:
        BadInput: an empty or malformed file.
    """
    try:
        doc = _coco_doc(data)
        return [str(c["name"]) for c in sorted(doc["categories"], key=lambda c: c["id"])]
    except _Bad as bad:
        raise BadInput("unusable box annotations", [(str(path), bad.why)], hint=bad.hint) from None
    except (KeyError, TypeError):
        raise BadInput("unusable box annotations", [(str(path), "categories without id and name")],
                       hint="a COCO file's categories are {\"id\", \"name\"} objects") from None


def _coco_doc(data: bytes) -> dict:
    if not data.strip():
        raise _Bad("an empty annotation file", "export the split's COCO annotations into it")
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _Bad(f"malformed JSON ({exc})", "fix the file or export it again") from None
    except RecursionError:
        raise _Bad("JSON nested too deeply", "fix the file or export it again") from None
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k), list)
                                            for k in ("images", "annotations", "categories")):
        raise _Bad("not a COCO file (images, annotations and categories lists)",
                   "export the split's annotations in COCO's format")
    return doc


def coco_index(data: bytes, path: Path, classes: Sequence[str]) -> dict[str, Boxes]:
    """Every image's :class:`Boxes` in a COCO file, by image file name.

    Raises:
        BadInput: an empty or malformed file, an unknown category, a box outside its image.
    """
    import numpy as np  # loading a manifest without boxes never pays for numpy

    try:
        doc = _coco_doc(data)
        index = {name: i for i, name in enumerate(classes)}
        names = {c.get("id"): c.get("name") for c in doc["categories"] if isinstance(c, dict)}
        images: dict[Any, tuple[str, int, int]] = {}
        rows: dict[Any, list[list[float]]] = {}
        segs: dict[Any, list[Any]] = {}
        for image in doc["images"]:
            images[image.get("id")] = (str(image.get("file_name")),
                                       *_positive_size(image.get("width"), image.get("height")))
            rows[image.get("id")], segs[image.get("id")] = [], []
        for k, ann in enumerate(doc["annotations"], 1):
            what = f"annotation {ann.get('id', k)}"
            if ann.get("image_id") not in images:
                raise _Bad(f"{what} is on image {ann.get('image_id')!r}, which is not listed",
                           "fix the annotation's image_id")
            _, width, height = images[ann["image_id"]]
            cls = _class(names.get(ann.get("category_id"), ann.get("category_id")), index)
            bbox = ann.get("bbox")
            if not (isinstance(bbox, list) and len(bbox) == 4):
                raise _Bad(f"{what} has no bbox [x, y, w, h]", "fix the file or export it again")
            x, y, w, h = (float(v) for v in bbox)
            _check_box((x, y, x + w, y + h), width, height, what)
            rows[ann["image_id"]].append([x, y, x + w, y + h, cls, float(bool(ann.get("iscrowd")))])
            segs[ann["image_id"]].append(_segmentation(ann.get("segmentation"), width, height,
                                                       what))
    except _Bad as bad:
        raise BadInput("unusable box annotations", [(str(path), bad.why)], hint=bad.hint) from None
    return {name: Boxes(width, height, np.asarray(rows[i], np.float64).reshape(-1, 6),
                        np.zeros(len(rows[i]), np.int64), None, segs[i])
            for i, (name, width, height) in images.items()}


def _segmentation(segmentation: object, width: int, height: int, what: str) -> object:
    """A COCO ``segmentation`` checked against its image: an RLE's ``size`` must be the
    image's, since decoding allocates ``size`` (a 150-byte RLE can claim 40000x40000)."""
    if isinstance(segmentation, dict):
        size = segmentation.get("size")
        if size != [height, width]:
            raise _Bad(f"{what}'s RLE mask is {size!r} ([height, width]), its image "
                       f"{height}x{width}", "export the masks again with the image's size")
        if not isinstance(segmentation.get("counts"), (str, list)):
            raise _Bad(f"{what}'s RLE mask has no counts", "export the masks again")
    elif segmentation is not None and not isinstance(segmentation, list):
        raise _Bad(f"{what}'s segmentation is neither polygons nor RLE",
                   "export the masks again")
    return segmentation


def coco_mask(segmentation: object, width: int, height: int) -> np.ndarray:
    """(H, W) boolean mask of a COCO ``segmentation`` (polygons, RLE or uncompressed RLE), by
    pycocotools.

    Raises:
        BadInput: no segmentation to decode, or an RLE whose size is not ``height x width``.
    """
    import numpy as np
    from pycocotools import mask as mask_utils  # the COCO reader: only for COCO masks

    try:
        _segmentation(segmentation, width, height, "an annotation")
    except _Bad as bad:
        raise BadInput("unusable COCO masks", [("segmentation", bad.why)], hint=bad.hint) from None
    if isinstance(segmentation, list):
        rle = mask_utils.merge(mask_utils.frPyObjects(segmentation, height, width))
    elif isinstance(segmentation, dict) and isinstance(segmentation.get("counts"), list):
        rle = mask_utils.frPyObjects(segmentation, height, width)
    elif isinstance(segmentation, dict):
        rle = segmentation
    else:
        raise BadInput("COCO annotations without masks", [("segmentation", repr(segmentation))],
                       hint="instance_segmentation needs polygons or RLE; use detection")
    return np.asarray(mask_utils.decode(rle), dtype=bool)


def _class(name: object, index: dict[str, int]) -> int:
    if not isinstance(name, str) or name not in index:
        known = ", ".join(list(index)[:8]) + (" ..." if len(index) > 8 else "")
        raise _Bad(f"class {name!r} is not in the class list ({known})",
                   f"pass the dataset's class names with {field_ref('classes', 'FILE')} (one "
                   "per line)")
    return index[name]


def _check_box(box: Sequence[float], width: int, height: int, what: str) -> None:
    x0, y0, x1, y1 = box
    if not all(math.isfinite(v) for v in box):
        raise _Bad(f"{what} has a non-finite coordinate", "fix the annotation")
    if x0 < 0 or y0 < 0 or x1 > width or y1 > height:
        raise _Bad(f"{what} ({x0:g}, {y0:g}, {x1:g}, {y1:g}) lies outside the "
                   f"{width}x{height} image", "clip the box to the image or fix the image size")
    if x1 <= x0 or y1 <= y0:
        raise _Bad(f"{what} ({x0:g}, {y0:g}, {x1:g}, {y1:g}) has no area",
                   "x1 must exceed x0 and y1 exceed y0; remove or fix the box")


def _positive_size(width: object, height: object) -> tuple[int, int]:
    if not (isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0):
        raise _Bad(f"image size {width!r}x{height!r} is not two positive integers",
                   "state the image's width and height")
    return width, height


def _voc(data: bytes, path: Path, index: dict[str, int]) -> Boxes:
    from xml.etree import ElementTree

    import numpy as np  # loading a manifest without boxes never pays for numpy

    try:
        # local annotation files; the bundled expat (>= 2.4) refuses entity-expansion bombs
        root = ElementTree.fromstring(data)  # noqa: S314
    except ElementTree.ParseError as exc:
        raise _Bad(f"malformed XML ({exc})", "fix the file or export it again") from None

    def number(node: ElementTree.Element | None, tag: str, what: str) -> float:
        text = node.findtext(tag) if node is not None else None
        try:
            return float(text)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise _Bad(f"{what} has no number in <{tag}> (got {text!r})",
                       "fix the file or export it again") from None

    size = root.find("size")
    width, height = (int(number(size, tag, "<size>")) for tag in ("width", "height"))
    width, height = _positive_size(width, height)
    rows = []
    for k, obj in enumerate(root.iter("object"), 1):
        what = f"object {k}"
        cls = _class((obj.findtext("name") or "").strip(), index)
        bnd = obj.find("bndbox")
        xmin, ymin, xmax, ymax = (number(bnd, t, what) for t in ("xmin", "ymin", "xmax", "ymax"))
        box = (xmin - 1.0, ymin - 1.0, xmax, ymax)  # 1-based inclusive -> 0-based exclusive
        _check_box(box, width, height, what)
        difficult = (obj.findtext("difficult") or "0").strip() not in ("0", "")
        rows.append([*box, cls, float(difficult)])
    return Boxes(width, height, np.asarray(rows, np.float64).reshape(-1, 6),
                 np.zeros(len(rows), np.int64))


def _json(data: bytes, path: Path, index: dict[str, int]) -> Boxes:
    import numpy as np  # loading a manifest without boxes never pays for numpy
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _Bad(f"malformed JSON ({exc})", "fix the file or write it again") from None
    except RecursionError:
        raise _Bad("JSON nested too deeply", "fix the file or write it again") from None
    shape = "an object with width, height and an objects list"
    if not isinstance(doc, dict) or not isinstance(doc.get("objects"), list):
        raise _Bad(f"not {shape}", f"write {shape} (see docs/data.md)")
    width, height = _positive_size(doc.get("width"), doc.get("height"))
    rows, instances = [], []
    for k, obj in enumerate(doc["objects"], 1):
        what = f"object {k}"
        box = obj.get("box") if isinstance(obj, dict) else None
        if not (isinstance(box, list) and len(box) == 4
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in box)):
            raise _Bad(f"{what} has no box [x0, y0, x1, y1]", f"write {shape} (see docs/data.md)")
        cls = _class(obj.get("class"), index)
        _check_box(box, width, height, what)
        rows.append([*map(float, box), cls, float(bool(obj.get("difficult", False)))])
        instances.append(int(obj.get("instance", 0)))
    mask = None
    ref = doc.get("instances")
    if ref is not None:
        if not (isinstance(ref, dict) and isinstance(ref.get("file"), str)
                and isinstance(ref.get("blake3"), str)):
            raise _Bad("instances is not {\"file\": ..., \"blake3\": ...}",
                       "name the instance-id PNG and its BLAKE3 (see docs/data.md)")
        mask = (path.parent / ref["file"], ref["blake3"])
    return Boxes(width, height, np.asarray(rows, np.float64).reshape(-1, 6),
                 np.asarray(instances, np.int64), mask)


def align_boxes(rows: np.ndarray, geometry, image_size: tuple[int, int]
                ) -> tuple[np.ndarray, np.ndarray]:
    """Boxes of an image of ``image_size`` (w, h) moved onto the backbone's input.

    The image is resized to ``geometry(w, h)[0]`` and cropped to its box (``BackboneCfg.geometry``),
    so a coordinate scales by the resize and shifts by the crop's corner; boxes are then clipped
    to the crop, and a box left with no area (wholly cut off) is dropped.

    Returns:
        The kept rows (float32) and a boolean mask of the input rows kept.
    """
    import numpy as np  # loading a manifest without boxes never pays for numpy

    width, height = image_size
    (new_w, new_h), box = geometry(width, height)
    left, top, right, bottom = box if box is not None else (0, 0, new_w, new_h)
    out = np.asarray(rows, np.float64).copy()
    out[:, 0:4:2] = out[:, 0:4:2] * (new_w / width) - left
    out[:, 1:4:2] = out[:, 1:4:2] * (new_h / height) - top
    out[:, 0:4:2] = out[:, 0:4:2].clip(0, right - left)
    out[:, 1:4:2] = out[:, 1:4:2].clip(0, bottom - top)
    kept = (out[:, 2] > out[:, 0]) & (out[:, 3] > out[:, 1])
    return out[kept].astype(np.float32), kept
