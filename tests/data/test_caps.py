"""Bounds on what a sample list or an image may hold: each is one BadInput line, never a
traceback or gigabytes of memory."""

import json

import pytest
from data_support import age, write_image

from vbstore.data import load_manifest
from vbstore.errors import BadInput, UsageError


@pytest.fixture
def pictures(tmp_path):
    root = tmp_path / "lists"
    for i in range(2):
        write_image(root / "img" / f"{i}.jpg", i)
    age(root)
    return root


def test_a_csv_cell_over_the_bound_is_named(store, pictures):
    (pictures / "big.csv").write_text(f"image,label\nimg/0.jpg,bat\nimg/1.jpg,{'o' * 200_000}\n")
    with pytest.raises(BadInput, match=r"big\.csv:3: a cell is longer than 128 KiB") as caught:
        load_manifest(store, pictures / "big.csv")
    assert len(str(caught.value)) < 400


def test_a_jsonl_cell_over_the_bound_is_named(store, pictures):
    rows = [{"image": "img/0.jpg", "captions": ["c" * 200_000]}]
    (pictures / "big.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(BadInput, match=r"big\.jsonl:1: a cell is longer than 128 KiB") as caught:
        load_manifest(store, pictures / "big.jsonl")
    assert len(str(caught.value)) < 400


@pytest.mark.parametrize("depth", [40, 100_000])
def test_a_deeply_nested_jsonl_line_is_named(store, pictures, depth):
    line = '{"image": "img/0.jpg", "labels": ' + "[" * depth + "]" * depth + "}\n"
    (pictures / "deep.jsonl").write_text(line)
    with pytest.raises(BadInput, match=r"deep\.jsonl:1: nested") as caught:
        load_manifest(store, pictures / "deep.jsonl")
    assert len(str(caught.value)) < 400


def test_a_deeply_nested_csv_cell_is_named(store, pictures):
    (pictures / "deep.csv").write_text("image,labels\nimg/0.jpg," + "[" * 100_000 + "\n")
    with pytest.raises(BadInput, match=r"deep\.csv:2: nested"):
        load_manifest(store, pictures / "deep.csv")


def test_a_long_bad_value_is_shortened_in_the_message(store, pictures):
    rows = [{"image": "img/0.jpg", "label": ["x" * 50_000]}]
    (pictures / "odd.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(BadInput, match="class names are strings") as caught:
        load_manifest(store, pictures / "odd.jsonl")
    assert len(str(caught.value)) < 400


def test_images_over_the_pixel_cap_are_refused_before_decoding(store, pictures, monkeypatch):
    from PIL import Image

    from vbstore.data import MAX_IMAGE_PIXELS

    assert MAX_IMAGE_PIXELS < Image.MAX_IMAGE_PIXELS  # below Pillow's own bomb warning
    (pictures / "a.csv").write_text("image,label\nimg/0.jpg,bat\nimg/1.jpg,owl\n")
    monkeypatch.setenv("VBSTORE_MAX_IMAGE_PIXELS", "40")  # the test images are 8 x 8
    with pytest.raises(BadInput, match=r"8 x 8 = 64 pixels, over the cap of 40") as caught:
        load_manifest(store, pictures / "a.csv")
    assert "VBSTORE_MAX_IMAGE_PIXELS" in str(caught.value)
    monkeypatch.setenv("VBSTORE_MAX_IMAGE_PIXELS", "lots")
    with pytest.raises(UsageError, match="VBSTORE_MAX_IMAGE_PIXELS"):
        load_manifest(store, pictures / "a.csv")
    monkeypatch.setenv("VBSTORE_MAX_IMAGE_PIXELS", "64")
    assert load_manifest(store, pictures / "a.csv").names == ["img/0.jpg", "img/1.jpg"]
