"""Ranking metrics shared by the tasks: top-k hits, average precision, per-class recall.

One tie rule for rankings: rows are ranked by a stable descending sort, so equal scores keep
index order (lower index first). Average precision ignores order within a tie, as
scikit-learn's ``average_precision_score`` does: a group of tied scores is one threshold.

Imported only inside task calls, because it imports torch.
"""

from __future__ import annotations

import torch

from ._blocks import row_blocks

__all__ = ["average_precision", "average_precision_ranked", "l2_normalise",
           "mean_per_class_recall", "ranking", "row_blocks", "topk_accuracies", "topk_hits"]


def l2_normalise(x: torch.Tensor) -> torch.Tensor:
    """Rows scaled to unit L2 norm; an all-zero row stays zero instead of becoming NaN."""
    return x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)


def ranking(scores: torch.Tensor) -> torch.Tensor:
    """Column indices of each row, best first (stable: ties keep index order)."""
    return torch.sort(scores, dim=1, descending=True, stable=True).indices


def topk_hits(scores: torch.Tensor, targets: torch.Tensor, k: int) -> torch.Tensor:
    """(N,) bool: whether ``targets[i]`` is among the ``k`` best columns of row ``i``."""
    top = ranking(scores)[:, : min(k, scores.shape[1])]
    return (top == targets[:, None]).any(dim=1)


def average_precision_ranked(
    sorted_scores: torch.Tensor, sorted_relevant: torch.Tensor
) -> torch.Tensor:
    """Average precision of each row, given rows already sorted by descending score.

    AP = sum over thresholds of (recall step) x (precision at that threshold), the
    non-interpolated definition scikit-learn uses. Each relevant item counts the precision at
    the *end* of its tie group, so tied scores form one threshold whatever their order.

    Returns:
        (R,) float64; NaN for a row with no relevant item (callers decide what that means).
    """
    rel = sorted_relevant.to(torch.float64)
    tp = rel.cumsum(dim=1)
    n = sorted_scores.shape[1]
    index = torch.arange(n, device=sorted_scores.device).expand_as(sorted_scores)
    is_end = torch.ones_like(sorted_scores, dtype=torch.bool)
    is_end[:, :-1] = sorted_scores[:, :-1] != sorted_scores[:, 1:]
    # Index of the last member of each position's tie group: a reversed running minimum.
    ends = torch.where(is_end, index, torch.full_like(index, n))
    ends = ends.flip(1).cummin(dim=1).values.flip(1)
    precision_at_end = tp.gather(1, ends) / (ends + 1).to(torch.float64)
    positives = rel.sum(dim=1)
    return (rel * precision_at_end).sum(dim=1) / positives  # 0/0 -> NaN: no relevant item


def average_precision(scores: torch.Tensor, relevant: torch.Tensor) -> torch.Tensor:
    """Average precision of each row of ``scores`` against the 0/1 ``relevant`` of that row."""
    sorted_scores, order = torch.sort(scores, dim=1, descending=True, stable=True)
    return average_precision_ranked(sorted_scores, relevant.gather(1, order))


def mean_per_class_recall(pred: torch.Tensor, targets: torch.Tensor) -> float:
    """Recall averaged over the classes present in ``targets`` (balanced accuracy).

    A class absent from the targets has no recall and is left out, as in scikit-learn's
    ``balanced_accuracy_score``.
    """
    classes = torch.unique(targets)
    n_classes = int(classes.max()) + 1
    totals = torch.bincount(targets, minlength=n_classes).to(torch.float64)
    correct = torch.bincount(targets[pred == targets], minlength=n_classes).to(torch.float64)
    return float((correct[classes] / totals[classes]).mean())


def topk_accuracies(scores: torch.Tensor, targets: torch.Tensor) -> tuple[float, float]:
    """(top-1, top-min(5, C)) accuracy of class scores (N, C) against class indices."""
    k = min(5, scores.shape[1])
    hits1 = hits5 = 0
    for rows in row_blocks(*scores.shape):
        top = ranking(scores[rows])[:, :k] == targets[rows, None]
        hits1 += int(top[:, 0].sum())
        hits5 += int(top.any(dim=1).sum())
    return hits1 / len(scores), hits5 / len(scores)
