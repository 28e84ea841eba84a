"""CLIP_benchmark's linear probe, draw for draw: few-shot selection, weight-decay search, training.

CLIP_benchmark 1.6.2 (``clip_benchmark/metrics/linear_probe.py``) trains ``torch.nn.Linear`` on
L2-normalised image embeddings with AdamW (weight decay on every parameter, the bias too),
cross-entropy, and a cosine learning rate set before each step (no warmup), over minibatches a
shuffling DataLoader draws. Every random draw here is the draw it makes, from a local generator
instead of torch's global one, so on the same features and seed the numbers are its numbers:

- the held-out part (``val_proportion``): ``torch.utils.data.random_split`` of the train rows;
- the few-shot subset: one ``randperm`` of the (remaining) train rows, keeping the first ``k``
  rows of each class in that order (``k = -1``: every row, in that order);
- each training run reseeds with the seed: weight and bias drawn as ``nn.Linear`` draws them,
  then per epoch the two int64 draws a DataLoader iterator and its RandomSampler make, and the
  sampler's ``randperm`` from a generator seeded by the second;
- the weight-decay search (only with a held-out part): 97 values log-spaced over [1e-6, 1e2];
  the 7 of them on the coarse grid first, then three around the best with a step of 8, 4, 2,
  1 index, keeping the first best top-1 on the held-out part (CLIP paper, A.3). Without a
  held-out part the weight decay is 0, as in CLIP_benchmark's default run.

What differs, and why (docs/tasks.md): CLIP_benchmark draws from the global generator after the
model and data loaders have drawn from it, so its subsets also depend on the model's init and on
whether its feature cache existed; vbstore's depend on the seed alone. It runs under fp16
autocast on CUDA by default (``--no_amp`` for float32); vbstore computes in float32.

Imported only inside task calls, because it imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .._progress import progress
from ._errors import TaskInputError, TrainingDiverged

# CLIP_benchmark's grid: 97 log-spaced values, searched from the 7 of its coarse grid
WD_GRID = np.logspace(-6, 2, num=97).tolist()
_COARSE = np.logspace(-6, 2, num=7).tolist()
WD_START = [i for i, value in enumerate(WD_GRID) if value in _COARSE]


@dataclass(frozen=True)
class Recipe:
    """The training settings of one run (CLIP_benchmark's ``--fewshot_*`` and ``--batch_size``)."""

    epochs: int
    lr: float
    batch_size: int
    seed: int


def normalise(x: torch.Tensor) -> torch.Tensor:
    """Rows scaled to unit L2 norm as ``F.normalize`` does (CLIP_benchmark's featurizer)."""
    return F.normalize(x.to(torch.float32), dim=-1)


def split_rows(n: int, val_proportion: float, generator: torch.Generator
               ) -> tuple[list[int], list[int]]:
    """(train rows, held-out rows) as ``random_split(dataset, [1 - p, p])`` draws them."""
    if val_proportion <= 0:
        return list(range(n)), []
    # a range is all random_split reads of a dataset: its length
    rows: Any = range(n)
    train, val = torch.utils.data.random_split(rows, [1 - val_proportion, val_proportion],
                                               generator=generator)
    if not len(train) or not len(val):
        raise TaskInputError(
            f"val_proportion {val_proportion:g} of {n} train samples leaves "
            f"{len(train)} to train on and {len(val)} to hold out",
            hint="use more training data or another val_proportion (0 skips the search)")
    return list(train.indices), list(val.indices)


def fewshot_rows(targets: torch.Tensor, k: int, generator: torch.Generator) -> list[int]:
    """Positions of the rows a ``k``-shot probe trains on, in the order it reads them.

    Raises:
        TaskInputError: a class of the train rows has fewer than ``k`` of them.
    """
    counts: dict[int, int] = {}
    rows = []
    for p in torch.randperm(len(targets), generator=generator).tolist():
        label = int(targets[p])
        counts.setdefault(label, 0)
        if k < 0 or counts[label] < k:
            counts[label] += 1
            rows.append(p)
    short = sorted(c for c, n in counts.items() if k > 0 and n != k)
    if short:
        raise TaskInputError(
            f"fewshot_k={k}, but class {short[0]} has only {counts[short[0]]} training samples"
            + (f" ({len(short)} classes are short)" if len(short) > 1 else ""),
            hint="lower fewshot_k, or -1 to train on every sample")
    return rows


def _lr_at(base: float, step: int, steps: int) -> float:
    # CLIP_benchmark's cosine_lr with warmup 0, in numpy as it computes it
    return float(0.5 * (1 + np.cos(np.pi * step / steps)) * base)


def train(x: torch.Tensor, y: torch.Tensor, n_out: int, weight_decay: float, recipe: Recipe,
          task: str) -> dict[str, torch.Tensor]:
    """A linear layer (``weight`` (K, C), ``bias`` (K,)) trained as CLIP_benchmark trains it.

    Raises:
        TrainingDiverged: the weights stopped being finite.
    """
    n, dim = x.shape
    generator = torch.Generator().manual_seed(recipe.seed)
    weight = torch.empty(n_out, dim)
    torch.nn.init.kaiming_uniform_(weight, a=math.sqrt(5), generator=generator)
    bias = torch.empty(n_out).uniform_(-1 / math.sqrt(dim), 1 / math.sqrt(dim),
                                       generator=generator)
    weight = weight.to(x.device).requires_grad_(True)
    bias = bias.to(x.device).requires_grad_(True)
    optimiser = torch.optim.AdamW([weight, bias], lr=recipe.lr, weight_decay=weight_decay)
    per_epoch = math.ceil(n / recipe.batch_size)
    steps = recipe.epochs * per_epoch
    for epoch in range(recipe.epochs):
        # a DataLoader iterator's base seed, then its RandomSampler's seed
        torch.empty((), dtype=torch.int64).random_(generator=generator)
        seed = int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).to(x.device)
        for i in range(per_epoch):
            rows = order[i * recipe.batch_size:(i + 1) * recipe.batch_size]
            for group in optimiser.param_groups:
                group["lr"] = _lr_at(recipe.lr, i + epoch * per_epoch, steps)
            optimiser.zero_grad()
            loss = F.cross_entropy(F.linear(x[rows], weight, bias), y[rows])
            loss.backward()
            optimiser.step()
        if not (torch.isfinite(weight).all() and torch.isfinite(bias).all()):
            raise TrainingDiverged(
                f"task {task!r}: the head's weights became NaN/Inf in epoch {epoch + 1}",
                hint=f"lower lr (now {recipe.lr:g})")
    return {"weight": weight.detach(), "bias": bias.detach()}


def logits(head: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Scores (N, K) of a head on raw embeddings (normalised here, as at training)."""
    with torch.no_grad():
        return F.linear(normalise(x), head["weight"], head["bias"])


def top1(scores: torch.Tensor, targets: torch.Tensor) -> float:
    """CLIP_benchmark's ``accuracy(..., topk=(1,))``: the share of rows whose top score is right."""
    pred = scores.topk(1, 1, True, True)[1].t()
    return float(pred.eq(targets.view(1, -1)).reshape(-1).float().sum()) / len(targets)


def search_weight_decay(fit: Callable[[float], dict[str, torch.Tensor]], x_val: torch.Tensor,
                        y_val: torch.Tensor) -> float:
    """The weight decay CLIP_benchmark's search picks: coarse grid, then halving steps."""
    def peak(indices: list[int]) -> int:
        best, best_acc = 0, 0.0  # its find_peak: index 0 unless some accuracy beats 0
        for index in indices:
            acc = top1(logits(fit(WD_GRID[index]), x_val), y_val)
            if best_acc < acc:
                best, best_acc = index, acc
        return best

    with progress("searching the weight decay", 7 + 3 * 4, "run") as shown:
        index = peak(WD_START)
        shown.update(7)
        span = 8
        while span > 0:
            index = peak([max(index - span, 0), index, min(index + span, len(WD_GRID) - 1)])
            shown.update(3)
            span //= 2
    return float(WD_GRID[index])


def balanced_accuracy(pred: torch.Tensor, targets: torch.Tensor) -> float:
    """``sklearn.metrics.balanced_accuracy_score``: recall averaged over the classes present in
    the targets (a predicted class absent from them has no recall and is left out)."""
    y, p = targets.cpu().numpy(), pred.cpu().numpy()
    classes = np.union1d(y, p)
    index = {c: i for i, c in enumerate(classes)}
    matrix = np.zeros((len(classes), len(classes)), dtype=np.int64)
    np.add.at(matrix, ([index[c] for c in y], [index[c] for c in p]), 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        recall = np.diag(matrix) / matrix.sum(axis=1)
    return float(np.mean(recall[~np.isnan(recall)]))
