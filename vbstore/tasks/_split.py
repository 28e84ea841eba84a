"""What a dense task reads: a split of dense feature maps and per-pixel targets, in batches.

A dense task never sees the whole split at once. The engine hands it a :class:`DenseSplit`
that streams batches from float16 feature packs and decodes targets on the fly, so memory does
not grow with the dataset. Tests and the Python API can use :class:`TensorSplit`, the same
interface over tensors already in memory.

Targets come in the task's ``target_kind``, already resized and cropped exactly as the backbone's
input was (nearest-neighbour, so labels stay labels and invalid pixels stay invalid):

| target_kind  | tensor               | meaning                                                   |
|--------------|----------------------|-----------------------------------------------------------|
| `label_map`  | (B, H, W) int64      | raw stored values (palette indices of a label PNG)        |
| `depth_map`  | (B, 1, H, W) float32 | metres; 0 where invalid                                   |
| `normal_map` | (B, 3, H, W) float32 | direction as stored; the zero vector where invalid        |
| `scalar_map` | (B, 1, H, W) float32 | magnitude as stored, divided by ``target_scale``; no mask |
| `image`      | (B, 3, H, W) float32 | the RGB the backbone saw, in [0, 1], before normalisation |
| `boxes`      | (B, N, 6) float32    | ``x0, y0, x1, y1, class, difficult`` in input pixels;     |
|              |                      | rows of -1 pad images with fewer than N boxes              |
| `instances`  | (B, N, 6 + H*W)      | a box row, then its instance mask (1 inside) flattened     |

Boxes go through the image's resize and crop exactly (scaled, shifted, clipped to the crop);
a box the crop leaves without area is dropped (``PackSplit.boxes_dropped`` counts them).

```python
for batch in split.batches(8, shuffle=True, seed=epoch):
    logits = head(batch.feats[-1])            # (B, C, h, w) float32 on split.device
    loss = criterion(upsample(logits, split.target_hw), batch.target)
```
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

from ..data import get_target_kind, list_target_kinds

if TYPE_CHECKING:
    # torch: only when a split's tensors are made
    import torch

# Local imports: torch loads when a split's tensors are made.

# the built-in per-pixel kinds (the registry, vbstore.data.get_target_kind, knows a user's too)
DENSE_TARGETS = tuple(k for k in list_target_kinds() if get_target_kind(k).per_pixel)
BOX_TARGETS = ("boxes", "instances")  # rows of boxes, padded per batch


class DenseBatch(NamedTuple):
    """One batch of a dense split.

    Attributes:
        feats: One (B, C_l, h, w) float32 tensor per requested layer, in ``split.layers`` order.
        target: The targets of ``target_kind`` (see the module docstring), on the same device.
        index: (B,) int64 positions of these rows in the split (manifest order).
    """

    feats: list[torch.Tensor]
    target: torch.Tensor
    index: torch.Tensor  # type: ignore[assignment]  # a field may shadow tuple.index


class Trainable(NamedTuple):
    """The backbone blocks a split's features are computed through, trained with the head
    (``--finetune-blocks``; docs/finetune.md).

    Attributes:
        params: The blocks' parameters (their gradients flow through ``DenseBatch.feats``).
        lr: Their peak learning rate (``--backbone-lr``), on the head's schedule.
    """

    params: Sequence[torch.nn.Parameter]
    lr: float


@runtime_checkable
class DenseSplit(Protocol):
    """A split a dense task trains or is scored on.

    A split may also carry ``trainable`` (a :class:`Trainable`): its features come through
    backbone blocks computed per batch, which the dense recipe trains with the head. Without it
    (the frozen splits: packs, :class:`TensorSplit`) the features are fixed.

    Attributes:
        layers: The requested layer indices, the order of ``DenseBatch.feats``.
        channels: Feature width of each layer.
        grid_hw: The patch grid (h, w) of the features.
        target_hw: (H, W) of the targets: the backbone's input size.
        target_kind: The kind of ``DenseBatch.target``.
        device: Where batches are delivered and the head should run.
    """

    layers: tuple[int, ...]
    channels: tuple[int, ...]
    grid_hw: tuple[int, int]
    target_hw: tuple[int, int]
    target_kind: str
    device: torch.device

    def __len__(self) -> int: ...

    def batches(self, batch_size: int, *, shuffle: bool = False, seed: int = 0
                ) -> Iterator[DenseBatch]:
        """Batches covering every row once.

        ``shuffle`` orders rows by a generator seeded with ``seed``.
        """
        ...


class TensorSplit:
    """A :class:`DenseSplit` over tensors in memory (tests, notebooks, small data).

    ```python
    split = TensorSplit([feats], targets, target_kind="label_map", layers=(-1,))
    boxes = TensorSplit([feats], padded_rows, target_kind="boxes", target_hw=(224, 224))
    head, train_metrics = task.fit_split(split, {"num_classes": 3}, seed=0)
    ```
    """

    def __init__(self, feats: Sequence[torch.Tensor], target: torch.Tensor, *, target_kind: str,
                 layers: Sequence[int] | None = None, device: str | torch.device = "cpu",
                 target_hw: tuple[int, int] | None = None) -> None:
        # torch: only when a split's tensors are made
        import torch

        if target_kind not in list_target_kinds() or not get_target_kind(target_kind).per_pixel:
            raise ValueError(f"target_kind must be a per-pixel kind ({', '.join(DENSE_TARGETS)}"
                             f"...), not {target_kind!r}")
        feats = [torch.as_tensor(f) for f in feats]
        if not feats or any(f.ndim != 4 or len(f) != len(target) for f in feats):
            raise ValueError("feats must be (N, C, h, w) tensors with one row per target")
        self._feats = feats
        self._target = target
        self.layers = tuple(layers) if layers is not None else tuple(range(-len(feats), 0))
        self.channels = tuple(int(f.shape[1]) for f in feats)
        self.grid_hw = (int(feats[0].shape[2]), int(feats[0].shape[3]))
        if target_kind in BOX_TARGETS and target_hw is None:
            raise ValueError("box targets need target_hw: the input size the boxes are in")
        self.target_hw = (tuple(target_hw) if target_hw is not None  # type: ignore[assignment]
                          else (int(target.shape[-2]), int(target.shape[-1])))
        self.target_kind = target_kind
        self.device = torch.device(device)

    def __len__(self) -> int:
        return len(self._target)

    def batches(self, batch_size: int, *, shuffle: bool = False, seed: int = 0
                ) -> Iterator[DenseBatch]:
        # torch: only when a split's tensors are made
        import torch

        order = (torch.randperm(len(self), generator=torch.Generator().manual_seed(seed))
                 if shuffle else torch.arange(len(self)))
        for start in range(0, len(self), batch_size):
            rows = order[start:start + batch_size]
            yield DenseBatch([f[rows].to(self.device, torch.float32) for f in self._feats],
                             self._target[rows].to(self.device), rows)

    def feats(self, positions: list[int]) -> list[torch.Tensor]:
        """The feature maps of rows ``positions``, one (B, C, h, w) float32 tensor per layer."""
        import torch

        rows = torch.as_tensor(positions, dtype=torch.long)
        return [f[rows].to(self.device, torch.float32) for f in self._feats]
