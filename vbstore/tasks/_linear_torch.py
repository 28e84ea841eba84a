"""The linear probes' recipe (:mod:`._linear`'s docstring) in torch, for features on an
accelerator: the same draws (taken from :class:`._linear.Draws`, in numpy, then moved), the same
gradients written out and the same AdamW update, op for op; only the float32 rounding is the
device's. Also the pieces fine-tuning's torch recipe (``._finetune``) shares: the standardising
statistics and the mean loss.

Imported only inside task calls, because it imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .._progress import progress
from ._blocks import row_blocks
from ._errors import TrainingDiverged
from ._linear_recipe import BETA1, BETA2, EPS, HEAD_KEYS, MIN_STD, Draws, Loss, rate


def standardisation(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-feature (mean, std) of ``x`` as float32, computed in float64 (on ``x``'s device)."""
    x64 = x.to(torch.float64)
    mean = x64.mean(dim=0)
    std = x64.std(dim=0, unbiased=False)
    std = torch.where(std < MIN_STD, torch.ones_like(std), std)
    return mean.to(torch.float32), std.to(torch.float32)


def mean_loss(kind: Loss, scores: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The mean loss of ``scores`` (torch's own; fine-tuning differentiates it)."""
    if kind == "cross_entropy":
        return F.cross_entropy(scores, y)
    return F.binary_cross_entropy_with_logits(scores, y)


def logits(head: Mapping[str, Any], x: torch.Tensor) -> np.ndarray:
    """Scores (N, K) of a linear head on raw torch features, computed on their device and
    returned as a float32 numpy array."""
    weight, bias, mean, std = (torch.as_tensor(head[k]).to(device=x.device, dtype=torch.float32)
                               for k in HEAD_KEYS)
    out = np.empty((len(x), weight.shape[0]), dtype=np.float32)
    for rows in row_blocks(len(x), x.shape[1]):
        z = (x[rows].to(torch.float32) - mean) / std
        out[rows] = (z @ weight.T + bias).cpu().numpy()
    return out


def _gradient(loss: Loss, scores: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``._linear.gradient`` in torch."""
    if loss == "cross_entropy":
        e = torch.exp(scores - scores.amax(dim=1, keepdim=True))
        g = e / e.sum(dim=1, keepdim=True)
        g[torch.arange(len(g), device=g.device), y] -= 1
        return g / len(g)
    e = torch.exp(-scores.abs())
    g = torch.where(scores >= 0, torch.ones_like(e), e) / (1 + e) - y
    return g / g.numel()


def _row_losses(loss: Loss, scores: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``._linear.row_losses`` in torch."""
    if loss == "cross_entropy":
        shifted = scores - scores.amax(dim=1, keepdim=True)
        picked = shifted[torch.arange(len(shifted), device=shifted.device), y]
        return torch.log(torch.exp(shifted).sum(dim=1)) - picked
    elementwise = (scores.clamp_min(0) - scores * y + torch.log1p(torch.exp(-scores.abs())))
    return elementwise.mean(dim=1)


def train(
    x: torch.Tensor,
    y: Any,
    draws: Draws,
    *,
    n_out: int,
    loss: Loss,
    epochs: int,
    lr: float,
    weight_decay: float,
    batch_size: int,
    task: str,
    standardize: bool = True,
) -> tuple[dict[str, np.ndarray], float]:
    """``._linear.train`` on ``x``'s device (its arguments; ``draws`` seeded already), the head
    returned as float32 numpy arrays."""
    device = x.device
    n, dim = x.shape
    x = x.to(torch.float32)
    y = torch.as_tensor(np.asarray(y)).to(device)
    if standardize:
        mean, std = standardisation(x)
    else:
        mean = torch.zeros(dim, device=device)
        std = torch.ones(dim, device=device)
    z = (x - mean) / std
    weight = torch.from_numpy(draws.weight(n_out, dim)).to(device)
    bias = torch.zeros(n_out, device=device)
    params = [(weight, weight_decay), (bias, 0.0)]
    moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p, _ in params]
    batch = min(batch_size, n)
    total = epochs * math.ceil(n / batch)
    done = 0
    with progress(f"training {task} head", epochs, "epoch") as shown:
        for epoch in range(epochs):
            order = torch.from_numpy(draws.order(n)).to(device) if batch < n else None
            for start in range(0, n, batch):
                rows = order[start:start + batch] if order is not None else slice(None)
                zb = z[rows]
                g = _gradient(loss, zb @ weight.T + bias, y[rows])
                step_rate = rate(lr, done, total)
                done += 1
                correction1 = 1 - BETA1**done
                correction2_sqrt = math.sqrt(1 - BETA2**done)
                for (param, decay), (m, v), grad in zip(params, moments, (g.T @ zb, g.sum(dim=0)),
                                                        strict=True):
                    if decay != 0:
                        param.mul_(1 - step_rate * decay)
                    m.add_((grad - m) * (1 - BETA1))
                    v.mul_(BETA2).add_((1 - BETA2) * grad * grad)
                    param.sub_((step_rate / correction1) * m / (v.sqrt() / correction2_sqrt + EPS))
            if not (torch.isfinite(weight).all() and torch.isfinite(bias).all()):
                raise TrainingDiverged(
                    f"task {task!r}: the head's weights became NaN/Inf in epoch {epoch + 1}",
                    hint=f"lower lr (now {lr:g})",
                )
            if shown.active:  # the last step's loss: computed only when it is shown
                shown.update(1, loss=float(_row_losses(loss, zb @ weight.T + bias,
                                                       y[rows]).mean()))
    total_loss = 0.0
    for rows in row_blocks(n, dim):
        scores = z[rows] @ weight.T + bias
        total_loss += float(_row_losses(loss, scores, y[rows]).double().sum())
    final = total_loss / n
    if not math.isfinite(final):
        raise TrainingDiverged(f"task {task!r}: the final train loss is {final}")
    head = {"weight": weight, "bias": bias, "mean": mean, "std": std}
    return {k: v.cpu().numpy() for k, v in head.items()}, final
