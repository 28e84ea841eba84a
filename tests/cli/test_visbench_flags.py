"""VisBench's flags with VisBench's meanings on ``run TASK`` and ``get result`` (issue 23):
``--batch-size`` is the extraction batch, ``--train-batch-size`` the head's, and each probe flag
sets one task parameter exactly as ``-p`` does."""

import json

TINY = ["-b", "test_cnn", "--weights", "random", "--input-size", "32"]


def _data(shapes):
    return ["-d", shapes, "--split", "val", "--train-data", shapes, "--train-split", "train"]


def test_batch_size_is_the_extraction_batch_and_train_batch_size_the_heads(run, shapes):
    quick = ["--epochs", "2"]
    first = run("run", "classification", *TINY, *_data(shapes), *quick, "--batch-size", "2",
                "--json")
    assert first.exit_code == 0, first.output
    record = json.loads(first.stdout)["record"]
    assert record["params"]["batch_size"] == 256  # the head's batch kept its default
    # another extraction batch is the same request: the stored answer
    again = json.loads(run("run", "classification", *TINY, *_data(shapes), *quick,
                           "--batch-size", "7", "--json").stdout)
    assert again["from_cache"]
    assert again["id"] == json.loads(first.stdout)["id"]
    # the head's batch: --train-batch-size on run, the same on get result, and -p batch_size
    head = json.loads(run("run", "classification", *TINY, *_data(shapes), *quick,
                          "--train-batch-size", "4", "--json").stdout)
    assert head["record"]["params"]["batch_size"] == 4
    for way in (["--train-batch-size", "4"], ["-p", "batch_size=4"]):
        same = json.loads(run("get", "result", *TINY, "-t", "classification", *_data(shapes),
                              "-p", "epochs=2", *way, "--batch-size", "3", "--json").stdout)
        assert same["from_cache"]
        assert same["id"] == head["id"]


def test_a_flag_and_p_that_disagree_or_a_flag_the_task_lacks_are_refused(run, shapes):
    both = run("get", "result", *TINY, "-t", "classification", *_data(shapes),
               "--train-batch-size", "4", "-p", "batch_size=8")
    assert both.exit_code == 2
    assert "--train-batch-size 4 and -p batch_size=8 disagree" in both.output
    on_run = run("run", "classification", *TINY, *_data(shapes), "--train-batch-size", "4",
                 "-p", "batch_size=8")
    assert on_run.exit_code == 2
    assert "disagree" in on_run.output
    lacks = run("get", "result", *TINY, "-t", "knn", *_data(shapes), "--n-bins", "64")
    assert lacks.exit_code == 2
    assert "--n-bins does not apply to task 'knn'" in lacks.output
    nothing = run("get", "result", *TINY, "-t", "knn", *_data(shapes), "--standardize")
    assert nothing.exit_code == 2
    assert "--standardize does not apply" in nothing.output


def test_pooling_keys_the_features_a_pooled_task_reads(run, shapes):
    knn = ["get", "result", *TINY, "-t", "knn", *_data(shapes), "--json"]
    default = json.loads(run(*knn).stdout)
    assert default["record"]["extractor"]["pooling"] == "gap"  # a CNN's own
    named = json.loads(run(*knn, "--pooling", "gap").stdout)
    assert named["from_cache"]
    assert named["id"] == default["id"]
    mean = json.loads(run("run", "knn", *TINY, *_data(shapes), "--pooling", "mean",
                          "--json").stdout)
    assert mean["record"]["extractor"]["pooling"] == "mean"
    assert mean["id"] != default["id"]
    dense = run("get", "result", *TINY, "-t", "depth", "-d", shapes, "--train-data", shapes,
                "--pooling", "mean")
    assert dense.exit_code == 2
    assert "reads dense feature maps; a pooling does not apply" in dense.output
    assert "--pooling" not in run("run", "depth", "--help").output
