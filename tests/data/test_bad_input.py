"""Every kind of unusable input: one error naming the paths and the count, nothing stored."""

import os
import shutil

import pytest
from data_support import age, write_image

from vbstore.data import load_manifest
from vbstore.errors import BadInput, UsageError


def _assert_nothing_stored(store):
    assert store.ls() == []
    assert not list((store.root / "objects").rglob("*[0-9a-f]"))


def test_corrupt_jpeg_bytes_are_named(store, image_folder):
    for name in ("01.jpg", "03.jpg"):
        path = image_folder / "train" / "cat" / name
        path.write_bytes(path.read_bytes()[:40])  # a truncated JPEG still opens; load() fails
    (image_folder / "train" / "dog" / "01.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a jpeg at all")
    age(image_folder)
    with pytest.raises(
        BadInput,
        match=r"^3 unreadable or corrupt images: .*cat/01\.jpg: not a "
        r"readable image.*cat/03\.jpg.*dog/01\.jpg",
    ) as caught:
        load_manifest(store, image_folder, split="train")
    assert [p for p, _ in caught.value.problems] == [
        str(image_folder / "train" / c / n)
        for c, n in (("cat", "01.jpg"), ("cat", "03.jpg"), ("dog", "01.jpg"))
    ]
    _assert_nothing_stored(store)


def test_an_unrecognised_image_names_its_file_not_the_bytes_read(store, image_folder):
    """Decoded from the bytes that were hashed (the file is read once), the refusal still names
    the file as PIL does when it opens a path: never the in-memory buffer."""
    bad = image_folder / "train" / "cat" / "01.jpg"
    bad.write_bytes(b"plain text, not an image")
    age(image_folder)
    with pytest.raises(BadInput) as caught:
        load_manifest(store, image_folder, split="train")
    assert caught.value.problems == [(str(bad), "not a readable image (UnidentifiedImageError: "
                                                f"cannot identify image file {str(bad)!r})")]
    _assert_nothing_stored(store)


def test_corrupt_image_is_caught_again_until_fixed(store, image_folder):
    bad = image_folder / "val" / "eel" / "01.jpg"
    original = bad.read_bytes()
    bad.write_bytes(original[: len(original) // 2])
    age(image_folder)
    for _ in range(2):  # a problem file is never cached as good
        with pytest.raises(BadInput, match="1 unreadable or corrupt images"):
            load_manifest(store, image_folder, split="val")
    bad.write_bytes(original)
    assert len(load_manifest(store, image_folder, split="val")) == 6


def test_empty_class_folders_are_named(store, image_folder):
    (image_folder / "train" / "fox").mkdir()
    (image_folder / "train" / "gnu").mkdir()
    (image_folder / "train" / "gnu" / "readme.txt").write_text("no images here")
    with pytest.raises(
        BadInput, match=r"^2 empty class folders: .*train/fox: no images; .*train/gnu"
    ):
        load_manifest(store, image_folder, split="train")
    _assert_nothing_stored(store)


def test_images_without_targets_are_named(store, dense_folder):
    (dense_folder / "train" / "masks" / "s1.png").unlink()
    (dense_folder / "train" / "masks" / "s3.png").unlink()
    write_image(dense_folder / "train" / "masks" / "orphan.png")
    with pytest.raises(
        BadInput,
        match=r"^3 images and targets that do not pair: .*orphan\.png: no image in "
        r"images/; .*s1\.jpg: no target in masks/; .*s3\.jpg",
    ):
        load_manifest(store, dense_folder, split="train")
    _assert_nothing_stored(store)


def test_missing_and_unreadable_images_are_all_listed(store, image_folder):
    for name in ("gone.png", "lost.png"):  # dangling links: listed, then gone when read
        os.symlink(image_folder / "nowhere" / name, image_folder / "val" / "cat" / name)
    with pytest.raises(
        BadInput, match=r"^2 missing or unreadable images: .*gone\.png: No such file.*lost\.png"
    ):
        load_manifest(store, image_folder / "val")
    if os.geteuid() != 0:  # root reads any file
        for name in ("gone.png", "lost.png"):
            os.unlink(image_folder / "val" / "cat" / name)
        os.chmod(image_folder / "val" / "cat" / "00.png", 0)
        with pytest.raises(
            BadInput, match=r"1 missing or unreadable images: .*00\.png: Permission denied"
        ):
            load_manifest(store, image_folder / "val")
    _assert_nothing_stored(store)


def test_dense_layout_forced_on_a_class_folder(store, image_folder):
    with pytest.raises(BadInput, match=r"dense splits without images: .*train/images"):
        load_manifest(store, image_folder, split="train", layout="dense")


def test_loose_images_are_a_flat_folder_but_not_beside_class_folders(store, tmp_path):
    write_image(tmp_path / "flat" / "a.png")
    flat = load_manifest(store, tmp_path / "flat")  # unlabelled: for probes that need no label
    assert flat.layout == "images"
    with pytest.raises(UsageError, match="flat folder of unlabelled images"):
        flat.labels()
    write_image(tmp_path / "mixed" / "cls" / "b.png")
    write_image(tmp_path / "mixed" / "c.png")
    with pytest.raises(BadInput, match=r"images outside any class folder: .*mixed/c\.png"):
        load_manifest(store, tmp_path / "mixed")


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"layout": "yolo"}, "unknown layout 'yolo'"),
        ({"layout": "list"}, "the list layout reads a .csv or .jsonl file"),
        ({"stem": "x.txt"}, "no layout option 'stem'.*did you mean 'stems'"),
        ({"target": "masks"}, "the image_folder layout takes no target option; this layout "
                              r"takes none: drop it, or name the layout the data is in \(--layout"),
    ],
)
def test_unknown_layouts_and_options_are_refused(store, image_folder, options, error):
    with pytest.raises(UsageError, match=error):
        load_manifest(store, image_folder, split="train", **options)
    _assert_nothing_stored(store)


def test_bad_arguments(store, image_folder, tmp_path):
    with pytest.raises(UsageError, match="limit must be a positive integer"):
        load_manifest(store, image_folder, split="train", limit=0)
    with pytest.raises(UsageError, match="no such file or folder"):
        load_manifest(store, tmp_path / "nowhere")
    with pytest.raises(UsageError, match="unknown data source 'kaggle:'"):
        load_manifest(store, "kaggle:cifar10")
    with pytest.raises(UsageError, match="unknown dataset sklearn:iris"):
        load_manifest(store, "sklearn:iris")
    with pytest.raises(UsageError, match="bad split name"):
        load_manifest(store, image_folder, split="../data")
    shutil.rmtree(image_folder / "val")
    _assert_nothing_stored(store)


def test_a_link_out_of_the_image_folder_is_refused(store, image_folder, tmp_path):
    """Issue 32: an image folder's symlink to a file elsewhere was hashed into the manifest."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(image_folder / "val" / "cat" / "00.png", elsewhere / "secret.png")
    os.symlink(elsewhere / "secret.png", image_folder / "val" / "cat" / "zz.png")
    with pytest.raises(BadInput, match=r"^1 files that link out of the data folder: "
                                       r".*cat/zz\.png: links to .*secret\.png"):
        load_manifest(store, image_folder / "val")
    _assert_nothing_stored(store)
    # a link to another split of the same dataset stays inside it
    os.unlink(image_folder / "val" / "cat" / "zz.png")
    os.symlink(image_folder / "train" / "cat" / "00.png", image_folder / "val" / "cat" / "zz.png")
    age(image_folder)
    assert load_manifest(store, image_folder, split="val")


def test_a_linked_class_folder_out_of_the_data_is_refused(store, image_folder, tmp_path):
    shutil.copytree(image_folder / "val" / "cat", tmp_path / "cats")
    os.symlink(tmp_path / "cats", image_folder / "val" / "lynx")
    with pytest.raises(BadInput, match=r"link out of the data folder: .*lynx/00\.png"):
        load_manifest(store, image_folder / "val")
    _assert_nothing_stored(store)


@pytest.mark.parametrize(("suffix", "row"), [
    (".csv", "image,label\ncat/00.png,ca\x00t\n"),
    (".jsonl", '{"image": "cat/00.png", "label": "ca\\u0000t"}\n'),
])
def test_a_nul_in_a_label_is_refused_naming_the_line(store, image_folder, suffix, row):
    """Issue 32: a NUL in a list's label became a class name."""
    path = image_folder / "val" / f"list{suffix}"
    path.write_text(row)
    with pytest.raises(BadInput, match=rf"list\{suffix}:\d: class name .* control character"):
        load_manifest(store, path)
    _assert_nothing_stored(store)
