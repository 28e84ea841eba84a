"""Canonical identity of a dict of tensors, independent of the file format that carried them.

The identity hashes, for each tensor in name order: its name, its dtype (safetensors' codes),
its shape and its raw little-endian C-order bytes. The same weights saved as ``.pth`` and as
``.safetensors`` therefore get the same id. torch is only touched when torch tensors are given.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import blake3

from ..errors import VbstoreError

_NUMPY_CODES = {
    "float64": "F64", "float32": "F32", "float16": "F16",
    "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8",
    "uint64": "U64", "uint32": "U32", "uint16": "U16", "uint8": "U8", "bool": "BOOL",
}
_TORCH_CODES = {
    "torch.float64": "F64", "torch.float32": "F32", "torch.float16": "F16",
    "torch.bfloat16": "BF16",
    "torch.int64": "I64", "torch.int32": "I32", "torch.int16": "I16", "torch.int8": "I8",
    "torch.uint8": "U8", "torch.bool": "BOOL",
    "torch.float8_e4m3fn": "F8_E4M3", "torch.float8_e5m2": "F8_E5M2",
}
_DOMAIN = b"vbstore.tensors.v1\0"
_ITEM_SIZE = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4,
              "F16": 2, "BF16": 2, "I16": 2, "U16": 2}


def _code_and_bytes(value: Any) -> tuple[str, tuple[int, ...], bytes]:
    import numpy as np  # only when tensors are handled: reads stay light

    dtype = str(getattr(value, "dtype", ""))
    if dtype.startswith("torch."):
        if dtype not in _TORCH_CODES:
            raise VbstoreError(f"tensor dtype {dtype} has no canonical code")
        tensor = value.detach().to("cpu").contiguous()
        shape = tuple(tensor.shape)
        # view as bytes through uint8 so bfloat16/float8 need no numpy support
        raw = tensor.reshape(-1).view(__import__("torch").uint8).numpy().tobytes()
        return _TORCH_CODES[dtype], shape, raw
    array = np.ascontiguousarray(value)
    if array.dtype.name not in _NUMPY_CODES:
        raise VbstoreError(f"array dtype {array.dtype} has no canonical code")
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    return _NUMPY_CODES[array.dtype.name], tuple(array.shape), array.tobytes()


class _IdentityHasher:
    def __init__(self) -> None:
        self._hash = blake3.blake3(_DOMAIN)

    def add(self, name: str, code: str, shape: tuple[int, ...], raw: bytes | memoryview) -> None:
        header = json.dumps([name, code, list(shape), len(raw)], separators=(",", ":")).encode()
        self._hash.update(struct.pack("<Q", len(header)))
        self._hash.update(header)
        self._hash.update(raw)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def tensor_identity(tensors: Mapping[str, Any]) -> str:
    """The canonical id of a name → tensor mapping (torch tensors or numpy arrays).

    ```python
    tensor_identity(model.state_dict()) == safetensors_identity("model.safetensors")
    ```
    """
    hasher = _IdentityHasher()
    for name in sorted(tensors):
        code, shape, raw = _code_and_bytes(tensors[name])
        hasher.add(name, code, shape, raw)
    return hasher.hexdigest()


def read_safetensors_header(path: str | Path) -> tuple[dict[str, Any], int]:
    """Parse a safetensors header without loading tensors: ``(header, data_offset)``.

    Raises:
        VbstoreError: the file is not a safetensors file.
    """
    with open(path, "rb") as handle:
        prefix = handle.read(8)
        if len(prefix) != 8:
            raise VbstoreError(f"{path} is not a safetensors file (too short)")
        (size,) = struct.unpack("<Q", prefix)
        if size > 100_000_000:
            raise VbstoreError(f"{path} is not a safetensors file (header size {size})")
        raw = handle.read(size)
        if len(raw) != size:
            raise VbstoreError(f"{path} is not a safetensors file (header runs past the end)")
        try:
            header = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise VbstoreError(f"{path} is not a safetensors file ({exc})") from None
    if not isinstance(header, dict):
        raise VbstoreError(f"{path} is not a safetensors file (header is not an object)")
    return header, 8 + size


def safetensors_identity(path: str | Path) -> str:
    """The canonical tensor id of a ``.safetensors`` file, read from its bytes (no torch)."""
    import numpy as np  # only when tensors are handled: reads stay light

    header, offset = read_safetensors_header(path)
    hasher = _IdentityHasher()
    with open(path, "rb") as handle:
        data = np.memmap(handle, dtype=np.uint8, mode="r", offset=offset).data if Path(
            path
        ).stat().st_size > offset else memoryview(b"")
        for name in sorted(k for k in header if k != "__metadata__"):
            entry = header[name]
            start, end = entry["data_offsets"]
            hasher.add(name, entry["dtype"], tuple(entry["shape"]), data[start:end])
    return hasher.hexdigest()


def to_safetensors_bytes(
    tensors: Mapping[str, Any], kind: str, metadata: Mapping[str, str]
) -> bytes:
    """Serialise torch tensors or numpy arrays as canonical safetensors bytes.

    The safetensors library writes ``__metadata__`` in hash-map order, so the same tensors
    would get a different id on every call. Here the header is canonical JSON (sorted keys,
    compact), padded with spaces to 8 bytes: equal content, equal bytes. Data are laid out
    widest dtype first, then by name, so every tensor is aligned to its item size.
    ``vbstore.kind`` is set in ``__metadata__``.
    """
    meta = {str(k): str(v) for k, v in metadata.items()}
    meta["vbstore.kind"] = kind
    header: dict[str, Any] = {"__metadata__": meta}
    chunks, offset = [], 0
    encoded_tensors = {name: _code_and_bytes(value) for name, value in tensors.items()}
    # widest dtypes first (then by name): every tensor's data starts aligned to its item size
    for name in sorted(encoded_tensors,
                       key=lambda n: (-_ITEM_SIZE.get(encoded_tensors[n][0], 1), n)):
        code, shape, raw = encoded_tensors[name]
        header[name] = {"dtype": code, "shape": list(shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    encoded = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    encoded += b" " * (-len(encoded) % 8)
    return b"".join([struct.pack("<Q", len(encoded)), encoded, *chunks])


def parse_safetensors_header(data: bytes | memoryview) -> dict[str, Any]:
    """The header of in-memory safetensors bytes, checked for shape and offsets.

    Raises:
        VbstoreError: the bytes are not a well-formed safetensors file.
    """
    if len(data) < 8:
        raise VbstoreError("not a safetensors file: too short")
    (size,) = struct.unpack("<Q", bytes(data[:8]))
    if size > len(data) - 8:
        raise VbstoreError("not a safetensors file: header runs past the end")
    try:
        header = json.loads(bytes(data[8 : 8 + size]))
    except (ValueError, RecursionError):
        raise VbstoreError("not a safetensors file: header is not JSON") from None
    if not isinstance(header, dict):
        raise VbstoreError("not a safetensors file: header is not an object")
    _check_entries(header, len(data) - 8 - size)
    return header


def _check_entries(header: dict[str, Any], body: int) -> None:
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            start, end = entry["data_offsets"]
            ok = 0 <= start <= end <= body and isinstance(entry["dtype"], str)
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            raise VbstoreError(f"not a safetensors file: bad entry for tensor {name!r}")


def check_safetensors_file(path: str | Path, kind: str) -> dict[str, str]:
    """Like :func:`check_safetensors_bytes` for a file, reading its header only."""
    header, offset = read_safetensors_header(path)
    _check_entries(header, Path(path).stat().st_size - offset)
    return _check_kind(header, kind)


def check_safetensors_bytes(data: bytes, kind: str) -> dict[str, str]:
    """Refuse bytes that are not safetensors of ``kind`` (a pickle disguised as a head, say)."""
    return _check_kind(parse_safetensors_header(data), kind)


def _check_kind(header: dict[str, Any], kind: str) -> dict[str, str]:
    metadata = header.get("__metadata__") or {}
    if not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise VbstoreError("not a safetensors file: __metadata__ is not a map of strings")
    found = metadata.get("vbstore.kind")
    if kind != "tensors" and found != kind:
        raise VbstoreError(
            f"safetensors metadata says kind {found!r}, expected {kind!r}",
            hint="only files written by vbstore carry a vbstore.kind",
        )
    return metadata
