"""CLIP_benchmark's ``--val_split`` as a user runs it: ``get result -t linear_probe --val-split
val`` on data with train, val and test splits searches the weight decay on the val split and
trains the final probe on train+val, giving CLIP_benchmark 1.6.2's own numbers on the same
embeddings (its ``linear_probe.evaluate``, run in this process on features computed here, not by
vbstore); the val split is part of the question (another split, another head and result), and a
request that cannot read one is refused in one line before anything is stored."""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from cb_support import accuracy as _accuracy
from cb_support import on_cpu as _on_cpu
from click.testing import CliRunner
from clip_support import clip_loader, registered_clip
from PIL import Image

from vbstore.cli import cli

pytestmark = pytest.mark.slow

CLIP = "vs_clip:tiny@v1"


_load = clip_loader(tokenize=lambda texts: torch.zeros(len(texts), 6, dtype=torch.long))


@pytest.fixture(scope="module", autouse=True)
def _vs_clip():
    with registered_clip("vs_clip", _load):
        yield


@pytest.fixture(scope="module")
def splits(shapes_folder, tmp_path_factory) -> Path:
    """Five shapes classes in four splits: train (6 a class), val and val2 (3), test (6)."""
    root = tmp_path_factory.mktemp("val_split") / "data"
    a, b, c = (Path(shapes_folder(n, seed)) for n, seed in ((6, 31), (3, 32), (6, 33)))
    for name, source in (("train", a / "train"), ("val", b / "train"), ("val2", b / "val"),
                         ("test", c / "val")):
        shutil.copytree(source, root / name)
    return root


def _embeddings(folder: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """The tiny model's image embeddings of a split and their labels (sorted class folders)."""
    model, transform, _ = _load("tiny", "v1")
    images, labels = [], []
    for label, name in enumerate(sorted(p.name for p in folder.iterdir())):
        for file in sorted((folder / name).iterdir()):
            images.append(transform(Image.open(file).convert("RGB")))
            labels.append(label)
    with torch.no_grad():
        return model.encode_image(torch.stack(images)), torch.tensor(labels)


def _cli(store: Path, *args: str):
    return CliRunner().invoke(cli, ["--store", str(store), *args])


def _ok(out) -> dict:
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_val_split_is_clip_benchmarks(clip_benchmark, splits, tmp_path, monkeypatch):
    store = tmp_path / "s"
    data = ["-d", str(splits), "--split", "test", "--train-data", str(splits),
            "--train-split", "train"]
    common = ["-b", CLIP, "-t", "linear_probe", *data, "-p", "batch_size=16", "--json"]
    planned = _ok(_cli(store, "get", "result", *common, "--val-split", "val", "--dry-run"))
    steps = {(s["op"], s["role"]): s["status"] for s in planned["steps"]}
    assert steps[("manifest", "val")] == steps[("featureset", "val")] == "compute"
    got = _ok(_cli(store, "get", "result", *common, "--val-split", "val"))
    record = got["record"]
    assert record["data"]["val"]["split"] == "val"
    assert record["data"]["val"]["samples"] == 15
    assert "val_manifest" in record["inputs"]

    # CLIP_benchmark 1.6.2's own linear probe on the same embeddings, computed here
    linear_probe = importlib.import_module("clip_benchmark.metrics.linear_probe")
    folder = tmp_path / "features" / "model"
    folder.mkdir(parents=True)
    for name in ("train", "val", "test"):
        feats, labels = _embeddings(splits / name)
        torch.save(F.normalize(feats, dim=-1), folder / f"features_{name}.pt")
        torch.save(labels, folder / f"targets_{name}.pt")
    _on_cpu(monkeypatch)
    monkeypatch.setattr(linear_probe, "accuracy", _accuracy)
    torch.manual_seed(0)
    theirs = linear_probe.evaluate(None, None, None, -1, 16, 0, 0.1, 10, "model", 0,
                                   str(tmp_path / "features"), "cuda",
                                   val_dataloader=object(), amp=False)
    for name in ("lp_acc1", "lp_mean_per_class_recall"):
        assert record["metrics"][name] == pytest.approx(theirs[name], abs=1e-9), name
    [trained] = record["train_metrics"] if isinstance(record["train_metrics"], list) else [
        record["train_metrics"]]
    assert trained["weight_decay"] == pytest.approx(theirs["weight_decay"])

    # CLIP_benchmark's spelling and `run` ask the same question; another split another one
    assert _ok(_cli(store, "get", "result", *common, "--val_split", "val"))["id"] == got["id"]
    assert _ok(_cli(store, "run", "linear_probe", "-b", CLIP, *data, "--train-batch-size", "16",
                    "--json", "--val-split", "val"))["id"] == got["id"]
    other = _ok(_cli(store, "get", "result", *common, "--val-split", "val2"))
    none = _ok(_cli(store, "get", "result", *common))
    assert len({got["id"], other["id"], none["id"]}) == 3
    heads = {json.dumps(r["record"]["inputs"].get("head")) for r in (got, other, none)}
    assert len(heads) == 3
    assert "val" not in none["record"]["data"]
    assert "val_manifest" not in none["record"]["inputs"]
    assert not any("searched on the evaluated" in w for w in got["record"].get("warnings", []))
    tuned = _ok(_cli(store, "get", "result", *common, "--val-split", "test"))
    assert any("searched on the evaluated samples" in w for w in tuned["record"]["warnings"])


@pytest.mark.parametrize(("extra", "says"), [
    (["-t", "linear_probe", "--val-split", "val", "-p", "val_proportion=0.2"],
     "--val-split and -p val_proportion both name the samples"),
    (["-t", "linear_probe", "--val-split", "nope"], "nope"),
    (["-t", "knn", "--val-split", "val"], "task 'knn' takes no validation split (--val-split)"),
])
def test_val_split_refusals(splits, tmp_path, extra, says):
    store = tmp_path / "s"
    backbone = CLIP if "linear_probe" in extra else "test_vit"
    out = _cli(store, "get", "result", "-b", backbone, *(["--weights", "random"]
                                                        if backbone == "test_vit" else []),
               "-d", str(splits), "--split", "test", "--train-data", str(splits),
               "--train-split", "train", *extra)
    assert out.exit_code == 2, out.output
    assert says in out.output
    assert len([line for line in out.output.splitlines() if line.strip()]) <= 2, out.output
    assert "Traceback" not in out.output
    listed = _cli(store, "ls", "results", "--json")
    assert listed.exit_code != 0 or json.loads(listed.stdout) == []


def test_val_split_needs_training_data(splits, tmp_path):
    out = _cli(tmp_path / "s", "get", "result", "-b", CLIP, "-t", "linear_probe",
               "-d", str(splits), "--split", "test", "--val-split", "val")
    assert out.exit_code == 2, out.output
    assert "--val-split names a split of --train-data" in out.output
