"""Fixtures the CLI tests share: a tiny generated image folder and a CLI runner on a fresh store."""

import pytest
from click.testing import CliRunner

from vbstore.cli import cli


@pytest.fixture(scope="module")
def shapes(shapes_folder):
    """A `shapes` folder of 3 images per class and split, 32 px (seed 2)."""
    return shapes_folder(3, 2)


@pytest.fixture
def run(tmp_path):
    """``run(*args)``: the CLI on a store of this test's own."""
    runner = CliRunner()
    return lambda *args: runner.invoke(cli, ["--store", str(tmp_path / "s"), *args])
