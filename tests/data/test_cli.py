import json

import pytest
from click.testing import CliRunner

from vbstore.cli import cli
from vbstore.cli.data_cmds import manifest_cmd


@pytest.fixture
def run(tmp_path):
    runner, store = CliRunner(), str(tmp_path / "s")
    return lambda *args: runner.invoke(cli, ["--store", store, "get", "manifest", *args])


def test_manifest_json(run, image_folder):
    result = run(str(image_folder), "--split", "train", "--limit", "2", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert len(out["id"]) == 64
    assert out["samples"] == 6
    assert out["limit"] == 2
    assert out["classes"] == ["cat", "dog", "eel"]
    assert out["per_class"] == {"cat": 2, "dog": 2, "eel": 2}
    assert out["layout"] == "image_folder"
    assert out["split"] == "train"
    assert out["target_type"] == "class"


def test_manifest_text_and_stems(run, tmp_path):
    from data_support import write_image, write_mask

    root = tmp_path / "voc"
    for i in range(3):
        write_image(root / "JPEGImages" / f"{i}.jpg", i)
        write_mask(root / "SegmentationClass" / f"{i}.png", i)
    (tmp_path / "val.txt").write_text("0\n2\n")
    result = run(str(root), "--stems", str(tmp_path / "val.txt"), "--target-type", "masks")
    assert result.exit_code == 0, result.output
    assert "2 samples, layout stems" in result.output
    assert "targets  masks" in result.output


def test_bad_input_is_one_line_with_its_exit_code(run, image_folder):
    (image_folder / "val" / "cat" / "00.png").write_bytes(b"garbage")
    result = run(str(image_folder), "--split", "val")
    assert result.exit_code == 2
    assert result.output.startswith("error: 1 unreadable or corrupt images: ")
    assert "00.png" in result.output
    assert result.output.count("\n") == 1
    assert run(str(image_folder), "--layout", "coco").exit_code == 2


def test_help_text():
    result = CliRunner().invoke(cli, ["get", "manifest", "--help"])
    assert result.exit_code == 0
    assert "--limit" in result.output
    assert manifest_cmd.help
