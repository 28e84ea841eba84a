"""Fixtures the CLI tests share: a tiny generated image folder and a CLI runner on a fresh store."""

import pytest
from click.testing import CliRunner

from vbstore.cli import cli


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    """A `shapes` folder of 3 images per class and split, 32 px (seed 2)."""
    from vbstore.data import make_shapes

    folder = tmp_path_factory.mktemp("data") / "shapes"
    return str(make_shapes(folder, per_class=3, seed=2, size=32))


@pytest.fixture
def run(tmp_path):
    """``run(*args)``: the CLI on a store of this test's own."""
    runner = CliRunner()
    return lambda *args: runner.invoke(cli, ["--store", str(tmp_path / "s"), *args])
