"""The 2AFC similarity probe against hand-made cases and scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score

from vbstore.tasks import TaskInputError, UndefinedMetric, get_task

TASK = get_task("similarity")


def _triplets(truth_right, n_images):
    rng = np.random.default_rng(0)
    rows = []
    for right in truth_right:
        ref, left, right_img = rng.choice(n_images, size=3, replace=False)
        votes = (1, 5) if right else (6, 1)
        rows.append([ref, left, right_img, *votes])
    return torch.tensor(rows)


def test_oracle_scores_one_and_constant_scores_one_half():
    # each reference sits on its right (or left) candidate: the oracle picks what people picked
    feats = torch.eye(6)
    feats[3] = feats[0]  # image 3 equals image 0
    feats[4] = feats[1]
    rows = torch.tensor([[0, 2, 3, 0, 6], [1, 4, 5, 6, 0], [0, 3, 5, 7, 1], [4, 2, 1, 2, 6]])
    oracle = TASK.evaluate_zero_shot(feats, rows)
    assert oracle == {"accuracy": 1.0, "f1": 1.0, "precision": 1.0, "recall": 1.0, "tie_rate": 0.0}
    constant = TASK.evaluate_zero_shot(torch.ones(6, 4), rows)
    assert constant["accuracy"] == 0.5
    assert constant["tie_rate"] == 1.0
    assert constant["recall"] == 0.5  # half of each "right" triplet is picked right
    assert constant["precision"] == 0.5  # two of the four triplets are "right"


def test_metrics_match_sklearn_with_ties_as_half_picks():
    rng = np.random.default_rng(3)
    truth = rng.random(200) < 0.6
    feats = torch.tensor(rng.normal(size=(50, 8)), dtype=torch.float32)
    feats[40:] = feats[0]  # equal images: triplets among them tie
    rows = _triplets(truth, 40)
    rows[:10, :3] = torch.tensor([40, 41, 42])
    got = TASK.evaluate_zero_shot(feats, rows)
    x = torch.nn.functional.normalize(feats.double(), dim=1)
    to_left = (x[rows[:, 0]] * x[rows[:, 1]]).sum(1).numpy()
    to_right = (x[rows[:, 0]] * x[rows[:, 2]]).sum(1).numpy()
    tie = to_left == to_right
    assert tie.sum() == 10
    # a tie is two half-weighted predictions, one each way
    y_true = np.concatenate([truth, truth[tie]])
    y_pred = np.concatenate([np.where(tie, True, to_right > to_left), np.zeros(tie.sum(), bool)])
    weight = np.concatenate([np.where(tie, 0.5, 1.0), np.full(tie.sum(), 0.5)])
    expected = {
        "accuracy": accuracy_score(y_true, y_pred, sample_weight=weight),
        "f1": f1_score(y_true, y_pred, sample_weight=weight),
        "precision": precision_score(y_true, y_pred, sample_weight=weight),
        "recall": recall_score(y_true, y_pred, sample_weight=weight),
        "tie_rate": 10 / 200,
    }
    assert got == pytest.approx(expected, abs=1e-12)


def test_even_votes_have_no_human_answer_and_are_left_out():
    feats = torch.eye(3)
    feats[2] = feats[0]
    decided = TASK.evaluate_zero_shot(feats, torch.tensor([[0, 1, 2, 0, 6]]))
    with_even = TASK.evaluate_zero_shot(feats, torch.tensor([[0, 1, 2, 0, 6], [0, 2, 1, 3, 3]]))
    assert decided == with_even
    with pytest.raises(UndefinedMetric, match="split evenly"):
        TASK.evaluate_zero_shot(feats, torch.tensor([[0, 2, 1, 3, 3]]))


def test_bad_triplets_are_refused():
    feats = torch.eye(3)
    with pytest.raises(TaskInputError, match="no triplets"):
        TASK.evaluate_zero_shot(feats, torch.zeros(0, dtype=torch.long))
    with pytest.raises(TaskInputError, match="outside the 3 feature rows"):
        TASK.evaluate_zero_shot(feats, torch.tensor([[0, 1, 3, 0, 6]]))
    with pytest.raises(TaskInputError, match=r"\(T>=1, 5\)"):
        TASK.evaluate_zero_shot(feats, torch.tensor([[0, 1, 2]]))
