"""The lazy engine: walk result → head → featureset → manifest/backbone, compute what is missing."""

from ._backbone import BackboneDrift, BackboneRef, resolve_backbone
from ._features import FeatureResult, get_features
from ._results import HeadResult, Result, get_head, get_result

_LAZY = {"PackSplit": "._dense"}  # torch and numpy: loaded only when a dense split is read

__all__ = ["PackSplit", "BackboneDrift", "BackboneRef", "FeatureResult", "HeadResult", "Result", "get_features",
           "get_head", "get_result", "resolve_backbone"]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
