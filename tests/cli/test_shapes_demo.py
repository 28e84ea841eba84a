"""VisBench's demo in ``vbstore demo`` (issue 23): four shapes (circle, square, triangle,
cross), 20 per class per split, ``--noise`` in grey levels (28 to 90, default 45)."""

import hashlib
import json

import numpy as np
import pytest
from click.testing import CliRunner

from vbstore.cli import cli
from vbstore.data import load_manifest
from vbstore.data._shapes import render_shape
from vbstore.engine import ShapesDemo, demo_setup
from vbstore.errors import UsageError


@pytest.fixture
def run(tmp_path):
    runner = CliRunner()
    return lambda *args: runner.invoke(cli, ["--store", str(tmp_path / "s"), *args])


def test_an_image_without_grain_or_contrast_is_the_same_bytes_as_before():
    """The shapes every stored manifest was made of do not move (hashes taken before)."""
    before = {("circle", 0.0): "1d2abffb8fb67398", ("circle", 0.3): "7e7a9a8171db60fc",
              ("star", 0.0): "0b06d79a7fcb91cb", ("star", 0.3): "2aeff4715a9c590a"}
    for (shape, noise), digest in before.items():
        image = render_shape(shape, 32, noise, np.random.default_rng([0, 1, 2, 3]))
        assert hashlib.sha256(image.tobytes()).hexdigest()[:16] == digest


def test_visbench_shapes_are_four_faint_outlines_in_grey_level_noise(store):
    view = load_manifest(store, "shapes:classes=4,contrast=30,grain=45,per_class=3,size=32",
                         split="val")
    assert view.doc["classes"] == ["circle", "cross", "square", "triangle"]
    assert len(view) == 12
    clean = render_shape("square", 64, 0.0, np.random.default_rng(5), contrast=30)
    noisy = render_shape("square", 64, 0.0, np.random.default_rng(5), grain=45, contrast=30)
    spread = float(np.ptp(clean.astype(float).mean(axis=2)))
    assert 15 < spread < 60  # the shape is ~30 grey levels off its background
    residual = noisy.astype(float) - clean.astype(float)
    assert 35 < residual.std() < 50  # 45 grey levels, clipped at the ends
    unclipped = ((noisy > 0) & (noisy < 255)).all(axis=2)
    # achromatic: one draw per pixel, no colour cue
    assert np.allclose(residual[unclipped, 0], residual[unclipped, 1], atol=1)
    with pytest.raises(UsageError, match="classes=6"):
        load_manifest(store, "shapes:classes=6")


def test_demo_setup_and_flags(run):
    setup = demo_setup("classification", 32, 64, 0, ShapesDemo())
    assert setup.data == ("shapes:classes=4,contrast=30,grain=45,per_class=20,seed=0,size=224")
    assert setup.train_split == "train"
    assert "VisBench" in setup.about
    with pytest.raises(UsageError, match="the shapes demo runs"):
        demo_setup("depth", 32, 64, 0, ShapesDemo())
    faces = run("demo", "--data", "faces", "--noise", "45")
    assert faces.exit_code == 2
    assert "--noise and --images set the shapes demo" in faces.output
    assert run("demo", "--noise", "300").exit_code == 2  # grey levels: 0 to 255


@pytest.mark.slow
def test_the_shapes_demo_runs_against_chance(run):
    result = run("demo", "--backbone", "test_cnn", "--input-size", "32", "--noise", "60",
                 "--images", "3", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["task"] == "classification"  # the shapes demo's default probe, as VisBench's
    assert summary["data"].startswith("shapes:classes=4,contrast=30,grain=60,per_class=3")
    assert (summary["trivial"], summary["trivial_value"]) == ("the majority class", 0.25)
