"""Probes on triplets and pairs end to end: stored features reused, records, the CLI."""

from __future__ import annotations

import csv
import json

from click.testing import CliRunner

import vbstore
from vbstore.cli import cli
from vbstore.data import load_manifest

TINY = dict(weights="random", input_size=32, progress=False)


def test_similarity_reuses_features_of_any_probe_on_the_same_images(store, forwards):
    view = load_manifest(store, "triplets:count=8,size=32", split="test")
    listing = view.root / "images.csv"
    with open(listing, "w", newline="") as f:  # the same files as a plain labelled list
        writer = csv.writer(f)
        writer.writerow(["image", "label"])
        writer.writerows([name, name.split("/")[0]] for name in view.names)
    vbstore.get_features("test_vit", str(listing), store=store, **TINY)
    forwards.clear()
    result = vbstore.get_result("test_vit", "similarity", "triplets:count=8,size=32",
                                split="test", store=store, **TINY)
    assert forwards == []  # every image was extracted by the first probe
    assert set(result.metrics) == {"accuracy", "f1", "precision", "recall", "tie_rate"}
    assert 0.0 <= result.metrics["accuracy"] <= 1.0
    assert result.record.protocol == "midvision_2afc"
    assert result.record.data["eval"]["samples"] == 24
    again = vbstore.get_result("test_vit", "similarity", "triplets:count=8,size=32",
                               split="test", store=store, **TINY)
    assert again.from_cache
    assert again.metrics == result.metrics


def test_run_similarity_from_the_cli(tmp_path):
    runner = CliRunner()
    out = runner.invoke(cli, ["--store", str(tmp_path / "s"), "run", "similarity", "-b",
                              "test_cnn", "--weights", "random", "--input-size", "32",
                              "--data", "triplets:count=4,size=32", "--split", "test", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["record"]["metrics"]["tie_rate"] == 0.0
    help_text = runner.invoke(cli, ["run", "similarity", "--help"]).output
    assert "data.csv" in help_text
