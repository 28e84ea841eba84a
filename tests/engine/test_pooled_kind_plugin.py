"""A pooled target kind is one file: its registration carries how its targets are read, checked
and trivially predicted, and a probe on it runs end to end (issue 33; before, ``Task.fit``
stopped at ``AssertionError: unknown target kind``)."""

from __future__ import annotations

import textwrap

import pytest

import vbstore
from vbstore.data import _kinds
from vbstore.errors import TaskInputError
from vbstore.tasks import _registry

PLUGIN = '''
import numpy as np
import torch

from vbstore.data import TargetKind, register_target_kind
from vbstore.errors import TaskInputError
from vbstore.tasks import Metric, Task, register_task


def read_ranks(manifest, classes):
    """Each image's class index, read as a number on an ordinal scale."""
    return np.asarray(manifest.labels(classes=classes), dtype=np.float32)


def check_ranks(y, n, split, n_classes):
    if not isinstance(y, torch.Tensor) or y.shape != (n,) or not y.is_floating_point():
        raise TaskInputError(f"{split} ranks must be ({n},) floats")
    return y.detach().to(torch.float32)


def mean_rank(asked):
    train = asked.eval_targets if asked.train_targets is None else asked.train_targets
    guess = float(train.mean())
    return ({"rank_mae": float((asked.eval_targets - guess).abs().mean())},
            "the mean rank of the train split", None)


register_target_kind(TargetKind(
    "class_rank", "class indices read as ranks", "class folders, as class_index",
    also_reads=("class_index",), per_sample=read_ranks, check_targets=check_ranks,
    baseline=mean_rank))


@register_task(name="rank_regression")
class RankRegression(Task):
    """Least-squares regression of the rank from pooled features."""

    level = "high"
    op_version = 1
    shape = "pooled"
    target_kind = "class_rank"
    metrics = (Metric("rank_mae", "lower", "mean absolute rank error"),)
    headline = "rank_mae"

    def _fit(self, feats, targets, params, seed, class_names):
        x = torch.cat([feats, torch.ones(len(feats), 1)], dim=1).double()
        weight = torch.linalg.lstsq(x, targets.double()[:, None]).solution
        return {"weight": weight.float()}, {}

    def _evaluate(self, head, feats, targets, params):
        x = torch.cat([feats, torch.ones(len(feats), 1)], dim=1)
        predicted = (x @ head["weight"])[:, 0]
        return {"rank_mae": float((predicted - targets).abs().mean())}
'''


@pytest.fixture
def sandbox(monkeypatch):
    """The plugin's registrations go away after the test."""
    _kinds.list_target_kinds()  # the built-ins first
    monkeypatch.setattr(_kinds, "_KINDS", dict(_kinds._KINDS))
    monkeypatch.setattr(_registry, "_TASKS", dict(_registry._TASKS))


@pytest.mark.usefixtures("sandbox")
def test_a_kind_registered_as_the_docs_said_runs_a_probe(store, shapes, tmp_path):
    # no check and no baseline of its own: one finite row per feature row, and no baseline
    plugin = tmp_path / "ranks_plain.py"
    plugin.write_text(textwrap.dedent(PLUGIN).replace(
        "per_sample=read_ranks, check_targets=check_ranks,\n    baseline=mean_rank",
        "per_sample=read_ranks"))
    vbstore.load_plugin(plugin)
    assert _kinds.get_target_kind("class_rank").check_targets is None
    result = vbstore.get_result("test_vit", "rank_regression", shapes, shapes, split="val",
                                train_split="train", weights="random", input_size=32,
                                store=store, progress=False)
    assert set(result.metrics) == {"rank_mae"}
    assert result.record.baseline is None


@pytest.mark.usefixtures("sandbox")
def test_a_pooled_kind_from_one_file_runs_a_probe(store, shapes, tmp_path):
    plugin = tmp_path / "ranks.py"
    plugin.write_text(textwrap.dedent(PLUGIN))
    vbstore.load_plugin(plugin)
    result = vbstore.get_result("test_vit", "rank_regression", shapes, shapes, split="val",
                                train_split="train", weights="random", input_size=32,
                                store=store, progress=False)
    assert set(result.metrics) == {"rank_mae"}
    record = result.record
    # the kind's own trivial predictor, on the same eval split
    assert record.baseline is not None
    assert record.baseline["predictor"] == "the mean rank of the train split"
    assert set(record.baseline["metrics"]) == {"rank_mae"}
    again = vbstore.get_result("test_vit", "rank_regression", shapes, shapes, split="val",
                               train_split="train", weights="random", input_size=32,
                               store=store, progress=False)
    assert again.from_cache
    assert again.id == result.id


@pytest.mark.usefixtures("sandbox")
def test_the_kind_checks_the_targets_a_task_is_given(tmp_path):
    import torch

    plugin = tmp_path / "ranks_check.py"
    plugin.write_text(textwrap.dedent(PLUGIN))
    vbstore.load_plugin(plugin)
    task = vbstore.tasks.get_task("rank_regression")
    feats = torch.randn(4, 3)
    with pytest.raises(TaskInputError, match=r"train ranks must be \(4,\) floats"):
        task.fit(feats, torch.arange(4), {}, 0)  # integers: the kind's check refuses them
    head, _ = task.fit(feats, torch.arange(4).float(), {}, 0)
    assert set(task.evaluate(head, feats, torch.arange(4).float())) == {"rank_mae"}
