"""The bootstrap over eval samples in stored results: beside the spread over seeds, not instead."""

from __future__ import annotations

import vbstore
from vbstore.tasks.bootstrap import N_BOOT, N_BOOT_REEVALUATE

KW = dict(split="val", train_split="train", weights="random", input_size=32, progress=False)


def test_classification_result_carries_both_intervals(store, shapes):
    result = vbstore.get_result("test_cnn", "classification", shapes, shapes, store=store,
                                seeds=2, params={"epochs": 5}, **KW)
    record = result.record
    assert record.aggregate["top1"]["over"] == "seeds"
    ci = record.sample_ci["top1"]
    assert ci["over"] == "eval samples"
    assert ci["n_boot"] == N_BOOT
    assert ci["ci_low"] <= record.metrics["top1"] <= ci["ci_high"]
    # 30 eval images: a draw moves top1 by multiples of 1/30, so the interval is wide
    assert ci["ci_high"] - ci["ci_low"] >= 1 / 30
    assert set(record.sample_ci) == {"top1"}  # five classes: no top5, and no interval of it
    assert record.sample_ci_skipped is None
    assert "sample_ci_s" in result.run.timings
    stored = store.read_json(result.id)
    assert stored["sample_ci"]["top1"] == ci


def test_knn_uses_per_sample_hits_and_the_same_draws_for_every_backbone(store, shapes):
    cnn = vbstore.get_result("test_cnn", "knn", shapes, shapes, store=store, **KW).record
    vit = vbstore.get_result("test_vit", "knn", shapes, shapes, store=store, **KW).record
    for record in (cnn, vit):
        ci = record.sample_ci["top1"]
        assert ci["n_boot"] == N_BOOT
        assert ci["ci_low"] <= record.metrics["top1"] <= ci["ci_high"]


def test_multilabel_is_re_evaluated_on_each_draw(store, tmp_path, shapes):
    import csv
    import shutil
    from pathlib import Path

    shutil.copytree(shapes, tmp_path / "shapes")
    lists = {}
    for split in ("train", "val"):
        lists[split] = tmp_path / f"{split}.csv"
        with open(lists[split], "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["image", "labels"])
            for i, path in enumerate(sorted(Path(shapes, split).rglob("*.png"))):
                cls = path.parent.name
                name = f"shapes/{split}/{cls}/{path.name}"
                writer.writerow([name, f"{cls};odd" if i % 2 else cls])
    record = vbstore.get_result("test_cnn", "multilabel", str(lists["val"]), str(lists["train"]),
                                store=store, params={"epochs": 3}, weights="random",
                                input_size=32, progress=False).record
    ci = record.sample_ci["mean_average_precision"]
    assert ci["n_boot"] + ci.get("n_undefined", 0) == N_BOOT_REEVALUATE
    assert ci["ci_low"] <= record.metrics["mean_average_precision"] <= ci["ci_high"]


def test_similarity_draws_triplets(store):
    record = vbstore.get_result("test_vit", "similarity", "triplets:count=8,size=32",
                                split="test", store=store, weights="random", input_size=32,
                                progress=False).record
    ci = record.sample_ci["accuracy"]
    assert ci["ci_low"] <= record.metrics["accuracy"] <= ci["ci_high"]
    assert ci["n_boot"] + ci.get("n_undefined", 0) == N_BOOT_REEVALUATE


def test_retrieval_says_why_it_has_no_sample_ci(store, shapes):
    record = vbstore.get_result("test_vit", "retrieval", shapes, store=store, split="val",
                                weights="random", input_size=32, progress=False).record
    assert record.sample_ci is None
    assert "gallery" in record.sample_ci_skipped


def test_cli_prints_the_interval_where_the_answer_came_from_and_reused_features(tmp_path,
                                                                               shapes):
    from click.testing import CliRunner

    from vbstore.cli import cli

    def get(task):
        out = CliRunner().invoke(cli, [
            "--store", str(tmp_path), "get", "result", "-b", "test_cnn", "-t", task, "-d", shapes,
            "--split", "val", "--train-data", shapes, "--train-split", "train",
            "--weights", "random", "--input-size", "32", "-p", "epochs=2"
            if task == "classification" else "k=5"])
        assert out.exit_code == 0, out.output
        return out.output

    first = get("classification")
    assert ": computed in" in first
    assert "95% CI over eval samples" in first
    assert f"(bootstrap, {N_BOOT} draws)" in first
    assert "eval features: extracted 30 images, reused 0" in first  # it ran the forward passes
    knn = get("knn")
    assert "eval features: stored (no forward pass)" in knn
    assert "train features: stored (no forward pass)" in knn
    again = get("knn")
    assert ": cached in the store in" in again
