"""The one interface every adapter implements: :class:`Backbone` and its ``extract``.

``extract`` returns, for every requested block, a dense map and a pooled vector, all from a
single forward pass::

    {
        "layers": {layer: {"dense": (B, C, H, W), "pooled": (B, C) | None, "grid_hw": (H, W)}},
        "dense": ..., "pooled": ..., "grid_hw": ...,   # the last requested layer, again
    }

``layer`` keys are exactly the values the caller passed (``-1`` stays ``-1``). Dense ViT maps
hold the patch tokens only (no class or register tokens) after the model's final norm, as
DINOv2's ``get_intermediate_layers(norm=True)`` does; CNN maps are raw stage outputs.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .._budget import check_input_size
from ..errors import UsageError
from ..records import WeightsRecord
from ._cfg import BackboneCfg, preprocess


@dataclass
class LayerOut:
    """One block's features as an adapter produces them (before pooling)."""

    dense: torch.Tensor
    cls: torch.Tensor | None = None


class Backbone(ABC):
    """A built backbone: a module, its preprocessing, its weights identity and ``extract``.

    Subclasses implement ``num_blocks`` and ``_forward``; they may override ``_static_geometry``
    to avoid the probing forward pass that otherwise measures layer widths and strides.

    Attributes:
        module: the torch module, in eval mode.
        cfg: the preprocessing this backbone expects.
        source: ``torchvision``, ``timm``, ``dinov2``, ``open_clip`` or ``custom``.
        arch: the architecture name within its source.
        params: adapter options that change features (``use_projection``); part of the record.
        revision: pinned upstream code revision (DINOv2's hub commit), else None.
        has_cls_token: whether ``pooling="cls"`` is available.
        patch_size: ViT patch size, None for CNNs.
        num_prefix_tokens: class + register tokens dropped from dense maps.
        default_pooling: ``cls`` for ViTs with a class token, ``mean`` for other token models,
            ``gap`` for CNNs.
        weights: the :class:`WeightsRecord`, set by whoever loaded the weights.
    """

    source = "custom"

    def __init__(
        self,
        module: torch.nn.Module,
        cfg: BackboneCfg,
        *,
        arch: str,
        has_cls_token: bool,
        patch_size: int | None = None,
        num_prefix_tokens: int = 0,
        default_pooling: str | None = None,
        params: dict[str, Any] | None = None,
        revision: str | None = None,
        source: str | None = None,
    ) -> None:
        self.module = module.eval()
        self.cfg = cfg
        self.arch = arch
        if source is not None:
            self.source = source
        self.has_cls_token = has_cls_token
        self.patch_size = patch_size
        self.num_prefix_tokens = num_prefix_tokens
        self.default_pooling = default_pooling or (
            "cls" if has_cls_token else ("mean" if patch_size else "gap")
        )
        self.params = dict(params or {})
        self.revision = revision
        self.weights: WeightsRecord | None = None
        self._spec_params: dict[str, Any] | None = None
        self._geometry: dict[str, Any] | None = None

    # -- what adapters implement -------------------------------------------------------------

    @property
    @abstractmethod
    def num_blocks(self) -> int:
        """How many blocks ``layers`` indexes into."""

    @abstractmethod
    def _forward(self, images: torch.Tensor, indices: tuple[int, ...]) -> dict[int, LayerOut]:
        """One forward pass returning the blocks at sorted, non-negative ``indices``."""

    def _static_geometry(self) -> dict[str, Any] | None:
        """Layer widths/strides known without a forward pass, or None to probe."""
        return None

    def block_split(self) -> Any:
        """How the last layer is made of blocks, for fine-tuning (a
        :class:`vbstore.backbones._blocks.BlockSplit`), or None: this family cannot be cut."""
        return None

    # -- the public interface ----------------------------------------------------------------

    @property
    def name(self) -> str:
        """A readable ``source:arch`` label (not a cache key: see :meth:`spec_params`)."""
        return self.arch if self.source == "custom" else f"{self.source}:{self.arch}"

    @property
    def poolings(self) -> tuple[str, ...]:
        """The pooling modes this backbone accepts."""
        return ("cls", "mean", "gap", "none") if self.has_cls_token else ("mean", "gap", "none")

    @property
    def device(self) -> torch.device:
        """Where the module's parameters live."""
        for tensor in self.module.parameters():
            return tensor.device
        return torch.device("cpu")

    @property
    def dtype(self) -> torch.dtype:
        """The floating dtype of the module's parameters (images are cast to it)."""
        for tensor in self.module.parameters():
            if tensor.is_floating_point():
                return tensor.dtype
        return torch.float32

    def to(self, device: str | torch.device) -> Backbone:
        """Move the module to ``device``; returns self."""
        self.module.to(device)
        return self

    def in_bfloat16(self) -> Backbone:
        """A copy whose weights are bfloat16 (this backbone's own weights stay untouched)."""
        # one deepcopy of the whole object: adapters keep references into the module (hooked
        # blocks), and deepcopy's memo makes them point into the copy, not the original
        twin = copy.deepcopy(self)
        twin.module.to(torch.bfloat16)
        return twin

    def preprocess(self, image: Any) -> torch.Tensor:
        """A PIL image (or HxWx3 uint8 array) as a normalized CHW float tensor for this model."""
        return preprocess(self.cfg, image)

    def generate_captions(self, images: torch.Tensor, decoding: Mapping[str, Any]) -> list[str]:
        """A caption per image from the model's ``generate`` (CoCa's, or a loader model's with
        the same contract: token ids (B, L) in open_clip's vocabulary), decoded as
        CLIP_benchmark decodes them: the text before ``<end_of_text>``, without
        ``<start_of_text>``, stripped.

        Args:
            images: A preprocessed batch (B, 3, H, W).
            decoding: Keyword arguments of ``generate`` (open_clip's CoCa: ``generation_type``,
                ``seq_len``, ``num_beams``...).

        Raises:
            UsageError: the model has no ``generate`` (it writes no text).
        """
        generate = getattr(self.module, "generate", None)
        if not callable(generate):
            raise UsageError(f"backbone {self.name} writes no captions: its model has no "
                             "generate method",
                             hint="captioning needs a captioning model, e.g. "
                                  "open_clip:coca_ViT-B-32@laion2b_s13b_b90k")
        from open_clip.tokenizer import _tokenizer  # open_clip's vocabulary, as CLIP_benchmark

        self.module.eval()
        with torch.inference_mode():
            tokens = generate(images.to(self.device, self.dtype), **dict(decoding))
        return [_tokenizer.decode(row).split("<end_of_text>")[0]
                .replace("<start_of_text>", "").strip() for row in tokens.cpu().numpy()]

    def resolve_layers(self, layers: int | Sequence[int] | None = None) -> tuple[int, ...]:
        """Requested layers as non-negative block indices, in request order.

        Raises:
            UsageError: an index outside ``-num_blocks .. num_blocks - 1``.
        """
        requested = (
            (-1,) if layers is None else ((layers,) if isinstance(layers, int) else tuple(layers))
        )
        if not requested:
            raise UsageError(
                "no layers requested",
                hint=f"pass block indices, e.g. layers=[-1] (of {self.num_blocks})",
            )
        n = self.num_blocks
        resolved = []
        for layer in requested:
            if isinstance(layer, bool) or not isinstance(layer, int) or not -n <= layer < n:
                raise UsageError(
                    f"layer {layer!r} is out of range for {self.name}",
                    hint=f"it has {n} blocks: use 0..{n - 1} or -{n}..-1",
                )
            resolved.append(layer % n)
        return tuple(resolved)

    def extract(
        self,
        images: torch.Tensor,
        layers: int | Sequence[int] | None = None,
        pooling: str | None = None,
    ) -> dict[str, Any]:
        """Features of ``images`` at ``layers``, all from one forward pass.

        Args:
            images: a preprocessed batch (B, 3, H, W); moved to the module's device.
            layers: block index, or indices (negative counts from the end); default the last.
            pooling: ``cls``, ``mean``, ``gap`` (spatial mean, the CNN name for ``mean``) or
                ``none`` (``pooled`` is None); default ``default_pooling``.

        Returns:
            ``{"layers": {layer: {"dense", "pooled", "grid_hw"}}, "dense", "pooled", "grid_hw"}``,
            the top-level keys repeating the last requested layer (see the module docstring).

        Raises:
            UsageError: a bad layer index, pooling mode or input shape.
        """
        pooling = pooling or self.default_pooling
        if pooling not in self.poolings:
            raise UsageError(
                f"{self.name} has no pooling {pooling!r}",
                hint=f"use one of: {', '.join(self.poolings)}",
            )
        if not isinstance(images, torch.Tensor) or images.ndim != 4 or images.shape[1] != 3:
            shape = (
                tuple(images.shape) if isinstance(images, torch.Tensor) else type(images).__name__
            )
            raise UsageError(
                f"images must be a (B, 3, H, W) tensor, got {shape}",
                hint="stack backbone.preprocess(image) outputs into a batch",
            )
        requested = (
            (-1,) if layers is None else ((layers,) if isinstance(layers, int) else tuple(layers))
        )
        resolved = self.resolve_layers(requested)
        self.module.eval()
        with torch.inference_mode():
            outs = self._forward(
                images.to(self.device, self.dtype), tuple(sorted(set(resolved)))
            )
            result: dict[Any, dict[str, Any]] = {}
            for key, index in zip(requested, resolved, strict=True):
                out = outs[index]
                result[key] = {
                    "dense": out.dense,
                    "pooled": self._pool(out, pooling),
                    "grid_hw": (int(out.dense.shape[-2]), int(out.dense.shape[-1])),
                }
        last = result[requested[-1]]
        return {
            "layers": result,
            "dense": last["dense"],
            "pooled": last["pooled"],
            "grid_hw": last["grid_hw"],
        }

    @staticmethod
    def _pool(out: LayerOut, pooling: str) -> torch.Tensor | None:
        if pooling == "none":
            return None
        if pooling == "cls":
            if out.cls is None:
                raise UsageError("this layer has no class token", hint="use pooling mean or gap")
            return out.cls
        return out.dense.mean(dim=(2, 3))

    # -- records -----------------------------------------------------------------------------

    def geometry(self) -> dict[str, Any]:
        """Feature geometry: patch size, class token, widths and strides of every block."""
        if self._geometry is None:
            static = self._static_geometry()
            if static is None:
                static = self._probe_geometry()
            self._geometry = {
                "patch_size": self.patch_size,
                "has_cls_token": self.has_cls_token,
                "num_prefix_tokens": self.num_prefix_tokens,
                "num_blocks": self.num_blocks,
                **static,
            }
        return dict(self._geometry)

    def _probe_geometry(self) -> dict[str, Any]:
        size = self.cfg.input_size
        check_input_size(size, patch_size=self.patch_size)  # the probe is a forward pass
        blocks = list(range(self.num_blocks))
        pooling = "cls" if self.has_cls_token else "mean"
        outs = self.extract(torch.zeros(1, 3, size, size), layers=blocks, pooling=pooling)["layers"]
        return {
            "embed_dim": int(outs[blocks[-1]]["pooled"].shape[-1]),
            "layer_dims": [int(outs[i]["dense"].shape[1]) for i in blocks],
            "layer_strides": [_stride(size, outs[i]["grid_hw"][1]) for i in blocks],
        }

    @property
    def embed_dim(self) -> int:
        """Width of the default pooled feature of the last block."""
        return int(self.geometry()["embed_dim"])

    def weights_record(self) -> dict[str, Any]:
        """The weights document: tensor_hash, origin, upstream, revision, path, seed."""
        if self.weights is None:
            raise RuntimeError(f"{self.name} was built without a weights record")
        return self.weights.to_dict()

    def record(self) -> dict[str, Any]:
        """The body of the ``backbone`` artifact (JSON-able, canonical)."""
        return {
            "source": self.source,
            "architecture": self.arch,
            "weights": self.weights_record(),
            "revision": self.revision,
            "preprocessing": self.cfg.to_dict(),
            "geometry": self.geometry(),
            "default_pooling": self.default_pooling,
            "poolings": list(self.poolings),
            "params": dict(sorted(self.params.items())),
        }

    def spec_params(self) -> dict[str, Any]:
        """What the user asked for, as the engine's alias key (see :func:`spec_params`)."""
        if self._spec_params is not None:
            return dict(self._spec_params)
        # built directly, not from a spec: the tensors themselves stand for the weights
        return {
            "source": self.source,
            "arch": self.arch,
            "tag": None,
            "weights": "tensors",
            "checkpoint": self.weights_record()["tensor_hash"],
            "seed": None,
            "use_projection": bool(self.params.get("use_projection", False)),
            "input_size": self.cfg.input_size,
        }

    def __repr__(self) -> str:
        origin = self.weights.origin if self.weights else "?"
        return f"<{type(self).__name__} {self.name} weights={origin} input={self.cfg.input_size}>"


def _stride(size: int, grid: int) -> int | float:
    stride = size / max(grid, 1)
    return int(stride) if stride.is_integer() else round(stride, 4)
