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


def png_bytes(pixels: np.ndarray, palette: np.ndarray | None = None) -> bytes:
    """Encode ``pixels`` as PNG: 8-bit ``(H, W)`` grey or ``(H, W, 3)`` RGB, 16-bit ``(H, W)``
    grey (``uint16``, e.g. depth in millimetres), or 8-bit ``(H, W)`` palette indices when
    ``palette`` (``(K, 3)`` uint8, K <= 256) is given: a label map whose stored values are the
    class indices and whose colours are only for viewing.

    Raises:
        ValueError: another dtype or shape, or an index the palette does not have.
    """
    import numpy as np  # lazily: reading a manifest must not pay for numpy

    grey16 = pixels.dtype == np.uint16 and pixels.ndim == 2 and palette is None
    if not grey16 and (
        pixels.dtype != np.uint8
        or pixels.ndim not in (2, 3)
        or (pixels.ndim == 3 and (pixels.shape[2] != 3 or palette is not None))
    ):
        raise ValueError(
            f"expected uint8 (H, W) or (H, W, 3), or uint16 (H, W), got {pixels.dtype} "
            f"{pixels.shape}"
        )
    chunks = []
    if palette is not None:
        palette = np.asarray(palette)
        if palette.dtype != np.uint8 or palette.ndim != 2 or palette.shape[1] != 3 or not (
            1 <= len(palette) <= 256
        ):
            raise ValueError(
                f"a palette is (K <= 256, 3) uint8, got {palette.dtype} {palette.shape}"
            )
        if pixels.size and int(pixels.max()) >= len(palette):
            raise ValueError(f"index {int(pixels.max())} is not in a {len(palette)}-colour palette")
        chunks.append(_chunk(b"PLTE", palette.tobytes()))
    height, width = pixels.shape[:2]
    colour_type = 3 if palette is not None else 0 if pixels.ndim == 2 else 2
    rows = np.ascontiguousarray(pixels.astype(">u2") if grey16 else pixels).view(np.uint8)
    rows = rows.reshape(height, -1)
    # filter type 0 (none) in front of every row
    raw = np.concatenate([np.zeros((height, 1), np.uint8), rows], axis=1).tobytes()
    header = struct.pack(">IIBBBBB", width, height, 16 if grey16 else 8, colour_type, 0, 0, 0)
    return (
        _SIGNATURE
        + _chunk(b"IHDR", header)
        + b"".join(chunks)
        + _chunk(b"IDAT", _stored_zlib(raw))
        + _chunk(b"IEND", b"")
    )


def write_png(path: Path, pixels: np.ndarray, palette: np.ndarray | None = None) -> None:
    """Write :func:`png_bytes` to ``path``, creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png_bytes(pixels, palette))
