"""``vbstore run TASK``: each task's settings as real flags, the same request as get result."""

import json

TINY = ["-b", "test_cnn", "--weights", "random", "--input-size", "32"]


def test_help_shows_the_layout_and_only_the_tasks_flags(run):
    knn = run("run", "knn", "--help").output
    assert "Data: an image folder" in knn
    assert "-k INTEGER" in knn
    assert "--temperature FLOAT" in knn
    assert "--epochs" not in knn
    classification = run("run", "classification", "--help").output
    assert "--epochs INTEGER" in classification
    assert "--lr FLOAT" in classification
    retrieval = run("run", "retrieval", "--help").output
    assert "--train-data" not in retrieval  # zero-shot: nothing to train on
    assert "retrieval" in run("run", "--help").output


def test_flags_and_params_make_the_same_request(run, shapes):
    data = ["-d", shapes, "--split", "val", "--train-data", shapes, "--train-split", "train"]
    flags = run("run", "knn", *TINY, *data, "-k", "3", "--json")
    assert flags.exit_code == 0, flags.output
    first = json.loads(flags.stdout)
    assert first["record"]["params"]["k"] == 3
    same = json.loads(run("get", "result", *TINY, "-t", "knn", *data, "-p", "k=3", "--json").stdout)
    assert same["from_cache"]
    assert same["id"] == first["id"]


def test_bad_flag_values_are_one_line_errors(run, shapes):
    data = ["-d", shapes, "--split", "val", "--train-data", shapes, "--train-split", "train"]
    bad = run("run", "knn", *TINY, *data, "-k", "0")
    assert bad.exit_code == 2
    assert "parameter 'k' of task 'knn' must be >= 1" in bad.output
    assert run("run", "nosuchtask", "--help").exit_code == 2
    misspelt = run("run", "knnn", *TINY)
    assert misspelt.exit_code == 2
    assert "Did you mean 'knn'?" in misspelt.output
    root = run("gett", "result").output  # the root is lazy too
    assert "Did you mean" in root
    assert "'get'" in root


def test_get_head_and_features_say_where_an_answer_came_from(run, shapes):
    head = ["get", "head", *TINY, "-t", "knn", "--train-data", shapes, "--train-split", "train"]
    first = json.loads(run(*head, "--json").stdout)
    again = json.loads(run(*head, "--json").stdout)
    assert (first["source"], again["source"]) == ("computed", "store")
    assert "cached in the store" in run(*head).output
    feats = ["get", "features", *TINY, "-d", shapes, "--split", "val"]
    assert json.loads(run(*feats, "--json").stdout)["source"] == "computed"
    assert json.loads(run(*feats, "--json").stdout)["source"] == "store"
    assert "cached in the store" in run(*feats).output
