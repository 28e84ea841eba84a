"""``get result``'s text is rendered from the result's record: the record and its stored
document (what the cached answer prints, through ``StoredResult``) give the same lines."""

from __future__ import annotations

import pytest

from vbstore.cli._resulttext import StoredResult, result_lines
from vbstore.records import ResultRecord

A, B = "a" * 64, "b" * 64
STAT = {"mean": 0.5, "std": 0.01, "n": 3, "ci_low": 0.48, "ci_high": 0.52}
CI = {"ci_low": 0.7, "ci_high": 0.8, "std": 0.02, "n_boot": 10, "confidence": 0.95,
      "method": "percentile"}
FULL = {
    "kind": "result", "task": "knn", "op_version": 1, "params": {"k": 5}, "seed": 0,
    "seeds": [0, 1, 2], "inputs": {"backbone": A, "eval_manifest": B},
    "backbone": {"spec": "test_vit", "source": "test", "architecture": "vit"},
    "weights_kind": "random", "metrics": {"top1": 0.5, "top5": 0.9, "classes_scored": 4.0},
    "aggregate": {"top1": STAT}, "sample_ci": {"top5": CI},
    "baseline": {"predictor": "the majority class", "headline": "top1", "value": 0.25,
                 "margin": 0.25, "beaten": True, "metrics": {"top1": 0.25}},
    "train_metrics": {"loss": 0.1, "acc": 0.9}, "train_aggregate": {"loss": STAT},
    "finetune": {"blocks": 2, "backbone_lr": 1e-5}, "warnings": ["few samples"],
    "comparable": False, "sample_ci_skipped": "dense", "weird_future_field": {"x": 1},
}
OLD = {  # stored under retrieval's old metric name
    "kind": "result", "task": "retrieval", "op_version": 1, "params": {}, "inputs": {},
    "metrics": {"mean_average_precision": 0.75, "recall@1": 0.9},
    "aggregate": {"mean_average_precision": STAT}, "sample_ci": {"mean_average_precision": CI},
    "baseline": {"predictor": "random features", "headline": "mean_average_precision",
                 "value": 0.5, "margin": 0.25, "beaten": True},
}
BARE = {"kind": "result", "task": "knn", "op_version": 1, "metrics": {"top1": 0.5},
        "params": {}, "inputs": {}, "weights_kind": None,
        "baseline": {"skipped": "no constant predictor"}}


@pytest.mark.parametrize("doc", [FULL, OLD, BARE], ids=["full", "renamed", "bare"])
def test_the_record_and_its_stored_document_print_the_same(doc):
    order = ["mAP", "recall@1", "top1", "top5"]
    for kwargs in ({}, {"from_cache": False, "reused_features": True,
                        "reproduced": {"max_abs_diff": 0.0}}):
        typed = result_lines(ResultRecord.from_dict(doc), A, "computed", 0.5, order, **kwargs)
        stored = result_lines(doc, A, "computed", 0.5, order, **kwargs)
        assert typed == stored


def test_every_field_is_printed_under_its_current_name():
    text = "\n".join(line for _, line in result_lines(OLD, A, "cached", 0.5, ["mAP"]))
    assert "mean_average_precision" not in text
    assert "mAP" in text
    assert "0.5000 ± 0.0100  over 3 seeds" in text
    assert "baseline 0.5000 (random features), margin +0.2500" in text
    full = result_lines(FULL, A, "computed", 0.5, ["top1"])
    assert full[0] == (False, f"knn on test_vit (random weights): computed in 0.50 s  [{A[:12]}]")
    assert (True, "  warning: a mismatched head was applied; comparable with nothing") in full
    assert (False, "  no CI over eval samples: dense") in full


def test_a_stored_document_reads_as_its_record():
    for doc in (FULL, OLD, BARE):
        stored, typed = StoredResult(doc), ResultRecord.from_dict(doc)
        for name in ("task", "metrics", "aggregate", "sample_ci", "baseline", "finetune",
                     "weights_kind", "warnings", "comparable", "spec", "train_metrics",
                     "train_aggregate", "sample_ci_skipped"):
            assert getattr(stored, name) == getattr(typed, name), name
