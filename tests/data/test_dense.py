import shutil

import numpy as np
import pytest
from data_support import age, write_image, write_mask

from vbstore.data import load_manifest
from vbstore.errors import BadInput, UsageError


def test_dense_split_pairs_images_and_targets_by_stem(store, dense_folder):
    view = load_manifest(store, dense_folder, split="train")
    assert view.layout == "dense"
    assert view.target_type == "masks"
    assert view.classes == []
    assert view.names == [f"images/s{i}.jpg" for i in range(5)]
    assert [s["target_name"] for s in view.samples] == [f"masks/s{i}.png" for i in range(5)]
    assert view.target_path(2) == dense_folder / "train" / "masks" / "s2.png"
    assert view.samples[0]["target"] == store.file_states.hash([view.target_path(0)])[0]
    with pytest.raises(UsageError, match="not one label"):
        view.labels()


def test_dense_limit_is_by_stem_and_the_copy_keeps_the_id(store, dense_folder, tmp_path):
    full = load_manifest(store, dense_folder, split="train")
    limited = load_manifest(store, dense_folder, split="train", limit=2)
    assert len(limited) == 2
    assert limited.doc["limit"] == 2
    assert {s["target_name"][6:-4] for s in limited.samples} == {n[7:-4] for n in limited.names}
    copy = tmp_path / "copy"
    shutil.copytree(dense_folder, copy)
    assert load_manifest(store, copy, split="train").id == full.id


def test_a_changed_target_changes_the_id(store, dense_folder):
    before = load_manifest(store, dense_folder, split="val")
    write_mask(dense_folder / "val" / "masks" / "s1.png", seed=42)
    age(dense_folder)
    after = load_manifest(store, dense_folder, split="val")
    assert after.id != before.id
    assert [a["image"] for a in after.samples] == [b["image"] for b in before.samples]


def test_several_target_folders_need_target(store, dense_folder):
    for i in range(3):
        path = dense_folder / "val" / "depth" / f"s{i}.npy"
        path.parent.mkdir(exist_ok=True)
        np.save(path, np.full((8, 8), i, dtype=np.float32))
    with pytest.raises(UsageError, match=r"2 target folders.*depth, masks.*--target"):
        load_manifest(store, dense_folder, split="val")
    depth = load_manifest(store, dense_folder, split="val", target="depth")
    assert depth.target_type == "depth"
    assert depth.samples[0]["target_name"] == "depth/s0.npy"
    typed = load_manifest(store, dense_folder, split="val", target="depth", target_type="disparity")
    assert typed.target_type == "disparity"
    assert typed.id != depth.id


def test_corrupt_npy_target_is_caught(store, dense_folder):
    (dense_folder / "val" / "masks" / "s1.png").unlink()
    (dense_folder / "val" / "masks" / "s1.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(BadInput, match=r"1 unreadable or corrupt targets: .*s1\.npy"):
        load_manifest(store, dense_folder, split="val")
    assert store.ls() == []


def test_ambiguous_stems_are_refused(store, dense_folder):
    write_image(dense_folder / "val" / "images" / "s0.png", 7)
    with pytest.raises(BadInput, match="2 images share the stem 's0'"):
        load_manifest(store, dense_folder, split="val")


def _voc(root):
    for i in range(6):
        write_image(root / "JPEGImages" / f"2007_{i:06d}.jpg", i)
        if i != 5:
            write_mask(root / "SegmentationClass" / f"2007_{i:06d}.png", i)
    sets = root / "ImageSets" / "Segmentation"
    sets.mkdir(parents=True)
    (sets / "train.txt").write_text("2007_000000\n2007_000001\n2007_000002\n")
    (sets / "val.txt").write_text("# official val\n2007_000003\n\n2007_000004\n")
    age(root)
    return sets


def test_stems_list_selects_the_split(store, tmp_path):
    root = tmp_path / "VOC2012"
    sets = _voc(root)
    options = {"stems": sets / "val.txt", "train_stems": sets / "train.txt", "target_type": "masks"}
    val = load_manifest(store, root, split="val", **options)
    train = load_manifest(store, root, split="train", **options)
    assert val.layout == "stems"
    assert val.target_type == "masks"
    assert val.names == ["JPEGImages/2007_000003.jpg", "JPEGImages/2007_000004.jpg"]
    assert len(train) == 3
    assert train.samples[0]["target_name"] == "SegmentationClass/2007_000000.png"
    relative = load_manifest(
        store,
        root,
        split="val",
        stems="ImageSets/Segmentation/val.txt",
        image_dir="JPEGImages",
        target_dir="SegmentationClass",
        target_type="masks",
    )
    assert relative.id == val.id
    assert load_manifest(store, root, split="val", limit=1, **options).names[0] in val.names


def test_stems_without_a_target_are_named(store, tmp_path):
    root = tmp_path / "VOC2012"
    sets = _voc(root)
    (sets / "bad.txt").write_text("2007_000004\n2007_000005\n2007_000009\n")
    with pytest.raises(
        BadInput,
        match=r"2 images and targets that do not pair: .*2007_000005.jpg: no target in "
        r"SegmentationClass/; 2007_000009: no image in JPEGImages/ and no target",
    ):
        load_manifest(store, root, stems=sets / "bad.txt")
    (sets / "classes.txt").write_text("2007_000001  1\n")
    with pytest.raises(BadInput, match="expected one stem"):
        load_manifest(store, root, stems=sets / "classes.txt")
    with pytest.raises(UsageError, match="needs a stems list"):
        load_manifest(store, root, layout="stems", train_stems=sets / "train.txt", split="val")
    assert store.ls() == []
