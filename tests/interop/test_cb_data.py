"""``cb:NAME``: a dataset CLIP_benchmark names, read through its own builder (installed for the
test), is an ordinary manifest: its class names are CLIP_benchmark's, its templates reach the
zero-shot tasks, and the same images in a folder are the same image ids (shared features)."""

from __future__ import annotations

import shutil
import struct

import numpy as np
import pytest

import vbstore
from vbstore.data import load_manifest
from vbstore.errors import UsageError

pytestmark = pytest.mark.slow


def _mnist(root, seed=0, n_train=10, n_test=8):
    """MNIST's four idx files, small and random, where torchvision's MNIST reads them."""
    rng = np.random.default_rng(seed)
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        pixels = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(
            struct.pack(">IIII", 2051, n, 28, 28) + pixels.tobytes())
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(
            struct.pack(">II", 2049, n) + labels.tobytes())


def test_a_clip_benchmark_dataset_is_an_ordinary_manifest(clip_benchmark, store, tmp_path):
    _mnist(tmp_path / "data" / "mnist")
    options = {"dataset_root": str(tmp_path / "data" / "{dataset}")}  # a --dataset_root template
    view = load_manifest(store, "cb:mnist", split="test", **options)
    doc = view.doc
    builder = __import__("clip_benchmark.datasets.builder", fromlist=["build_dataset"])
    theirs = builder.build_dataset("mnist", root=str(tmp_path / "data" / "mnist"),
                                   split="test", download=False)
    assert doc["classes"] == list(theirs.classes)
    assert doc["source"]["templates"] == list(theirs.templates)
    assert (doc["source"]["kind"], doc["source"]["name"]) == ("cb", "mnist")
    assert len(doc["samples"]) == 8
    # the same images, read from a folder: the same image ids
    folder = tmp_path / "folder" / "test"
    for sample in doc["samples"]:
        label = doc["classes"][sample["label"]]
        (folder / label).mkdir(parents=True, exist_ok=True)
        shutil.copy(view.root / sample["name"], folder / label)
    other = load_manifest(store, str(tmp_path / "folder"), split="test")
    assert sorted(s["image"] for s in other.doc["samples"]) == \
        sorted(s["image"] for s in doc["samples"])


def test_offline_what_is_missing_is_named_in_one_line(clip_benchmark, store, tmp_path):
    with pytest.raises(UsageError, match=r"cb:mnist is not on disk: .*nowhere/mnist does not "
                                         r"exist") as caught:
        load_manifest(store, "cb:mnist", split="test",
                      dataset_root=str(tmp_path / "nowhere" / "{dataset}"))
    assert "--download" in caught.value.hint
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match=r"cb:mnist \(test\) is not complete in"):
        load_manifest(store, "cb:mnist", split="test", dataset_root=str(tmp_path / "empty"))


def test_zero_shot_reads_the_templates_of_the_dataset(clip_benchmark, store, tmp_path):
    _mnist(tmp_path / "mnist")
    kw = dict(store=store, progress=False, split="test", weights="random", input_size=32,
              data_options={"dataset_root": str(tmp_path / "mnist")})
    clip = "open_clip:ViT-S-32-alt"  # the smallest built-in CLIP, random weights
    result = vbstore.get_result(clip, "zeroshot_classification", "cb:mnist",
                                params={"templates": "dataset"}, **kw)
    assert set(result.metrics) == {"acc1", "acc5", "mean_per_class_recall"}
    assert result.record.params["templates"] == "dataset"
    with pytest.raises(UsageError, match="the data names no templates"):
        vbstore.get_result(clip, "zeroshot_classification", "shapes", split="val",
                           params={"templates": "dataset"},
                           **{k: v for k, v in kw.items() if k not in ("data_options", "split")})


def test_sweep_takes_a_clip_benchmark_dataset_list(clip_benchmark, tmp_path):
    import json

    from click.testing import CliRunner

    from vbstore.cli import cli

    _mnist(tmp_path / "data" / "mnist", n_train=20)
    datasets = tmp_path / "datasets.txt"
    datasets.write_text("mnist\n\n# a comment\n")
    models = tmp_path / "models.txt"
    models.write_text("test_cnn weights=random input_size=32\n")
    args = ["--store", str(tmp_path / "s"), "sweep", "--backbones", str(models), "--tasks",
            "knn", "--datasets", str(datasets), "--dataset-root",
            str(tmp_path / "data" / "{dataset}"), "--split", "test", "--train-split", "train",
            "-p", "k=3", "--json"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    assert [(r["data"], r["task"]) for r in rows] == [("cb:mnist", "knn")]
    assert "metrics" in rows[0]
    again = json.loads(CliRunner().invoke(cli, args).stdout)
    assert again[0]["from_cache"] is True
