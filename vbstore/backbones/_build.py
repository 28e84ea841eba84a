"""From a spec and a weights choice to a built :class:`Backbone`, and the alias key for both.

``spec_params`` is cheap (no torch, no model): it is what the engine hashes to find a backbone it
has already built. ``build_backbone`` does the work.
"""

from __future__ import annotations

import os
from typing import Any

from .._budget import check_input_size
from ..errors import field_ref
from ..store import tensor_identity
from ._clip_loaders import clip_sources
from ._errors import InvalidSpec, NoPretrainedWeights
from ._registry import BackboneEntry, get_entry
from ._request import BuildRequest
from ._spec import BackboneSpec, parse_spec
from ._weights import (
    file_digest,
    load_strict,
    parse_weights,
    read_state_dict,
    seeded,
    weights_record,
)

# Local imports: the torch-bound modules (_base, custom) load when a plugin backbone is built;
# parsing a spec and naming weights (all a cached result needs) stays torch-free.


def _request(
    spec: str | BackboneSpec,
    weights: str | os.PathLike[str],
    seed: int | None,
    input_size: int | None,
    use_projection: bool,
) -> tuple[BuildRequest, BackboneEntry]:
    parsed = parse_spec(spec) if isinstance(spec, str) else spec
    entry = get_entry(parsed.name)
    text = str(parsed)
    choice = parse_weights(weights, seed=seed, tag=parsed.tag, spec=text)
    if use_projection and parsed.source not in clip_sources():
        raise InvalidSpec(
            text, "use_projection applies to CLIP backbones only (open_clip and registered "
            "model types)", hint="drop --use-projection"
        )
    if input_size is not None and (
        isinstance(input_size, bool) or not isinstance(input_size, int) or input_size < 1
    ):
        raise InvalidSpec(text, f"input_size must be a positive integer, not {input_size!r}")
    if input_size is not None:
        # before a model is built for it, or a store touched: the architecture is not known yet
        check_input_size(input_size, forward=False)
    return BuildRequest(parsed, choice, input_size, bool(use_projection)), entry


# Sources whose default preprocessing changed, with the version of it: the alias key names it, so
# a store that resolved such a spec before builds the new backbone instead of serving the old
# one's features and results under the old name. dinov2 2: VisBench's short side 224 then centre
# crop 224 (1: resize 256, crop 224).
PREPROCESSING_VERSIONS = {"dinov2": 2}


def spec_params(
    spec: str | BackboneSpec,
    *,
    weights: str | os.PathLike[str] = "default",
    seed: int | None = None,
    input_size: int | None = None,
    use_projection: bool = False,
) -> dict[str, Any]:
    """The canonical dict of what the user asked for: the engine's alias key for a backbone.

    Cheap: it parses and validates, and hashes a checkpoint file's bytes (BLAKE3), but never
    builds a model or imports torch.

    Returns:
        ``{"source", "arch", "tag", "weights": "pretrained"|"fixed"|"checkpoint"|"random",
        "checkpoint": file hash or None, "seed": int or None, "use_projection", "input_size"}``.
        ``seed`` is None unless ``weights`` is ``random`` (where it defaults to 0).

    Raises:
        InvalidSpec, UnknownBackbone, CheckpointNotFound: as :func:`build_backbone`.
    """
    request, entry = _request(spec, weights, seed, input_size, use_projection)
    choice = request.weights
    # a plugin's fixed default weights are asked for as "default" but are not pretrained ones: the
    # alias says so, so a store never serves them from an alias recorded as pretrained
    kind = entry.weights_origin if choice.kind == "pretrained" else choice.kind
    version = PREPROCESSING_VERSIONS.get(request.spec.source)
    return {
        **({"preprocessing": version} if version else {}),
        "source": request.spec.source,
        "arch": request.spec.arch,
        "tag": choice.tag,
        "weights": kind,
        "checkpoint": file_digest(choice.path) if choice.path else None,
        "seed": choice.seed,
        "use_projection": request.use_projection,
        "input_size": input_size,
    }


def build_backbone(
    spec: str | BackboneSpec,
    *,
    weights: str | os.PathLike[str] = "default",
    seed: int | None = None,
    input_size: int | None = None,
    use_projection: bool = False,
    device: Any = None,
) -> Any:
    """Build a backbone from a spec string.

    ```python
    bb = build_backbone("timm:vit_small_patch14_dinov2.lvd142m", input_size=224)
    out = bb.extract(batch, layers=[-4, -1], pooling="cls")
    ```

    Args:
        spec: see :func:`parse_spec` (``timm:ARCH``, ``open_clip:MODEL@TAG``, ``test_vit``...).
        weights: ``"default"`` (pinned pretrained), a pretrained tag, a checkpoint path
            (``.pth``/``.pt``/``.bin``/``.ckpt``/``.safetensors``), or ``"random"``.
        seed: init seed for ``weights="random"`` (default 0); ignored otherwise.
        input_size: override the model's input size (ViTs are built for it).
        use_projection: open_clip only: ``cls`` pooling of the last block gives the projected
            embedding (the one text embeddings are compared with).
        device: move the built module there.

    Returns:
        A :class:`Backbone` with ``weights``, ``record()`` and ``spec_params()`` filled in.

    Raises:
        InvalidSpec: malformed spec or arguments.
        UnknownBackbone: unknown name, source, architecture or tag.
        WeightsUnavailable: pretrained weights not cached and not downloadable now (fast).
        CheckpointNotFound, CheckpointError: the checkpoint is missing or does not fit.
        MissingExtra: the source's optional dependency is not installed.
        OverBudget: one image at ``input_size`` would not fit ``VBSTORE_MAX_MEMORY``.
    """
    request, entry = _request(spec, weights, seed, input_size, use_projection)
    params = spec_params(
        request.spec,
        weights=weights,
        seed=seed,
        input_size=input_size,
        use_projection=use_projection,
    )
    backbone = entry.fn(request) if entry.prefix else _build_plugin(entry, request)
    backbone._spec_params = params
    if device is not None:
        backbone.to(device)
    return backbone


def _build_plugin(entry: BackboneEntry, request: BuildRequest) -> Any:
    """Build a plugin's architecture and apply the weights choice around it."""
    from ._base import Backbone
    from .custom import CustomBackbone

    choice, name = request.weights, entry.name

    def make(pretrained: bool) -> Backbone:
        built = entry.fn(pretrained=pretrained, input_size=request.input_size)
        if isinstance(built, Backbone):
            return built
        # a bare module gets ImageNet preprocessing, at the requested size
        from ._cfg import BackboneCfg  # with the model: a cached `get` resolves specs only

        return CustomBackbone(built, BackboneCfg().with_input_size(request.input_size), name=name)

    if choice.kind == "pretrained":
        if not entry.pretrained:
            raise NoPretrainedWeights(
                f"pretrained weights for {name}",
                "this backbone has none"
                + (f" ({field_ref('weights', repr(choice.tag))} reads as a pretrained tag)"
                   if choice.tag else ""),
                hint=f"use {field_ref('weights', 'random')} (seeded) or {field_ref('weights')} "
                     "PATH to a checkpoint",
            )
        if choice.tag is not None:
            raise InvalidSpec(
                name,
                f"{name} takes no pretrained tag ({choice.tag!r})",
                hint=f"use {field_ref('weights', 'default')}",
            )
        backbone = make(True)
        tensor_hash = tensor_identity(backbone.module.state_dict())
    elif choice.kind == "random":
        with seeded(choice.seed or 0):
            backbone = make(False)
        tensor_hash = tensor_identity(backbone.module.state_dict())
    else:
        assert choice.path is not None
        tensors = read_state_dict(choice.path)
        tensor_hash = tensor_identity(tensors)  # before any loader can touch them
        with seeded(0):  # the init is overwritten, but keep even that reproducible
            backbone = make(False)
        load_strict(backbone.module, tensors, where=str(choice.path))
    backbone.source = entry.source
    backbone.arch = name
    backbone.weights = weights_record(
        choice, tensor_hash, upstream=entry.upstream, revision=entry.revision,
        default_origin=entry.weights_origin,
    )
    return backbone
