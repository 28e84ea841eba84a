"""Data source kinds: datasets read where they already live (``hf:``, ``torchvision:``,
``wds:``, ``cb:``), each declared once.

A :class:`SourceKind` names its prefix, the source options it takes and how it opens a split
into a sample list; ``parse_source``, the option check and the reader all ask this registry.
A user's kind registers through :func:`register_source_kind`, as the built-ins do
(``_sources_builtin``). Torch-free and cheap: a cached ``get`` looks kinds up by name only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError, field_ref

# Local imports: the built-in kinds (._sources_builtin) register the first time a kind is
# looked up, imported by name as the target kinds' are (their readers import this registry).

# every source option there is; each kind takes some of them, anything else is refused
SOURCE_OPTIONS = ("dataset_root", "download", "image_column", "label_column",
                  "custom_template_file", "custom_classname_file")


@dataclass(frozen=True)
class SourceKind:
    """One kind of data source, declared once.

    Attributes:
        name: The prefix (``hf`` in ``hf:cifar10``).
        options: The source options it takes (of :data:`SOURCE_OPTIONS`).
        open: ``(store, rest, split, options) -> Source``: the split read into a sample list
            in the store, once (``rest``: what follows the prefix).
    """

    name: str
    options: tuple[str, ...]
    open: Callable[[Any, str, str | None, dict[str, Any]], Any]


_KINDS: dict[str, SourceKind] = {}


def register_source_kind(kind: SourceKind) -> SourceKind:
    """Register ``kind`` (a user's goes through here, as the built-ins do).

    Raises:
        UsageError: the name is taken, or it takes an option that does not exist.
    """
    if kind.name in _KINDS:
        raise UsageError(f"data source kind {kind.name!r} is already registered",
                         hint="register yours under another name")
    unknown = [o for o in kind.options if o not in SOURCE_OPTIONS]
    if unknown:
        raise UsageError(f"data source kind {kind.name!r} takes unknown options "
                         f"{', '.join(unknown)}", hint=f"options: {', '.join(SOURCE_OPTIONS)}")
    _KINDS[kind.name] = kind
    return kind


def source_kinds() -> tuple[str, ...]:
    """The registered kinds' names, in registration order."""
    _builtins()
    return tuple(_KINDS)


def is_source_kind(name: str) -> bool:
    """Whether ``name`` is a registered data source kind's prefix."""
    return name in source_kinds()


def check_source_options(kind: str | None, options: dict[str, Any]) -> None:
    """Refuse source options without a source, or that the source does not take.

    Raises:
        UsageError: e.g. ``--dataset-root`` with a folder, ``--image-column`` with ``wds:``.
    """
    given = sorted(k for k in SOURCE_OPTIONS if options.get(k) not in (None, False))
    if kind is None and given:
        raise UsageError(
            f"{', '.join(given)} applies to hf:, torchvision: or wds: data, not to a folder",
            hint=f"e.g. {field_ref('data')} torchvision:CIFAR10 {field_ref('dataset_root')} ~/data",
        )
    takes = () if kind is None else _get(kind).options
    refused = [k for k in given if kind is not None and k not in takes]
    if refused:
        raise UsageError(
            f"{kind}: data takes no {', '.join(refused)} option",
            hint=f"it takes: {', '.join(takes) or 'no source options'}",
        )


def open_source(store, kind: str, rest: str, split: str | None,
                options: dict[str, Any]) -> Any:
    """Read ``kind:rest`` (one split) into a sample list in the store, once.

    Raises:
        UsageError: unknown names, a missing or ambiguous split, data not available offline.
        BadInput: unreadable shards or images, duplicate sample keys.
    """
    check_source_options(kind, options)
    if not rest:
        raise UsageError(f"{kind}: needs a name", hint="e.g. hf:cifar10, torchvision:CIFAR10, "
                         "wds:shards/")
    return _get(kind).open(store, rest, split, options)


def _get(name: str) -> SourceKind:
    _builtins()
    try:
        return _KINDS[name]
    except KeyError:
        raise UsageError(f"unknown data source {name + ':'!r}",
                         hint=f"sources: {', '.join(_KINDS)}") from None


def _builtins() -> None:
    if "hf" not in _KINDS:
        import importlib

        importlib.import_module("._sources_builtin", __package__)
