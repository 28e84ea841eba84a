"""The content-addressed object store and its SQLite registry."""

from typing import TYPE_CHECKING, Any

from ._derive import derivation_key, derivation_spec
from ._filestate import RACY_SECONDS
from ._fsck import sniff_kind
from ._gc import DEFAULT_GRACE
from ._ids import db_id, hex_id
from ._kinds import JSON_KINDS, KINDS, TENSOR_KINDS, encoding
from ._objects import ObjectFiles
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

if TYPE_CHECKING:
    from ._reports import FsckReport, GcReport, RebuildReport

__all__ = [
    "DEFAULT_GRACE",
    "JSON_KINDS",
    "KINDS",
    "RACY_SECONDS",
    "TENSOR_KINDS",
    "FsckReport",
    "GcReport",
    "ObjectFiles",
    "ObjectInfo",
    "RebuildReport",
    "RunInfo",
    "Store",
    "check_safetensors_bytes",
    "check_safetensors_file",
    "db_id",
    "default_root",
    "derivation_key",
    "derivation_spec",
    "encoding",
    "hex_id",
    "parse_safetensors_header",
    "read_safetensors_header",
    "safetensors_identity",
    "sniff_kind",
    "tensor_identity",
    "to_safetensors_bytes",
    "validate",
]


def __getattr__(name: str) -> Any:
    if name in ("FsckReport", "GcReport", "RebuildReport"):
        from . import _reports  # the report types load with the first report (see _reports)

        return getattr(_reports, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
