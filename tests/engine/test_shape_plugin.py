"""A probe shape is one file: it registers its shape (``vbstore.tasks.register_shape``) and its
runner (``vbstore.engine.register_runner``), declares a task with a hook of its own, and a
probe on it runs end to end and is answered from the store the second time (issue 33)."""

from __future__ import annotations

import textwrap

import pytest

import vbstore
from vbstore.engine import _runners
from vbstore.errors import UsageError
from vbstore.tasks import _registry, _shapes

PLUGIN = '''
import torch

from vbstore.engine import Runner, Scored, register_runner
from vbstore.tasks import Metric, Shape, Task, register_shape, register_task

register_shape(Shape("centroids", "scores pooled vectors by their class centroids, no head",
                     "pooled", False, ("_evaluate_centroids",)))


class CentroidRunner(Runner):
    shape = "centroids"

    def baseline(self, plan, evaluation, scored):
        return None  # no trivial predictor of a spread

    def score(self, plan, run, evaluation, fresh_heads=False):
        metrics = plan.task._evaluate_centroids(evaluation.vectors(), evaluation.targets())
        return Scored([metrics] * len(plan.request.probe.seed_list))


register_runner(CentroidRunner())


@register_task(name="centroid_spread")
class CentroidSpread(Task):
    """How far each image lies from its class centroid, relative to the spread of centroids."""

    level = "high"
    op_version = 1
    shape = "centroids"
    target_kind = "class_index"
    metrics = (Metric("spread", "lower", "mean distance to the class centroid / centroid spread"),)
    headline = "spread"

    def _evaluate_centroids(self, feats, targets):
        classes = targets.unique()
        centroids = torch.stack([feats[targets == c].mean(0) for c in classes])
        within = torch.stack([(feats[targets == c] - centroids[i]).norm(dim=1).mean()
                              for i, c in enumerate(classes)]).mean()
        between = torch.pdist(centroids).mean() if len(classes) > 1 else torch.tensor(1.0)
        return {"spread": float(within / between)}
'''


@pytest.fixture
def sandbox(monkeypatch):
    """The plugin's registrations go away after the test."""
    monkeypatch.setattr(_registry, "_TASKS", dict(_registry._TASKS))
    shapes, runners = dict(_shapes.SHAPES), dict(_runners._RUNNERS)
    yield
    _shapes.SHAPES.clear()
    _shapes.SHAPES.update(shapes)
    _runners._RUNNERS.clear()
    _runners._RUNNERS.update(runners)


@pytest.mark.usefixtures("sandbox")
def test_a_probe_shape_from_one_file_runs_a_probe(store, shapes, tmp_path):
    plugin = tmp_path / "centroids.py"
    plugin.write_text(textwrap.dedent(PLUGIN))
    vbstore.load_plugin(plugin)
    result = vbstore.get_result("test_vit", "centroid_spread", shapes, split="val",
                                weights="random", input_size=32, store=store, progress=False)
    assert set(result.metrics) == {"spread"}
    assert result.metrics["spread"] > 0
    again = vbstore.get_result("test_vit", "centroid_spread", shapes, split="val",
                               weights="random", input_size=32, store=store, progress=False)
    assert again.from_cache
    assert again.id == result.id


@pytest.mark.usefixtures("sandbox")
def test_a_runner_needs_its_shape_and_only_one_runner_per_shape():
    class Nameless(_runners.Runner):
        shape = "no_such_shape"

        def score(self, plan, run, evaluation, fresh_heads=False):
            raise AssertionError

    with pytest.raises(UsageError, match="no_such_shape"):
        _runners.register_runner(Nameless())
    with pytest.raises(UsageError, match="has a runner already"):
        _runners.register_runner(_runners.PooledRunner())
    assert "no_such_shape" not in _runners.RUNNERS
