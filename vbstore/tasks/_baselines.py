"""The trivial baseline of a pooled, pair or triplet task: what knowing nothing of the image gets.

A probe's number means little alone: ``top1 0.31`` is good on 100 classes and worthless on 3.
Every result therefore carries the score of its task's trivial predictor on the same eval split
(the engine puts it in the record as ``baseline``), computed here from the targets alone:

- class indices: the train split's majority class (top-k: its k most frequent classes) for a
  trained head; chance, a uniform guess over the classes (expected value), zero-shot;
- multi-hot labels: one constant score per label, so each label's AP is its frequency;
- class indices scored by retrieval: a random ranking (expected recall@k and AP, exactly);
- captions: a random ranking of images and of captions (expected recall@k);
- triplets (2AFC): a coin flip, accuracy 0.5;
- view pairs: the train pairs' mean pose (:func:`.relative_pose.trivial_metrics`).

Dense tasks score their own constant map (the majority class, the mean depth...) with their own
scorer: :meth:`vbstore.tasks.DenseTask.baseline_split`. Only metrics a task declares are
returned, and only when its headline is among them; a task with other metrics gets None.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._base import Task

TOPK = 5


@dataclass(frozen=True)
class Baseline:
    """A trivial predictor's metrics on an eval split.

    Attributes:
        predictor: What it predicts, in words (``the majority class of the train split``).
        metrics: Metric -> value, for the metrics of the task it defines (the headline among
            them).
    """

    predictor: str
    metrics: dict[str, float]


def targets_baseline(task: Task, eval_targets: Any, train_targets: Any = None,
                     class_count: int | None = None,
                     captions: Sequence[Sequence[str]] | None = None,
                     params: Mapping[str, Any] | None = None) -> Baseline | None:
    """The trivial baseline of ``task`` from its targets (tensors or lists), or None.

    Args:
        eval_targets: The eval split's targets, in the task's ``target_kind``.
        train_targets: The train split's (a trained task: its constant comes from them; None:
            from the eval split's own, as for a stored head applied to new data).
        class_count: The number of classes, when the data names them.
        captions: For caption targets, each eval image's captions.
        params: The task's resolved parameters, where they name the metrics (retrieval's
            ``topk``).
    """
    kind = task.target_kind
    classes = None
    if kind == "class_index":
        labels = _ints(eval_targets)
        if task.zero_shot and "recall@1" in _names(task):
            ks = tuple(int(m.name.removeprefix("recall@")) for m in task.metrics_for(params)
                       if m.name.startswith("recall@"))
            found = _retrieval(labels, ks), "a random ranking (expected value)"
        elif task.zero_shot:
            classes = class_count or (max(labels) + 1 if labels else 0)
            found = _chance(classes), f"chance: a uniform guess over {classes} classes"
        else:
            train = labels if train_targets is None else _ints(train_targets)
            where = "eval" if train_targets is None else "train"
            classes = class_count or max([*train, *labels], default=-1) + 1
            found = (_majority(train, labels, class_count),
                     f"the majority class of the {where} split")
    elif kind == "multi_hot":
        found = (_label_frequency(_rows(eval_targets)),
                 "one constant score per label (its AP is the label's frequency)")
    elif kind == "captions" and captions is not None:
        found = _caption_ranking(captions), "a random ranking (expected value)"
    elif kind == "triplets":
        found = {"accuracy": 0.5}, "a coin flip"
    elif kind == "pairs" and task.trains_head:
        from .relative_pose import trivial_metrics  # torch: pair targets are tensors already

        train = eval_targets if train_targets is None else train_targets
        where = "eval" if train_targets is None else "train"
        found = trivial_metrics(train, eval_targets), f"the mean pose of the {where} pairs"
    else:
        return None
    metrics, predictor = found
    return keep_declared(task, predictor, metrics, classes, params=params)


def keep_declared(task: Task, predictor: str, metrics: Mapping[str, float],
                  classes: int | None = None, *,
                  params: Mapping[str, Any] | None = None) -> Baseline | None:
    """The baseline restricted to ``task``'s metrics under ``params`` (those it reports on
    ``classes`` classes, when known); None unless its headline is among them."""
    names = {m.name for m in task.metrics_for(params) if m.reported(classes)}
    kept = {k: float(v) for k, v in metrics.items() if k in names}
    return Baseline(predictor, kept) if task.headline_for(params) in kept else None


def _names(task: Task) -> set[str]:
    return {m.name for m in task.metrics}


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
