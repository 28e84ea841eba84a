"""Probe tasks: what a backbone's features are scored on, independent of storage.

A task declares its level, ``op_version``, feature mode, whether it trains a head or is
zero-shot, its parameters with defaults, and its metrics with directions and a headline (see
:class:`Task`). The engine resolves params with ``task.resolve_params``, then calls ``fit`` and
``evaluate`` (trained tasks) or ``evaluate_zero_shot`` (zero-shot tasks) on feature tensors.

Built-in tasks register through the same decorator a plugin uses, when first asked for by name
(``get_task``), so a cached result imports only its own task's module; none imports torch: a
task's declaration is enough to build a derivation key, and a cached result must not pay for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._base import FileParam, HeadState, Metric, Param, Task, ZeroShotContext
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
    from ._dense import DenseTask, as_dense
    from ._finetune import finetune
    from ._linear import Loss
    from .aggregate import aggregate_seeds
    from .correspondence import KeypointPairs, WarpPairs

# from their modules when first used: a cached result needs none of them
_LAZY = {"KeypointPairs": "correspondence", "WarpPairs": "correspondence",
         "DenseTask": "_dense", "as_dense": "_dense", "aggregate_seeds": "aggregate",
         "Baseline": "_baselines", "keep_declared": "_baselines",
         "targets_baseline": "_baselines", "finetune": "_finetune", "Loss": "_linear"}

__all__ = [
    "BOX_TARGETS",
    "BUILTIN",
    "DATASET_TEMPLATES",
    "DENSE_TARGETS",
    "SHAPES",
    "TEMPLATES",
    "Baseline",
    "DenseBatch",
    "DenseSplit",
    "DenseTask",
    "FileParam",
    "HeadState",
    "KeypointPairs",
    "Loss",
    "Metric",
    "Param",
    "Shape",
    "Task",
    "TaskInputError",
    "TensorSplit",
    "Trainable",
    "TrainingDiverged",
    "UndefinedMetric",
    "UnknownTask",
    "WarpPairs",
    "ZeroShotContext",
    "aggregate_seeds",
    "as_dense",
    "finetune",
    "get_shape",
    "get_task",
    "keep_declared",
    "list_tasks",
    "metric_order",
    "ordered_metrics",
    "register_shape",
    "register_task",
    "targets_baseline",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
