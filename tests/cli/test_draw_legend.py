"""The segmentation grid of `draw` names its colours."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from vbstore.cli import cli

SCENES = "scenes:per_split=3,size=32,seed=0"


def test_a_class_map_grid_has_a_legend_of_its_classes(tmp_path):
    pytest.importorskip("matplotlib")
    runner = CliRunner()

    def run(*args):
        return runner.invoke(cli, ["--store", str(tmp_path / "s"), *args])

    data = ["-d", SCENES, "--split", "val", "--target", "masks"]
    out = run("get", "result", "-b", "test_cnn", "--weights", "random", "-t",
              "generic_segmentation", *data, "--train-data", SCENES, "--train-split", "train",
              "-p", "epochs=1", "--json")
    assert out.exit_code == 0, out.output
    picture = tmp_path / "grid.svg"
    drawn = run("draw", json.loads(out.stdout)["id"], *data, "-o", str(picture))
    assert drawn.exit_code == 0, drawn.output
    svg = picture.read_text()  # text stays text in vbstore's SVGs
    legend = {name for name in ("background", "foreground") if f">{name}</text>" in svg}
    assert legend  # the classes the grid shows are named (one or both)
