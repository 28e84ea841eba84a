"""The lazy engine: walk result → head → featureset → manifest/backbone, compute what is missing."""

from ._backbone import BackboneDrift, BackboneRef, resolve_backbone
from ._features import FeatureResult, get_features
from ._lineage import lineage, summary
from ._plan import Plan, Step, plan
from ._requests import (
    BackboneRequest,
    DataRef,
    ProbeRequest,
    ResultRequest,
    store_param_files,
)
from ._results import HeadResult, Result, execute, get_head, get_result, result_request
from ._sweep import BASE_COLUMNS, SweepEntry, read_backbones_file, result_rows, sweep

# torch and numpy: loaded only when a dense split is read
_LAZY = {"PackSplit": "._dense", "DenseSample": "._inspect", "DenseView": "._inspect",
         "baseline_metrics": "._inspect", "dense_samples": "._inspect",
         "open_dense_result": "._inspect", "dense_tasks": "._demo", "scenes_setup": "._demo"}

__all__ = [
    "BASE_COLUMNS",
    "BackboneDrift",
    "BackboneRef",
    "BackboneRequest",
    "DataRef",
    "DenseSample",
    "DenseView",
    "FeatureResult",
    "HeadResult",
    "PackSplit",
    "Plan",
    "ProbeRequest",
    "Result",
    "ResultRequest",
    "Step",
    "SweepEntry",
    "baseline_metrics",
    "dense_samples",
    "dense_tasks",
    "execute",
    "get_features",
    "get_head",
    "get_result",
    "lineage",
    "open_dense_result",
    "plan",
    "read_backbones_file",
    "resolve_backbone",
    "result_request",
    "result_rows",
    "scenes_setup",
    "store_param_files",
    "summary",
    "sweep",
]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
