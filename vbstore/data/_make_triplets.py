"""Generated 2AFC triplets of known order, from images that installed packages ship.

Each triplet is a reference image (one of scikit-image's bundled photos, or a scikit-learn
digit) and two distortions of it of one kind, a mild and a strong one; the "people" all pick
the mild one. A backbone whose features track perceptual distance agrees with them. Pixels
are computed with numpy alone (no resampler's version in the bytes), so every machine writes the
same files and gets the same manifest. The
folder is in the NIGHTS layout (``data.csv``, ``ref/``, ``distort/``) that
:func:`vbstore.data._triplets.scan_triplets` reads, split ``test``.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from PIL import Image

from ..errors import UsageError
from ._png import write_png
from ._samples import SKIMAGE_CAPTIONS
from ._triplets import MIN_VOTES

# Local imports: skimage and sklearn load when a triplet set is generated from their sample images.

# (kind, mild, strong): the two strengths of one distortion, far enough apart to be ordered
DISTORTIONS = (("noise", 10.0, 70.0), ("blur", 0.7, 4.0), ("brightness", 18.0, 110.0),
               ("shift", 1, 8))


def _distort(image: np.ndarray, kind: str, amount: float, rng: np.random.Generator) -> np.ndarray:
    x = image.astype(np.float64)
    if kind == "noise":
        x = x + rng.normal(0.0, amount, x.shape)
    elif kind == "blur":
        x = _blur(x, amount)
    elif kind == "brightness":
        x = x + amount
    else:  # shift: roll right and down by `amount` pixels
        x = np.roll(x, (int(amount), int(amount)), axis=(0, 1))
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


def _blur(x: np.ndarray, sigma: float) -> np.ndarray:
    """Separable Gaussian blur of an (H, W, C) array, edges reflected."""
    radius = int(np.ceil(3 * sigma))
    taps = np.exp(-0.5 * (np.arange(-radius, radius + 1) / sigma) ** 2)
    taps /= taps.sum()
    for axis in (0, 1):
        pad = [(0, 0)] * x.ndim
        pad[axis] = (radius, radius)
        padded = np.pad(x, pad, mode="reflect")
        x = sum(w * np.take(padded, np.arange(i, i + x.shape[axis]), axis=axis)
                for i, w in enumerate(taps))
    return x


def _square(image: np.ndarray, size: int) -> np.ndarray:
    """The centre square of an (H, W[, C]) uint8 image as (size, size, 3): area-averaged when
    shrinking by an integer factor, nearest otherwise."""
    rgb = np.repeat(image[..., None], 3, axis=2) if image.ndim == 2 else image[..., :3]
    side = min(rgb.shape[:2])
    top, left = (rgb.shape[0] - side) // 2, (rgb.shape[1] - side) // 2
    square = rgb[top:top + side, left:left + side].astype(np.float64)
    factor = side // size
    if factor >= 1:
        square = square[:factor * size, :factor * size]
        square = square.reshape(size, factor, size, factor, 3).mean(axis=(1, 3))
    else:
        index = np.arange(size) * side // size
        square = square[index][:, index]
    return np.clip(np.rint(square), 0, 255).astype(np.uint8)


def _references(count: int, size: int, rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    import skimage.data
    from sklearn.datasets import load_digits

    bundled = Path(skimage.data.__file__).parent
    refs = []
    for name in sorted(SKIMAGE_CAPTIONS):
        # PNG only: a JPEG's pixels depend on the decoder's version
        if (bundled / f"{name}.png").is_file():
            with Image.open(bundled / f"{name}.png") as photo:
                refs.append((name, _square(np.asarray(photo.convert("RGB")), size)))
    digits = load_digits()
    ink = np.rint(digits.images * (255 / 16)).astype(np.uint8)
    for index in sorted(rng.choice(len(ink), size=max(count - len(refs), 0), replace=False)):
        refs.append((f"digit{index:04d}", _square(ink[index], size)))
    return refs[:count]


def make_triplets(root: str | Path, count: int = 64, seed: int = 0, size: int = 64) -> Path:
    """Write ``count`` triplets (the 7 PNG photos first, then digits) of ``size`` px."""
    if count < 1 or size < 8:
        raise UsageError(f"triplets needs count >= 1 and size >= 8, not count={count}, size={size}",
                         hint="e.g. triplets:count=32,size=64")
    root = Path(root)
    rng = np.random.default_rng(seed)
    rows = []
    for i, (name, ref) in enumerate(_references(count, size, rng)):
        kind, mild, strong = DISTORTIONS[i % len(DISTORTIONS)]
        views = {"mild": _distort(ref, kind, mild, rng), "strong": _distort(ref, kind, strong, rng)}
        mild_right = bool(rng.integers(2))
        order = ("strong", "mild") if mild_right else ("mild", "strong")
        write_png(root / "ref" / f"{i:03d}_{name}.png", ref)
        paths = []
        for side, which in zip(("left", "right"), order, strict=True):
            path = f"distort/{i:03d}_{name}_{side}_{kind}_{which}.png"
            write_png(root / path, views[which])
            paths.append(path)
        rows.append({"id": f"{i:03d}", "ref_path": f"ref/{i:03d}_{name}.png",
                     "left_path": paths[0], "right_path": paths[1],
                     "left_vote": 0 if mild_right else MIN_VOTES,
                     "right_vote": MIN_VOTES if mild_right else 0, "votes": MIN_VOTES,
                     "split": "test", "distortion": kind})
    with open(root / "data.csv", "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return root
