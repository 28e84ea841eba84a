"""The backbone registry: ``@register_backbone`` and the listings built on it.

Cheap by design: nothing here imports torch, so ``vbstore list backbones`` stays fast. Built-in
sources (``timm``, ``torchvision``, ...) register through exactly this decorator, as a user's
plugin does.

Two kinds of entries share one namespace, both named after the decorated function:

* a **source** (``prefix=True``) is written ``NAME:ARCH`` in a spec and its function builds a
  whole :class:`~vbstore.backbones.Backbone` from a :class:`BuildRequest`;
* a **plugin** (the default) is written ``NAME`` and its function builds one architecture:
  ``fn(*, pretrained: bool, input_size: int | None) -> nn.Module | CustomBackbone``. vbstore
  then applies the weights (seeded random init, checkpoint or pretrained) around it.

```python
@register_backbone(default_pooling="cls", embed_dim=384)
def my_vit(*, pretrained=False, input_size=None):
    return CustomBackbone(build_my_vit(), patch_size=16, has_cls_token=True)
```
"""

from __future__ import annotations

import fnmatch
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._fields import check_keywords
from ..errors import UsageError
from ._errors import BackboneAlreadyRegistered, UnknownBackbone

POOLINGS = ("cls", "mean", "gap", "none")
# what a plugin's default weights are: learned upstream, or set by construction (nothing learned
# or downloaded, e.g. a hand-made filter bank); the weights record says which
DEFAULT_ORIGINS = ("pretrained", "fixed")


@dataclass(frozen=True)
class BackboneEntry:
    """What the registry knows about one registered name, without building anything."""

    name: str
    fn: Callable[..., Any]
    source: str
    prefix: bool = False
    extra: str | None = None
    extra_module: str | None = None
    default_pooling: str | None = None
    embed_dim: int | None = None
    pretrained: bool = False
    tags: bool = False
    upstream: str | None = None
    revision: str | None = None
    weights_origin: str = "pretrained"
    catalog: Mapping[str, int | None] = field(default_factory=dict)
    description: str = ""

    @property
    def owner(self) -> str:
        """``module.function`` that registered this entry."""
        return f"{self.fn.__module__}.{self.fn.__qualname__}"

    def installed(self) -> bool:
        """Whether the optional extra this entry needs is importable (checked, not imported)."""
        if self.extra_module is None:
            return True
        return importlib.util.find_spec(self.extra_module) is not None


_REGISTRY: dict[str, BackboneEntry] = {}


def register_backbone(fn: Callable[..., Any] | None = None, **declared: Any) -> Any:
    """Register a backbone under its function's name; usable bare or with arguments.

    Args:
        fn: the decorated function (when used bare, ``@register_backbone``).
        **declared: the fields of :class:`BackboneEntry` it declares:
        source: the source recorded in the backbone record (``custom`` for plugins).
        prefix: the entry is a source written ``NAME:ARCH`` (see the module docstring).
        extra: the pip extra the entry needs (``clip``), shown in listings.
        extra_module: the module whose presence means the extra is installed.
        default_pooling: listed default pooling (``cls``, ``mean``, ``gap``), if static.
        embed_dim: listed embedding width, if static.
        pretrained: a plugin can build pretrained weights (``fn(pretrained=True)``).
        tags: a source accepts ``NAME:ARCH@TAG`` pretrained tags.
        upstream: the upstream id recorded for a plugin's pretrained weights.
        revision: the pinned revision recorded for a plugin's pretrained weights.
        weights_origin: what a plugin's default weights are, recorded as their origin:
            ``pretrained`` (learned upstream) or ``fixed`` (set by construction, nothing learned
            or downloaded); ``fixed`` needs ``pretrained=True``.
        catalog: a source's known architectures with their embedding widths.

    Raises:
        TypeError: a keyword that is not one of those above.
        BackboneAlreadyRegistered: the name is taken.
        UsageError: a ``weights_origin`` other than those above, or one given to a source or to
            a plugin without default weights.
    """

    check_keywords(BackboneEntry, declared, "register_backbone",
                   without=("name", "fn", "description"))
    declared = {"source": "custom", **declared}
    default_pooling = declared.get("default_pooling")

    def wrap(func: Callable[..., Any]) -> Callable[..., Any]:
        name = func.__name__
        if name in _REGISTRY:
            raise BackboneAlreadyRegistered(name, _REGISTRY[name].owner)
        if default_pooling is not None and default_pooling not in POOLINGS:
            raise ValueError(f"default_pooling must be one of {POOLINGS}, not {default_pooling!r}")
        _check_origin(name, declared.get("weights_origin", "pretrained"),
                      prefix=declared.get("prefix", False),
                      pretrained=declared.get("pretrained", False))
        doc = (func.__doc__ or "").strip().splitlines()
        _REGISTRY[name] = BackboneEntry(
            name=name, fn=func, **{**declared, "catalog": dict(declared.get("catalog") or {})},
            description=doc[0] if doc else "")
        return func

    return wrap(fn) if fn is not None else wrap


def _check_origin(name: str, origin: str, *, prefix: bool, pretrained: bool) -> None:
    """Refuse a ``weights_origin`` the registry cannot record truthfully."""
    if origin not in DEFAULT_ORIGINS:
        raise UsageError(
            f"backbone {name}: weights_origin must be one of {', '.join(DEFAULT_ORIGINS)}, "
            f"not {origin!r}",
            hint="pretrained: learned upstream; fixed: set by construction, nothing learned",
        )
    if origin != "pretrained" and prefix:
        raise UsageError(
            f"backbone {name}: a source (prefix=True) writes its own weights records; "
            f"weights_origin={origin!r} is for plugins",
            hint="drop weights_origin, or register each architecture as a plugin",
        )
    if origin != "pretrained" and not pretrained:
        raise UsageError(
            f"backbone {name}: weights_origin={origin!r} describes default weights, and it has "
            "none (pretrained=False)",
            hint="pass pretrained=True, with fn(pretrained=True) setting those weights",
        )


def unregister_backbone(name: str) -> None:
    """Remove a registered name (for tests and plugin reloads).

    Raises:
        UnknownBackbone: nothing is registered under ``name``.
    """
    if _REGISTRY.pop(name, None) is None:
        raise UnknownBackbone(name)


def get_entry(name: str) -> BackboneEntry:
    """The entry registered under ``name``.

    Raises:
        UnknownBackbone: nothing is registered under ``name``.
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownBackbone(name) from None


def entries() -> list[BackboneEntry]:
    """Every registered entry, sorted by name."""
    return [_REGISTRY[name] for name in sorted(_REGISTRY)]


def list_backbones(pattern: str = "*") -> list[str]:
    """Registered names matching an fnmatch ``pattern`` (case-sensitive), sorted.

    ```python
    list_backbones("test_*")  # ['test_cnn', 'test_vit']
    ```
    """
    return [name for name in sorted(_REGISTRY) if fnmatch.fnmatchcase(name, pattern)]


def backbone_rows(pattern: str = "*") -> list[dict[str, Any]]:
    """One row per usable spec, for ``vbstore list backbones``.

    A source with a catalog (``dinov2``) gets one row per architecture; other sources get one
    row whose spec shows the syntax. A row matches when its name or spec matches ``pattern``.

    Returns:
        Dicts with ``name``, ``spec``, ``source``, ``extra``, ``installed``, ``offline`` (builds
        with no network: a plugin whose extra is installed), ``default_pooling``,
        ``embed_dim`` (None where it depends on the architecture) and ``description``.
    """
    rows = []
    for entry in entries():
        base = {
            "name": entry.name,
            "source": entry.source,
            "extra": entry.extra,
            "installed": entry.installed(),
            # a plugin builds here with nothing to download: its weights are random, set by
            # construction or shipped in an installed package; a source fetches from a hub
            "offline": not entry.prefix and entry.installed(),
            "default_pooling": entry.default_pooling,
            "embed_dim": entry.embed_dim,
            "description": entry.description,
        }
        if entry.prefix and entry.catalog:
            specs = [(f"{entry.name}:{arch}", dim) for arch, dim in sorted(entry.catalog.items())]
        elif entry.prefix:
            syntax = f"{entry.name}:ARCH@TAG" if entry.tags else f"{entry.name}:ARCH"
            specs = [(syntax, entry.embed_dim)]
        else:
            specs = [(entry.name, entry.embed_dim)]
        for spec, dim in specs:
            if fnmatch.fnmatchcase(entry.name, pattern) or fnmatch.fnmatchcase(spec, pattern):
                rows.append({**base, "spec": spec, "embed_dim": dim})
    return rows
