"""``--pooling`` and ``--batch-size`` on ``get head`` and ``sweep``, with ``get result``'s
meanings (issue 23): a pooling equal to the backbone's own is the same identity as none, another
one other features; the extraction batch never changes an id."""

import json

import vbstore

TINY = ["-b", "test_cnn", "--weights", "random", "--input-size", "32"]


def test_get_head_pooling_and_batch_size(run, shapes):
    head = ["get", "head", *TINY, "-t", "knn", "--train-data", shapes, "--train-split", "train",
            "--json"]
    default = run(*head)
    assert default.exit_code == 0, default.output
    plain = json.loads(default.stdout)
    assert plain["record"]["pooling"] == "gap"  # a CNN's own
    for extra in (["--pooling", "gap"], ["--batch-size", "3"], ["--pooling", "gap",
                                                                  "--batch-size", "5"]):
        same = json.loads(run(*head, *extra).stdout)
        assert same["id"] == plain["id"]
        assert same["from_cache"]
    other = json.loads(run(*head, "--pooling", "mean").stdout)
    assert other["record"]["pooling"] == "mean"
    assert other["id"] != plain["id"]
    # the head get result trains with the same pooling is this one
    result = json.loads(run("get", "result", *TINY, "-t", "knn", "-d", shapes, "--split", "val",
                            "--train-data", shapes, "--train-split", "train", "--pooling",
                            "mean", "--json").stdout)
    assert result["record"]["inputs"]["head"] == other["id"]


def test_a_head_trained_with_another_pooling_names_the_flag_that_reads_its_features(run,
                                                                                     shapes):
    head = run("get", "head", *TINY, "-t", "classification", "--train-data", shapes,
               "--train-split", "train", "--pooling", "mean", "-p", "epochs=1", "--tag", "m")
    assert head.exit_code == 0, head.output
    apply = ["get", "result", *TINY, "-t", "classification", "-d", shapes, "--split", "val",
             "--head", "m"]
    refused = run(*apply)
    assert refused.exit_code == 11
    assert "pooling is 'mean' in the head, 'gap' here" in refused.output
    assert "pass --pooling mean to read the features it was trained on" in refused.output
    assert run(*apply, "--pooling", "mean").exit_code == 0


def test_get_head_pooling_is_refused_for_a_dense_task(run, shapes, tmp_path):
    out = run("get", "head", *TINY, "-t", "generic_segmentation", "--train-data",
              "scenes:per_split=2,size=32", "--train-split", "train", "--pooling", "mean")
    assert out.exit_code == 2
    assert "a pooling does not apply" in out.output
    assert not [p for p in (tmp_path / "s" / "objects").rglob("*") if p.is_file()]


def test_get_head_in_python_takes_pooling_and_batch_size(shapes):
    kw = dict(weights="random", input_size=32, train_split="train", progress=False)
    plain = vbstore.get_head("test_cnn", "knn", shapes, **kw)
    assert vbstore.get_head("test_cnn", "knn", shapes, pooling="gap", batch_size=2, **kw).id \
        == plain.id
    assert vbstore.get_head("test_cnn", "knn", shapes, pooling="mean", **kw).record.pooling \
        == "mean"


def test_sweep_pooling_goes_to_the_pooled_tasks_and_batch_size_changes_no_id(run, shapes,
                                                                           tmp_path):
    backbones = tmp_path / "backbones.txt"
    backbones.write_text("test_cnn weights=random input_size=32\n")
    sweep = ["sweep", "--backbones", str(backbones), "--tasks", "knn,correspondence", "-d", shapes,
             "--split", "val", "--train-data", shapes, "--train-split", "train", "--json"]
    first = run(*sweep, "--pooling", "mean", "--batch-size", "3")
    assert first.exit_code == 0, first.output
    rows = {row["task"]: row for row in json.loads(first.stdout)}
    assert "error" not in rows["correspondence"]  # a dense task reads its maps: no pooling
    knn = json.loads(run("get", "result", *TINY, "-t", "knn", "-d", shapes, "--split", "val",
                         "--train-data", shapes, "--train-split", "train", "--pooling", "mean",
                         "--json").stdout)
    assert knn["id"] == rows["knn"]["id"]
    again = {row["task"]: row for row in json.loads(run(*sweep, "--pooling", "mean").stdout)}
    assert {t: (r["id"], r["from_cache"]) for t, r in again.items()} == {
        t: (r["id"], True) for t, r in rows.items()}
    plain = {row["task"]: row for row in json.loads(run(*sweep, "--pooling", "gap").stdout)}
    assert plain["knn"]["id"] != rows["knn"]["id"]
    assert plain["correspondence"]["id"] == rows["correspondence"]["id"]


def test_a_sweep_with_a_refused_combination_says_to_fix_it_before_rerunning(run, shapes,
                                                                            tmp_path):
    backbones = tmp_path / "backbones.txt"
    backbones.write_text("test_cnn weights=random input_size=32\n")
    out = run("sweep", "--backbones", str(backbones), "--tasks", "knn", "-d", shapes, "--split",
              "val", "--train-data", shapes, "--train-split", "train", "--pooling", "cls")
    assert out.exit_code == 1
    assert "error: test_cnn has no pooling 'cls'" in out.output
    # the same command again fails the same way: resuming alone would not help
    assert "1 of 1 combinations failed; fix what each error names, then rerun (finished " \
           "combinations are answered from the store)" in out.output


def test_train_batch_size_on_get_head_and_sweep_is_get_results(run, shapes, tmp_path):
    # the head's training batch (the task parameter batch_size): part of the head's identity,
    # the same on get head, sweep and get result as -p batch_size
    quick = ["-t", "classification", "--train-data", shapes, "--train-split", "train", "-p",
             "epochs=1", "--json"]
    head = run("get", "head", *TINY, *quick, "--train-batch-size", "4")
    assert head.exit_code == 0, head.output
    four = json.loads(head.stdout)
    same = json.loads(run("get", "head", *TINY, *quick, "-p", "batch_size=4").stdout)
    assert (same["id"], same["from_cache"]) == (four["id"], True)
    assert json.loads(run("get", "head", *TINY, *quick).stdout)["id"] != four["id"]
    result = json.loads(run("get", "result", *TINY, *quick, "-d", shapes, "--split", "val",
                            "--train-batch-size", "4").stdout)
    assert result["record"]["params"]["batch_size"] == 4
    assert result["record"]["inputs"]["head"] == four["id"]
    both = run("get", "head", *TINY, *quick, "--train-batch-size", "4", "-p", "batch_size=8")
    assert both.exit_code == 2
    assert "--train-batch-size 4 and -p batch_size=8 disagree" in both.output

    backbones = tmp_path / "backbones.txt"
    backbones.write_text("test_cnn weights=random input_size=32\n")
    sweep = ["sweep", "--backbones", str(backbones), "--tasks", "classification", "-d", shapes,
             "--split", "val", "--train-data", shapes, "--train-split", "train", "-p",
             "epochs=1", "--json"]
    swept = run(*sweep, "--train-batch-size", "4")
    assert swept.exit_code == 0, swept.output
    row = json.loads(swept.stdout)[0]
    assert (row["id"], row["from_cache"]) == (result["id"], True)
    other = json.loads(run(*sweep, "--train-batch-size", "8").stdout)[0]
    assert (other["from_cache"], other["id"] != result["id"]) == (False, True)
    refused = run(*sweep, "--train-batch-size", "4", "-p", "batch_size=8")
    assert refused.exit_code == 2
    assert "--train-batch-size 4 and -p batch_size=8 disagree" in refused.output
