"""Canonical JSON: the one encoding every JSON artifact and derivation key is hashed in.

UTF-8, keys sorted, no insignificant whitespace, finite numbers only, string keys only. Equal
content therefore always gives equal bytes and equal ids.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import blake3

from .errors import NonCanonical

_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


_SIMPLE = (str, int, bool, type(None))


def _check(value: Any, path: str) -> None:
    """Walk ``value`` and raise :class:`NonCanonical` naming the first bad field."""
    kind = type(value)
    if kind in _SIMPLE:  # the common leaves first: manifests hold many thousands of them
        return
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise NonCanonical(f"key {key!r} is not a string", path)
            if type(item) not in _SIMPLE:
                _check(item, f"{path}.{key}" if path else key)
        return
    if kind is list:
        for index, item in enumerate(value):
            if type(item) not in _SIMPLE:
                _check(item, f"{path}[{index}]")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NonCanonical(f"{value!r} is not allowed in canonical JSON", path)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise NonCanonical(f"key {key!r} is not a string", path)
            _check(item, f"{path}.{key}" if path else key)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]")
    elif value is None or isinstance(value, (str, int, bool)):
        return
    else:
        raise NonCanonical(f"{type(value).__name__} is not a JSON value", path)


def dumps(value: Any) -> bytes:
    """Encode ``value`` as canonical JSON bytes.

    Raises:
        NonCanonical: a NaN/Infinity, a non-string key or a non-JSON type, with its field path.
    """
    _check(value, "")
    return _ENCODER.encode(value).encode("utf-8")


def dumps_parsed(value: Any) -> bytes:
    """:func:`dumps` of a value ``json.loads`` just returned, whose keys are strings and whose
    values JSON types by construction: only a NaN or Infinity literal can make it
    non-canonical, and the encoder refuses those, so the walk is skipped (a board pull checks
    100k documents).

    Raises:
        ValueError: a NaN or Infinity.
    """
    return _ENCODER.encode(value).encode("utf-8")


def loads(data: bytes | str) -> Any:
    """Decode JSON bytes (canonical or not)."""
    return json.loads(data)


def digest(data: bytes | memoryview) -> str:
    """The BLAKE3 hex digest that names a blob (large inputs hash on every core)."""
    if len(data) >= 1 << 20:
        return blake3.blake3(data, max_threads=blake3.blake3.AUTO).hexdigest()
    return blake3.blake3(data).hexdigest()


def key_of(value: Any) -> str:
    """The id of a JSON value: the BLAKE3 of its canonical encoding."""
    return digest(dumps(value))
