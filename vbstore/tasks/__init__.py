"""Probe tasks: what a backbone's features are scored on, independent of storage.

A task declares its level, ``op_version``, its parameters with defaults, and its metrics with
directions and a headline (:class:`Task`), and subclasses its shape's base class, which carries
the calls the engine makes: ``fit`` and ``evaluate`` (:class:`PooledTask`),
``evaluate_zero_shot`` (:class:`ZeroShotTask`), ``fit_split`` and ``evaluate_split``
(:class:`SplitTask`), ``evaluate_views`` (:class:`ViewsTask`), ``evaluate_captions``
(:class:`GenerateTask`). The engine resolves params with ``task.resolve_params`` first.

Built-in tasks register through the same decorator a plugin uses, when first asked for by name
(``get_task``), so a cached result imports only its own task's module; none imports torch: a
task's declaration is enough to build a derivation key, and a cached result must not pay for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._base import FileParam, HeadState, Metric, Param, Task, of_shape, unimplemented
from ._errors import TaskInputError, TrainingDiverged, UndefinedMetric, UnknownTask
from ._prompts import DATASET_TEMPLATES, TEMPLATES
from ._registry import (
    BUILTIN,
    get_task,
    list_tasks,
    metric_order,
    ordered_metrics,
    register_task,
)
from ._shapes import SHAPES, Shape, get_shape, register_shape
from ._split import BOX_TARGETS, DENSE_TARGETS, DenseBatch, DenseSplit, TensorSplit, Trainable

if TYPE_CHECKING:
    from ._baselines import Baseline, keep_declared, targets_baseline
    from ._classifiers import check_shape, shape_of
    from ._dense import DenseTask, as_dense
    from ._finetune import Recipe, finetune
    from ._linear_recipe import Loss
    from ._shape_generate import GenerateTask
    from ._shape_pooled import EmbeddingTask, PairsTask, PooledTask
    from ._shape_split import BoxesTask, DenseZeroShotTask, SplitTask
    from ._shape_views import KeypointViewsTask, ViewsTask
    from ._shape_zero_shot import TextTask, ZeroShotContext, ZeroShotTask
    from ._view_pairs import KeypointPairs, WarpPairs
    from .aggregate import aggregate_seeds

# from their modules when first used: a cached result needs none of them
_LAZY = {"check_shape": "_classifiers", "shape_of": "_classifiers",
         "KeypointPairs": "_view_pairs", "WarpPairs": "_view_pairs",
         "DenseTask": "_dense", "as_dense": "_dense", "aggregate_seeds": "aggregate",
         "Baseline": "_baselines", "keep_declared": "_baselines",
         "targets_baseline": "_baselines", "finetune": "_finetune", "Recipe": "_finetune",
         "Loss": "_linear_recipe",
         # each shape's base class: imported by the tasks of that shape, and a plugin's
         "PooledTask": "_shape_pooled", "EmbeddingTask": "_shape_pooled",
         "PairsTask": "_shape_pooled", "ZeroShotTask": "_shape_zero_shot",
         "TextTask": "_shape_zero_shot", "ZeroShotContext": "_shape_zero_shot",
         "SplitTask": "_shape_split", "BoxesTask": "_shape_split",
         "DenseZeroShotTask": "_shape_split", "ViewsTask": "_shape_views",
         "KeypointViewsTask": "_shape_views", "GenerateTask": "_shape_generate"}

__all__ = [
    "BOX_TARGETS",
    "BUILTIN",
    "DATASET_TEMPLATES",
    "DENSE_TARGETS",
    "SHAPES",
    "TEMPLATES",
    "Baseline",
    "BoxesTask",
    "DenseBatch",
    "DenseSplit",
    "DenseTask",
    "DenseZeroShotTask",
    "EmbeddingTask",
    "FileParam",
    "GenerateTask",
    "HeadState",
    "KeypointPairs",
    "KeypointViewsTask",
    "Loss",
    "Metric",
    "PairsTask",
    "Param",
    "PooledTask",
    "Recipe",
    "Shape",
    "SplitTask",
    "Task",
    "TaskInputError",
    "TensorSplit",
    "TextTask",
    "Trainable",
    "TrainingDiverged",
    "UndefinedMetric",
    "UnknownTask",
    "ViewsTask",
    "WarpPairs",
    "ZeroShotContext",
    "ZeroShotTask",
    "aggregate_seeds",
    "as_dense",
    "check_shape",
    "finetune",
    "get_shape",
    "get_task",
    "keep_declared",
    "list_tasks",
    "metric_order",
    "of_shape",
    "ordered_metrics",
    "register_shape",
    "register_task",
    "shape_of",
    "targets_baseline",
    "unimplemented",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
