"""Every result carries its task's trivial baseline, printed beside the headline, and a warning
when the probe does not beat it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from vbstore.cli import cli
from vbstore.cli._resulttext import result_lines
from vbstore.records import ResultRecord

TINY = ["-b", "test_cnn", "--weights", "random", "--input-size", "32"]
SCENES = "scenes:per_split=4,size=32,seed=0"


@pytest.fixture(scope="module")
def shapes(shapes_folder):
    return shapes_folder(3, 2)


@pytest.fixture
def run(tmp_path):
    runner = CliRunner()
    return lambda *args: runner.invoke(cli, ["--store", str(tmp_path / "s"), *args])


def test_a_probe_at_its_baseline_is_printed_beside_it_and_warned(run, shapes):
    data = ["-d", shapes, "--split", "val", "--train-data", shapes, "--train-split", "train"]
    out = run("run", "classification", *TINY, *data, "--epochs", "1", "--json")
    assert out.exit_code == 0, out.output
    record = json.loads(out.stdout)["record"]
    base = record["baseline"]
    assert base["predictor"] == "the majority class of the train split"
    assert base["headline"] == "top1"
    assert base["margin"] == pytest.approx(record["metrics"]["top1"] - base["value"])
    assert base["value"] == pytest.approx(0.2)  # shapes: five classes, as many of each
    assert base["beaten"] == (record["metrics"]["top1"] > base["value"])
    if not base["beaten"]:
        (warning,) = [w for w in record["warnings"] if "trivial baseline" in w]
        assert "epochs (now 1)" in warning
        assert "input size (32 px)" in warning
    text = run("get", "result", *TINY, "-t", "classification", *data, "-p", "epochs=1").output
    assert f"baseline {base['value']:.4f} (the majority class of the train split), margin " \
           f"{base['margin']:+.4f}" in text


def test_knn_no_better_than_the_majority_class_is_warned(run, shapes):
    data = ["-d", shapes, "--split", "val", "--train-data", shapes, "--train-split", "train"]
    out = run("run", "knn", *TINY, *data, "-k", "3")
    assert out.exit_code == 0, out.output
    assert "baseline 0.2000 (the majority class of the train split), margin +0.0000" in out.output
    assert "warning: the probe does not beat the trivial baseline: top1 0.2000 against 0.2000" \
           in out.output
    assert "k (now 3)" in out.output


def test_a_dense_result_carries_its_constant_maps_score(run):
    data = ["-d", SCENES, "--split", "val", "--train-data", SCENES, "--train-split", "train",
            "--target", "depth"]
    out = run("get", "result", *TINY, "-t", "depth", *data, "-p", "epochs=1",
              "-p", "target_scale=1000", "--json")
    assert out.exit_code == 0, out.output
    base = json.loads(out.stdout)["record"]["baseline"]
    assert base["predictor"] == "the mean depth of the eval split"
    assert set(base["metrics"]) == {"d1", "d2", "d3", "abs_rel", "rmse"}


def test_a_record_stored_before_baselines_still_reads_and_prints():
    doc = {"kind": "result", "task": "knn", "op_version": 1, "metrics": {"top1": 0.5},
           "params": {}, "inputs": {}}
    record = ResultRecord.from_dict(doc)
    assert record.baseline is None
    assert "baseline" not in record.to_dict()
    lines = [line for _, line in result_lines(doc, "0" * 64, "computed", 0.1, ["top1"])]
    assert not any("baseline" in line for line in lines)


def test_counts_print_as_integers_and_fractions_to_four_decimals():
    doc = {"kind": "result", "task": "detection", "op_version": 1, "params": {}, "inputs": {},
           "metrics": {"map_50": 1.0, "classes_scored": 2.0, "detections_per_image": 3.5}}
    lines = [line for _, line in result_lines(doc, "0" * 64, "computed", 0.1, [])]
    assert f"  {'classes_scored':<28} 2" in lines
    assert f"  {'map_50':<28} 1.0000" in lines
    assert f"  {'detections_per_image':<28} 3.5000" in lines
