"""Warped views: a derived dataset of each image seen through a seeded random homography.

The ``correspondence`` probe matches an image (view A) with a warped copy of it (view B) whose
geometry is known exactly. The warped copies are a dataset of their own, derived from the source
manifest: a pure function of each source image's bytes, ``seed`` and ``max_warp``, so they are
written once into the store's ``datasets/`` folder, read into a manifest like any folder, and
their features are extracted, stored and shared like any others.

Pixel coordinates are continuous, pixel (col, row) covering ``[col, col + 1) x [row, row + 1)``
(its centre at ``col + 0.5, row + 0.5``). The homography ``H`` of an image of ``w x h`` pixels
maps the image's corners to the corners moved by up to ``max_warp * w`` (x) and
``max_warp * h`` (y) each, drawn uniformly by a generator seeded with ``seed`` and the image's
content hash, so the same image gets the same warp in every dataset. View B has the source's
size; its pixel at ``q`` shows the source at ``H^-1 q`` (bilinear), black where that falls
outside the source.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from ._png import write_png
from ._targets import read_verified
from ._view import ManifestView

# Local imports: PIL loads when a view's pixels are warped or measured.


def random_homography(image_hash: str, size: tuple[int, int], seed: int,
                      max_warp: float) -> np.ndarray:
    """The (3, 3) homography of the image with content hash ``image_hash`` and ``size`` (w, h)."""
    w, h = size
    rng = np.random.default_rng([seed, int(image_hash[:16], 16), int(image_hash[16:32], 16)])
    src = np.array([[0.0, 0.0], [w, 0.0], [w, h], [0.0, h]])
    dst = src + rng.uniform(-max_warp, max_warp, (4, 2)) * np.array([w, h], float)
    return homography_from_points(src, dst)


def homography_from_points(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The homography taking four points ``src`` (4, 2) to ``dst`` (4, 2), ``H[2, 2] = 1``."""
    rows, rhs = [], []
    for (x, y), (u, v) in zip(src, dst, strict=True):
        rows.append([x, y, 1, 0, 0, 0, -u * x, -u * y])
        rows.append([0, 0, 0, x, y, 1, -v * x, -v * y])
        rhs += [u, v]
    solution = np.linalg.solve(np.array(rows, float), np.array(rhs, float))
    return np.append(solution, 1.0).reshape(3, 3)


def apply_homography(matrix: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Points (..., 2) mapped by ``matrix``; points sent to infinity come back as NaN."""
    homogeneous = points @ matrix[:, :2].T + matrix[:, 2]
    scale = homogeneous[..., 2:]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = homogeneous[..., :2] / scale
    return np.where(scale > 1e-12, out, np.nan)


def warp_image(image: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """An (H, W, 3) uint8 image seen through ``matrix`` (bilinear, black outside the source)."""
    h, w = image.shape[:2]
    cols, rows = np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5)
    src = apply_homography(np.linalg.inv(matrix), np.stack([cols, rows], axis=-1))
    x, y = src[..., 0] - 0.5, src[..., 1] - 0.5  # continuous -> array index coordinates
    inside = (src[..., 0] >= 0) & (src[..., 0] < w) & (src[..., 1] >= 0) & (src[..., 1] < h)
    x = np.clip(np.nan_to_num(x), 0, w - 1)
    y = np.clip(np.nan_to_num(y), 0, h - 1)
    x0, y0 = np.minimum(np.floor(x).astype(int), w - 2 if w > 1 else 0), np.minimum(
        np.floor(y).astype(int), h - 2 if h > 1 else 0)
    x1, y1 = np.minimum(x0 + 1, w - 1), np.minimum(y0 + 1, h - 1)
    fx, fy = (x - x0)[..., None], (y - y0)[..., None]
    pixels = image.astype(np.float64)
    top = pixels[y0, x0] * (1 - fx) + pixels[y0, x1] * fx
    bottom = pixels[y1, x0] * (1 - fx) + pixels[y1, x1] * fx
    out = np.where(inside[..., None], top * (1 - fy) + bottom * fy, 0.0)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _decode(view: ManifestView, i: int) -> np.ndarray:
    from PIL import Image  # decoding pixels only when views are written

    data = read_verified(view.image_path(i), view.samples[i]["image"])
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"))


def image_sizes(view: ManifestView) -> np.ndarray:
    """(N, 2) (width, height) of every image of ``view`` (headers only)."""
    from PIL import Image

    sizes = []
    for i in range(len(view.samples)):
        with Image.open(view.image_path(i)) as image:
            sizes.append(image.size)
    return np.array(sizes, dtype=np.int64).reshape(-1, 2)


def view_homographies(view: ManifestView, seed: int, max_warp: float) -> np.ndarray:
    """(N, 3, 3): the homography of every image of ``view``, in manifest order."""
    sizes = image_sizes(view)
    return np.stack([random_homography(s["image"], (int(w), int(h)), seed, max_warp)
                     for s, (w, h) in zip(view.samples, sizes, strict=True)]).reshape(-1, 3, 3)


def write_views(view: ManifestView, seed: int, max_warp: float, folder: Path) -> None:
    """Write ``folder/<i>.png``: row i of ``view`` warped by its homography."""
    for i, sample in enumerate(view.samples):
        image = _decode(view, i)
        h, w = image.shape[:2]
        matrix = random_homography(sample["image"], (w, h), seed, max_warp)
        write_png(folder / f"{i:06d}.png", warp_image(image, matrix))
