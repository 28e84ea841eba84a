"""k-NN classification against a brute-force numpy implementation of the DINOv2 vote."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from safetensors.torch import load, save

from vbstore.tasks import TaskInputError, get_task


def brute_force_knn(train, train_y, test, test_y, k, temperature, n_classes):
    """Loop over queries in float64: top-k cosine neighbours, votes exp(sim / T)."""
    tr = train.double().numpy()
    te = test.double().numpy()
    tr /= np.linalg.norm(tr, axis=1, keepdims=True)
    te /= np.linalg.norm(te, axis=1, keepdims=True)
    top1 = top5 = 0
    for query, target in zip(te, test_y.numpy(), strict=True):
        sims = tr @ query
        nearest = np.argsort(-sims, kind="stable")[: min(k, len(tr))]
        votes = np.zeros(n_classes)
        for j in nearest:
            votes[train_y[j]] += math.exp(sims[j] / temperature)
        ranked = np.argsort(-votes, kind="stable")
        top1 += ranked[0] == target
        top5 += target in ranked[: min(5, n_classes)]
    return {"top1": top1 / len(te), "top5": top5 / len(te)}


@pytest.mark.parametrize(
    ("k", "temperature", "n_classes"),
    [(20, 0.07, 8), (1, 0.07, 8), (5, 1.0, 3), (500, 0.07, 8)],
)
def test_knn_matches_brute_force(blobs, k, temperature, n_classes):
    x, y = blobs(n=150, dim=12, n_classes=n_classes, sep=0.5, seed=0)
    xe, ye = blobs(n=60, dim=12, n_classes=n_classes, sep=0.5, seed=1)
    task = get_task("knn")
    params = {"k": k, "temperature": temperature}
    head, train_metrics = task.fit(x, y, params, seed=0, class_names=list("abcdefgh")[:n_classes])
    assert train_metrics == {}
    metrics = task.evaluate(head, xe, ye, params)
    expected = brute_force_knn(x, y, xe, ye, k, temperature, n_classes)
    assert metrics == pytest.approx(expected, abs=1e-12)
    assert 0.0 < metrics["top1"] < 1.0  # the case is not trivial


def test_temperature_decides_between_one_close_and_two_far_neighbours():
    # The query is at 0 rad. One class-0 neighbour at 0.45 rad (cos 0.90) and two class-1
    # neighbours at 1.05 rad (cos 0.50). With T=0.07, exp(0.9/0.07) beats 2*exp(0.5/0.07):
    # class 0. With T=10 the weights are nearly equal and two votes beat one: class 1.
    angles = torch.tensor([math.acos(0.9), math.acos(0.5), -math.acos(0.5)])
    train = torch.stack([angles.cos(), angles.sin()], dim=1)
    labels = torch.tensor([0, 1, 1])
    query = torch.tensor([[1.0, 0.0]])
    task = get_task("knn")
    head, _ = task.fit(train, labels, seed=0)
    sharp = task.evaluate(head, query, torch.tensor([0]), {"k": 3, "temperature": 0.07})
    flat = task.evaluate(head, query, torch.tensor([0]), {"k": 3, "temperature": 10.0})
    assert sharp["top1"] == 1.0
    assert flat["top1"] == 0.0
    # k=1 takes only the nearest (class 0) whatever T is.
    assert task.evaluate(head, query, torch.tensor([0]), {"k": 1, "temperature": 10.0})["top1"] == 1


def test_knn_ignores_feature_scale_and_seed(blobs):
    x, y = blobs(n=100, sep=0.8)
    task = get_task("knn")
    head0, _ = task.fit(x, y, seed=0)
    head1, _ = task.fit(x * 7.0, y, seed=1)
    assert task.evaluate(head0, x, y) == task.evaluate(head1, x * 0.1, y)


def test_knn_head_is_the_normalised_bank_and_round_trips(blobs):
    x, y = blobs(n=50)
    task = get_task("knn")
    head, _ = task.fit(x, y, seed=0, class_names=["a", "b", "c", "d", "e"])
    assert set(head) == {"bank", "labels", "n_classes"}
    np.testing.assert_allclose(head["bank"].norm(dim=1).numpy(), 1.0, rtol=1e-6)
    assert int(head["n_classes"]) == 5
    reloaded = load(save(head))
    assert task.evaluate(reloaded, x, y) == task.evaluate(head, x, y)


def test_knn_refuses_a_mismatched_head(blobs):
    x, y = blobs(n=50)
    task = get_task("knn")
    head, _ = task.fit(x, y, seed=0)
    with pytest.raises(TaskInputError, match="16-dim features but the features have 8"):
        task.evaluate(head, x[:, :8], y)
    with pytest.raises(TaskInputError, match="the head has 4 classes"):
        task.evaluate(head, x, torch.full_like(y, 4))
