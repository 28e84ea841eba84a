"""Retrieval's VisBench options: ``metric`` (cosine | l2) and ``topk`` (the recall@k reported).

Both were added after retrieval results were stored: at their defaults they are in no key, so
every stored retrieval id stays; another value is another result. The slow test scores the same
features with VisBench 0.27's own ``RetrievalTask`` in its own process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from vbstore.errors import UsageError
from vbstore.tasks import get_task
from vbstore.tasks._baselines import targets_baseline

TASK = get_task("retrieval")


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(4), 6)
    # class means plus noise, each row at its own scale: cosine and l2 rank differently
    feats = rng.normal(size=(4, 8))[labels] + rng.normal(scale=1.5, size=(24, 8))
    feats *= rng.uniform(0.2, 5.0, size=(24, 1))
    return feats.astype(np.float32), labels


def _score(params):
    feats, labels = _data()
    resolved = TASK.resolve_params(params)
    return TASK._evaluate_zero_shot(feats, labels, resolved,
                                    {})


def _reference(feats, labels, metric, ks):
    """Leave-one-out recall@k, straight from the definition."""
    x = feats.astype(np.float64)
    if metric == "cosine":
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        score = x @ x.T
    else:
        score = -np.linalg.norm(x[:, None] - x[None], axis=2)
    np.fill_diagonal(score, -np.inf)
    order = np.argsort(-score, axis=1, kind="stable")
    hits = labels[order] == labels[:, None]
    return {f"recall@{k}": float(hits[:, :k].any(axis=1).mean()) for k in ks}


def test_defaults_are_in_no_key():
    for given in ({}, {"metric": "cosine"}, {"topk": "10 5 1"}, {"topk": [1, 5, 10]}):
        assert TASK.keyed_params(TASK.resolve_params(given)) == {}
    assert TASK.keyed_params(TASK.resolve_params({"metric": "l2", "topk": "5,1"})) == {
        "metric": "l2", "topk": "1,5"}


@pytest.mark.parametrize("metric", ["cosine", "l2"])
def test_recall_follows_the_metric_and_topk(metric):
    feats, labels = _data()
    out = _score({"metric": metric, "topk": "3,1,7"})
    assert set(out) == {"recall@1", "recall@3", "recall@7", "mAP"}
    expected = _reference(feats, labels, metric, (1, 3, 7))
    assert {k: out[k] for k in expected} == pytest.approx(expected)


def test_l2_ranks_otherwise_than_cosine():
    assert _score({"metric": "l2"}) != _score({})


def test_topk_names_the_metrics_the_headline_and_the_baseline():
    params = TASK.resolve_params({"topk": "2,4"})
    assert [m.name for m in TASK.metrics_for(params)] == ["recall@2", "recall@4", "mAP"]
    assert TASK.headline_for(params) == "recall@2"
    base = targets_baseline(TASK, [0, 0, 1, 1, 2, 2], params=params)
    assert base is not None
    assert set(base.metrics) == {"recall@2", "recall@4", "mAP"}


@pytest.mark.parametrize("bad", ["0", "a", "", "1,-2"])
def test_a_bad_topk_is_refused(bad):
    with pytest.raises(UsageError, match="topk"):
        TASK.resolve_params({"topk": bad})


READER = """
import json, sys
import numpy as np, torch
from visbench.tasks.high_level.retrieval import RetrievalTask
data = np.load(sys.argv[1])
task = RetrievalTask(topk=tuple(json.loads(sys.argv[3])), metric=sys.argv[2])
out = task.evaluate(torch.from_numpy(data["feats"]), torch.from_numpy(data["labels"]))
print(json.dumps({k: float(v) for k, v in out.items()}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("metric", ["cosine", "l2"])
def test_agrees_with_visbench_retrieval(metric, tmp_path, visbench_site):
    site = visbench_site
    feats, labels = _data()
    np.savez(tmp_path / "data.npz", feats=feats, labels=labels)
    done = subprocess.run([sys.executable, "-c", READER, str(tmp_path / "data.npz"), metric,
                           "[1, 3, 7]"], capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(site)})
    assert done.returncode == 0, done.stderr
    theirs = json.loads(done.stdout)
    ours = _score({"metric": metric, "topk": "1,3,7"})
    assert ours == pytest.approx(theirs, abs=1e-6)


@pytest.mark.parametrize("n", [1, 4])
def test_an_undefined_retrieval_names_the_recall_topk_reports(n):
    """With topk=5 no recall@1 is reported: the refusal names the headline, recall@5 (one image,
    or no class with a second image)."""
    from vbstore.errors import UndefinedMetric

    feats, targets = torch.randn(n, 8), torch.arange(n)
    with pytest.raises(UndefinedMetric) as err:
        TASK.evaluate_zero_shot(feats, targets, {"topk": "5"})
    assert err.value.metric == "recall@5"
    assert "recall@1 " not in str(err.value)
