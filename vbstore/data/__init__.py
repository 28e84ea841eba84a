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

from ._files import IMAGE_EXTENSIONS, MAX_IMAGE_PIXELS
from ._load import LAYOUTS, OPTIONS, load_manifest
from ._manifest import manifest_digest
from ._packaged import SOURCES
from ._png import png_bytes, write_png
from ._view import ManifestView

# the generator needs numpy at import; loading a manifest should not
_LAZY = {"SHAPES": "_shapes", "make_shapes": "_shapes", "SCENE_CLASSES": "_scenes",
         "SCENE_TARGETS": "_scenes", "make_scenes": "_scenes", "align": "_targets",
         "decode_target": "_targets", "read_verified": "_targets"}
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
    "ManifestView",
    "align",
    "decode_target",
    "load_manifest",
    "make_scenes",
    "make_shapes",
    "manifest_digest",
    "png_bytes",
    "read_verified",
    "write_png",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module(f"{__name__}.{_LAZY[name]}")
        return getattr(module, _RENAMED.get(name, name))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
