"""The content-addressed object store and its SQLite registry.

:class:`Store` is the object database (blobs, registry, refs, derivations); what keeps a store
whole is a function of it: ``gc(store)``, ``forget(store, results)``, ``fsck(store)``,
``rebuild_registry(store)``, ``du(store)``, ``evict_features(store)``.

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
    "sniff_kind": "._fsck", "fsck": "._fsck", "move_aside": "._fsck",
    "DEFAULT_GRACE": "._gc", "gc": "._gc", "du": "._gc", "reachable": "._gc",
    "feature_packs": "._gc", "evict_features": "._gc",
    "forget": "._forget", "ForgetReport": "._forget", "rebuild_registry": "._rebuild",
    "db_id": "._ids", "hex_id": "._ids",
    "JSON_KINDS": "._kinds", "KINDS": "._kinds", "TENSOR_KINDS": "._kinds", "encoding": "._kinds",
    "VERIFIED_COLUMNS": "._verified", "VERIFIED_FROM": "._verified",
    "remember_verified": "._verified", "verified_claims": "._verified",
    "ObjectFiles": "._objects", "RunInfo": "._runs", "validate": "._schemas",
    "pack_index": "._rows",
    "ObjectInfo": "._base", "Store": "._store", "default_root": "._store",
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

    from ._base import ObjectInfo
    from ._derive import Derivation, Made, derivation_key, derivation_spec
    from ._forget import ForgetReport, forget
    from ._fsck import fsck, move_aside, sniff_kind
    from ._gc import DEFAULT_GRACE, du, evict_features, feature_packs, gc, reachable
    from ._ids import db_id, hex_id
    from ._kinds import JSON_KINDS, KINDS, TENSOR_KINDS, encoding
    from ._layout import RACY_SECONDS, REGISTRY_VERSION, default_home
    from ._objects import ObjectFiles
    from ._rebuild import rebuild_registry
    from ._reports import FsckReport, GcReport, RebuildReport
    from ._rows import pack_index
    from ._runs import RunInfo
    from ._schemas import validate
    from ._store import Store, default_root
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
    "ForgetReport",
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
    "du",
    "encoding",
    "evict_features",
    "feature_packs",
    "forget",
    "fsck",
    "gc",
    "hex_id",
    "move_aside",
    "pack_index",
    "parse_safetensors_header",
    "reachable",
    "read_safetensors_header",
    "rebuild_registry",
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
