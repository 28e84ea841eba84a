"""What a split's targets are, in the words tasks declare theirs with (``target_kind``).

A manifest records its ``target_type``: how a list or folder labels its images (``class``,
``multi_label``, ``captions``...), a layout's own kind (``boxes``, ``pairs``, ``triplets``), or,
for per-pixel targets, the target folder's name. The folder names of the datasets vbstore reads
(scenes, NYUv2, Taskonomy, VOC) say what their files hold, so a task can refuse a split of the
wrong kind before a feature is extracted (``semantic_segmentation`` on depth maps). A name not
listed here (``target_type=`` declares one) is not judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ._files import subdirs

# target_type -> target kind (vbstore.tasks.TargetKind); None: nothing to compare (no targets)
_KINDS: dict[str, str | None] = {
    "class": "class_index",
    "multi_label": "multi_hot",
    "captions": "captions",
    "boxes": "boxes",
    "pairs": "pairs",
    "keypoint_pairs": "pairs",
    "triplets": "triplets",
    "image": "image",
    "images": "image",
    "none": None,
    # per-pixel target folders (case-insensitive)
    "labels": "label_map",
    "masks": "label_map",
    "segmentationclass": "label_map",
    "segmentationclassaug": "label_map",
    "segment_semantic": "label_map",
    "depth": "depth_map",
    "depth_zbuffer": "depth_map",
    "depth_euclidean": "depth_map",
    "normals": "normal_map",
    "normal": "normal_map",
    "edges": "scalar_map",
    "edge_texture": "scalar_map",
    "occlusion_edges": "scalar_map",
    "edge_occlusion": "scalar_map",
    "keypoints": "scalar_map",
    "keypoints2d": "scalar_map",
}
_PREFIXES = {"labels_": "label_map", "depth_": "depth_map"}  # NYUv2's labels_40, labels_13...

# the folder that holds the images, per layout, beside the target folders
_IMAGE_DIRS = {"dense": "images", "nyu": "rgb", "taskonomy": "rgb"}

KIND_NAMES = {
    "class_index": "one class label per image",
    "multi_hot": "class labels per image",
    "captions": "captions",
    "label_map": "label maps (a class index per pixel)",
    "depth_map": "depth maps",
    "normal_map": "surface-normal maps",
    "scalar_map": "continuous per-pixel maps (edges, keypoint responses)",
    "image": "images alone",
    "boxes": "boxes",
    "instances": "instance masks",
    "pairs": "image pairs",
    "triplets": "2AFC triplets",
}


def target_kind(target_type: str | None) -> str | None:
    """The kind of targets a ``target_type`` names; None when it is not one vbstore knows."""
    if target_type is None:
        return None
    name = target_type.lower()
    if name in _KINDS:
        return _KINDS[name]
    return next((kind for prefix, kind in _PREFIXES.items() if name.startswith(prefix)), None)


@dataclass(frozen=True)
class TargetsSeen:
    """A split's targets as listed, before any file is hashed or anything stored.

    Attributes:
        target_type: As the manifest will record it.
        kind: :func:`target_kind` of it (None: not judged).
        folders: The other target folders beside the images, by name, with their kinds (dense,
            NYUv2 and Taskonomy layouts; empty for others): what ``--target`` could pick.
    """

    target_type: str
    kind: str | None
    folders: dict[str, str | None]


def targets_seen(layout: str, root: Path, target_type: str) -> TargetsSeen:
    """The :class:`TargetsSeen` of a scanned split (``root``: the split's folder)."""
    image_dir = _IMAGE_DIRS.get(layout)
    folders = ({name: target_kind(name) for name in subdirs(root) if name != image_dir}
               if image_dir is not None and root.is_dir() else {})
    return TargetsSeen(target_type, target_kind(target_type), folders)
