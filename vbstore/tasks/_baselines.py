"""The trivial baseline of a pooled, pair or triplet task: what knowing nothing of the image gets.

A probe's number means little alone: ``top1 0.31`` is good on 100 classes and worthless on 3.
Every result therefore carries the score of its task's trivial predictor on the same eval split
(the engine puts it in the record as ``baseline``), computed from the targets alone by the
task's target kind (``TargetKind.baseline``). The built-in kinds' predictors, one per kind, are
listed where they live: ``vbstore.data._trivial``.

Dense tasks score their own constant map (the majority class, the mean depth...) with their own
scorer: :meth:`vbstore.tasks.DenseTask.baseline_split`. Only metrics a task declares are
returned, and only when its headline is among them; a task with other metrics gets None.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..data import BaselineQuestion, get_target_kind
from ._base import Task


@dataclass(frozen=True)
class Baseline:
    """A trivial predictor's metrics on an eval split.

    Attributes:
        predictor: What it predicts, in words (``the majority class of the train split``).
        metrics: Metric -> value, for the metrics of the task it defines (the headline among
            them).
    """

    predictor: str
    metrics: dict[str, float]


def targets_baseline(task: Task, eval_targets: Any, train_targets: Any = None,
                     class_count: int | None = None,
                     captions: Sequence[Sequence[str]] | None = None,
                     params: Mapping[str, Any] | None = None) -> Baseline | None:
    """The trivial baseline of ``task`` from its targets (tensors or lists), or None.

    Args:
        eval_targets: The eval split's targets, in the task's ``target_kind``.
        train_targets: The train split's (a trained task: its constant comes from them; None:
            from the eval split's own, as for a stored head applied to new data).
        class_count: The number of classes, when the data names them.
        captions: For caption targets, each eval image's captions.
        params: The task's resolved parameters, where they name its metrics (retrieval's
            ``topk``): the baseline then reports those.
    """
    trivial = get_target_kind(task.target_kind).baseline  # the kind's own trivial predictor
    asked = BaselineQuestion(eval_targets, train_targets, class_count, captions,
                             trained=task.trains_head,
                             metrics=frozenset(m.name for m in task.metrics_for(params)))
    found = trivial(asked) if trivial else None
    if found is None:
        return None
    metrics, predictor, classes = found
    return keep_declared(task, predictor, metrics, classes, params=params)


def keep_declared(task: Task, predictor: str, metrics: Mapping[str, float],
                  classes: int | None = None, *,
                  params: Mapping[str, Any] | None = None) -> Baseline | None:
    """The baseline restricted to ``task``'s metrics under ``params`` (those it reports on
    ``classes`` classes, when known); None unless its headline is among them."""
    names = {m.name for m in task.metrics_for(params) if m.reported(classes)}
    kept = {k: float(v) for k, v in metrics.items() if k in names}
    return Baseline(predictor, kept) if task.headline_for(params) in kept else None


