"""``vbstore plot``: the bars are the stored numbers, and the pictures are real PNG and SVG."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from vbstore import Store
from vbstore.cli import cli
from vbstore.plots import backbone_bars, task_bars

TINY = ["--weights", "random", "--input-size", "32"]


@pytest.fixture(scope="module")
def store_with_results(tmp_path_factory):
    """test_cnn (classification over 3 seeds, knn) and test_vit (classification) on shapes."""
    from vbstore.data import make_shapes

    root = tmp_path_factory.mktemp("plot")
    shapes = str(make_shapes(root / "shapes", per_class=4, seed=2, size=32))
    runner = CliRunner()
    data = ["-d", shapes, "--split", "val", "--train-data", shapes, "--train-split", "train"]
    quick = ["-p", "epochs=10"]  # the bars read what is stored, whatever the epochs
    for args in (["-b", "test_cnn", "-t", "classification", "--seeds", "3", *quick],
                 ["-b", "test_cnn", "-t", "knn"],
                 ["-b", "test_vit", "-t", "classification", *quick]):
        out = runner.invoke(cli, ["--store", str(root / "s"), "get", "result", *args, *TINY,
                                  *data, "--json"])
        assert out.exit_code == 0, out.output
    return root / "s", shapes


def test_bars_are_the_stored_numbers(store_with_results):
    root, _ = store_with_results
    with Store(root) as store:
        bars = task_bars(store, "classification")
        assert [b.label for b in bars] == ["test_cnn (random)", "test_vit (random)"]
        for bar in bars:
            record = store.read_json(bar.result)
            assert bar.metric == "top1"
            assert bar.value == record["metrics"]["top1"]
        cnn = bars[0]
        interval = store.read_json(cnn.result)["aggregate"]["top1"]
        assert cnn.seeds == 3
        assert (cnn.low, cnn.high) == (interval["ci_low"], interval["ci_high"])
        assert bars[1].low is None  # one seed: no interval
        grouped = backbone_bars(store, "test_cnn")
        assert [(b.group, b.label.split()[0]) for b in grouped] == [
            ("high", "classification"), ("high", "knn")]


def test_plot_writes_png_and_svg(store_with_results, tmp_path):
    from PIL import Image

    root, _ = store_with_results
    runner = CliRunner()
    png, svg = tmp_path / "task.png", tmp_path / "backbone.svg"
    out = runner.invoke(cli, ["--store", str(root), "plot", "task", "classification", "-o",
                              str(png), "--json"])
    assert out.exit_code == 0, out.output
    shown = json.loads(out.stdout)["bars"]
    with Image.open(png) as image:
        assert image.format == "PNG"
        assert image.width > 100
    out = runner.invoke(cli, ["--store", str(root), "plot", "backbone", "test_cnn", "-o",
                              str(svg), "--json"])
    assert out.exit_code == 0, out.output
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml")
    assert "<svg" in text
    for bar in json.loads(out.stdout)["bars"]:
        assert f"{bar['value']:.3f}" in text  # each bar's value is written on the picture
    assert "knn" in text
    assert "test_cnn (random)" in json.dumps(shown)


def test_plot_refusals(store_with_results, tmp_path):
    root, _ = store_with_results
    runner = CliRunner()
    bad = runner.invoke(cli, ["--store", str(root), "plot", "task", "knn", "-o",
                              str(tmp_path / "x.jpg")])
    assert bad.exit_code == 2
    assert ".png or .svg" in bad.stderr
    none = runner.invoke(cli, ["--store", str(root), "plot", "backbone", "resnet18", "-o",
                               str(tmp_path / "x.png")])
    assert none.exit_code == 2
    assert "no stored result" in none.stderr
    assert not (tmp_path / "x.png").exists()


def test_several_datasets_are_named_by_split_samples_and_tasks(store_with_results, tmp_path):
    root, shapes = store_with_results
    runner = CliRunner()
    other = runner.invoke(cli, ["--store", str(root), "get", "result", "-b", "test_cnn", "-t",
                                "knn", *TINY, "-d", shapes, "--split", "train", "--train-data",
                                shapes, "--train-split", "train"])
    assert other.exit_code == 0, other.output
    out = runner.invoke(cli, ["--store", str(root), "plot", "backbone", "test_cnn", "-o",
                              str(tmp_path / "x.png")])
    assert out.exit_code == 2
    assert "(val, 20 samples: classification, knn)" in out.stderr
    assert "(train, 20 samples: knn)" in out.stderr
