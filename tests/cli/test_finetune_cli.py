"""``--finetune-blocks`` and ``--backbone-lr`` on get result, get head and run: one request,
one record field, and a refusal in one line."""

import csv
import io
import json

from click.testing import CliRunner

from vbstore.cli import cli

TINY = ["-b", "test_cnn", "--weights", "random", "--input-size", "32"]
QUICK = ["-p", "epochs=2", "-p", "batch_size=8"]


def test_get_result_and_run_ask_the_same_finetuned_result(run, shapes):
    data = ["-d", shapes, "--split", "val", "--train-data", shapes, "--train-split", "train"]
    got = run("get", "result", *TINY, "-t", "classification", *data, *QUICK,
              "--finetune-blocks", "1", "--backbone-lr", "0.001", "--json")
    assert got.exit_code == 0, got.output
    record = json.loads(got.output)
    assert record["record"]["finetune"] == {"blocks": 1, "backbone_lr": 0.001}
    again = run("run", "classification", *TINY, *data, "--epochs", "2", "--train-batch-size", "8",
                "--finetune-blocks", "1", "--backbone-lr", "0.001", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.output)["id"] == record["id"]
    head = run("get", "head", *TINY, "-t", "classification", "--train-data", shapes,
               "--train-split", "train", *QUICK, "--finetune-blocks", "1", "--backbone-lr",
               "0.001", "--json")
    assert head.exit_code == 0, head.output
    assert json.loads(head.output)["id"] == record["record"]["inputs"]["head"]


def test_a_task_that_cannot_fine_tune_is_refused_in_one_line(run, shapes):
    out = run("get", "result", *TINY, "-t", "knn", "-d", shapes, "--split", "val",
              "--train-data", shapes, "--train-split", "train", "--finetune-blocks", "1")
    assert out.exit_code != 0
    assert "'knn' cannot fine-tune" in out.output
    assert len(out.output.strip().splitlines()) == 1
    assert "--finetune-blocks" not in run("run", "knn", "--help").output


def test_a_finetuned_head_travels_with_its_weights_onto_the_same_parent_only(tmp_path, shapes):
    runner = CliRunner()

    def vb(store, *args):
        return runner.invoke(cli, ["--store", str(tmp_path / store), *args])

    data = ["-d", shapes, "--split", "val"]
    head = vb("a", "get", "head", *TINY, "-t", "classification", "--train-data", shapes,
              "--train-split", "train", *QUICK, "--finetune-blocks", "1", "--tag", "tuned",
              "--json")
    assert head.exit_code == 0, head.output
    applied = vb("a", "get", "result", *TINY, "-t", "classification", *data, "--head", "tuned",
                 "--json")
    assert applied.exit_code == 0, applied.output
    here = json.loads(applied.output)["record"]
    assert here["finetune"] == {"blocks": 1, "backbone_lr": 1e-4}
    for store in ("a", "b", "c"):
        assert vb(store, "remote", "add", "team", str(tmp_path / "r")).exit_code == 0
    assert vb("a", "push", "head", "tuned", "--to", "team").exit_code == 0
    other = vb("c", "pull", "head", "team/tuned", "--backbone", "test_cnn", "--weights",
               "random", "--backbone-seed", "1", "--input-size", "32")
    assert other.exit_code == 11, other.output  # another parent: refused, both named
    assert "test_cnn" in other.output
    pulled = vb("b", "pull", "head", "team/tuned", "--backbone", "test_cnn", "--weights",
                "random", "--input-size", "32")
    assert pulled.exit_code == 0, pulled.output
    there = vb("b", "get", "result", *TINY, "-t", "classification", *data, "--head", "tuned",
               "--json")
    assert there.exit_code == 0, there.output
    assert json.loads(there.output)["record"]["metrics"] == here["metrics"]


def test_listings_say_finetune_and_clip_benchmark_refuses_a_finetuned_row(run, shapes,
                                                                         tmp_path):
    """``export results`` and ``ls results`` tell a fine-tuned result from a frozen one; the
    CLIP_benchmark export, whose rows are frozen probes, leaves it out of a mixed selection (named
    in a warning) and refuses it alone in one line."""
    data = ["-d", shapes, "--split", "val", "--train-data", shapes, "--train-split", "train"]
    for extra in (["--finetune-blocks", "1", "--backbone-lr", "0.001"], []):
        got = run("get", "result", *TINY, "-t", "classification", *data, *QUICK, *extra)
        assert got.exit_code == 0, got.output
        if extra:  # a fine-tuned result alone: the CLIP_benchmark export refuses it
            refused = run("export", "results", "--format", "clip-benchmark")
            assert refused.exit_code == 2, refused.output
            assert "fine-tuned blocks" in refused.output
            assert len(refused.output.strip().splitlines()) == 1
    table = run("export", "results", "--format", "csv")
    assert table.exit_code == 0, table.output
    rows = list(csv.DictReader(io.StringIO(table.output)))
    assert sorted(r["finetune"] for r in rows) == ["blocks=1 backbone_lr=0.001", "frozen"]
    assert {r["pooling"] for r in rows} == {"gap"}
    listed = json.loads(run("ls", "results", "--json").output)
    assert sorted(r["finetune"] for r in listed) == ["blocks=1 backbone_lr=0.001", "frozen"]
    assert "blocks=1 backbone_lr=0.001" in run("ls", "results").output
    # among frozen results a fine-tuned one is left out, and named
    mixed = run("export", "results", "--format", "clip-benchmark")
    assert mixed.exit_code == 0, mixed.output
    assert "left out 1 fine-tuned result(s)" in mixed.output
    exported = [json.loads(line) for line in mixed.output.splitlines() if line.startswith("{")]
    assert len(exported) == 1
    # the Python API's export keeps the same policy: it is the same function
    import warnings

    from vbstore import Store
    from vbstore.errors import LeftOutWarning
    from vbstore.interop import clip_benchmark_export

    with Store(tmp_path / "s") as store:  # the store `run` writes
        ids = [info.id for info in store.ls("result")]
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            rows = clip_benchmark_export(store, ids)
    assert [r["record"] for r in rows] == exported
    assert [w.category for w in said] == [LeftOutWarning]
    assert "left out 1 fine-tuned result(s)" in str(said[0].message)


SCENES = "scenes:per_split=4,size=32"
VIT = ["-b", "test_vit", "--weights", "random"]


def test_a_dense_and_a_box_probe_fine_tune_through_the_cli(run):
    data = ["-d", SCENES, "--split", "val", "--train-data", SCENES, "--train-split", "train"]
    seg = run("get", "result", *VIT, "-t", "semantic_segmentation", *data, "--target", "labels",
              "-p", "num_classes=5", "-p", "epochs=1", "--finetune-blocks", "1",
              "--backbone-lr", "0.001", "--json")
    assert seg.exit_code == 0, seg.output
    record = json.loads(seg.output)["record"]
    assert record["finetune"] == {"blocks": 1, "backbone_lr": 0.001}
    assert {"train_prefix", "eval_prefix", "finetuned"} <= set(record["inputs"])
    assert "--finetune-blocks" in run("run", "detection", "--help").output
    boxes = run("run", "detection", *VIT, *data, "--target", "boxes", "--epochs", "1",
                "--finetune-blocks", "1", "--backbone-lr", "0.001", "--json")
    assert boxes.exit_code == 0, boxes.output
    record = json.loads(boxes.output)["record"]
    assert record["finetune"] == {"blocks": 1, "backbone_lr": 0.001}
    assert record["data"]["eval"]["boxes_dropped"] == 0
    why = run("why", json.loads(boxes.output)["id"])
    assert why.exit_code == 0, why.output
    assert "finetuned" in why.output
    assert "prefix" in why.output


def test_a_dense_layer_in_the_frozen_blocks_is_refused_in_one_line(run):
    out = run("get", "result", *VIT, "-t", "depth", "-d", SCENES, "--split", "val",
              "--train-data", SCENES, "--train-split", "train", "--target", "depth",
              "--layers", "1,2", "-p", "head=dpt", "--finetune-blocks", "1")
    assert out.exit_code != 0
    assert "layer 1 lies in the frozen blocks (0..1)" in out.output
    assert "--finetune-blocks 2" in out.output
    assert len(out.output.strip().splitlines()) == 1
