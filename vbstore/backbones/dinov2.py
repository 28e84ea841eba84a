"""DINOv2 from torch.hub at a pinned commit of facebookresearch/dinov2.

The code is the upstream hub code at ``DINOV2_COMMIT`` (cached where ``torch.hub.load`` caches
it, ``$TORCH_HOME/hub/facebookresearch_dinov2_<commit>``), executed only when it is the code
vbstore fetched from that commit (``_pins.verify_code``), from source only
(``_pins.source_only``: a planted ``__pycache__`` is never read); layers come from the model's own
``get_intermediate_layers(norm=True)``. Without the cached code or a network it fails fast:
``timm:vit_small_patch14_dinov2.lvd142m`` is the same network shipped inside timm.
"""

from __future__ import annotations

from typing import Any

import torch

from ..store import tensor_identity
from ._base import Backbone, LayerOut
from ._blocks import BlockSplit
from ._cfg import BackboneCfg
from ._errors import InvalidSpec
from ._fetch import github_repo, url_file
from ._pins import source_only
from ._request import BuildRequest
from ._weights import load_strict, read_state_dict, seeded, weights_record

DINOV2_OWNER, DINOV2_REPO = "facebookresearch", "dinov2"
# pinned: the hub code defines the architecture, so an unpinned "main" could change features
DINOV2_COMMIT = "7764ea0f912e53c92e82eb78a2a1631e92725fc8"
DINOV2_BASE_URL = "https://dl.fbaipublicfiles.com/dinov2"
# VisBench's DINOv2 transform (upstream backbones/dinov2.py): the shorter side resized to the
# input size (bicubic), then a centre crop of it, ImageNet stats. Before (PREPROCESSING_VERSION
# 1): the DINOv2 paper's linear-eval transform, resize 256 then crop 224.
DINOV2_CFG = BackboneCfg(input_size=224, resize=224, crop="center", interpolation="bicubic")


def weights_url(arch: str) -> str:
    """Upstream URL of the pretrained checkpoint for a hub entry (``dinov2_vitb14_reg``...)."""
    base = arch.removesuffix("_reg")
    full = f"{base}_reg4" if arch.endswith("_reg") else base
    return f"{DINOV2_BASE_URL}/{base}/{full}_pretrain.pth"


class Dinov2Backbone(Backbone):
    """A DINOv2 hub model; ``layers`` index its transformer blocks."""

    source = "dinov2"
    # Any: the model's own methods (DINOv2's hub) are unknown to nn.Module's stubs
    module: Any

    def __init__(self, model: Any, cfg: BackboneCfg, *, arch: str) -> None:
        registers = int(getattr(model, "num_register_tokens", 0) or 0)
        patch = model.patch_size
        super().__init__(
            model,
            cfg,
            arch=arch,
            has_cls_token=True,
            num_prefix_tokens=1 + registers,
            patch_size=int(patch[0] if isinstance(patch, (tuple, list)) else patch),
            revision=DINOV2_COMMIT,
        )

    @property
    def num_blocks(self) -> int:
        return int(getattr(self.module, "n_blocks", None) or len(self.module.blocks))

    def _static_geometry(self) -> dict[str, Any]:
        dim = int(self.module.embed_dim)
        return {
            "embed_dim": dim,
            "layer_dims": [dim] * self.num_blocks,
            "layer_strides": [self.patch_size] * self.num_blocks,
        }

    def block_split(self) -> BlockSplit | None:
        # chunked blocks (FSDP's BlockChunk) would not be the blocks layers index
        if getattr(self.module, "chunked_blocks", False):
            return None
        return BlockSplit(list(self.module.blocks), "tokens", self.module.norm,
                          indexes_layers=True)

    def _forward(self, images: torch.Tensor, indices: tuple[int, ...]) -> dict[int, LayerOut]:
        outs = self.module.get_intermediate_layers(
            images, n=list(indices), reshape=True, return_class_token=True, norm=True
        )
        return {
            index: LayerOut(dense, cls) for index, (dense, cls) in zip(indices, outs, strict=True)
        }


def build(request: BuildRequest) -> Dinov2Backbone:
    """Build ``dinov2:ARCH`` for ``request``."""
    arch, choice = request.spec.arch, request.weights
    label = f"dinov2:{arch}"
    warm = (f"from vbstore.backbones import build_backbone; "
            f"build_backbone('{label}', weights='random')")
    repo = github_repo(
        DINOV2_OWNER,
        DINOV2_REPO,
        DINOV2_COMMIT,
        what=f"the DINOv2 hub code for {label} (needed for any weights)",
        hint=(
            "let vbstore fetch it into the torch.hub cache on a connected machine with the same "
            f'TORCH_HOME and VBSTORE_HOME (python -c "{warm}"): it runs no hub code it did not '
            "fetch itself; or use the same network from timm, "
            "e.g. timm:vit_small_patch14_dinov2.lvd142m"
        ),
    )
    # source only: bytecode beside the pinned source is not pinned, so it is never read
    with seeded((choice.seed or 0) if choice.kind == "random" else 0), source_only():
        # source="local": the pinned folder is loaded as is, with no GitHub API round trip
        model = torch.hub.load(str(repo), arch, source="local", pretrained=False)
    upstream = revision = None
    if choice.kind == "random":
        tensor_hash = tensor_identity(model.state_dict())
    else:
        if choice.kind == "pretrained":
            if choice.tag is not None:
                raise InvalidSpec(
                    label, f"dinov2 has one set of weights per model, not {choice.tag!r}"
                )
            url = weights_url(arch)
            path = url_file(url, what=f"pretrained weights for {label}")
            upstream, revision = url, DINOV2_COMMIT
        else:
            assert choice.path is not None  # parse_weights sets it for a checkpoint
            path = choice.path
        tensors = read_state_dict(path)
        tensor_hash = tensor_identity(tensors)  # before any loader can touch them
        load_strict(model, tensors, where=str(path), ignorable=("head.",))
    backbone = Dinov2Backbone(model, DINOV2_CFG.with_input_size(request.input_size), arch=arch)
    backbone.weights = weights_record(choice, tensor_hash, upstream=upstream, revision=revision)
    return backbone
