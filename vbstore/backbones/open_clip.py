"""OpenCLIP: ``open_clip:MODEL@PRETRAINED_TAG``, the image tower for features, the text tower for
zero-shot.

``cls`` pooling gives the class token after ``ln_post``, before the projection, by default;
``use_projection=True`` makes the last block's ``cls`` pooling the projected image embedding
(``encode_image``), the one text embeddings live with. It is part of the record's ``params``.
Only ViT image towers are supported (ResNet and timm towers are not).
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import open_clip
import torch

from ..errors import MissingDependency
from ..store import tensor_identity
from ._base import Backbone, LayerOut
from ._blocks import BlockSplit
from ._cfg import BackboneCfg
from ._errors import CheckpointError, InvalidSpec, UnknownBackbone, WeightsUnavailable
from ._fetch import hf_file, url_file
from ._request import BuildRequest
from ._weights import read_state_dict, seeded, weights_record

_MODES = {"shortest": "center", "squash": "squash", "longest": "center"}


def _cfg_from(visual: Any, pretrained_cfg: dict[str, Any]) -> BackboneCfg:
    pre = dict(getattr(visual, "preprocess_cfg", {}) or {})
    pre.update(
        {
            k: v
            for k, v in pretrained_cfg.items()
            if k in ("mean", "std", "interpolation", "resize_mode") and v
        }
    )
    size = pre.get("size", visual.image_size)
    size = int(size[0] if isinstance(size, (tuple, list)) else size)
    return BackboneCfg(
        input_size=size,
        resize=size,
        crop=_MODES.get(pre.get("resize_mode", "shortest"), "center"),
        mean=tuple(pre.get("mean", open_clip.OPENAI_DATASET_MEAN)),
        std=tuple(pre.get("std", open_clip.OPENAI_DATASET_STD)),
        interpolation=pre.get("interpolation", "bicubic"),
    )


class OpenClipBackbone(Backbone):
    """An OpenCLIP model; ``layers`` index the image tower's transformer blocks."""

    source = "open_clip"
    # Any: the model's own methods (open_clip's) are unknown to nn.Module's stubs
    module: Any

    def __init__(
        self, model: Any, cfg: BackboneCfg, *, arch: str, use_projection: bool
    ) -> None:
        visual = model.visual
        if not isinstance(visual, open_clip.transformer.VisionTransformer):
            raise InvalidSpec(
                f"open_clip:{arch}",
                f"its image tower is a {type(visual).__name__}, not a ViT",
                hint="the open_clip adapter supports ViT towers; try the timm equivalent",
            )
        super().__init__(
            model,
            cfg,
            arch=arch,
            has_cls_token=True,
            num_prefix_tokens=1,
            patch_size=int(visual.patch_size[0]),
            params={"use_projection": use_projection},
        )
        self.use_projection = use_projection
        self._tokenizer: Any = None

    @property
    def num_blocks(self) -> int:
        return len(self.module.visual.transformer.resblocks)

    def _static_geometry(self) -> dict[str, Any]:
        visual = self.module.visual
        width = int(visual.transformer.width)
        embed = int(visual.output_dim) if self.use_projection else width
        return {
            "embed_dim": embed,
            "layer_dims": [width] * self.num_blocks,
            "layer_strides": [self.patch_size] * self.num_blocks,
            "projection_dim": int(visual.output_dim),
        }

    def block_split(self) -> BlockSplit:
        # ln_post is what normalize_intermediates applies to every block's tokens
        visual = self.module.visual
        return BlockSplit(list(visual.transformer.resblocks), "tokens", visual.ln_post,
                          indexes_layers=True)

    def _forward(self, images: torch.Tensor, indices: tuple[int, ...]) -> dict[int, LayerOut]:
        last = self.num_blocks - 1
        # the projected embedding needs the full pass; otherwise stop after the deepest block
        final = self.use_projection and last in indices
        out = self.module.visual.forward_intermediates(
            images,
            indices=list(indices),
            stop_early=not final,
            normalize_intermediates=True,
            intermediates_only=not final,
            output_fmt="NCHW",
            output_extra_tokens=True,
        )
        result = {}
        for index, dense, prefix in zip(
            indices, out["image_intermediates"], out["image_intermediates_prefix"], strict=True
        ):
            cls = out["image_features"] if final and index == last else prefix[:, 0]
            result[index] = LayerOut(dense, cls)
        return result

    def encode_text(self, texts: list[str], *, normalize: bool = False) -> torch.Tensor:
        """Text embeddings (B, projection_dim) from the text tower, with the model's tokenizer.

        Raises:
            WeightsUnavailable: the model's tokenizer must be downloaded and cannot be.
        """
        if self._tokenizer is None:
            try:
                self._tokenizer = open_clip.get_tokenizer(self.arch)
            except (OSError, ConnectionError) as exc:
                raise WeightsUnavailable(
                    f"the tokenizer of open_clip:{self.arch}", str(exc)[:200]
                ) from exc
        tokens = self._tokenizer(list(texts)).to(self.device)
        self.module.eval()
        with torch.inference_mode():
            return self.module.encode_text(tokens, normalize=normalize)


    def generate_captions(self, images: torch.Tensor, decoding: Mapping[str, Any]) -> list[str]:
        """CoCa's captions (see :meth:`Backbone.generate_captions`).

        Raises:
            MissingDependency: open_clip's ``generate`` needs transformers, not installed (or a
                release whose beam search open_clip cannot import).
        """
        if isinstance(self.module, open_clip.CoCa) and not open_clip.coca_model._has_transformers:
            raise MissingDependency("transformers 4.x (before 4.57: open_clip's CoCa.generate "
                                    "imports its beam search)", "captioning")
        return super().generate_captions(images, decoding)


def _weights_file(arch: str, tag: str) -> tuple[Any, str, str | None, dict[str, Any]]:
    cfg = open_clip.get_pretrained_cfg(arch, tag)
    if not cfg:
        tags = open_clip.list_pretrained_tags_by_model(arch)
        raise UnknownBackbone(
            tag,
            f"open_clip:{arch} has no pretrained tag {tag!r}",
            hint=f"known: {', '.join(tags) or 'none'}",
        )
    what = f"pretrained weights for open_clip:{arch}@{tag}"
    if cfg.get("hf_hub"):
        # "org/repo/" means open_clip's default file name; prefer a safetensors twin like open_clip
        repo, filename = os.path.split(cfg["hf_hub"])
        filename = filename or "open_clip_pytorch_model.bin"
        names = [filename]
        if filename == "open_clip_pytorch_model.bin":
            names.insert(0, "open_clip_model.safetensors")
        elif filename.endswith((".bin", ".pth")):
            names.insert(0, filename[:-4] + ".safetensors")
        path, revision = hf_file(repo, names, what=what)
        return path, f"hf://{repo}", revision, cfg
    if cfg.get("url"):
        return url_file(cfg["url"], what=what), cfg["url"], None, cfg
    raise WeightsUnavailable(what, "open_clip lists no file for it")


# open_clip logs this whenever create_model gets pretrained=None, which vbstore always passes: it
# loads the weights itself (or was asked for random ones), so the line is never news
_EXPECTED = ("No pretrained weights loaded for model",)


@contextmanager
def _open_clip_logs(arch: str) -> Iterator[None]:
    """Hold what open_clip logs on the root logger while a model is made; afterwards say each
    message once, as a vbstore warning, unless it is one vbstore expects (:data:`_EXPECTED`)."""
    held: list[str] = []

    def hold(record: logging.LogRecord) -> bool:
        if "open_clip" not in record.pathname:
            return True
        held.append(record.getMessage())
        return False

    root = logging.getLogger()
    root.addFilter(hold)
    try:
        yield
    finally:
        root.removeFilter(hold)
    for message in dict.fromkeys(held):
        if not message.startswith(_EXPECTED):
            warnings.warn(f"open_clip:{arch}: open_clip says: {message}", stacklevel=3)


def build(request: BuildRequest) -> OpenClipBackbone:
    """Build ``open_clip:MODEL@TAG`` for ``request``."""
    arch, choice = request.spec.arch, request.weights
    if arch not in open_clip.list_models():
        raise UnknownBackbone(
            arch, f"open_clip has no model {arch!r}", hint="see open_clip.list_models()"
        )
    kwargs: dict[str, Any] = {"force_image_size": request.input_size} if request.input_size else {}
    pretrained_cfg: dict[str, Any] = {}
    upstream = revision = None
    if choice.kind == "random":
        with seeded(choice.seed or 0), _open_clip_logs(arch):
            model = open_clip.create_model(arch, pretrained=None, **kwargs)
        tensor_hash = tensor_identity(model.state_dict())
    else:
        if choice.kind == "pretrained":
            if choice.tag is None:
                tags = open_clip.list_pretrained_tags_by_model(arch)
                raise InvalidSpec(
                    f"open_clip:{arch}",
                    "open_clip models have no single default weights",
                    hint=f"name a tag, e.g. open_clip:{arch}@{tags[0] if tags else 'TAG'}"
                    + (
                        f" (known: {', '.join(tags[:8])}{', ...' if len(tags) > 8 else ''})"
                        if tags
                        else ""
                    ),
                )
            path, upstream, revision, pretrained_cfg = _weights_file(arch, choice.tag)
            kwargs["force_quick_gelu"] = bool(pretrained_cfg.get("quick_gelu", False))
        else:
            path = choice.path
        # open_clip reads the file again to load it: its loader converts checkpoint layouts
        tensor_hash = tensor_identity(read_state_dict(path))
        with seeded(0), _open_clip_logs(arch):
            model = open_clip.create_model(arch, pretrained=None, **kwargs)
        try:
            open_clip.load_checkpoint(model, str(path), strict=True)
        except (RuntimeError, KeyError, ValueError) as exc:
            raise CheckpointError(
                str(path), f"does not fit open_clip:{arch} ({str(exc).splitlines()[0][:300]})"
            ) from exc
    model.eval()
    cfg = _cfg_from(model.visual, pretrained_cfg).with_input_size(request.input_size)
    backbone = OpenClipBackbone(model, cfg, arch=arch, use_projection=request.use_projection)
    backbone.weights = weights_record(choice, tensor_hash, upstream=upstream, revision=revision)
    return backbone
