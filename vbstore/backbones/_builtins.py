"""The built-in sources, registered exactly as a plugin would register them.

Each function here is a source (``prefix=True``): ``NAME:ARCH`` in a spec. Its adapter module
(which imports torch and the source library) is imported only when a backbone is built.
"""

from __future__ import annotations

from typing import Any

from ._errors import MissingExtra
from ._names import DINOV2_CATALOG
from ._registry import register_backbone

# Local imports: each adapter module imports its library (torch, torchvision, timm, open_clip) at
# its top, so it loads only when that source builds a backbone.


@register_backbone(source="torchvision", prefix=True, tags=True)
def torchvision(request: Any) -> Any:
    """torchvision classification models (resnet, convnext, efficientnet, vit_b_16, ...)."""
    from .torchvision import build

    return build(request)


@register_backbone(source="timm", prefix=True)
def timm(request: Any) -> Any:
    """Any timm model name, with its own .tag (DINOv2 variants included)."""
    from .timm import build

    return build(request)


@register_backbone(source="dinov2", prefix=True, default_pooling="cls", catalog=DINOV2_CATALOG)
def dinov2(request: Any) -> Any:
    """DINOv2 from torch.hub at a pinned facebookresearch/dinov2 commit."""
    from .dinov2 import build

    return build(request)


@register_backbone(
    source="open_clip",
    prefix=True,
    tags=True,
    extra="clip",
    extra_module="open_clip",
    default_pooling="cls",
)
def open_clip(request: Any) -> Any:
    """OpenCLIP image tower (text tower for zero-shot): MODEL@PRETRAINED_TAG."""
    try:
        from .open_clip import build
    except ImportError as exc:
        if exc.name in ("open_clip", "open_clip_torch"):
            raise MissingExtra("open_clip", "clip") from exc
        raise
    return build(request)
