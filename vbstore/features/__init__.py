"""Feature extraction into packs, the featureset artifact, and reading features back.

Settings and keys (``ExtractorParams``, ``extractor_key``) import without torch; extraction and
reading load it on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._params import OP_VERSION, ExtractorParams, extractor_doc, extractor_key

if TYPE_CHECKING:
    from ._cache import clear_feature_cache, feature_cache
    from ._executor import RayExecutor, make_executor
    from ._extract import ExtractionStats, decode_image, extract_featureset, store_featureset
    from ._extract import Plan as ExtractPlan
    from ._packs import PackWriter
    from ._prefix import PrefixRows, write_prefix
    from ._progress import ExtractProgress
    from ._read import Features
    from ._rows import pooled_rows

# loaded on first use: extraction and reading need torch (pooled_rows: numpy only); the
# executors only a command given --executor (a cached `get` needs none of them)
_LAZY = {"ExtractionStats": "._extract", "extract_featureset": "._extract", "Features": "._read",
         "decode_image": "._extract",
         "store_featureset": "._extract", "ExtractPlan": "._extract", "PackWriter": "._packs",
         "PrefixRows": "._prefix", "write_prefix": "._prefix",
         "ExtractProgress": "._progress", "RayExecutor": "._executor",
         "make_executor": "._executor", "clear_feature_cache": "._cache",
         "feature_cache": "._cache", "pooled_rows": "._rows"}

__all__ = [
    "OP_VERSION",
    "ExtractPlan",
    "ExtractProgress",
    "ExtractionStats",
    "ExtractorParams",
    "Features",
    "PackWriter",
    "PrefixRows",
    "RayExecutor",
    "clear_feature_cache",
    "decode_image",
    "extract_featureset",
    "extractor_doc",
    "extractor_key",
    "feature_cache",
    "make_executor",
    "pooled_rows",
    "store_featureset",
    "write_prefix",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'vbstore.features' has no attribute {name!r}")
    # ExtractPlan: _extract's Plan, under a name that says whose plan it is
    return getattr(importlib.import_module(_LAZY[name], __name__),
                   "Plan" if name == "ExtractPlan" else name)
