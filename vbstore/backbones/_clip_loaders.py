"""CLIP-like models behind CLIP_benchmark's model contract: a loader, registered by name.

CLIP_benchmark (``clip_benchmark/models``) loads a model through a function of its
``--model_type`` that returns ``(model, transform, tokenizer)``: ``model.encode_image(images)``,
``model.encode_text(tokenizer(texts))``, ``transform`` a PIL image -> tensor. A loader
registered here becomes a backbone source of that name, written ``NAME:MODEL@PRETRAINED`` (or
``-b MODEL@PRETRAINED --model-type NAME``), whose pooled feature is the image embedding and
whose text tower every zero-shot task uses; weights identity (the tensor hash of the loaded
``state_dict``), caching and sharing are those of every backbone.

```python
from vbstore.backbones import register_clip_loader

@register_clip_loader("my_clip")
def load_my_clip(model_name, pretrained, cache_dir=None, device="cpu"):
    model = MyClip.from_pretrained(model_name, revision=pretrained).to(device)
    return model, model.image_transform, model.tokenizer
```

``open_clip`` is a loader too (``--model-type open_clip``, the default); its source is the
``open_clip`` adapter, which also reads the image tower's blocks. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import MissingDependency, UsageError
from ._registry import register_backbone
from ._spec import parse_spec

Loader = Callable[..., tuple[Any, Any, Any]]


@dataclass(frozen=True)
class ClipLoader:
    """A registered loader: its ``--model-type`` name and the function."""

    name: str
    load: Loader


_LOADERS: dict[str, ClipLoader] = {}
# model types whose source is a built-in adapter of their own (open_clip's reads the blocks too)
_OWN_ADAPTER = ("open_clip",)


def register_clip_loader(name: str) -> Callable[[Loader], Loader]:
    """Register ``load(model_name, pretrained, cache_dir=None, device="cpu") -> (model,
    transform, tokenizer)`` as the model type ``name`` and the backbone source ``name:``.

    ``pretrained`` is the spec's ``@TAG`` (or a checkpoint path given with ``--weights``); with
    ``--weights random`` it is None and the loader must build the model without weights (it
    runs under a seeded generator). ``transform`` may be a torchvision ``Compose`` of
    ``Resize``, ``CenterCrop``, ``ToTensor``, ``Normalize`` (and an RGB conversion), or a
    :class:`vbstore.backbones.BackboneCfg`.

    Raises:
        BackboneAlreadyRegistered: ``name`` is taken by a backbone or source.
        UsageError: ``name`` is not a lowercase identifier.
    """
    if not name.isidentifier() or name != name.lower():
        raise UsageError(f"a model type is a lowercase identifier, not {name!r}",
                         hint="e.g. register_clip_loader('ja_clip')")

    def wrap(load: Loader) -> Loader:
        def build(request: Any) -> Any:
            from .clip_model import build_from_loader  # torch: only when a model is built

            return build_from_loader(name, load, request)

        build.__name__ = build.__qualname__ = name
        build.__module__ = load.__module__
        build.__doc__ = f"A CLIP-like model through the loader {load.__qualname__}: MODEL@TAG."
        register_backbone(build, source=name, prefix=True, tags=True, default_pooling="cls")
        _LOADERS[name] = ClipLoader(name, load)
        return load

    return wrap


def clip_sources() -> tuple[str, ...]:
    """The backbone sources with a CLIP text tower and image embedding."""
    return (*_OWN_ADAPTER, *_LOADERS)


def coca_generate_ready() -> bool:
    """Whether open_clip's ``CoCa.generate`` can import its beam search (transformers 4.x
    before 4.57), found without importing torch or transformers."""
    # email, zipfile, csv...: a captioning plan only, never a cached get
    import importlib.metadata
    import importlib.util

    if importlib.util.find_spec("transformers") is None:
        return False
    try:
        major, minor, *_ = [*importlib.metadata.version("transformers").split("."), "0"]
    except importlib.metadata.PackageNotFoundError:  # importable, but no release to read
        return False
    return major == "4" and minor.isdigit() and int(minor) < 57


def check_generate(spec: Any) -> None:
    """Refuse, before a model is built or anything stored, an ``open_clip`` backbone asked to
    write captions where its ``generate`` cannot run (a loader's model brings its own).

    Raises:
        MissingDependency: transformers, which open_clip's CoCa beam search imports, is missing
            or a release it cannot import from.
    """
    if isinstance(spec, str) and parse_spec(spec).source in _OWN_ADAPTER and not (
            coca_generate_ready()):
        raise MissingDependency("transformers 4.x (before 4.57: open_clip's CoCa.generate "
                                "imports its beam search)", "captioning")


def model_types() -> tuple[str, ...]:
    """What ``--model-type`` accepts, as CLIP_benchmark spells them."""
    return clip_sources()


def with_model_type(spec: str, model_type: str | None) -> str:
    """``spec`` read as a model of ``model_type``: ``MODEL@TAG`` (or CLIP_benchmark's
    ``MODEL,PRETRAINED``) becomes ``TYPE:MODEL@TAG``.

    A type no loader registers is left to the spec parser, which refuses it once plugins are
    loaded (a plugin may register it).

    Raises:
        UsageError: a model type that is no identifier, or a spec that already names another
            source.
    """
    if model_type is None:
        return spec
    if not model_type.isidentifier():
        raise UsageError(f"unknown model type {model_type!r}",
                         hint=f"registered: {', '.join(model_types())} "
                              "(register_clip_loader adds one)")
    text = spec.strip()
    if "," in text and "@" not in text:
        model, _, pretrained = text.partition(",")
        text = f"{model.strip()}@{pretrained.strip()}"
    source, colon, _ = text.partition(":")
    if colon and source == model_type:
        return text
    if colon and source != "hf-hub":
        raise UsageError(f"{spec!r} names the source {source!r}, not model type {model_type!r}",
                         hint="drop --model-type, or write the model as MODEL@TAG")
    return f"{model_type}:{text}"
