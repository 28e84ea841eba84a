"""VisBench's VOC commands as its README writes them (issue 23), on a generated VOC-layout folder:
one --data, --stems for the scored split and --train-stems for the training one."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from vbstore.cli import cli

TINY = ["-b", "test_vit", "--weights", "random", "--input-size", "32", "--epochs", "1"]

def make_voc(root, n_train=6, n_val=4, size=32):
    """A VOC2012-shaped folder: JPEGImages, SegmentationClass (palette PNGs, 255 outlines),
    Annotations (one box each), ImageSets/{Main,Segmentation}/{train,val}.txt."""
    root = Path(root)
    for d in ("JPEGImages", "SegmentationClass", "Annotations", "ImageSets/Main",
              "ImageSets/Segmentation"):
        (root / d).mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    stems = [f"2007_{i:06d}" for i in range(n_train + n_val)]
    names = ["dog", "cat"]
    palette = [0, 0, 0, 128, 0, 0, 0, 128, 0] + [0] * (3 * 252) + [224, 224, 192]
    for i, stem in enumerate(stems):
        cls = i % 2
        img = rng.integers(0, 60, (size, size, 3)).astype(np.uint8)
        x0, y0 = int(rng.integers(0, size // 2)), int(rng.integers(0, size // 2))
        x1, y1 = x0 + size // 2, y0 + size // 2
        img[y0:y1, x0:x1, cls] = 220
        Image.fromarray(img).save(root / "JPEGImages" / f"{stem}.jpg", quality=95)
        label = np.zeros((size, size), np.uint8)
        label[y0:y1, x0:x1] = cls + 1
        label[y0, x0:x1] = 255
        mask = Image.fromarray(label, mode="P")
        mask.putpalette(palette)
        mask.save(root / "SegmentationClass" / f"{stem}.png")
        (root / "Annotations" / f"{stem}.xml").write_text(
            f"<annotation><size><width>{size}</width><height>{size}</height><depth>3</depth>"
            f"</size><object><name>{names[cls]}</name><difficult>0</difficult><bndbox>"
            f"<xmin>{x0 + 1}</xmin><ymin>{y0 + 1}</ymin><xmax>{x1}</xmax><ymax>{y1}</ymax>"
            "</bndbox></object></annotation>")
    for sets in ("Main", "Segmentation"):
        for split, part in (("train", stems[:n_train]), ("val", stems[n_train:])):
            (root / "ImageSets" / sets / f"{split}.txt").write_text("".join(f"{s}\n" for s in part))
    return root


@pytest.fixture
def voc(tmp_path, monkeypatch):
    make_voc(tmp_path / "VOCdevkit" / "VOC2012")
    monkeypatch.chdir(tmp_path)  # the stems lists are named under --data, as the README does
    runner = CliRunner()

    def run(*args):
        result = runner.invoke(cli, ["--store", str(tmp_path / "store"), *args, "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    return run


def test_train_stems_without_train_split_train_on_the_train_stems(voc):
    record = voc("run", "semantic_segmentation", *TINY, "--data", "VOCdevkit/VOC2012",
                 "--image-dir", "JPEGImages", "--target-dir", "SegmentationClass",
                 "--stems", "ImageSets/Segmentation/val.txt",
                 "--train-stems", "ImageSets/Segmentation/train.txt", "--num-classes", "21")
    data = record["record"]["data"]
    assert (data["train"]["split"], data["train"]["samples"]) == ("train", 6)
    assert data["eval"]["samples"] == 4
    assert data["train"]["manifest"] != data["eval"]["manifest"]
    assert not any("same samples" in w for w in record["record"].get("warnings") or [])
    # naming the training data and split outright is the same request
    again = voc("get", "result", *TINY[:-2], "-t", "semantic_segmentation", "-p", "epochs=1",
                "-d", "VOCdevkit/VOC2012", "--train-data", "VOCdevkit/VOC2012",
                "--train-split", "train", "--stems", "ImageSets/Segmentation/val.txt",
                "--train-stems", "ImageSets/Segmentation/train.txt", "-p", "num_classes=21")
    assert again["from_cache"]
    assert again["id"] == record["id"]


def test_detection_stems_read_the_annotations_not_segmentation_class(voc, tmp_path):
    shutil.rmtree(tmp_path / "VOCdevkit" / "VOC2012" / "SegmentationClass")
    record = voc("run", "detection", *TINY, "--data", "VOCdevkit/VOC2012",
                 "--stems", "ImageSets/Main/val.txt", "--train-stems", "ImageSets/Main/train.txt")
    data = record["record"]["data"]
    assert (data["train"]["split"], data["train"]["samples"], data["eval"]["samples"]) == (
        "train", 6, 4)
    assert record["record"]["metrics"]["classes_scored"] == 2  # dog and cat, from Annotations/


def test_show_draws_the_data_as_the_task_reads_it_before_any_training(voc, tmp_path):
    """VisBench's `show`: `vbstore show DATA --task T` writes images beside their targets."""
    pytest.importorskip("matplotlib")
    out = voc("show", "VOCdevkit/VOC2012", "--task", "semantic_segmentation", "--stems",
              "ImageSets/Segmentation/val.txt", "--target-dir", "SegmentationClass",
              "--frames", "2", "-o", "sem.png")
    assert out["frames"] == ["JPEGImages/2007_000006.jpg", "JPEGImages/2007_000007.jpg"]
    assert (tmp_path / "sem.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    boxes = voc("show", "VOCdevkit/VOC2012", "--task", "detection", "--stems",
                "ImageSets/Main/val.txt")
    assert (tmp_path / "vbstore-show-detection.png").is_file()  # VisBench's default name
    assert boxes["samples"] == 4
    from vbstore import Store

    with Store(tmp_path / "store") as store:  # nothing extracted, nothing trained
        assert store.ls("featureset") == store.ls("head") == store.ls("result") == []


def test_show_data_targets_follow_their_images(tmp_path):
    from vbstore import Store
    from vbstore.engine import show_data

    root = make_voc(tmp_path / "VOC2012")
    store = Store(tmp_path / "store")
    stems = {"stems": str(root / "ImageSets/Segmentation/val.txt"),
             "target_dir": "SegmentationClass"}
    view = show_data(store, root, "semantic_segmentation", data_options=stems, frames=1,
                     size=32)
    frame = view.frames[0]
    label = np.asarray(Image.open(root / "SegmentationClass" / "2007_000006.png"))
    expected = np.where(label == 255, -1, label.astype(int))
    assert frame.kind == "labels"
    assert np.array_equal(frame.target, expected)  # 32 px in, 32 px drawn: the raw indices
    image = np.asarray(Image.open(root / "JPEGImages" / "2007_000006.jpg"), np.float32) / 255
    assert np.abs(frame.images[0] - image).max() < 0.02
    boxes = show_data(store, root, "detection",
                      data_options={"stems": str(root / "ImageSets/Main/val.txt")}, size=32)
    first = boxes.frames[0]
    assert first.kind == "boxes"
    ys, xs = np.nonzero(label != 0)  # the object and its outline
    assert first.target[0, :4].tolist() == [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]
    assert boxes.class_names[int(first.target[0, 4])] == "dog"


def test_show_refuses_data_the_task_cannot_read_and_keeps_show_id(voc):
    runner = CliRunner()
    wrong = runner.invoke(cli, ["show", "VOCdevkit/VOC2012", "--task", "depth", "--stems",
                                "ImageSets/Segmentation/val.txt"])
    assert wrong.exit_code == 2
    assert "needs depth maps" in wrong.output
    data = runner.invoke(cli, ["show", "VOCdevkit/VOC2012"])
    assert data.exit_code == 9
    assert "name the task that reads it: --task T" in data.output
