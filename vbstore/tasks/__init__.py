"""Probe tasks: what a backbone's features are scored on, independent of storage.

A task declares its level, ``op_version``, feature mode, whether it trains a head or is
zero-shot, its parameters with defaults, and its metrics with directions and a headline (see
:class:`Task`). The engine resolves params with ``task.resolve_params``, then calls ``fit`` and
``evaluate`` (trained tasks) or ``evaluate_zero_shot`` (zero-shot tasks) on feature tensors.

Importing this package registers the built-in tasks but does not import torch: a task's
declaration is enough to build a derivation key, and a cached result must not pay for torch.
"""

from __future__ import annotations

# Built-ins register through the same decorator a plugin uses; importing them is the act.
from . import (  # noqa: F401
    classification,
    correspondence,
    detection,
    geometry,
    knn,
    maps,
    multilabel,
    orientation,
    relative_pose,
    retrieval,
    segmentation,
    similarity,
    zeroshot_classification,
    zeroshot_multilabel,
    zeroshot_retrieval,
)
from ._base import FileParam, HeadState, Metric, Param, Task, ZeroShotContext
from ._dense import DenseTask
from ._errors import TaskInputError, TrainingDiverged, UndefinedMetric, UnknownTask
from ._registry import get_task, list_tasks, ordered_metrics, register_task
from ._split import BOX_TARGETS, DENSE_TARGETS, DenseBatch, DenseSplit, TensorSplit
from .aggregate import aggregate_seeds
from .correspondence import KeypointPairs, WarpPairs

__all__ = [
    "BOX_TARGETS",
    "DENSE_TARGETS",
    "DenseBatch",
    "DenseSplit",
    "DenseTask",
    "FileParam",
    "HeadState",
    "KeypointPairs",
    "Metric",
    "Param",
    "Task",
    "TaskInputError",
    "TensorSplit",
    "TrainingDiverged",
    "UndefinedMetric",
    "UnknownTask",
    "WarpPairs",
    "ZeroShotContext",
    "aggregate_seeds",
    "get_task",
    "list_tasks",
    "ordered_metrics",
    "register_task",
]
