"""Tiny real image files for the data tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from data_support import age, write_image, write_mask


@pytest.fixture
def image_folder(tmp_path) -> Path:
    """``data/{train,val}/{cat,dog,eel}/NN.jpg|png``: 6/4/5 train images, 2 each in val."""
    root = tmp_path / "data"
    seed = 0
    for split, counts in (
        ("train", {"cat": 6, "dog": 4, "eel": 5}),
        ("val", {"cat": 2, "dog": 2, "eel": 2}),
    ):
        for cls, n in counts.items():
            for i in range(n):
                seed += 1
                write_image(root / split / cls / f"{i:02d}.{'jpg' if i % 2 else 'png'}", seed)
    age(root)
    return root


@pytest.fixture
def dense_folder(tmp_path) -> Path:
    """``seg/{train,val}/{images,masks}``: 5 and 3 pairs."""
    root = tmp_path / "seg"
    for split, n in (("train", 5), ("val", 3)):
        for i in range(n):
            write_image(root / split / "images" / f"s{i}.jpg", i)
            write_mask(root / split / "masks" / f"s{i}.png", i)
    age(root)
    return root
