"""The built-in target kinds, registered through :func:`register_target_kind` as a user's are.

Loaded the first time a kind is looked up (``vbstore.data.get_target_kind``). numpy and the
decoders load where targets are read, never here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import UsageError, field_ref
from . import _trivial
from ._kinds import DataOption, TargetKind, register_target_kind
from ._navi import is_navi

# Local imports: numpy, and the readers built on it (._targets, ._box_targets), load inside the
# functions that read targets.

_SCALE = DataOption("target_scale", "stored units per target unit (1000 for a depth PNG in mm, "
                                    "512 for Taskonomy, 65535 for a full-range map)")
_IGNORE = DataOption("ignore_index", "the label that marks a pixel left out of the loss and the "
                                     "metrics (255 for VOC)")
_DENSE_LAYOUT = ("root/<split>/{{images,<target>}} paired by file stem (--target NAME picks the "
                 "target folder), or a VOC-style stems list (--stems), holding {what}")


def _class_index(manifest: Any, classes: Any) -> Any:
    import numpy as np

    return np.asarray(manifest.labels(classes=classes), dtype=np.int64)


def _multi_hot(manifest: Any, classes: Any) -> Any:
    import numpy as np

    return np.asarray(manifest.multi_hot(classes=classes), dtype=np.float32)


def _triplets(manifest: Any, classes: Any) -> Any:
    import numpy as np  # [ref, left, right, left_vote, right_vote] rows of the manifest

    return np.asarray(manifest.triplets, dtype=np.int64)


def _pairs(manifest: Any, classes: Any) -> Any:
    import numpy as np  # [a, b, qw, qx, qy, qz, tx, ty, tz] rows of the manifest

    return np.asarray(manifest.pairs, dtype=np.float64).reshape(-1, 9)


def _map(kind: str):
    """The reader of a per-pixel map kind: decode the verified file, then resize and crop it
    as the image was."""
    def read(reader: Any, position: int) -> Any:
        from ._targets import align, decode_target

        path, expected, size = reader.target_file(position)
        array = decode_target(reader.read(path, expected), path, kind, reader.scale)
        return align(array, reader.geometry, size, path)

    return read


def _rows(name: str) -> Callable[[Any, int, str, int | None], Any]:
    """The check of a kind's pooled targets, ``._target_rows.<name>`` (torch: loaded inside
    task calls, where it is already)."""
    def check(y: Any, n: int, split: str, n_classes: int | None) -> Any:
        from . import _target_rows

        return getattr(_target_rows, name)(y, n, split, n_classes)

    return check


def _arrays(name: str) -> Callable[[Any, int, str, int | None], Any]:
    """The numpy check of a kind's pooled targets, ``._target_arrays.<name>``."""
    def check(y: Any, n: int, split: str, n_classes: int | None) -> Any:
        from . import _target_arrays

        return getattr(_target_arrays, name)(y, n, split, n_classes)

    return check


def _image(reader: Any, position: int) -> Any:
    return reader.image(position)  # the target is computed from the pixels


def _boxes(masks: bool):
    def read(reader: Any, position: int) -> Any:
        from ._box_targets import read_boxes

        return read_boxes(reader, position, masks=masks)

    return read


def _depth_check(files: list[Path], options: Mapping[str, Any]) -> None:
    """A depth PNG holds integers in some unit: without its scale to metres it is refused here,
    before a feature is extracted."""
    pngs = [f for f in files if f.suffix.lower() == ".png"]
    if pngs and not options.get("target_scale"):
        raise UsageError(
            f"depth PNGs ({pngs[0].name}...) need their scale to metres",
            hint=f"pass {field_ref('param:target_scale', '1000')} for millimetres (512 for "
                 "Taskonomy, 1 for metres), "
                 "or state it in the dataset's targets.json (docs/data.md)")


def _images_alone(options: dict[str, Any], source: Any) -> dict[str, Any]:
    return {"target": "images", **options}  # a dense folder's images, its targets unread


def _voc_when_listed(options: dict[str, Any], source: Any) -> dict[str, Any]:
    """Boxes of a VOC folder named by a stems list (VisBench's ``--stems
    ImageSets/Main/val.txt``): the voc layout, which reads Annotations/, not the stems layout's
    SegmentationClass/."""
    if "layout" in options or not ({"stems", "train_stems"} & set(options)):
        return options
    voc = isinstance(source, (str, os.PathLike)) and (Path(source) / "Annotations").is_dir()
    return {**options, "layout": "voc"} if voc else options


def _pairs_layout(options: dict[str, Any], source: Any) -> dict[str, Any]:
    if "layout" in options:
        return options
    navi = isinstance(source, (str, os.PathLike)) and is_navi(Path(source))
    return {**options, "layout": "navi" if navi else "pairs"}


for _kind in (
    TargetKind("class_index", "one class label per image",
               "an image folder root/<split>/<class>/<image>, a .csv/.jsonl list with a label "
               "column, or a named source (shapes, sklearn:digits, hf:NAME, torchvision:NAME, "
               "wds:PATH)", folders=("class",), per_sample=_class_index,
               check_targets=_rows("class_index"), check_array=_arrays("class_index"),
               baseline=_trivial.class_index,
               min_classes=2),
    TargetKind("multi_hot", "class labels per image",
               "a .csv/.jsonl list with a labels column (several class names per image)",
               folders=("multi_label",), also_reads=("class_index",), per_sample=_multi_hot,
               check_targets=_rows("multi_hot"), check_array=_arrays("multi_hot"),
               baseline=_trivial.multi_hot),
    TargetKind("captions", "captions", "a .csv/.jsonl list with a captions column, or "
               "skimage:samples", folders=("captions",), check_targets=_rows("captions"),
               baseline=_trivial.caption_ranking),
    TargetKind("triplets", "2AFC triplets",
               "2AFC triplets in the NIGHTS layout: root/data.csv with ref_path, left_path, "
               "right_path, left_vote, right_vote, votes (and split) columns, paths relative "
               "to root; or triplets (generated)", folders=("triplets",), per_sample=_triplets,
               rows_index_features=True, check_targets=_rows("triplets"),
               baseline=_trivial.coin_flip),
    TargetKind("pairs", "image pairs",
               "view pairs with their relative pose: root[/<split>]/pairs.csv with image_a, "
               "image_b, qw, qx, qy, qz, tx, ty, tz columns, paths relative to its folder; "
               "NAVI's release folder with --layout navi; or scenes (generated)",
               folders=("pairs", "keypoint_pairs"), per_sample=_pairs, rows_index_features=True,
               layout_options=_pairs_layout, check_targets=_rows("pairs"),
               baseline=_trivial.mean_pose, dense_shape="pairs"),
    TargetKind("label_map", "label maps (a class index per pixel)",
               _DENSE_LAYOUT.format(what="label PNGs read as raw palette indices"),
               folders=("labels", "masks", "segmentationclass", "segmentationclassaug",
                        "segment_semantic"), prefixes=("labels_",), per_pixel=True,
               read=_map("label_map"), options=(_IGNORE,), drawn="labels"),
    TargetKind("depth_map", "depth maps",
               _DENSE_LAYOUT.format(what="16-bit depth PNGs (with -p target_scale) or .npy "
                                         "metres"),
               folders=("depth", "depth_zbuffer", "depth_euclidean"), prefixes=("depth_",),
               per_pixel=True, read=_map("depth_map"), options=(_SCALE,), check=_depth_check,
               drawn="scalar"),
    TargetKind("normal_map", "surface-normal maps",
               _DENSE_LAYOUT.format(what="RGB normal PNGs or .npy (H, W, 3) arrays"),
               folders=("normals", "normal"), per_pixel=True, read=_map("normal_map"),
               drawn="rgb"),
    TargetKind("scalar_map", "continuous per-pixel maps (edges, keypoint responses)",
               _DENSE_LAYOUT.format(what="one-channel PNGs or .npy maps"),
               folders=("edges", "edge_texture", "occlusion_edges", "edge_occlusion",
                        "keypoints", "keypoints2d"), per_pixel=True, read=_map("scalar_map"),
               options=(_SCALE,), drawn="scalar"),
    TargetKind("image", "images alone",
               "root/<split>/images/<image>, other folders beside it ignored (the target is "
               "computed from the pixels)", folders=("image", "images"), also_reads=("*",),
               per_pixel=True, read=_image, layout_options=_images_alone),
    TargetKind("boxes", "boxes",
               "a VOC folder (Annotations/<stem>.xml, ImageSets/Main/<split>.txt, JPEGImages/; "
               "--classes FILE, default the 20 VOC classes), COCO "
               "(annotations/instances_<split>.json and <split>/), or root/<split>/{images,boxes} "
               "with one JSON box file per image and root/classes.txt (what scenes writes; "
               "docs/data.md)", folders=("boxes",), per_pixel=True, read=_boxes(False),
               layout_options=_voc_when_listed, drawn="boxes", dense_shape="boxes"),
    TargetKind("instances", "instance masks",
               "COCO (annotations/instances_<split>.json with polygon or RLE masks, and "
               "<split>/), or root/<split>/{images,boxes} with one JSON box file per image "
               "naming its instance-id PNG, and root/classes.txt (what scenes writes; "
               "docs/data.md)", also_reads=("boxes",), per_pixel=True, read=_boxes(True),
               drawn="boxes", dense_shape="boxes"),
):
    register_target_kind(_kind)
