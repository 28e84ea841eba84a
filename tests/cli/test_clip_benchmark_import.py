"""CLIP_benchmark files round-trip: what `export results --format clip-benchmark` writes,
`import results` reads back as the same weights, or refuses; it never relabels them pretrained."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from vbstore import Store
from vbstore.cli import cli
from vbstore.suites import from_results, get_suite

SUITE = {
    "slug": "cb-knn",
    "version": 1,
    "name": "kNN on shapes",
    "protocol": {
        "task": "knn",
        "data": {"kind": "external"},
        "conditions": [{"name": "shapes", "sampleCount": 15}],
        "metrics": [{"key": "top1", "headline": True}],
        "weights": "random",
    },
}


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    from vbstore.data import make_shapes

    return str(make_shapes(tmp_path_factory.mktemp("data") / "shapes", per_class=3, seed=1,
                           size=32))


@pytest.fixture
def run(tmp_path):
    runner = CliRunner()
    return lambda store, *args: runner.invoke(cli, ["--store", str(tmp_path / store), *args])


def _push_suite(run, store, tmp_path):
    (tmp_path / "suite.json").write_text(json.dumps(SUITE))
    out = run(store, "suite", "push", str(tmp_path / "suite.json"))
    assert out.exit_code == 0, out.output


def _compute(run, shapes, *backbone):
    out = run("s", "get", "result", "-b", *backbone, "--input-size", "32", "-t", "knn", "-p",
              "k=3", "-d", shapes, "--split", "val", "--train-data", shapes, "--train-split",
              "train", "--json")
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)["id"]


def _export(run, tmp_path, result_id):
    folder = tmp_path / f"cb-{result_id[:8]}"
    out = run("s", "export", "results", "--format", "clip-benchmark", "-o", str(folder), "--json")
    assert out.exit_code == 0, out.output
    (entry,) = [e for e in json.loads(out.stdout) if e["id"] == result_id]
    return folder / entry["file"]


def _import(run, file, *extra):
    return run("fresh", "import", "results", str(file), "--suite", "cb-knn@1", "--condition",
               "shapes", "--json", *extra)


def _observed_checkpoint(tmp_path, result_id):
    """The checkpoint an evaluation of the original result names, in the store that made it."""
    with Store(tmp_path / "s") as store:
        suite = get_suite(store, "cb-knn@1")
        return from_results(store, suite, {"shapes": result_id})["checkpoint"]


def test_random_weights_are_not_imported_as_pretrained(run, shapes, tmp_path):
    _push_suite(run, "s", tmp_path)
    _push_suite(run, "fresh", tmp_path)
    result_id = _compute(run, shapes, "test_vit", "--weights", "random", "--backbone-seed",
                         "3")
    out = _import(run, _export(run, tmp_path, result_id))
    assert out.exit_code == 0, out.output
    (imported,) = json.loads(out.stdout)
    expected = _observed_checkpoint(tmp_path, result_id)
    assert expected["weights"] == "random"
    assert expected["label"] == "test_vit seed=3"
    assert imported["checkpoint"] == expected
