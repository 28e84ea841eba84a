"""Feature extraction into packs, the featureset artifact, and reading features back.

Settings and keys (``ExtractorParams``, ``extractor_key``) import without torch; extraction and
reading load it on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._params import OP_VERSION, ExtractorParams, extractor_doc, extractor_key

if TYPE_CHECKING:
    from ._executor import ExtractProgress, RayExecutor, make_executor
    from ._extract import ExtractionStats, extract_featureset
    from ._read import Features

# loaded on first use: extraction and reading need torch; the executors only a command given
# --executor (a cached `get` needs none of them)
_LAZY = {"ExtractionStats": "._extract", "extract_featureset": "._extract", "Features": "._read",
         "ExtractProgress": "._executor", "RayExecutor": "._executor",
         "make_executor": "._executor"}

__all__ = ["OP_VERSION", "ExtractProgress", "ExtractionStats", "ExtractorParams", "Features",
           "RayExecutor", "extract_featureset", "extractor_doc", "extractor_key", "make_executor"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'vbstore.features' has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name], __name__), name)
