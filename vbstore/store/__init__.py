"""The content-addressed object store and its SQLite registry."""

from ._derive import derivation_key, derivation_spec
from ._fsck import FsckReport
from ._gc import DEFAULT_GRACE, GcReport
from ._kinds import JSON_KINDS, KINDS, TENSOR_KINDS
from ._store import ObjectInfo, Store, default_root
from ._tensors import parse_safetensors_header, safetensors_identity, tensor_identity

__all__ = [
    "DEFAULT_GRACE", "JSON_KINDS", "KINDS", "TENSOR_KINDS", "FsckReport", "GcReport",
    "ObjectInfo", "Store", "default_root", "derivation_key", "derivation_spec",
    "parse_safetensors_header", "safetensors_identity", "tensor_identity",
]
