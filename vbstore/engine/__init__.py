"""The lazy engine: walk result → head → featureset → manifest/backbone, compute what is missing.

Names load with their module on first use (PEP 562, as huggingface_hub does), so a cached
``vbstore get result`` imports the planner and the result reader, not the sweep, lineage,
dense or demo code, and never torch or numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> the submodule that defines it
_LAZY = {
    "AnswerInputs": "._answers", "answer_inputs": "._answers",
    "BackboneDrift": "._backbone", "BackboneRef": "._backbone", "resolve_backbone": "._backbone",
    "FeatureResult": "._getfeatures", "FeaturesPlan": "._getfeatures",
    "execute_features": "._getfeatures", "get_features": "._getfeatures",
    "plan_features": "._getfeatures", "FeaturesRequest": "._requests",
    "lineage": "._lineage", "summary": "._lineage", "weights_of_tensor_hash": "._lineage",
    "result_columns": "._lineage", "head_rows": "._lineage",
    "Plan": "._plan", "Step": "._plan", "plan": "._plan", "plan_head": "._plan",
    "data_options_for": "._plan",
    "BackboneRequest": "._requests", "DataRef": "._requests", "HeadRequest": "._requests",
    "ProbeRequest": "._requests",
    "ResultRequest": "._requests", "store_param_files": "._requests",
    "HeadResult": "._results", "Result": "._results", "execute": "._results",
    "execute_head": "._results", "get": "._results",
    "get_head": "._results", "get_result": "._results", "result_request": "._results",
    "stored_result": "._results",
    "BASE_COLUMNS": "._sweep", "RUN_COLUMNS": "._sweep", "SweepEntry": "._sweep",
    "read_backbones_file": "._sweep",
    "result_rows": "._sweep", "run_fields": "._sweep", "sweep": "._sweep",
    "PackSplit": "._dense",
    "DenseSample": "._inspect", "DenseView": "._inspect", "baseline_metrics": "._inspect",
    "dense_samples": "._inspect", "open_dense_result": "._inspect",
    "dense_tasks": "._demo", "scenes_setup": "._demo", "DemoSetup": "._demo",
    "demo_setup": "._demo", "demo_tasks": "._demo", "demo_trivial": "._demo",
    "ShapesDemo": "._demo", "DENSE_TRAINING": "._demo", "DemoRun": "._demo",
    "demo_shapes": "._demo", "run_demo": "._demo",
    "DataView": "._show", "Frame": "._show", "show_data": "._show",
    "Runner": "._runners", "register_runner": "._runners", "Scored": "._scored",
    "StepContext": "._scored",
    "ResultOptions": "._options", "HeadOptions": "._options", "FeatureOptions": "._options",
    "SweepOptions": "._options", "RunOptions": "._options",

    "check_saves_classifier": "._classifier", "save_classifier": "._classifier",
    "zero_shot_classifier": "._classifier",
}

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from ._answers import AnswerInputs, answer_inputs
    from ._backbone import BackboneDrift, BackboneRef, resolve_backbone
    from ._classifier import check_saves_classifier, save_classifier, zero_shot_classifier
    from ._demo import (
        DENSE_TRAINING,
        DemoRun,
        DemoSetup,
        ShapesDemo,
        demo_setup,
        demo_shapes,
        demo_tasks,
        demo_trivial,
        dense_tasks,
        run_demo,
        scenes_setup,
    )
    from ._dense import PackSplit
    from ._getfeatures import (
        FeatureResult,
        FeaturesPlan,
        execute_features,
        get_features,
        plan_features,
    )
    from ._inspect import (
        DenseSample,
        DenseView,
        baseline_metrics,
        dense_samples,
        open_dense_result,
    )
    from ._lineage import head_rows, lineage, result_columns, summary, weights_of_tensor_hash
    from ._options import FeatureOptions, HeadOptions, ResultOptions, RunOptions, SweepOptions
    from ._plan import Plan, Step, data_options_for, plan, plan_head
    from ._requests import (
        BackboneRequest,
        DataRef,
        FeaturesRequest,
        HeadRequest,
        ProbeRequest,
        ResultRequest,
        store_param_files,
    )
    from ._results import (
        HeadResult,
        Result,
        execute,
        execute_head,
        get,
        get_head,
        get_result,
        result_request,
        stored_result,
    )
    from ._runners import Runner, register_runner
    from ._scored import Scored, StepContext
    from ._show import DataView, Frame, show_data
    from ._sweep import (
        BASE_COLUMNS,
        RUN_COLUMNS,
        SweepEntry,
        read_backbones_file,
        result_rows,
        run_fields,
        sweep,
    )

__all__ = [
    "BASE_COLUMNS",
    "DENSE_TRAINING",
    "RUN_COLUMNS",
    "AnswerInputs",
    "BackboneDrift",
    "BackboneRef",
    "BackboneRequest",
    "DataRef",
    "DataView",
    "DemoRun",
    "DemoSetup",
    "DenseSample",
    "DenseView",
    "FeatureOptions",
    "FeatureResult",
    "FeaturesPlan",
    "FeaturesRequest",
    "Frame",
    "HeadOptions",
    "HeadRequest",
    "HeadResult",
    "PackSplit",
    "Plan",
    "ProbeRequest",
    "Result",
    "ResultOptions",
    "ResultRequest",
    "RunOptions",
    "Runner",
    "Scored",
    "ShapesDemo",
    "Step",
    "StepContext",
    "SweepEntry",
    "SweepOptions",
    "answer_inputs",
    "baseline_metrics",
    "check_saves_classifier",
    "data_options_for",
    "demo_setup",
    "demo_shapes",
    "demo_tasks",
    "demo_trivial",
    "dense_samples",
    "dense_tasks",
    "execute",
    "execute_features",
    "execute_head",
    "get",
    "get_features",
    "get_head",
    "get_result",
    "head_rows",
    "lineage",
    "open_dense_result",
    "plan",
    "plan_features",
    "plan_head",
    "read_backbones_file",
    "register_runner",
    "resolve_backbone",
    "result_columns",
    "result_request",
    "result_rows",
    "run_demo",
    "run_fields",
    "save_classifier",
    "scenes_setup",
    "show_data",
    "store_param_files",
    "stored_result",
    "summary",
    "sweep",
    "weights_of_tensor_hash",
    "zero_shot_classifier",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
