"""The lazy engine: walk result → head → featureset → manifest/backbone, compute what is missing."""

from ._backbone import BackboneDrift, BackboneRef, resolve_backbone
from ._features import FeatureResult, get_features
from ._results import HeadResult, Result, get_head, get_result

__all__ = ["BackboneDrift", "BackboneRef", "FeatureResult", "HeadResult", "Result", "get_features",
           "get_head", "get_result", "resolve_backbone"]
