"""The trivial baselines of pooled, pair and triplet tasks, against independent computations."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from vbstore.data._trivial import miss_all, random_ap
from vbstore.tasks import get_task, targets_baseline


def _ap(relevant: list[bool]) -> float:
    hits, total = 0, 0.0
    for rank, rel in enumerate(relevant, start=1):
        if rel:
            hits += 1
            total += hits / rank
    return total / hits


@pytest.mark.parametrize(("gallery", "relevant"), [(1, 1), (4, 1), (5, 2), (6, 3), (6, 6)])
def test_random_ap_is_the_mean_ap_over_every_ranking(gallery, relevant):
    items = [True] * relevant + [False] * (gallery - relevant)
    rankings = set(itertools.permutations(items))
    assert random_ap(gallery, relevant) == pytest.approx(
        sum(_ap(list(r)) for r in rankings) / len(rankings))


@pytest.mark.parametrize(("gallery", "relevant", "k"), [(5, 1, 1), (6, 2, 3), (7, 3, 10)])
def test_miss_all_counts_the_top_k_with_no_relevant_item(gallery, relevant, k):
    tops = list(itertools.combinations(range(gallery), min(k, gallery)))
    misses = sum(1 for top in tops if all(i >= relevant for i in top))
    assert miss_all(gallery, relevant, k) == pytest.approx(misses / len(tops))


def test_a_trained_classifier_is_held_to_the_train_splits_majority_class():
    train = torch.tensor([2, 2, 2, 0, 1, 1])
    evals = torch.tensor([2, 0, 0, 1, 3, 3, 3, 3])
    got = targets_baseline(get_task("classification"), evals, train, class_count=7)
    assert got is not None
    assert got.predictor == "the majority class of the train split"
    # class 2 once in eight; the train split's classes 2, 1, 0 cover three of the eight
    assert got.metrics == {"top1": 1 / 8, "top5": 4 / 8}
    # over five classes or fewer the task reports no top5, and neither does its baseline
    five = targets_baseline(get_task("classification"), evals, train, class_count=5)
    assert five is not None
    assert five.metrics == {"top1": 1 / 8}
    # kNN keeps top-min(5, C) on any class count
    assert set(targets_baseline(get_task("knn"), evals, train, class_count=5).metrics) == {
        "top1", "top5"}


def test_zero_shot_classification_is_held_to_chance():
    got = targets_baseline(get_task("zeroshot_classification"), torch.tensor([0, 1, 2]),
                           class_count=10)
    assert got is not None
    assert got.metrics == {"acc1": 0.1, "acc5": 0.5, "mean_per_class_recall": 0.1}


def test_retrieval_baseline_is_what_random_features_score_on_average():
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2])
    task = get_task("retrieval")
    got = targets_baseline(task, labels)
    assert got is not None
    gen = torch.Generator().manual_seed(0)
    draws = [task.evaluate_zero_shot(torch.randn(8, 16, generator=gen), labels)
             for _ in range(600)]
    for name, value in got.metrics.items():
        assert value == pytest.approx(sum(d[name] for d in draws) / len(draws), abs=0.02), name


def test_multilabel_baseline_is_the_ap_of_one_constant_score():
    from vbstore.tasks._metrics import average_precision

    targets = torch.tensor([[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 0]], dtype=torch.float32)
    got = targets_baseline(get_task("multilabel"), targets)
    assert got is not None
    cols = targets.T[:2]  # the third label has no positive: left out, as the task does
    expected = average_precision(torch.zeros_like(cols), cols.bool()).mean()
    assert got.metrics["mean_average_precision"] == pytest.approx(float(expected))


def test_caption_retrieval_baseline():
    got = targets_baseline(get_task("zeroshot_retrieval"), None,
                           captions=[["a", "b"], ["c"], ["d"], ["e"]])
    assert got is not None
    assert got.metrics["image_retrieval_recall@1"] == pytest.approx(1 / 4)
    # image 0 has 2 of the 5 captions: 1 - (3/5)(2/4) of a top 2... top 1: 2/5; others 1/5
    assert got.metrics["text_retrieval_recall@1"] == pytest.approx((2 / 5 + 3 * 1 / 5) / 4)
    assert got.metrics["image_retrieval_recall@10"] == 1.0


def test_similarity_is_held_to_a_coin_flip_and_a_task_with_other_metrics_to_nothing():
    got = targets_baseline(get_task("similarity"), torch.zeros((3, 5), dtype=torch.long))
    assert got is not None
    assert got.metrics == {"accuracy": 0.5}
    assert not math.isnan(got.metrics["accuracy"])
    assert targets_baseline(get_task("correspondence"), None) is None
