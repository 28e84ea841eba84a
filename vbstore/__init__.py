"""vbstore: probe vision backbones; keep every piece of the work as a content-addressed artifact.

Names are loaded lazily so that ``import vbstore`` (and a cached ``vbstore get``) never pulls
in torch, timm or open_clip.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing itself costs a cached `get` ~10 ms to import
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Store": "vbstore.store",
    # the engine's, with the fields their errors name spelled as keywords (vbstore/_api.py)
    "get": "vbstore._api",
    "get_result": "vbstore._api",
    "get_features": "vbstore._api",
    "get_head": "vbstore._api",
    "run_suite": "vbstore._api",
    "load_manifest": "vbstore.data",
    "register_backbone": "vbstore.backbones",
    "build_backbone": "vbstore.backbones",
    "CustomBackbone": "vbstore.backbones",
    "register_task": "vbstore.tasks",
    "register_target_kind": "vbstore.data",
    "load_plugin": "vbstore._plugins",
    "save_head": "vbstore.heads",
    "load_head": "vbstore.heads",
    "push_head": "vbstore.heads",
    "pull_head": "vbstore.heads",
    "VbstoreError": "vbstore.errors",
    "ObjectNotFound": "vbstore.errors",
    "CorruptObject": "vbstore.errors",
    "tensor_identity": "vbstore.store",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'vbstore' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
