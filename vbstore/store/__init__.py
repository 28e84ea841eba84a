"""The content-addressed object store and its SQLite registry.

Names load with their module on first use (PEP 562), so the answer cache
(``vbstore.store._answers``), which must answer before anything else loads, imports this
package without the store itself.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing itself costs the answer cache ~10 ms to import

# name -> the submodule that defines it
_LAZY = {
    "derivation_key": "._derive", "derivation_spec": "._derive",
    "Derivation": "._derive", "Made": "._derive",
    "RACY_SECONDS": "._layout", "REGISTRY_VERSION": "._layout",
    "sniff_kind": "._fsck", "DEFAULT_GRACE": "._gc",
    "db_id": "._ids", "hex_id": "._ids",
    "JSON_KINDS": "._kinds", "KINDS": "._kinds", "TENSOR_KINDS": "._kinds", "encoding": "._kinds",
    "VERIFIED_COLUMNS": "._verified", "VERIFIED_FROM": "._verified",
    "remember_verified": "._verified", "verified_claims": "._verified",
    "ObjectFiles": "._objects", "RunInfo": "._runs", "validate": "._schemas",
    "pack_index": "._rows",
    "ObjectInfo": "._store", "Store": "._store", "default_root": "._store",
    "default_home": "._layout",
    "check_safetensors_bytes": "._tensors", "check_safetensors_file": "._tensors",
    "parse_safetensors_header": "._tensors", "read_safetensors_header": "._tensors",
    "safetensors_identity": "._tensors", "tensor_identity": "._tensors",
    "to_safetensors_bytes": "._tensors",
    # the report types load with the first report (see _reports)
    "FsckReport": "._reports", "GcReport": "._reports", "RebuildReport": "._reports",
}

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from typing import Any

    from ._derive import Derivation, Made, derivation_key, derivation_spec
    from ._fsck import sniff_kind
    from ._gc import DEFAULT_GRACE
    from ._ids import db_id, hex_id
    from ._kinds import JSON_KINDS, KINDS, TENSOR_KINDS, encoding
    from ._layout import RACY_SECONDS, REGISTRY_VERSION, default_home
    from ._objects import ObjectFiles
    from ._reports import FsckReport, GcReport, RebuildReport
    from ._rows import pack_index
    from ._runs import RunInfo
    from ._schemas import validate
    from ._store import ObjectInfo, Store, default_root
    from ._tensors import (
        check_safetensors_bytes,
        check_safetensors_file,
        parse_safetensors_header,
        read_safetensors_header,
        safetensors_identity,
        tensor_identity,
        to_safetensors_bytes,
    )
    from ._verified import (
        VERIFIED_COLUMNS,
        VERIFIED_FROM,
        remember_verified,
        verified_claims,
    )

__all__ = [
    "DEFAULT_GRACE",
    "JSON_KINDS",
    "KINDS",
    "RACY_SECONDS",
    "REGISTRY_VERSION",
    "TENSOR_KINDS",
    "VERIFIED_COLUMNS",
    "VERIFIED_FROM",
    "Derivation",
    "FsckReport",
    "GcReport",
    "Made",
    "ObjectFiles",
    "ObjectInfo",
    "RebuildReport",
    "RunInfo",
    "Store",
    "check_safetensors_bytes",
    "check_safetensors_file",
    "db_id",
    "default_home",
    "default_root",
    "derivation_key",
    "derivation_spec",
    "encoding",
    "hex_id",
    "pack_index",
    "parse_safetensors_header",
    "read_safetensors_header",
    "remember_verified",
    "safetensors_identity",
    "sniff_kind",
    "tensor_identity",
    "to_safetensors_bytes",
    "validate",
    "verified_claims",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
