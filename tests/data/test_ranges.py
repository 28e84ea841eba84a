"""Annotations checked against their images, names kept inside the data folder, and hostile
files refused in one line naming the file (issue 21's PoCs: an SPair box of
[-5, -5, 1e300, 1e300] scored pck 1.0; a 150-byte RLE claiming 40000x40000 tried to allocate
1.6 GB; a 300 KB NIGHTS cell raised ``_csv.Error`` and 1e5 ``[`` in an SPair file a
RecursionError; lists accepted ``../`` paths and links out of the data root)."""

from __future__ import annotations

import csv
import json

import pytest
from data_support import write_image
from PIL import Image
from test_boxes import _coco

from vbstore.data import coco_index, coco_mask, load_manifest
from vbstore.errors import BadInput


def _spair(root, **doc):
    (root / "JPEGImages" / "cat").mkdir(parents=True)
    (root / "PairAnnotation" / "test").mkdir(parents=True)
    for name in ("a.jpg", "b.jpg"):
        Image.new("RGB", (40, 30), (50, 60, 70)).save(root / "JPEGImages" / "cat" / name)
    fields = {"src_imname": "a.jpg", "trg_imname": "b.jpg", "category": "cat",
              "src_kps": [[1, 2], [3, 4]], "trg_kps": [[5, 6], [7, 8]],
              "trg_bndbox": [0, 0, 20, 10], **doc}
    path = root / "PairAnnotation" / "test" / "000001-a-b:cat.json"
    path.write_text(json.dumps(fields))
    return path


def test_a_spair_box_outside_its_image_is_refused_naming_the_file(store, tmp_path):
    _spair(tmp_path / "ok")
    assert load_manifest(store, tmp_path / "ok", split="test").doc["keypoint_pairs"]
    _spair(tmp_path / "huge", trg_bndbox=[-5, -5, 1e300, 1e300])
    with pytest.raises(BadInput, match=r"000001-a-b:cat\.json: trg_bndbox holds \[-5, -5\], "
                                       r"outside its 40x30 image"):
        load_manifest(store, tmp_path / "huge", split="test")
    _spair(tmp_path / "kps", trg_kps=[[5, 6], [7, 800]])
    with pytest.raises(BadInput, match=r"trg_kps holds \[7, 800\], outside its 40x30 image"):
        load_manifest(store, tmp_path / "kps", split="test")


def test_a_deeply_nested_spair_file_is_one_line(store, tmp_path):
    path = _spair(tmp_path / "deep")
    path.write_text("[" * 100_000)
    with pytest.raises(BadInput, match=r"000001-a-b:cat\.json: JSON nested too deeply"):
        load_manifest(store, tmp_path / "deep", split="test")


def test_spair_names_stay_inside_the_tree(store, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    Image.new("RGB", (40, 30)).save(outside / "x.jpg")
    _spair(tmp_path / "up", category="../../elsewhere", src_imname="x.jpg")
    with pytest.raises(BadInput, match=r"leads out of the data folder"):
        load_manifest(store, tmp_path / "up", split="test")
    _spair(tmp_path / "link")
    target = tmp_path / "link" / "JPEGImages" / "cat" / "a.jpg"
    target.unlink()
    target.symlink_to(outside / "x.jpg")
    with pytest.raises(BadInput, match=r"'JPEGImages/cat/a\.jpg' is a link out of the data "):
        load_manifest(store, tmp_path / "link", split="test")


RLE_BOMB = {"size": [40000, 40000], "counts": "0" + "k" * 140}  # ~150 bytes


def test_a_coco_rle_claiming_another_size_than_its_image_is_refused(store, tmp_path):
    with pytest.raises(BadInput, match=r"RLE mask is \[40000, 40000\] \(\[height, width\]\), "
                                       r"its image 20x30"):
        coco_mask(RLE_BOMB, 30, 20)
    root = _coco(tmp_path / "coco", [{"image_id": 1, "category_id": 1, "bbox": [0, 0, 5, 5],
                                      "segmentation": RLE_BOMB}])
    with pytest.raises(BadInput, match=r"instances_val\.json: annotation 1's RLE mask is"):
        load_manifest(store, root, split="val")
    path = root / "annotations" / "instances_val.json"
    with pytest.raises(BadInput, match="RLE mask is"):
        coco_index(path.read_bytes(), path, ["box", "sphere"])
    assert coco_mask({"size": [20, 30], "counts": [0, 600]}, 30, 20).all()


def _nights(root, rows):
    for name in ("r.png", "a.png", "b.png"):
        write_image(root / name, 3)
    with open(root / "data.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "left_vote", "right_vote", "votes", "ref_path", "left_path",
                         "right_path"])
        writer.writerows(rows)
    return root


def test_a_300_kib_nights_cell_is_one_line_naming_the_table(store, tmp_path):
    root = _nights(tmp_path / "n", [["0", "1", "5", "6", "r.png", "a.png", "b.png"],
                                    ["1", "1", "5", "6", "r.png", "a.png", "x" * 300_000]])
    with pytest.raises(BadInput, match=r"malformed triplet tables: .*data\.csv:3: a cell is "
                                       r"longer than 128 KiB"):
        load_manifest(store, root, layout="triplets")


def test_nights_paths_stay_inside_the_data_folder(store, tmp_path):
    write_image(tmp_path / "secret.png", 9)
    root = _nights(tmp_path / "n", [["0", "1", "5", "6", "r.png", "a.png", "../secret.png"]])
    with pytest.raises(BadInput, match=r"data\.csv:2: right_path '\.\./secret\.png' leads out"):
        load_manifest(store, root, layout="triplets")
    root = _nights(tmp_path / "m", [["0", "1", "5", "6", "r.png", "a.png", "b.png"]])
    (root / "b.png").unlink()
    (root / "b.png").symlink_to(tmp_path / "secret.png")
    with pytest.raises(BadInput, match=r"data\.csv:2: 'b\.png' is a link out of the data folder"):
        load_manifest(store, root, layout="triplets")


def test_list_paths_stay_inside_the_list_folder(store, tmp_path):
    write_image(tmp_path / "secret.png", 9)
    root = tmp_path / "list"
    write_image(root / "a.png", 1)
    (root / "l.csv").write_text("image,label\na.png,x\n../secret.png,y\n")
    with pytest.raises(BadInput, match=r"l\.csv:3: '\.\./secret\.png' leads out of the list's"):
        load_manifest(store, root / "l.csv")
    (root / "b.png").symlink_to(tmp_path / "secret.png")
    (root / "l.csv").write_text("image,label\na.png,x\nb.png,y\n")
    with pytest.raises(BadInput, match=r"l\.csv:3: 'b\.png' is a link out of the data folder"):
        load_manifest(store, root / "l.csv")
    (root / "inner").mkdir()
    (root / "inner" / "c.png").symlink_to(root / "a.png")  # a link within the folder is fine
    (root / "l.csv").write_text("image,label\na.png,x\ninner/c.png,y\n")
    assert len(load_manifest(store, root / "l.csv").samples) == 2
