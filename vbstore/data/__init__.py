"""Datasets as ``manifest`` artifacts: sorted samples with the content hashes of their files.

```python
from vbstore import Store
from vbstore.data import load_manifest, make_shapes

store = Store()
view = load_manifest(store, make_shapes("/tmp/shapes"), split="val", limit=10)
view.id, len(view), view.classes, view.load_image(0)
```

See docs/data.md for the layouts and the manifest format.
"""

import importlib
from typing import Any

from ._decoded import decode_once, discard_decoded, is_kept, take_decoded
from ._files import IMAGE_EXTENSIONS, MAX_IMAGE_PIXELS
from ._kinds import (
    BaselineQuestion,
    DataOption,
    TargetKind,
    TargetsSeen,
    describe_kind,
    get_target_kind,
    list_target_kinds,
    register_target_kind,
    target_kind,
)
from ._load import (
    LAYOUTS,
    OPTIONS,
    Listing,
    list_split,
    load_manifest,
    local_folder,
    store_listing,
)
from ._manifest import manifest_digest
from ._navi import is_navi
from ._packaged import SOURCES, data_prefixes
from ._source_kinds import SourceKind, register_source_kind, source_kinds
from ._view import ManifestView
from ._views import find_warped_views, warped_views

# the generators need numpy at import, the PNG writer zlib; loading a manifest needs neither
_LAZY = {"as_array": "_target_arrays",
         "SHAPES": "_shapes", "make_shapes": "_shapes", "SCENE_CLASSES": "_scenes",
         "SCENE_TARGETS": "_scenes", "make_scenes": "_scenes", "align": "_targets",
         "decode_target": "_targets", "read_verified": "_targets", "label_values": "_targets",
         "apply_homography": "_warp", "random_homography": "_warp", "warp_image": "_warp",
         "view_homographies": "_warp",
         "image_sizes": "_warp", "align_boxes": "_boxes",
         "parse_boxes": "_boxes", "VOC_CLASSES": "_boxes", "coco_index": "_boxes",
         "coco_mask": "_boxes", "is_coco": "_boxes", "png_bytes": "_png", "write_png": "_png"}
_RENAMED = {"SCENE_CLASSES": "CLASSES", "SCENE_TARGETS": "TARGETS"}

__all__ = [
    "IMAGE_EXTENSIONS",
    "LAYOUTS",
    "MAX_IMAGE_PIXELS",
    "OPTIONS",
    "SCENE_CLASSES",
    "SCENE_TARGETS",
    "SHAPES",
    "SOURCES",
    "VOC_CLASSES",
    "BaselineQuestion",
    "DataOption",
    "Listing",
    "ManifestView",
    "SourceKind",
    "TargetKind",
    "TargetsSeen",
    "align",
    "align_boxes",
    "apply_homography",
    "as_array",
    "coco_index",
    "coco_mask",
    "data_prefixes",
    "decode_once",
    "decode_target",
    "describe_kind",
    "discard_decoded",
    "find_warped_views",
    "get_target_kind",
    "image_sizes",
    "is_coco",
    "is_kept",
    "is_navi",
    "label_values",
    "list_split",
    "list_target_kinds",
    "load_manifest",
    "local_folder",
    "make_scenes",
    "make_shapes",
    "manifest_digest",
    "parse_boxes",
    "png_bytes",
    "random_homography",
    "read_verified",
    "register_source_kind",
    "register_target_kind",
    "source_kinds",
    "store_listing",
    "take_decoded",
    "target_kind",
    "view_homographies",
    "warp_image",
    "warped_views",
    "write_png",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module(f"{__name__}.{_LAZY[name]}")
        return getattr(module, _RENAMED.get(name, name))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
