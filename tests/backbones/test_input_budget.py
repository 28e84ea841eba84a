"""An input resolution is sized against the memory budget before anything is allocated for it
(issue 32: ``--input-size 100000`` was killed by the kernel with no line)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from vbstore.backbones import build_backbone
from vbstore.cli import cli
from vbstore.errors import OverBudget


def test_a_huge_input_size_is_refused_in_one_line_before_any_work(tmp_path, shapes_folder):
    shapes = shapes_folder(2, 0)
    store = tmp_path / "s"
    result = CliRunner().invoke(cli, [
        "--store", str(store), "get", "result", "-b", "test_vit", "--weights", "random",
        "--input-size", "100000", "-t", "knn", "-d", shapes, "--split", "val",
        "--train-data", shapes, "--train-split", "train"])
    assert result.exit_code == OverBudget.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "input size of 100000 px" in lines[0]
    assert "VBSTORE_MAX_MEMORY" in lines[0]
    assert not store.exists() or not any((store / "objects").rglob("*"))  # no data read either


def test_the_budget_sees_the_tokens_a_vit_input_size_makes(monkeypatch):
    # 256 px in 8 px patches: 1025 tokens, a 4 MiB attention map, more than a 2 MiB budget
    monkeypatch.setenv("VBSTORE_MAX_MEMORY", "2M")
    with pytest.raises(OverBudget, match="input size of 256 px"):
        build_backbone("test_vit", weights="random", input_size=256)
    monkeypatch.setenv("VBSTORE_MAX_MEMORY", "64M")
    assert build_backbone("test_vit", weights="random", input_size=256).cfg.input_size == 256
