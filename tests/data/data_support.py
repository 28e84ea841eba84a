"""Helpers that write tiny real image files for the data tests (imported by name: conftest
modules of several test folders would shadow each other)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np


def write_image(path: Path, seed: int = 0, size: int = 8, fmt: str | None = None) -> Path:
    """A small random RGB image (PNG or JPEG by suffix)."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, format=fmt)
    return path


def write_mask(path: Path, seed: int = 0, size: int = 8) -> Path:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    labels = np.random.default_rng(seed).integers(0, 3, (size, size), dtype=np.uint8)
    Image.fromarray(labels, mode="L").save(path)
    return path


def age(root: Path, seconds: float = 10) -> None:
    """Back-date every file under ``root`` past the file-state cache's racy window."""
    past = time.time() - seconds
    for folder, _, files in os.walk(root):
        for name in files:
            os.utime(Path(folder) / name, (past, past))
