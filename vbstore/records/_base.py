"""Round-tripping between frozen dataclasses and JSON documents."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from ..errors import SchemaError

R = TypeVar("R", bound="Record")
_MISSING = dataclasses.MISSING


class Record:
    """Mixin: ``from_dict`` / ``to_dict`` for a frozen dataclass with an ``extra`` field.

    Fields whose value is None (optional, absent from the document) are left out of
    ``to_dict``; unknown keys are kept in ``extra`` and written back as they were, and so is a
    known field the document gave as an explicit ``null`` (``"revision": null``), so every
    document reads back to the same bytes and id.
    """

    kind: str = ""

    @classmethod
    def from_dict(cls: type[R], doc: Mapping[str, Any]) -> R:
        """The record of a document.

        Raises:
            SchemaError: a required field is missing.
        """
        names, required = set(), set()
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name == "extra":
                continue
            names.add(f.name)
            if f.default is _MISSING and f.default_factory is _MISSING:
                if f.name not in doc:
                    raise SchemaError(cls.kind, f.name, "required field missing")
                required.add(f.name)
        # an optional field given as null stays in extra: written back as it was
        known = {k: v for k, v in doc.items() if k in required or (k in names and v is not None)}
        extra = {k: v for k, v in doc.items() if k not in known}
        return cls(**known, extra=extra)  # type: ignore[call-arg]

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (canonical-JSON ready)."""
        out = dict(getattr(self, "extra", {}))
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = value
        return out
