"""The dense recipe: heads, probe3d's schedule, streamed training and streamed scoring.

Imported only inside task calls, because it imports torch. See :mod:`._dense` for the recipe.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from .._budget import check_memory
from .._progress import progress
from ..errors import UsageError, field_ref
from ._errors import TaskInputError, TrainingDiverged

if TYPE_CHECKING:
    from ._split import DenseSplit


class DenseTask(Protocol):
    """What the recipe asks of a dense task: its name and hooks (``._dense.DenseTask``
    declares them; declared here so the recipe imports no task). Targets and predictions are
    a shape's own (tensors; boxes' lists and grid outputs)."""

    @property
    def name(self) -> str: ...

    def prepare_batch(self, split: Any, batch: Any, params: dict[str, Any], role: str) -> Any: ...

    def _outputs(self, params: dict[str, Any]) -> int: ...

    def _init_head(self, output: nn.Conv2d, params: dict[str, Any]) -> None: ...

    def _predict(self, raw: Any, size: tuple[int, int], params: dict[str, Any]) -> Any: ...

    def _loss(self, pred: Any, target: Any, params: dict[str, Any]) -> torch.Tensor | None: ...

    def _scorer(self, params: dict[str, Any]) -> Any: ...

    def _scorer_bytes(self, params: dict[str, Any]) -> int: ...

    def _no_signal(self, target: Any, params: dict[str, Any]) -> str | None: ...


class LinearHead(nn.Module):
    """A 1x1 convolution on the last layer's patch grid."""

    def __init__(self, channels: tuple[int, ...], n_out: int, hidden: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels[-1], n_out, kernel_size=1)
        assert self.conv.bias is not None  # Conv2d's default bias=True
        nn.init.zeros_(self.conv.bias)

    def forward(self, feats: list[torch.Tensor]) -> torch.Tensor:
        return self.conv(feats[-1])


class _Residual(nn.Module):
    """DPT's residual conv unit: x + conv(relu(conv(relu(x))))."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(dim, dim, 3, padding=1)
        self.conv2 = nn.Conv2d(dim, dim, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.relu(self.conv1(F.relu(x))))


class DptHead(nn.Module):
    """A light DPT-style head (Ranftl et al., 2021): each layer projected to ``hidden`` by a
    1x1 conv, fused from the deepest layer to the shallowest with residual conv units, the
    running map upsampled 2x before each fusion up to 4x the patch grid (DPT's finest
    reassembly scale); then a 3x3 conv, ReLU and a 1x1 conv to the outputs. Layers are fused
    in ``split.layers`` order, the last one first.
    """

    def __init__(self, channels: tuple[int, ...], n_out: int, hidden: int) -> None:
        super().__init__()
        self.project = nn.ModuleList(nn.Conv2d(c, hidden, 1) for c in channels)
        self.refine = nn.ModuleList(_Residual(hidden) for _ in channels)
        self.fuse = nn.ModuleList(_Residual(hidden) for _ in channels[:-1])
        self.out = nn.Sequential(nn.Conv2d(hidden, hidden, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(hidden, n_out, 1))

    def forward(self, feats: list[torch.Tensor]) -> torch.Tensor:
        x = self.refine[-1](self.project[-1](feats[-1]))
        finest = 4 * feats[-1].shape[-1]
        for i in range(len(feats) - 2, -1, -1):
            if x.shape[-1] < finest:
                x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
            skip = self.refine[i](self.project[i](feats[i]))
            skip = F.interpolate(skip, size=x.shape[-2:], mode="bilinear", align_corners=False)
            x = self.fuse[i](x + skip)
        return self.out(x)


def build_head(params: dict[str, Any], channels: tuple[int, ...], n_out: int, seed: int,
               task: str) -> nn.Module:
    """The head ``params["head"]`` names, initialised from ``seed`` alone.

    Raises:
        UsageError: ``dpt`` with fewer than two layers.
    """
    if params["head"] == "dpt" and len(channels) < 2:
        raise UsageError(
            f"task {task!r}: the dpt head fuses several layers but the features have "
            f"{len(channels)}",
            hint=f"extract with several {field_ref('layers')} (e.g. {field_ref('layers')} 2 5 8 "
                 "11), or use head=linear",
        )
    kind = LinearHead if params["head"] == "linear" else DptHead
    # torch's own initialisers draw from the global generator: fork it so the caller's RNG
    # state is untouched and the head depends on the seed only.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return kind(channels, n_out, params["hidden_dim"])


def output_layer(head: nn.Module) -> nn.Conv2d:
    """The 1x1 convolution that gives a head's outputs (its bias sets their starting values)."""
    layer = head.conv if isinstance(head, LinearHead) else list(head.modules())[-1]
    assert isinstance(layer, nn.Conv2d)  # both heads end in a 1x1 convolution
    return layer


def lr_factor(step: int, total: int, warmup: float) -> float:
    """The learning-rate multiplier of optimiser step ``step`` (0-based) of ``total``:
    linear warm-up over the first ``warmup`` steps, then a cosine from 1 to 0."""
    if step < warmup:
        return min(1.0, (step + 1) / warmup)
    span = max(total - warmup, 1.0)
    return 0.5 * (1.0 + math.cos(math.pi * min(step - warmup, span) / span))


def _check_geometry(split: DenseSplit, role: str) -> None:
    (h, w), (th, tw) = split.grid_hw, split.target_hw
    # aspect ratios that differ by more than one patch: the target cannot cover the grid
    if abs(th / h - tw / w) * min(h, w) > max(th / h, tw / w):
        raise TaskInputError(
            f"{role} targets are {th}x{tw} but the feature grid is {h}x{w}: another aspect",
            hint="resize targets exactly as the backbone's input (the engine does)",
        )


def check_budget(task: DenseTask, params: dict[str, Any], split: DenseSplit, n_out: int,
                 training: bool) -> None:
    """Refuse a head whose output count (a class count, from a flag, the data or a head) would
    allocate past the memory limit: its weights, a batch's predictions at the target size (with
    their gradient and Adam's moments when training) and the task's scorer.

    Raises:
        OverBudget: naming the outputs, the estimate and ``VBSTORE_MAX_MEMORY``.
    """
    th, tw = split.target_hw
    width = params["hidden_dim"] if params["head"] == "dpt" else split.channels[-1]
    weights = 4 * n_out * (width + 1) * (4 if training else 1)  # + grad, Adam's two moments
    batch = 4 * params["batch_size"] * n_out * th * tw * (3 if training else 2)
    check_memory(f"task {task.name!r}: a head of {n_out} outputs on {th}x{tw} targets "
                 f"(batch {params['batch_size']})", weights + batch + task._scorer_bytes(params))


def _state_outputs(state: dict[str, torch.Tensor]) -> int | None:
    """The output count of a stored head (linear's conv, dpt's last conv), from its shape."""
    weight = state.get("conv.weight", state.get("out.2.weight"))
    return int(weight.shape[0]) if weight is not None and weight.ndim >= 1 else None


def _fitting(task: DenseTask, state: dict[str, torch.Tensor], split: DenseSplit,
             params: dict[str, Any]) -> int:
    """The output count ``params`` ask of a stored head, checked against the head's own and
    the memory budget before a head (or a scorer) of that size is built.

    Raises:
        TaskInputError: the head has another output count.
        OverBudget: the outputs would not fit the memory limit.
    """
    n_out, stored = task._outputs(params), _state_outputs(state)
    if stored is not None and stored != n_out:
        raise TaskInputError(
            f"the head does not fit: it has {stored} outputs, task {task.name!r} with these "
            f"params needs {n_out}",
            hint="evaluate with the params (num_classes...) the head was trained with")
    check_budget(task, params, split, n_out, training=False)
    return n_out


def fit(task: DenseTask, split: DenseSplit, params: dict[str, Any], seed: int
        ) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """Train ``task``'s head on ``split``; returns (head state, {"train_loss": ...}).

    Raises:
        UsageError: a head the features cannot feed.
        TaskInputError: targets the task cannot learn from (every pixel invalid...).
        TrainingDiverged: the loss or the weights stopped being finite.
    """
    _check_geometry(split, "train")
    generator = torch.Generator().manual_seed(seed)
    n_out = task._outputs(params)
    check_budget(task, params, split, n_out, training=True)
    head = build_head(params, split.channels, n_out, seed, task.name)
    task._init_head(output_layer(head), params)
    head = head.to(split.device)
    # fine-tuning: the blocks the features come through train too, at their own peak rate on
    # the same schedule (docs/finetune.md); a frozen split's optimiser is the head's alone
    trainable = getattr(split, "trainable", None)
    blocks = list(trainable.params) if trainable is not None else []
    groups: list[dict[str, Any]] = [{"params": list(head.parameters())}]
    if trainable is not None:
        groups.append({"params": blocks, "lr": trainable.lr})
    for p in blocks:
        p.requires_grad_(True)
    optimiser = torch.optim.AdamW(groups, lr=params["lr"], weight_decay=params["weight_decay"])
    per_epoch = math.ceil(len(split) / params["batch_size"])
    total = params["epochs"] * per_epoch
    warmup = params["warmup_epochs"] * per_epoch
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda step: lr_factor(step, total, warmup))
    head.train()
    no_signal: str | None = None
    with progress(f"training {task.name} head", params["epochs"], "epoch") as shown:
        for epoch in range(params["epochs"]):
            order_seed = int(torch.randint(0, 2**62, (1,), generator=generator))
            loss_sum, rows, learned = 0.0, 0, 0
            for batch in split.batches(params["batch_size"], shuffle=True, seed=order_seed):
                target = task.prepare_batch(split, batch, params, "train")
                if epoch == 0 and no_signal != "":  # "" once any batch teaches something
                    no_signal = task._no_signal(target, params) or ""
                pred = task._predict(head(batch.feats), split.target_hw, params)
                loss = task._loss(pred, target, params)
                if loss is not None:
                    optimiser.zero_grad(set_to_none=True)
                    loss.backward()
                    value = float(loss.detach())
                    if not math.isfinite(value):
                        raise TrainingDiverged(
                            f"task {task.name!r}: the training loss became {value} in epoch "
                            f"{epoch + 1}", hint=f"lower lr (now {params['lr']:g})")
                    optimiser.step()
                    loss_sum += value * len(batch.index)
                    rows += len(batch.index)
                    learned += 1
                if learned:  # the schedule counts steps from the first optimiser step
                    schedule.step()
            if epoch == 0 and no_signal:
                raise TaskInputError(f"task {task.name!r}: {no_signal}")
            if not learned:
                raise TaskInputError(
                    f"task {task.name!r}: every pixel of the train split is invalid or ignored",
                    hint="check the targets (and target_scale / ignore_index)")
            if not all(torch.isfinite(p).all() for p in (*head.parameters(), *blocks)):
                raise TrainingDiverged(
                    f"task {task.name!r}: the head's weights became NaN/Inf in epoch {epoch + 1}",
                    hint=f"lower lr (now {params['lr']:g})" + (
                        f" or {field_ref('backbone_lr')} (now {trainable.lr:g})"
                        if trainable else ""))
            shown.update(1, loss=loss_sum / rows)
    for p in blocks:
        p.requires_grad_(False)
    return dict(head.state_dict()), {"train_loss": loss_sum / rows}


def evaluate(task: DenseTask, state: dict[str, torch.Tensor], split: DenseSplit,
             params: dict[str, Any]) -> dict[str, float]:
    """Score a fitted head on ``split``, every metric accumulated over the whole split.

    Raises:
        TaskInputError: a head that does not fit these features or this task.
        UndefinedMetric: a metric the split cannot define (every pixel invalid...).
    """
    _fitting(task, state, split, params)  # before the scorer allocates for the class count
    scorer = task._scorer(params)
    batches = math.ceil(len(split) / params["batch_size"])
    with progress(f"scoring {task.name}", batches, "batch") as shown:
        for _, target, pred in predictions(task, state, split, params, params["batch_size"]):
            scorer.update(pred, target)
            shown.update(1)
    return scorer.result()


def predictions(task: DenseTask, state: dict[str, torch.Tensor], split: DenseSplit,
                params: dict[str, Any], batch_size: int
                ) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(index, prepared target, prediction) per batch of ``split``, in manifest order.

    Raises:
        TaskInputError: a head that does not fit these features or this task.
    """
    _check_geometry(split, "eval")
    n_out = _fitting(task, state, split, params)
    head = build_head(params, split.channels, n_out, 0, task.name)
    try:
        head.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[-1].strip()
        raise TaskInputError(
            f"the head does not fit task {task.name!r} with head={params['head']} on "
            f"{len(split.channels)} layer(s) of {split.channels} channels: {first}",
            hint="evaluate with the backbone, layers and params the head was trained with",
        ) from None
    head = head.to(split.device).eval()
    with torch.no_grad():
        for batch in split.batches(batch_size):
            target = task.prepare_batch(split, batch, params, "eval")
            yield batch.index, target, task._predict(head(batch.feats), split.target_hw, params)
