"""``vbstore list heads``: the stored heads, with what each was fit on (issue 23)."""

import json
import re

from click.testing import CliRunner

from vbstore.cli import cli

TINY = ["-b", "test_cnn", "--weights", "random", "--input-size", "32"]


def test_list_heads_names_task_backbone_weights_and_data(tmp_path, shapes):
    runner = CliRunner()

    def run(*args):
        return runner.invoke(cli, ["--store", str(tmp_path / "s"), *args])

    empty = run("list", "heads")
    assert empty.exit_code == 0
    assert "no stored heads" in empty.output
    knn = run("get", "head", *TINY, "-t", "knn", "--train-data", shapes, "--train-split", "train",
              "--tag", "mine", "--json")
    assert knn.exit_code == 0, knn.output
    head_id = json.loads(knn.stdout)["id"]
    result = run("get", "result", *TINY, "-t", "classification", "-d", shapes, "--split", "val",
                 "--train-data", shapes, "--train-split", "train", "-p", "epochs=2")
    assert result.exit_code == 0, result.output
    text = run("list", "heads")
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert lines[0].split()[:5] == ["id", "task", "backbone", "weights", "pooling"]
    knn_line = next(line for line in lines if line.startswith(head_id[:12]))
    assert "knn" in knn_line
    assert "custom:test_cnn" in knn_line
    assert "random" in knn_line
    assert re.search(r"shapes train \(\d+\)", knn_line)  # the training split, its size
    assert "[mine]" in knn_line
    assert any(" classification " in line for line in lines)
    rows = json.loads(run("list", "heads", "knn", "--json").stdout)
    assert [row["id"] for row in rows] == [head_id]
    assert rows[0]["params"] == {"k": 20, "temperature": 0.07}
    assert rows[0]["train_manifest"]
