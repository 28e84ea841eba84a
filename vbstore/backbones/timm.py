"""timm models by name (``timm:ARCH`` or ``timm:ARCH.TAG``), layers via ``forward_intermediates``.

``layers`` index ``model.feature_info``, which is what timm's ``forward_intermediates`` indexes:
every block of a ViT, every stage of a CNN (for ResNets, the stem activation is block 0).
Pretrained weights come from the Hugging Face Hub (cache first, see ``_fetch``) and are handed
to timm as a state dict, so timm's own conversion and position-embedding resampling apply.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import timm
import torch

from ..errors import field_ref
from ..store import tensor_identity
from ._base import Backbone, LayerOut
from ._blocks import BlockSplit
from ._cfg import BackboneCfg
from ._errors import CheckpointError, UnknownBackbone, WeightsUnavailable
from ._fetch import hf_file, url_file
from ._hooks import run_hooked, to_layer
from ._request import BuildRequest
from ._weights import read_state_dict, seeded, weights_record

_CROP_MODES = {"center": "center", "squash": "squash", "border": "center"}


def _cfg_from(pretrained_cfg: dict[str, Any]) -> BackboneCfg:
    size = int(pretrained_cfg.get("input_size", (3, 224, 224))[-1])
    crop_pct = float(pretrained_cfg.get("crop_pct") or 0.875)
    mode = _CROP_MODES.get(pretrained_cfg.get("crop_mode", "center"), "center")
    return BackboneCfg(
        input_size=size,
        resize=size if mode == "squash" else max(size, math.floor(size / crop_pct)),
        crop=mode,
        mean=tuple(pretrained_cfg.get("mean", (0.485, 0.456, 0.406))),
        std=tuple(pretrained_cfg.get("std", (0.229, 0.224, 0.225))),
        interpolation=pretrained_cfg.get("interpolation") or "bicubic",
    )


class TimmBackbone(Backbone):
    """A timm model; ``layers`` index ``model.feature_info``."""

    source = "timm"
    # Any: the model's own methods (timm's) are unknown to nn.Module's stubs
    module: Any

    def __init__(self, model: Any, cfg: BackboneCfg, *, arch: str) -> None:
        self._native = hasattr(model, "forward_intermediates")
        params = inspect.signature(model.forward_intermediates).parameters if self._native else {}
        self._tokens = "return_prefix_tokens" in params
        prefix = int(getattr(model, "num_prefix_tokens", 0) or 0)
        has_cls = (
            bool(getattr(model, "has_class_token", getattr(model, "cls_token", None) is not None))
            and prefix > 0
        )
        patch = getattr(getattr(model, "patch_embed", None), "patch_size", None)
        patch = int(patch[0]) if isinstance(patch, (tuple, list)) else patch
        default = None if has_cls or patch else "gap"
        super().__init__(
            model,
            cfg,
            arch=arch,
            has_cls_token=has_cls,
            patch_size=patch,
            num_prefix_tokens=prefix,
            default_pooling=default,
        )
        self._info = list(model.feature_info)

    @property
    def num_blocks(self) -> int:
        return len(self._info)

    def _static_geometry(self) -> dict[str, Any] | None:
        dims = [int(info["num_chs"]) for info in self._info]
        strides = [int(info["reduction"]) for info in self._info]
        return {"embed_dim": dims[-1], "layer_dims": dims, "layer_strides": strides}

    def block_split(self) -> BlockSplit | None:
        """The model's block sequence whose last entry makes the last layer: ``blocks`` (ViTs,
        EfficientNets: every stage), ``stages`` (ConvNeXt and friends) or ResNet's
        ``layer1..4``; token outputs take the final ``norm``. None for another layout."""
        last = self._info[-1]["module"]
        for name in ("blocks", "stages"):
            seq = getattr(self.module, name, None)
            if isinstance(seq, (torch.nn.Sequential, torch.nn.ModuleList)) and \
                    last == f"{name}.{len(seq) - 1}":
                return self._split(list(seq))
        layers = [getattr(self.module, f"layer{i}", None) for i in range(1, 5)]
        if last == "layer4" and all(isinstance(layer, torch.nn.Module) for layer in layers):
            return self._split([layer for layer in layers if layer is not None])
        return None

    def _split(self, blocks: list[torch.nn.Module]) -> BlockSplit:
        # a family this does not describe (Swin's channels-last stages) fails check_split
        named = {id(m): n for n, m in self.module.named_modules()}
        # layer i is block i's output when feature_info names the blocks one for one (ViTs,
        # ConvNeXt stages; not an EfficientNet's 5 levels over 7 stages, nor ResNet's stem)
        one_for_one = [info["module"] for info in self._info] == [named.get(id(b))
                                                                  for b in blocks]
        if self.patch_size:  # tokens after the final norm, as forward_intermediates(norm=True)
            return BlockSplit(blocks, "tokens", getattr(self.module, "norm", None),
                              indexes_layers=one_for_one)
        return BlockSplit(blocks, "nchw", indexes_layers=one_for_one)

    def _forward(self, images: torch.Tensor, indices: tuple[int, ...]) -> dict[int, LayerOut]:
        if not self._native:
            blocks = [self.module.get_submodule(info["module"]) for info in self._info]
            raw = run_hooked(self.module, blocks, indices, images)
            return {i: self._from_hook(raw[i], i) for i in indices}
        kwargs: dict[str, Any] = {
            "indices": list(indices),
            "norm": True,
            "stop_early": True,
            "output_fmt": "NCHW",
            "intermediates_only": True,
        }
        if self._tokens and self.num_prefix_tokens:  # some timm models fail asking for none
            kwargs["return_prefix_tokens"] = True
        outs = self.module.forward_intermediates(images, **kwargs)
        result = {}
        for index, out in zip(indices, outs, strict=True):  # timm returns them in block order
            if isinstance(out, tuple):
                dense, prefix = out
                cls = (
                    prefix[:, 0]
                    if self.has_cls_token and prefix is not None and prefix.shape[1]
                    else None
                )
                result[index] = LayerOut(dense, cls)
            else:
                result[index] = LayerOut(out)
        return result

    def _from_hook(self, output: torch.Tensor, index: int) -> LayerOut:
        if output.ndim == 3:
            norm = getattr(self.module, "norm", None)
            return to_layer(
                output,
                "tokens",
                has_cls_token=self.has_cls_token,
                num_prefix_tokens=self.num_prefix_tokens,
                norm=norm,
            )
        # feature_info knows the width, which tells channels-last stages (Swin, MambaOut) apart
        channels = int(self._info[index]["num_chs"])
        last = output.shape[1] != channels and output.shape[-1] == channels
        return to_layer(output, "nhwc" if last else "nchw")


def _weights_file(pretrained_cfg: dict[str, Any], arch: str) -> tuple[Any, str, str | None]:
    what = f"pretrained weights for timm:{arch}"
    hub_id = pretrained_cfg.get("hf_hub_id")
    if hub_id:
        repo, _, revision = hub_id.partition("@")
        custom = pretrained_cfg.get("hf_hub_filename")
        names = [custom] if custom else ["model.safetensors", "pytorch_model.bin"]
        path, resolved = hf_file(repo, names, what=what, revision=revision or None)
        return path, f"hf://{repo}", resolved or revision or None
    url = pretrained_cfg.get("url")
    if url and not pretrained_cfg.get("custom_load") and url.endswith((".pth", ".pt", ".bin")):
        return url_file(url, what=what), url, None
    raise WeightsUnavailable(
        what,
        "timm lists no weights file vbstore can read",
        hint=f"pass a converted checkpoint with {field_ref('weights', 'PATH')}, or "
             f"{field_ref('weights', 'random')}",
    )


def build(request: BuildRequest) -> TimmBackbone:
    """Build ``timm:ARCH[.TAG]`` for ``request``."""
    choice = request.weights
    arch = request.spec.arch
    if choice.kind == "pretrained" and choice.tag:
        if "." in arch:
            raise UnknownBackbone(
                choice.tag,
                f"timm:{arch} already names its tag, and {field_ref('weights')} names another "
                f"({choice.tag!r})",
                hint=f"give the tag once; {field_ref('weights')} also takes default, random or "
                     "a checkpoint path",
            )
        arch = f"{arch}.{choice.tag}"
    base = arch.split(".")[0]
    if not timm.is_model(base):
        raise UnknownBackbone(
            arch,
            f"timm has no model {base!r}",
            hint=f"search with: python -c \"import timm; print(timm.list_models('*{base[:8]}*'))\"",
        )
    try:
        pretrained_cfg = timm.models.get_pretrained_cfg(arch)
    except RuntimeError:  # timm raises, rather than returning None, for an unknown tag
        pretrained_cfg = None
    if pretrained_cfg is None and "." in arch:
        tags = [name.split(".", 1)[1] for name in timm.list_pretrained(f"{base}.*")]
        raise UnknownBackbone(
            arch, f"timm has no weights {arch!r}", hint=f"known tags: {', '.join(tags) or 'none'}"
        )
    cfg_dict = pretrained_cfg.to_dict() if pretrained_cfg is not None else {}
    kwargs: dict[str, Any] = {}
    if request.input_size and cfg_dict.get("fixed_input_size"):
        kwargs["img_size"] = (
            request.input_size
        )  # ViT-like: position embeddings are built for a size
    upstream = revision = None
    if choice.kind == "random":
        with seeded(choice.seed or 0):
            # Any: typed nn.Module, but read for timm's own pretrained_cfg below
            model: Any = timm.create_model(arch, pretrained=False, **kwargs)
        tensor_hash = tensor_identity(model.state_dict())
    else:
        if choice.kind == "pretrained":
            if pretrained_cfg is None:
                raise WeightsUnavailable(
                    f"pretrained weights for timm:{arch}", "timm lists none for this model"
                )
            path, upstream, revision = _weights_file(cfg_dict, arch)
        else:
            path = choice.path
        tensors = read_state_dict(path)
        tensor_hash = tensor_identity(tensors)  # before any loader can touch them
        model = _load(arch, tensors, cfg_dict, kwargs, str(path))
    backbone = TimmBackbone(
        model, _cfg_from(model.pretrained_cfg).with_input_size(request.input_size), arch=arch
    )
    backbone.weights = weights_record(choice, tensor_hash, upstream=upstream, revision=revision)
    return backbone


def _load(
    arch: str, tensors: dict[str, Any], cfg_dict: dict[str, Any], kwargs: dict[str, Any], where: str
) -> Any:
    """Create the model with ``tensors`` loaded strictly through timm's pretrained path."""
    classifier = cfg_dict.get("classifier") or "head"
    classifier = classifier[0] if isinstance(classifier, (tuple, list)) else classifier
    head = tensors.get(f"{classifier}.weight")
    # size the head from the checkpoint (0 = headless) so timm keeps its load strict
    num_classes = int(head.shape[0]) if head is not None and head.ndim >= 1 else 0
    overlay = {"state_dict": dict(tensors), "num_classes": num_classes}
    try:
        with seeded(0):
            model = timm.create_model(
                arch,
                pretrained=True,
                num_classes=num_classes,
                pretrained_cfg_overlay=overlay,
                **kwargs,
            )
    except (RuntimeError, KeyError, ValueError) as exc:
        raise CheckpointError(
            where,
            f"does not fit timm:{arch} ({str(exc).splitlines()[0][:300]})",
            hint="check that the spec names the architecture the checkpoint was trained with",
        ) from exc
    # the overlay would keep a second reference to every tensor alive on the model
    for cfg in {
        id(c): c
        for c in (getattr(model, "pretrained_cfg", None), getattr(model, "default_cfg", None))
        if isinstance(c, dict)
    }.values():
        cfg.pop("state_dict", None)
    return model
