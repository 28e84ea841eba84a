"""The lazy engine: walk result → head → featureset → manifest/backbone, compute what is missing."""

from ._backbone import BackboneDrift, BackboneRef, resolve_backbone
from ._features import FeatureResult, get_features
from ._results import Result, get_result

__all__ = ["BackboneDrift", "BackboneRef", "FeatureResult", "Result", "get_features", "get_result",
           "resolve_backbone"]
