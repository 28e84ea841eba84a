"""The Python API's errors speak of arguments; the CLI's of flags."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import vbstore
from vbstore._api import as_arguments
from vbstore.cli import cli
from vbstore.errors import UsageError


def test_flags_become_the_arguments_that_do_the_same():
    assert as_arguments("use --seed instead of -p seed=...") == (
        "use argument seed instead of params={'seed': ...}")
    assert as_arguments("drop --train-data") == "drop argument train_data"
    assert as_arguments("read them with --target depth, or") == (
        "read them with data_options={'target': 'depth'}, or")
    assert as_arguments("--target-dir X") == "data_options={'target_dir': 'X'}"
    assert as_arguments("try --no-such-flag") == "try --no-such-flag"  # no argument: kept


def test_the_api_names_arguments_and_the_cli_flags(tmp_path):
    store = vbstore.Store(tmp_path / "s")
    with pytest.raises(UsageError) as err:
        vbstore.get_result("test_cnn", "knn", "shapes", "shapes", store=store, split="val",
                           train_split="train", weights="random", params={"seed": 3})
    assert "use argument seed instead of params={'seed': ...}" in str(err.value)
    assert "--seed" not in str(err.value)
    store.close()
    out = CliRunner().invoke(cli, ["--store", str(tmp_path / "s"), "get", "result", "-b",
                                   "test_cnn", "--weights", "random", "-t", "knn", "-d", "shapes",
                                   "--split", "val", "--train-data", "shapes", "--train-split",
                                   "train", "-p", "seed=3"])
    assert "use --seed instead of -p seed=..." in out.output


def test_a_suite_contradicted_in_python_says_which_argument_to_drop(tmp_path):
    from vbstore.suites import new_suite, push_suite

    assert as_arguments("drop -p k: s@1 sets it") == "drop params={'k': ...}: s@1 sets it"
    store = vbstore.Store(tmp_path / "s")
    push_suite(store, new_suite(store, slug="s", task="knn", data="shapes", split="val",
                                params={"k": 5}, weights="random"))
    with pytest.raises(UsageError) as err:
        vbstore.run_suite(store, "s@1", "test_cnn", weights="random", train_data="shapes",
                          train_split="train", params={"k": 20})
    assert "params={'k': 20} contradicts s@1, which pins k=5" in str(err.value)
    assert err.value.hint == "drop params={'k': ...}: s@1 sets it"
    store.close()
