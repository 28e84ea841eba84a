"""Visin's workflow, whole: results computed elsewhere with Visin's evidence flags, a Visin
results file imported, per-class results, corrections, and a suite written as Visin writes it."""

import hashlib
import json

import pytest
from click.testing import CliRunner
from suites_support import road_test

from vbstore.cli import cli
from vbstore.suites import protocol_digest

RESULTS = {
    "day": {"overall": {"miou": 0.8, "pixel_acc": 0.9, "note": "text is kept out"},
            "road": {"iou": 0.91}},
    "night": {"overall": {"miou": 0.7, "pixel_acc": 0.85}, "road": {"iou": 0.83}},
}


@pytest.fixture
def run(tmp_path):
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(cli, ["--store", str(tmp_path / "s"), *args])

    return invoke


@pytest.fixture
def files(tmp_path, run):
    suite = tmp_path / "road.json"
    suite.write_text(json.dumps(road_test()))
    assert run("suite", "push", str(suite)).exit_code == 0
    results = tmp_path / "results.json"
    results.write_text(json.dumps(RESULTS))
    weights = tmp_path / "epoch_40.pth"
    weights.write_bytes(b"weights")
    return suite, results, weights


def _evaluate(run, results, *flags):
    out = run("evaluate", str(results), "--suite", "road-test@1", "--json", *flags)
    assert out.exit_code in (0, 3), out.output
    return json.loads(out.stdout)


def test_results_from_elsewhere_with_every_evidence_flag_are_observed(run, files):
    suite, results, weights = files
    evaluation = _evaluate(
        run, results, "--checkpoint", str(weights), "--label", "clft-40",
        "--sample-count", "day=1200", "--sample-count", "night=800",
        "--data", "external=" + "a" * 64, "--protocol", str(suite),
        "--evaluator-package", "vbstore", "--evaluator-version", "0.2.0",
    )
    assert evaluation["verdict"]["state"] == "eligible"
    assert evaluation["evidence"] == "observed"
    assert evaluation["checkpoint"] == {
        "id": "sha256:" + hashlib.sha256(b"weights").hexdigest(), "label": "clft-40",
        "weights": "checkpoint"}
    # condition -> class -> metric, every number kept; the suite's metrics score it
    assert evaluation["results"]["day"]["road"] == {"iou": 0.91}
    assert "note" not in evaluation["results"]["day"]["overall"]
    assert evaluation["verdict"]["checked"] == ["data(names)"]
    board = json.loads(run("leaderboard", "road-test@1", "--json").stdout)
    assert [r["label"] for r in board["rows"]] == ["clft-40"]


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (["--data", "external=" + "b" * 64], "data-mismatch(manifestSha256)"),
        (["--protocol-digest", "0" * 64], "protocol-mismatch(digest)"),
        (["--evaluator-package", "visin-fusion", "--evaluator-version", "1.4.2"],
         "evaluator(visin-fusion!=vbstore)"),
        (["--classes-scored", "road"], None),  # the suite names no classes: not compared
    ],
)
def test_each_evidence_flag_is_compared_with_the_suite(run, files, flags, reason):
    _, results, weights = files
    evaluation = _evaluate(run, results, "--checkpoint", str(weights), "--sample-count",
                           "day=1200", "--sample-count", "night=800", "--dry-run", *flags)
    assert evaluation["stored"] is False
    assert evaluation["verdict"]["reasons"] == ([reason] if reason else [])


def test_protocol_file_gives_the_digest_visin_would_compare(run, files, tmp_path):
    suite, results, weights = files
    other = tmp_path / "other.json"
    other.write_text(json.dumps(road_test(task="depth")))
    evaluation = _evaluate(run, results, "--checkpoint", str(weights), "--protocol", str(other),
                           "--dry-run")
    assert "protocol-mismatch(digest)" in evaluation["verdict"]["reasons"]
    assert "protocol-mismatch: task(depth != segmentation)" in evaluation["verdict"]["reasons"]
    digest = json.loads(run("suite", "digest", str(suite), "--json").stdout)["protocol_digest"]
    assert digest == protocol_digest(json.loads(run("suite", "show", "road-test@1", "--json")
                                                .stdout)["protocol"])


def test_a_results_file_needs_its_checkpoint_and_stored_results_refuse_evidence(run, files):
    _, results, _ = files
    refused = run("evaluate", str(results), "--suite", "road-test@1")
    assert refused.exit_code == 2
    assert "--checkpoint" in refused.output
    stored = run("evaluate", "0" * 12, "--suite", "road-test@1", "--data", "external=" + "a" * 64)
    assert stored.exit_code == 2
    assert "computed elsewhere" in stored.output


def test_hub_checkpoint_needs_a_full_commit(run, files):
    _, results, _ = files
    short = run("evaluate", str(results), "--suite", "road-test@1", "--hub-repo", "org/m",
                "--hub-commit", "main")
    assert short.exit_code == 2
    full = _evaluate(run, results, "--hub-repo", "org/m", "--hub-commit", "a" * 40, "--dry-run")
    assert full["checkpoint"]["id"] == "hf:org/m@" + "a" * 40


def test_import_results_reads_a_visin_results_file(run, files):
    _, results, weights = files
    refused = run("import", "results", str(results), "--suite", "road-test@1")
    assert refused.exit_code == 2
    assert "--checkpoint" in refused.output
    out = run("import", "results", str(results), "--suite", "road-test@1", "--checkpoint",
              str(weights), "--sample-count", "day=1200", "--sample-count", "night=800", "--json")
    assert out.exit_code == 0, out.output
    (evaluation,) = json.loads(out.stdout)
    assert evaluation["verdict"]["state"] == "eligible"
    assert evaluation["evidence"] == "reported"
    assert evaluation["sources"]["day"] == {"format": "visin", "file": "results.json"}
    assert evaluation["results"]["night"]["road"] == {"iou": 0.83}
    exported = run("export", "evaluation", evaluation["id"])
    assert json.loads(exported.stdout)["night"]["road"] == {"iou": 0.83}


def test_supersedes_from_the_cli(run, files):
    _, results, weights = files
    common = ["--checkpoint", str(weights), "--sample-count", "day=1200", "--sample-count",
              "night=800"]
    first = _evaluate(run, results, *common)
    second = _evaluate(run, results, "--checkpoint", str(weights), "--supersedes",
                       first["id"][:12])
    assert second["supersedes"] == first["id"]
    board = json.loads(run("leaderboard", "road-test@1", "--json").stdout)
    assert board["rows"] == []  # the correction is incomplete; the corrected one left the board
    listed = json.loads(run("evaluations", "--json").stdout)
    assert {r["id"]: r["superseded_by"] for r in listed}[first["id"]] == second["id"]


def test_suite_new_writes_the_protocol_as_visin_does(run, tmp_path):
    from vbstore.data import make_shapes

    data = str(make_shapes(tmp_path / "shapes", per_class=2, seed=0, size=16))
    out = tmp_path / "s.json"
    made = run("suite", "new", "--slug", "s", "-t", "knn", "-d", data, "--split", "val",
               "--pin", "layers=-1", "--pin", "precision=fp32", "-o", str(out))
    assert made.exit_code == 0, made.output
    doc = json.loads(out.read_text())
    protocol = doc["protocol"]
    assert protocol["data"]["kind"] == "external"
    assert not {"params", "weights"} & set(protocol)
    assert all(set(c) == {"name", "sampleCount"} for c in protocol["conditions"])
    assert doc["vbstore"]["settings"] == {"layers": -1, "precision": "fp32", "op_version": 1,
                                          "finetune": None}  # frozen unless pinned
    assert doc["vbstore"]["splits"] == {"val": "val"}
    assert len(doc["vbstore"]["contentSha256"]) == 64
    digests = json.loads(run("suite", "digest", str(out), "--json").stdout)
    assert digests["protocol_digest"] == hashlib.sha256(
        json.dumps(protocol, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    # the extension has its own digest: changing it leaves Visin's digest alone
    doc["vbstore"]["settings"]["layers"] = -2
    out.write_text(json.dumps(doc))
    again = json.loads(run("suite", "digest", str(out), "--json").stdout)
    assert again["protocol_digest"] == digests["protocol_digest"]
    assert again["extension_digest"] != digests["extension_digest"]


def test_a_suite_written_before_the_extension_block_reads_the_same(run, tmp_path):
    legacy = road_test()
    legacy["protocol"]["weights"] = "random"
    legacy["protocol"]["conditions"][0]["split"] = "test_day"
    path = tmp_path / "legacy.json"
    path.write_text(json.dumps(legacy))
    assert run("suite", "push", str(path)).exit_code == 0
    shown = json.loads(run("suite", "show", "road-test@1", "--json").stdout)
    assert shown["vbstore"]["params"] == {"lr": 0.001}
    assert shown["vbstore"]["weights"] == "random"
    assert shown["vbstore"]["splits"] == {"day": "test_day"}
    again = json.loads(run("suite", "push", str(path), "--json").stdout)
    assert again["new"] is False


@pytest.fixture(scope="module")
def shapes(shapes_folder):
    return shapes_folder(3, 1)


def _suite(run, tmp_path, shapes, slug, *pins):
    path = tmp_path / f"{slug}.json"
    made = run("suite", "new", "--slug", slug, "-t", "knn", "-d", shapes, "--split", "val",
               "-p", "k=3", "--weights", "random", *pins, "-o", str(path))
    assert made.exit_code == 0, made.output
    assert run("suite", "push", str(path)).exit_code == 0


def _on_suite(run, shapes, slug, *settings):
    out = run("get", "result", "-b", "test_cnn", "--weights", "random", "-t", "knn", "-d", shapes,
              "--train-data", shapes, "--train-split", "train", "-p", "k=3", "--suite",
              f"{slug}@1", "--json", *settings)
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_computed_settings_are_pinned_or_ranked_under_a_label(run, shapes, tmp_path):
    """The issue's case: --layers -2 --precision bf16 --input-size 48 was ranked beside
    default-setting rows under one label."""
    _suite(run, tmp_path, shapes, "pinned", "--pin", "layers=-1", "--pin", "precision=fp32",
           "--pin", "input_size=32")
    plain = _on_suite(run, shapes, "pinned", "--input-size", "32")
    assert plain["verdict"]["state"] == "eligible", plain["verdict"]
    assert plain["verdict"]["checked"] == ["data(content)"]
    # under --suite, a flag that contradicts a pin is refused before anything is computed
    refused = run("get", "result", "-b", "test_cnn", "--weights", "random", "--train-data",
                  shapes, "--train-split", "train", "--suite", "pinned@1", "--layers", "-2")
    assert refused.exit_code == 2
    assert "--layers -2 contradicts pinned@1, which pins layers=-1" in refused.output
    # a result computed elsewhere with other settings is judged, named, and not ranked
    computed = json.loads(run(
        "get", "result", "-b", "test_cnn", "--weights", "random", "-t", "knn", "-d", shapes,
        "--split", "val", "--train-data", shapes, "--train-split", "train", "-p", "k=3",
        "--layers", "-2", "--precision", "bf16", "--input-size", "48", "--json").stdout)
    other = json.loads(run("evaluate", computed["id"], "--suite", "pinned@1", "--json").stdout)
    assert other["verdict"]["reasons"] == [
        "layers(-2 != -1)", "input_size(48 != 32)", "precision(bf16 != fp32)"]
    board = json.loads(run("leaderboard", "pinned@1", "--json").stdout)
    # the resize follows the input size: another variant, never ranked under the row's label
    (row,) = board["rows"]
    (unranked,) = board["unranked"]
    assert row["label"] == "test_cnn seed=0 [preprocessing.resize=32]"
    assert unranked["label"] != row["label"]
    assert unranked["reasons"][0] == "layers(-2 != -1)"

    _suite(run, tmp_path, shapes, "open")  # pins the task's params and op_version only
    _on_suite(run, shapes, "open", "--input-size", "32")
    _on_suite(run, shapes, "open", "--input-size", "32", "--layers", "-2")
    board = json.loads(run("leaderboard", "open@1", "--json").stdout)
    assert sorted(r["label"] for r in board["rows"]) == [
        "test_cnn seed=0 [layers=-1]", "test_cnn seed=0 [layers=-2]"]


def test_one_evaluation_is_one_configuration(run, shapes, tmp_path):
    _suite(run, tmp_path, shapes, "two", "--condition", "a=val", "--condition", "b=val")
    common = ["get", "result", "-b", "test_cnn", "--weights", "random", "-t", "knn", "-d", shapes,
              "--split", "val", "--train-data", shapes, "--train-split", "train", "-p", "k=3",
              "--input-size", "32", "--json"]
    first = json.loads(run(*common).stdout)["id"]
    second = json.loads(run(*common, "--layers", "-2").stdout)["id"]
    mixed = run("evaluate", f"a={first}", f"b={second}", "--suite", "two@1")
    assert mixed.exit_code == 2
    assert "other settings (layers)" in mixed.output


def test_sample_counts_file_and_classes_flags(run, files, tmp_path):
    _, results, weights = files
    counts = tmp_path / "counts.json"
    counts.write_text(json.dumps({"day": 1200, "night": 800}))
    evaluation = _evaluate(run, results, "--checkpoint", str(weights), "--sample-counts",
                           str(counts), "--classes-scored", "road, car", "--dry-run")
    assert evaluation["verdict"]["state"] == "eligible"
    assert evaluation["sample_counts"] == {"day": 1200, "night": 800}
    assert evaluation["classes"] == {"scored": ["road", "car"], "ignored": []}
    lone = run("evaluate", str(results), "--suite", "road-test@1", "--checkpoint", str(weights),
               "--classes-ignored", "sky")
    assert lone.exit_code == 2
    assert "--classes-scored" in lone.output
