"""Leave-one-out class retrieval: hand-computed cases and scikit-learn per query."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score

from vbstore.errors import UsageError
from vbstore.tasks import UndefinedMetric, get_task


def on_circle(*degrees):
    rad = torch.tensor(degrees, dtype=torch.float64) * math.pi / 180
    return torch.stack([rad.cos(), rad.sin()], dim=1).float()


def run(x, labels):
    return get_task("retrieval").evaluate_zero_shot(x, torch.tensor(labels), {}, {})


def test_perfectly_clustered_classes():
    x = on_circle(0, 10, 90, 135)
    assert run(x, [0, 0, 1, 1]) == {
        "recall@1": 1.0,
        "recall@5": 1.0,
        "recall@10": 1.0,
        "mAP": 1.0,
    }


def test_interleaved_classes_by_hand():
    # Points at 0, 10, 90, 135 degrees, classes 0, 1, 0, 1. Each query's nearest other point
    # has the other class, so recall@1 = 0; the gallery has 3 images, so recall@5 = 1.
    # Rank of the one relevant image: query 0 -> 2nd, 1 -> 3rd, 2 -> 3rd, 3 -> 2nd.
    metrics = run(on_circle(0, 10, 90, 135), [0, 1, 0, 1])
    assert metrics["recall@1"] == 0.0
    assert metrics["recall@5"] == metrics["recall@10"] == 1.0
    assert metrics["mAP"] == pytest.approx((1 / 2 + 1 / 3 + 1 / 3 + 1 / 2) / 4)


def test_a_singleton_is_a_distractor_but_never_a_query():
    # Adding a class-2 point at 250 degrees: it has nothing to retrieve, so it is not a query,
    # but it pushes the relevant image of queries 1 and 3 down one rank:
    # ranks become 2nd, 4th, 3rd, 3rd -> AP 1/2, 1/4, 1/3, 1/3.
    metrics = run(on_circle(0, 10, 90, 135, 250), [0, 1, 0, 1, 2])
    assert metrics["recall@1"] == 0.0
    assert metrics["recall@5"] == 1.0
    assert metrics["mAP"] == pytest.approx(17 / 48)


def test_against_sklearn_per_query(blobs):
    x, y = blobs(n=60, dim=8, n_classes=5, sep=0.6)
    y[0] = 9  # one singleton query: excluded
    metrics = run(x, y.tolist())
    xn = x.double().numpy()
    xn /= np.linalg.norm(xn, axis=1, keepdims=True)
    aps, hits = [], {1: [], 5: [], 10: []}
    for q in range(len(x)):
        others = np.arange(len(x)) != q
        relevant = (y.numpy() == y.numpy()[q])[others]
        if not relevant.any():
            continue
        sims = (xn[others] @ xn[q]).astype(np.float32)
        aps.append(average_precision_score(relevant, sims))
        order = np.argsort(-sims, kind="stable")
        for k in hits:
            hits[k].append(relevant[order[:k]].any())
    assert len(aps) == len(x) - 1
    assert metrics["mAP"] == pytest.approx(np.mean(aps), abs=1e-6)
    for k in hits:
        assert metrics[f"recall@{k}"] == pytest.approx(np.mean(hits[k]))
    assert 0 < metrics["recall@1"] < metrics["recall@10"] < 1


def test_undefined_cases_say_why():
    with pytest.raises(UndefinedMetric, match="no eval image shares its class"):
        run(on_circle(0, 90, 180), [0, 1, 2])
    with pytest.raises(UndefinedMetric, match="at least 2 eval images"):
        run(on_circle(0), [0])


def test_retrieval_is_zero_shot_and_refuses_training_data():
    x = on_circle(0, 10)
    with pytest.raises(UsageError, match="zero-shot and takes no training data"):
        get_task("retrieval").fit(x, torch.tensor([0, 0]), seed=0)
    with pytest.raises(UsageError, match="has no head"):
        get_task("retrieval").evaluate({}, x, torch.tensor([0, 0]))


def test_ranked_a_few_rows_at_a_time_to_the_same_numbers(monkeypatch):
    """Memory for a retrieval is bounded by its features: each ranking (a sort, its order, the
    gathers and float64 precisions) covers at most RANK_ELEMENTS similarities, and the metrics
    are those of ranking each block at once, to the bit (ties included)."""
    from vbstore.tasks import retrieval

    generator = torch.Generator().manual_seed(0)
    x = (torch.randn(300, 6, generator=generator) * 2).round() / 2  # many tied similarities
    labels = (torch.arange(300) % 7).tolist()
    labels[5] = 99  # a singleton: never a query
    whole = run(x, labels)
    sorted_sizes = []
    real_sort = np.argsort

    def sort(values, *args, **kwargs):
        sorted_sizes.append(values.size)
        return real_sort(values, *args, **kwargs)

    monkeypatch.setattr(retrieval, "RANK_ELEMENTS", 3000)
    monkeypatch.setattr(np, "argsort", sort)
    parts = run(x, labels)
    assert parts == whole
    assert len(sorted_sizes) > 1
    assert max(sorted_sizes) <= 3000
