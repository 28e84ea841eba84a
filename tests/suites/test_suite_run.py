"""A suite drives its runs: ``get result --suite`` takes the suite's task, parameters and pinned
settings, refuses a flag that contradicts them before anything is computed, and ends with the
verdict and the board place."""

import json

import pytest
from click.testing import CliRunner

from vbstore import Store, run_suite
from vbstore.cli import cli
from vbstore.errors import UsageError
from vbstore.suites import get_suite

TINY = ["--weights", "random", "--input-size", "32"]


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    from vbstore.data import make_shapes

    return str(
        make_shapes(tmp_path_factory.mktemp("data") / "shapes", per_class=3, seed=1, size=32)
    )


@pytest.fixture
def run(tmp_path):
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(cli, ["--store", str(tmp_path / "s"), *args])

    return invoke


@pytest.fixture
def k5(run, shapes, tmp_path):
    """A random-weights kNN suite made with a parameter off its default (k=5) and a pinned
    setting (layers=-1)."""
    suite_file = tmp_path / "suite.json"
    made = run("suite", "new", "--slug", "shapes-k5", "-t", "knn", "-d", shapes, "--split", "val",
               "-p", "k=5", "--pin", "layers=-1", "--weights", "random", "-o", str(suite_file))
    assert made.exit_code == 0, made.output
    assert run("suite", "push", str(suite_file)).exit_code == 0
    return "shapes-k5@1"


def _results(tmp_path):
    store = Store(tmp_path / "s")
    return [info.id for info in store.ls("result")]


def test_one_get_result_suite_without_repeating_its_parameters_is_eligible(run, shapes, k5,
                                                                           tmp_path):
    """The issue's case: the suite pins k=5; one `get result --suite` names no task, no data,
    no -p k=5, and the evaluation ranks."""
    out = run("get", "result", "-b", "test_cnn", *TINY, "--train-data", shapes,
              "--train-split", "train", "--suite", k5)
    assert out.exit_code == 0, out.output
    assert "verdict   eligible" in out.output
    # the output ends with the checkpoint's place on the board
    assert out.output.rstrip().splitlines()[-1].strip() == (
        f"board     rank 1 of 1 on {k5} (1 attempt)")
    [result] = _results(tmp_path)
    record = json.loads(run("show", result, "--json").output)["content"]
    assert record["params"]["k"] == 5
    assert record["task"] == "knn"
    again = json.loads(run("get", "result", "-b", "test_cnn", *TINY, "--train-data", shapes,
                           "--train-split", "train", "--suite", k5, "--json").stdout)
    assert again["verdict"]["state"] == "eligible"
    assert again["place"] == {"suite": k5, "rank": 1, "ranked": 1, "attempts": 1,
                              "label": again["checkpoint"]["label"], "headline": "top1",
                              "baseline": again["place"]["baseline"]}
    assert again["condition_results"]["val"]["from_cache"] is True


@pytest.mark.parametrize(("flags", "said"), [
    (["-p", "k=20"], "-p k=20 contradicts shapes-k5@1, which pins k=5"),
    (["-t", "retrieval"], "--task retrieval contradicts shapes-k5@1, whose task is knn"),
    (["--layers", "-2"], "--layers -2 contradicts shapes-k5@1, which pins layers=-1"),
    (["--finetune-blocks", "1"],
     "--finetune-blocks 1 contradicts shapes-k5@1, which pins finetune=none"),
    (["--split", "val"], "--split and --suite both say where the samples are"),
])
def test_a_flag_that_contradicts_the_suite_is_refused_before_anything_is_computed(
        run, shapes, k5, tmp_path, flags, said):
    before = {info.id for info in Store(tmp_path / "s").ls()}  # what suite new stored
    out = run("get", "result", "-b", "test_cnn", *TINY, "--train-data", shapes,
              "--train-split", "train", "--suite", k5, *flags)
    assert out.exit_code == 2, out.output
    assert said in out.output
    assert json.loads(run("evaluations", "--json").output) == []
    # nothing was stored on the way: no manifest, no backbone, no result
    assert {info.id for info in Store(tmp_path / "s").ls()} == before


def test_a_flag_that_agrees_with_the_suite_is_taken(run, shapes, k5):
    out = run("get", "result", "-b", "test_cnn", *TINY, "-t", "knn", "-d", shapes,
              "--train-data", shapes, "--train-split", "train", "-p", "k=5.0", "--layers", "-1",
              "--suite", k5, "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["verdict"]["state"] == "eligible"


def test_a_dry_run_plans_every_condition_and_computes_nothing(run, shapes, k5, tmp_path):
    out = run("get", "result", "-b", "test_cnn", *TINY, "--train-data", shapes,
              "--train-split", "train", "--suite", k5, "--dry-run")
    assert out.exit_code == 0, out.output
    assert "val: plan for knn on test_cnn (nothing computed):" in out.output
    assert "nothing was computed or recorded" in out.output
    assert _results(tmp_path) == []
    assert json.loads(run("evaluations", "--json").output) == []


def test_a_suite_whose_data_is_elsewhere_asks_for_data(run, shapes, tmp_path):
    suite = {"slug": "far", "version": 1, "name": "far away", "protocol": {
        "task": "knn", "data": {"kind": "external", "label": "/nowhere/here"},
        "conditions": [{"name": "val", "sampleCount": 15}],
        "metrics": [{"key": "top1", "headline": True}]}}
    (tmp_path / "far.json").write_text(json.dumps(suite))
    assert run("suite", "push", str(tmp_path / "far.json")).exit_code == 0
    out = run("get", "result", "-b", "test_cnn", *TINY, "--train-data", shapes,
              "--train-split", "train", "--suite", "far@1")
    assert out.exit_code == 2, out.output
    assert "far@1's data (/nowhere/here) is not on this machine" in out.output
    given = run("get", "result", "-b", "test_cnn", *TINY, "-d", shapes, "--train-data", shapes,
                "--train-split", "train", "--suite", "far@1", "--json")
    assert given.exit_code == 0, given.output


def test_without_a_suite_task_and_data_are_still_required(run):
    out = run("get", "result", "-b", "test_cnn", "-d", "x")
    assert out.exit_code == 2
    assert "Missing option '--task'" in out.output


def test_the_python_api_runs_a_suite(run, shapes, k5, tmp_path):
    store = Store(tmp_path / "s")
    said = r"params={.k.: 7} contradicts shapes-k5@1, which pins k=5"
    with pytest.raises(UsageError, match=said):
        run_suite(store, k5, "test_cnn", params={"k": 7}, train_data=shapes,
                  train_split="train", weights="random")
    with pytest.raises(TypeError, match="epochs"):
        run_suite(store, k5, "test_cnn", epochs=3, train_data=shapes, train_split="train")
    planned = run_suite(store, k5, "test_cnn", weights="random", input_size=32,
                        train_data=shapes, train_split="train", dry_run=True)
    assert planned.evaluation is None
    assert planned.plans["val"].task_params["k"] == 5
    done = run_suite(store, k5, "test_cnn", weights="random", input_size=32, train_data=shapes,
                     train_split="train", progress=False)
    assert done.evaluation.verdict["state"] == "eligible"
    assert done.place["rank"] == 1
    assert done.results["val"].record.params["k"] == 5
    assert get_suite(store, k5).params["k"] == 5


def test_a_pinned_train_manifest_refuses_other_training_data(run, shapes, tmp_path):
    from vbstore.data import load_manifest

    store = Store(tmp_path / "s")
    train = load_manifest(store, shapes, split="train").id
    suite_file = tmp_path / "pinned.json"
    made = run("suite", "new", "--slug", "pinned", "-t", "knn", "-d", shapes, "--split", "val",
               "-p", "k=3", "--pin", f"train_data={train}", "--weights", "random",
               "-o", str(suite_file))
    assert made.exit_code == 0, made.output
    assert run("suite", "push", str(suite_file)).exit_code == 0
    out = run("get", "result", "-b", "test_cnn", *TINY, "--train-data", shapes,
              "--train-split", "val", "--suite", "pinned@1")
    assert out.exit_code == 2, out.output
    assert f"pins train_data={train[:12]}" in out.output
    assert _results(tmp_path) == []


def test_other_data_is_refused_before_anything_is_extracted(run, shapes, k5, tmp_path):
    """--data whose samples are not the suite's: refused once planned, naming both; no feature
    extracted, no result, no evaluation (the verdict would have said data-mismatch(content))."""
    from vbstore.data import make_shapes

    other = str(make_shapes(tmp_path / "other", per_class=3, seed=2, size=32))
    out = run("get", "result", "-b", "test_cnn", *TINY, "-d", other, "--train-data", shapes,
              "--train-split", "train", "--suite", k5)
    assert out.exit_code == 2, out.output
    assert f"the samples of {other} are not those {k5} pins (data-mismatch(content))" \
        in out.output
    assert f"give the data {k5} was made from ({shapes}), all of it" in out.output
    store = Store(tmp_path / "s")
    assert store.ls("pack") == store.ls("result") == []
    assert json.loads(run("evaluations", "--json").output) == []
    limited = run("get", "result", "-b", "test_cnn", *TINY, "--limit", "2", "--train-data",
                  shapes, "--train-split", "train", "--suite", k5)
    assert limited.exit_code == 2, limited.output
    assert "data-mismatch(content)" in limited.output


def test_default_trained_weights_on_a_random_weights_suite_are_refused(run, shapes, k5,
                                                                        tmp_path):
    """efficientnet_lite0's default weights are ImageNet's: on a random-weights suite, leaving
    out --weights is refused once the backbone is known, before a feature is extracted; given
    on purpose (--weights default), the check leaves them to the verdict."""
    args = ["get", "result", "-b", "efficientnet_lite0", "--input-size", "32", "--train-data",
            shapes, "--train-split", "train", "--suite", k5]
    out = run(*args)
    assert out.exit_code == 2, out.output
    assert ("efficientnet_lite0's default weights are pretrained; shapes-k5@1 ranks untrained "
            "weights (random or fixed)") in out.output
    assert "give --weights random" in out.output
    store = Store(tmp_path / "s")
    assert store.ls("pack") == store.ls("result") == []
    assert run(*args, "--weights", "default", "--dry-run").exit_code == 0


def test_a_suite_made_on_generated_data_finds_it_by_name(run, tmp_path, monkeypatch):
    """``-d shapes`` names generated data as ``sklearn:digits`` names packaged data: a suite
    made on it needs no ``--data`` (a name without ``name:`` is not a folder here)."""
    monkeypatch.chdir(tmp_path)  # no folder called shapes here
    data = "shapes:per_class=3,size=32,seed=1"
    made = run("suite", "new", "--slug", "gen", "-t", "knn", "-d", "shapes", "--split", "val",
               "--weights", "random", "-o", str(tmp_path / "gen.json"))
    assert made.exit_code == 0, made.output
    assert run("suite", "push", str(tmp_path / "gen.json")).exit_code == 0
    out = run("get", "result", "-b", "test_cnn", *TINY, "--train-data", data,
              "--train-split", "train", "--suite", "gen@1", "--dry-run")
    assert out.exit_code == 0, out.output
    assert "val: plan for knn on test_cnn (nothing computed):" in out.output
