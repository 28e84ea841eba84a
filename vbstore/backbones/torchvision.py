"""torchvision classification architectures, intermediate blocks through forward hooks.

Blocks are the natural stages of each family: ResNet ``layer1..4``, RegNet trunk blocks,
ConvNeXt and Swin stages, EfficientNet/MobileNet ``features`` entries, DenseNet dense blocks,
and every encoder layer of a ViT (tokens normalized by the final ``encoder.ln``).
"""

from __future__ import annotations

from typing import Any

import torch
import torchvision.models as tvm
from torchvision.models.vision_transformer import interpolate_embeddings

from ..errors import field_ref
from ..store import tensor_identity
from ._base import Backbone, LayerOut
from ._blocks import BlockSplit
from ._cfg import BackboneCfg
from ._errors import InvalidSpec, UnknownBackbone
from ._fetch import url_file
from ._hooks import run_hooked, to_layer
from ._request import BuildRequest
from ._weights import load_strict, read_state_dict, seeded, weights_record

# classifier heads: never on the feature path, so a checkpoint's head may differ in size
_HEADS = ("fc.", "heads.", "head.", "classifier.")


def _blocks(
    model: torch.nn.Module, arch: str
) -> tuple[list[torch.nn.Module], str, torch.nn.Module | None]:
    """The modules ``layers`` indexes, their output layout, and the token norm (ViT)."""
    if isinstance(model, tvm.VisionTransformer):
        return list(model.encoder.layers), "tokens", model.encoder.ln
    if isinstance(model, tvm.ResNet):
        return [model.layer1, model.layer2, model.layer3, model.layer4], "nchw", None
    if isinstance(model, tvm.RegNet):
        return list(model.trunk_output.children()), "nchw", None
    if isinstance(model, tvm.ConvNeXt):
        return [model.features[i] for i in (1, 3, 5, 7)], "nchw", None
    if isinstance(model, tvm.SwinTransformer):
        return [model.features[i] for i in (1, 3, 5, 7)], "nhwc", None
    if isinstance(model, (tvm.EfficientNet, tvm.MobileNetV2, tvm.MobileNetV3)):
        return list(model.features), "nchw", None
    if isinstance(model, tvm.DenseNet):
        return (
            [m for n, m in model.features.named_children() if n.startswith("denseblock")],
            "nchw",
            None,
        )
    raise InvalidSpec(
        f"torchvision:{arch}",
        f"the torchvision adapter does not know the blocks of {type(model).__name__}",
        hint=f"try timm:{arch}, or wrap the module in CustomBackbone(feature_fn=...)",
    )


def _cfg_from(weights_enum: Any) -> BackboneCfg:
    if weights_enum is None:
        return BackboneCfg(interpolation="bilinear")
    transform = weights_enum.transforms()
    return BackboneCfg(
        input_size=int(transform.crop_size[0]),
        resize=int(transform.resize_size[0]),
        crop="center",
        mean=tuple(transform.mean),
        std=tuple(transform.std),
        interpolation=transform.interpolation.value,
    )


class TorchvisionBackbone(Backbone):
    """A torchvision model; ``layers`` index its stages (CNNs) or encoder layers (ViT)."""

    source = "torchvision"

    def __init__(self, model: torch.nn.Module, cfg: BackboneCfg, *, arch: str) -> None:
        blocks, layout, norm = _blocks(model, arch)
        is_vit = layout == "tokens"
        super().__init__(
            model,
            cfg,
            arch=arch,
            has_cls_token=is_vit,
            num_prefix_tokens=1 if is_vit else 0,
            patch_size=getattr(model, "patch_size", None) if is_vit else None,
        )
        self._blocks, self._layout, self._norm = blocks, layout, norm

    @property
    def num_blocks(self) -> int:
        return len(self._blocks)

    def block_split(self) -> BlockSplit:
        # the blocks layers index; run_prefix stops the hooked forward at the first trainable
        return BlockSplit(self._blocks, self._layout, self._norm, indexes_layers=True)

    def _forward(self, images: torch.Tensor, indices: tuple[int, ...]) -> dict[int, LayerOut]:
        raw = run_hooked(self.module, self._blocks, indices, images)
        return {
            i: to_layer(
                raw[i],
                self._layout,
                num_prefix_tokens=self.num_prefix_tokens,
                has_cls_token=self.has_cls_token,
                norm=self._norm,
            )
            for i in indices
        }


def _weights_enum(arch: str, tag: str | None) -> Any:
    try:
        enum = tvm.get_model_weights(arch)
    except (ValueError, KeyError):
        return None
    if tag is None or tag == "DEFAULT":
        return enum.DEFAULT
    try:
        return enum[tag]
    except KeyError:
        raise UnknownBackbone(
            tag,
            f"torchvision:{arch} has no weights {tag!r}",
            hint=f"known: {', '.join(w.name for w in enum)}",
        ) from None


def build(request: BuildRequest) -> TorchvisionBackbone:
    """Build ``torchvision:ARCH[@WEIGHTS_ENUM_NAME]`` for ``request``."""
    arch, choice = request.spec.arch, request.weights
    if arch not in tvm.list_models(module=tvm):
        raise UnknownBackbone(
            arch,
            f"torchvision has no classification model {arch!r}",
            hint=_suggest(arch, tvm.list_models(module=tvm)),
        )
    enum = _weights_enum(arch, choice.tag if choice.kind == "pretrained" else None)
    cfg = _cfg_from(enum)
    is_vit = arch.startswith("vit_")
    size = request.input_size or cfg.input_size
    kwargs: dict[str, Any] = {"image_size": size} if is_vit else {}
    state = None
    if choice.kind == "random":
        with seeded(choice.seed or 0):
            model = tvm.get_model(arch, weights=None, **kwargs)
        tensor_hash = tensor_identity(model.state_dict())
    else:
        if choice.kind == "pretrained":
            if enum is None:
                raise UnknownBackbone(
                    arch,
                    f"torchvision:{arch} has no pretrained weights",
                    hint=f"use {field_ref('weights', 'random')} or {field_ref('weights', 'PATH')}",
                )
            kwargs["num_classes"] = len(enum.meta["categories"])
            path = url_file(enum.url, what=f"pretrained weights for torchvision:{arch} ({enum})")
        else:
            assert choice.path is not None  # parse_weights sets it for a checkpoint
            path = choice.path
        tensors = read_state_dict(path)
        tensor_hash = tensor_identity(tensors)  # before any loader can touch them
        state = dict(tensors)
        if is_vit and "encoder.pos_embedding" in state:
            patch = int(arch.split("_")[-1])
            state = interpolate_embeddings(size, patch, state)
        with seeded(0):  # overwritten below; seeded so even a failure is reproducible
            model = tvm.get_model(arch, weights=None, **kwargs)
        load_strict(model, state, where=str(path), ignorable=_HEADS)
    backbone = TorchvisionBackbone(model, cfg.with_input_size(request.input_size), arch=arch)
    upstream = f"torchvision:{type(enum).__name__}.{enum.name}" if enum is not None else None
    backbone.weights = weights_record(
        choice,
        tensor_hash,
        upstream=upstream,
        revision=enum.url if enum is not None else None,
    )
    return backbone


def _suggest(arch: str, known: list[str]) -> str:
    """Names that exist: torchvision's closest, and timm's model of that name only when timm
    has one."""
    import difflib  # a suggestion, on the error path only

    close = difflib.get_close_matches(arch, known, n=3)
    hint = (f"did you mean {', '.join('torchvision:' + c for c in close)}?" if close
            else "see torchvision.models.list_models()")
    try:
        import timm  # only to check that the alternative exists
    except ImportError:
        return hint
    if timm.list_models(arch):
        hint += f" (timm:{arch} exists too)"
    return hint
