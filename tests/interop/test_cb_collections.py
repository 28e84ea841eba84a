"""CLIP_benchmark's dataset and model collections and ``--task auto``: vbstore's names are the
ones CLIP_benchmark 1.6.2 itself holds (read in its own process), and a sweep takes them."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from vbstore.cli import cli
from vbstore.engine import read_backbones_file
from vbstore.errors import UsageError
from vbstore.interop import (
    DATASET_COLLECTIONS,
    MODEL_COLLECTIONS,
    clip_benchmark_datasets,
    clip_benchmark_models,
    clip_benchmark_task,
)

pytestmark = pytest.mark.slow

NAMES = ["cifar10", "imagenet1k", "wds/imagenet1k", "flickr30k", "mscoco_captions",
         "wds/flickr8k", "sugar_crepe/add_att", "winoground", "vtab/pets", "xtd200",
         "crossmodal3600"]

_THEIRS = """
import json, sys
from clip_benchmark.datasets.builder import dataset_collection, get_dataset_default_task
from clip_benchmark.model_collection import model_collection
names = json.loads(sys.argv[1])
print(json.dumps({
    "datasets": dataset_collection,
    "models": {k: [list(p) for p in v] for k, v in model_collection.items()
               if k != "openclip_all"},
    "tasks": {n: get_dataset_default_task(n.removeprefix("wds/")) for n in names},
}))
"""


def test_collections_and_auto_tasks_are_clip_benchmarks(clip_benchmark_peer):
    theirs = json.loads(clip_benchmark_peer(_THEIRS, json.dumps(NAMES)).strip().splitlines()[-1])
    assert {k: list(v) for k, v in DATASET_COLLECTIONS.items()} == theirs["datasets"]
    assert {k: [list(p) for p in v] for k, v in MODEL_COLLECTIONS.items()} == theirs["models"]
    assert {n: clip_benchmark_task(n) for n in NAMES} == theirs["tasks"]
    # a multi-label set is vbstore's zero-shot multi-label task, where CLIP_benchmark runs it
    # under zeroshot_classification with another metric
    assert clip_benchmark_task("cb:voc2007_multilabel") == "zeroshot_multilabel"


def test_collection_names_read_as_lists(tmp_path):
    assert clip_benchmark_datasets("imagenet_robustness") == [
        "cb:imagenetv2", "cb:imagenet_sketch", "cb:imagenet-a", "cb:imagenet-r", "cb:objectnet"]
    assert [e.backbone for e in read_backbones_file("openai")] == [
        "open_clip:ViT-B-32@openai", "open_clip:ViT-B-16@openai", "open_clip:ViT-L-14@openai",
        "open_clip:ViT-L-14-336@openai"]
    everything = clip_benchmark_models("openclip_all")
    assert "open_clip:ViT-B-32@openai" in everything
    with pytest.raises(UsageError, match="neither a file nor a CLIP_benchmark dataset collection"):
        clip_benchmark_datasets("vtab++")
    with pytest.raises(UsageError, match="neither a file nor a CLIP_benchmark model collection"):
        read_backbones_file("openai_all")
    # a file of that name is read as the file
    (tmp_path / "retrieval").write_text("cifar10\n")
    assert clip_benchmark_datasets(tmp_path / "retrieval") == ["cb:cifar10"]


def test_a_sweep_over_collections_with_task_auto(tmp_path, monkeypatch):
    monkeypatch.setenv("VBSTORE_OFFLINE", "1")
    out = CliRunner().invoke(cli, [
        "--store", str(tmp_path / "s"), "sweep", "--backbones", "openai", "--datasets",
        "retrieval", "--tasks", "auto", "--dataset-root", str(tmp_path / "none" / "{dataset}"),
        "--json"])
    assert out.exit_code == 1  # no data here: every combination names what it lacks
    rows = json.loads(out.stdout)
    assert len(rows) == 12
    assert {r["task"] for r in rows} == {"zeroshot_retrieval"}
    assert {r["data"] for r in rows} == {"cb:mscoco_captions", "cb:flickr8k", "cb:flickr30k"}
    assert all("is not on disk" in r["error"] for r in rows)
