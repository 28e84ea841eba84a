"""A linear head on (optionally standardised) features, trained with AdamW: the linear probes'
recipe (``classification`` and the questions built on it, ``multilabel``), in numpy.

The recipe (fixed; a change bumps those tasks' ``op_version``; this is version 3 of
classification, 2 of multilabel):

- with ``standardize`` (multilabel always; classification when asked), each feature is
  standardised with the train split's mean and std (computed in float64, rounded to float32; a
  feature whose std is below 1e-6 gets std 1), kept in the head so evaluation applies the same
  map; without, the head holds mean 0 and std 1 (the identity);
- every random draw comes from one PCG64 bit generator seeded by the run's seed, in this order
  (:class:`Draws`): first the weights, drawn like ``torch.nn.Linear`` (uniform in
  +-1/sqrt(C)): ``((u * 2 - 1) / sqrt(C))`` in float64, rounded to float32, where
  ``u = (b >> 11) * 2**-53`` for K x C 64-bit draws ``b`` (row-major); then, each epoch, the
  minibatch order: the stable argsort of N fresh 64-bit draws. Full-batch training
  (``batch_size >= N``) draws no order. The bias starts at zero;
- each step, in float32: the scores ``z @ W.T + b`` of the minibatch's rows (in that order), the
  gradient of the mean loss over the minibatch written out: softmax cross-entropy
  ``(softmax(s) - onehot(y)) / B`` (softmax of ``s - max(s)``), or binary cross-entropy with
  logits ``(sigmoid(s) - y) / (B K)`` (sigmoid as ``1 / (1 + e)`` or ``e / (1 + e)`` with
  ``e = exp(-|s|)``); ``dW = g.T @ z``, ``db = g`` summed over rows;
- AdamW (beta 0.9, 0.999, eps 1e-8, as ``torch.optim.AdamW`` writes it): decoupled weight decay
  on the weights only (``W *= 1 - rate * wd``), ``m = m + 0.1 (g - m)``,
  ``v = 0.999 v + 0.001 g^2``, ``p -= rate / (1 - 0.9^t) * m / (sqrt(v) / sqrt(1 - 0.999^t) +
  eps)``, with ``rate = lr * (1 + cos(pi * step / steps)) / 2``: a cosine from ``lr`` to 0 over
  all steps, step counted from 0;
- the weights are checked finite after each epoch (else :class:`TrainingDiverged`), and the
  final loss is the mean over the whole train split of each row's float32 loss (summed in
  float64).

On the CPU it runs in numpy (a new head on stored features then loads no torch); features
given as torch tensors (on an accelerator: ``--device cuda``) run the same recipe in torch on
their device (``._linear_torch``), from the same numpy draws: only the rounding of the float32
arithmetic differs, as between any two devices. ``tests/tasks/test_task_linear.py`` checks the
two agree.

Imported only inside task calls, because it imports numpy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._budget import check_memory
from .._progress import progress
from ..data import as_array
from ._blocks import row_blocks
from ._errors import TaskInputError, TrainingDiverged
from ._linear_recipe import BETA1, BETA2, EPS, HEAD_KEYS, MIN_STD, Draws, Loss, rate

__all__ = ["AdamW", "Draws", "Loss", "check_head", "gradient", "logits", "mean_loss", "rate",
           "row_losses", "standardisation", "train"]

# Local imports: torch (._linear_torch) loads only for features given as torch tensors.


def standardisation(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature (mean, std) of ``x`` as float32, computed in float64."""
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=0)
    std = x64.std(axis=0)
    std = np.where(std < MIN_STD, 1.0, std)
    return mean.astype(np.float32), std.astype(np.float32)


def logits(head: Mapping[str, Any], x: Any) -> np.ndarray:
    """Scores (N, K) float32 of a linear head on raw features (standardised with its stats):
    numpy features here, torch features on their device (returned as numpy)."""
    if not isinstance(x, np.ndarray):
        from . import _linear_torch  # torch: features given as torch tensors stay on their device

        return _linear_torch.logits(head, x)
    weight, bias, mean, std = (head[k] for k in HEAD_KEYS)
    out = np.empty((len(x), weight.shape[0]), dtype=np.float32)
    for rows in row_blocks(len(x), x.shape[1]):
        out[rows] = ((x[rows] - mean) / std) @ weight.T + bias
    return out


def gradient(loss: Loss, scores: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The gradient of the minibatch's mean loss with respect to its scores (B, K), float32."""
    if loss == "cross_entropy":
        e = np.exp(scores - scores.max(axis=1, keepdims=True))
        g = e / e.sum(axis=1, keepdims=True)
        g[np.arange(len(g)), y] -= 1
        g /= np.float32(len(g))
        return g
    e = np.exp(-np.abs(scores))
    g = np.where(scores >= 0, np.float32(1), e) / (1 + e) - y
    g /= np.float32(g.size)
    return g


def row_losses(loss: Loss, scores: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each row's float32 loss (binary cross-entropy: the mean over its labels)."""
    if loss == "cross_entropy":
        shifted = scores - scores.max(axis=1, keepdims=True)
        return np.log(np.exp(shifted).sum(axis=1)) - shifted[np.arange(len(shifted)), y]
    elementwise = (np.maximum(scores, 0) - scores * y
                   + np.log1p(np.exp(-np.abs(scores))))
    return elementwise.mean(axis=1, dtype=np.float32)


def mean_loss(loss: Loss, head: Mapping[str, Any], x: np.ndarray, y: np.ndarray) -> float:
    """The mean loss of ``head`` over all rows, summed in float64 block by block."""
    total = 0.0
    for rows in row_blocks(len(x), x.shape[1]):
        total += float(row_losses(loss, logits(head, x[rows]), y[rows]).sum(dtype=np.float64))
    return total / len(x)


class AdamW:
    """AdamW over float32 arrays updated in place, as ``torch.optim.AdamW`` steps one tensor."""

    def __init__(self, params: list[tuple[np.ndarray, float]]) -> None:
        self.params = params
        self.moments = [(np.zeros_like(p), np.zeros_like(p)) for p, _ in params]
        self.steps = 0

    def step(self, grads: list[np.ndarray], rate: float) -> None:
        self.steps += 1
        correction1 = 1 - BETA1**self.steps
        correction2_sqrt = math.sqrt(1 - BETA2**self.steps)
        for (param, decay), (m, v), g in zip(self.params, self.moments, grads, strict=True):
            if decay != 0:
                param *= 1 - rate * decay
            m += (g - m) * (1 - BETA1)
            v *= BETA2
            v += (1 - BETA2) * g * g
            param -= (rate / correction1) * m / (np.sqrt(v) / correction2_sqrt + EPS)


def train(
    x: Any,
    y: Any,
    *,
    n_out: int,
    loss: Loss,
    epochs: int,
    lr: float,
    weight_decay: float,
    batch_size: int,
    seed: int,
    task: str,
    standardize: bool = True,
) -> tuple[dict[str, np.ndarray], float]:
    """Fit a linear head on (x, y) by the module's recipe.

    Args:
        x: (N, C) float32 features (raw; standardised here): a numpy array, or a torch tensor
            (trained on its device by ``._linear_torch``, from the same draws).
        y: (N,) int64 class indices for ``cross_entropy``; (N, K) float32 0/1 for
            ``binary_cross_entropy`` (numpy).
        n_out: Output size (classes or labels).
        loss: Which loss.
        epochs: Passes over the data.
        lr: Peak AdamW learning rate.
        weight_decay: Decoupled weight decay on the weights.
        batch_size: Minibatch size; clipped to N.
        seed: Seeds the draws (:class:`Draws`).
        task: Task name, for error messages.
        standardize: Standardise the features with the train statistics (else the head holds
            mean 0 and std 1, the identity).

    Returns:
        (head, final loss over the whole train split). The head holds ``weight`` (K, C),
        ``bias`` (K,), ``mean`` (C,), ``std`` (C,), all float32 numpy arrays.

    Raises:
        TrainingDiverged: the weights or the loss stopped being finite.
        OverBudget: the head and its logits would not fit the memory limit.
    """
    n, dim = x.shape
    # weights with their gradient and Adam's moments, and the logits of the whole split (the
    # final loss is taken over all of it)
    check_memory(f"task {task!r}: a linear head of {n_out} outputs on {n} samples",
                 4 * n_out * (4 * (dim + 1) + 2 * n))
    draws = Draws(seed)
    if not isinstance(x, np.ndarray):
        from . import _linear_torch  # torch: features given as torch tensors train on their device

        return _linear_torch.train(x, y, draws, n_out=n_out, loss=loss, epochs=epochs, lr=lr,
                                   weight_decay=weight_decay, batch_size=batch_size, task=task,
                                   standardize=standardize)
    if standardize:
        mean, std = standardisation(x)
    else:
        mean, std = np.zeros(dim, dtype=np.float32), np.ones(dim, dtype=np.float32)
    z = (x - mean) / std
    weight = draws.weight(n_out, dim)
    bias = np.zeros(n_out, dtype=np.float32)
    batch = min(batch_size, n)
    total = epochs * math.ceil(n / batch)
    adamw = AdamW([(weight, weight_decay), (bias, 0.0)])
    # a diverging head overflows: the checks below say so, in one error rather than warnings
    with np.errstate(over="ignore", invalid="ignore"), \
            progress(f"training {task} head", epochs, "epoch") as shown:
        for epoch in range(epochs):
            order = draws.order(n) if batch < n else None
            for start in range(0, n, batch):
                rows = order[start:start + batch] if order is not None else slice(None)
                zb = z[rows]
                scores = zb @ weight.T + bias
                g = gradient(loss, scores, y[rows])
                adamw.step([g.T @ zb, g.sum(axis=0)], rate(lr, adamw.steps, total))
            if not (np.isfinite(weight).all() and np.isfinite(bias).all()):
                raise TrainingDiverged(
                    f"task {task!r}: the head's weights became NaN/Inf in epoch {epoch + 1}",
                    hint=f"lower lr (now {lr:g})",
                )
            if shown.active:  # the last step's loss: computed only when it is shown
                shown.update(1, loss=float(row_losses(loss, scores, y[rows]).mean()))
    head = {"weight": weight, "bias": bias, "mean": mean, "std": std}
    with np.errstate(over="ignore", invalid="ignore"):
        final = mean_loss(loss, head, x, y)
    if not math.isfinite(final):
        raise TrainingDiverged(f"task {task!r}: the final train loss is {final}")
    return head, final


def check_head(head: Mapping[str, Any], task: str, dim: int) -> dict[str, np.ndarray]:
    """The four float32 arrays of a linear head (numpy, or torch tensors converted: a head of
    any version is these four), checked against a feature size.

    Raises:
        TaskInputError: a missing array, a wrong rank, or a feature size the head was not
            trained on.
    """
    def array(key: str, ndim: int) -> np.ndarray:
        if key not in head:
            raise TaskInputError(f"head has no {key!r} tensor: it was not trained by task "
                                 f"{task!r}", hint="use a head trained by this task")
        value = np.asarray(as_array(head[key]))
        if value.ndim != ndim:
            raise TaskInputError(f"head tensor {key!r} has rank {value.ndim}, expected {ndim}")
        return value.astype(np.float32, copy=False)

    weight = array("weight", 2)
    if weight.shape[1] != dim:
        raise TaskInputError(
            f"head expects {weight.shape[1]}-dim features but the features have {dim}",
            hint="evaluate with the backbone and pooling the head was trained on",
        )
    out = {"weight": weight}
    for key, size in (("bias", weight.shape[0]), ("mean", dim), ("std", dim)):
        value = array(key, 1)
        if value.shape[0] != size:
            raise TaskInputError(
                f"head tensor {key!r} has {value.shape[0]} entries, expected {size}"
            )
        out[key] = value
    return out
