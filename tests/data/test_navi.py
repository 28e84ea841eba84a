"""NAVI's per-image camera poses read as view pairs, against poses built with scipy."""

from __future__ import annotations

import csv
import json
import shutil

import blake3
import numpy as np
import pytest
from PIL import Image
from scipy.spatial.transform import Rotation

import vbstore
from vbstore.data import _navi as navi
from vbstore.data import load_manifest
from vbstore.errors import BadInput, UsageError

# (object, scene, views: (split or None, seed) per image)
SCENES = {
    ("mug", "multiview-00-pixel_5"): ["train"] * 4 + ["val"] * 3,
    ("mug", "wild_set"): ["train", "train", "val", "val"],
    ("duck", "multiview-01-canon_t4i"): ["train"] * 3 + ["val"] * 2,
    ("shoe", "video-00-pixel_6"): [None] * 4,  # no split field: the object's hash decides
}


def _pose(seed: int) -> tuple[list[float], list[float]]:
    """A world-to-camera pose as NAVI writes it: q as [qw, qx, qy, qz], t in mm."""
    x, y, z, w = Rotation.random(random_state=seed).as_quat()  # scipy: scalar last
    t = np.random.default_rng(seed).uniform(-200, 200, 3)
    return [float(w), float(x), float(y), float(z)], [float(v) for v in t]


def _write(root, scenes=SCENES, size=32):
    seed = 0
    for (obj, scene), splits in scenes.items():
        folder = root / obj / scene
        (folder / "images").mkdir(parents=True)
        annotations = []
        for i, split in enumerate(splits):
            seed += 1
            q, t = _pose(seed)
            name = f"{i:03d}.png"
            pixels = np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / "images" / name)
            item = {"object_id": obj, "camera": {"q": q, "t": t, "focal_length": 40.0,
                                                 "camera_model": "pixel_5"},
                    "filename": name, "image_size": [size, size], "scene_name": scene,
                    "occluded": False}
            if split is not None:
                item["split"] = split
            annotations.append(item)
        (folder / "annotations.json").write_text(json.dumps(annotations))
    (root / next(iter(scenes))[0] / "3d_scan").mkdir()  # the object's scan: no views
    # NAVI's other splits, first in sorted order: not an object
    (root / "custom_splits" / "pairwise_pixel_correspondences").mkdir(parents=True)
    (root / "custom_splits" / "pairwise_pixel_correspondences" / "pairs-multiview.txt"
     ).write_text("mug/multiview-00-pixel_5/images/000.png mug/wild_set/images/001.png 40.0\n")
    return root


@pytest.fixture
def tree(tmp_path):
    return _write(tmp_path / "navi")


def _cameras(root):
    """Every image's (R, t) from its annotation, through scipy."""
    cameras = {}
    for path in root.glob("*/*/annotations.json"):
        prefix = path.parent.relative_to(root).as_posix()
        for item in json.loads(path.read_text()):
            w, x, y, z = item["camera"]["q"]
            cameras[f"{prefix}/images/{item['filename']}"] = (
                Rotation.from_quat([x, y, z, w]).as_matrix(), np.array(item["camera"]["t"]))
    return cameras


def _split_of(obj, split):
    return split if split is not None else (
        "val" if int(blake3.blake3(obj.encode()).hexdigest()[:8], 16) % 5 == 0 else "train")


def test_relative_poses_take_camera_a_to_camera_b(store, tree):
    view = load_manifest(store, tree, split="val")  # detected
    assert view.layout == "navi"
    cameras = _cameras(tree)
    expected = sum(
        n * (n - 1) // 2 for n in (
            sum(_split_of(obj, s) == "val" for s in splits)
            for (obj, _), splits in SCENES.items()))
    pairs = view.doc["pairs"]
    assert len(pairs) == expected > 0
    point = np.array([10.0, -20.0, 30.0])  # a point of the object, in scan coordinates (mm)
    for a, b, qw, qx, qy, qz, *t in pairs:
        name_a, name_b = view.names[a], view.names[b]
        assert name_a.rsplit("/", 2)[0] == name_b.rsplit("/", 2)[0]  # one scene
        (r_a, t_a), (r_b, t_b) = cameras[name_a], cameras[name_b]
        rot = Rotation.from_quat([qx, qy, qz, qw]).as_matrix()
        np.testing.assert_allclose(rot, r_b @ r_a.T, atol=1e-9)
        np.testing.assert_allclose(t, t_b - r_b @ r_a.T @ t_a, atol=1e-9)
        # the pairs layout's convention: X_b = R X_a + t for the same world point
        np.testing.assert_allclose(rot @ (r_a @ point + t_a) + t, r_b @ point + t_b, atol=1e-9)
        assert qw >= 0
    train = load_manifest(store, tree, split="train", layout="navi")
    assert not set(train.names) & set(view.names)  # NAVI's per-image split
    for split, read in (("train", train), ("val", view)):  # the objects without one: hashed
        expected = {f"{obj}/{scene}/images/{i:03d}.png" for (obj, scene), splits in SCENES.items()
                    for i, s in enumerate(splits) if _split_of(obj, s) == split}
        assert set(read.names) == expected
    assert load_manifest(store, tree, split="val").id == view.id


def test_an_unnormalised_quaternion_is_normalised_as_navi_does(store, tree):
    before = load_manifest(store, tree, split="val").doc["pairs"]
    path = tree / "mug" / "wild_set" / "annotations.json"
    doc = json.loads(path.read_text())
    doc[2]["camera"]["q"] = [2 * v for v in doc[2]["camera"]["q"]]
    path.write_text(json.dumps(doc))
    after = load_manifest(store, tree, split="val").doc["pairs"]
    np.testing.assert_allclose(np.array(after), np.array(before), atol=1e-12)


def test_pairs_per_scene_are_the_lowest_id_hashes(store, tmp_path, monkeypatch):
    root = _write(tmp_path / "navi", {("cup", "multiview-00-x"): ["val"] * 6})
    monkeypatch.setattr(navi, "PAIRS_PER_SCENE", 4)
    view = load_manifest(store, root, split="val")
    names = [f"{i:03d}.png" for i in range(6)]
    ids = [f"cup/multiview-00-x/{a}|{b}" for i, a in enumerate(names) for b in names[i + 1:]]
    kept = sorted(sorted(ids, key=lambda k: blake3.blake3(k.encode()).hexdigest())[:4])
    got = sorted(f"cup/multiview-00-x/{view.names[a].rsplit('/', 1)[1]}|"
                 f"{view.names[b].rsplit('/', 1)[1]}" for a, b, *_ in view.doc["pairs"])
    assert got == kept


def _as_pairs_csv(view, root):
    """The manifest's pairs and images written out in the pairs layout, under the same names."""
    root.mkdir()
    with open(root / "pairs.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "image_a", "image_b", "qw", "qx", "qy", "qz", "tx", "ty", "tz"])
        for a, b, *pose in view.doc["pairs"]:
            name_a, name_b = view.names[a], view.names[b]
            writer.writerow([f"{name_a}|{name_b}", name_a, name_b, *map(repr, pose)])
    for name in view.names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(view.root / name, root / name)


def test_navi_and_the_same_pairs_as_a_table_give_the_same_result(store, tree, tmp_path):
    views = {s: load_manifest(store, tree, split=s) for s in ("train", "val")}
    tables = tmp_path / "table"
    tables.mkdir()
    for split, view in views.items():
        _as_pairs_csv(view, tables / split)
        table = load_manifest(store, tables, split=split, layout="pairs")
        assert table.names == view.names
        assert table.samples == view.samples
        assert table.doc["pairs"] == view.doc["pairs"]
    common = dict(store=store, weights="random", input_size=32, progress=False,
                  params={"epochs": 5})
    from_navi = vbstore.get_result("test_vit", "relative_pose", str(tree), str(tree),
                                   split="val", train_split="train",
                                   **common)  # a pair task finds the NAVI tree itself
    from_table = vbstore.get_result("test_vit", "relative_pose", str(tables), str(tables),
                                    split="val", train_split="train", **common)
    assert from_navi.metrics == from_table.metrics
    assert set(from_navi.metrics) == {"rotation_error", "translation_error", "acc@15deg",
                                      "acc@30deg"}
    assert from_navi.record.data["eval"]["manifest"] != from_table.record.data["eval"]["manifest"]


def _one_line(exc, path):
    message = str(exc.value)
    assert str(path) in message
    assert "\n" not in message
    return message


def test_bad_navi_scenes_are_one_line_naming_the_file(store, tree):
    scene = tree / "mug" / "wild_set"
    path = scene / "annotations.json"
    good = path.read_text()
    path.unlink()
    with pytest.raises(BadInput, match="missing: a NAVI scene needs its annotations") as exc:
        load_manifest(store, tree, split="val", layout="navi")
    _one_line(exc, path)
    doc = json.loads(good)
    doc[1]["filename"] = "009.png"
    path.write_text(json.dumps(doc))
    with pytest.raises(BadInput, match=r"entry 1 \(009\.png\): images/009\.png does not exist"
                       ) as exc:
        load_manifest(store, tree, split="val")
    _one_line(exc, path)
    for q in ([1.0, 0.0, 0.0], [0, 0, 0, 0], ["1", 0, 0, 0], None):
        doc = json.loads(good)
        doc[0]["camera"]["q"] = q
        path.write_text(json.dumps(doc))
        with pytest.raises(BadInput, match=r"entry 0 \(000\.png\): camera q") as exc:
            load_manifest(store, tree, split="val")
        _one_line(exc, path)
    path.write_text(json.dumps(json.loads(good)[:1]))
    with pytest.raises(BadInput, match="a pair with one view") as exc:
        load_manifest(store, tree, split="val")
    _one_line(exc, path)
    path.write_text(good)
    turned = scene / "images" / "001.png"
    exif = Image.Exif()
    exif[0x0112] = 6  # shown turned by 90 degrees
    Image.open(turned).save(turned, exif=exif)
    with pytest.raises(BadInput, match="EXIF orientation 6") as exc:
        load_manifest(store, tree, split="train")
    _one_line(exc, turned)
    path.write_text("{not json")
    with pytest.raises(BadInput) as exc:
        load_manifest(store, tree, split="val")
    _one_line(exc, path)


def test_navi_needs_a_split_it_has(store, tree):
    with pytest.raises(UsageError, match="NAVI needs --split") as exc:
        load_manifest(store, tree)
    assert exc.value.hint == "splits found: train, val"
    with pytest.raises(UsageError, match=r"no image of .* is in split 'test'"):
        load_manifest(store, tree, split="test")


def test_navi_read_as_pairs_names_the_navi_layout(store, tree):
    with pytest.raises(UsageError, match="it is laid out as NAVI") as exc:
        load_manifest(store, tree, split="val", layout="pairs")
    assert exc.value.hint == "read it with --layout navi"
    # the Python API spells the field its own way, once (it also said "(layout='navi')",
    # a keyword no function takes)
    from vbstore._fields import spell_keyword

    exc.value.spell_fields(spell_keyword)
    assert exc.value.hint == "read it with data_options={'layout': 'navi'}"


# VisBench's pair draw (--partners, --max-angle, --pair-seed, --stride): its rules, checked
# on the pairs drawn


def _angle_between(r_a, r_b):
    return float(np.degrees(Rotation.from_matrix(r_b @ r_a.T).magnitude()))


def test_visbench_draw_follows_its_rules(store, tree):
    cameras = _cameras(tree)
    default = load_manifest(store, tree, split="val")
    one = load_manifest(store, tree, split="train", partners=1, max_angle=120.0)
    many = load_manifest(store, tree, split="train", partners=3, max_angle=120.0)
    val = load_manifest(store, tree, split="val", partners=3, max_angle=120.0)
    assert val.id != default.id  # another protocol, another manifest
    for view in (one, many, val):
        for a, b, *_ in view.doc["pairs"]:
            r_a, r_b = cameras[view.names[a]][0], cameras[view.names[b]][0]
            assert 0 < _angle_between(r_a, r_b) <= 120 + 1e-6
    anchors = lambda view: [view.names[a] for a, *_ in view.doc["pairs"]]  # noqa: E731
    # a one-partner draw is the first partner of a larger one; train anchors get up to 3,
    # val anchors one (however many are asked)
    named = lambda view: {(view.names[a], view.names[b]) for a, b, *_ in view.doc["pairs"]}  # noqa: E731
    assert named(one) <= named(many)
    counts = {name: anchors(many).count(name) for name in set(anchors(many))}
    assert max(counts.values()) > 1
    assert all(n <= 3 for n in counts.values())
    assert len(anchors(val)) == len(set(anchors(val)))
    # deterministic under the seed; another seed, other pairs; stride thins the anchors
    assert load_manifest(store, tree, split="train", partners=3, max_angle=120.0).id == many.id
    strided = load_manifest(store, tree, split="train", stride=2)
    assert len(strided.doc["pairs"]) < len(one.doc["pairs"]) + 1
    wide = load_manifest(store, tree, split="train", max_angle=150.0)
    assert len(wide.doc["pairs"]) >= len(one.doc["pairs"])  # one pair per eligible anchor


def test_visbench_draw_options_are_checked(store, tree):
    with pytest.raises(UsageError, match="max_angle"):
        load_manifest(store, tree, split="val", max_angle=200.0)
    with pytest.raises(UsageError, match="partners"):
        load_manifest(store, tree, split="val", partners=0)
