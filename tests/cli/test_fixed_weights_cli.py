"""A result computed with ``test_pixels``' fixed filters says ``fixed`` wherever a user reads it."""

import json

from click.testing import CliRunner

from vbstore.cli import cli


def test_a_test_pixels_result_reads_fixed_in_get_show_why_and_export(tmp_path):
    from vbstore.data import make_shapes

    shapes = str(make_shapes(tmp_path / "shapes", per_class=3, seed=1, size=32))
    runner = CliRunner()

    def run(*args):
        result = runner.invoke(cli, ["--store", str(tmp_path / "s"), *args])
        assert result.exit_code == 0, result.output
        return result.output

    args = ["get", "result", "-b", "test_pixels", "--input-size", "16", "-t", "knn", "-d", shapes,
            "--split", "val", "--train-data", shapes, "--train-split", "train", "-p", "k=3"]
    got = json.loads(run(*args, "--json"))
    assert got["record"]["weights_kind"] == "fixed"
    assert "knn on test_pixels (fixed weights)" in run(*args)
    result = got["id"]

    shown = json.loads(run("show", result, "--json"))
    assert shown["content"]["weights_kind"] == "fixed"
    assert '"weights_kind": "fixed"' in run("show", result)

    def nodes(node):
        yield node
        for child in node.get("inputs", []):
            yield from nodes(child)

    weights = [n for n in nodes(json.loads(run("why", result, "--json"))) if n["kind"] == "weights"]
    assert weights
    assert all(n["summary"].startswith("fixed vbstore:test_pixels (fixed filters") for n in weights)
    tree = run("why", result)
    assert "weights: weights " in tree
    assert "pretrained" not in tree

    fixed = json.loads(run("export", "results", "--weights", "fixed", "--json"))
    assert [(r["id"], r["weights"]) for r in fixed] == [(result[:12], "fixed")]
    assert json.loads(run("export", "results", "--weights", "pretrained", "--json")) == []
    assert "| fixed |" in run("export", "results", "--format", "md")
