import json

import pytest
from click.testing import CliRunner

from vbstore.cli import cli

TINY = ["--weights", "random", "--input-size", "32"]


@pytest.fixture(scope="module")
def shapes(shapes_folder):
    return shapes_folder(3, 1)


@pytest.fixture
def run(tmp_path):
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(cli, ["--store", str(tmp_path / "s"), *args])

    return invoke


def test_suite_from_manifests_get_result_evaluate_board_diff(run, shapes, tmp_path):
    suite_file = tmp_path / "suite.json"
    made = run(
        "suite",
        "new",
        "--slug",
        "shapes-knn",
        "-t",
        "knn",
        "-d",
        shapes,
        "--split",
        "val",
        "--condition",
        "seen=train",
        "--condition",
        "unseen=val",
        "-p",
        "k=3",
        "--weights",
        "random",
        "-o",
        str(suite_file),
    )
    assert made.exit_code == 0, made.output
    doc = json.loads(suite_file.read_text())
    assert [(c["name"], c["sampleCount"]) for c in doc["protocol"]["conditions"]] == [
        ("seen", 15),
        ("unseen", 15),
    ]
    pushed = json.loads(run("suite", "push", str(suite_file), "--json").output)
    assert pushed["new"]
    assert pushed["ref"] == "shapes-knn@1"
    assert json.loads(run("suite", "push", str(suite_file), "--json").output)["new"] is False
    assert run("suite", "digest", str(suite_file)).output.strip() == pushed["protocol_digest"]
    assert "condition seen  15 samples" in run("suite", "show", "shapes-knn").output

    args = [
        "get",
        "result",
        "-b",
        "test_cnn",
        *TINY,
        "-t",
        "knn",
        "-d",
        shapes,
        "--train-data",
        shapes,
        "--train-split",
        "train",
        "-p",
        "k=3",
        "--suite",
        "shapes-knn@1",
    ]
    first = run(*args, "--json")
    assert first.exit_code == 0, first.output
    evaluation = json.loads(first.stdout)
    assert evaluation["verdict"]["state"] == "eligible", evaluation["verdict"]
    assert evaluation["evidence"] == "observed"
    assert evaluation["checkpoint"]["weights"] == "random"
    top1 = {c: r["record"]["metrics"]["top1"] for c, r in evaluation["condition_results"].items()}
    assert evaluation["verdict"]["scores"]["overall"]["top1"] == pytest.approx(
        sum(top1.values()) / 2
    )
    again = json.loads(run(*args, "--json").stdout)
    assert again["id"] == evaluation["id"]
    assert not again["new"]

    # another protocol: recorded, named, not ranked; --require-ranked exits 3
    other = json.loads(
        run(
            *args[:-6],
            "--split",
            "val",
            "--train-data",
            shapes,
            "--train-split",
            "train",
            "-p",
            "k=2",
            "--json",
        ).stdout
    )
    judged = run("evaluate", f"unseen={other['id']}", "--suite", "shapes-knn@1", "--require-ranked")
    assert judged.exit_code == 3, judged.output
    assert "- protocol-mismatch: k(2 != 3)" in judged.output
    assert "- missing-condition(seen)" in judged.output
    dry = run("evaluate", f"unseen={other['id']}", "--suite", "shapes-knn@1", "--dry-run")
    assert "nothing was stored" in dry.output

    board = json.loads(run("leaderboard", "shapes-knn@1", "--json").output)
    assert [r["rank"] for r in board["rows"]] == [1]
    # the trivial predictor's row: the same data for every checkpoint
    base = board["baseline"]
    assert base["predictor"] == "the majority class of the train split"
    assert base["headline"] == pytest.approx(sum(base["conditions"].values()) / 2)
    assert board["rows"][0]["beats_baseline"] == (board["rows"][0]["headline"] > base["headline"])
    assert f"baseline                         {base['headline']:.4f}" in run(
        "leaderboard", "shapes-knn@1").output
    # a second checkpoint: on 15 images per condition the two intervals overlap, and say so
    vit = run(*["test_vit" if a == "test_cnn" else a for a in args], "--json")
    assert vit.exit_code == 0, vit.output
    two = json.loads(run("leaderboard", "shapes-knn@1", "--json").output)
    first, second = two["rows"]
    for row in (first, second):
        judged = json.loads(run("show", row["evaluation"], "--json").output)["content"]
        stds = [json.loads(run("show", oid, "--json").output)["content"]["sample_ci"]["top1"]
                ["std"] for oid in judged["sources"].values()]
        half = 1.959964 * (stds[0] ** 2 + stds[1] ** 2) ** 0.5 / 2
        assert row["interval"] == pytest.approx([row["headline"] - half, row["headline"] + half])
    assert second["interval"][0] <= first["interval"][1]  # 15 images a condition: they overlap
    assert second["overlaps_above"]
    assert not first["overlaps_above"]
    assert "~ interval overlaps the row above" in run("leaderboard", "shapes-knn@1").output
    markdown = run("leaderboard", "shapes-knn@1", "--format", "md").output
    assert f"| — | baseline: the majority class of the train split | | | {base['headline']:.4f}" \
        in markdown
    assert board["rows"][0]["attempts"] == 2
    plot = tmp_path / "board.png"
    text = run("leaderboard", "shapes-knn@1", "--plot", str(plot))
    assert text.exit_code == 0
    assert "weakest" in text.output
    assert plot.stat().st_size > 1000
    assert run("leaderboard", "shapes-knn@1", "--format", "csv").output.startswith(
        "rank,checkpoint"
    )

    unranked = json.loads(run("evaluations", "--state", "incompatible", "--json").output)[0]["id"]
    assert run("diff", evaluation["id"], evaluation["id"], "--max-drop", "0").exit_code == 0
    assert run("diff", evaluation["id"], unranked).exit_code == 5
    exported = json.loads(run("export", "evaluation", evaluation["id"][:10]).output)
    assert set(exported) == {"seen", "unseen"}
    assert "top1" in exported["seen"]["overall"]


def test_random_weights_are_never_ranked_on_a_pretrained_suite(run, shapes, tmp_path):
    suite_file = tmp_path / "suite.json"
    run(
        "suite",
        "new",
        "--slug",
        "pre",
        "-t",
        "knn",
        "-d",
        shapes,
        "--split",
        "val",
        "-p",
        "k=3",
        "-o",
        str(suite_file),
    )
    run("suite", "push", str(suite_file))
    out = json.loads(
        run(
            "get",
            "result",
            "-b",
            "test_cnn",
            *TINY,
            "-t",
            "knn",
            "-d",
            shapes,
            "--train-data",
            shapes,
            "--train-split",
            "train",
            "-p",
            "k=3",
            "--suite",
            "pre@1",
            "--json",
        ).stdout
    )
    assert out["verdict"]["reasons"] == ["weights(random)"]


def test_manifest_cli_and_imports(run, tmp_path):
    (tmp_path / "day.txt").write_text("b\na\n")
    info = json.loads(run("suite", "manifest", f"day={tmp_path / 'day.txt'}", "--json").output)
    assert info["conditions"] == [{"name": "day", "sampleCount": 2}]
    assert run("suite", "manifest", "day").exit_code == 2
    suite = {
        "slug": "cb",
        "version": 1,
        "name": "zero-shot",
        "protocol": {
            "task": "zeroshot_classification",
            "data": {"kind": "external"},
            "conditions": [{"name": "cifar10", "sampleCount": 10000}],
            "metrics": [{"key": "acc1", "headline": True}, {"key": "acc5"}],
        },
    }
    (tmp_path / "s.json").write_text(json.dumps(suite))
    assert run("suite", "push", str(tmp_path / "s.json")).exit_code == 0
    # a suite's name is not an object's: show points at `suite show` and gives its id
    shown = run("show", "cb@1")
    assert shown.exit_code == 9
    assert "cb@1 is a suite: `vbstore suite show cb@1`, or give its id" in shown.output
    assert "give a ref name" in run("show", "cb@2").output
    cb = {
        "dataset": "cifar10",
        "model": "ViT-B-32",
        "pretrained": "openai",
        "task": "zeroshot_classification",
        "metrics": {"acc1": 0.5, "acc5": 0.9, "mean_per_class_recall": 0.5},
        "language": "en",
    }
    (tmp_path / "cb.json").write_text(json.dumps(cb))
    imported = json.loads(
        run(
            "import",
            "results",
            str(tmp_path / "cb.json"),
            "--suite",
            "cb@1",
            "--sample-count",
            "cifar10=10000",
            "--json",
        ).output
    )[0]
    assert imported["evidence"] == "reported"
    assert imported["missing"] == ["data", "evaluator"]
    assert imported["verdict"]["state"] == "eligible"
    assert imported["checkpoint"]["label"] == "open_clip:ViT-B-32@openai"
    record = {
        "backbone": "resnet50",
        "backbone_key": "resnet50-abc",
        "task": "zeroshot_classification",
        "level": "high",
        "dataset": "cifar10",
        "split": "test",
        "metrics": {"acc1": 0.4},
        "visbench_version": "0.27.0",
        "dataset_size": 9999,
        "timestamp": "2025-01-01T00:00:00Z",
    }
    (tmp_path / "vb.jsonl").write_text(json.dumps(record) + "\n")
    vb = json.loads(
        run(
            "import",
            "results",
            str(tmp_path / "vb.jsonl"),
            "--suite",
            "cb@1",
            "--condition",
            "cifar10",
            "--json",
        ).output
    )[0]
    assert vb["sources"]["cifar10"]["format"] == "visbench"
    assert vb["verdict"]["reasons"] == [
        "metric-missing(acc5)",
        "sample-count(cifar10: 9999 != 10000)",
    ]
    (tmp_path / "bad.jsonl").write_text("{nope\n")
    assert run("import", "results", str(tmp_path / "bad.jsonl"), "--suite", "cb@1").exit_code == 2


def test_import_the_committed_reference_figures_names_source_and_what_they_lack(run):
    """The published figures registry.db holds, through `vbstore import results`."""
    from pathlib import Path

    reference = Path(__file__).resolve().parents[2] / "suites" / "reference"
    assert run("suite", "push", str(reference / "voc-semseg.json")).exit_code == 0
    records = str(reference / "visbench-readme-voc.jsonl")
    refused = run("import", "results", records, "--suite", "voc-semseg@1", "--weights", "best")
    assert refused.exit_code == 2
    out = run(
        "import",
        "results",
        records,
        "--suite",
        "voc-semseg@1",
        "--sample-count",
        "val=1449",
        "--weights",
        "pretrained",
        "--json",
    )
    assert out.exit_code == 0, out.output
    (voc,) = json.loads(out.output)
    assert voc["evidence"] == "reported"
    assert voc["missing"] == ["data", "evaluator"]  # no manifest, no visbench version
    assert voc["checkpoint"] == {
        "id": "visbench:dinov2_vits14",
        "label": "dinov2_vits14",
        "weights": "pretrained",
    }
    assert voc["verdict"]["state"] == "eligible"
    assert voc["verdict"]["scores"]["overall"] == {"miou": 0.733}
    source = voc["sources"]["val"]
    assert source["file"] == "visbench-readme-voc.jsonl"
    assert source["line"] == 1
    assert source["vouched"] == ["weights", "sample_count"]
    assert "VisBench 0.11 README" in source["notes"]
    # without the vouched count the same record is kept but not ranked
    again = json.loads(
        run("import", "results", records, "--suite", "voc-semseg@1", "--json").output
    )[0]
    assert again["checkpoint"]["weights"] == "unknown"
    assert again["verdict"]["reasons"] == ["sample-count(val: unknown)"]
    assert "vouched" not in again["sources"]["val"]


def test_a_visbench_retrieval_record_with_map_imports_under_its_own_names(run, shapes, tmp_path):
    """VisBench writes retrieval's mean average precision as ``mAP``; a suite made from the task
    names it so, and a real VisBench record imports with every metric as written (before, it
    imported as metric-missing(mean_average_precision))."""
    suite_file = tmp_path / "retrieval.json"
    made = run("suite", "new", "--slug", "shapes-retrieval", "-t", "retrieval", "-d", shapes,
               "--split", "val", "--condition", "val=val", "--weights", "random",
               "-o", str(suite_file))
    assert made.exit_code == 0, made.output
    keys = [m["key"] for m in json.loads(suite_file.read_text())["protocol"]["metrics"]]
    assert "mAP" in keys
    assert "mean_average_precision" not in keys
    assert run("suite", "push", str(suite_file)).exit_code == 0
    record = {  # the fields VisBench 0.27's ResultRecord writes for a retrieval run
        "backbone": "dinov2_vits14", "backbone_key": "dinov2_vits14@224", "task": "retrieval",
        "level": "high", "dataset": "shapes", "split": "val", "pooling": "cls",
        "pooling_requested": "default", "feature_mode": "pooled",
        "metrics": {"recall@1": 0.9, "recall@5": 1.0, "recall@10": 1.0, "mAP": 0.8},
        "timestamp": "2026-01-01T00:00:00+00:00", "visbench_version": "0.27.0",
        "schema_version": 9, "dataset_size": 15, "task_params": {}, "dataset_params": {},
        "seed": 0, "notes": None,
    }
    (tmp_path / "vb.jsonl").write_text(json.dumps(record) + "\n")
    vb = json.loads(run("import", "results", str(tmp_path / "vb.jsonl"), "--suite",
                        "shapes-retrieval@1", "--json").output)[0]
    assert not [r for r in vb["verdict"]["reasons"] if r.startswith("metric-missing")], vb
    assert vb["results"]["val"]["overall"]["mAP"] == 0.8
