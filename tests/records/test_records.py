"""One typed record per JSON artifact kind: each round-trips its document, and a fixed record's
canonical bytes are pinned (golden), so a field renamed or dropped on the way out is caught."""

from __future__ import annotations

import json
from pathlib import Path

import blake3
import pytest

from vbstore import canonical, records
from vbstore.store import validate

H = {c: c * 64 for c in "abcdef"}
COMPAT = {"backbone": H["a"], "weights": H["b"], "extractor_key": H["c"], "pooling": "gap",
          "layers": [-1], "feature_mode": "pooled", "embed_dim": 8, "task": "classification",
          "task_op_version": 2, "input_size": 32, "params": {"epochs": 1}, "seed": 0,
          "class_names": ["a", "b"], "train_manifest": H["d"], "train_metrics": {"train_top1": 1.0}}

# kind -> a document vbstore writes (explicit nulls and an unknown field included where the
# schema lets them be), and the BLAKE3 of its canonical bytes
DOCS = {
    "weights": ({"kind": "weights", "tensor_hash": H["a"], "origin": "random", "upstream": None,
                 "revision": None, "path": None, "seed": 3, "tensors": None},
                "afa1c39e95c54eff4f15da819e688b775cd44e67b966522f1321e49d678eff87"),
    "backbone": ({"kind": "backbone", "source": "timm", "architecture": "test_vit",
                  "weights": H["a"], "revision": None,
                  "preprocessing": {"input_size": 32, "mean": [0.5], "std": [0.5]},
                  "geometry": {"patch_size": 16}},
        "5122be71840f1a64caa75f39a370acc69c68d0853576ba4eaf4b629a55073823"),
    "manifest": ({"kind": "manifest", "layout": "image_folder", "split": "val",
                  "classes": ["a", "b"], "target_type": "class", "limit": None,
                  "samples": [{"name": "a/1.png", "image": H["a"], "label": 0}],
                  "digest": H["b"], "source": {"kind": "folder"}},
        "41b7faddfa1c87f8183967917bbcdc67cbe5e06a9d5e7494aa62e6ff09ef2212"),
    "featureset": ({"kind": "featureset", "extractor": {"layers": [-1]}, "extractor_key": H["a"],
                    "manifest": H["b"], "backbone": H["c"], "packs": [H["d"]],
                    "rows": [[0, 0], [0, 1]]},
        "9e4f4c14f6e1e7f1c0cf96a89bc18cfc5bf8d39b5aa3e48c41af4e17f3e754fb"),
    "result": ({"kind": "result", "task": "knn", "op_version": 3, "level": "high",
                "metrics": {"top1": 0.5, "top5": 1.0}, "params": {"k": 20}, "seed": 0,
                "seeds": [0], "inputs": {"backbone": H["a"], "eval_manifest": H["b"]},
                "backbone": {"spec": "test_vit", "source": "timm", "architecture": "test_vit"},
                "weights_kind": "random", "extractor": {"input_size": 32},
                "data": {"eval": {"manifest": H["b"], "split": "val", "samples": 2}},
                "versions": {"vbstore": "0.1.0"}, "comparable": True},
        "2cd687865fb8ce17cf4627c34bbd4726ce6cf3570f67b7ace795a86b8e0d9ed0"),
    "suite": ({"kind": "suite", "slug": "demo", "version": 1, "name": "Demo",
               "visibility": "public",
               "protocol": {"task": "knn", "data": {"kind": "external"},
                            "conditions": [{"name": "val", "sampleCount": 2}],
                            "metrics": [{"key": "top1", "headline": True}]}},
        "153c75162999653ee5fe27a1393ad80d92903ac1521c7f5700246e64d441bca2"),
    "evaluation": ({"kind": "evaluation", "suite": "demo@1", "suite_id": H["a"],
                    "protocol_digest": H["b"],
                    "checkpoint": {"id": "test_vit", "label": "test_vit", "weights": "random"},
                    "results": {"val": {"top1": {"value": 0.5}}}, "sample_counts": {"val": 2},
                    "data": None, "protocol": None, "evaluator": {"package": "vbstore"},
                    "comparable": True, "sources": {"val": H["c"]}, "evidence": "observed",
                    "missing": [], "verdict": {"state": "eligible", "reasons": [],
                                               "ranked": True, "scores": {"score": 0.5}}},
        "b50ea4a987f9a052a05234c73da545312d73700d0a590677aa7abb0cdbeb79ea"),
    "head.compat": (COMPAT,
        "275d74a781bab7caf420d8078d0d7dfa8b6395b24fcde78f0de59317916c832d"),
    "pack.metadata": ({"vbstore.kind": "pack", "format": "vbstore.pack.v1", "extractor": H["a"],
                       "layers": "[-1,4]", "images": json.dumps([H["b"], H["c"]],
                                                                 separators=(",", ":"))},
        "e2dbd8afaa643edc00f318f7019d492c6a76612355a96122a10c9a77227483f5"),
    "head.metadata": ({"vbstore.kind": "head", "format": "vbstore.head.v1",
                       "vbstore.compat": canonical.dumps(COMPAT).decode()},
        "15ace5d11962b3c9f5c9d909b68c1c4f83ce5bda1314029a642a4ad55310d840"),
}

def test_every_schema_has_a_record():
    kinds = {p.name.removesuffix(".schema.json")
             for p in (Path(__file__).parents[2] / "schemas").glob("*.schema.json")}
    assert kinds == set(records.RECORDS) == set(DOCS)


@pytest.mark.parametrize("kind", sorted(DOCS))
def test_a_record_round_trips_its_document_and_its_bytes_are_pinned(kind):
    doc, golden = DOCS[kind]
    validate(kind, doc)
    record_type = getattr(records, records.RECORDS[kind])
    record = record_type.from_dict(doc)
    out = record.to_dict()
    assert out == doc
    again = record_type.from_dict(out)
    assert again == record
    data = canonical.dumps(out)
    assert blake3.blake3(data).hexdigest() == golden, data


def test_typed_fields_read_what_the_document_says():
    weights = records.WeightsRecord.from_dict(DOCS["weights"][0])
    assert (weights.origin, weights.seed, weights.upstream) == ("random", 3, None)
    backbone = records.BackboneRecord.from_dict(DOCS["backbone"][0])
    assert backbone.name == "timm:test_vit"
    assert backbone.preprocessing["input_size"] == 32
    manifest = records.ManifestRecord.from_dict(DOCS["manifest"][0])
    assert (len(manifest), manifest.class_names, manifest.extra["source"]) == (
        1, ["a", "b"], {"kind": "folder"})
    suite = records.SuiteRecord.from_dict(DOCS["suite"][0])
    assert suite.ref == "demo@1"
    evaluation = records.EvaluationRecord.from_dict(DOCS["evaluation"][0])
    assert (evaluation.state, evaluation.ranked, evaluation.reasons) == ("eligible", True, [])
    pack = records.PackMetadata.from_dict(DOCS["pack.metadata"][0])
    assert (pack.layers, pack.images) == ([-1, 4], [H["b"], H["c"]])
    head = records.HeadMetadata.from_dict(DOCS["head.metadata"][0])
    assert head.compat == records.HeadCompat.from_dict(COMPAT)


def test_a_missing_required_field_is_named():
    from vbstore.errors import SchemaError

    doc = dict(DOCS["featureset"][0])
    del doc["rows"]
    with pytest.raises(SchemaError, match="rows"):
        records.FeaturesetRecord.from_dict(doc)
    with pytest.raises(SchemaError, match="images"):
        records.PackMetadata.from_dict({"format": "vbstore.pack.v1", "extractor": H["a"],
                                        "layers": "[-1]"})


# A result of schema_version 2: the fields a VisBench record carries beside vbstore's own (no
# timestamp: the document is hashed; when it ran is the registry's run log).
RESULT_V2 = {"kind": "result", "task": "depth", "op_version": 2, "level": "mid",
             "metrics": {"d1": 0.5, "abs_rel": 0.25}, "params": {"epochs": 10}, "seed": 0,
             "seeds": [0], "inputs": {"backbone": H["a"], "eval_manifest": H["b"]},
             "protocol": "probe3d", "schema_version": 2, "dataset": "scenes",
             "dataset_params": {"per_split": "6", "size": "32", "target": "depth"},
             "pooling_requested": "default", "notes": "a rerun at 32 px"}


def test_a_result_with_visbenchs_fields_round_trips_and_its_bytes_are_pinned():
    validate("result", RESULT_V2)
    record = records.ResultRecord.from_dict(RESULT_V2)
    assert (record.schema_version, record.dataset, record.pooling_requested, record.notes) == (
        records.RESULT_SCHEMA_VERSION, "scenes", "default", "a rerun at 32 px")
    assert record.dataset_params["per_split"] == "6"
    assert set(record.extra) == {"kind"}  # every other field typed
    assert record.to_dict() == RESULT_V2
    assert blake3.blake3(canonical.dumps(RESULT_V2)).hexdigest() == (
        "229505c1922a2fb25a17e928be6532f5c17d1f446e84586cf277b3d4ba58a0be")
    for bad in ({"schema_version": "2"}, {"dataset_params": []}, {"notes": 3}):
        with pytest.raises(Exception, match=r"schema|valid"):
            validate("result", {**RESULT_V2, **bad})
