"""A shape is a base class: ``Task`` holds only what every task declares, each family of hooks
lives on its shape's base, and a task written against the wide ``Task`` of before (a plugin's
``class P(Task)`` with ``shape = "pooled"``, or with the flags alone) still registers, trains
and scores, as a subclass of its shape's base (issue 33)."""

from __future__ import annotations

import pickle

import pytest
import torch

from vbstore.errors import UsageError
from vbstore.tasks import (
    SHAPES,
    GenerateTask,
    Metric,
    PooledTask,
    SplitTask,
    Task,
    ViewsTask,
    ZeroShotTask,
    get_task,
    list_tasks,
    register_task,
)

# the calls of each family, which Task itself no longer carries
FAMILIES = {
    PooledTask: ("fit", "evaluate", "per_sample", "_fit", "_evaluate", "_per_sample"),
    ZeroShotTask: ("evaluate_zero_shot", "_evaluate_zero_shot"),
    SplitTask: ("fit_split", "evaluate_split", "_check_split", "_fit_split", "_evaluate_split"),
    ViewsTask: ("evaluate_views", "_evaluate_views"),
    GenerateTask: ("evaluate_captions", "_evaluate_captions", "decoding"),
}


def _centroid_head(feats, targets):
    classes = int(targets.max()) + 1
    return torch.stack([feats[targets == c].mean(0) for c in range(classes)])


class _Centroids:
    """The hooks of a nearest-centroid probe, shared by the old-style tasks below."""

    level = "high"
    op_version = 1
    target_kind = "class_index"
    metrics = (Metric("accuracy", "higher", "nearest-centroid accuracy"),)
    train_metrics = (Metric("train_accuracy", "higher", "on the train split"),)
    headline = "accuracy"

    def _fit(self, feats, targets, params, seed, class_names):
        head = {"centroids": _centroid_head(feats, targets)}
        return head, {"train_accuracy": self._accuracy(head, feats, targets)}

    def _evaluate(self, head, feats, targets, params):
        return {"accuracy": self._accuracy(head, feats, targets)}

    @staticmethod
    def _accuracy(head, feats, targets):
        guess = torch.cdist(feats, head["centroids"]).argmin(1)
        return float((guess == targets).double().mean())


class OldCentroids(_Centroids, Task):
    """Written against the wide Task: declares its shape."""

    shape = "pooled"


class OldFlagCentroids(_Centroids, Task):
    """Written before shapes: its flags describe one."""

    trains_head = True


class NewCentroids(_Centroids, PooledTask):
    """The same probe on its shape's base."""


def test_task_carries_no_hook_of_any_shape():
    for family, calls in FAMILIES.items():
        for call in calls:
            assert call in vars(family), (family.__name__, call)
            assert not hasattr(Task, call), call


def test_every_built_in_task_subclasses_its_shape_base():
    for name in list_tasks():
        task = get_task(name)
        base = task.shape_spec.base_class()
        assert base is not None, name
        assert isinstance(task, base), name
        assert type(task).__mro__[1] is not Task or base is Task, name
        # made from its own class, not joined to its base afterwards
        assert not type(task).__dict__.get("__reduce__"), name
    assert all(shape.base_class() is not None for shape in SHAPES.values())


@pytest.mark.usefixtures("registry_sandbox")
@pytest.mark.parametrize("old", [OldCentroids, OldFlagCentroids])
def test_a_task_written_against_the_wide_task_still_trains_and_scores(blobs, old):
    register_task(old, name="old_centroids")
    task = get_task("old_centroids")
    assert isinstance(task, old)
    assert isinstance(task, PooledTask)
    assert type(task).__name__ == old.__name__
    assert task.shape_spec.name == "pooled"
    assert task.describe() == {**NewCentroids().describe(), "name": "old_centroids"}

    register_task(NewCentroids, name="new_centroids")
    x, y = blobs(seed=0)
    ex, ey = blobs(seed=1)
    for made in (task, old(), NewCentroids()):
        head, train = made.fit(x, y, seed=0)
        assert made.evaluate(head, ex, ey) == get_task("new_centroids").evaluate(head, ex, ey)
        assert train["train_accuracy"] > 0.9
    # a copy (a worker's) is the same task
    again = pickle.loads(pickle.dumps(task))  # noqa: S301 - our own bytes
    assert type(again) is type(task)
    assert again.name == "old_centroids"
    assert again.evaluate(head, ex, ey) == task.evaluate(head, ex, ey)


@pytest.mark.usefixtures("registry_sandbox")
def test_a_task_missing_its_shape_hook_is_refused_naming_it():
    class Half(PooledTask):
        level, op_version, target_kind, headline = "high", 1, "class_index", "accuracy"
        metrics = (Metric("accuracy", "higher", "-"),)

        def _fit(self, feats, targets, params, seed, class_names):
            return {}, {}

    with pytest.raises(UsageError, match="implements no _evaluate"):
        register_task(Half, name="half")

    class OldHalf(Task):
        level, op_version, target_kind, headline = "high", 1, "class_index", "accuracy"
        shape = "zero_shot"
        metrics = (Metric("accuracy", "higher", "-"),)

    with pytest.raises(UsageError, match="implements no _evaluate_zero_shot"):
        register_task(OldHalf, name="old_half")


def test_a_call_of_another_shape_is_refused_naming_the_right_one(blobs):
    x, y = blobs(n=8)
    with pytest.raises(UsageError, match="trains a head and needs a train split") as caught:
        get_task("knn").evaluate_zero_shot(x, y)
    assert caught.value.hint == "call fit, then evaluate"
    with pytest.raises(UsageError, match="reads pooled features, not a dense split"):
        get_task("knn").fit_split(None)
    with pytest.raises(UsageError, match="scores no derived views"):
        get_task("depth").evaluate_views(None)
    with pytest.raises(UsageError, match="zero-shot and takes no training data"):
        get_task("similarity").fit(x, y)
    with pytest.raises(AttributeError, match="no attribute 'fitt'"):
        get_task("knn").fitt  # noqa: B018 - a typo is no call of another shape
