"""The generated ``scenes`` dataset: deterministic bytes, and targets consistent with the image
and with each other (geometry checked from the PNGs a user would read)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from PIL import Image

from vbstore.data import SCENE_CLASSES, SCENE_TARGETS, load_manifest, make_scenes
from vbstore.data._scenes import FOV, edge_map
from vbstore.errors import UsageError


def _files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.png"))}


def _read(root, split, folder, i):
    return np.array(Image.open(root / split / folder / f"{i:04d}.png"))


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    return make_scenes(tmp_path_factory.mktemp("scenes"), per_split=6, seed=3, size=48)


def test_scenes_are_deterministic_per_seed_and_grow_by_adding(tmp_path, scenes):
    again = _files(make_scenes(tmp_path / "a", per_split=6, seed=3, size=48))
    assert again == _files(scenes)
    other = _files(make_scenes(tmp_path / "b", per_split=6, seed=4, size=48))
    assert other.keys() == again.keys()
    assert other != again
    more = _files(make_scenes(tmp_path / "c", per_split=7, seed=3, size=48))
    assert {k: more[k] for k in again} == again
    assert sorted({k.split("/")[1] for k in again}) == sorted(("images", "views",
                                                               *SCENE_TARGETS))


def test_label_maps_are_palette_indices_and_masks_are_their_foreground(scenes):
    for i in range(6):
        labels = Image.open(scenes / "val" / "labels" / f"{i:04d}.png")
        assert labels.mode == "P"  # raw indices, a colour palette only for viewing
        labels = np.array(labels)
        assert set(np.unique(labels)) <= set(range(len(SCENE_CLASSES)))
        assert {0, 1} <= set(np.unique(labels))  # every room shows floor and wall
        np.testing.assert_array_equal(_read(scenes, "val", "masks", i), labels >= 2)


def test_edges_are_the_image_gradient(scenes):
    for i in range(6):
        image = _read(scenes, "train", "images", i)
        np.testing.assert_array_equal(_read(scenes, "train", "edges", i), edge_map(image))


def test_depth_and_normals_describe_the_same_floor_plane(scenes):
    size = 48
    focal = (size / 2) / math.tan(FOV / 2)
    c = (np.arange(size) + 0.5 - size / 2) / focal
    for i in range(6):
        depth_png = Image.open(scenes / "val" / "depth" / f"{i:04d}.png")
        assert depth_png.mode.startswith("I")  # 16-bit grey
        z = np.array(depth_png).astype(float) / 1000.0  # millimetres -> metres
        assert (z > 0.05).all()
        assert (z < 10).all()
        normals = _read(scenes, "val", "normals", i).astype(float) / 127.5 - 1
        np.testing.assert_allclose(np.linalg.norm(normals, axis=-1), 1.0, atol=0.015)
        labels = _read(scenes, "val", "labels", i)
        # back-project: camera x right, y up, z towards the viewer
        points = np.stack([c[None, :] * z, -c[:, None] * z, -z], axis=-1)
        floor = labels == 0
        offsets = (normals[floor] * points[floor]).sum(-1)  # n . P = -camera height on a plane
        assert offsets.std() < 0.05
        assert -2.05 < offsets.mean() < -0.95  # the camera is 1 to 2 m above the floor
        # every floor normal is the same vector
        assert np.linalg.norm(normals[floor] - normals[floor].mean(0), axis=-1).max() < 0.02


def test_occlusion_edges_sit_on_depth_jumps_and_keypoints_exist(scenes):
    seen_keypoints = 0
    for i in range(6):
        z = _read(scenes, "train", "depth", i).astype(float) / 1000
        occ = _read(scenes, "train", "occlusion_edges", i)
        pad = np.pad(z, 1, mode="edge")
        jump = np.max([np.abs(z - pad[1:-1, :-2]), np.abs(z - pad[1:-1, 2:]),
                       np.abs(z - pad[:-2, 1:-1]), np.abs(z - pad[2:, 1:-1])], axis=0)
        assert (jump[occ > 0] > 0.049).all()
        # the value is the jump to a neighbour on another surface: at most the largest jump
        assert (occ[occ > 0] / 100 <= np.minimum(jump[occ > 0], 2.55) + 0.011).all()
        assert (occ > 0).any()
        seen_keypoints += int(_read(scenes, "train", "keypoints", i).max() > 200)
    assert seen_keypoints >= 3


def test_scenes_load_as_a_dense_packaged_source(store):
    view = load_manifest(store, "scenes:per_split=3,size=32", split="val", target="depth")
    assert len(view) == 3
    with pytest.raises(UsageError, match="scenes has no parameter 'per_class'"):
        load_manifest(store, "scenes:per_class=3", split="val", target="depth")
    with pytest.raises(UsageError, match="size must be an integer >= 16"):
        make_scenes("/nonexistent", size=8)
