"""A linear head on standardised features, trained with AdamW: shared by the linear probes.

The recipe (fixed; a change bumps the tasks' ``op_version``):

- with ``standardize`` (the multi-label probe always; classification when asked), standardise
  each feature with the train split's mean and std (computed in float64; a constant feature
  gets std 1), stored in the head so evaluation applies the same map (without: mean 0, std 1);
- weights drawn like ``torch.nn.Linear`` (uniform in +-1/sqrt(C)), bias zero, from a local
  generator seeded by the run's seed, which also shuffles the minibatches;
- AdamW, weight decay on the weights only, learning rate decayed to zero on a cosine over all
  steps; ``batch_size >= N`` is full-batch gradient descent.

Imported only inside task calls, because it imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import torch
import torch.nn.functional as F

from .._budget import check_memory
from .._progress import progress
from . import _checks
from ._errors import TaskInputError, TrainingDiverged
from ._metrics import row_blocks

Loss = Literal["cross_entropy", "binary_cross_entropy"]

# A feature whose train std is below this is treated as constant: dividing by ~0 would turn
# float noise into huge inputs.
_MIN_STD = 1e-6


def standardisation(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-feature (mean, std) of ``x`` as float32, computed in float64."""
    x64 = x.to(torch.float64)
    mean = x64.mean(dim=0)
    std = x64.std(dim=0, unbiased=False)
    std = torch.where(std < _MIN_STD, torch.ones_like(std), std)
    return mean.to(torch.float32), std.to(torch.float32)


def logits(head: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Scores (N, K) of a linear head on raw features (standardised here with its stats)."""
    out = torch.empty(len(x), head["weight"].shape[0], dtype=torch.float32, device=x.device)
    for rows in row_blocks(len(x), x.shape[1]):
        z = (x[rows] - head["mean"]) / head["std"]
        out[rows] = z @ head["weight"].T + head["bias"]
    return out


def _loss(kind: Loss, scores: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if kind == "cross_entropy":
        return F.cross_entropy(scores, y)
    return F.binary_cross_entropy_with_logits(scores, y)


def train(
    x: torch.Tensor,
    y: torch.Tensor,
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
) -> tuple[dict[str, torch.Tensor], float]:
    """Fit a linear head on (x, y).

    Args:
        x: (N, C) float32 features (raw; standardised here).
        y: (N,) int64 class indices for ``cross_entropy``; (N, K) float 0/1 for
            ``binary_cross_entropy``.
        n_out: Output size (classes or labels).
        loss: Which loss.
        epochs: Passes over the data.
        lr: Peak AdamW learning rate.
        weight_decay: Decoupled weight decay on the weights.
        batch_size: Minibatch size; clipped to N.
        seed: Seeds weight init and shuffling.
        task: Task name, for error messages.
        standardize: Standardise the features with the train statistics (else the head holds
            mean 0 and std 1, the identity).

    Returns:
        (head, final loss over the whole train split). The head holds ``weight`` (K, C),
        ``bias`` (K,), ``mean`` (C,), ``std`` (C,), all float32.

    Raises:
        TrainingDiverged: the weights or the loss stopped being finite.
        OverBudget: the head and its logits would not fit the memory limit.
    """
    n, dim = x.shape
    # weights with their gradient and Adam's moments, and the logits of the whole split (the
    # final loss is taken over all of it)
    check_memory(f"task {task!r}: a linear head of {n_out} outputs on {n} samples",
                 4 * n_out * (4 * (dim + 1) + 2 * n))
    device = x.device
    generator = torch.Generator(device="cpu").manual_seed(seed)
    if standardize:
        mean, std = standardisation(x)
    else:
        mean, std = torch.zeros(dim), torch.ones(dim)
    mean, std = mean.to(device), std.to(device)
    z = (x - mean) / std

    bound = 1.0 / math.sqrt(dim)
    weight = ((torch.rand(n_out, dim, generator=generator) * 2 - 1) * bound).to(device)
    weight.requires_grad_(True)
    bias = torch.zeros(n_out, device=device, requires_grad=True)
    batch = min(batch_size, n)
    steps_per_epoch = math.ceil(n / batch)
    total = epochs * steps_per_epoch
    step = _adamw([(weight, weight_decay), (bias, 0.0)], lr,
                  lambda step: 0.5 * (1.0 + math.cos(math.pi * step / total)))
    with progress(f"training {task} head", epochs, "epoch") as shown:
        for epoch in range(epochs):
            # Full-batch needs no shuffle; skipping it keeps the generator's draws identical.
            order = torch.randperm(n, generator=generator).to(device) if batch < n else None
            for start in range(0, n, batch):
                rows = order[start : start + batch] if order is not None else slice(None)
                weight.grad = bias.grad = None
                step_loss = _loss(loss, z[rows] @ weight.T + bias, y[rows])
                step_loss.backward()
                step()
            if not (torch.isfinite(weight).all() and torch.isfinite(bias).all()):
                raise TrainingDiverged(
                    f"task {task!r}: the head's weights became NaN/Inf in epoch {epoch + 1}",
                    hint=f"lower lr (now {lr:g})",
                )
            if shown.active:  # the last step's loss: read only when it is shown
                shown.update(1, loss=float(step_loss.detach()))
    head = {
        "weight": weight.detach(),
        "bias": bias.detach(),
        "mean": mean,
        "std": std,
    }
    with torch.no_grad():
        final = float(_loss(loss, logits(head, x), y))
    if not math.isfinite(final):
        raise TrainingDiverged(f"task {task!r}: the final train loss is {final}")
    return head, final


def _adamw(groups: list[tuple[torch.Tensor, float]], lr: float,
           schedule: Callable[[int], float]) -> Callable[[], None]:
    """One step of AdamW over ``groups`` (each a tensor and its weight decay), its learning
    rate ``lr * schedule(step)`` as ``LambdaLR`` sets it, step counted from 0.

    On the CPU it is written out, op for op, as ``torch.optim.AdamW`` steps a CPU tensor (its
    single-tensor path): ``torch.optim`` imports ``torch._dynamo`` the first time it steps
    (1-3 s, more than training a head on stored features takes), and the numbers must stay
    those of the recipe. ``tests/tasks/test_task_linear.py`` checks the two agree bit for bit.
    Elsewhere ``torch.optim.AdamW`` steps (its multi-tensor path on an accelerator).
    """
    beta1, beta2, eps = 0.9, 0.999, 1e-8  # AdamW's defaults
    if any(t.device.type != "cpu" for t, _ in groups):
        optimiser = torch.optim.AdamW(
            [{"params": [t], "weight_decay": decay} for t, decay in groups], lr=lr)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimiser, schedule)

        def torch_step() -> None:
            optimiser.step()
            scheduler.step()

        return torch_step
    moments = [(torch.zeros_like(t), torch.zeros_like(t)) for t, _ in groups]
    count = torch.tensor(0.0, dtype=torch.float32)  # as AdamW counts: a float32 tensor
    done = 0

    @torch.no_grad()
    def cpu_step() -> None:
        nonlocal done
        rate = lr * schedule(done)
        done += 1
        count.add_(1)
        steps = count.item()
        for (param, decay), (exp_avg, exp_avg_sq) in zip(groups, moments, strict=True):
            grad = param.grad
            if grad is None:  # as torch.optim steps only tensors with a gradient
                continue
            if decay != 0:
                param.mul_(1 - rate * decay)
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            step_size = rate / (1 - beta1**steps)
            denom = (exp_avg_sq.sqrt() / (1 - beta2**steps) ** 0.5).add_(eps)
            param.addcdiv_(exp_avg, denom, value=-step_size)

    return cpu_step


def check_head(
    head: dict[str, torch.Tensor], task: str, dim: int, device: torch.device
) -> dict[str, torch.Tensor]:
    """The four float32 tensors of a linear head on ``device``, checked against a feature size.

    Raises:
        TaskInputError: a missing tensor, or a feature size the head was not trained on.
    """
    weight = _checks.head_tensor(head, "weight", task, 2, (1, dim))
    out = {"weight": weight}
    for key, size in (("bias", weight.shape[0]), ("mean", dim), ("std", dim)):
        value = _checks.head_tensor(head, key, task, 1)
        if value.shape[0] != size:
            raise TaskInputError(
                f"head tensor {key!r} has {value.shape[0]} entries, expected {size}"
            )
        out[key] = value
    # A head loaded from safetensors is on CPU; the features may be on an accelerator.
    return {key: value.to(device=device, dtype=torch.float32) for key, value in out.items()}
