"""``test_pixels``: a backbone of hand-set filters, so tests can probe features that hold signal.

The random ``test_vit`` and ``test_cnn`` keep little of an image a linear probe can use, and no
pretrained weights can be fetched offline. ``test_pixels`` is the honest stand-in: nothing is
learned, every channel is a fixed function of the pixels that a reader can name. On a
``patch`` x ``patch`` grid (4 px by default), each cell holds

* ``local`` (block 0): its pixels, patchified (``pixel_unshuffle``) after a 3x3 filter bank on
  the normalised image — the RGB values, the luma Sobel gradients ``gx``, ``gy`` and the luma
  Laplacian, each divided by 8 so a full step is about 1 — and the pixel-wise energies
  ``gx^2``, ``gy^2``, ``gx*gy`` (the structure tensor) and ``|g|``: 10 values x ``patch^2``;
* ``context`` (block 1, the default): the cell's mean of the 10 pixel channels, their means
  over 3x3 and 7x7 cells and the whole image (what is around it, as a deep network's
  receptive field would see), the cell's position (x and y in [-1, 1], a ViT's position
  embedding in its plainest form), then block 0's channels.

``weights="default"`` sets the filter bank above (its weights record: origin ``fixed``, not
``pretrained``: nothing was learned or downloaded; upstream :data:`UPSTREAM` says what they are);
``weights="random"`` draws the same 3x3 bank at random (seeded, origin ``random``) and keeps the
fixed energies, pooling and positions; a checkpoint loads like any other. torch is imported
only when one is built.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ..errors import field_ref
from ._errors import InvalidSpec
from ._registry import register_backbone

# Local imports: torch (and the torch-bound custom module) load when the backbone is built, not
# when it is registered.

PATCH, SIZE = 4, 64
FILTERS = 6  # R, G, B, Sobel x, Sobel y, Laplacian (on luma)
PIXEL_CHANNELS = FILTERS + 4  # + gx^2, gy^2, gx*gy, |g|
CONTEXT_SCALES = (3, 7)  # neighbourhoods of cells averaged, besides the cell and the image
LOCAL_DIM = PIXEL_CHANNELS * PATCH * PATCH
CONTEXT_DIM = LOCAL_DIM + PIXEL_CHANNELS * (2 + len(CONTEXT_SCALES)) + 2
LUMA = (0.299, 0.587, 0.114)
UPSTREAM = ("vbstore:test_pixels (fixed filters, nothing learned: RGB, luma Sobel and "
            "Laplacian, structure tensor, cell/3x3/7x7/image means, position)")
REVISION = "1"


@cache
def _net() -> type:
    import torch
    import torch.nn.functional as F
    from torch import nn

    class PixelFilters(nn.Module):
        """A 3x3 filter bank, fixed energies, patchified pixels and pooled context."""

        def __init__(self, patch: int) -> None:
            super().__init__()
            self.patch = patch
            self.filters = nn.Conv2d(3, FILTERS, 3, padding=1, padding_mode="replicate",
                                     bias=False)

        @torch.no_grad()
        def set_fixed(self) -> None:
            """Write the hand-set bank: identity on RGB, then Sobel x/y and Laplacian on luma."""
            sobel_x = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]])
            laplace = torch.tensor([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]])
            luma = torch.tensor(LUMA).view(3, 1, 1)
            weight = torch.zeros(FILTERS, 3, 3, 3)
            for c in range(3):
                weight[c, c, 1, 1] = 1.0
            # image rows go down: Sobel y is the transpose, so a brighter row below is positive
            for k, kernel in enumerate((sobel_x, sobel_x.T, laplace)):
                weight[3 + k] = luma * kernel / 8.0
            self.filters.weight.copy_(weight)

        def pixel_features(self, x: torch.Tensor) -> torch.Tensor:
            f = self.filters(x)
            gx, gy = f[:, 3:4], f[:, 4:5]
            magnitude = torch.sqrt(gx * gx + gy * gy + 1e-12)
            return torch.cat([f, gx * gx, gy * gy, gx * gy, magnitude], dim=1)

        def forward_blocks(self, x: torch.Tensor) -> list[torch.Tensor]:
            pixels = self.pixel_features(x)
            local = F.pixel_unshuffle(pixels, self.patch)
            cell = F.avg_pool2d(pixels, self.patch)
            b, _, h, w = cell.shape
            around = [F.avg_pool2d(cell, k, stride=1, padding=k // 2, count_include_pad=False)
                      for k in CONTEXT_SCALES]
            whole = cell.mean(dim=(2, 3), keepdim=True).expand(-1, -1, h, w)
            ys = torch.linspace(-1.0, 1.0, h, device=x.device, dtype=x.dtype)
            xs = torch.linspace(-1.0, 1.0, w, device=x.device, dtype=x.dtype)
            grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")
            position = torch.stack([grid_x, grid_y]).expand(b, -1, -1, -1)
            context = torch.cat([cell, *around, whole, position, local], dim=1)
            return [local, context]

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.forward_blocks(x)[-1].mean(dim=(2, 3))

    return PixelFilters


@register_backbone(default_pooling="gap", embed_dim=CONTEXT_DIM, pretrained=True,
                   weights_origin="fixed", upstream=UPSTREAM, revision=REVISION)
def test_pixels(*, pretrained: bool = False, input_size: int | None = None) -> Any:  # noqa: PT028 - a backbone, not a pytest test
    """Fixed filters on a 4 px grid (pixels, gradients, context, position); 64 px by default."""
    from ._cfg import BackboneCfg
    from .custom import CustomBackbone

    size = input_size or SIZE
    if size % PATCH:
        raise InvalidSpec("test_pixels", f"input size {size} is not a multiple of its {PATCH} px "
                          "grid", hint=f"pass {field_ref('input_size')} "
                                       f"{size - size % PATCH or PATCH}")
    module = _net()(PATCH)
    if pretrained:
        module.set_fixed()
    cfg = BackboneCfg(input_size=size, resize=size, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5),
                      interpolation="bilinear")
    return CustomBackbone(module, cfg, name="test_pixels",
                          feature_fn=lambda m, x: m.forward_blocks(x))
