"""The built-in kinds' trivial baselines (``TargetKind.baseline``): what knowing nothing of the
image gets, computed from the targets alone.

Each takes a :class:`BaselineQuestion` (the targets, and whether the task trains a head and
which metrics it declares) and returns ``(metrics, predictor in words, classes the metrics are
reported on)`` or None where the kind has no trivial predictor for that task;
``vbstore.tasks.targets_baseline`` keeps the metrics the task declares. Pure Python (counts and
closed forms), except the pairs' mean pose (torch, where pair targets are tensors already).

- class indices: the train split's majority class (top-k: its k most frequent classes) for a
  trained head; chance, a uniform guess over the classes (expected value), zero-shot;
- multi-hot labels: one constant score per label, so each label's AP is its frequency;
- class indices scored by retrieval: a random ranking (expected recall@k and AP, exactly);
- captions: a random ranking of images and of captions (expected recall@k);
- triplets (2AFC): a coin flip, accuracy 0.5;
- view pairs: the train pairs' mean pose (``vbstore.tasks.relative_pose.trivial_metrics``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from ._kinds import BaselineQuestion

# the trivial outcome: (metrics, predictor in words, classes they are reported on)
Trivial = tuple[dict[str, float], str, int | None]


def class_index(asked: BaselineQuestion) -> Trivial:
    labels, class_count = _ints(asked.eval_targets), asked.class_count
    # retrieval: its recall@k, whichever k its parameters name (VisBench's topk)
    ks = sorted(int(name.removeprefix("recall@")) for name in asked.metrics
                if name.startswith("recall@") and name.removeprefix("recall@").isdigit())
    if not asked.trained and ks:
        return _retrieval(labels, tuple(ks)), "a random ranking (expected value)", None
    if not asked.trained:
        classes = class_count or (max(labels) + 1 if labels else 0)
        return _chance(classes), f"chance: a uniform guess over {classes} classes", classes
    train = labels if asked.train_targets is None else _ints(asked.train_targets)
    where = "eval" if asked.train_targets is None else "train"
    classes = class_count or max([*train, *labels], default=-1) + 1
    return (_majority(train, labels, class_count),
            f"the majority class of the {where} split", classes)


def multi_hot(asked: BaselineQuestion) -> Trivial:
    return (_label_frequency(_rows(asked.eval_targets)),
            "one constant score per label (its AP is the label's frequency)", None)


def caption_ranking(asked: BaselineQuestion) -> Trivial | None:
    if asked.captions is None:
        return None
    return _caption_ranking(asked.captions), "a random ranking (expected value)", None


def coin_flip(asked: BaselineQuestion) -> Trivial:
    return {"accuracy": 0.5}, "a coin flip", None


def mean_pose(asked: BaselineQuestion) -> Trivial | None:
    if not asked.trained:
        return None
    # the pose metrics are the relative-pose task's; torch: pair targets are tensors already
    from ..tasks.relative_pose import trivial_metrics

    train = asked.eval_targets if asked.train_targets is None else asked.train_targets
    where = "eval" if asked.train_targets is None else "train"
    return (trivial_metrics(train, asked.eval_targets), f"the mean pose of the {where} pairs",
            None)


TOPK = 5



def _ints(targets: Any) -> list[int]:
    return [int(t) for t in (targets.tolist() if hasattr(targets, "tolist") else targets)]


def _rows(targets: Any) -> list[list[float]]:
    return [list(r) for r in (targets.tolist() if hasattr(targets, "tolist") else targets)]


def _top_classes(labels: Iterable[int], k: int) -> list[int]:
    """The k most frequent classes, ties to the lower index (the tasks' tie rule)."""
    counts = Counter(labels)
    return sorted(counts, key=lambda c: (-counts[c], c))[:k]


def _majority(train: list[int], evals: list[int], class_count: int | None) -> dict[str, float]:
    classes = class_count or max([*train, *evals], default=-1) + 1
    n = len(evals) or 1
    top = _top_classes(train, min(TOPK, classes))
    hits1 = sum(1 for y in evals if top and y == top[0])
    hits5 = sum(1 for y in evals if y in top)
    present = set(evals)
    recall = (1 / len(present)) if top and top[0] in present else 0.0  # one class all right
    return {"top1": hits1 / n, "top5": hits5 / n, "lp_acc1": hits1 / n, "lp_acc5": hits5 / n,
            "lp_mean_per_class_recall": recall}


def _chance(classes: int) -> dict[str, float]:
    if classes < 1:
        return {}
    return {"acc1": 1 / classes, "acc5": min(TOPK, classes) / classes,
            "mean_per_class_recall": 1 / classes, "top1": 1 / classes,
            "top5": min(TOPK, classes) / classes}


def miss_all(gallery: int, relevant: int, k: int) -> float:
    """The chance that a random ranking of ``gallery`` items puts none of ``relevant`` in the
    top ``k`` (hypergeometric: C(gallery - relevant, k) / C(gallery, k))."""
    out = 1.0
    for i in range(min(k, gallery)):
        out *= max(0, gallery - relevant - i) / (gallery - i)
    return out


def random_ap(gallery: int, relevant: int) -> float:
    """The expected average precision of a random ranking of ``gallery`` items, ``relevant`` of
    them relevant (Bestgen 2015: (1/G) [(R-1)/(G-1) (G - H_G) + H_G], H the harmonic number)."""
    if gallery <= 1:
        return 1.0
    harmonic = sum(1 / i for i in range(1, gallery + 1))
    return ((relevant - 1) / (gallery - 1) * (gallery - harmonic) + harmonic) / gallery


def _retrieval(labels: list[int], ks: tuple[int, ...] = (1, 5, 10)) -> dict[str, float]:
    """Leave-one-out retrieval: each query ranks the other N - 1 images; queries whose class has
    no other image are left out, as the task does."""
    counts = Counter(labels)
    gallery = len(labels) - 1
    queries = [(n, counts[c] - 1) for c, n in counts.items() if counts[c] > 1]
    total = sum(n for n, _ in queries)
    if not total or gallery < 1:
        return {}
    out = {f"recall@{k}": sum(n * (1 - miss_all(gallery, r, k)) for n, r in queries) / total
           for k in ks}
    out["mAP"] = sum(n * random_ap(gallery, r) for n, r in queries) / total
    return out


def _label_frequency(rows: list[list[float]]) -> dict[str, float]:
    """Macro AP of constant scores: all eval images tie, so each label's AP is its frequency."""
    if not rows:
        return {}
    columns = list(zip(*rows, strict=True))
    present = [sum(1 for v in col if v > 0) / len(rows) for col in columns]
    present = [p for p in present if p > 0]
    return {"mean_average_precision": sum(present) / len(present)} if present else {}


def _caption_ranking(captions: Sequence[Sequence[str]]) -> dict[str, float]:
    """Expected recalls of random rankings: text -> image (one right image among N) and
    image -> text (an image's captions among all M)."""
    images, texts = len(captions), sum(len(c) for c in captions)
    if not images or not texts:
        return {}
    out = {}
    for k in (1, 5, 10):
        out[f"image_retrieval_recall@{k}"] = min(k, images) / images
        out[f"text_retrieval_recall@{k}"] = sum(1 - miss_all(texts, len(c), k)
                                                for c in captions) / images
    return out
