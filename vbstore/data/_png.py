"""A byte-for-byte deterministic PNG writer for the images vbstore generates.

Generated and materialised datasets must hash the same on every machine, or two users of
``sklearn:digits`` would get different manifest ids. Compressed PNG bytes depend on the zlib
build (zlib, zlib-ng, Pillow's bundled one), so these files use stored (uncompressed) deflate
blocks, framed by hand: the bytes depend only on the pixels.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_STORED_MAX = 65535


def _chunk(tag: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))


def _stored_zlib(raw: bytes) -> bytes:
    """A zlib stream of stored deflate blocks (RFC 1950/1951), identical everywhere."""
    out = bytearray(b"\x78\x01")
    starts = range(0, len(raw), _STORED_MAX) if raw else [0]
    for start in starts:
        block = raw[start : start + _STORED_MAX]
        final = 1 if start + _STORED_MAX >= len(raw) else 0
        out += bytes([final]) + struct.pack("<HH", len(block), len(block) ^ 0xFFFF) + block
    out += struct.pack(">I", zlib.adler32(raw))
    return bytes(out)


def png_bytes(pixels: np.ndarray) -> bytes:
    """Encode an 8-bit ``(H, W)`` grey or ``(H, W, 3)`` RGB array as PNG.

    Raises:
        ValueError: another dtype or shape.
    """
    import numpy as np  # lazily: reading a manifest must not pay for numpy

    if (
        pixels.dtype != np.uint8
        or pixels.ndim not in (2, 3)
        or (pixels.ndim == 3 and pixels.shape[2] != 3)
    ):
        raise ValueError(f"expected uint8 (H, W) or (H, W, 3), got {pixels.dtype} {pixels.shape}")
    height, width = pixels.shape[:2]
    colour_type = 0 if pixels.ndim == 2 else 2
    rows = np.ascontiguousarray(pixels).reshape(height, -1)
    # filter type 0 (none) in front of every row
    raw = np.concatenate([np.zeros((height, 1), np.uint8), rows], axis=1).tobytes()
    header = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    return (
        _SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", _stored_zlib(raw))
        + _chunk(b"IEND", b"")
    )


def write_png(path: Path, pixels: np.ndarray) -> None:
    """Write :func:`png_bytes` to ``path``, creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png_bytes(pixels))
