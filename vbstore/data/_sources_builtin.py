"""The built-in data source kinds, registered through :func:`register_source_kind` as a user's
are. Each reader loads with its first split (``datasets``, torchvision, tar shards)."""

from __future__ import annotations

from typing import Any

from ._source_kinds import SourceKind, register_source_kind

# Local imports: each kind's reader (._hf, ._tvdata, ._cbdata, ._sources) loads when its data is
# read; a kind is looked up by name without them.


def _hf(store, rest: str, split: str | None, options: dict[str, Any]) -> Any:
    from ._hf import open_hf

    return open_hf(store, rest, split, options)


def _torchvision(store, rest: str, split: str | None, options: dict[str, Any]) -> Any:
    from ._tvdata import open_torchvision

    return open_torchvision(store, rest, split, options)


def _wds(store, rest: str, split: str | None, options: dict[str, Any]) -> Any:
    from ._sources import open_wds

    return open_wds(store, rest, split)


def _cb(store, rest: str, split: str | None, options: dict[str, Any]) -> Any:
    from ._cbdata import open_cb

    return open_cb(store, rest, split, options)


for _kind in (
    SourceKind("hf", ("download", "image_column", "label_column"), _hf),
    SourceKind("torchvision", ("dataset_root", "download"), _torchvision),
    SourceKind("wds", (), _wds),
    SourceKind("cb", ("dataset_root", "download", "custom_template_file",
                      "custom_classname_file"), _cb),
):
    register_source_kind(_kind)
