"""Parameters checked against the data before anything is stored; a flag and -p that disagree."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from vbstore import Store
from vbstore.cli import cli

TINY = ["-b", "test_cnn", "--weights", "random", "--input-size", "32"]


@pytest.fixture(scope="module")
def data(shapes_folder):
    shapes = shapes_folder(3, 2)
    return ["-d", shapes, "--split", "val", "--train-data", shapes, "--train-split", "train"]


@pytest.fixture
def store_root(tmp_path):
    return tmp_path / "s"


@pytest.fixture
def run(store_root):
    runner = CliRunner()
    return lambda *args: runner.invoke(cli, ["--store", str(store_root), *args])


def test_k_above_the_train_split_is_refused_before_anything_is_stored(run, data, store_root):
    out = run("get", "result", *TINY, "-t", "knn", *data, "-p", "k=5000")
    assert out.exit_code == 2, out.output
    assert "k=5000 neighbours, but the train split has 15 samples" in out.output
    assert "give k at most 15" in out.output
    with Store(store_root) as store:
        assert store.db.query("SELECT COUNT(*) FROM objects")[0][0] == 0


def test_the_default_k_over_a_small_split_is_said_in_the_record(run, data):
    out = run("run", "knn", *TINY, *data, "--json")
    assert out.exit_code == 0, out.output
    record = json.loads(out.stdout)["record"]
    assert record["params"]["k"] == 20
    assert ("k=20 (the default) is more than the 15 train samples: every train image votes"
            in record["warnings"])


def test_a_flag_and_p_that_disagree_are_refused_and_agreeing_ones_run(run, data):
    out = run("run", "knn", *TINY, *data, "-k", "10", "-p", "k=5")
    assert out.exit_code == 2
    assert "-k 10 and -p k=5 disagree" in out.output
    epochs = run("run", "classification", *TINY, *data, "--epochs", "3", "-p", "epochs=2")
    assert "--epochs 3 and -p epochs=2 disagree" in epochs.output
    same = run("run", "knn", *TINY, *data, "-k", "5", "-p", "k=5.0", "--json")
    assert same.exit_code == 0, same.output
    assert json.loads(same.stdout)["record"]["params"]["k"] == 5


def test_a_dry_run_writes_no_manifest_yet_names_it_as_storing_would(run, data, store_root):
    dry = json.loads(run("get", "result", *TINY, "-t", "knn", *data, "--dry-run", "--json").stdout)
    with Store(store_root) as store:
        assert store.db.query("SELECT COUNT(*) FROM objects")[0][0] == 0
    planned = {s["role"]: (s["id"], s["status"]) for s in dry["steps"] if s["op"] == "manifest"}
    assert {r: status for r, (_, status) in planned.items()} == {"eval": "compute",
                                                                "train": "compute"}
    done = json.loads(run("get", "result", *TINY, "-t", "knn", *data, "--json").stdout)
    data_ids = done["record"]["data"]
    assert planned["eval"][0] == data_ids["eval"]["manifest"]
    assert planned["train"][0] == data_ids["train"]["manifest"]
