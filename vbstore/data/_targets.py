"""Per-pixel targets: decoded by kind, then given the backbone's own resize and crop.

A dense probe compares a prediction on the backbone's input grid with a target, so the target
must go through exactly the geometry the image went through (``BackboneCfg``: resize the shorter
side, centre-crop; or squash). Targets are resampled nearest-neighbour: a label stays a label,
and an invalid pixel (depth 0, a zero normal) never blends into its neighbours.

Every file is checked against the hash the manifest recorded before it is decoded, so a target
edited after the manifest was read can never reach a metric.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..canonical import digest
from ..errors import BadInput, UsageError, field_ref

# A 16-bit depth PNG's largest value marks a pixel without depth (Taskonomy's depth_zbuffer in
# 1/512 m: 128 m, no surface); in millimetres it would be 65.5 m, beyond a probe's 10 m range.
NO_DEPTH_U16 = 65535


def read_verified(path: Path, expected: str) -> bytes:
    """The bytes of ``path``, refused unless they hash to the manifest's ``expected``.

    Raises:
        BadInput: the file is missing, unreadable, or changed since the manifest was read.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BadInput("unreadable targets", [(str(path), exc.strerror or str(exc))]) from None
    if digest(data) != expected:
        raise BadInput(
            "targets changed since the manifest was read",
            [(str(path), "its bytes no longer match the manifest")],
            hint="run the command again to re-read the data",
        )
    return data


def _load_array(data: bytes, path: Path) -> np.ndarray:
    if path.suffix.lower() == ".npy":
        return np.load(io.BytesIO(data), allow_pickle=False)
    # PIL: only when a target file is decoded
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        # raw stored values: a palette PNG gives its indices, a 16-bit PNG its integers
        if image.mode in ("RGBA", "LA"):
            return np.asarray(image.convert(image.mode[:-1]))
        return np.asarray(image)


def decode_target(data: bytes, path: Path, kind: str, target_scale: float | None) -> np.ndarray:
    """A target file's bytes as an array of ``kind``: (H, W) for labels, (C, H, W) for maps.

    Raises:
        BadInput: the file cannot be decoded, or has the wrong number of channels.
        UsageError: a depth PNG without a ``target_scale``.
    """
    try:
        raw = _load_array(data, path)
    except Exception as exc:  # a PIL/numpy decoding error of any type: one line, not a traceback
        raise BadInput(
            "unreadable targets", [(str(path), f"{type(exc).__name__}: {exc}")]
        ) from None

    def bad(why: str) -> BadInput:
        return BadInput(f"{kind} targets of the wrong shape", [(str(path), why)])

    if kind == "label_map":
        if raw.ndim != 2 or not np.issubdtype(raw.dtype, np.integer):
            raise bad(f"a label map is one integer channel, got {raw.dtype} {raw.shape}")
        return raw.astype(np.int64)
    if kind == "normal_map":
        if raw.ndim != 3 or raw.shape[-1] != 3:
            raise bad(f"a normal map has 3 channels (H, W, 3), got {raw.shape}")
        if np.issubdtype(raw.dtype, np.integer):  # RGB encoding; pure black marks no normal
            valid = raw.any(axis=-1, keepdims=True)
            out = raw.astype(np.float32) / 127.5 - 1.0
            out = np.where(valid, out, 0.0)
        else:
            out = np.nan_to_num(raw.astype(np.float32), nan=0.0, posinf=0.0, neginf=0.0)
        return np.ascontiguousarray(out.transpose(2, 0, 1), dtype=np.float32)
    if raw.ndim == 3 and raw.shape[-1] == 1:
        raw = raw[..., 0]
    if raw.ndim != 2:
        raise bad(f"a {kind} is one channel, got shape {raw.shape}")
    values = raw.astype(np.float32)
    is_float_file = path.suffix.lower() == ".npy" and np.issubdtype(raw.dtype, np.floating)
    target_scale = target_scale or None  # a task declares 0 for "not given"
    if kind == "depth_map":
        if not is_float_file:
            if target_scale is None:
                raise UsageError(
                    f"depth PNG {path.name} needs its scale to metres",
                    hint=f"pass {field_ref('param:target_scale', '1000')} for millimetres (512 for "
                    "Taskonomy, 1 for metres)",
                )
            if np.issubdtype(raw.dtype, np.integer):  # 65535: no depth (Taskonomy: sky, holes)
                values[raw == NO_DEPTH_U16] = 0.0
            values = values / target_scale
        elif target_scale is not None:
            values = values / target_scale
        values = np.where(np.isfinite(values) & (values > 0), values, 0.0)
    elif target_scale is not None:
        values = values / target_scale
    if not np.isfinite(values).all():
        raise bad("holds NaN or Inf values")
    return np.ascontiguousarray(values[None], dtype=np.float32)


def label_values(files: list[Path]) -> frozenset[int]:
    """The distinct labels stored in label-map ``files`` (a plan-time check of a split's masks:
    each file decoded once, nothing resized, nothing stored).

    Raises:
        BadInput: a file that cannot be read or is not one integer channel.
    """
    seen: set[int] = set()
    for path in files:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise BadInput("unreadable targets", [(str(path), exc.strerror or str(exc))]) from None
        seen.update(int(v) for v in np.unique(decode_target(data, path, "label_map", None)))
    return frozenset(seen)


Geometry = Callable[[int, int], tuple[tuple[int, int], "tuple[int, int, int, int] | None"]]


def align(array: np.ndarray, geometry: Geometry, image_size: tuple[int, int],
          path: str | os.PathLike[str] | None = None) -> np.ndarray:
    """Resample a target (H, W) or (C, H, W) onto the backbone's input grid, nearest-neighbour.

    ``geometry`` is the backbone's ``BackboneCfg.geometry`` (width, height → resized size and
    crop box); ``image_size`` is the (width, height) of the target's image: a target of another
    size is refused rather than stretched, naming ``path`` (the target file) when given.

    Raises:
        BadInput: the target's size differs from its image's.
    """
    height, width = array.shape[-2:]
    if (width, height) != tuple(image_size):
        raise BadInput(
            "targets that do not match their image's size",
            [(str(path) if path is not None else "target",
              f"{width}x{height}, its image {image_size[0]}x{image_size[1]}")],
            hint="targets must have their image's width and height",
        )
    (new_w, new_h), box = geometry(width, height)
    # nearest-neighbour source index of each output pixel, the centre rule PIL's NEAREST uses
    rows = np.minimum(((np.arange(new_h) + 0.5) * height / new_h).astype(np.int64), height - 1)
    cols = np.minimum(((np.arange(new_w) + 0.5) * width / new_w).astype(np.int64), width - 1)
    if box is not None:
        left, top, right, bottom = box
        rows, cols = rows[top:bottom], cols[left:right]
    return np.ascontiguousarray(array[..., rows[:, None], cols[None, :]])
