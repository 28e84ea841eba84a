"""View pairs with poses (the pairs layout, scenes' second views) and flat image folders."""

from __future__ import annotations

import csv

import blake3
import numpy as np
import pytest
from PIL import Image
from scipy.spatial.transform import Rotation

from vbstore.data import load_manifest, make_scenes
from vbstore.data._scenes import FOV, quaternion
from vbstore.errors import BadInput, UsageError

POSE = {"qw": 1.0, "qx": 0.0, "qy": 0.0, "qz": 0.0, "tx": 0.5, "ty": 0.0, "tz": 0.0}


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    return make_scenes(tmp_path_factory.mktemp("scenes"), per_split=3, seed=3, size=48)


def _digest(path):
    return blake3.blake3(path.read_bytes()).hexdigest()


def test_the_first_views_and_their_targets_keep_their_bytes(scenes):
    """Pinned from the generator before second views existed: adding pairs changed nothing."""
    pinned = {
        "val/images/0002.png": "151b19342e851e2256e30111c041bcae9848bb7ec17fa36ff633569f302cb62b",
        "val/depth/0001.png": "065c423cac47abe4b3198e8cdb421c8dd8eb05cb869637f46acaf8afd7493627",
        "train/keypoints/0000.png":
            "e05a30ee861543bf3466519ae04f31af46e8d0373469c73bff488a6d36cf0c1f",
        "train/normals/0002.png":
            "51054db00e6e1bbb01e2aef5df5b7605aafa626e58545f349bf257338885e38b",
    }
    for name, expected in pinned.items():
        assert _digest(scenes / name) == expected, name


def test_scene_pairs_read_as_a_manifest_with_exact_poses(store, scenes):
    view = load_manifest(store, scenes, split="val", layout="pairs")
    assert view.layout == "pairs"
    assert len(view.samples) == 6
    pairs = view.doc["pairs"]
    assert len(pairs) == 3
    for a, b, *pose in pairs:
        assert view.names[a].startswith("images/")
        assert view.names[b].startswith("views/")
        rot = Rotation.from_quat([pose[1], pose[2], pose[3], pose[0]])  # scipy: scalar last
        angle = np.degrees(rot.magnitude())
        assert 0 < angle < 60  # turned by up to 25 degrees about the target, plus the look jitter
        assert np.linalg.norm(pose[4:]) > 0
    limited = load_manifest(store, scenes, split="val", layout="pairs", limit=2)
    assert len(limited.doc["pairs"]) == 2
    assert len(limited.samples) == 4


def test_quaternion_matches_scipy():
    for seed in range(20):
        rot = Rotation.random(random_state=seed)
        q = quaternion(rot.as_matrix())
        x, y, z, w = rot.as_quat()
        expected = np.array([w, x, y, z]) * (1 if w >= 0 else -1)
        np.testing.assert_allclose(q, expected, atol=1e-9)


def test_flow_lands_on_the_same_surface_in_the_second_view(scenes):
    """Exact correspondences: a pixel of A and where its flow lands in B show the same point, so
    their depths agree with the pose (checked against the written depth maps, in mm)."""
    with open(scenes / "val" / "pairs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    for i, row in enumerate(rows):
        flow = np.load(scenes / "val" / "flow" / f"{i:04d}.npy")
        visible = ~np.isnan(flow[..., 0])
        assert visible.mean() > 0.3
        size = flow.shape[0]
        focal = (size / 2) / np.tan(FOV / 2)
        z_a = np.asarray(Image.open(scenes / "val" / "depth" / f"{i:04d}.png"), float) / 1000
        rot = Rotation.from_quat([float(row[k]) for k in ("qx", "qy", "qz", "qw")]).as_matrix()
        t = np.array([float(row[k]) for k in ("tx", "ty", "tz")])
        rows_, cols = np.nonzero(visible)
        x = (cols + 0.5 - size / 2) / focal * z_a[rows_, cols]
        y = -(rows_ + 0.5 - size / 2) / focal * z_a[rows_, cols]
        points = np.stack([x, y, -z_a[rows_, cols]], axis=1) @ rot.T + t
        u = size / 2 + focal * points[:, 0] / -points[:, 2]
        np.testing.assert_allclose(u, flow[rows_, cols, 0], atol=0.05)


def _table(root, rows, header=("image_a", "image_b", *POSE)):
    with open(root / "pairs.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def _images(root, *names):
    for name in names:
        Image.new("RGB", (16, 16), (10, 20, 30)).save(root / name)


def test_bad_pair_tables_are_one_line_naming_the_file(store, tmp_path):
    tmp_path = tmp_path / "data"
    tmp_path.mkdir()
    _images(tmp_path, "a.png", "b.png")
    _table(tmp_path, [["a.png", "", *POSE.values()]])
    with pytest.raises(BadInput, match=r"pairs\.csv:2: empty image_b: a pair needs two views"):
        load_manifest(store, tmp_path)
    _table(tmp_path, [["a.png", "a.png", *POSE.values()]])
    with pytest.raises(BadInput, match="a pair needs two views"):
        load_manifest(store, tmp_path)
    _table(tmp_path, [["a.png", "b.png", "one", 0, 0, 0, 0, 0, 0]])
    with pytest.raises(BadInput, match=r"pairs\.csv:2: qw 'one' is not a number"):
        load_manifest(store, tmp_path)
    _table(tmp_path, [["a.png", "b.png", 2, 0, 0, 0, 0, 0, 0]])
    with pytest.raises(BadInput, match="norm 2, not 1"):
        load_manifest(store, tmp_path)
    _table(tmp_path, [["a.png", "b.png"]], header=("image_a", "image_b"))
    with pytest.raises(BadInput, match=r"pairs\.csv: no qw, qx"):
        load_manifest(store, tmp_path)
    (tmp_path / "pairs.csv").write_text("")
    with pytest.raises(BadInput, match="empty pose tables"):
        load_manifest(store, tmp_path)
    _table(tmp_path, [["p1", "a.png", "b.png", *POSE.values()]] * 2,
           header=("id", "image_a", "image_b", *POSE))
    repeated = r"pose tables with repeated ids: .*pairs\.csv: id 'p1' repeats"
    with pytest.raises(BadInput, match=repeated):
        load_manifest(store, tmp_path)


def test_a_missing_pose_table_is_named(store, tmp_path):
    tmp_path = tmp_path / "data"
    tmp_path.mkdir()
    _images(tmp_path, "a.png")
    with pytest.raises(UsageError, match=r"no pose table .*pairs\.csv"):
        load_manifest(store, tmp_path, layout="pairs")


def test_flat_image_folders(store, tmp_path):
    flat = tmp_path / "flat"
    flat.mkdir()
    _images(flat, "b.png", "a.png")
    view = load_manifest(store, flat)
    assert view.layout == "images"
    assert view.names == ["a.png", "b.png"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BadInput, match="empty"):
        load_manifest(store, empty)
    with pytest.raises(BadInput, match=r"empty: no image files in it"):
        load_manifest(store, empty, layout="images")


def _spair(root, pairs):
    """A tiny SPair-71k tree: PairAnnotation/test/*.json and JPEGImages/cat/*.jpg."""
    import json

    (root / "JPEGImages" / "cat").mkdir(parents=True)
    (root / "PairAnnotation" / "test").mkdir(parents=True)
    for name in ("a.jpg", "b.jpg", "c.jpg"):
        Image.new("RGB", (40, 30), (50, 60, 70)).save(root / "JPEGImages" / "cat" / name)
    for i, (src, trg) in enumerate(pairs):
        doc = {"src_imname": src, "trg_imname": trg, "category": "cat",
               "src_kps": [[1, 2], [3, 4]], "trg_kps": [[5, 6], [7, 8]],
               "trg_bndbox": [0, 0, 20, 10], "src_imsize": [40, 30, 3]}
        (root / "PairAnnotation" / "test" / f"{i:06d}-{src}-{trg}:cat.json").write_text(
            json.dumps(doc))


def test_spair_pairs_read_as_keypoint_pairs(store, tmp_path):
    _spair(tmp_path / "spair", [("a.jpg", "b.jpg"), ("b.jpg", "c.jpg")])
    view = load_manifest(store, tmp_path / "spair", split="test")
    assert view.layout == "spair"
    assert view.names == ["JPEGImages/cat/a.jpg", "JPEGImages/cat/b.jpg", "JPEGImages/cat/c.jpg"]
    assert view.doc["keypoint_pairs"][0] == [0, 1, [[1.0, 2.0], [3.0, 4.0]],
                                              [[5.0, 6.0], [7.0, 8.0]], [0.0, 0.0, 20.0, 10.0]]
    assert len(load_manifest(store, tmp_path / "spair", split="test", limit=1).samples) == 2
    with pytest.raises(UsageError, match="SPair-71k needs --split"):
        load_manifest(store, tmp_path / "spair")


def test_a_spair_pair_with_one_view_is_named(store, tmp_path):
    _spair(tmp_path / "spair", [("a.jpg", "a.jpg")])
    with pytest.raises(BadInput, match=r"a\.jpg-a\.jpg:cat\.json: src and trg are both"):
        load_manifest(store, tmp_path / "spair", split="test")
