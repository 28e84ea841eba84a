"""What a runner works with and gives back: plain data, no behaviour (a leaf of the engine).

:class:`StepContext` is what a runner's plan steps are made from; :class:`Scored` is what its
evaluation gives the result record. Both are made by the planner or a runner and read by the
compute path; neither imports either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..tasks import Task
from ._steps import Step


@dataclass(frozen=True)
class StepContext:
    """What a runner's plan steps are made from (all ids cheap; nothing computed).

    Attributes:
        features: The featureset steps already planned, by role (``eval``, ``train``).
        unneeded: The result is stored (or on a remote): the steps below it are not read.
    """

    store: Any
    ref: Any
    task: Task
    task_params: dict[str, Any]
    eval_m: Any
    train_m: Any
    extractor: Any
    features: dict[str, Step]
    head: str | None
    seeds: list[int]
    unneeded: bool
    dry_run: bool
    finetune: dict[str, Any] | None = None


@dataclass
class Scored:
    """What a runner's evaluation gives the result record.

    Attributes:
        per_seed: The metrics of each seed, in seed order.
        edges: Inputs the runner read beside the eval features (train features, heads, views).
        train_metrics: Each head's train metrics (trained shapes).
        comparable: False when a head was applied against a mismatch (``--no-strict``).
        draws: Bootstrap draws over eval samples, one set per head (see ``sample_ci``).
        eval_data: Extra facts about the eval split for the record (boxes the crop cut off).
        train: The train feed a head was trained on here (None: zero-shot, or a given head).
        targets: The eval targets the heads were scored on (None: they come with the split).
    """

    per_seed: list[dict[str, float]]
    edges: dict[str, Any] = field(default_factory=dict)
    train_metrics: list[dict[str, float]] = field(default_factory=list)
    comparable: bool = True
    draws: list[dict[str, Any]] = field(default_factory=list)
    eval_data: dict[str, Any] = field(default_factory=dict)
    train: Any = None
    targets: Any = None
