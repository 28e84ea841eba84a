"""Records of the ``__metadata__`` of the safetensors artifacts: feature packs and heads.

safetensors metadata maps strings to strings, so lists and records travel as JSON text; these
records hold them parsed, and write them back as vbstore writes them (compact JSON), so each
round-trips its metadata (schemas/pack.metadata.schema.json, head.metadata.schema.json).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import SchemaError
from .head import HeadCompat

_COMPACT = (",", ":")


def _required(kind: str, meta: Mapping[str, str], *names: str) -> None:
    for name in names:
        if name not in meta:
            raise SchemaError(kind, name, "required field missing")


@dataclass(frozen=True)
class PackMetadata:
    """A feature pack's metadata: row ``i`` holds the features of ``images[i]``.

    Attributes:
        format: ``vbstore.pack.v1``. ``extractor``: the extractor key.
        layers: The layers stored (``pooled.<layer>``/``dense.<layer>`` tensors).
        images: The image ids, one per row.
    """

    kind = "pack.metadata"

    format: str
    extractor: str
    layers: list[int]
    images: list[str]
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, meta: Mapping[str, str]) -> PackMetadata:
        """The record of a pack's ``__metadata__``.

        Raises:
            SchemaError: a required field is missing.
        """
        _required(cls.kind, meta, "format", "extractor", "layers", "images")
        known = {"vbstore.kind", "format", "extractor", "layers", "images"}
        return cls(meta["format"], meta["extractor"], json.loads(meta["layers"]),
                   json.loads(meta["images"]),
                   {k: v for k, v in meta.items() if k not in known})

    def to_dict(self) -> dict[str, str]:
        return {**self.extra, "vbstore.kind": "pack", "format": self.format,
                "extractor": self.extractor,
                "layers": json.dumps(self.layers, separators=_COMPACT),
                "images": json.dumps(self.images, separators=_COMPACT)}


@dataclass(frozen=True)
class HeadMetadata:
    """A head's metadata: its format and its compatibility record (canonical JSON text).

    Attributes:
        format: ``vbstore.head.v1``.
        compat_json: The record as stored (kept as text: it is read back byte for byte).
    """

    kind = "head.metadata"

    format: str
    compat_json: str
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, meta: Mapping[str, str]) -> HeadMetadata:
        """The record of a head's ``__metadata__``.

        Raises:
            SchemaError: a required field is missing.
        """
        _required(cls.kind, meta, "format", "vbstore.compat")
        known = {"vbstore.kind", "format", "vbstore.compat"}
        return cls(meta["format"], meta["vbstore.compat"],
                   {k: v for k, v in meta.items() if k not in known})

    @property
    def compat(self) -> HeadCompat:
        """The compatibility record."""
        doc: dict[str, Any] = json.loads(self.compat_json)
        return HeadCompat.from_dict(doc)

    def to_dict(self) -> dict[str, str]:
        return {**self.extra, "vbstore.kind": "head", "format": self.format,
                "vbstore.compat": self.compat_json}
