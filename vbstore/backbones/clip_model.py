"""The backbone a registered CLIP loader builds (:mod:`._clip_loaders`): its image embedding as
features, its tokenizer and text tower for the zero-shot tasks.

A loader's model is a black box with ``encode_image`` and ``encode_text``: there is one block,
whose pooled (``cls``) feature is ``encode_image(images)`` and whose dense map is that vector
as a 1x1 map (no patch grid is exposed through the contract).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ..errors import field_ref
from ..store import tensor_identity
from ._base import Backbone, LayerOut
from ._cfg import BackboneCfg
from ._errors import InvalidSpec
from ._request import BuildRequest
from ._weights import seeded, weights_record

_IGNORED_STEPS = ("ToTensor", "PILToTensor", "ConvertImageDtype")


class ClipModelBackbone(Backbone):
    """A CLIP-like model from a loader: ``encode_image`` is the feature, ``encode_text`` the
    text tower."""

    module: Any  # the model's own methods (encode_image...) are unknown to nn.Module's stubs

    def __init__(self, model: Any, cfg: BackboneCfg, tokenizer: Any, *, source: str,
                 arch: str) -> None:
        super().__init__(model, cfg, arch=arch, has_cls_token=True, source=source)
        self._tokenizer = tokenizer

    @property
    def num_blocks(self) -> int:
        return 1

    def _forward(self, images: torch.Tensor, indices: tuple[int, ...]) -> dict[int, LayerOut]:
        embedding = self.module.encode_image(images).float()
        return {0: LayerOut(embedding[:, :, None, None], embedding)}

    def encode_text(self, texts: list[str], *, normalize: bool = False) -> torch.Tensor:
        """Text embeddings (B, D) through the loader's tokenizer and the model's text tower."""
        tokens = self._tokenizer(list(texts))
        if hasattr(tokens, "to"):
            tokens = tokens.to(self.device)
        self.module.eval()
        with torch.inference_mode():
            out = self.module.encode_text(tokens).float()
        return F.normalize(out, dim=-1) if normalize else out


def cfg_from_transform(transform: Any, spec: str) -> BackboneCfg:
    """The :class:`BackboneCfg` that preprocesses images as ``transform`` does.

    Raises:
        InvalidSpec: a step vbstore cannot reproduce exactly (it would compute other features).
    """
    if isinstance(transform, BackboneCfg):
        return transform
    steps = list(getattr(transform, "transforms", [transform]))
    fields: dict[str, Any] = {"mean": (0.0, 0.0, 0.0), "std": (1.0, 1.0, 1.0)}
    for step in steps:
        kind = type(step).__name__
        if kind == "Resize" and getattr(step, "max_size", None) is None:
            size = step.size if isinstance(step.size, int) else list(step.size)
            if isinstance(size, list) and len(size) == 1:
                size = size[0]
            if isinstance(size, int):
                fields["resize"] = size
            elif size[0] == size[1]:
                fields.update(resize=size[0], input_size=size[0], crop="squash")
            else:
                raise InvalidSpec(spec, f"its transform resizes to {size[0]}x{size[1]}, not a "
                                  "square", hint="return a vbstore.backbones.BackboneCfg")
            fields["interpolation"] = step.interpolation.value
        elif kind == "CenterCrop":
            crop = step.size if isinstance(step.size, int) else step.size[0]
            fields["input_size"] = int(crop)
        elif kind == "Normalize":
            fields["mean"], fields["std"] = tuple(step.mean), tuple(step.std)
        elif kind in _IGNORED_STEPS or "rgb" in getattr(step, "__name__", "").lower():
            continue  # vbstore's decode converts to RGB and scales to [0, 1]
        else:
            raise InvalidSpec(spec, f"its transform has a step vbstore cannot reproduce ({kind})",
                              hint="have the loader return a vbstore.backbones.BackboneCfg as "
                                   "the transform")
    if "resize" not in fields:
        raise InvalidSpec(spec, "its transform does not resize", hint="return a BackboneCfg")
    fields.setdefault("input_size", fields["resize"])
    if fields.get("crop") != "squash" and fields["input_size"] > fields["resize"]:
        raise InvalidSpec(spec, "its transform crops more than it resizes",
                          hint="return a vbstore.backbones.BackboneCfg")
    return BackboneCfg(**fields)


def build_from_loader(name: str, load: Any, request: BuildRequest) -> ClipModelBackbone:
    """Build ``NAME:MODEL@TAG`` through the loader ``load``.

    Raises:
        InvalidSpec: no tag for pretrained weights, a loader that fails or returns something
            else than a CLIP-like model, or a transform vbstore cannot reproduce.
    """
    arch, choice = request.spec.arch, request.weights
    spec = f"{name}:{arch}"
    if choice.kind == "pretrained" and not choice.tag:
        raise InvalidSpec(spec, "a model type's weights are named by a tag",
                          hint=f"e.g. {spec}@PRETRAINED, or {field_ref('weights', 'random')}")
    pretrained = {"pretrained": choice.tag, "checkpoint": str(choice.path)}.get(choice.kind)
    try:
        with seeded(choice.seed or 0):
            model, transform, tokenizer = load(model_name=arch, pretrained=pretrained,
                                               cache_dir=None, device="cpu")
    except (OSError, RuntimeError, ValueError, KeyError) as exc:
        raise InvalidSpec(spec, f"its loader failed: {str(exc).splitlines()[0][:200]}") from exc
    missing = [m for m in ("encode_image", "encode_text") if not callable(getattr(model, m, None))]
    if missing or not isinstance(model, torch.nn.Module) or not callable(tokenizer):
        raise InvalidSpec(spec, "its loader did not return (model, transform, tokenizer) with "
                          "a module that has encode_image and encode_text",
                          hint=f"missing: {', '.join(missing) or 'a module or tokenizer'}")
    cfg = cfg_from_transform(transform, spec).with_input_size(request.input_size)
    backbone = ClipModelBackbone(model.eval(), cfg, tokenizer, source=name, arch=arch)
    upstream = f"{spec}@{choice.tag}" if choice.kind == "pretrained" else None
    backbone.weights = weights_record(choice, tensor_identity(model.state_dict()),
                                      upstream=upstream)
    return backbone
