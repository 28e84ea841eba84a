"""Exported rows keep the spread: std over seeds, the 95% intervals, the baseline, the data."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from vbstore.cli import cli


def test_multi_seed_rows_keep_std_intervals_and_name_their_data(tmp_path):
    from vbstore.data import make_shapes

    shapes = str(make_shapes(tmp_path / "shapes", per_class=3, seed=2, size=32))
    runner = CliRunner()

    def run(*args):
        return runner.invoke(cli, ["--store", str(tmp_path / "s"), *args])

    out = run("get", "result", "-b", "test_cnn", "--weights", "random", "-t", "classification",
              "-d", shapes, "--split", "val", "--train-data", shapes, "--train-split", "train",
              "--seeds", "2", "-p", "epochs=2", "--json")
    assert out.exit_code == 0, out.output
    record = json.loads(out.stdout)["record"]
    (row,) = json.loads(run("export", "results", "--json").stdout)
    assert row["top1_std"] == pytest.approx(record["aggregate"]["top1"]["std"])
    # the interval over eval samples, the one for comparing backbones on this split
    assert (row["top1_ci_low"], row["top1_ci_high"]) == (
        record["sample_ci"]["top1"]["ci_low"], record["sample_ci"]["top1"]["ci_high"])
    assert row["baseline"] == record["baseline"]["value"]
    assert (row["data"], row["split"]) == ("shapes", "val")  # the name it was read under
    assert row["manifest"] == record["data"]["eval"]["manifest"][:12]
    header = run("export", "results", "--format", "csv").stdout.splitlines()[0].split(",")
    assert {"top1_std", "top1_ci_low", "top1_ci_high", "baseline", "manifest"} <= set(header)
