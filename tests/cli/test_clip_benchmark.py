"""CLIP_benchmark habits: MODEL,PRETRAINED model lists and its per-run result JSON files."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

from vbstore import Store
from vbstore.cli import cli
from vbstore.engine import read_backbones_file
from vbstore.errors import UsageError
from vbstore.interop import (
    CLIP_BENCHMARK_FIELDS,
    IDENTITY_FIELD,
    PROVENANCE_FIELDS,
    clip_benchmark_filename,
    clip_benchmark_record,
    clip_benchmark_spec,
)
from vbstore.records import ManifestRecord, ResultRecord

# the keys CLIP_benchmark's `eval` dumps for one run (clip_benchmark/cli.py, `dump = {...}`)
CB_KEYS = {"dataset", "model", "pretrained", "task", "metrics", "language"}


@pytest.fixture(scope="module")
def shapes(shapes_folder):
    return shapes_folder(4, 1)


@pytest.fixture
def run(tmp_path):
    runner = CliRunner()
    return lambda *args: runner.invoke(cli, ["--store", str(tmp_path / "s"), *args])


def test_model_lines_become_open_clip_specs(tmp_path):
    assert clip_benchmark_spec("ViT-B-32-quickgelu,laion400m_e32") == \
        "open_clip:ViT-B-32-quickgelu@laion400m_e32"
    models = tmp_path / "models.txt"
    models.write_text("ViT-B-32-quickgelu,laion400m_e32\n# a comment\n\nRN50,openai\n"
                      "test_cnn weights=random\n")
    assert [e.backbone for e in read_backbones_file(str(models))] == [
        "open_clip:ViT-B-32-quickgelu@laion400m_e32", "open_clip:RN50@openai", "test_cnn"]
    models.write_text("ViT-B-32,openai,extra\n")
    with pytest.raises(UsageError, match=r"models\.txt:1: .* is not a MODEL,PRETRAINED line"):
        read_backbones_file(str(models))


def test_sweep_takes_a_clip_benchmark_model_list(run, shapes, tmp_path, monkeypatch):
    monkeypatch.setenv("VBSTORE_OFFLINE", "1")  # pretrained CLIP weights cannot be fetched here
    models = tmp_path / "models.txt"
    models.write_text("ViT-B-32,openai\ntest_cnn weights=random input_size=32\n")
    out = run("sweep", "--backbones", str(models), "--tasks", "knn", "-d", shapes, "--split",
              "val", "--train-data", shapes, "--train-split", "train", "--json")
    assert out.exit_code == 1  # one combination failed, the other ran
    rows = json.loads(out.stdout)
    assert [r["backbone"] for r in rows] == ["open_clip:ViT-B-32@openai", "test_cnn"]
    assert "open_clip:ViT-B-32@openai" in rows[0]["error"]
    assert "offline" in rows[0]["error"] or "VBSTORE_OFFLINE" in rows[0]["error"]
    assert "metrics" in rows[1]


def test_export_writes_one_clip_benchmark_file_per_result(run, shapes, tmp_path):
    for task in ("classification", "knn"):
        out = run("get", "result", "-b", "test_vit", "--weights", "random", "--input-size", "32",
                  "-t", task, "-d", shapes, "--split", "val", "--train-data", shapes,
                  "--train-split", "train", "--json")
        assert out.exit_code == 0, out.output
    folder = tmp_path / "cb"
    out = run("export", "results", "--format", "clip-benchmark", "-o", str(folder), "--json")
    assert out.exit_code == 0, out.output
    written = json.loads(out.stdout)
    assert sorted(p.name for p in folder.iterdir()) == sorted(d["file"] for d in written)
    with Store(tmp_path / "s") as store:
        for entry in written:
            doc = json.loads((folder / entry["file"]).read_text())
            # CLIP_benchmark's fields, and vbstore's one that names the weights exactly
            assert set(doc) == CB_KEYS | {IDENTITY_FIELD, *PROVENANCE_FIELDS}
            assert CB_KEYS == set(CLIP_BENCHMARK_FIELDS)
            assert entry["file"] == clip_benchmark_filename(doc)
            record = store.read_json(entry["id"])
            manifest = record["data"]["eval"]["manifest"]
            # what CLIP_benchmark's rows lack: the harness version and the data's identity
            assert doc["vbstore_version"] == record["versions"]["vbstore"]
            assert doc["vbstore_manifest"] == manifest
            assert store.data_names.of(manifest) == ["shapes"]
            assert doc["dataset"] == "shapes"  # the folder's name, as CLIP_benchmark's --dataset
            assert (doc["model"], doc["pretrained"]) == ("test_vit", "random-seed0")
            weights = store.read_json(record["inputs"]["weights"])
            assert doc[IDENTITY_FIELD] == {"spec": "test_vit", "weights": "random", "seed": 0,
                                           "tensor_hash": weights["tensor_hash"]}
            assert doc["language"] == "en"
            if record["task"] == "classification":
                assert doc["task"] == "linear_probe"
                assert doc["metrics"]["lp_acc1"] == record["metrics"]["top1"]
                # five classes: no top5 (VisBench's rule, classification op_version 2), no lp_acc5
                assert doc["metrics"].get("lp_acc5") == record["metrics"].get("top5")
            else:
                assert doc["task"] == "knn"
                assert doc["metrics"] == {k: v for k, v in record["metrics"].items()
                                          if isinstance(v, (int, float))}
    lines = run("export", "results", "--format", "clip-benchmark").stdout.splitlines()
    assert sorted(json.loads(line)["task"] for line in lines) == ["knn", "linear_probe"]


def test_zero_shot_records_keep_clip_benchmark_names():
    record = {"task": "zeroshot_classification", "weights_kind": "pretrained",
              "backbone": {"spec": "open_clip:ViT-B-32-quickgelu@laion400m_e32"},
              "metrics": {"acc1": 0.5, "acc5": 0.9, "mean_per_class_recall": 0.48},
              "params": {"templates": "ensemble"},
              "data": {"eval": {"manifest": "ab" * 32}}}
    manifest = ManifestRecord.from_dict(
        {"layout": "list", "samples": [], "source": {"kind": "torchvision", "name": "CIFAR10"}})
    record = ResultRecord.from_dict({"op_version": 1, "inputs": {}, **record})
    doc = clip_benchmark_record(record, manifest)
    assert doc == {"dataset": "cifar10", "model": "ViT-B-32-quickgelu",
                   "pretrained": "laion400m_e32", "task": "zeroshot_classification",
                   "metrics": {"acc1": 0.5, "acc5": 0.9, "mean_per_class_recall": 0.48},
                   "language": "en", "vbstore_manifest": "ab" * 32}
    assert clip_benchmark_filename(doc) == \
        "cifar10_laion400m_e32_ViT-B-32-quickgelu_en_zeroshot_classification.json"
    wds = clip_benchmark_record(record, ManifestRecord.from_dict(
        {"layout": "list", "samples": [], "source": {"kind": "wds", "name": "vtab_cifar10"}}))
    assert wds["dataset"] == "wds/vtab_cifar10"
    multi = clip_benchmark_record(replace(record, task="zeroshot_multilabel",
                                          metrics={"mean_average_precision": 0.7}))
    assert (multi["task"], multi["metrics"]) == (
        "zeroshot_classification", {"mean_average_precision": 0.7})
    timm = clip_benchmark_record(replace(record, backbone={"spec": "timm:resnet18.a1_in1k"}))
    assert (timm["model"], timm["pretrained"]) == ("timm:resnet18", "a1_in1k")


def test_a_folder_is_named_as_it_was_read_and_a_template_names_the_files(run, shapes, tmp_path):
    import shutil

    pets = tmp_path / "pets"
    shutil.copytree(shapes, pets)
    out = run("get", "result", "-b", "test_vit", "--weights", "random", "--input-size", "32",
              "-t", "knn", "-d", str(pets / "val"), "--train-data", str(pets),
              "--train-split", "train", "--json")
    assert out.exit_code == 0, out.output
    template = "benchmark_{dataset}_{pretrained}_{model}_{language}_{task}.json"
    out = run("export", "results", "--format", "clip-benchmark", "-o",
              str(tmp_path / "cb" / template), "--json")
    assert out.exit_code == 0, out.output
    written = json.loads(out.stdout)
    # the split folder's parent names the data; the same images in another folder, the newest
    assert [d["file"] for d in written] == ["benchmark_pets_random-seed0_test_vit_en_knn.json"]
    assert (tmp_path / "cb" / written[0]["file"]).is_file()
    for bad, words in (("{dataset}_{split}.json", "no field 'split'"),
                       ("{dataset}/../../{task}.json", "leaves the export folder")):
        out = run("export", "results", "--format", "clip-benchmark", "-o",
                  str(tmp_path / "cb2" / bad))
        assert out.exit_code == 2, out.output
        assert words in out.output
    assert not (tmp_path / "cb2").exists()  # refused before anything is written


def test_a_clip_benchmark_dataset_list_names_cb_data(tmp_path):
    from vbstore.interop import clip_benchmark_datasets

    folder = tmp_path / "pets"
    folder.mkdir()
    listing = tmp_path / "webdatasets.txt"
    listing.write_text(f"cifar10\nwds/vtab/cifar100\n\n{folder}\nhf:beans\nshapes\n")
    assert clip_benchmark_datasets(listing) == [
        "cb:cifar10", "cb:wds/vtab/cifar100", str(folder), "hf:beans", "shapes"]
    listing.write_text("# nothing\n")
    with pytest.raises(UsageError, match="lists no datasets"):
        clip_benchmark_datasets(listing)
