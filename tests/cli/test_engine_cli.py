"""The engine through the command line, as a user runs it."""

import csv
import io
import json
import os
import subprocess
import sys

import pytest

import vbstore

TINY = ["--weights", "random", "--input-size", "32"]


@pytest.fixture(scope="module")
def shapes(shapes_folder):
    """4 images per class and split (seed 1); ``run`` is the folder's (conftest.py)."""
    return shapes_folder(4, 1)


DEMO = ("demo", "--backbone", "test_cnn", "--input-size", "32")


def test_demo_runs_offline_and_answers_from_cache(run):
    """A backbone without pretrained weights falls back to random ones, and says so."""
    result = run(*DEMO, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["weights"] == "random"
    assert "pretrained weights unavailable" in summary["note"]
    assert summary["random_result"] == summary["result"]  # not run twice
    # 25 faces and 25 non-faces: a random ranking finds 24 of the 49 others of its class
    assert summary["trivial_value"] == pytest.approx(24 / 49)
    assert 0 <= summary["value"] <= 1
    assert summary["cached"]
    assert not summary["first_from_cache"]
    again = json.loads(run(*DEMO, "--json").stdout)
    assert again["first_from_cache"]
    assert again["result"] == summary["result"]
    text = run(*DEMO).output
    assert "trivial: chance (a random ranking)  0.490" in text
    assert "vbstore why" in text


def test_demo_classification_reads_against_the_majority_class(run):
    summary = json.loads(run(*DEMO, "--task", "classification", "--json").stdout)
    assert (summary["metric"], summary["trivial"]) == ("top1", "the majority class")
    assert summary["trivial_value"] == pytest.approx(0.5)
    assert summary["train_metrics"]["train_top1"] >= 0


def _readme_demos() -> list[list[str]]:
    """The `vbstore demo ...` lines of the README's tour, as argument lists."""
    import shlex
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    return [shlex.split(line.split("#")[0])[1:] for line in readme.splitlines()
            if line.startswith("vbstore demo")]


def test_the_readme_tour_has_its_demos():
    assert ["demo"] in _readme_demos()
    assert ["demo", "--task", "depth"] in _readme_demos()


# README demos whose question is a reference-corpus probe's: here only that the demo asks that
# question. That lite0's ImageNet weights beat random ones and the trivial predictor on it is
# checked by tests/engine/test_probe_signal_lite*.py (their test_every_trained_probe_is_checked:
# every trained vision probe of the corpus), on the same data and input with fewer epochs (their
# SMALLER), and shown with the corpus's own schedule by the reference board registry.db holds
# (README); the demo's printing of a dense probe: tests/cli/test_dense_cli.py
CORPUS_DEMOS = {("demo", "--task", "depth"): "depth"}


@pytest.mark.slow
@pytest.mark.parametrize("args", [a for a in _readme_demos() if tuple(a) not in CORPUS_DEMOS],
                         ids=" ".join)
def test_every_readme_demo_shows_what_pretraining_adds(run, args):
    """Each demo the README shows ranks the ImageNet weights of efficientnet_lite0 ahead of
    random ones on its data. Measured (seed 0): faces mAP 0.987 vs 0.687 (chance 0.490); depth d1
    with the reference board's 200 steps of head training, see docs/results.md."""
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["backbone"], summary["weights"]) == ("efficientnet_lite0", "pretrained")
    assert summary["over_random"] > 0, summary
    if summary["over_trivial"] is not None:
        assert summary["over_trivial"] > 0, summary
    if args == ["demo"]:
        assert summary["value"] >= 0.95
        assert summary["over_random"] >= 0.15
        assert summary["over_trivial"] >= 0.3


class _Asked(Exception):
    """Stops a command once it has asked the engine for its results."""


def _asked(monkeypatch, call, stop: int) -> list:
    """The result requests ``call()`` puts to the engine, none computed: each is answered as a
    stored result of its weights, until the ``stop``-th, which stops ``call``."""
    from types import SimpleNamespace

    from vbstore.engine import _results

    asked: list = []

    def get(request, **_):
        asked.append(request)
        if len(asked) == stop:
            raise _Asked
        kind = "random" if request.backbone.weights == "random" else "pretrained"
        return SimpleNamespace(id="0" * 64, record=SimpleNamespace(weights_kind=kind))

    with monkeypatch.context() as patch:
        patch.setattr(_results, "get", get)
        try:
            call()
        except _Asked:
            pass
    return asked


def _question(store, request) -> tuple:
    """What ``request`` asks, in the terms its result's key is made of: the backbone (random
    weights without a seed are seed 0's), the data, and the probe with its parameters as
    planned (the scenes' depth unit read from the data)."""
    from dataclasses import replace

    from vbstore.engine import plan

    planned = plan(request, store, dry_run=True)
    backbone = request.backbone
    if backbone.weights == "random":
        backbone = replace(backbone, seed=backbone.seed or 0)
    probe = replace(request.probe, params=dict(planned.task_params))
    return (backbone, probe, request.data, request.train, request.val,
            planned.eval_m.id, planned.train_m.id)


@pytest.mark.slow
@pytest.mark.parametrize("args", list(CORPUS_DEMOS), ids=" ".join)
def test_a_readme_demo_asks_the_question_of_its_corpus_probe(monkeypatch, tmp_path, args):
    """The demo's pretrained and random results are the corpus probe's on lite0 and on lite0's
    random weights at seed 0 (the backbones test_probe_signal_lite*.py rank)."""
    from click.testing import CliRunner

    from vbstore.cli import cli
    from vbstore.suites import _corpus, reference

    assert list(args) in _readme_demos()
    spec = next(p for p in _corpus.PROBES if p["task"] == CORPUS_DEMOS[args])
    assert spec["train"]
    assert spec["backbones"] == "vision"  # so test_probe_signal_lite*.py check it
    store_dir = tmp_path / "s"
    demo = _asked(monkeypatch, lambda: CliRunner().invoke(
        cli, ["--store", str(store_dir), *args, "--json"], catch_exceptions=False), stop=3)
    assert [r.backbone.weights for r in demo] == ["default", "default", "random"]
    with vbstore.Store(store_dir) as store:
        corpus = [_asked(monkeypatch, lambda b=backbone: reference.probe_results(
            store, spec, tmp_path / "inputs", b), stop=1)[0]
            for backbone in (("efficientnet_lite0", "default", None, None),
                             ("efficientnet_lite0", "random", 0, None))]
        assert _question(store, demo[0]) == _question(store, corpus[0])
        assert _question(store, demo[2]) == _question(store, corpus[1])


def test_get_result_text_json_and_errors(run, shapes):
    args = ["get", "result", "-b", "test_cnn", *TINY, "-t", "knn", "-d", shapes, "--split", "val",
            "--train-data", shapes, "--train-split", "train", "-p", "k=3"]
    first = run(*args, "--json")
    assert first.exit_code == 0, first.output
    record = json.loads(first.stdout)["record"]
    assert record["params"]["k"] == 3
    assert set(record["metrics"]) == {"top1", "top5"}
    text = run(*args).output
    assert "cached" in text
    assert "top1" in text
    zero_shot = run("get", "result", "-b", "test_cnn", *TINY, "-t", "retrieval", "-d", shapes,
                    "--split", "val", "--train-data", shapes)
    assert zero_shot.exit_code == 2
    assert "drop --train-data" in zero_shot.output
    missing = run("get", "result", "-b", "test_cnn", *TINY, "-t", "classification", "-d", shapes,
                  "--split", "val")
    assert missing.exit_code == 2
    assert "--train-data" in missing.output
    unknown = run("get", "result", "-b", "test_cnn", *TINY, "-t", "clasification", "-d", shapes)
    assert unknown.exit_code == 9
    assert "did you mean 'classification'" in unknown.output
    bad_param = run(*args[:-2], "-p", "k=zero")
    assert bad_param.exit_code == 2
    assert "'k'" in bad_param.output


def test_export_has_each_tasks_own_columns(run, shapes):
    base = ["-b", "test_cnn", *TINY, "-d", shapes, "--split", "val"]
    assert run("get", "result", *base, "-t", "retrieval").exit_code == 0
    assert run("get", "result", *base, "-t", "knn", "--train-data", shapes,
               "--train-split", "train").exit_code == 0
    table = list(csv.DictReader(io.StringIO(run("export", "results", "--format", "csv").stdout)))
    assert {row["task"] for row in table} == {"retrieval", "knn"}
    columns = set(table[0])
    assert {"top1", "recall@1", "mAP"} <= columns
    assert "acc1" not in columns  # no column for a metric no result has
    knn = next(r for r in table if r["task"] == "knn")
    assert knn["recall@1"] == ""
    assert float(knn["top1"]) >= 0
    markdown = run("export", "results", "--format", "md").stdout
    assert "## knn" in markdown
    assert "## retrieval" in markdown
    assert "recall@1" not in markdown.split("## retrieval")[0]
    jsonl = run("export", "results", "--format", "jsonl", "--task", "knn").stdout
    only = [json.loads(line) for line in jsonl.splitlines()]
    assert [r["task"] for r in only] == ["knn"]
    listing = json.loads(run("ls", "results", "--json").stdout)
    assert len(listing) == 2
    heads = run("ls", "heads").stdout.splitlines()
    assert len(heads) == 1
    assert "knn on backbone" in heads[0]  # what the head is, not a blank description
    assert "pooling gap  layers [-1]" in heads[0]
    assert run("get", "result", "-b", "test_cnn", "--weights", "random", "-d", shapes, "--split",
               "val", "-t", "retrieval").exit_code == 0  # no --input-size: None in the row
    markdown = run("export", "results", "--format", "md").stdout
    assert "| None |" not in markdown  # an empty cell, as in the CSV
    misspelt = run("export", "results", "--task", "knnn")
    assert misspelt.exit_code == 9
    assert "did you mean 'knn'" in misspelt.output


def test_sweep_is_resumable(run, shapes, tmp_path):
    backbones = tmp_path / "backbones.txt"
    backbones.write_text("# two tiny backbones\ntest_cnn weights=random input_size=32\n"
                         "test_vit weights=random input_size=32 seed=1\n")
    args = ["sweep", "--backbones", str(backbones), "--tasks", "knn,retrieval", "-d", shapes,
            "--split", "val", "--train-data", shapes, "--train-split", "train", "--json"]
    first = run(*args)
    assert first.exit_code == 0, first.output
    rows = json.loads(first.stdout)
    assert len(rows) == 4
    assert not any(r["from_cache"] for r in rows)
    again = json.loads(run(*args).stdout)
    assert all(r["from_cache"] for r in again)
    assert [r["id"] for r in again] == [r["id"] for r in rows]


def test_list_and_get_features_and_manifest(run, shapes):
    backbones = json.loads(run("list", "backbones", "test_*", "--json").stdout)
    assert {row["spec"] for row in backbones} >= {"test_cnn", "test_vit"}
    tasks = json.loads(run("list", "tasks", "--json").stdout)
    assert {"classification", "knn", "retrieval", "zeroshot_classification", "multilabel",
            "zeroshot_retrieval"} <= {t["name"] for t in tasks}
    params = next(t for t in tasks if t["name"] == "classification")["params"]
    text = run("list", "tasks", "classification").stdout
    lines = [line for line in text.splitlines() if line.startswith("    -p ")]
    columns = {line.index(params[line.split()[1].split("=")[0]]["help"]) for line in lines}
    assert len(lines) == len(params)
    assert len(columns) == 1, text  # every parameter's help starts in one column
    manifest = json.loads(run("get", "manifest", shapes, "--split", "val", "--json").stdout)
    assert manifest["samples"] == 20
    features_args = ("get", "features", "-b", "test_vit", *TINY, "-d", shapes, "--split", "val")
    feats = run(*features_args, "--json")
    assert feats.exit_code == 0, feats.output
    info = json.loads(feats.stdout)
    assert info["manifest"] == manifest["id"]
    assert not info["from_cache"]
    assert json.loads(run(*features_args, "--json").stdout)["from_cache"]


def test_user_mistakes_get_one_line_errors(run, shapes):
    base = ["get", "result", "-b", "test_cnn", *TINY, "-d", shapes, "--split", "val"]
    no_cuda = run("get", "features", "-b", "test_cnn", *TINY, "-d", shapes, "--split", "val",
                  "--device", "cuda:7")
    assert no_cuda.exit_code == 2
    assert "not available on this machine" in no_cuda.output
    assert run("get", "features", "-b", "test_cnn", *TINY, "-d", shapes, "--split", "val",
               "--device", "gpu").exit_code == 2
    text_task = run(*base, "-t", "zeroshot_classification")
    assert text_task.exit_code == 2
    assert "needs a CLIP backbone" in text_task.output
    no_split = run(*base, "-t", "knn", "--train-data", shapes)
    assert no_split.exit_code == 2
    assert "--train-split" in no_split.output
    no_weights = run("get", "features", "-b", "test_cnn", "-d", shapes, "--split", "val")
    assert no_weights.exit_code == 2
    assert "--weights random" in no_weights.output
    for result in (no_cuda, text_task, no_split, no_weights):
        assert result.output.count("\n") == 1
        assert "Traceback" not in result.output


def test_a_backbone_seed_without_random_weights_is_refused(run, shapes, tmp_path):
    seed = ["-b", "test_vit", "--weights", "pretrained", "--backbone-seed", "5"]
    data = ["-d", shapes, "--split", "val"]
    backbones = tmp_path / "backbones.txt"
    backbones.write_text("test_cnn weights=random input_size=32\ntest_vit seed=5\n")
    head = tmp_path / "h.safetensors"
    head.write_bytes(b"not read")
    refused = {
        "get result": run("get", "result", *seed, "-t", "knn", *data, "--train-data", shapes,
                          "--train-split", "train"),
        "get result ckpt": run("get", "result", "-b", "test_vit", "--weights",
                               str(tmp_path / "w.safetensors"), "--backbone-seed", "0",
                               "-t", "knn", *data, "--train-data", shapes,
                               "--train-split", "train", "--dry-run"),
        "get features": run("get", "features", *seed, *data),
        "get head": run("get", "head", *seed, "-t", "knn", "--train-data", shapes,
                        "--train-split", "train"),
        "run": run("run", "knn", *seed, *data, "--train-data", shapes, "--train-split", "train"),
        "import head": run("import", "head", str(head), "--backbone-seed", "1"),
        "pull head": run("pull", "head", "nowhere/h", "--backbone", "test_vit",
                         "--backbone-seed", "1"),
    }
    for name, result in refused.items():
        assert result.exit_code == 2, (name, result.output)
        assert "--backbone-seed only applies with --weights random" in result.output, name
        assert result.output.count("\n") == 1, (name, result.output)
    sweep = run("sweep", "--backbones", str(backbones), "--tasks", "knn", *data,
                "--train-data", shapes, "--train-split", "train")
    assert sweep.exit_code == 2, sweep.output
    assert f"{backbones}:2: seed=5 only applies with weights=random" in sweep.output
    objects = tmp_path / "s" / "objects"
    assert not objects.exists() or not any(p.is_file() for p in objects.rglob("*"))


def test_cached_features_and_heads_do_not_import_torch(run, tmp_path, shapes):
    import time

    from vbstore.store import RACY_SECONDS

    time.sleep(2 * RACY_SECONDS)  # the data older than the racy window: its listing is kept
    store = str(tmp_path / "s")
    commands = [
        ["get", "features", "-b", "test_cnn", *TINY, "-d", shapes, "--split", "val"],
        ["get", "head", "-b", "test_cnn", *TINY, "-t", "classification", "--train-data", shapes,
         "--train-split", "train", "-p", "epochs=10"],
    ]
    code = ("import sys, vbstore.cli\n"
            "try:\n    vbstore.cli.cli(sys.argv[1:], standalone_mode=False)\n"
            "finally:\n    print('TORCH', 'torch' in sys.modules)")
    for args in commands:
        first = run(*args)  # computed in this process (``run``'s store is tmp_path / "s")
        assert first.exit_code == 0, first.output
        assert "cached" not in first.output, first.output  # computed: the next run reads it
        again = subprocess.run([sys.executable, "-c", code, "--store", store, *args],
                               capture_output=True, text=True)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "TORCH False" in again.stdout, again.stdout + again.stderr
        assert "cached" in again.stdout


def test_broken_pipe_is_quiet(tmp_path):
    import os
    import subprocess
    import sys

    store = str(tmp_path / "s")
    put = subprocess.run([sys.executable, "-m", "vbstore", "--store", store, "put", "-"],
                         input=os.urandom(4 << 20), check=True, capture_output=True)
    oid = put.stdout.decode().strip()
    script = f"{sys.executable} -m vbstore --store {store} cat {oid} | head -c 10 >/dev/null; " \
             "echo ${PIPESTATUS[0]}"
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert proc.stdout.strip() == "0", proc.stderr
    assert "error" not in proc.stderr, proc.stderr


def test_a_library_warning_is_one_line_in_the_command(shapes, tmp_path):
    with vbstore.Store(tmp_path / "s") as store:
        head = vbstore.get_head("test_cnn", "classification", shapes, store=store,
                                train_split="train", weights="random", input_size=32,
                                progress=False, params={"epochs": 10})
    proc = subprocess.run(
        [sys.executable, "-m", "vbstore", "--store", str(tmp_path / "s"), "get", "result", "-b",
         "test_cnn",
         *TINY, "--backbone-seed", "1", "-t", "classification", "-d", shapes, "--split", "val",
         "--head", head.id, "--no-strict"],
        capture_output=True, text=True, env={**os.environ, "VBSTORE_DEBUG": ""},
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning: applying a mismatched head: weights is" in proc.stderr
    assert "HeadMismatchWarning" not in proc.stderr  # not Python's file:line report
    assert "load_head(" not in proc.stderr


def test_backbone_flags_without_backbone_are_refused_by_import_and_pull_head(run, tmp_path):
    # --weights/--backbone-seed/--input-size describe --backbone: alone they checked nothing
    head = tmp_path / "h.safetensors"
    head.write_bytes(b"not read")
    cases = {
        "import head": run("import", "head", str(head), "--weights", "random",
                           "--backbone-seed", "1"),
        "pull head": run("pull", "head", "nowhere/h", "--input-size", "32"),
    }
    for name, result in cases.items():
        assert result.exit_code == 2, (name, result.output)
        assert "describe --backbone, which is not given" in result.output, name
        assert result.output.count("\n") == 1, (name, result.output)
    assert "--weights, --backbone-seed describe" in cases["import head"].output
    objects = tmp_path / "s" / "objects"
    assert not objects.exists() or not any(p.is_file() for p in objects.rglob("*"))
