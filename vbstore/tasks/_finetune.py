"""Training a linear head together with a backbone's last blocks, on stored prefix activations.

The recipe is the linear probes' (``._linear``) as torch trained them before they moved to
numpy (its draws from torch's generator, torch's autograd and AdamW), extended to the blocks
(fixed; a change bumps the fine-tuning ``op_version`` in ``vbstore.engine._finetune``):

- the blocks start from the parent weights and stay in eval mode (BatchNorm's running
  statistics and dropout as in a frozen forward; their affine parameters do train);
- with ``standardize`` (as the task's frozen probe: classification when asked, multilabel
  always), features are standardised with the train split's mean and std under the *parent*
  blocks (computed in float64 over one pass), kept fixed in the head; else the head holds mean
  0 and std 1;
- head weights drawn like ``torch.nn.Linear`` from a generator seeded by the run's seed, which
  also shuffles the minibatches; bias zero;
- one AdamW over the head (``lr``, weight decay on the weights only) and the blocks
  (``backbone_lr``, the same weight decay), both decayed to zero on one cosine over all steps.

Each step reads its minibatch's rows from the stored prefix (``features._prefix.PrefixRows``),
so memory holds one batch and the blocks, whatever the dataset size.

Imported only inside task calls, because it imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .._progress import progress
from ..errors import field_ref
from ._errors import TaskInputError, TrainingDiverged
from ._linear_recipe import Loss
from ._linear_torch import mean_loss, standardisation

# (activations of some rows, blocks) -> pooled features of those rows
Forward = Callable[[torch.Tensor, Sequence[torch.nn.Module]], torch.Tensor]


def pooled(rows: Any, blocks: Sequence[torch.nn.Module], forward: Forward, batch_size: int,
           device: Any) -> torch.Tensor:
    """(N, C) pooled features of every stored row through ``blocks``, no gradient."""
    out = []
    with torch.no_grad():
        for _, x in rows.batches(batch_size, device):
            # a copy: a pooled row can be a view (the class token) of the batch's whole output,
            # and keeping the view would keep every batch's tokens until the concatenation
            out.append(forward(x, blocks).float().clone(memory_format=torch.contiguous_format))
    return torch.cat(out)


@dataclass(frozen=True)
class Recipe:
    """The numbers of one fine-tuning run (the recipe itself is the module docstring's).

    Attributes:
        epochs: Passes over the train split.
        lr: Peak learning rate of the head.
        weight_decay: AdamW's, on the head's weights and on the blocks.
        batch_size: Rows per step (and per pass of the pooled features).
        backbone_lr: Peak learning rate of the blocks.
        seed: Seeds the head's init and the minibatch order.
        standardize: Standardise with the train split's statistics under the parent blocks
            (else mean 0, std 1: the identity), as the task's frozen probe does.
    """

    epochs: int
    lr: float
    weight_decay: float
    batch_size: int
    backbone_lr: float
    seed: int
    standardize: bool = True


def finetune(
    rows: Any,
    y: torch.Tensor,
    blocks: Sequence[torch.nn.Module],
    forward: Forward,
    recipe: Recipe,
    *,
    n_out: int,
    loss: Loss,
    task: str,
    device: Any = "cpu",
) -> tuple[dict[str, torch.Tensor], float, torch.Tensor]:
    """Train a linear head and ``blocks`` (modified in place) on stored prefix ``rows``.

    Args:
        rows: The train split's prefix activations (``PrefixRows``), row ``i`` for target ``i``.
        y: (N,) class indices for ``cross_entropy``; (N, K) 0/1 for ``binary_cross_entropy``.
        blocks: The trainable blocks, on ``device``.
        forward: Pooled features of a batch of activations through the blocks.
        recipe: Epochs, learning rates, batch and seed.

    Returns:
        (head, final loss over the whole train split, the split's pooled features under the
        trained blocks); the head holds ``weight``, ``bias``, ``mean`` and ``std`` as
        ``._linear`` writes them, so the task evaluates it unchanged.

    Raises:
        TaskInputError: the targets do not match the rows.
        TrainingDiverged: the weights or the loss stopped being finite.
    """
    n = len(rows)
    epochs, lr, batch_size = recipe.epochs, recipe.lr, recipe.batch_size
    if len(y) != n:
        raise TaskInputError(f"{len(y)} targets for {n} stored prefix rows")
    y = y.to(device)
    generator = torch.Generator(device="cpu").manual_seed(recipe.seed)
    params = [p for block in blocks for p in block.parameters()]
    for block in blocks:
        block.eval()
    first = pooled(rows, blocks, forward, batch_size, device).cpu()
    if recipe.standardize:
        mean, std = standardisation(first)
    else:
        mean, std = torch.zeros(first.shape[1]), torch.ones(first.shape[1])
    mean, std = mean.to(device), std.to(device)
    dim = mean.shape[0]
    bound = 1.0 / math.sqrt(dim)
    weight = ((torch.rand(n_out, dim, generator=generator) * 2 - 1) * bound).to(device)
    weight.requires_grad_(True)
    bias = torch.zeros(n_out, device=device, requires_grad=True)
    for p in params:
        p.requires_grad_(True)
    optimiser = torch.optim.AdamW(
        [{"params": [weight], "weight_decay": recipe.weight_decay},
         {"params": [bias], "weight_decay": 0.0},
         {"params": params, "weight_decay": recipe.weight_decay, "lr": recipe.backbone_lr}],
        lr=lr,
    )
    batch = min(batch_size, n)
    total = epochs * math.ceil(n / batch)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda step: 0.5 * (1.0 + math.cos(math.pi * step / total)))
    with progress(f"fine-tuning {task}: {len(blocks)} blocks and a head", epochs,
                  "epoch") as shown:
        for epoch in range(epochs):
            order = torch.randperm(n, generator=generator)
            for start in range(0, n, batch):
                # sorted: the memory map reads forward; the loss is a mean, so order is moot
                picked = order[start:start + batch].sort().values
                optimiser.zero_grad(set_to_none=True)
                z = (forward(rows.rows(picked, device), blocks) - mean) / std
                step_loss = mean_loss(loss, z @ weight.T + bias, y[picked.to(device)])
                step_loss.backward()
                optimiser.step()
                schedule.step()
            if not all(torch.isfinite(p).all() for p in (weight, bias, *params)):
                raise TrainingDiverged(
                    f"task {task!r}: fine-tuned weights became NaN/Inf in epoch {epoch + 1}",
                    hint=f"lower {field_ref('backbone_lr')} (now {recipe.backbone_lr:g}) or lr "
                         f"(now {lr:g})")
            if shown.active:
                shown.update(1, loss=float(step_loss.detach()))
    for p in params:
        p.requires_grad_(False)
    head = {"weight": weight.detach(), "bias": bias.detach(), "mean": mean, "std": std}
    feats = pooled(rows, blocks, forward, batch_size, device)
    with torch.no_grad():
        final = float(mean_loss(loss, ((feats - mean) / std) @ head["weight"].T + head["bias"], y))
    if not math.isfinite(final):
        raise TrainingDiverged(f"task {task!r}: the final fine-tuning loss is {final}")
    return head, final, feats
