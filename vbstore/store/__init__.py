"""The content-addressed object store and its SQLite registry."""

from ._derive import derivation_key, derivation_spec
from ._fsck import FsckReport
from ._gc import DEFAULT_GRACE, GcReport
from ._kinds import JSON_KINDS, KINDS, TENSOR_KINDS
from ._objects import ObjectFiles
from ._store import ObjectInfo, Store, default_root
from ._tensors import safetensors_identity, tensor_identity, to_safetensors_bytes

__all__ = [
    "DEFAULT_GRACE", "JSON_KINDS", "KINDS", "TENSOR_KINDS", "FsckReport", "GcReport",
    "ObjectFiles", "ObjectInfo", "Store", "default_root", "derivation_key", "derivation_spec",
    "safetensors_identity", "tensor_identity", "to_safetensors_bytes",
]
