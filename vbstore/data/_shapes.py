"""Synthetic shapes: a tiny, fully deterministic image-classification dataset for tests and demos.

Colour, area, position and rotation are drawn at random for every image, and each shape is
scaled to its drawn *area* (not radius), so only geometry tells the classes apart. ``noise``
blends the image towards uniform pixel noise and adds clutter strokes: 0 is clean, 1 leaves no
signal, so a probe's accuracy falls towards chance as it grows. ``grain`` is VisBench's demo
noise instead: achromatic Gaussian pixel noise of that standard deviation in grey levels (its
``--noise``, 28 to 90, default 45), which blurs the outline without adding a colour cue; with
``contrast`` (its 30 grey levels) the shape differs from a greyish background by that much, on
a random side, instead of by a random colour, so only a faint outline carries the class.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import UsageError
from ._png import write_png

SHAPES = ("circle", "square", "triangle", "star", "cross")
# the order ``classes=N`` takes them in: VisBench's demo draws the first four
CLASS_ORDER = ("circle", "square", "triangle", "cross", "star")
SPLITS = ("train", "val")
_SUPERSAMPLE = 4  # anti-aliasing without depending on a rasteriser's version


def _regular(n: int, radius: float = 1.0, phase: float = 0.0) -> np.ndarray:
    angles = phase + 2 * math.pi * np.arange(n) / n
    return radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)


def _polygon(shape: str) -> np.ndarray | None:
    """Vertices of a unit shape (None for the circle)."""
    if shape == "square":
        return _regular(4, phase=math.pi / 4)
    if shape == "triangle":
        return _regular(3, phase=math.pi / 2)
    if shape == "star":
        outer, inner = _regular(5, 1.0, math.pi / 2), _regular(5, 0.4, math.pi / 2 + math.pi / 5)
        return np.stack([outer, inner], axis=1).reshape(10, 2)
    if shape == "cross":
        a, b = 0.3, 1.0
        return np.array(
            [
                (a, b),
                (a, a),
                (b, a),
                (b, -a),
                (a, -a),
                (a, -b),
                (-a, -b),
                (-a, -a),
                (-b, -a),
                (-b, a),
                (-a, a),
                (-a, b),
            ],
            dtype=float,
        )
    return None


def _area(shape: str) -> float:
    poly = _polygon(shape)
    if poly is None:
        return math.pi
    x, y = poly[:, 0], poly[:, 1]
    return abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))) / 2


def _inside(shape: str, px: np.ndarray, py: np.ndarray) -> np.ndarray:
    """Even-odd point-in-shape test on unit-shape coordinates."""
    poly = _polygon(shape)
    if poly is None:
        return px * px + py * py <= 1.0
    inside = np.zeros(px.shape, dtype=bool)
    for (x1, y1), (x2, y2) in zip(poly, np.roll(poly, -1, axis=0), strict=True):
        if y1 == y2:
            continue
        crosses = (y1 > py) != (y2 > py)
        inside ^= crosses & (px < (x2 - x1) * (py - y1) / (y2 - y1) + x1)
    return inside


def _coverage(
    shape: str, size: int, cx: float, cy: float, scale: float, angle: float
) -> np.ndarray:
    """Fraction of each pixel the shape covers, supersampled."""
    n = size * _SUPERSAMPLE
    grid = (np.arange(n) + 0.5) / _SUPERSAMPLE
    gx, gy = np.meshgrid(grid, grid)
    cos, sin = math.cos(angle), math.sin(angle)
    dx, dy = (gx - cx) / scale, (gy - cy) / scale
    mask = _inside(shape, cos * dx + sin * dy, -sin * dx + cos * dy)
    return mask.reshape(size, _SUPERSAMPLE, size, _SUPERSAMPLE).mean(axis=(1, 3))


def render_shape(shape: str, size: int, noise: float, rng: np.random.Generator,
                 grain: float = 0.0, contrast: float = 0.0) -> np.ndarray:
    """One ``(size, size, 3)`` uint8 image of ``shape`` with random appearance (and ``grain``
    grey levels of achromatic Gaussian pixel noise; ``contrast`` grey levels between shape and
    background when set, else random colours)."""
    if contrast > 0:  # a greyish background, the shape lighter or darker by `contrast`
        background = rng.uniform(60, 196) / 255 + rng.uniform(-12, 12, 3) / 255
        sign = 1.0 if rng.uniform() < 0.5 else -1.0
        foreground = background + sign * contrast / 255 + rng.uniform(-10, 10, 3) / 255
    else:
        background = rng.uniform(0, 1, 3)
        foreground = rng.uniform(0, 1, 3)
        while np.abs(foreground - background).mean() < 0.3:  # visible when clean
            foreground = rng.uniform(0, 1, 3)
    area = rng.uniform(0.04, 0.16) * size * size
    scale = math.sqrt(area / _area(shape))
    margin = min(scale, size / 2)
    cx, cy = rng.uniform(margin, size - margin, 2)
    alpha = _coverage(shape, size, cx, cy, scale, rng.uniform(0, 2 * math.pi))[..., None]
    image = background * (1 - alpha) + foreground * alpha
    for _ in range(round(noise * 6)):  # clutter strokes: distractors with edges of their own
        (x0, y0), (x1, y1) = rng.uniform(0, size, (2, 2))
        t = np.linspace(0, 1, 4 * size)
        xs = np.clip((x0 + t * (x1 - x0)).astype(int), 0, size - 1)
        ys = np.clip((y0 + t * (y1 - y0)).astype(int), 0, size - 1)
        image[ys, xs] = rng.uniform(0, 1, 3)
    image = (1 - noise) * image + noise * rng.uniform(0, 1, image.shape)
    if grain > 0:  # drawn last: an image without grain is the same bytes as before it existed
        image = image + rng.normal(0, grain / 255, image.shape[:2])[..., None]
    return np.clip(np.rint(image * 255), 0, 255).astype(np.uint8)


def make_shapes(
    root: str | Path,
    per_class: int = 20,
    noise: float = 0.0,
    seed: int = 0,
    size: int = 64,
    shapes: Sequence[str] = SHAPES,
    grain: float = 0.0,
    contrast: float = 0.0,
) -> Path:
    """Write ``root/{train,val}/<shape>/<NNNN>.png``: ``per_class`` images per shape per split.

    Every image has its own generator seeded by (seed, split, shape, index), so the same seed
    writes the same bytes everywhere, and a larger ``per_class`` only adds images.

    Args:
        root: The folder to write (created; existing files with the same names are replaced).
        per_class: Images per shape in each split.
        noise: 0 (clean) to 1 (pure noise: a probe can only guess).
        seed: Selects the dataset.
        size: Image side in pixels (at least 16).
        shapes: Which of :data:`SHAPES` to draw (at least two).
        grain: Standard deviation of achromatic Gaussian pixel noise, in grey levels (0 to 255;
            VisBench's demo ``--noise``).
        contrast: Grey levels between shape and a greyish background (VisBench's demo: 30);
            0 draws random colours at least 0.3 apart.

    Returns:
        ``root`` as a :class:`~pathlib.Path`.

    Raises:
        UsageError: an out-of-range argument or unknown shape.
    """
    unknown = sorted(set(shapes) - set(SHAPES))
    if unknown or len(set(shapes)) < 2:
        raise UsageError(f"shapes must be at least two of {', '.join(SHAPES)}; got {list(shapes)}")
    if not (isinstance(per_class, int) and per_class >= 1 and isinstance(size, int) and size >= 16):
        raise UsageError(f"per_class must be >= 1 and size >= 16, got {per_class} and {size}")
    if not 0.0 <= noise <= 1.0 or not isinstance(seed, int) or seed < 0:
        raise UsageError(
            f"noise must be in [0, 1] and seed a non-negative integer, got {noise}, {seed}"
        )
    if not (0.0 <= grain <= 255.0 and 0.0 <= contrast <= 255.0):
        raise UsageError(f"grain and contrast must be in [0, 255] grey levels, got {grain}, "
                         f"{contrast}")
    root = Path(root)
    for split_index, split in enumerate(SPLITS):
        for shape in shapes:
            shape_index = SHAPES.index(shape)
            for i in range(per_class):
                rng = np.random.default_rng([seed, split_index, shape_index, i])
                write_png(
                    root / split / shape / f"{i:04d}.png",
                    render_shape(shape, size, noise, rng, grain, contrast),
                )
    return root
