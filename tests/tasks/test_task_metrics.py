"""The shared ranking metrics against scikit-learn and brute-force numpy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score, balanced_accuracy_score

from vbstore.tasks import _metrics
from vbstore.tasks.multilabel import macro_average_precision


@st.composite
def scored_rows(draw):
    """A few rows of small-integer scores (so ties are common) with >= 1 relevant per row."""
    n = draw(st.integers(2, 12))
    rows = draw(st.integers(1, 4))
    scores = draw(
        st.lists(st.lists(st.integers(0, 4), min_size=n, max_size=n), min_size=rows, max_size=rows)
    )
    relevant = draw(
        st.lists(st.lists(st.booleans(), min_size=n, max_size=n), min_size=rows, max_size=rows)
    )
    for row in relevant:
        row[draw(st.integers(0, n - 1))] = True
    return np.array(scores, dtype=np.float32), np.array(relevant)


@settings(max_examples=150, deadline=None)
@given(scored_rows())
def test_average_precision_matches_sklearn_including_ties(data):
    scores, relevant = data
    ours = _metrics.average_precision(torch.tensor(scores), torch.tensor(relevant)).numpy()
    expected = [average_precision_score(r, s) for s, r in zip(scores, relevant, strict=True)]
    np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-12)


def test_average_precision_by_hand():
    # Ranking: rel, non, rel, non -> AP = (1/1 + 2/3) / 2.
    scores = torch.tensor([[0.9, 0.8, 0.7, 0.1]])
    relevant = torch.tensor([[True, False, True, False]])
    assert float(_metrics.average_precision(scores, relevant)[0]) == pytest.approx(5 / 6)
    # The same scores tied: one threshold, precision 2/4 for both relevant items.
    tied = torch.full((1, 4), 0.5)
    assert float(_metrics.average_precision(tied, relevant)[0]) == pytest.approx(0.5)


def test_average_precision_of_a_row_without_relevant_items_is_nan():
    value = _metrics.average_precision(torch.tensor([[0.3, 0.2]]), torch.tensor([[False, False]]))
    assert torch.isnan(value).all()


def test_macro_average_precision_skips_labels_without_positives():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(30, 4))
    targets = (rng.random((30, 4)) < 0.4).astype(np.float32)
    targets[:, 2] = 0  # label 2 has no positive: it has no AP and must not count as 0
    ours = macro_average_precision(torch.tensor(scores), torch.tensor(targets))
    expected = np.mean([average_precision_score(targets[:, j], scores[:, j]) for j in (0, 1, 3)])
    assert ours == pytest.approx(expected, abs=1e-12)
    assert macro_average_precision(torch.tensor(scores), torch.zeros(30, 4)) is None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mean_per_class_recall_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    targets = rng.integers(0, 6, size=50)
    targets[targets == 3] = 4  # class 3 absent from the targets: it has no recall
    pred = np.where(rng.random(50) < 0.6, targets, rng.integers(0, 6, size=50))
    ours = _metrics.mean_per_class_recall(torch.tensor(pred), torch.tensor(targets))
    with warnings.catch_warnings():
        # sklearn warns when a prediction names a class absent from the targets.
        warnings.simplefilter("ignore", UserWarning)
        expected = balanced_accuracy_score(targets, pred)
    assert ours == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("n_classes", "k_eff"), [(3, 3), (5, 5), (9, 5)])
def test_topk_accuracies_against_brute_force(n_classes, k_eff):
    rng = np.random.default_rng(n_classes)
    scores = rng.normal(size=(40, n_classes)).astype(np.float32)
    targets = rng.integers(0, n_classes, size=40)
    top1, top5 = _metrics.topk_accuracies(torch.tensor(scores), torch.tensor(targets))
    order = np.argsort(-scores, axis=1, kind="stable")
    assert top1 == pytest.approx(np.mean(order[:, 0] == targets))
    assert top5 == pytest.approx(
        np.mean([t in o[:k_eff] for t, o in zip(targets, order, strict=True)])
    )
    if n_classes <= 5:
        assert top5 == 1.0


def test_ties_go_to_the_lower_index():
    scores = torch.tensor([[1.0, 1.0, 0.0], [0.0, 2.0, 2.0]])
    assert _metrics.ranking(scores)[:, 0].tolist() == [0, 1]


def test_row_blocks_cover_every_row_once(monkeypatch):
    from vbstore.tasks import _blocks

    monkeypatch.setattr(_blocks, "BLOCK_ELEMENTS", 10)
    blocks = list(_metrics.row_blocks(7, 3))
    assert [(b.start, b.stop) for b in blocks] == [(0, 3), (3, 6), (6, 7)]
    assert [(b.start, b.stop) for b in _metrics.row_blocks(2, 50)] == [(0, 1), (1, 2)]
