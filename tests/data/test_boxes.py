"""Box annotations: the VOC and JSON layouts, the crop-aware box transform, every bad input
refused in one line with nothing stored, and the boxes ``scenes`` writes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from vbstore import Store
from vbstore.backbones import BackboneCfg
from vbstore.data import (
    VOC_CLASSES,
    align_boxes,
    load_manifest,
    make_scenes,
    parse_boxes,
    write_png,
)
from vbstore.errors import BadInput, UsageError

VOC_XML = """<annotation><size><width>{w}</width><height>{h}</height><depth>3</depth></size>
{objects}</annotation>"""
VOC_OBJ = """<object><name>{name}</name><difficult>{difficult}</difficult>
<bndbox><xmin>{x0}</xmin><ymin>{y0}</ymin><xmax>{x1}</xmax><ymax>{y1}</ymax></bndbox></object>"""


def _voc(root, boxes_by_stem, split="val", size=(40, 28)):
    for folder in ("JPEGImages", "Annotations", "ImageSets/Main"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    for i, (stem, objects) in enumerate(boxes_by_stem.items()):
        pixels = np.full((size[1], size[0], 3), 40 * i % 255, np.uint8)
        Image.fromarray(pixels).save(root / "JPEGImages" / f"{stem}.jpg")
        body = "".join(VOC_OBJ.format(**o) for o in objects)
        (root / "Annotations" / f"{stem}.xml").write_text(VOC_XML.format(w=size[0], h=size[1],
                                                                         objects=body))
    (root / "ImageSets/Main" / f"{split}.txt").write_text("".join(f"{s}\n" for s in boxes_by_stem))
    return root


def _obj(name="dog", x0=1, y0=1, x1=10, y1=10, difficult=0):
    return {"name": name, "x0": x0, "y0": y0, "x1": x1, "y1": y1, "difficult": difficult}


def test_voc_layout_reads_boxes_difficult_flags_and_class_indices(tmp_path):
    root = _voc(tmp_path / "voc", {"a": [_obj("dog", 1, 2, 10, 12), _obj("cat", 5, 5, 40, 28, 1)],
                                   "b": []})
    view = load_manifest(Store(), root, split="val")
    assert view.layout == "voc"
    assert view.classes == list(VOC_CLASSES)
    assert view.target_type == "boxes"
    assert [s["target_name"] for s in view.samples] == ["Annotations/a.xml", "Annotations/b.xml"]
    boxes = parse_boxes(view.target_path(0).read_bytes(), view.target_path(0), view.classes)
    dog, cat = VOC_CLASSES.index("dog"), VOC_CLASSES.index("cat")
    # VOC's 1-based inclusive pixels -> 0-based, x1/y1 exclusive
    np.testing.assert_array_equal(boxes.rows, [[0, 1, 10, 12, dog, 0], [4, 4, 40, 28, cat, 1]])
    assert (boxes.width, boxes.height) == (40, 28)


def test_a_class_list_file_replaces_the_voc_classes(tmp_path):
    root = _voc(tmp_path / "voc", {"a": [_obj("widget")]})
    (tmp_path / "classes.txt").write_text("gadget\nwidget\n")
    view = load_manifest(Store(), root, split="val", classes=str(tmp_path / "classes.txt"))
    assert view.classes == ["gadget", "widget"]


@pytest.mark.parametrize(("content", "match"), [
    ("", "an empty annotation file"),
    ("<annotation><size>", "malformed XML"),
    (VOC_XML.format(w=40, h=28, objects=VOC_OBJ.format(**_obj("unicorn"))),
     "class 'unicorn' is not in the class list"),
    (VOC_XML.format(w=40, h=28, objects=VOC_OBJ.format(**_obj(x1=41))),
     r"object 1 \(0, 0, 41, 10\) lies outside the 40x28 image"),
    (VOC_XML.format(w=40, h=28, objects=VOC_OBJ.format(**_obj(x0=9, x1=5))), "has no area"),
])
def test_bad_voc_annotations_are_refused_naming_the_file_and_storing_nothing(tmp_path, content,
                                                                             match):
    root = _voc(tmp_path / "voc", {"a": [_obj()], "b": [_obj()]})
    (root / "Annotations" / "b.xml").write_text(content)
    store = Store()
    with pytest.raises(BadInput, match=match) as info:
        load_manifest(store, root, split="val")
    assert str(root / "Annotations" / "b.xml") in str(info.value)
    assert "\n" not in str(info.value)
    assert info.value.hint
    assert store.ls() == []  # nothing stored
    assert not list((store.root / "objects").rglob("*[0-9a-f]"))


def _dense_boxes(root, doc):
    for split in ("val",):
        write_png(root / split / "images" / "0000.png", np.zeros((20, 30, 3), np.uint8))
        (root / split / "boxes").mkdir(parents=True, exist_ok=True)
        (root / split / "boxes" / "0000.json").write_text(doc)
    (root / "classes.txt").write_text("box\nsphere\n")
    return root


@pytest.mark.parametrize(("doc", "match"), [
    ("{not json", "malformed JSON"),
    ("   ", "an empty annotation file"),
    (json.dumps({"width": 30, "height": 20, "objects": [{"box": [0, 0, 5, 5], "class": "cone"}]}),
     "class 'cone' is not in the class list"),
    (json.dumps({"width": 30, "height": 20, "objects": [{"box": [-1, 0, 5, 5], "class": "box"}]}),
     "lies outside the 30x20 image"),
    (json.dumps({"width": 30, "height": 20, "objects": [{"box": [0, 0, 5], "class": "box"}]}),
     r"has no box \[x0, y0, x1, y1\]"),
])
def test_bad_json_box_files_are_refused_naming_the_file(tmp_path, doc, match):
    root = _dense_boxes(tmp_path / "d", doc)
    with pytest.raises(BadInput, match=match) as info:
        load_manifest(Store(), root, split="val", target="boxes")
    assert str(root / "val" / "boxes" / "0000.json") in str(info.value)


def test_json_boxes_need_a_class_list(tmp_path):
    root = _dense_boxes(tmp_path / "d", json.dumps({"width": 30, "height": 20, "objects": []}))
    (root / "classes.txt").unlink()
    with pytest.raises(UsageError, match="need a class list"):
        load_manifest(Store(), root, split="val", target="boxes")


def test_box_transform_matches_a_hand_computation_of_resize_and_centre_crop():
    cfg = BackboneCfg(input_size=32, resize=32, mean=(0.5,) * 3, std=(0.5,) * 3)
    # a 40x28 image: the shorter side 28 -> 32, so 40 -> int(32 * 40 / 28) = 45; crop 32 wide
    # from left round(13 / 2) = 6 (Python rounds half to even), top 0
    assert cfg.geometry(40, 28) == ((45, 32), (6, 0, 38, 32))
    s = 32 / 28
    rows = np.array([[0, 0, 10, 7, 0, 0],      # left edge: clipped at the crop's left
                     [10, 7, 30, 21, 1, 1],    # inside: scaled and shifted
                     [0, 0, 4, 28, 0, 0],      # wholly left of the crop: dropped
                     [30, 14, 40, 28, 1, 0]])  # right edge: clipped at the crop's right
    kept_rows, kept = align_boxes(rows, cfg.geometry, (40, 28))
    assert kept.tolist() == [True, True, False, True]
    x = lambda v: min(max(v * 45 / 40 - 6, 0), 32)  # noqa: E731
    y = lambda v: min(max(v * s, 0), 32)  # noqa: E731
    expected = [[x(0), y(0), x(10), y(7), 0, 0], [x(10), y(7), x(30), y(21), 1, 1],
                [x(30), y(14), x(40), y(28), 1, 0]]
    np.testing.assert_allclose(kept_rows, expected, rtol=1e-6)
    assert kept_rows[0, 0] == 0
    assert kept_rows[2, 2] == 32
    squash = BackboneCfg(input_size=32, resize=32, mean=(0.5,) * 3, std=(0.5,) * 3, crop="squash")
    squashed, _ = align_boxes(rows[1:2], squash.geometry, (40, 28))
    np.testing.assert_allclose(squashed[0, :4], [10 * 32 / 40, 7 * 32 / 28, 30 * 32 / 40,
                                                 21 * 32 / 28], rtol=1e-6)


def test_scenes_boxes_are_the_tight_boxes_of_the_instance_pngs(tmp_path):
    root = make_scenes(tmp_path / "s", per_split=3, seed=1, size=32)
    assert (root / "classes.txt").read_text().split() == ["box", "sphere"]
    for i in range(3):
        doc = json.loads((root / "val" / "boxes" / f"{i:04d}.json").read_bytes())
        ids = np.array(Image.open(root / "val" / "instances" / f"{i:04d}.png"))
        labels = np.array(Image.open(root / "val" / "labels" / f"{i:04d}.png"))
        np.testing.assert_array_equal(ids > 0, labels >= 2)  # instances cover the objects
        assert sorted(o["instance"] for o in doc["objects"]) == sorted(set(np.unique(ids)) - {0})
        for o in doc["objects"]:
            ys, xs = np.nonzero(ids == o["instance"])
            assert o["box"] == [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]
            assert o["class"] == ("box", "sphere")[int(labels[ys[0], xs[0]]) - 2]
    view = load_manifest(Store(), root, split="val", target="boxes")
    assert view.classes == ["box", "sphere"]
    assert view.target_type == "boxes"


def _coco(root, anns, size=(30, 20), split="val", names=("a.png", "b.png")):
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(names):
        write_png(root / split / name, np.full((size[1], size[0], 3), 30 * i, np.uint8))
    doc = {"images": [{"id": i + 1, "file_name": n, "width": size[0], "height": size[1]}
                      for i, n in enumerate(names)],
           "categories": [{"id": 3, "name": "sphere"}, {"id": 1, "name": "box"}],
           "annotations": [{"id": k + 1, "iscrowd": 0, **a} for k, a in enumerate(anns)]}
    (root / "annotations" / f"instances_{split}.json").write_text(json.dumps(doc))
    return root


def test_coco_layout_reads_boxes_crowds_and_category_names_in_id_order(tmp_path):
    root = _coco(tmp_path / "coco", [
        {"image_id": 1, "category_id": 3, "bbox": [2, 3, 10, 5],
         "segmentation": [[2, 3, 12, 3, 12, 8, 2, 8]]},
        {"image_id": 2, "category_id": 1, "bbox": [0, 0, 30, 20], "iscrowd": 1,
         "segmentation": {"size": [20, 30], "counts": [0, 600]}}])
    view = load_manifest(Store(), root, split="val")
    assert view.layout == "coco"
    assert view.target_type == "boxes"
    assert view.classes == ["box", "sphere"]  # category ids 1, 3
    assert {s["target_name"] for s in view.samples} == {"annotations/instances_val.json"}
    from vbstore.data import coco_index, coco_mask

    path = view.target_path(0)
    index = coco_index(path.read_bytes(), path, view.classes)
    np.testing.assert_array_equal(index["a.png"].rows, [[2, 3, 12, 8, 1, 0]])
    np.testing.assert_array_equal(index["b.png"].rows, [[0, 0, 30, 20, 0, 1]])  # crowd: difficult
    mask = coco_mask(index["a.png"].segmentations[0], 30, 20)
    assert mask.shape == (20, 30)
    assert mask[4:8, 3:12].all()
    assert not mask[10:].any()
    assert coco_mask(index["b.png"].segmentations[0], 30, 20).all()


@pytest.mark.parametrize(("ann", "match"), [
    ({"image_id": 1, "category_id": 7, "bbox": [0, 0, 5, 5]}, "class 7 is not in the class list"),
    ({"image_id": 1, "category_id": 1, "bbox": [25, 0, 10, 5]}, "lies outside the 30x20 image"),
    ({"image_id": 9, "category_id": 1, "bbox": [0, 0, 5, 5]}, "image 9, which is not listed"),
])
def test_bad_coco_annotations_are_refused_naming_the_file(tmp_path, ann, match):
    root = _coco(tmp_path / "coco", [ann])
    store = Store()
    with pytest.raises(BadInput, match=match) as info:
        load_manifest(store, root, split="val")
    assert "instances_val.json" in str(info.value)
    assert store.ls() == []


def test_an_image_missing_from_the_coco_file_is_named(tmp_path):
    root = _coco(tmp_path / "coco", [])
    write_png(root / "val" / "stray.png", np.zeros((20, 30, 3), np.uint8))
    with pytest.raises(BadInput, match=r"lists no image 'stray\.png'"):
        load_manifest(Store(), root, split="val")
