"""``CustomBackbone``: any torch module as a backbone, its geometry read from one dummy pass.

The module's output (or ``feature_fn(module, images)``'s) is read as features:

* ``(B, C, H, W)`` — a dense map (a CNN stage);
* ``(B, N, C)`` — tokens: optional prefix tokens (class, registers) then a square patch grid;
* a list/tuple of those from ``feature_fn`` — one entry per block, so ``layers`` can pick any
  of them from the same single call.

Where the shape alone cannot say how (tokens that are not a square grid, a flat ``(B, C)``
vector, a tuple), it refuses with :class:`AmbiguousBackbone` naming the argument to pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from .._budget import check_input_size
from ..records import WeightsRecord
from ..store import tensor_identity
from ._base import Backbone, LayerOut
from ._cfg import BackboneCfg
from ._errors import AmbiguousBackbone

# Any, not nn.Module: the function calls the user's own module's methods, unknown to torch's stubs
FeatureFn = Callable[[Any, torch.Tensor], Any]


def _square(n: int) -> int | None:
    root = math.isqrt(n) if n > 0 else 0
    return root if root * root == n and root > 0 else None


class CustomBackbone(Backbone):
    """Wrap a module as a backbone.

    ```python
    backbone = CustomBackbone(my_vit, BackboneCfg(input_size=224), name="my_vit", patch_size=16,
                              feature_fn=lambda m, x: m.get_intermediate_layers(x, n=12))
    ```

    Args:
        module: the network; its weights identity is the hash of its ``state_dict()``.
        preprocess: the :class:`BackboneCfg` its inputs need (default: ImageNet, 224 px), or a
            torchvision weights transform (``weights.transforms()``), read into one.
        name: the architecture name recorded for it.
        patch_size: ViT patch size; lets token outputs carry any number of prefix tokens and
            non-square inputs.
        has_cls_token: whether token 0 is a class token (needed when the token count alone
            does not tell).
        feature_fn: ``feature_fn(module, images)`` returning the feature tensor, or one tensor
            per block; needed when ``module(images)`` is not already a feature tensor.
        block_split: ``block_split(module)`` returning a :class:`BlockSplit` (its blocks, in
            order, whose last output is the last layer), so ``--finetune-blocks`` can train the
            last ones; without it the backbone cannot be fine-tuned.

    Raises:
        AmbiguousBackbone: the output cannot be read as features without one more argument.
    """

    source = "custom"

    def __init__(
        self,
        module: torch.nn.Module,
        preprocess: BackboneCfg | Any = None,
        *,
        name: str = "custom",
        patch_size: int | None = None,
        has_cls_token: bool | None = None,
        feature_fn: FeatureFn | None = None,
        block_split: Callable[[Any], Any] | None = None,
    ) -> None:
        if preprocess is None:
            cfg = BackboneCfg()
        elif isinstance(preprocess, BackboneCfg):
            cfg = preprocess
        else:
            cfg = BackboneCfg.from_transform(preprocess)
        self._feature_fn = feature_fn
        self._block_split = block_split
        size = cfg.input_size
        check_input_size(size, patch_size=patch_size)  # the probe below is a forward pass
        module.eval()
        with torch.inference_mode():
            outputs = self._outputs(
                module, torch.zeros(1, 3, size, size, device=_device_of(module))
            )
        layouts = [self._layout(out, size, patch_size, has_cls_token) for out in outputs]
        prefixes = {prefix for kind, prefix in layouts if kind == "tokens"}
        if len(prefixes) > 1:
            raise AmbiguousBackbone(
                f"{name}: blocks have different prefix token counts {sorted(prefixes)}",
                "feature_fn=",
                "returning tokens with the same prefix in every block",
            )
        prefix = prefixes.pop() if prefixes else 0
        cls = bool(has_cls_token) if has_cls_token is not None else prefix >= 1
        grid = next(
            (outputs[i].shape[1] - prefix for i, (k, _) in enumerate(layouts) if k == "tokens"),
            None,
        )
        side = _square(grid) if grid else None
        if patch_size is None and side and size % side == 0:
            patch_size = size // side
        super().__init__(
            module,
            cfg,
            arch=name,
            has_cls_token=cls,
            patch_size=patch_size,
            num_prefix_tokens=prefix,
        )
        self._layouts = layouts
        self.weights = WeightsRecord.identify(tensor_identity(module.state_dict()), "checkpoint")

    def _outputs(self, module: torch.nn.Module, images: torch.Tensor) -> list[torch.Tensor]:
        raw = self._feature_fn(module, images) if self._feature_fn else module(images)
        if isinstance(raw, torch.Tensor):
            outputs = [raw]
        elif (
            isinstance(raw, (list, tuple))
            and self._feature_fn
            and raw
            and all(isinstance(t, torch.Tensor) for t in raw)
        ):
            outputs = list(raw)
        else:
            raise AmbiguousBackbone(
                f"the module returns {type(raw).__name__}, not a feature tensor",
                "feature_fn=",
                "returning a (B, C, H, W) or (B, N, C) tensor, or a list of them",
            )
        return outputs

    @staticmethod
    def _layout(
        out: torch.Tensor, size: int, patch_size: int | None, has_cls: bool | None
    ) -> tuple[str, int]:
        if out.ndim == 4:
            # the dummy input is square, so a channels-first map is square too: (B,H,W,C) is not
            if out.shape[2] != out.shape[3]:
                raise AmbiguousBackbone(
                    f"output {tuple(out.shape)} is not (B, C, H, W) (channels last?)",
                    "feature_fn=",
                    "returning (B, C, H, W)",
                )
            return "nchw", 0
        if out.ndim == 2:
            raise AmbiguousBackbone(
                f"output {tuple(out.shape)} is a flat vector with no spatial map",
                "feature_fn=",
                "returning patch tokens or a feature map",
            )
        if out.ndim != 3:
            raise AmbiguousBackbone(
                f"output {tuple(out.shape)} is neither (B,C,H,W) nor (B,N,C)", "feature_fn="
            )
        n = int(out.shape[1])
        if patch_size is not None:
            grid = (size // patch_size) ** 2
            prefix = n - grid
            # more prefix tokens than patches: the patch size is wrong, these are not registers
            if prefix < 0 or prefix >= grid or (has_cls and prefix < 1):
                raise AmbiguousBackbone(
                    f"{n} tokens do not fit a {size // patch_size}x{size // patch_size} grid "
                    f"for patch_size={patch_size}",
                    "patch_size=",
                    "the model's real patch size",
                )
            return "tokens", prefix
        if has_cls:
            if _square(n - 1) is None:
                raise AmbiguousBackbone(
                    f"{n - 1} patch tokens after the class token are not a square grid",
                    "patch_size=",
                )
            return "tokens", 1
        if _square(n) is None:
            message = f"{n} tokens are not a square grid: class or register tokens?"
            if has_cls is None:
                raise AmbiguousBackbone(
                    message, "has_cls_token=", "True if token 0 is a class token; or patch_size="
                )
            raise AmbiguousBackbone(message, "patch_size=")
        return "tokens", 0

    @property
    def num_blocks(self) -> int:
        return len(self._layouts)

    def block_split(self) -> Any:
        return self._block_split(self.module) if self._block_split is not None else None

    def _grid(self, height: int, width: int, count: int) -> tuple[int, int]:
        if (
            self.patch_size is not None
            and (height // self.patch_size) * (width // self.patch_size) == count
        ):
            return height // self.patch_size, width // self.patch_size
        side = _square(count)
        if side is None:
            raise AmbiguousBackbone(
                f"{count} patch tokens for a {height}x{width} input", "patch_size="
            )
        return side, side

    def _forward(self, images: torch.Tensor, indices: tuple[int, ...]) -> dict[int, LayerOut]:
        outputs = self._outputs(self.module, images)
        result = {}
        for index in indices:
            out = outputs[index]
            if self._layouts[index][0] == "nchw":
                result[index] = LayerOut(out)
                continue
            patches = out[:, self.num_prefix_tokens :]
            gh, gw = self._grid(images.shape[2], images.shape[3], patches.shape[1])
            dense = patches.transpose(1, 2).reshape(out.shape[0], out.shape[2], gh, gw)
            result[index] = LayerOut(dense, out[:, 0] if self.has_cls_token else None)
        return result


def _device_of(module: torch.nn.Module) -> torch.device:
    for tensor in module.parameters():
        return tensor.device
    return torch.device("cpu")
