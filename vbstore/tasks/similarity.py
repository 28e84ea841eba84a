"""Perceptual similarity as a two-alternative forced choice (2AFC), zero-shot.

Each triplet is a reference and two candidates, judged by people (NIGHTS, from DreamSim): which
candidate is closer to the reference? The backbone answers with the cosine similarity of pooled
features: the candidate more similar to the reference is its pick.

- The human answer is the majority of the votes; a triplet whose votes split evenly has none
  and is left out. (The data layer already dropped triplets with fewer than six votes.)
- A tie (equal similarities, compared in float64) is half a pick for each side: it counts 0.5
  toward ``accuracy`` and half a "right" prediction in the confusion counts, the expected score
  of a coin flip. A constant feature scores 0.5 and ``tie_rate`` 1.
- ``precision``, ``recall`` and ``f1`` take "right" as the positive class, as in VisBench; a
  ratio with nothing in its denominator is 0 (scikit-learn's ``zero_division=0``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._base import Metric
from ._errors import UndefinedMetric
from ._registry import register_task
from ._shape_zero_shot import ZeroShotTask

if TYPE_CHECKING:
    import torch

# Local imports: torch and the helpers built on it (_metrics, _linear, _checks, _dense_ops, _text)
# load inside the functions that compute; importing a task only declares it, and a cached result
# reads nothing more.


def two_afc(ref: torch.Tensor, left: torch.Tensor, right: torch.Tensor,
            right_is_closer: torch.Tensor) -> dict[str, float]:
    """2AFC metrics for rows of reference, left and right features and the human answers.

    Args:
        ref, left, right: (T, C) features of the triplets' images.
        right_is_closer: (T,) bool, the human majority.
    """
    import torch

    from ._metrics import l2_normalise

    r, a, b = (l2_normalise(x.to(torch.float64)) for x in (ref, left, right))
    to_left, to_right = (r * a).sum(dim=1), (r * b).sum(dim=1)
    # the share of a "right" pick: 1, 0, or one half for a tie
    pick_right = (to_right > to_left).double() + 0.5 * (to_right == to_left).double()
    truth = right_is_closer.to(torch.float64)
    agree = truth * pick_right + (1 - truth) * (1 - pick_right)
    tp = float((truth * pick_right).sum())
    fp = float(((1 - truth) * pick_right).sum())
    fn = float((truth * (1 - pick_right)).sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    return {"accuracy": float(agree.mean()), "f1": f1, "precision": precision, "recall": recall,
            "tie_rate": float((to_right == to_left).double().mean())}


@register_task(name="similarity")
class Similarity(ZeroShotTask):
    """Human 2AFC perceptual similarity (NIGHTS): cosine of pooled features picks a candidate."""

    level = "mid"
    op_version = 1
    target_kind = "triplets"
    shape = "zero_shot"
    stochastic = False
    protocol = "midvision_2afc"
    metrics = (
        Metric("accuracy", "higher", "share of triplets where the closer candidate by cosine is "
                                     "the one most people picked (a tie counts one half)"),
        Metric("f1", "higher", "F1 of picking the right candidate (positive class: right)"),
        Metric("precision", "higher", "of the right picks, the share people agree with"),
        Metric("recall", "higher", "of the triplets people answered right, the share picked"),
        Metric("tie_rate", "lower", "share of triplets with equal similarities (diagnostic)"),
    )
    headline = "accuracy"

    def _evaluate_zero_shot(
        self,
        feats: torch.Tensor,
        targets: torch.Tensor,
        params: dict[str, Any],
        context: dict[str, Any],
    ) -> dict[str, float]:
        left_votes, right_votes = targets[:, 3], targets[:, 4]
        answered = left_votes != right_votes
        if not bool(answered.any()):
            raise UndefinedMetric(self.name, "accuracy", "every triplet's votes split evenly, so "
                                  "no triplet has a human answer")
        rows = targets[answered]
        return two_afc(feats[rows[:, 0]], feats[rows[:, 1]], feats[rows[:, 2]],
                       rows[:, 4] > rows[:, 3])
