"""The NYUv2 and Taskonomy folder layouts, on small trees written here."""

from pathlib import Path

import numpy as np
import pytest
from data_support import age, write_image, write_mask
from PIL import Image

from vbstore.data import decode_target, load_manifest
from vbstore.errors import BadInput, UsageError


def write_u16(path: Path, values: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(values.astype(np.uint16)).save(path)
    return path


@pytest.fixture
def nyu(tmp_path) -> Path:
    """``nyu/{train,test}/{rgb,depth,labels_40,normal}``: 3 and 2 frames."""
    root = tmp_path / "nyu"
    for split, n in (("train", 3), ("test", 2)):
        for i in range(n):
            write_image(root / split / "rgb" / f"{i:04d}.png", i)
            write_u16(root / split / "depth" / f"{i:04d}.png", np.full((8, 8), 1000 + i))
            write_mask(root / split / "labels_40" / f"{i:04d}.png", i)
            write_image(root / split / "normal" / f"{i:04d}.png", 100 + i)
    age(root)
    return root


def test_nyu_folders_pair_rgb_with_the_chosen_target(store, nyu):
    view = load_manifest(store, nyu, split="test", target="depth")
    assert view.layout == "nyu"
    assert view.target_type == "depth"
    assert view.names == ["rgb/0000.png", "rgb/0001.png"]
    assert [s["target_name"] for s in view.samples] == ["depth/0000.png", "depth/0001.png"]
    labels = load_manifest(store, nyu, split="train", target="labels_40")
    assert labels.target_type == "labels_40"
    assert len(labels) == 3
    images = load_manifest(store, nyu, split="train", target="images")
    assert images.target_type == "image"
    assert "target_name" not in images.samples[0]


def test_nyu_needs_a_target_and_every_frame_its_file(store, nyu):
    with pytest.raises(UsageError, match=r"3 target folders beside rgb/.*--target"):
        load_manifest(store, nyu, split="test")
    (nyu / "test" / "depth" / "0001.png").unlink()
    with pytest.raises(BadInput) as info:
        load_manifest(store, nyu, split="test", target="depth")
    assert info.value.problems == [(str(nyu / "test" / "rgb" / "0001.png"), "no target in depth/")]


BUILDINGS = {"allensville": 2, "beechwood": 3}
CSV = "id,train,val,test\nallensville,1,0,0\nbeechwood,0,1,0\n"


def _view(root: Path, domain: str, building: str, point: int, view: int) -> Path:
    return root / domain / building / f"point_{point}_view_{view}_domain_{domain}.png"


@pytest.fixture
def taskonomy(tmp_path) -> Path:
    """rgb, depth_zbuffer and edge_texture for two buildings, with a split CSV."""
    root = tmp_path / "taskonomy"
    for b, n in BUILDINGS.items():
        for p in range(n):
            write_image(_view(root, "rgb", b, p, 0), p)
            write_u16(_view(root, "depth_zbuffer", b, p, 0), np.full((8, 8), 512 * (p + 1)))
            write_u16(_view(root, "edge_texture", b, p, 0), np.full((8, 8), 7 * p))
    (root / "train_val_test_tiny.csv").write_text(CSV)
    age(root)
    return root


def test_taskonomy_pairs_views_by_point_and_view_within_a_building(store, taskonomy):
    view = load_manifest(store, taskonomy, target="depth_zbuffer")
    assert view.layout == "taskonomy"
    assert view.target_type == "depth_zbuffer"
    assert len(view) == 5
    first = view.samples[0]
    assert first["name"] == "rgb/allensville/point_0_view_0_domain_rgb.png"
    assert first["target_name"] == (
        "depth_zbuffer/allensville/point_0_view_0_domain_depth_zbuffer.png")


def test_taskonomy_splits_are_buildings_from_the_csv(store, taskonomy):
    csv = taskonomy / "train_val_test_tiny.csv"
    val = load_manifest(store, taskonomy, split="val", target="edge_texture", splits=csv)
    assert val.split == "val"
    assert {n.split("/")[1] for n in val.names} == {"beechwood"}
    assert len(val) == 3
    train = load_manifest(store, taskonomy, split="train", target="edge_texture", splits=csv)
    assert {n.split("/")[1] for n in train.names} == {"allensville"}
    # a header-less CSV (rows building,train,val,test) reads the same
    (taskonomy / "plain.csv").write_text(CSV.split("\n", 1)[1])
    plain = load_manifest(store, taskonomy, split="val", target="edge_texture",
                          splits=taskonomy / "plain.csv")
    assert plain.names == val.names


def test_taskonomy_refusals_name_the_file(store, taskonomy):
    csv = taskonomy / "train_val_test_tiny.csv"
    with pytest.raises(UsageError, match=r"2 domain folders.*--target"):
        load_manifest(store, taskonomy)
    with pytest.raises(UsageError, match="--splits"):
        load_manifest(store, taskonomy, split="val", target="depth_zbuffer")
    with pytest.raises(UsageError, match=r"no split 'dev'") as info:
        load_manifest(store, taskonomy, split="dev", target="depth_zbuffer", splits=csv)
    assert "train, val, test" in info.value.hint
    _view(taskonomy, "depth_zbuffer", "beechwood", 1, 0).unlink()
    with pytest.raises(BadInput) as info:
        load_manifest(store, taskonomy, split="val", target="depth_zbuffer", splits=csv)
    assert info.value.problems == [(
        str(_view(taskonomy, "rgb", "beechwood", 1, 0)),
        "no depth_zbuffer/beechwood/point_1_view_0_domain_depth_zbuffer.png")]
    write_image(taskonomy / "rgb" / "beechwood" / "IMG_0001.png")
    with pytest.raises(BadInput) as info:
        load_manifest(store, taskonomy, split="val", target="edge_texture", splits=csv)
    assert info.value.problems == [(str(taskonomy / "rgb" / "beechwood" / "IMG_0001.png"),
                                    "not named point_<P>_view_<V>_domain_rgb.<ext>")]


def test_taskonomy_split_csv_problems_are_one_line_each(store, taskonomy):
    bad = taskonomy / "bad.csv"
    bad.write_text("id,train,val,test\nallensville,1,0\nbeechwood,0,yes,0\nallensville,1,0,0\n")
    with pytest.raises(BadInput) as info:
        load_manifest(store, taskonomy, split="val", target="edge_texture", splits=bad)
    assert [where for where, _ in info.value.problems] == [f"{bad}:2", f"{bad}:3"]
    missing = taskonomy / "more.csv"
    missing.write_text(CSV + "collierville,0,1,0\n")
    with pytest.raises(BadInput, match="buildings of the split without images") as info:
        load_manifest(store, taskonomy, split="val", target="edge_texture", splits=missing)
    assert info.value.problems == [(str(taskonomy / "rgb" / "collierville"),
                                    "listed for val in more.csv")]


def test_taskonomy_depth_is_512_per_metre_and_65535_is_no_depth(tmp_path):
    path = write_u16(tmp_path / "d.png", np.array([[512, 1024], [65535, 0]]))
    depth = decode_target(path.read_bytes(), path, "depth_map", 512)
    np.testing.assert_array_equal(depth, [[[1.0, 2.0], [0.0, 0.0]]])
    # in millimetres the same sentinel is no depth too, and every other value is kept
    mm = write_u16(tmp_path / "mm.png", np.array([[65534, 65535]]))
    np.testing.assert_allclose(decode_target(mm.read_bytes(), mm, "depth_map", 1000),
                               [[[65.534, 0.0]]], rtol=1e-6)


def test_a_class_folder_named_rgb_is_not_taskonomy(store, tmp_path):
    root = tmp_path / "colours"
    for split in ("train", "val"):
        write_image(root / split / "rgb" / "a.png")
        write_image(root / split / "grey" / "b.png")
    age(root)
    assert load_manifest(store, root, split="val").layout == "image_folder"


def test_taskonomy_from_the_command_line(tmp_path, taskonomy, monkeypatch):
    """--splits is relative to the working directory, like --stems."""
    import json

    from click.testing import CliRunner

    from vbstore.cli import cli

    monkeypatch.chdir(taskonomy)
    result = CliRunner().invoke(cli, [
        "--store", str(tmp_path / "s"), "get", "manifest", str(taskonomy), "--split", "val",
        "--target", "depth_zbuffer", "--splits", "train_val_test_tiny.csv", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert (out["layout"], out["samples"], out["target_type"]) == ("taskonomy", 3,
                                                                   "depth_zbuffer")
    bad = CliRunner().invoke(cli, ["--store", str(tmp_path / "s"), "get", "manifest",
                                   str(taskonomy), "--split", "val", "--target", "depth_zbuffer"])
    assert bad.exit_code != 0
    assert "--splits" in bad.output
