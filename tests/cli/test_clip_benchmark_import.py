"""CLIP_benchmark files round-trip: what `export results --format clip-benchmark` writes,
`import results` reads back as the same weights, or refuses; it never relabels them pretrained."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from vbstore import Store
from vbstore.cli import cli
from vbstore.errors import UnidentifiedWeights
from vbstore.interop import (
    IDENTITY_FIELD,
    WeightsIdentity,
    clip_benchmark_identity,
    clip_benchmark_record,
)
from vbstore.records import ResultRecord, WeightsRecord
from vbstore.suites import from_results, get_suite

SUITE = {
    "slug": "cb-knn",
    "version": 1,
    "name": "kNN on shapes",
    "protocol": {
        "task": "knn",
        "data": {"kind": "external"},
        "conditions": [{"name": "shapes", "sampleCount": 15}],
        "metrics": [{"key": "top1", "headline": True}],
        "weights": "random",
    },
}


@pytest.fixture(scope="module")
def shapes(shapes_folder):
    return shapes_folder(3, 1)


@pytest.fixture
def run(tmp_path):
    runner = CliRunner()
    return lambda store, *args: runner.invoke(cli, ["--store", str(tmp_path / store), *args])


def _push_suite(run, store, tmp_path):
    (tmp_path / "suite.json").write_text(json.dumps(SUITE))
    out = run(store, "suite", "push", str(tmp_path / "suite.json"))
    assert out.exit_code == 0, out.output


def _compute(run, shapes, *backbone):
    out = run("s", "get", "result", "-b", *backbone, "--input-size", "32", "-t", "knn", "-p",
              "k=3", "-d", shapes, "--split", "val", "--train-data", shapes, "--train-split",
              "train", "--json")
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)["id"]


def _export(run, tmp_path, result_id):
    folder = tmp_path / f"cb-{result_id[:8]}"
    out = run("s", "export", "results", "--format", "clip-benchmark", "-o", str(folder), "--json")
    assert out.exit_code == 0, out.output
    (entry,) = [e for e in json.loads(out.stdout) if e["id"] == result_id]
    return folder / entry["file"]


def _import(run, file, *extra):
    return run("fresh", "import", "results", str(file), "--suite", "cb-knn@1", "--condition",
               "shapes", "--json", *extra)


def _original(tmp_path, result_id):
    """The original result's typed identity, and the checkpoint its evaluation names."""
    with Store(tmp_path / "s") as store:
        record = ResultRecord.from_dict(store.read_json(result_id))
        weights = WeightsRecord.from_dict(store.read_json(record.inputs["weights"]))
        checkpoint = from_results(store, get_suite(store, "cb-knn@1"), {"shapes": result_id})
        return WeightsIdentity.of(record, weights), checkpoint["checkpoint"]


def _snapshot(tmp_path, name="fresh"):
    with Store(tmp_path / name) as store:
        return (sorted(o.id for o in store.ls()),
                store.db.query("SELECT id, checkpoint, weights FROM evaluations ORDER BY id"))


@pytest.fixture
def checkpoint_file(tmp_path):
    from safetensors.torch import save_file

    from vbstore.backbones import build_backbone

    model = build_backbone("test_vit", weights="random", seed=5, input_size=32).module
    path = tmp_path / "tuned.safetensors"
    save_file({k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
              str(path))
    return path


@pytest.mark.parametrize(("backbone", "kind", "label"), [
    (("test_vit", "--weights", "random", "--backbone-seed", "3"), "random", "test_vit seed=3"),
    (("test_pixels",), "fixed", "test_pixels"),
    (("test_vit", "--weights", "CHECKPOINT"), "checkpoint", "test_vit"),
], ids=["random-seed", "fixed", "checkpoint"])
def test_export_then_import_names_the_same_weights(run, shapes, tmp_path, checkpoint_file,
                                                   backbone, kind, label):
    _push_suite(run, "s", tmp_path)
    _push_suite(run, "fresh", tmp_path)
    backbone = tuple(str(checkpoint_file) if a == "CHECKPOINT" else a for a in backbone)
    result_id = _compute(run, shapes, *backbone)
    file = _export(run, tmp_path, result_id)
    identity, observed = _original(tmp_path, result_id)
    assert (identity.weights, observed["label"]) == (kind, label)
    row = json.loads(file.read_text())
    assert clip_benchmark_identity(row, file.name) == identity  # the typed identity, exactly
    assert row["pretrained"] == {"random": "random-seed3", "fixed": "fixed",
                                 "checkpoint": f"checkpoint-{identity.tensor_hash[:12]}"}[kind]
    out = _import(run, file)
    assert out.exit_code == 0, out.output
    (imported,) = json.loads(out.stdout)
    assert imported["checkpoint"] == observed == identity.checkpoint()
    assert imported["checkpoint"]["id"] == identity.tensor_hash  # the weights, not a name


@pytest.mark.parametrize(("spec", "model", "tag"), [
    ("open_clip:ViT-B-32-quickgelu@laion400m_e32", "ViT-B-32-quickgelu", "laion400m_e32"),
    ("clip_vitb16", "ViT-B-16-quickgelu", "openai"),  # a bare name: exported as its pinned spec
    ("resnet18", "timm:resnet18", "a1_in1k"),
])
def test_pretrained_weights_round_trip_with_their_tensor_hash(spec, model, tag):
    record = {"task": "zeroshot_classification", "weights_kind": "pretrained",
              "backbone": {"spec": spec},
              "metrics": {"acc1": 0.5}, "params": {}, "data": {"eval": {"manifest": "ab" * 32}}}
    weights = WeightsRecord.from_dict({"tensor_hash": "cd" * 32, "origin": "pretrained",
                                       "seed": None, "upstream": None, "revision": None,
                                       "path": None})
    record = ResultRecord.from_dict({"op_version": 1, "inputs": {}, **record})
    row = clip_benchmark_record(record, None, weights)
    assert (row["model"], row["pretrained"]) == (model, tag)
    identity = WeightsIdentity.of(record, weights)
    assert clip_benchmark_identity(json.loads(json.dumps(row)), "row") == identity
    assert identity.checkpoint() == {"id": "cd" * 32, "weights": "pretrained", "label": spec}
    # the same run as CLIP_benchmark itself writes it: its open_clip name, as before
    del row[IDENTITY_FIELD]
    if spec.startswith("open_clip:"):
        upstream = clip_benchmark_identity(row, "row")
        assert upstream.checkpoint() == {"id": spec, "label": spec, "weights": "pretrained"}
    elif model.startswith("timm:"):  # no open_clip model: the field was all that named it
        with pytest.raises(UnidentifiedWeights):
            clip_benchmark_identity(row, "row")


def test_without_its_weights_record_an_export_names_no_weights_and_import_refuses_it():
    record = {"task": "knn", "weights_kind": "random", "backbone": {"spec": "test_vit"},
              "metrics": {"top1": 0.5}, "params": {}, "data": {"eval": {"manifest": "ab" * 32}}}
    bare = clip_benchmark_record(ResultRecord.from_dict({"op_version": 1, "inputs": {}, **record}))
    assert IDENTITY_FIELD not in bare
    assert bare["pretrained"] == "random"
    with pytest.raises(UnidentifiedWeights, match="test_vit is a vbstore backbone"):
        clip_benchmark_identity(bare, "row")


ROW = {"dataset": "shapes", "task": "knn", "metrics": {"top1": 0.5}, "language": "en"}
FIELD = {"spec": "test_vit", "weights": "random", "seed": 3, "tensor_hash": "ef" * 32}


@pytest.mark.parametrize(("row", "why"), [
    ({"model": "test_vit", "pretrained": "random"}, "test_vit is a vbstore backbone"),
    ({"model": "timm:resnet18", "pretrained": "a1_in1k"}, "timm:resnet18 is a vbstore backbone"),
    ({"model": "ViT-B-32", "pretrained": "random-seed3"}, "vbstore's mark"),
    ({"model": "ViT-B-32", "pretrained": "checkpoint"}, "vbstore's mark"),
    ({"model": "ViT-B-32", "pretrained": "/runs/epoch_32.pt"}, "is not an open_clip tag"),
    ({"model": "ViT-B-32", "pretrained": ""}, "is not an open_clip tag"),
    ({"model": "ViT-B-32", "pretrained": None}, "missing or not text"),
    ({"model": "test_vit", "pretrained": "laion400m_e32", IDENTITY_FIELD: FIELD},
     "contradict its 'vbstore' field"),
    ({"model": "test_vit", "pretrained": "random-seed3",
      IDENTITY_FIELD: {**FIELD, "seed": None}}, "random weights without their integer seed"),
    ({"model": "test_vit", "pretrained": "random-seed3",
      IDENTITY_FIELD: {**FIELD, "tensor_hash": "ef"}}, "no 64-hex tensor_hash"),
], ids=["old-export", "timm", "random-mark", "checkpoint-mark", "path", "empty", "null",
        "edited", "no-seed", "no-hash"])
def test_a_row_that_does_not_say_its_weights_is_refused(run, tmp_path, row, why):
    _push_suite(run, "fresh", tmp_path)
    good = {**ROW, "model": "ViT-B-32", "pretrained": "openai"}
    file = tmp_path / "cb.json"
    file.write_text(json.dumps([good, {**ROW, **row}]))  # the good row is not stored either
    before = _snapshot(tmp_path)
    out = run("fresh", "import", "results", str(file), "--suite", "cb-knn@1", "--condition",
              "shapes")
    assert out.exit_code == 2 == UnidentifiedWeights.exit_code
    (line,) = out.output.strip().splitlines()
    assert line.startswith("error: cb.json[1]: cannot tell which weights made these numbers")
    assert why in line
    error = json.loads(_import(run, file).stdout)
    assert error["type"] == "UnidentifiedWeights"
    assert _snapshot(tmp_path) == before


def test_a_checkpoint_path_imports_only_when_vouched_for(run, tmp_path):
    _push_suite(run, "fresh", tmp_path)
    file = tmp_path / "cb.json"
    file.write_text(json.dumps({**ROW, "model": "ViT-B-32", "pretrained": "/runs/epoch_32.pt"}))
    assert _import(run, file).exit_code == 2
    out = _import(run, file, "--weights", "checkpoint")
    assert out.exit_code == 0, out.output
    (imported,) = json.loads(out.stdout)
    assert imported["checkpoint"]["weights"] == "checkpoint"
    assert imported["sources"]["shapes"]["vouched"] == ["weights"]


def test_a_vouch_cannot_contradict_the_file(run, tmp_path):
    _push_suite(run, "fresh", tmp_path)
    file = tmp_path / "cb.json"
    file.write_text(json.dumps({**ROW, "model": "test_vit", "pretrained": "random-seed3",
                                IDENTITY_FIELD: FIELD}))
    before = _snapshot(tmp_path)
    out = _import(run, file, "--weights", "pretrained")
    assert out.exit_code == 2
    assert json.loads(out.stdout)["type"] == "UsageError"
    assert "says its weights are random, not pretrained" in json.loads(out.stdout)["error"]
    assert _snapshot(tmp_path) == before
    out = _import(run, file, "--weights", "random")  # agreeing with the file vouches for nothing
    assert out.exit_code == 0, out.output
    (imported,) = json.loads(out.stdout)
    assert imported["checkpoint"] == {"id": "ef" * 32, "label": "test_vit seed=3",
                                      "weights": "random"}
    assert "vouched" not in imported["sources"]["shapes"]


def test_an_export_from_a_plugin_this_vbstore_lacks_still_reads_back():
    field = {"spec": "mysource:arch@tag", "weights": "pretrained", "seed": None,
             "tensor_hash": "12" * 32}
    row = {**ROW, "model": "mysource:arch", "pretrained": "tag", IDENTITY_FIELD: field}
    assert clip_benchmark_identity(row, "row") == WeightsIdentity("mysource:arch@tag",
                                                                  "pretrained", "12" * 32)
    with pytest.raises(UnidentifiedWeights, match="contradict"):
        clip_benchmark_identity({**row, "pretrained": "openai"}, "row")
