"""An error about a target file names the file."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from vbstore.cli import cli

TINY = ["-b", "test_cnn", "--weights", "random"]


@pytest.fixture
def scenes(tmp_path):
    from vbstore.data import make_scenes

    return make_scenes(tmp_path / "scenes", per_split=3, size=32)


def _run(tmp_path, scenes, task, target, *extra):
    data = ["-d", str(scenes), "--split", "val", "--train-data", str(scenes), "--train-split",
            "train", "--target", target]
    return CliRunner().invoke(cli, ["--store", str(tmp_path / "s"), "run", task, *TINY, *data,
                                    "--epochs", "1", *extra])


def test_a_mask_of_the_wrong_size_names_its_file(tmp_path, scenes):
    mask = scenes / "val" / "masks" / "0001.png"
    Image.open(mask).resize((20, 20)).save(mask)
    out = _run(tmp_path, scenes, "generic_segmentation", "masks")
    assert out.exit_code != 0
    assert f"{mask}: 20x20, its image 32x32" in out.output


def test_a_label_outside_num_classes_names_its_file(tmp_path, scenes):
    label = scenes / "val" / "labels" / "0002.png"
    values = np.asarray(Image.open(label)).astype(np.uint8)
    values[0, 0] = 9
    Image.fromarray(values, "L").save(label)
    out = _run(tmp_path, scenes, "semantic_segmentation", "labels", "--num-classes", "4")
    assert out.exit_code == 2, out.output
    assert "eval labels hold 9, outside 0..3" in out.output
    assert f"(in {label})" in out.output
