"""Generated and packaged data: make_shapes, sklearn:digits, skimage:samples, the PNG writer."""

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from vbstore.data import SHAPES, load_manifest, make_shapes, png_bytes
from vbstore.errors import UsageError


def _files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.png"))}


def test_make_shapes_is_deterministic_per_seed(tmp_path):
    a = _files(make_shapes(tmp_path / "a", per_class=3, seed=7, size=32))
    b = _files(make_shapes(tmp_path / "b", per_class=3, seed=7, size=32))
    c = _files(make_shapes(tmp_path / "c", per_class=3, seed=8, size=32))
    assert a == b
    assert len(a) == 2 * 3 * len(SHAPES)
    assert sorted({k.split("/")[1] for k in a}) == sorted(SHAPES)
    assert set(a) == set(c)
    assert all(a[k] != c[k] for k in a)
    more = _files(make_shapes(tmp_path / "d", per_class=4, seed=7, size=32))
    assert {k: more[k] for k in a} == a  # growing per_class only adds images


def test_shapes_vary_in_appearance_and_noise_destroys_the_signal(tmp_path):
    from PIL import Image

    clean = make_shapes(tmp_path / "clean", per_class=4, seed=0, size=32, shapes=("circle", "star"))
    colours = {tuple(np.asarray(Image.open(p))[0, 0]) for p in clean.rglob("*.png")}
    assert len(colours) == 16  # every background differs
    pure = make_shapes(
        tmp_path / "pure", per_class=2, seed=0, size=32, noise=1.0, shapes=("circle", "star")
    )
    pixels = np.stack([np.asarray(Image.open(p), dtype=float) for p in sorted(pure.rglob("*.png"))])
    assert abs(pixels.mean() - 127.5) < 5
    assert pixels.std() > 60
    with pytest.raises(UsageError, match="noise must be in"):
        make_shapes(tmp_path / "x", noise=1.5)
    with pytest.raises(UsageError, match="at least two of"):
        make_shapes(tmp_path / "x", shapes=("circle", "hexagon"))


def test_shapes_spec_materialises_once(store):
    first = load_manifest(store, "shapes:per_class=2,size=32", split="val")
    again = load_manifest(store, "shapes:size=32,per_class=2", split="val")
    assert first.id == again.id
    assert len(first) == 2 * len(SHAPES)
    assert (
        first.root
        == store.root.resolve() / "datasets" / "shapes-v1-noise0.0-per_class2-seed0-size32" / "val"
    )
    assert not [p for p in (store.root / "datasets").iterdir() if p.name.startswith(".")]
    with pytest.raises(UsageError, match="shapes has no parameter 'colour'"):
        load_manifest(store, "shapes:colour=1")


def test_sklearn_digits(store):
    train = load_manifest(store, "sklearn:digits", split="train")
    val = load_manifest(store, "sklearn:digits", split="val", limit=5)
    assert train.classes == [str(d) for d in range(10)] == val.classes
    assert len(train) == 1797 - 450
    assert val.counts() == dict.fromkeys(train.classes, 5)
    assert not set(train.image_ids) & set(
        load_manifest(store, "sklearn:digits", split="val").image_ids
    )
    image = train.load_image(0)
    assert image.size == (32, 32)
    assert image.mode == "RGB"
    from sklearn.datasets import load_digits

    index = int(train.names[0].split("/")[1][:-4])
    expected = np.rint(load_digits().images[index] * 255 / 16)
    assert np.array_equal(np.asarray(image)[::4, ::4, 0], expected)


def test_skimage_samples_are_a_caption_list(store):
    view = load_manifest(store, "skimage:samples")
    assert view.layout == "list"
    assert len(view) == 8
    assert view.target_type == "captions"
    assert ["a facial photo of a tabby cat"] in view.captions()
    assert view.load_image(view.names.index("images/rocket.jpg")).mode == "RGB"


@settings(max_examples=25, deadline=None)
@given(
    arrays(np.uint8, st.tuples(st.integers(1, 70), st.integers(1, 300), st.sampled_from([1, 3])))
)
def test_png_writer_round_trips(pixels):
    from PIL import Image

    pixels = pixels[..., 0] if pixels.shape[2] == 1 else pixels
    decoded = np.asarray(Image.open(io.BytesIO(png_bytes(pixels))))
    assert np.array_equal(decoded, pixels)
