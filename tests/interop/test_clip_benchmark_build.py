"""``clip_benchmark build`` (CLIP_benchmark 1.6.2's own command) reads a vbstore export.

The CSV it builds from vbstore's files has the columns it builds from its own runs of the same
tasks (plus ``vbstore``, the field naming the weights exactly), and the numbers of the records.
"""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from vbstore import Store
from vbstore.cli import cli

pytestmark = pytest.mark.slow

# open_clip's smallest built-in CLIP, random weights (no download): a real open_clip model whose
# towers cost a fifth of ViT-B-32's (the text tower, run on every prompt, most of it)
CLIP = "open_clip:ViT-S-32-alt"
# the keys CLIP_benchmark's run() dumps, and those its linear probe and zero-shot
# classification put in `metrics` (clip_benchmark/metrics/*.py), plus build's own column
ROW = {"dataset", "model", "pretrained", "task", "language", "model_fullname"}
# (no lp_acc5: the five shapes are where CLIP_benchmark writes NaN and vbstore nothing)
LINEAR_PROBE = {"lp_acc1", "lp_mean_per_class_recall", "weight_decay", "epochs",
                "seed", "fewshot_k", "normalized"}
ZERO_SHOT = {"acc1", "acc5", "mean_per_class_recall"}


def test_clip_benchmark_build_reads_a_vbstore_export(clip_benchmark, clip_benchmark_peer,
                                                      shapes, tmp_path):
    runner = CliRunner()

    def run(*args):
        out = runner.invoke(cli, ["--store", str(tmp_path / "s"), *args])
        assert out.exit_code == 0, out.output
        return out

    common = ("-b", CLIP, "--weights", "random", "--input-size", "32", "-d", shapes,
              "--split", "val")
    run("get", "result", *common, "-t", "linear_probe", "--train-data", shapes,
        "--train-split", "train", "-p", "fewshot_k=2")
    run("get", "result", *common, "-t", "zeroshot_classification")
    folder = tmp_path / "cb"
    run("export", "results", "--format", "clip-benchmark", "-o",
        str(folder / "benchmark_{dataset}_{pretrained}_{model}_{language}_{task}.json"))
    files = sorted(folder.iterdir())
    assert [f.name for f in files] == [
        "benchmark_shapes_random-seed0_ViT-S-32-alt_en_linear_probe.json",
        "benchmark_shapes_random-seed0_ViT-S-32-alt_en_zeroshot_classification.json"]

    table = tmp_path / "benchmark.csv"
    clip_benchmark_peer("from clip_benchmark.cli import main; main()", "build",
                        *map(str, files), "--output", str(table))
    with table.open() as f:
        reader = csv.DictReader(f)
        rows = {row["task"]: row for row in reader}
        columns = set(reader.fieldnames or ())
    assert columns == ROW | LINEAR_PROBE | ZERO_SHOT | {"vbstore", "vbstore_version",
                                                       "vbstore_manifest"}
    with Store(tmp_path / "s") as store:
        results = {store.read_json(info.id)["task"]: store.read_json(info.id)
                   for info in store.ls("result")}
    probe, zero = rows["linear_probe"], rows["zeroshot_classification"]
    assert probe["model_fullname"] == "ViT-S-32-alt random-seed0"
    assert (probe["dataset"], probe["language"]) == ("shapes", "en")
    for key in ("lp_acc1", "lp_mean_per_class_recall"):
        assert float(probe[key]) == results["linear_probe"]["metrics"][key]
    assert (probe["fewshot_k"], probe["epochs"], probe["seed"], probe["weight_decay"],
            probe["normalized"]) == ("2", "10", "0", "0.0", "True")
    for key in ZERO_SHOT:
        assert float(zero[key]) == results["zeroshot_classification"]["metrics"][key]
    made = results["zeroshot_classification"]
    assert zero["vbstore_version"] == made["versions"]["vbstore"]
    assert zero["vbstore_manifest"] == made["data"]["eval"]["manifest"]
    assert json.loads(files[0].read_text())["vbstore"]["weights"] == "random"
