"""Vision backbones behind one interface: name them, build them, extract features.

Importing this package is cheap (no torch): it holds the registry, spec parsing and the
listings. torch and the source libraries load when a backbone is built; ``Backbone`` and
``CustomBackbone`` load on first access.

```python
from vbstore.backbones import build_backbone
bb = build_backbone("timm:vit_small_patch14_dinov2.lvd142m", input_size=224)
feats = bb.extract(torch.stack([bb.preprocess(img) for img in images]), layers=[-4, -1])
```
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..records import WeightsRecord  # the one weights record, re-exported for adapters
from . import _builtins, _lite, _pixels, _testing  # noqa: F401 - register the built-ins
from ._build import BuildRequest, build_backbone, spec_params
from ._clip_loaders import (
    check_generate,
    clip_sources,
    model_types,
    register_clip_loader,
    with_model_type,
)
from ._errors import (
    AmbiguousBackbone,
    BackboneAlreadyRegistered,
    CheckpointError,
    CheckpointNotFound,
    InvalidSpec,
    MissingExtra,
    UnknownBackbone,
    WeightsUnavailable,
)
from ._names import BARE_NAMES
from ._registry import BackboneEntry, backbone_rows, get_entry, list_backbones, register_backbone
from ._spec import BackboneSpec, parse_spec
from ._weights import check_seed, file_digest

if TYPE_CHECKING:
    from ._base import Backbone, LayerOut  # noqa: F401 - lazy: not in __all__, as before
    from ._blocks import (
        BlockSplit,
        check_blocks,
        check_split,
        run_prefix,
        run_suffix,
        run_suffix_layer,
        run_suffix_layers,
        suffix_features,
        suffix_taps,
    )
    from ._catalog import bare_rows, catalog_rows, model_rows
    from ._cfg import BackboneCfg, preprocess
    from .custom import CustomBackbone

__all__ = [
    "BARE_NAMES",
    "AmbiguousBackbone",
    "Backbone",
    "BackboneAlreadyRegistered",
    "BackboneCfg",
    "BackboneEntry",
    "BackboneSpec",
    "BlockSplit",
    "BuildRequest",
    "CheckpointError",
    "CheckpointNotFound",
    "CustomBackbone",
    "InvalidSpec",
    "MissingExtra",
    "UnknownBackbone",
    "WeightsRecord",
    "WeightsUnavailable",
    "backbone_rows",
    "bare_rows",
    "build_backbone",
    "catalog_rows",
    "check_blocks",
    "check_generate",
    "check_seed",
    "check_split",
    "clip_sources",
    "file_digest",
    "get_entry",
    "list_backbones",
    "model_rows",
    "model_types",
    "parse_spec",
    "preprocess",
    "register_backbone",
    "register_clip_loader",
    "run_prefix",
    "run_suffix",
    "run_suffix_layer",
    "run_suffix_layers",
    "spec_params",
    "suffix_features",
    "suffix_taps",
    "with_model_type",
]

_LAZY = {"Backbone": "._base", "LayerOut": "._base", "CustomBackbone": ".custom",
         "bare_rows": "._catalog", "catalog_rows": "._catalog", "model_rows": "._catalog",
         "BackboneCfg": "._cfg", "preprocess": "._cfg", "BlockSplit": "._blocks",
         "check_blocks": "._blocks", "check_split": "._blocks", "run_prefix": "._blocks",
         "run_suffix": "._blocks", "run_suffix_layer": "._blocks",
         "run_suffix_layers": "._blocks", "suffix_taps": "._blocks",
         "suffix_features": "._blocks"}


def __getattr__(name: str) -> Any:
    # loaded when first asked for: the model classes import torch; the listings and the
    # preprocessing config are not needed to resolve a spec (a cached `get`)
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
